"""The blind evaluation kit of a release (issue 14): what a participant may see - per instance the sample
report S, the grounding documents G and metadata - and never the gold report Y nor anything derived from
it. Layout: instances.jsonl, documents.jsonl (G's metadata), samples/<safe id>.md,
grounding/<grounding_set_id>/<doc_id>.md, README.md (submission format, scoring command), MANIFEST.json
(release name/version, sha256 of every file). Written into a temp sibling of the target, then renamed.

Chained instances: the target of t1->t2 is the sample of t2->t3, so both cannot be blind in one kit. An
instance whose Y is the S of another exported instance is withheld (the later one is kept); the summary,
MANIFEST.json and README.md list the withheld ids. `instances=` exports a chosen subset (same rule).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any

from schemas.release import ReleaseManifest
from schemas.release_rows import document_metadata
from tasks.atomic import atomic_write_bytes
from tasks.errors import FrameInputError
from tasks.release import members
from tasks.release.read import read_release_table
from tasks.release.verify import release_files, sha256_file, verify_release

__all__ = [
    "DOCUMENT_COLUMNS",
    "INSTANCE_COLUMNS",
    "KIT_FORMAT",
    "export_eval_kit",
    "report_file_name",
    "select_blind",
    "verify_eval_kit",
]

KIT_FORMAT = 1
MANIFEST = "MANIFEST.json"

# Every column of schemas.release.INSTANCES_SCHEMA, decided one by one: True = in the kit.
INSTANCE_COLUMNS: dict[str, bool] = {
    "instance_id": True,
    "category": True,
    "domain": True,
    "t_sample": True,  # snapshot of S
    "t_target": True,  # snapshot of G (and of Y, which is not in the kit)
    "t_sample_date": True,  # the snapshots as ISO dates when they are dates (filings), else null
    "t_target_date": True,
    "periods_skipped": True,  # source periods between S and G: > 0 is left out of headline scores
    "sample_report_id": False,  # points into the reports table, which holds Y: not in the kit
    "target_report_id": False,  # names Y
    "grounding_set_id": True,
    "grounding_doc_ids": True,
    "sample_markdown": True,  # S
    "target_markdown": False,  # Y
}
# Every column of schemas.release.GROUNDING_DOCUMENTS_SCHEMA (none derived from Y): True = in
# documents.jsonl; markdown goes to its own file, metadata and metadata_extra_json are given merged as
# `metadata` (schemas.release_rows.document_metadata).
DOCUMENT_COLUMNS: dict[str, bool] = {
    "grounding_set_id": True,
    "domain": True,
    "snapshot": True,
    "snapshot_date": True,
    "doc_id": True,
    "title": True,
    "kind": True,
    "tokens": True,
    "tables": True,
    "images": True,
    "source_sha256": True,
    "source_kind": True,
    "markdown": False,
    "metadata": False,
    "metadata_extra_json": False,
}
_PART = re.compile(r"[A-Za-z0-9._-]+")


def report_file_name(instance_id: str) -> str:
    """The file stem of an instance's report and sample: `frame generate` writes reports/<stem>.md."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", instance_id.replace("->", "__"))


def _rel(*parts: str) -> str:
    for p in parts:
        for seg in p.split("/"):
            if not _PART.fullmatch(seg) or seg in (".", ".."):
                raise FrameInputError("grounding_documents", f"{p!r} cannot name a file of the kit")
    return "/".join(parts)


def _check_out(out: Path) -> None:
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise FrameInputError(out, "exists and is not a folder: choose a new --out")
    if out.is_dir() and any(out.iterdir()):
        raise FrameInputError(out, "exists and is not empty: choose a new or empty --out folder")


def _load(release: Path) -> tuple[ReleaseManifest, list[dict], list[dict], str]:
    members.check_release_folder(release)  # only regular files: nothing read through a link, no FIFO
    report = verify_release(release)
    if not report.ok:
        raise FrameInputError(release, f"release does not verify: {report.problems[0]}")
    manifest = members.load_manifest(release)
    # in the current schema, whatever version the release was written in: one kit format
    instances = read_release_table(release, "instances", manifest.schema_version).to_pylist()
    docs = read_release_table(release, "grounding_documents", manifest.schema_version).to_pylist()
    return manifest, instances, docs, members.sha256_member(release, members.MANIFEST)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def select_blind(instances: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[str]]:
    """(kept, withheld) instance ids: an instance is withheld when its Y (by report id or by content) is
    the S of a kept instance. Chains are walked from their end, so the latest instance is kept."""
    by_sample: dict[str, list[str]] = {}
    for r in instances:
        for key in (f"id:{r['sample_report_id']}", f"md:{_digest(r['sample_markdown'])}"):
            by_sample.setdefault(key, []).append(r["instance_id"])
    succ: dict[str, set[str]] = {}
    for r in instances:
        keys = (f"id:{r['target_report_id']}", f"md:{_digest(r['target_markdown'])}")
        succ[r["instance_id"]] = {s for k in keys for s in by_sample.get(k, []) if s != r["instance_id"]}
    depth: dict[str, int] = {}

    def to_end(iid: str, seen: frozenset[str]) -> int:
        if iid not in depth:
            nxt = [to_end(s, seen | {iid}) + 1 for s in sorted(succ[iid]) if s not in seen]
            depth[iid] = max(nxt, default=0)
        return depth[iid]

    kept: set[str] = set()
    withheld: list[str] = []
    for iid in sorted(succ, key=lambda i: (to_end(i, frozenset()), i)):
        if succ[iid] & kept:
            withheld.append(iid)
        else:
            kept.add(iid)
    return sorted(kept), sorted(withheld)


