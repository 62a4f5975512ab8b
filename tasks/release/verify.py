"""Check a written release against its manifest and the table schemas of its schema version (SPEC §6);
`verify_deep` also checks it against the data folder it was built from (the input folders' manifests in
inputs.json)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa
from pydantic import BaseModel, Field, ValidationError

from schemas.release import (
    RELEASE_SCHEMA_VERSION,
    REQUIRED_TABLES,
    SCHEMAS_BY_VERSION,
    SNAPSHOT_DATES,
    TABLE_KEYS,
    UNIQUE_KEY_TABLES,
    ReleaseManifest,
    schema_fingerprint,
    snapshot_date,
)
from tasks.errors import FrameInputError
from tasks.manifest import (
    check_folder,
    describe,
    entries_below,
    files_below,
    manifest_digest,
    read_manifest,
    sha256_file,
)
from tasks.release import members
from tasks.release.members import MANIFEST, MAX_MANIFEST_BYTES, Budget, shown

__all__ = [
    "INPUTS_FILE",
    "VerifyReport",
    "check_integrity",
    "duplicate_keys",
    "inputs_json",
    "release_files",
    "schema_difference",
    "sha256_file",
    "verify_deep",
    "verify_release",
]

MAX_PROBLEMS = 200
MAX_INPUTS = 100_000
# {"folders": {"grounding/<domain>/<snapshot>" | "reports/<domain>/<snapshot>": manifest digest}}
INPUTS_FILE = "inputs.json"


class VerifyReport(BaseModel):
    path: str
    ok: bool
    problems: list[str] = Field(default_factory=list)
    rows: dict[str, int] = Field(default_factory=dict, description="table -> rows found in its parquet")
    checked_files: list[str] = Field(default_factory=list, description="files whose sha256 was checked")


def release_files(folder: Path) -> list[str]:
    """Every file below the folder (relative posix paths), manifest.json excluded."""
    return files_below(folder, "manifest.json")


def schema_difference(found: pa.Schema, expected: pa.Schema) -> str:
    """One line naming the first difference, '' when equal (metadata ignored)."""
    if found.equals(expected):
        return ""
    names_f, names_e = found.names, expected.names
    missing = [n for n in names_e if n not in names_f]
    extra = [n for n in names_f if n not in names_e]
    if missing or extra:
        return f"missing columns {missing}, unexpected columns {extra}"
    if names_f != names_e:
        return f"column order {names_f} differs from {names_e}"
    for f in expected:
        g = found.field(f.name)
        if not g.equals(f):
            return f"column {f.name!r} is {g.type}{'' if g.nullable else ' not null'}, expected {f.type}" + (
                "" if f.nullable else " not null"
            )
    return "schemas differ"


def duplicate_keys(name: str, table: pa.Table) -> list[str]:
    """The keys (" | "-joined, as `shown`) that repeat in `table`, one per repetition. Only a digest of
    each key is kept while looking, one batch of rows at a time."""
    keys = TABLE_KEYS[name]
    seen: set[bytes] = set()
    dups: list[str] = []
    for batch in table.select(list(keys)).to_batches(max_chunksize=4096):
        for row in zip(*(batch.column(i).to_pylist() for i in range(len(keys))), strict=True):
            digest = hashlib.sha256(json.dumps(row, default=str, ensure_ascii=False).encode()).digest()
            if digest in seen:
                dups.append(shown(" | ".join("" if v is None else str(v) for v in row)))
            seen.add(digest)
    return dups


def check_integrity(tables: Mapping[str, pa.Table]) -> list[str]:
    """Cross-table problems: every instance points at existing reports and grounding documents whose
    domain, category and snapshots match it, and its S/Y Markdown equals those reports'."""
    problems: list[str] = []
    reports = {r["report_id"]: r for r in tables["reports"].to_pylist()} if "reports" in tables else {}
    gsets: dict[str, dict] = {}
    if "grounding_documents" in tables:
        cols = ["grounding_set_id", "domain", "snapshot", "doc_id"]
        for d in tables["grounding_documents"].select(cols).to_pylist():
            g = gsets.setdefault(
                d["grounding_set_id"], {"domain": d["domain"], "docs": set(), "snaps": set()}
            )
            g["docs"].add(d["doc_id"])
            g["snaps"].add(d["snapshot"])

    for inst in tables["instances"].to_pylist() if "instances" in tables else []:
        iid = inst["instance_id"]
        if (inst.get("periods_skipped") or 0) < 0:
            problems.append(f"instances: {iid}: periods_skipped {inst['periods_skipped']} is negative")
        for role, rid_col, t_col, md_col in (
            ("sample", "sample_report_id", "t_sample", "sample_markdown"),
            ("target", "target_report_id", "t_target", "target_markdown"),
        ):
            rid = inst[rid_col]
            rep = reports.get(rid)
            if rep is None:
                problems.append(f"instances: {iid}: {rid_col} {rid!r} is not in reports")
                continue
            for col, want in (("domain", inst["domain"]), ("category", inst["category"])):
                if rep[col] != want:
                    problems.append(
                        f"instances: {iid}: {role} report {rid!r} has {col} {rep[col]!r}, not {want!r}"
                    )
            if rep["snapshot"] != inst[t_col]:
                problems.append(
                    f"instances: {iid}: {role} report {rid!r} is snapshot {rep['snapshot']!r}, not {t_col} "
                    f"{inst[t_col]!r}"
                )
            if rep["markdown"] != inst[md_col]:
                problems.append(f"instances: {iid}: {md_col} differs from reports {rid!r} markdown")
        gid = inst["grounding_set_id"]
        g = gsets.get(gid)
        if g is None:
            problems.append(f"instances: {iid}: grounding_set_id {gid!r} is not in grounding_documents")
            continue
        if g["domain"] != inst["domain"] or g["snaps"] != {inst["t_target"]}:
            problems.append(
                f"instances: {iid}: grounding set {gid!r} is not domain {inst['domain']!r} snapshot "
                f"{inst['t_target']!r}"
            )
        doc_ids = inst["grounding_doc_ids"] or []
        if not doc_ids:
            problems.append(f"instances: {iid}: grounding_doc_ids is empty")
        missing = [d for d in doc_ids if d not in g["docs"]]
        if missing:
            problems.append(f"instances: {iid}: grounding_doc_ids {missing} are not in grounding set {gid!r}")

    if "structures" in tables:
        for rid in tables["structures"].column("report_id").to_pylist():
            if rid not in reports:
                problems.append(f"structures: report_id {rid!r} is not in reports")
    for name, table in sorted(tables.items()):
        for date_col, snap_col in SNAPSHOT_DATES.get(name, {}).items():
            if date_col not in table.column_names:  # schema version 1 has none
                continue
            pairs = zip(table.column(date_col).to_pylist(), table.column(snap_col).to_pylist(), strict=True)
            bad = sorted({str(s) for d, s in pairs if d != snapshot_date(s)})
            if bad:
                problems.append(f"{name}: {date_col} is not the date of {snap_col} {bad[0]!r}")
    return problems


