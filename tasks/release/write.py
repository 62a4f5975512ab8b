"""Write an immutable, deterministic release folder (SPEC §6).

`write_release` validates every row against `schemas.release.TABLE_SCHEMAS`, sorts rows by the table
keys (ties by row hash), writes the parquet files with fixed writer options, the dataset card and
manifest.json into a temporary folder beside the target and renames it into place. The same input
gives byte-identical files; an existing version is returned untouched when its content is identical
and refused otherwise. A new version whose tables equal those of the previous version of the release
is refused too (nothing changed), unless `allow_identical`.
"""

from __future__ import annotations

import hashlib
import json
import numbers
import os
import shutil
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, date, datetime
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import ValidationError

from schemas.release import (
    NAME,
    RELEASE_SCHEMA_VERSION,
    REQUIRED_TABLES,
    SEMVER,
    SNAPSHOT_DATES,
    TABLE_KEYS,
    TABLE_SCHEMAS,
    UNIQUE_KEY_TABLES,
    ReleaseManifest,
    TableEntry,
    schema_fingerprint,
    snapshot_date,
)
from tasks.discover import latest_version
from tasks.errors import FrameInputError
from tasks.locks import release_lock
from tasks.release.verify import check_integrity, duplicate_keys, release_files, sha256_file

TableInput = pa.Table | list[dict[str, Any]]
CardInput = str | Callable[[ReleaseManifest], str]

# Fixed writer options: with the pyarrow version pinned, equal tables give equal bytes.
PARQUET_OPTIONS: dict[str, Any] = {
    "compression": "zstd",
    "compression_level": 9,
    "use_dictionary": True,
    "write_statistics": True,
    "version": "2.6",
    "data_page_version": "1.0",
    "data_page_size": 1 << 20,
    "row_group_size": 65536,
    "store_schema": True,
    "write_page_index": False,
}
MANIFEST_COMPUTED = ("tables", "files", "writer", "schema_version")


class ReleaseExistsError(FrameInputError):
    """The release version already exists with other content: releases are immutable."""


class IdenticalReleaseError(FrameInputError):
    """The new version's tables equal the previous version's: nothing changed, so nothing is written."""


# ---------------------------------------------------------------- validation and casting


def _value_fits(v: Any, t: pa.DataType) -> bool:
    """Strict Python-side type check (pyarrow alone would truncate 5.5 to int or split a str into a list)."""
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return isinstance(v, str)
    if pa.types.is_boolean(t):
        return isinstance(v, bool | np.bool_)
    if pa.types.is_integer(t):
        return isinstance(v, numbers.Integral) and not isinstance(v, bool | np.bool_)
    if pa.types.is_floating(t):
        return isinstance(v, numbers.Real) and not isinstance(v, bool | np.bool_)
    if pa.types.is_date(t):  # pyarrow alone would take an int as days, or cut a datetime to its day
        return isinstance(v, date) and not isinstance(v, datetime)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        if not isinstance(v, list | tuple | np.ndarray):
            return False
        return all(_item_fits(x, t.value_field) for x in v)
    if pa.types.is_struct(t):  # pyarrow alone would drop unknown keys
        if not isinstance(v, Mapping) or not set(v) <= {f.name for f in t}:
            return False
        return all(_item_fits(v.get(f.name), f) for f in t)
    return True


def _item_fits(v: Any, f: pa.Field) -> bool:
    return (v is None and f.nullable) or (v is not None and _value_fits(v, f.type))


def _castable(src: pa.DataType, dst: pa.DataType) -> bool:
    if src.equals(dst) or pa.types.is_null(src):
        return True
    if pa.types.is_dictionary(src):
        return _castable(src.value_type, dst)
    if pa.types.is_integer(dst):
        return pa.types.is_integer(src)
    if pa.types.is_floating(dst):
        return pa.types.is_integer(src) or pa.types.is_floating(src)
    if pa.types.is_string(dst):
        return pa.types.is_string(src) or pa.types.is_large_string(src) or pa.types.is_string_view(src)
    if pa.types.is_list(dst):
        return (pa.types.is_list(src) or pa.types.is_large_list(src)) and _castable(
            src.value_type, dst.value_type
        )
    return False


def _strict(t: pa.DataType) -> bool:
    """Types whose values are checked one by one in Python (pyarrow's conversion is lenient there)."""
    return pa.types.is_date(t) or pa.types.is_struct(t) or (pa.types.is_list(t) and _strict(t.value_type))


