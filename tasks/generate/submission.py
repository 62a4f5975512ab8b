"""Reports produced outside frame (a `submission` system), read and checked before anything is scored.

Three layouts: a JSONL file (one object per line: instance_id, markdown), a parquet file with those two
columns, or a folder of Markdown files named as `frame generate` names its reports
(`report_file_name(instance_id)` + ".md"). `load_submission` returns the reports it could use and one
problem line per defect, each naming the file and the instance (or the line/row): unknown instance id,
missing instance, duplicate, empty or oversized report, not UTF-8, unreadable line or row.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tasks.release.evalkit import report_file_name

__all__ = ["SUFFIXES", "load_submission", "report_file_name"]

JSONL_SUFFIXES = (".jsonl", ".ndjson")
SUFFIXES = (*JSONL_SUFFIXES, ".parquet")


class _Collector:
    """Reports by instance id plus the problems found on the way, in file order."""

    def __init__(self, source: Path, known: set[str] | None, max_chars: int) -> None:
        self.source = source
        self.known = known
        self.max_chars = max_chars
        self.reports: dict[str, str] = {}
        self.where: dict[str, str] = {}  # instance id -> where its first report was ("line 3")
        self.problems: list[str] = []
        self.unreadable = False  # the whole file: saying every instance is missing would add nothing

    def problem(self, text: str, file: Path | None = None) -> None:
        self.problems.append(f"{file or self.source}: {text}")

    def seen(self, iid: str, where: str, file: Path | None = None) -> bool:
        """Record that `where` holds a report of `iid`; False (and a problem) if it may not be used."""
        if self.known is not None and iid not in self.known:
            self.problem(f"instance {iid}: unknown instance id (not in the release; {where})", file)
            return False
        if iid in self.where:
            self.problem(f"instance {iid}: duplicate ({self.where[iid]} and {where})", file)
            self.reports.pop(iid, None)  # which one is meant is unknown: use neither
            return False
        self.where[iid] = where
        return True

    def bad(self, iid: str, why: str, where: str, file: Path | None = None) -> None:
        """A report of `iid` that cannot be used (it still counts as present, not as missing)."""
        if self.seen(iid, where, file):
            self.problem(f"instance {iid}: {why}", file)

    def add(self, iid: str, markdown: str, where: str, file: Path | None = None) -> None:
        if not self.seen(iid, where, file):
            return
        if not markdown.strip():
            self.problem(f"instance {iid}: empty report", file)
        elif len(markdown) > self.max_chars:
            size = f"report of {len(markdown)} characters (max_chars {self.max_chars})"
            self.problem(f"instance {iid}: {size}", file)
        else:
            self.reports[iid] = markdown


def _jsonl(path: Path, out: _Collector) -> None:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        out.problem(f"unreadable ({exc.strerror or exc})")
        out.unreadable = True
        return
    for n, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            iid = _json_object(line.decode("utf-8", errors="replace")).get("instance_id")
            if isinstance(iid, str) and iid:
                out.bad(iid, f"not UTF-8 (byte {exc.start} of the line)", f"line {n}")
            else:
                out.problem(f"line {n}: not UTF-8 (byte {exc.start})")
            continue
        try:
            row = json.loads(text)
        except json.JSONDecodeError as exc:
            out.problem(f"line {n}: not JSON ({exc.msg} at column {exc.colno})")
            continue
        _row(row, f"line {n}", out)


def _json_object(text: str) -> dict[str, Any]:
    try:
        row = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return row if isinstance(row, dict) else {}


def _row(row: Any, where: str, out: _Collector) -> None:
    if not isinstance(row, dict):
        out.problem(f"{where}: not a JSON object with instance_id and markdown")
        return
    iid, md = row.get("instance_id"), row.get("markdown")
    if not isinstance(iid, str) or not iid:
        out.problem(f"{where}: missing field 'instance_id' (a non-empty string)")
    elif md is None:
        out.bad(iid, f"missing field 'markdown' ({where})", where)
    elif isinstance(md, bytes):
        try:
            out.add(iid, md.decode("utf-8"), where)
        except UnicodeDecodeError as exc:
            out.bad(iid, f"not UTF-8 ({where}, byte {exc.start})", where)
    elif not isinstance(md, str):
        out.bad(iid, f"markdown is not a string ({where})", where)
    else:
        out.add(iid, md, where)


def _parquet(path: Path, out: _Collector) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
        missing = [c for c in ("instance_id", "markdown") if c not in schema.names]
        if missing:
            out.problem(f"missing column {missing[0]!r} (a submission has instance_id and markdown)")
            out.unreadable = True
            return
        # markdown as raw bytes: a column of invalid UTF-8 is reported per row, not as one failure
        table = pq.read_table(path, columns=["instance_id", "markdown"])
        kind = table.schema.field("markdown").type
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):
            as_bytes = pa.binary() if pa.types.is_string(kind) else pa.large_binary()
            table = table.set_column(1, "markdown", table.column("markdown").cast(as_bytes))
        rows = table.to_pylist()
    except (OSError, pa.ArrowException) as exc:
        out.problem(
            f"not a readable parquet file ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
        )
        out.unreadable = True
        return
    for n, row in enumerate(rows):
        _row(row, f"row {n}", out)


def _folder(path: Path, instance_ids: list[str] | None, out: _Collector) -> None:
    files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix == ".md")
    names: dict[str, list[str]] = {}
    for iid in instance_ids or []:
        names.setdefault(report_file_name(iid), []).append(iid)
    for f in files:
        owners = names.get(f.stem, [] if instance_ids is not None else [f.stem])
        if len(owners) > 1:
            out.problem(f"file name is ambiguous (instances {', '.join(owners)})", f)
            continue
        if not owners:
            out.problem("unknown instance id (the file name matches no instance of the release)", f)
            continue
        try:
            text = f.read_bytes().decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            out.bad(owners[0], f"not UTF-8 (byte {exc.start})", f.name, f)
        except OSError as exc:
            out.bad(owners[0], f"unreadable ({exc.strerror or exc})", f.name, f)
        else:
            out.add(owners[0], text, f.name, f)


def load_submission(
    path: str | Path,
    instance_ids: Iterable[str] | None,
    *,
    max_chars: int = 2_000_000,
    allow_missing: bool = False,
) -> tuple[dict[str, str], list[str]]:
    """(reports by instance id, problems) of a submission; see the module docstring.

    `instance_ids` are the release's; None checks the files only (no unknown or missing ids; a folder's
    reports are then keyed by file stem). A report with a problem is left out of the reports."""
    path = Path(path)
    ids = None if instance_ids is None else list(instance_ids)
    out = _Collector(path, None if ids is None else set(ids), max_chars)
    if path.is_dir():
        _folder(path, ids, out)
    elif not path.exists():
        return {}, [f"{path}: not found"]
    elif path.suffix.lower() in JSONL_SUFFIXES:
        _jsonl(path, out)
    elif path.suffix.lower() == ".parquet":
        _parquet(path, out)
    else:
        return {}, [f"{path}: not a submission (a .jsonl or .parquet file, or a folder of .md files)"]
    if ids is not None and not allow_missing and not out.unreadable:
        for iid in ids:
            if iid not in out.where:
                out.problem(f"instance {iid}: missing (no report for this instance)")
    return out.reports, out.problems