def _manifest(folder: Path, special: Mapping[str, str], problems: list[str]) -> ReleaseManifest | None:
    """The release's manifest, or None with the problem recorded (unreadable, not a regular file, invalid)."""
    if MANIFEST in special:
        return None
    try:
        data = members.read_member(folder, MANIFEST, MAX_MANIFEST_BYTES)
    except FrameInputError as e:
        problems.append(f"{MANIFEST}: {e.problem}")
        return None
    try:
        return ReleaseManifest.model_validate_json(data)
    except ValidationError as e:
        problems.append(f"{MANIFEST}: invalid: {members.validation_problem(e)}")
        return None


def _check_files(
    folder: Path, manifest: ReleaseManifest, special: Mapping[str, str], problems: list[str]
) -> list[str]:
    """Hash every listed file (never one below a special entry); report mismatches, missing and unlisted
    files. Returns the files whose sha256 was checked."""
    checked = []
    for rel, sha in sorted(manifest.files.items()):
        if any(rel == s or rel.startswith(f"{s}/") for s in special):
            continue  # reported already (a file below a linked folder is not opened either)
        try:
            actual = members.sha256_member(folder, rel)
        except FrameInputError as e:
            problem = "listed in manifest.json but missing" if e.problem == "missing" else e.problem
            problems.append(f"{rel}: {problem}")
            continue
        checked.append(rel)
        if actual != sha:
            problems.append(f"{rel}: sha256 mismatch (manifest {sha[:12]}, file {actual[:12]})")
    if "README.md" not in manifest.files:
        problems.append("README.md: dataset card not listed in manifest.json")
    for rel in release_files(folder):
        if rel not in manifest.files and rel not in special:
            problems.append(f"{rel}: unlisted file (not in manifest.json files)")
    return checked


