"""Reading a scores folder for the diagnostic pages: scores, evidence, manifest, Bradley-Terry and
pairwise tables, each checked for the columns the pages need.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from tasks.errors import FrameInputError
from tasks.score.leaderboard.epochs import per_instance

REQUIRED_SCORES: tuple[str, ...] = ("instance_id", "category", "system", "metric", "value")
REQUIRED_EVIDENCE: tuple[str, ...] = ("instance_id", "system", "metric", "kind", "text", "score")
REQUIRED_PAIRWISE: tuple[str, ...] = ("system_a", "system_b", "vote")
REQUIRED_BT: tuple[str, ...] = ("system", "score")


@dataclass
class _Folder:
    path: Path
    scores: pd.DataFrame
    evidence: pd.DataFrame | None
    manifest: dict[str, Any]
    bt: pd.DataFrame | None
    pairwise: pd.DataFrame | None
    written: str = ""  # when the pages are written (UTC)


def _one_line(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}"


def _check_columns(path: Path, df: pd.DataFrame, required: Sequence[str]) -> None:
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise FrameInputError(
            path, f"lacks column(s) {', '.join(missing)} (has: {', '.join(map(str, df.columns))})"
        )


def _read_parquet(path: Path, required: Sequence[str]) -> pd.DataFrame:
    try:
        df = pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several types for a bad file
        raise FrameInputError(path, f"cannot be read as parquet ({_one_line(exc)})") from exc
    _check_columns(path, df, required)
    return df


def _iso(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _load(scores_dir: Path) -> _Folder:
    scores_dir = Path(scores_dir)
    path = scores_dir / "scores.parquet"
    if not path.is_file():
        raise FrameInputError(path, "not found: point --scores at a folder written by `frame score`")
    scores = _read_parquet(path, REQUIRED_SCORES)
    if scores.empty:
        raise FrameInputError(path, "has no rows")
    scores = per_instance(scores).copy()  # `--epochs`: one row per instance, the mean of its samples
    for c in ("instance_id", "system", "metric"):
        scores[c] = scores[c].astype(str)
    scores["category"] = scores["category"].fillna("").astype(str)
    scores["judge"] = scores["judge"].fillna("").astype(str) if "judge" in scores.columns else ""
    scores["value"] = pd.to_numeric(scores["value"], errors="coerce").astype(float)
    dup = scores.duplicated(["instance_id", "system", "metric"], keep=False)
    if dup.any():
        ex = scores.loc[dup, ["instance_id", "system", "metric"]].iloc[0].tolist()
        raise FrameInputError(
            path, f"{int(dup.sum())} duplicate (instance_id, system, metric) rows, e.g. {ex}"
        )

    manifest: dict[str, Any] = {}
    mpath = scores_dir / "manifest.json"
    if mpath.is_file():
        try:
            manifest = json.loads(mpath.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise FrameInputError(mpath, f"cannot be read as JSON ({_one_line(exc)})") from exc
        if not isinstance(manifest, dict):
            raise FrameInputError(mpath, "is not a JSON object")

    evidence = None
    epath = scores_dir / "evidence.parquet"
    if epath.is_file():
        evidence = _read_parquet(epath, REQUIRED_EVIDENCE).copy()
        for c in ("instance_id", "system", "metric", "kind", "text"):
            evidence[c] = evidence[c].fillna("").astype(str)
        for c in ("evidence", "evidence_ref", "rationale", "source"):
            evidence[c] = evidence[c].fillna("").astype(str) if c in evidence.columns else ""
        if "index" not in evidence.columns:
            evidence["index"] = range(len(evidence))
        evidence["score"] = pd.to_numeric(evidence["score"], errors="coerce").astype(float)

    bt = None
    bpath = scores_dir / "bradley_terry.csv"
    if bpath.is_file():
        try:
            bt = pd.read_csv(bpath)
        except Exception as exc:
            raise FrameInputError(bpath, f"cannot be read as CSV ({_one_line(exc)})") from exc
        _check_columns(bpath, bt, REQUIRED_BT)
        bt["system"] = bt["system"].astype(str)

    pairwise = None
    ppath = scores_dir / "pairwise.parquet"
    if ppath.is_file():
        pairwise = _read_parquet(ppath, REQUIRED_PAIRWISE).copy()
        for c in ("system_a", "system_b"):
            pairwise[c] = pairwise[c].astype(str)
        pairwise["vote"] = pairwise["vote"].fillna("").astype(str).str.strip().str.lower()
    return _Folder(scores_dir, scores, evidence, manifest, bt, pairwise, _iso(dt.datetime.now(dt.UTC)))