class _Kit:
    """Files written under a staging folder, with their sha256 recorded for MANIFEST.json."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: dict[str, str] = {}

    def put(self, rel: str, text: str) -> str:
        if rel in self.files:
            raise FrameInputError(rel, "two items of the release map to this kit file")
        data = text.encode("utf-8")
        atomic_write_bytes(self.root / rel, data)
        self.files[rel] = hashlib.sha256(data).hexdigest()
        return rel


def _json_value(v: Any) -> Any:
    if isinstance(v, date):
        return v.isoformat()
    raise TypeError(f"{type(v).__name__} is not JSON serializable")


def _jsonl(rows: Iterable[Mapping[str, Any]]) -> str:
    return "".join(
        json.dumps(r, ensure_ascii=False, sort_keys=True, default=_json_value) + "\n" for r in rows
    )


def _write_documents(kit: _Kit, docs: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    """grounding/<set>/<doc>.md and documents.jsonl; returns (set, doc) -> file."""
    files: dict[tuple[str, str], str] = {}
    lines = []
    for d in docs:
        rel = kit.put(_rel("grounding", d["grounding_set_id"], f"{d['doc_id']}.md"), d["markdown"])
        files[(d["grounding_set_id"], d["doc_id"])] = rel
        meta = document_metadata(d)
        lines.append({**{c: d.get(c) for c, keep in DOCUMENT_COLUMNS.items() if keep}, "metadata": meta})
        lines[-1]["file"] = rel
    kit.put("documents.jsonl", _jsonl(lines))
    return files


def _write_instances(
    kit: _Kit, instances: Sequence[Mapping[str, Any]], doc_files: Mapping[tuple[str, str], str]
) -> None:
    names = Counter(report_file_name(r["instance_id"]) + ".md" for r in instances)
    clash = sorted(n for n, k in names.items() if k > 1)
    if clash:
        raise FrameInputError("instances", f"instance ids collide as report file {clash[0]!r}")
    lines = []
    for r in instances:
        name = report_file_name(r["instance_id"]) + ".md"
        row = {c: r[c] for c, keep in INSTANCE_COLUMNS.items() if keep}
        row["grounding_doc_ids"] = list(r["grounding_doc_ids"])
        row["sample_file"] = kit.put(f"samples/{name}", r["sample_markdown"])
        row["grounding_files"] = [doc_files[(r["grounding_set_id"], d)] for d in row["grounding_doc_ids"]]
        row["report_file"] = f"reports/{name}"
        lines.append(row)
    kit.put("instances.jsonl", _jsonl(lines))


def _readme(name: str, version: str, instances: Sequence[Mapping[str, Any]], withheld: Sequence[str]) -> str:
    cats = Counter(r["category"] for r in instances)
    table = "\n".join(f"| {c} | {n} |" for c, n in sorted(cats.items()))
    example = instances[0] if instances else {"instance_id": "<instance_id>"}
    held = (
        f"\n{len(withheld)} instance(s) of the release are withheld from this kit because their gold report "
        "is the sample report of a later instance shown here (a chain t1->t2, t2->t3): "
        + ", ".join(f"`{i}`" for i in withheld)
        + ".\n"
        if withheld
        else ""
    )
    missing = "; this kit leaves instances out, so add it" if withheld else ""
    return f"""# Evaluation kit: release {name} {version}

Blind inputs for form-restricted report generation. For each instance you get the sample report S
(an earlier report that fixes the form: headings, order, kind of content) and the grounding documents
G of the target period; write the target period's report in S's form, only from G. The gold reports
are not in this kit.
{held}
| category | instances |
|---|---|
{table}

## Files

- `instances.jsonl`: one JSON object per line and instance: `instance_id`, `category`, `domain`,
  `t_sample` (period of S), `t_target` (period to report on), `t_sample_date` and `t_target_date` (the
  same as ISO dates when they are dates, else null), `periods_skipped` (source periods between the two:
  0 for consecutive editions; others are scored apart from the headline), `grounding_set_id`,
  `grounding_doc_ids`, `sample_markdown` (S), `sample_file`, `grounding_files`, `report_file` (the
  file name a submission folder uses for this instance).
