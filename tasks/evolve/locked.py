"""The record of a release's locked evaluations (paper 003 section 5: the locked split is tested once).

Every evaluation of the locked split appends a line to `<release>/../<version>.locked_evaluations.jsonl`,
beside the splits file and kept when the splits are drawn again. A second evaluation of the same locked
instances with the same skill and a system evaluated before is refused unless asked for again."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path
from typing import Any

from schemas.evolve import Splits
from tasks.atomic import atomic_write_text
from tasks.errors import FrameInputError
from tasks.locks import hold

__all__ = ["locked_entry", "locked_records_path", "read_locked_records", "record_locked", "refuse_repeat"]


def locked_records_path(release: Path) -> Path:
    """data/releases/<name>/<version> -> data/releases/<name>/<version>.locked_evaluations.jsonl."""
    release = Path(release)
    return release.parent / f"{release.name}.locked_evaluations.jsonl"


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def locked_entry(
    splits: Splits, skill_sha256: str, systems: dict[str, Any], metrics: list[str], result: Path
) -> dict[str, Any]:
    """What one locked evaluation is: the locked instances (a digest of their ids), the skill, each system
    (a digest of its identity: another model or prompt is another system), the metrics and the result."""
    return {
        "release": f"{splits.release}/{splits.version}",
        "seed": splits.seed,
        "locked_sha256": _digest(sorted(splits.instances["locked"])),
        "locked_instances": len(splits.instances["locked"]),
        "skill_sha256": skill_sha256,
        "systems": {name: _digest(identity) for name, identity in sorted(systems.items())},
        "metrics": list(metrics),
        "result": str(result),
    }


def read_locked_records(release: Path) -> list[dict[str, Any]]:
    """The release's locked evaluations, oldest first (none yet: [])."""
    path = locked_records_path(release)
    if not path.is_file():
        return []
    records = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict):
            raise FrameInputError(f"{path}:{n}", "not a locked-evaluation record (a JSON object per line)")
        records.append(record)
    return records


def refuse_repeat(release: Path, entry: dict[str, Any], again: bool) -> None:
    """FrameInputError (one line: when, for which system, and `--again`) when `entry`'s skill was already
    evaluated on the same locked instances for one of its systems, unless `again`."""
    if again:
        return
    for old in read_locked_records(release):
        if (
            old.get("locked_sha256") != entry["locked_sha256"]
            or old.get("skill_sha256") != entry["skill_sha256"]
        ):
            continue
        seen = old.get("systems") or {}
        same = sorted(n for n, ident in entry["systems"].items() if seen.get(n) == ident)
        if same:
            raise FrameInputError(
                "--evaluate",
                f"skill {entry['skill_sha256'][:12]} was already evaluated on this locked split for "
                f"{', '.join(same)} at {old.get('at', '?')} ({old.get('result', '?')}): "
                "pass --again to evaluate it again",
            )


def record_locked(release: Path, entry: dict[str, Any], again: bool) -> Path:
    """Append `entry` (stamped now, with `again`) to the release's record, atomically (the whole file is
    rewritten: a crash leaves the old record, never a torn line)."""
    path = locked_records_path(release)
    # read-modify-write: two evaluations finishing together must not drop one record
    lock = release.parent.parent / ".locks" / f"{release.parent.name}-{release.name}-locked.lock"
    with hold(lock, 600.0, f"locked-evaluation record of {release.parent.name} {release.name}"):
        old = path.read_text(encoding="utf-8") if path.is_file() else ""
        if old and not old.endswith("\n"):
            old += "\n"
        at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        line = json.dumps({"at": at, **entry, "again": again}, sort_keys=True, ensure_ascii=False)
        return atomic_write_text(path, old + line + "\n")