def _readable_tables(
    manifest: ReleaseManifest, schemas: Mapping[str, pa.Schema], checked: list[str], problems: list[str]
) -> dict:
    """{name: entry} of the tables to read (known, listed, hashed); every entry's defects reported."""
    for name in REQUIRED_TABLES:
        if name not in manifest.tables:
            problems.append(f"{name}: required table missing from manifest.json")
    readable = {}
    for name, entry in sorted(manifest.tables.items()):
        expected = schemas.get(name)
        if expected is None:
            problems.append(f"{entry.file}: unknown table {name!r}")
            continue
        listed = entry.file in manifest.files
        if not listed:
            problems.append(f"{entry.file}: table {name} file not listed in manifest.json files (not read)")
        elif manifest.files[entry.file] != entry.sha256:
            problems.append(f"{entry.file}: tables.{name}.sha256 differs from files entry")
        if entry.schema_fingerprint != schema_fingerprint(expected):
            problems.append(
                f"{entry.file}: schema_fingerprint differs from the {name} schema of version "
                f"{manifest.schema_version}"
            )
        if listed and entry.file in checked:  # missing and special files are reported already
            readable[name] = entry
    return readable


def _load_tables(
    folder: Path, readable: Mapping, schemas: Mapping[str, pa.Schema], problems: list[str], rows: dict
) -> dict[str, pa.Table]:
    """The readable tables whose schema matches, decoded within one budget; schema, row-count and
    duplicate-key problems reported, `rows` filled."""
    # all tables together decode to at most what one table may (members.table_budget) of their total size
    sizes = 0
    for e in readable.values():
        try:
            sizes += os.lstat(folder / e.file).st_size
        except OSError:
            pass  # gone since it was hashed: reading it says so
    budget = Budget(members.table_budget(sizes))
    loaded: dict[str, pa.Table] = {}
    for name, entry in sorted(readable.items()):
        try:
            with members.open_parquet(folder, entry.file) as (pf, where, size):
                diff = schema_difference(pf.schema_arrow, schemas[name])
                rows[name] = pf.metadata.num_rows
                if diff:
                    problems.append(f"{entry.file}: schema differs from {name}: {shown(diff, 300)}")
                if pf.metadata.num_rows != entry.rows:
                    problems.append(f"{entry.file}: {pf.metadata.num_rows} rows, manifest says {entry.rows}")
                if not diff:
                    loaded[name] = members.decode(pf, where, size, budget=budget)
        except FrameInputError as e:
            problems.append(f"{entry.file}: {e.problem}")
            continue
        if name in loaded and name in UNIQUE_KEY_TABLES:
            dups = duplicate_keys(name, loaded[name])
            if dups:
                problems.append(f"{entry.file}: {len(dups)} duplicate keys, e.g. {dups[0]!r}")
    return loaded