def _bad(table: str, column: str, problem: str) -> FrameInputError:
    return FrameInputError(f"release table {table!r}", f"column {column!r}: {problem}")


def _silently_coerced(values: list[Any], t: pa.DataType) -> bool:
    """Values pyarrow accepts but changes: 5.5 into an int (truncated), True into a float, a str into
    a list (split into characters), bytes into a str."""
    if pa.types.is_integer(t):
        return any(isinstance(v, float) for v in values)
    if pa.types.is_floating(t):
        return any(isinstance(v, bool | np.bool_) for v in values)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return any(isinstance(v, str | bytes) for v in values)
    if pa.types.is_string(t):
        return any(isinstance(v, bytes) for v in values)
    return False


def _first_misfit(values: list[Any], t: pa.DataType) -> int | None:
    for i, v in enumerate(values):
        if v is None:
            continue
        if not _value_fits(v, t):
            return i
        try:
            pa.array([v], type=t)
        except (pa.ArrowException, OverflowError, TypeError, ValueError):
            return i
    return None


def _column(name: str, f: pa.Field, values: list[Any]) -> pa.Array:
    """One column of row values as an array of the field's type; FrameInputError naming the first
    value that does not fit."""
    try:
        arr = pa.array(values, type=f.type)
        error = "" if not _silently_coerced(values, f.type) else "coerced"
        if not error and _strict(f.type) and not all(v is None or _value_fits(v, f.type) for v in values):
            error = "coerced"
    except (pa.ArrowException, OverflowError, TypeError, ValueError) as e:
        arr, error = None, str(e)[:200]
    if error:
        i = _first_misfit(values, f.type)
        if i is None:
            raise _bad(name, f.name, f"does not fit {f.type}: {error}")
        v = values[i]
        raise _bad(name, f.name, f"row {i}: {type(v).__name__} value {str(v)[:60]!r} does not fit {f.type}")
    if not f.nullable and arr.null_count:
        i = next(i for i, v in enumerate(values) if v is None)
        raise _bad(name, f.name, f"row {i}: missing or null, but required")
    if (pa.types.is_list(f.type) and not f.type.value_field.nullable) and pc.list_flatten(arr).null_count:
        raise _bad(name, f.name, "null list items")
    return arr


