"""Reading a release folder someone hands frame: possibly a third party's, hostile or careless.

Every command that takes a release calls `check_release_folder` first: the folder is walked without
following links (bounded depth and entry count), and a symbolic link, FIFO, device or socket anywhere in it
is refused by name. A release holds only regular files (`tasks/release/write.py` writes nothing else), so
nothing a release points at outside itself is ever read, and nothing in it can block a reader.

Its members are then read only through this module: `read_member` (bytes, size-capped), `load_manifest`
(manifest.json, at most `MAX_MANIFEST_BYTES`, validated by `schemas.release.ReleaseManifest`),
`read_json`, and `open_parquet` / `read_table` / `scan_table` for the tables. Each opens a regular file
inside the release only (`tasks.files.open_regular`: not through a link, never a FIFO or a folder), and a
table is decoded in small batches whose decoded bytes are counted, so a parquet "decompression bomb" (a few
KB decoding to gigabytes) is refused before it is held. Every problem is a FrameInputError naming the file
and what is wrong, in one line; every value from the release that goes into a message passes `shown`
(control characters escaped, at most `SHOWN` characters).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import unicodedata
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import ValidationError

from schemas.release import TABLE_SCHEMAS, TABLE_SCHEMAS_V1, ReleaseManifest
from tasks.errors import FrameInputError
from tasks.files import NotRegularFile, file_kind, open_regular

__all__ = [
    "MANIFEST",
    "MAX_MANIFEST_BYTES",
    "Budget",
    "check_release_folder",
    "line",
    "load_manifest",
    "open_parquet",
    "read_json",
    "read_member",
    "read_table",
    "scan_table",
    "sha256_member",
    "shown",
    "validation_problem",
]

MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 64 << 20
"""manifest.json (and inputs.json) larger than this is refused unread: a real one is a few KB to a few MB."""
MAX_DEPTH = 8
"""Folders below a release folder (a release is flat: write.py makes no subfolder)."""
MAX_ENTRIES = 10_000
"""Entries (files and folders) of a release folder, all levels together."""
RATIO = 1000
MIN_BOMB_BYTES = 256 << 20
"""A table may decode to max(MIN_BOMB_BYTES, RATIO x its file size) bytes; more is a decompression bomb."""
BATCH_ROWS = 128
"""Rows decoded at a time: the most a table is over its budget before it is refused."""
SHOWN = 120
"""Characters of a value from a release that a message quotes."""
LINE = 500
"""Characters of one printed line of a problem (a long one is cut)."""

_ESCAPED = ("Cc", "Cf", "Zl", "Zp")


def shown(value: Any, limit: int = SHOWN) -> str:
    """`value` as text for a message: control, format and line-separator characters escaped as Python
    writes them (`\\n`, `\\x1b`, `\\u202e`), cut to `limit` characters ("... (N characters)")."""
    text = value if isinstance(value, str) else str(value)
    cut = len(text) > limit
    head = text[: limit * 2] if cut else text
    out = "".join(
        c.encode("unicode_escape").decode("ascii") if unicodedata.category(c) in _ESCAPED else c for c in head
    )
    if cut or len(out) > limit:
        return f"{out[:limit]}... ({len(text):,} characters)"
    return out


def line(text: str, limit: int = LINE) -> str:
    """One printable line of a message (`shown`, longer cut)."""
    return shown(text, limit)


def validation_problem(exc: ValidationError) -> str:
    """The first error of a pydantic validation, located: `files.<key>: Value error, ...`."""
    err = exc.errors()[0]
    loc = ".".join(shown(p, 60) for p in err["loc"])
    msg = shown(err["msg"], 200)
    return f"{loc}: {msg}" if loc else msg


def _where(folder: Path, rel: str) -> str:
    return shown(str(Path(folder) / rel), 300)


def _root(folder: str | Path) -> Path:
    """The release folder, resolved: the user's own path to it may be a link (to another disk, say); what
    is inside it may not."""
    try:
        return Path(folder).resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise FrameInputError(
            shown(str(folder), 300), f"cannot open the release folder ({shown(exc, 200)})"
        ) from None


def _open(folder: Path, rel: str) -> tuple[int, str]:
    """A descriptor of the regular file `rel` inside the release (never through a link, never a FIFO,
    device or folder), and the name to give it in a message."""
    where = _where(folder, rel)
    parts = rel.split("/")
    if rel.startswith("/") or "\\" in rel or any(p in ("", ".", "..") for p in parts):
        raise FrameInputError(where, "not a path inside the release: refused")
    root = _root(folder)
    try:
        return open_regular(root.joinpath(*parts), root), where
    except NotRegularFile as exc:
        raise FrameInputError(where, f"{exc}: refused") from None
    except FileNotFoundError:
        raise FrameInputError(where, "missing") from None
    except OSError as exc:
        raise FrameInputError(where, f"cannot read ({exc.strerror or type(exc).__name__})") from None


def read_member(folder: str | Path, rel: str, limit: int) -> bytes:
    """The bytes of member `rel` (a '/'-separated path inside the release); more than `limit` is refused
    after reading `limit` + 1 of them."""
    fd, where = _open(Path(folder), rel)
    try:
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise FrameInputError(where, f"cannot read ({exc.strerror or type(exc).__name__})") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise FrameInputError(where, f"larger than {limit:,} bytes: refused unread")
    return data


def sha256_member(folder: str | Path, rel: str) -> str:
    """sha256 of member `rel` (opened as `read_member` opens it)."""
    fd, where = _open(Path(folder), rel)
    h = hashlib.sha256()
    try:
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
    except OSError as exc:
        raise FrameInputError(where, f"cannot read ({exc.strerror or type(exc).__name__})") from None
    finally:
        os.close(fd)
    return h.hexdigest()


def read_json(folder: str | Path, rel: str, limit: int = MAX_MANIFEST_BYTES) -> Any:
    """Member `rel` parsed as JSON (UTF-8); one line when it is not (nesting too deep included)."""
    data = read_member(folder, rel, limit)
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise FrameInputError(_where(Path(folder), rel), "not UTF-8 text") from None
    except RecursionError:
        raise FrameInputError(_where(Path(folder), rel), "not JSON (nested too deep)") from None
    except ValueError as exc:
        raise FrameInputError(_where(Path(folder), rel), f"not JSON ({shown(exc, 200)})") from None


def load_manifest(folder: str | Path) -> ReleaseManifest:
    """manifest.json of the release, validated (at most MAX_MANIFEST_BYTES)."""
    data = read_member(folder, MANIFEST, MAX_MANIFEST_BYTES)
    try:
        return ReleaseManifest.model_validate_json(data)
    except ValidationError as exc:
        raise FrameInputError(
            _where(Path(folder), MANIFEST), f"invalid manifest: {validation_problem(exc)}"
        ) from None


# ---------------------------------------------------------------- the folder


def check_release_folder(folder: str | Path) -> None:
    """Refuse a release folder holding anything but regular files and folders: every symbolic link, FIFO,
    device or socket in it (one line: the first by name, how many more and which), more than MAX_DEPTH
    levels of folders or more than MAX_ENTRIES entries. Nothing in it is opened or followed; the folder
    itself may be reached through a link (the user's own path)."""
    folder = Path(folder)
    try:
        st = os.stat(folder)
    except FileNotFoundError:
        raise FrameInputError(shown(str(folder), 300), "no such folder") from None
    except OSError as exc:
        raise FrameInputError(shown(str(folder), 300), f"cannot open ({exc.strerror or exc})") from None
    if not stat.S_ISDIR(st.st_mode):
        raise FrameInputError(shown(str(folder), 300), f"not a folder ({file_kind(st.st_mode)})")
    seen = 0
    bad: list[tuple[str, str]] = []  # (name, what is wrong with it)
    todo: list[tuple[str, int]] = [("", 0)]
    while todo:
        rel, depth = todo.pop()
        entries = []
        try:
            with os.scandir(folder / rel if rel else folder) as it:
                for entry in it:
                    seen += 1
                    if seen > MAX_ENTRIES:
                        raise FrameInputError(
                            shown(str(folder), 300),
                            f"more than {MAX_ENTRIES:,} files and folders: not a release folder",
                        )
                    entries.append(entry)
        except OSError as exc:
            raise FrameInputError(_where(folder, rel), f"cannot list ({exc.strerror or exc})") from None
        below = []
        for entry in sorted(entries, key=lambda e: e.name):
            name = f"{rel}/{entry.name}" if rel else entry.name
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError as exc:
                raise FrameInputError(_where(folder, name), f"cannot stat ({exc.strerror or exc})") from None
            if stat.S_ISLNK(mode):
                try:
                    target = f" to {shown(os.readlink(entry.path), 200)}"
                except OSError:
                    target = ""
                bad.append((name, f"a symbolic link{target}: a release holds only regular files; refused"))
            elif stat.S_ISDIR(mode):
                if depth + 1 > MAX_DEPTH:
                    raise FrameInputError(
                        _where(folder, name),
                        f"folders nested more than {MAX_DEPTH} deep: not a release folder",
                    )
                below.append((name, depth + 1))
            elif not stat.S_ISREG(mode):
                bad.append((name, f"not a regular file ({file_kind(mode)}): refused, never opened"))
        todo.extend(reversed(below))  # folders in name order, each before the next one's entries
    if bad:
        (name, problem), more = bad[0], [n for n, _ in bad[1:]]
        if more:
            listed = ", ".join(shown(n, 60) for n in more[:5]) + (", ..." if len(more) > 5 else "")
            problem += f" (and {len(more)} more not regular: {listed})"
        raise FrameInputError(_where(folder, name), problem)


# ---------------------------------------------------------------- tables


class Budget:
    """Decoded bytes a reader may still hold (shared by the tables of one command, or one table's)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def take(self, n: int, where: str, size: int) -> None:
        self.used += n
        if self.used > self.limit:
            raise FrameInputError(
                where,
                f"decodes to more than {self.limit:,} bytes from {size:,} on disk (a decompression bomb): "
                "refused",
            )


def table_budget(size: int) -> int:
    """Decoded bytes a parquet file of `size` bytes may hold."""
    return max(MIN_BOMB_BYTES, RATIO * size)


def _unreadable(where: str, exc: BaseException) -> FrameInputError:
    return FrameInputError(where, f"unreadable parquet ({type(exc).__name__}: {shown(exc, 200)})")


@contextmanager
def open_parquet(folder: str | Path, rel: str) -> Iterator[tuple[pq.ParquetFile, str, int]]:
    """(the parquet file of member `rel`, its name for messages, its size); only its footer is read."""
    fd, where = _open(Path(folder), rel)
    fh = os.fdopen(fd, "rb")
    try:
        size = os.fstat(fh.fileno()).st_size
        try:
            pf = pq.ParquetFile(fh)
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise _unreadable(where, exc) from None
        yield pf, where, size
    finally:
        fh.close()


def _columns(pf: pq.ParquetFile, where: str, required: Sequence[str], name: str) -> None:
    names = set(pf.schema_arrow.names)
    missing = [c for c in required if c not in names]
    if missing:
        shown_cols = ", ".join(shown(c, 60) for c in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise FrameInputError(where, f"lacks column(s) {shown_cols}{more} of the {name} table")


def decode(
    pf: pq.ParquetFile,
    where: str,
    size: int,
    *,
    columns: Sequence[str] | None = None,
    budget: Budget | None = None,
    keep: bool = True,
) -> pa.Table | None:
    """The table (or only `columns`), decoded BATCH_ROWS rows at a time; refused once it holds more than
    its budget (`table_budget(size)`, and `budget` when given); `keep=False` only checks it."""
    own = Budget(table_budget(size))
    try:
        claimed = sum(
            pf.metadata.row_group(i).column(j).total_uncompressed_size
            for i in range(pf.metadata.num_row_groups)
            for j in range(pf.metadata.num_columns)
        )
        own.take(claimed, where, size)  # what the footer says the pages hold (the batches count the rest)
        own.used = 0
        batches = []
        for batch in pf.iter_batches(batch_size=BATCH_ROWS, columns=list(columns) if columns else None):
            own.take(batch.nbytes, where, size)
            if budget is not None:
                budget.take(batch.nbytes, where, size)
            if keep:
                batches.append(batch)
        if not keep:
            return None
        if batches:
            return pa.Table.from_batches(batches)
        schema = pf.schema_arrow
        return (schema if not columns else pa.schema([schema.field(c) for c in columns])).empty_table()
    except (OSError, ValueError, KeyError, pa.ArrowException) as exc:
        raise _unreadable(where, exc) from None


def _required(name: str | None) -> list[str]:
    """Columns every schema version of table `name` has (what a reader can rely on)."""
    if name not in TABLE_SCHEMAS:
        return []
    old = set(TABLE_SCHEMAS_V1[name].names)
    return [c for c in TABLE_SCHEMAS[name].names if c in old]


def read_table(
    folder: str | Path,
    name: str,
    *,
    columns: Sequence[str] | None = None,
    required: Sequence[str] | None = None,
    budget: Budget | None = None,
) -> pa.Table:
    """Release table `name` (`<name>.parquet`), or only `columns` of it, checked for `required` columns
    (default: those every schema version of the table has) and decoded within its budget."""
    with open_parquet(folder, f"{name}.parquet") as (pf, where, size):
        base = required if required is not None else _required(name)
        need = list(dict.fromkeys([*base, *(columns or [])]))
        _columns(pf, where, need, name)
        table = decode(pf, where, size, columns=columns, budget=budget)
    assert table is not None
    return table


def scan_table(folder: str | Path, name: str, *, required: Sequence[str] | None = None) -> None:
    """Check that release table `name` can be read whole: a regular parquet file inside the release, with
    the columns every reader relies on, that decodes within its budget (nothing of it is kept)."""
    with open_parquet(folder, f"{name}.parquet") as (pf, where, size):
        _columns(pf, where, list(required if required is not None else _required(name)), name)
        decode(pf, where, size, keep=False)