def verify_release(path: str | Path) -> VerifyReport:
    """Recompute every checksum, compare schemas and row counts with the manifest, check that every
    instance's reports and grounding documents exist and that no unlisted file is present.

    Only regular files inside the folder are read (`tasks.release.members`): a symbolic link, FIFO,
    device or socket is listed as a problem and never opened, a table file the manifest does not list is
    never read, and a table that decodes to far more than its size is refused unread."""
    folder = Path(path)
    problems: list[str] = []
    rows: dict[str, int] = {}
    checked: list[str] = []

    def done() -> VerifyReport:
        shown_ = [members.line(p) for p in problems[:MAX_PROBLEMS]]
        if len(problems) > MAX_PROBLEMS:
            shown_.append(f"... and {len(problems) - MAX_PROBLEMS} more problems")
        return VerifyReport(
            path=str(folder), ok=not problems, problems=shown_, rows=rows, checked_files=checked
        )

    if not folder.is_dir():
        problems.append(f"{folder}: not a release folder")
        return done()
    # every entry that is not a regular file: never opened, never hashed, never read as a table
    special = {rel: kind for rel, kind in entries_below(folder, exclude="") if kind is not None}
    for rel, kind in sorted(special.items()):
        problems.append(f"{rel}: {kind}: a release holds only regular files (not read)")
    manifest = _manifest(folder, special, problems)
    if manifest is None:
        return done()
    if folder.name != manifest.version or folder.parent.name != manifest.name:
        problems.append(
            f"manifest.json: names release {manifest.name} {manifest.version}, folder is "
            f"{folder.parent.name}/{folder.name}"
        )
    checked += _check_files(folder, manifest, special, problems)
    schemas = SCHEMAS_BY_VERSION.get(manifest.schema_version)
    if schemas is None:
        problems.append(
            f"manifest.json: schema_version {manifest.schema_version} is newer than this frame reads "
            f"(up to {RELEASE_SCHEMA_VERSION}): update frame"
        )
        return done()
    readable = _readable_tables(manifest, schemas, checked, problems)
    loaded = _load_tables(folder, readable, schemas, problems, rows)
    if all(n in loaded for n in REQUIRED_TABLES):
        problems.extend(check_integrity(loaded))
    return done()


def inputs_json(folders: Mapping[str, str]) -> bytes:
    """inputs.json of a release: the manifest digest of every input folder, by data-folder-relative path."""
    return (json.dumps({"folders": dict(sorted(folders.items()))}, indent=1, sort_keys=True) + "\n").encode()


def _recorded_inputs(release: Path) -> dict[str, str]:
    """The folders of `release/inputs.json`; ValueError (one line) when it is absent or not one."""
    try:
        data = members.read_json(release, INPUTS_FILE)
    except FrameInputError as exc:
        if exc.problem == "missing":
            raise ValueError("missing (a release written before frame recorded its input folders)") from None
        raise ValueError(exc.problem) from None
    folders = data.get("folders") if isinstance(data, dict) else None
    ok = (
        isinstance(folders, dict)
        and len(folders) <= MAX_INPUTS
        and all(isinstance(k, str) and isinstance(v, str) for k, v in folders.items())
    )
    # keys are data-folder-relative `top/domain/snapshot`: nothing recorded may point outside it
    if not ok or not all(_input_key(k) for k in folders):
        raise ValueError("not an inputs record")
    return folders


def _input_key(key: str) -> bool:
    """A data-folder-relative folder name: relative, no '..', '.' or empty part, printable, bounded."""
    parts = key.split("/")
    return (
        0 < len(key) <= 1000
        and not key.startswith("/")
        and "\\" not in key
        and all(p not in ("", ".", "..") for p in parts)
        and shown(key, 1000) == key
    )


def verify_deep(release: str | Path, data_dir: str | Path) -> list[str]:
    """Does `release` still match the data folder it was built from? One line per input folder (grounding
    or gold report folder of a snapshot) that is missing, no longer matches its own MANIFEST.json, or
    holds other content than when the release was written; empty when all match. Checks the data folder
    only: run `verify_release` for the release's own files (it covers inputs.json's sha256 too)."""
    release, data = Path(release), Path(data_dir)
    try:
        folders = _recorded_inputs(release)
    except ValueError as exc:
        return [f"{INPUTS_FILE}: {exc}"]
    problems = []
    for key, recorded in sorted(folders.items()):
        where = f"{data.name}/{key}"
        found = check_folder(data / key)
        if found == ["folder missing"]:
            problems.append(f"{where}: missing from the data folder")
        elif found:
            problems.append(f"{where}: {describe(found)}")
        elif manifest_digest(read_manifest(data / key)) != recorded:
            problems.append(f"{where}: rewritten with other content since the release was written")
    return problems
