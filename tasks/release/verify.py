"""Check a written release against its manifest and the table schemas of its schema version (SPEC §6);
`verify_deep` also checks it against the data folder it was built from (the input folders' manifests in
inputs.json)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
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
from tasks.manifest import check_folder, describe, files_below, manifest_digest, read_manifest, sha256_file

MAX_PROBLEMS = 200
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
    keys = TABLE_KEYS[name]
    seen: set[tuple] = set()
    dups: list[str] = []
    for row in zip(*(table.column(k).to_pylist() for k in keys), strict=True):
        if row in seen:
            dups.append(" | ".join("" if v is None else str(v) for v in row))
        seen.add(row)
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


def verify_release(path: str | Path) -> VerifyReport:
    """Recompute every checksum, compare schemas and row counts with the manifest, check that every
    instance's reports and grounding documents exist and that no unlisted file is present."""
    folder = Path(path)
    problems: list[str] = []
    rows: dict[str, int] = {}
    checked: list[str] = []

    def done() -> VerifyReport:
        shown = problems[:MAX_PROBLEMS]
        if len(problems) > MAX_PROBLEMS:
            shown.append(f"... and {len(problems) - MAX_PROBLEMS} more problems")
        return VerifyReport(
            path=str(folder), ok=not problems, problems=shown, rows=rows, checked_files=checked
        )

    if not folder.is_dir():
        problems.append(f"{folder}: not a release folder")
        return done()
    try:
        manifest = ReleaseManifest.model_validate_json((folder / "manifest.json").read_bytes())
    except OSError as e:
        problems.append(f"manifest.json: cannot read ({e.strerror or e})")
        return done()
    except ValidationError as e:
        problems.append(f"manifest.json: invalid: {e.errors()[0]['loc']}: {e.errors()[0]['msg']}")
        return done()

    if folder.name != manifest.version or folder.parent.name != manifest.name:
        problems.append(
            f"manifest.json: names release {manifest.name} {manifest.version}, folder is "
            f"{folder.parent.name}/{folder.name}"
        )

    for rel, sha in sorted(manifest.files.items()):
        p = folder / rel
        if not p.is_file():
            problems.append(f"{rel}: listed in manifest.json but missing")
            continue
        checked.append(rel)
        actual = sha256_file(p)
        if actual != sha:
            problems.append(f"{rel}: sha256 mismatch (manifest {sha[:12]}, file {actual[:12]})")
    if "README.md" not in manifest.files:
        problems.append("README.md: dataset card not listed in manifest.json")
    for rel in release_files(folder):
        if rel not in manifest.files:
            problems.append(f"{rel}: unlisted file (not in manifest.json files)")

    schemas = SCHEMAS_BY_VERSION.get(manifest.schema_version)
    if schemas is None:
        problems.append(
            f"manifest.json: schema_version {manifest.schema_version} is newer than this frame reads "
            f"(up to {RELEASE_SCHEMA_VERSION}): update frame"
        )
        return done()
    loaded: dict[str, pa.Table] = {}
    for name in REQUIRED_TABLES:
        if name not in manifest.tables:
            problems.append(f"{name}: required table missing from manifest.json")
    for name, entry in sorted(manifest.tables.items()):
        expected = schemas.get(name)
        if expected is None:
            problems.append(f"{entry.file}: unknown table {name!r}")
            continue
        if entry.file not in manifest.files:
            problems.append(f"{entry.file}: table {name} file not listed in manifest.json files")
        elif manifest.files[entry.file] != entry.sha256:
            problems.append(f"{entry.file}: tables.{name}.sha256 differs from files entry")
        if entry.schema_fingerprint != schema_fingerprint(expected):
            problems.append(
                f"{entry.file}: schema_fingerprint differs from the {name} schema of version "
                f"{manifest.schema_version}"
            )
        p = folder / entry.file
        if not p.is_file():
            if entry.file in manifest.files:
                continue  # already reported as missing
            problems.append(f"{entry.file}: missing")
            continue
        try:
            pf = pq.ParquetFile(p)
            diff = schema_difference(pf.schema_arrow, expected)
            rows[name] = pf.metadata.num_rows
            if diff:
                problems.append(f"{entry.file}: schema differs from {name}: {diff}")
            if pf.metadata.num_rows != entry.rows:
                problems.append(f"{entry.file}: {pf.metadata.num_rows} rows, manifest says {entry.rows}")
            if not diff:
                loaded[name] = pf.read()
        except (OSError, pa.ArrowException) as e:
            problems.append(f"{entry.file}: unreadable parquet ({type(e).__name__}: {str(e)[:200]})")
            continue
        if name in loaded and name in UNIQUE_KEY_TABLES:
            dups = duplicate_keys(name, loaded[name])
            if dups:
                problems.append(f"{entry.file}: {len(dups)} duplicate keys, e.g. {dups[0]!r}")

    if all(n in loaded for n in REQUIRED_TABLES):
        problems.extend(check_integrity(loaded))
    return done()


def inputs_json(folders: Mapping[str, str]) -> bytes:
    """inputs.json of a release: the manifest digest of every input folder, by data-folder-relative path."""
    return (json.dumps({"folders": dict(sorted(folders.items()))}, indent=1, sort_keys=True) + "\n").encode()


def _recorded_inputs(release: Path) -> dict[str, str]:
    """The folders of `release/inputs.json`; ValueError (one line) when it is absent or not one."""
    path = release / INPUTS_FILE
    if not path.is_file():
        raise ValueError("missing (a release written before frame recorded its input folders)")
    try:
        folders = json.loads(path.read_text(encoding="utf-8"))["folders"]
        ok = isinstance(folders, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in folders.items()
        )
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError):
        ok = False
    # keys are data-folder-relative `top/domain/snapshot`: nothing recorded may point outside it
    if not ok or any(".." in Path(k).parts or Path(k).is_absolute() for k in folders):
        raise ValueError("not an inputs record")
    return folders


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
