"""Reading one `frame score` output folder for the viewer: its scores, evidence, leaderboard and
manifest, the release's instances (S, Y, category) and each system's reports as scored.

The reports are those `frame score` wrote to data/generations/<release>/<version>/<system>/ (gold's is
Y); when they no longer hash to the manifest's `generations_sha256`, the run says so on its pages.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from tasks.errors import FrameInputError
from tasks.generate.runs import runs_folder
from tasks.score.diagnostic.analysis import GOLD
from tasks.score.diagnostic.load import _check_columns, _load, _one_line

__all__ = ["GOLD", "Run", "load_run"]

LEADERBOARD_COLUMNS = ("system", "scope", "metric", "mean")


@dataclass
class Run:
    """What the pages show. `reports[system][instance_id]` is the report's Markdown (Y for gold),
    `errors[system][instance_id]` why a generation failed; `notes` are run-level warnings."""

    scores: pd.DataFrame
    evidence: pd.DataFrame
    leaderboard: pd.DataFrame
    manifest: dict[str, Any]
    instances: pd.DataFrame  # instance_id, category, sample_markdown, target_markdown, ...
    systems: list[str]  # leaderboard order (gold first), then systems with no row there
    metrics: list[str]
    reports: dict[str, dict[str, str]] = field(default_factory=dict)
    errors: dict[str, dict[str, str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _release_of(run_dir: Path, manifest: dict[str, Any], release: Path | None) -> Path:
    """The release folder: `release` when given, else data/releases/<manifest's release> beside the run's
    data folder (data/scores/<name>/<version>)."""
    if release is not None:
        if not (release / "instances.parquet").is_file():
            raise FrameInputError(
                release / "instances.parquet", "missing: --release is not a frame release folder"
            )
        return release
    named = manifest.get("release")
    if not isinstance(named, str) or named.count("/") != 1:
        raise FrameInputError(
            run_dir / "manifest.json", "has no field 'release' (<name>/<version>): give --release PATH"
        )
    guess = run_dir.resolve().parents[2] / "releases" / named
    if not (guess / "instances.parquet").is_file():
        raise FrameInputError(
            run_dir / "manifest.json", f"names release {named}, not found at {guess}: give --release PATH"
        )
    return guess


def _leaderboard(run_dir: Path, scores: pd.DataFrame) -> pd.DataFrame:
    path = run_dir / "leaderboard.csv"
    if not path.is_file():  # an older run: overall means from the scores
        g = scores.groupby(["system", "metric"])["value"]
        lb = g.mean().rename("mean").reset_index().assign(scope="overall", n=g.count().to_numpy())
        return lb
    try:
        lb = pd.read_csv(path)
    except Exception as exc:  # pandas raises several types for a bad file
        raise FrameInputError(path, f"cannot be read as CSV ({_one_line(exc)})") from exc
    _check_columns(path, lb, LEADERBOARD_COLUMNS)
    return lb.astype({"system": str, "scope": str, "metric": str})


def _reports(run: Run, release: Path, run_dir: Path) -> None:
    """Each system's reports from its generations folder; gold's are Y."""
    run.reports[GOLD] = dict(zip(run.instances["instance_id"], run.instances["target_markdown"], strict=True))
    digests = run.manifest.get("generations_sha256") or {}
    for system in run.systems:
        if system == GOLD:
            continue
        folder = runs_folder(release, system)
        path = folder / "generations.parquet"
        if not path.is_file():
            run.notes.append(
                f"{system}: no reports found ({system}/generations.parquet under the data folder)"
            )
            continue
        try:
            gens = pd.read_parquet(path)
        except Exception as exc:
            raise FrameInputError(path, f"cannot be read as parquet ({_one_line(exc)})") from exc
        _check_columns(path, gens, ("instance_id", "markdown", "error"))
        gens = gens[_this_run(gens, run.manifest)]
        ok = gens[gens["error"].isna()]
        run.reports[system] = dict(
            zip(ok["instance_id"].astype(str), ok["markdown"].astype(str), strict=True)
        )
        bad = gens[gens["error"].notna()]
        run.errors[system] = dict(zip(bad["instance_id"].astype(str), bad["error"].astype(str), strict=True))
        # the score flow's digest of what it scored (flows.generate.generate_for_scoring)
        now = hashlib.sha256(json.dumps(run.reports[system], sort_keys=True).encode()).hexdigest()
        if system in digests and digests[system] != now:
            run.notes.append(
                f"{system}: its reports changed since this scoring run (generations_sha256 differs): "
                "the reports shown are the current ones"
            )


def _this_run(gens: pd.DataFrame, manifest: dict) -> pd.Series:
    """The rows of a generations table that the run scored: the first sample (`--epochs`: the one the
    scoring run's digest covers) of its instances (a --limit run's subset, else every instance)."""
    keep = gens["epoch"] == 0 if "epoch" in gens else pd.Series(True, index=gens.index)
    subset = (manifest.get("subset") or {}).get("instance_ids")
    return keep & gens["instance_id"].astype(str).isin(set(subset)) if subset else keep


def load_run(run_dir: Path, release: Path | None = None) -> Run:
    """The scoring run in `run_dir` (a folder `frame score` wrote) with its release (`release`, or the one
    its manifest names in the same data folder)."""
    run_dir = Path(run_dir)
    if not (run_dir / "scores.parquet").is_file():
        raise FrameInputError(
            run_dir / "scores.parquet", "not found: RUN_DIR must be a folder written by `frame score`"
        )
    folder = _load(run_dir)
    rel = _release_of(run_dir, folder.manifest, release)
    inst = pd.read_parquet(rel / "instances.parquet")
    _check_columns(
        rel / "instances.parquet", inst, ("instance_id", "category", "sample_markdown", "target_markdown")
    )
    inst = inst.astype({"instance_id": str})
    # the instances the run scored (a --limit run, a kit that withheld some): the rest have nothing to show
    inst = (
        inst[inst["instance_id"].isin(set(folder.scores["instance_id"]))]
        .sort_values("instance_id", kind="mergesort")
        .reset_index(drop=True)
    )
    scores = folder.scores
    lb = _leaderboard(run_dir, scores)
    order = [*dict.fromkeys([*lb["system"], *(folder.manifest.get("systems") or []), *scores["system"]])]
    systems = [GOLD] * (GOLD in order) + [s for s in order if s != GOLD]
    metrics = [*dict.fromkeys([*(m for m in lb["metric"] if m in set(scores["metric"])), *scores["metric"]])]
    evidence = folder.evidence if folder.evidence is not None else pd.DataFrame(columns=list(_EVIDENCE))
    run = Run(scores, evidence, lb, folder.manifest, inst, systems, metrics)
    missing = sorted(set(scores["instance_id"]) - set(inst["instance_id"]))
    if missing:
        run.notes.append(f"{len(missing)} scored instance(s) are not in the release, e.g. {missing[0]}")
    _reports(run, rel, run_dir)
    return run


_EVIDENCE = (
    "instance_id",
    "system",
    "metric",
    "index",
    "kind",
    "text",
    "source",
    "score",
    "stage",
    "evidence",
    "evidence_ref",
    "rationale",
)
