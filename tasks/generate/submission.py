"""Reports produced outside frame (a `submission` system), read and checked before anything is scored.

Three layouts: a JSONL file (one object per line: instance_id, markdown), a parquet file with those two
columns, or a folder of Markdown files named as `frame generate` names its reports
(`report_file_name(instance_id)` + ".md"). `load_submission` returns the reports it could use and one
problem line per defect, each naming the file and the instance (or the line/row): unknown instance id,
missing instance, duplicate, empty or oversized report, not UTF-8, unreadable line or row, a report file
that leads outside the folder (a symbolic link) or is not a regular file (a FIFO, device or socket is
never opened, so never blocks), read with tasks.files.
"""

from __future__ import annotations

import codecs
import json
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tasks.files import NotRegularFile, file_kind, open_regular, read_regular, within
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


def _open_file(path: Path, out: _Collector) -> int | None:
    """A descriptor of the submission file (a regular file, never a FIFO or device), or None and a problem."""
    try:
        return open_regular(path)
    except NotRegularFile as exc:
        out.problem(f"{exc}: refused")
    except OSError as exc:
        out.problem(f"unreadable ({exc.strerror or exc})")
    out.unreadable = True
    return None


def _jsonl(path: Path, out: _Collector) -> None:
    fd = _open_file(path, out)
    if fd is None:
        return
    try:
        with os.fdopen(fd, "rb") as fh:
            raw = fh.read()
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

    fd = _open_file(path, out)
    if fd is None:
        return
    try:
        with os.fdopen(fd, "rb") as fh:
            parquet = pq.ParquetFile(fh)
            missing = [c for c in ("instance_id", "markdown") if c not in parquet.schema_arrow.names]
            if missing:
                out.problem(f"missing column {missing[0]!r} (a submission has instance_id and markdown)")
                out.unreadable = True
                return
            table = parquet.read(columns=["instance_id", "markdown"])
        # markdown as raw bytes: a column of invalid UTF-8 is reported per row, not as one failure
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


def _target(f: Path, root: str) -> tuple[str | None, str | None]:
    """Where the folder entry `f` really is: (path to read, None); (None, why it is refused) for a
    symbolic link that leads outside the folder `root` (resolved); (None, None) for a folder (skipped)."""
    try:
        if stat.S_ISDIR(os.lstat(f).st_mode):
            return None, None
        real = os.path.realpath(f)
        if not within(real, root):
            return None, f"a symbolic link to {real}, outside the submission folder: refused"
        if stat.S_ISDIR(os.stat(real).st_mode):
            return None, None
    except OSError:
        return str(f), None  # gone or unreadable: reading it names the problem
    return real, None


def _folder(path: Path, instance_ids: list[str] | None, out: _Collector) -> None:
    root = os.path.realpath(path)
    targets = {p: _target(p, root) for p in sorted(path.iterdir()) if p.suffix == ".md"}
    files = [p for p, (real, refused) in targets.items() if real is not None or refused is not None]
    names: dict[str, list[str]] = {}
    for iid in instance_ids or []:
        names.setdefault(report_file_name(iid), []).append(iid)
    # at most this many bytes are read of a report: more is over max_chars whatever the encoding
    limit = 4 * out.max_chars + len(codecs.BOM_UTF8)
    for f in files:
        owners = names.get(f.stem, [] if instance_ids is not None else [f.stem])
        if len(owners) > 1:
            out.problem(f"file name is ambiguous (instances {', '.join(owners)})", f)
            continue
        if not owners:
            out.problem("unknown instance id (the file name matches no instance of the release)", f)
            continue
        real, refused = targets[f]
        if real is None:
            out.bad(owners[0], str(refused), f.name, f)
            continue
        try:
            raw = read_regular(real, limit + 1, root)
            if len(raw) > limit:
                size = f"report of more than {out.max_chars} characters (max_chars {out.max_chars})"
                out.bad(owners[0], size, f.name, f)
                continue
            text = raw.decode("utf-8-sig")
        except NotRegularFile as exc:
            out.bad(owners[0], f"{exc}: refused", f.name, f)
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
    try:
        mode = os.stat(path).st_mode  # a link to the user's own file or folder is followed
    except FileNotFoundError:
        return {}, [f"{path}: not found"]
    except OSError as exc:
        return {}, [f"{path}: unreadable ({exc.strerror or exc})"]
    if stat.S_ISDIR(mode):
        _folder(path, ids, out)
    elif not stat.S_ISREG(mode):  # a FIFO or device would block or never end: never opened
        return {}, [f"{path}: not a regular file or folder ({file_kind(mode)}): refused"]
    elif path.suffix.lower() in JSONL_SUFFIXES:
        _jsonl(Path(os.path.realpath(path)), out)
    elif path.suffix.lower() == ".parquet":
        _parquet(Path(os.path.realpath(path)), out)
    else:
        return {}, [f"{path}: not a submission (a .jsonl or .parquet file, or a folder of .md files)"]
    if ids is not None and not allow_missing and not out.unreadable:
        for iid in ids:
            if iid not in out.where:
                out.problem(f"instance {iid}: missing (no report for this instance)")
    return out.reports, out.problems