- `samples/<name>.md`: S of each instance (the same text as `sample_markdown`).
- `grounding/<grounding_set_id>/<doc_id>.md`: the grounding documents G, in Markdown.
- `documents.jsonl`: one line per grounding document: title, kind, token/table/image counts, source
  kind and sha256, metadata, `file`.
- `MANIFEST.json`: the release name and version and the sha256 of every file of the kit.

## Submission

One report per instance, in Markdown, either

- a JSONL file, one line per instance: `{{"instance_id": "{example["instance_id"]}", "markdown": "# ..."}}`
  (every `instance_id` of `instances.jsonl` exactly once, UTF-8), or
- a folder `reports/` holding one file per instance named exactly as its `report_file` in
  `instances.jsonl` (e.g. `reports/{report_file_name(example["instance_id"])}.md`).

## Scoring

The organiser, who holds the full release (with the gold reports), scores a submission with an
evaluation config `eval.toml`:

```toml
[systems.mine]
kind = "submission"
path = "path/to/reports"   # the folder, or the .jsonl file
```

```bash
frame score --release <release> --config eval.toml
```

where `<release>` is the release folder `{name}/{version}`. Unknown, missing, duplicated or empty
reports are refused before anything is scored (`--allow-missing` scores what is there and reports the
coverage{missing}).
"""


def _manifest_json(release: ReleaseManifest, release_sha: str, summary: Mapping, files: Mapping) -> str:
    body = {
        "kit_format": KIT_FORMAT,
        "release": {"name": release.name, "version": release.version, "manifest_sha256": release_sha},
        "instances": summary["instances"],
        "documents": summary["documents"],
        "withheld": summary["withheld"],
        "files": dict(sorted(files.items())),
    }
    return json.dumps(body, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _place(tmp: Path, out: Path) -> None:
    _check_out(out)  # again: someone may have written there while the kit was staged
    try:
        os.rename(tmp, out)  # atomic; replaces an empty folder, fails on a non-empty one
    except OSError as exc:
        raise FrameInputError(out, f"cannot move the kit into place ({exc.strerror or exc})") from None


def export_eval_kit(release: Path, out: Path, *, instances: Iterable[str] | None = None) -> dict:
    """Write the blind evaluation kit of `release` to `out` (absent or empty); `instances` limits it to
    these ids. Returns {release, instances, documents, files, withheld}."""
    release, out = Path(release), Path(out)
    _check_out(out)
    manifest, rows, docs, release_sha = _load(release)
    if instances is not None:
        wanted = set(instances)
        unknown = sorted(wanted - {r["instance_id"] for r in rows})
        if unknown:
            raise FrameInputError("--instances", f"{unknown[0]!r} is not an instance of {release.name}")
        rows = [r for r in rows if r["instance_id"] in wanted]
    kept_ids, withheld = select_blind(rows)
    kept = [r for r in sorted(rows, key=lambda r: r["instance_id"]) if r["instance_id"] in set(kept_ids)]
    needed = {(r["grounding_set_id"], d) for r in kept for d in r["grounding_doc_ids"]}
    kit_docs = sorted(
        (d for d in docs if (d["grounding_set_id"], d["doc_id"]) in needed),
        key=lambda d: (d["grounding_set_id"], d["doc_id"]),
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    tmp.mkdir()
    try:
        kit = _Kit(tmp)
        _write_instances(kit, kept, _write_documents(kit, kit_docs))
        kit.put("README.md", _readme(manifest.name, manifest.version, kept, withheld))
        summary = {
            "release": f"{manifest.name}/{manifest.version}",
            "instances": len(kept),
            "documents": len(kit_docs),
            "withheld": withheld,
        }
        atomic_write_bytes(tmp / MANIFEST, _manifest_json(manifest, release_sha, summary, kit.files).encode())
        _place(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return {**summary, "files": len(kit.files) + 1}


def verify_eval_kit(folder: Path) -> list[str]:
    """Problems of a kit folder against its MANIFEST.json (missing, changed or unlisted files)."""
    folder = Path(folder)
    try:
        listed: dict[str, str] = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        return [f"{MANIFEST}: unreadable ({type(exc).__name__})"]
    problems = []
    for rel, sha in sorted(listed.items()):
        p = folder / rel
        if not p.is_file():
            problems.append(f"{rel}: listed in {MANIFEST} but missing")
        elif sha256_file(p) != sha:
            problems.append(f"{rel}: sha256 differs from {MANIFEST}")
    on_disk = [rel for rel in release_files(folder) if rel != MANIFEST]
    problems += [f"{rel}: not listed in {MANIFEST}" for rel in on_disk if rel not in listed]
    return problems