def _from_rows(name: str, rows: Iterable[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    rows = list(rows)
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise FrameInputError(f"release table {name!r}", f"row {i} is a {type(row).__name__}, not a dict")
    extra = set().union(*(r.keys() for r in rows)) - set(schema.names) if rows else set()
    if extra:
        col = sorted(map(str, extra))[0]
        i = next(i for i, r in enumerate(rows) if col in map(str, r.keys()))
        raise _bad(name, col, f"row {i}: not a column of {name} (columns: {', '.join(schema.names)})")
    arrays = [_column(name, f, [r.get(f.name) for r in rows]) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def _from_table(name: str, table: pa.Table, schema: pa.Schema) -> pa.Table:
    found = set(table.column_names)
    for extra in [c for c in table.column_names if c not in schema.names]:
        raise _bad(name, extra, f"not a column of {name} (columns: {', '.join(schema.names)})")
    derived = SNAPSHOT_DATES.get(name, {})
    arrays = []
    for f in schema:
        if f.name not in found:
            if f.name in derived:  # filled in by _with_snapshot_dates
                arrays.append(pa.nulls(table.num_rows, f.type))
                continue
            raise _bad(name, f.name, "missing")
        col = table.column(f.name)
        if not col.type.equals(f.type) and _strict(f.type):
            # nested and date values (e.g. a DataFrame's dicts) are checked one by one, as rows are
            arrays.append(_column(name, f, col.to_pylist()))
            continue
        if not _castable(col.type, f.type):
            raise _bad(name, f.name, f"has type {col.type}, expected {f.type}")
        try:
            col = col.cast(f.type, safe=True)
        except (pa.ArrowException, ValueError) as e:
            raise _bad(name, f.name, f"does not fit {f.type}: {str(e)[:200]}") from e
        if not f.nullable and col.null_count:
            raise _bad(name, f.name, f"{col.null_count} null values, but required")
        if pa.types.is_list(f.type) and not f.type.value_field.nullable:
            if pc.list_flatten(col).null_count:
                raise _bad(name, f.name, "null list items")
        arrays.append(col)
    return pa.Table.from_arrays(arrays, schema=schema)


def _with_snapshot_dates(name: str, table: pa.Table) -> pa.Table:
    """The snapshot date columns computed from their snapshot columns; a value given must agree."""
    for date_col, snap_col in SNAPSHOT_DATES.get(name, {}).items():
        given = table.column(date_col).to_pylist()
        dates = [snapshot_date(s) for s in table.column(snap_col).to_pylist()]
        for i, (g, d) in enumerate(zip(given, dates, strict=True)):
            if g is not None and g != d:
                what = f"the date of {snap_col} {table.column(snap_col)[i].as_py()!r} is {d}"
                raise _bad(name, date_col, f"row {i}: {g} given, but {what}")
        i = table.schema.get_field_index(date_col)
        table = table.set_column(i, table.schema.field(i), pa.array(dates, pa.date32()))
    return table


def row_digests(table: pa.Table) -> list[str]:
    """sha256 of each row's values (in column order) as canonical JSON."""
    out: list[str] = []
    names = table.column_names
    for batch in table.to_batches():
        for row in batch.to_pylist():
            data = json.dumps([row[n] for n in names], ensure_ascii=False, separators=(",", ":"), default=str)
            out.append(hashlib.sha256(data.encode()).hexdigest())
    return out


def sort_table(name: str, table: pa.Table) -> pa.Table:
    """Rows ordered by the table's key columns, then by every other non-nested column, then (tables
    whose keys may repeat and that have nested columns: facts) by row hash: the order, hence the bytes,
    do not depend on the input order."""
    keys = list(TABLE_KEYS[name])
    rest = [f.name for f in table.schema if f.name not in keys and not pa.types.is_nested(f.type)]
    sortable = table
    sort_keys = keys + rest
    if name not in UNIQUE_KEY_TABLES and any(pa.types.is_nested(f.type) for f in table.schema):
        sortable = table.append_column("__row_hash", pa.array(row_digests(table), pa.string()))
        sort_keys.append("__row_hash")
    idx = pc.sort_indices(sortable, sort_keys=[(k, "ascending") for k in sort_keys])  # nulls last
    return table.take(idx).combine_chunks()


def prepare_table(name: str, data: Any) -> pa.Table:
    """Validate and cast one table to its release schema, check key uniqueness, sort its rows."""
    schema = TABLE_SCHEMAS.get(name)
    if schema is None:
        raise FrameInputError(f"release table {name!r}", f"unknown table (known: {', '.join(TABLE_SCHEMAS)})")
    if isinstance(data, pa.Table):
        table = _from_table(name, data, schema)
    elif hasattr(data, "to_dict") and hasattr(data, "columns"):  # a pandas DataFrame
        table = _from_table(name, pa.Table.from_pandas(data, preserve_index=False), schema)
    elif isinstance(data, list | tuple):
        table = _from_rows(name, data, schema)
    else:
        raise FrameInputError(
            f"release table {name!r}", f"expected a pyarrow Table or a list of dicts, got {type(data)}"
        )
    table = _with_snapshot_dates(name, table)
    if name in UNIQUE_KEY_TABLES:
        dups = duplicate_keys(name, table)
        if dups:
            keys = "+".join(TABLE_KEYS[name])
            raise FrameInputError(
                f"release table {name!r}", f"{len(dups)} duplicate {keys} keys, e.g. {dups[0]!r}"
            )
    return sort_table(name, table)


def prepare_tables(tables: Mapping[str, Any]) -> dict[str, pa.Table]:
    """All tables validated, sorted and checked against each other (instances -> reports, G)."""
    missing = [n for n in REQUIRED_TABLES if n not in tables]
    if missing:
        raise FrameInputError("release tables", f"missing required tables {missing}")
    prepared = {name: prepare_table(name, data) for name, data in sorted(tables.items())}
    problems = check_integrity(prepared)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise FrameInputError("release tables", problems[0] + more)
    return prepared


# ---------------------------------------------------------------- writing


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_bytes(path: Path, data: bytes) -> None:
    with path.open("wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def write_parquet(table: pa.Table, path: Path) -> None:
    pq.write_table(table, path, **PARQUET_OPTIONS)
    _fsync(path)


def _check_slug(name: str, version: str) -> None:
    # fullmatch, not match: the patterns end in "$", which also matches before a trailing newline.
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise FrameInputError("release name", f"{name!r} is not a lowercase slug [a-z0-9._-] (max 64)")
    if not isinstance(version, str) or not SEMVER.fullmatch(version):
        raise FrameInputError("release version", f"{version!r} is not semver X.Y.Z")


def _base_manifest(name: str, version: str, manifest_fields: Mapping[str, Any]) -> ReleaseManifest:
    fields = dict(manifest_fields)
    for key, value in (("name", name), ("version", version)):
        given = fields.pop(key, value)
        if given != value:
            raise FrameInputError(f"manifest_fields.{key}", f"{given!r} differs from the argument {value!r}")
    computed = [k for k in MANIFEST_COMPUTED if k in fields]
    if computed:
        raise FrameInputError("manifest_fields", f"{computed} are computed by write_release; leave them out")
    created = fields.get("created_at") or datetime.now(UTC).isoformat(timespec="seconds")
    fields["created_at"] = created.isoformat() if isinstance(created, datetime) else created
    try:
        manifest = ReleaseManifest(
            name=name,
            version=version,
            writer=f"pyarrow {pa.__version__}",
            schema_version=RELEASE_SCHEMA_VERSION,
            **fields,
        )
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        raise FrameInputError(f"manifest_fields.{loc}", err["msg"]) from e
    for i, src in enumerate(manifest.sources):
        if is_machine_path(src.path_or_url):
            raise FrameInputError(
                f"manifest_fields.sources.{i}.path_or_url",
                f"{src.path_or_url!r} is a path of this machine; a release names its sources portably "
                "(a URL or a path relative to the mirror folder)",
            )
    return manifest


def is_machine_path(value: str) -> bool:
    """An absolute local path (POSIX, Windows drive or UNC) or a file: URL: not portable."""
    return (
        PurePosixPath(value).is_absolute()
        or bool(PureWindowsPath(value).drive)
        or value.lower().startswith("file:")
    )


def _build(
    folder: Path,
    base: ReleaseManifest,
    tables: Mapping[str, pa.Table],
    card: CardInput,
    extra_files: Mapping[str, bytes],
) -> ReleaseManifest:
    files: dict[str, str] = {}
    entries: dict[str, TableEntry] = {}
    for name, table in sorted(tables.items()):
        file = f"{name}.parquet"
        write_parquet(table, folder / file)
        files[file] = sha256_file(folder / file)
        entries[name] = TableEntry(
            file=file,
            rows=table.num_rows,
            sha256=files[file],
            schema_fingerprint=schema_fingerprint(table.schema),
        )
    for file, data in sorted(extra_files.items()):
        _write_bytes(folder / file, data)
        files[file] = sha256_file(folder / file)
    manifest = base.model_copy(update={"tables": entries, "files": dict(files)})
    # A two-argument card also gets the staged folder (e.g. to diff it against the previous release).
    if callable(card):
        text = card(manifest, folder) if _arity(card) >= 2 else card(manifest)
    else:
        text = card
    if not isinstance(text, str):
        raise FrameInputError("card_markdown", f"expected a str, got {type(text).__name__}")
    _write_bytes(folder / "README.md", text.encode("utf-8"))
    files["README.md"] = sha256_file(folder / "README.md")
    manifest = ReleaseManifest.model_validate({**manifest.model_dump(), "files": files})
    _write_bytes(folder / "manifest.json", manifest.to_json().encode("utf-8"))
    _fsync(folder)
    return manifest


def _arity(fn: Callable) -> int:
    import inspect

    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 1
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


def _same_as_existing(target: Path, new: ReleaseManifest) -> Path:
    """Return the existing version folder if its content equals `new` (created_at aside), else raise."""
    what = f"release {new.name} {new.version} exists with different content; bump the version"
    try:
        old = ReleaseManifest.model_validate_json((target / "manifest.json").read_bytes())
    except (OSError, ValidationError) as e:
        raise ReleaseExistsError(
            target, f"{what} (its manifest.json is missing or invalid: {type(e).__name__})"
        ) from e
    on_disk = {rel: sha256_file(target / rel) for rel in release_files(target)}
    old_tables = {k: v.model_dump() for k, v in old.tables.items()}
    new_tables = {k: v.model_dump() for k, v in new.tables.items()}
    if on_disk == new.files and old.files == new.files and old_tables == new_tables:
        return target
    differing = sorted(
        rel
        for rel in set(on_disk) | set(new.files) | set(old.files)
        if not (on_disk.get(rel) == new.files.get(rel) == old.files.get(rel))
    )
    raise ReleaseExistsError(target, f"{what} (differs: {', '.join(differing) or 'tables'})")


def _check_extra_files(extra_files: Mapping[str, bytes], tables: Mapping[str, Any]) -> None:
    taken = {f"{n}.parquet" for n in tables} | {"README.md", "manifest.json"}
    for file, data in extra_files.items():
        if not (isinstance(file, str) and NAME.fullmatch(file)) or file in taken:
            raise FrameInputError("extra_files", f"{file!r} is not a free plain file name of the release")
        if not isinstance(data, bytes):
            raise FrameInputError(f"extra_files.{file}", f"expected bytes, got {type(data).__name__}")


def write_release(
    releases_root: Path,
    name: str,
    version: str,
    tables: Mapping[str, TableInput],
    manifest_fields: Mapping[str, Any],
    card_markdown: CardInput,
    extra_files: Mapping[str, bytes] | None = None,
    *,
    allow_identical: bool = False,
) -> Path:
    """Write `releases_root/<name>/<version>/` atomically and return its path.

    tables: table name (see TABLE_SCHEMAS) -> pyarrow Table, pandas DataFrame or list of row dicts
    (the snapshot date columns, schemas.release.SNAPSHOT_DATES, are computed: leave them out or null).
    manifest_fields: created_at (optional; default now, UTC), config_sha256, code_version, prompt_hashes,
    backends, sources. card_markdown: the README.md text, or a function of the manifest (tables filled
    in, README.md not yet in files) returning it. The card must not embed created_at, or rebuilding
    an identical release would be refused. extra_files: plain file name -> bytes, written beside the
    tables and listed with their sha256 in manifest.json (e.g. inputs.json).
    IdenticalReleaseError when the previous version of the release (the highest below `version`) has
    the same tables, byte for byte: nothing changed since. `allow_identical` writes the copy anyway.
    """
    _check_slug(name, version)
    base = _base_manifest(name, version, manifest_fields)
    prepared = prepare_tables(tables)
    extra_files = dict(extra_files or {})
    _check_extra_files(extra_files, tables)

    parent = Path(releases_root) / name
    target = parent / version
    parent.mkdir(parents=True, exist_ok=True)
    tmp = parent / f".tmp-{version}-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    tmp.mkdir()
    try:
        manifest = _build(tmp, base, prepared, card_markdown, extra_files)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    # Compare-then-rename under the version's lock: two writers of one version never interleave.
    with release_lock(Path(releases_root), name, version):
        return _place(tmp, target, parent, manifest, allow_identical)


def previous_version(parent: Path, version: str) -> Path | None:
    """The highest version folder of a release below `version` that holds a manifest.json."""
    return latest_version(parent, below=version)


def _table_digests(m: ReleaseManifest) -> dict[str, tuple[str, str, int]]:
    return {k: (t.sha256, t.schema_fingerprint, t.rows) for k, t in m.tables.items()}


def _check_not_identical(parent: Path, new: ReleaseManifest) -> None:
    prev = previous_version(parent, new.version)
    if prev is None:
        return
    try:
        old = ReleaseManifest.model_validate_json((prev / "manifest.json").read_bytes())
    except (OSError, ValidationError):
        return  # an unreadable previous version is verify's business, not a reason to refuse
    if _table_digests(old) == _table_digests(new):
        raise IdenticalReleaseError(
            f"release {new.name} {new.version}",
            f"nothing changed since {old.name} {old.version}: every table is identical, so no new "
            "version was written (--allow-identical writes the copy anyway)",
        )


def _place(tmp: Path, target: Path, parent: Path, manifest: ReleaseManifest, allow_identical: bool) -> Path:
    try:
        if target.exists():
            return _same_as_existing(target, manifest)
        if not allow_identical:
            _check_not_identical(parent, manifest)
        try:
            os.rename(tmp, target)  # atomic; fails if another writer created a non-empty target meanwhile
        except OSError:
            if target.exists():
                return _same_as_existing(target, manifest)
            raise
        _fsync(parent)
        return target
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
