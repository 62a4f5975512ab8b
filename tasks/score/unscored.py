"""A scoring run in which a requested system produced no report at all (every generation failed).

Its failures are recorded per instance (manifest `generation_failures`, its generations.parquet), the
other systems are scored as usual, leaderboard.md keeps its column (no scores) and says why it has none
(`say_unscored`), the manifest lists it under `unscored_systems`, every output is written (empty tables
when no system was scored: tasks.score.outputs.write_outputs), and `UnscoredSystems` ends the flow.
Every system's "generated k/n" (`generation_summary`) is on the board and in results.json; `frame score`
prints one line per system with failures (`summary_line`) and exits 1 past `--max-failures`
(`failed_systems`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tasks.atomic import atomic_write_text

__all__ = [
    "UnscoredSystems",
    "failed_systems",
    "generation_summary",
    "summary_line",
    "read_unscored",
    "say_unscored",
    "unscored",
    "unscored_text",
]


class UnscoredSystems(RuntimeError):
    """Raised by `score_release` after a run that wrote its outputs but in which a requested system
    produced no report at all (every generation failed). The message is one line naming each such system
    and its first error; `folder` is the output folder, `unscored` the manifest's `unscored_systems`."""

    def __init__(self, folder: str, unscored: dict[str, dict]) -> None:
        self.folder, self.unscored = str(folder), unscored
        items = list(unscored.items())
        if len(items) == 1:
            head = f"{items[0][0]} produced no report ({unscored_text(items[0][1])})"
        else:
            listed = "; ".join(f"{n} ({unscored_text(u)})" for n, u in items)
            head = f"{len(items)} systems produced no report: {listed}"
        super().__init__(f"{head}; outputs written to {self.folder}")

    def __reduce__(self):  # pickles (a Dask worker, a result store) with its fields
        return (type(self), (self.folder, self.unscored))


_ERROR_CHARS = 300  # of a generation error quoted in one line


def unscored_text(u: dict) -> str:
    error = " ".join(str(u.get("first_error") or "no report").split())
    if len(error) > _ERROR_CHARS:
        error = error[:_ERROR_CHARS] + " ..."
    where = f"{u['first_instance']}: " if u.get("first_instance") else ""
    return f"{u['failed']} of {u['instances']} generation(s) failed, first: {where}{error}"


def read_unscored(folder: Path) -> dict[str, dict]:
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    found = manifest.get("unscored_systems") if isinstance(manifest, dict) else None
    return found if isinstance(found, dict) else {}


def unscored(
    systems: dict[str, Any], generated: dict[str, dict[str, str]], failed: list[dict], n: int
) -> dict[str, dict]:
    """{system: {instances, failed, first_instance, first_error}} for each requested system that produced
    no report for any of the `n` instances (its failed generations in release order)."""
    out: dict[str, dict] = {}
    for name, system in systems.items():
        if system is None or not n or generated.get(name):
            continue
        mine = [f for f in failed if f["system"] == name]
        first = mine[0] if mine else {"instance_id": "", "error": "no report"}
        out[name] = {
            "instances": n,
            "failed": len(mine),
            "first_instance": first["instance_id"],
            "first_error": first["error"],
        }
    return out


def generation_summary(
    systems: dict[str, Any],
    generated: dict[str, dict[str, str]],
    failed: list[dict],
    n: int,
    withheld: dict[str, list[str]] | None = None,
) -> dict[str, dict]:
    """{system: {instances, generated, failed, failed_samples, withheld, first_instance, first_error}} for
    every requested system, gold included (n of n): "generated k/n" on the board and in results.json.
    `instances` leaves out a kit submission's `withheld` instances (never asked of it, not failures)."""
    out: dict[str, dict] = {}
    for name in systems:
        # `--epochs`: k/n counts instances (their first sample); a later sample's failure is counted apart
        every = [f for f in failed if f["system"] == name]
        mine = [f for f in every if not f.get("epoch")]
        left = len((withheld or {}).get(name, []))
        out[name] = {
            "instances": n - left,
            "generated": len(generated.get(name, {})),
            "failed": len(mine),
            "failed_samples": len(every),
            "withheld": left,
            "first_instance": mine[0]["instance_id"] if mine else None,
            "first_error": mine[0]["error"] if mine else None,
        }
    return out


def failed_systems(summary: dict[str, dict], max_failures: float = 0.0) -> dict[str, dict]:
    """The systems of a `generation_summary` whose failure share (failed / instances) exceeds
    `max_failures` (a share in [0, 1]; 0: any failure counts)."""
    out = {}
    for name, g in summary.items():
        total = int(g.get("instances") or 0)
        bad = total - int(g.get("generated") or 0)
        if total and bad and bad / total > max_failures:
            out[name] = g
    return out


def summary_line(name: str, g: dict) -> str:
    """One line for a system with failed generations: "<system>: generated k/n: <instance>: <error>"."""
    error = " ".join(str(g.get("first_error") or "no report").split())
    if len(error) > _ERROR_CHARS:
        error = error[:_ERROR_CHARS] + " ..."
    where = f"{g['first_instance']}: " if g.get("first_instance") else ""
    return f"{name}: generated {g['generated']}/{g['instances']}: {where}{error}"


def say_unscored(board: Path, unscored: dict[str, dict]) -> None:
    """Say in leaderboard.md, under its title and summary line, which systems are left out and why."""
    lines = board.read_text(encoding="utf-8").split("\n")
    note = [
        "",
        "**Not scored** (every generation failed; each failure is listed in manifest.json "
        "`generation_failures` and in the system's generations.parquet):",
        "",
        *(f"- {name}: {unscored_text(u)}" for name, u in unscored.items()),
    ]
    at = next((i + 1 for i, ln in enumerate(lines) if i > 0 and ln.strip()), len(lines))  # after the summary
    atomic_write_text(board, "\n".join(lines[:at] + note + lines[at:]))
