"""results.json (schemas.results.Results): a scoring run's systems, metrics, scopes, cells, paired tests,
settings, versions and config digest, built from the same board and paired tests as leaderboard.csv and
paired_tests.csv (docs/results.md)."""

from __future__ import annotations

import hashlib
import json
import math
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd

from schemas.results import Results
from tasks.score import registry
from tasks.score.leaderboard.core import PRIMARY, REFERENCE, SCOPE_LABELS, metric_order, scope_order
from tasks.score.leaderboard.render import board_order

__all__ = ["build_results", "frame_version", "read_results", "request_sha256"]


def frame_version() -> str:
    try:
        return metadata.version("frame-bench")
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown"


def request_sha256(request: dict[str, Any]) -> str:
    """The config digest of a run without a config file: sha256 of its request (systems' identities,
    metrics, settings, judge roles) as canonical JSON."""
    return hashlib.sha256(json.dumps(request, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def _num(x: Any) -> float | None:
    """A float of a table cell, None where it is undefined (NaN)."""
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


def _int(x: Any) -> int | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else int(x)


def _cells(board: pd.DataFrame) -> list[dict]:
    primary = board.attrs.get("primary") or {}
    rows = [*board.to_dict("records"), *((r | {"metric": PRIMARY}) for r in primary.get("rows", []))]
    keys = ("n_undefined", "own_n")
    return [
        {"system": str(r["system"]), "scope": str(r["scope"]), "metric": str(r["metric"]), "n": int(r["n"])}
        | {k: _int(r.get(k)) for k in keys}
        | {k: _num(r.get(k)) for k in ("mean", "ci_low", "ci_high", "own_mean")}
        for r in rows
    ]


def _scored_counts(run: Any) -> dict[str, dict]:
    """A run without the score flow's generation summary (a ScoreRun built by hand): k/n from its scores."""
    n = len(run.instances)
    got = {s: len({inst["instance_id"] for inst, sys_, _ in run.results if sys_ == s}) for s in run.systems}
    return {s: {"instances": n, "generated": k, "failed": n - k, "withheld": 0} for s, k in got.items()}


def _systems(run: Any, baselines: list[str]) -> list[dict]:
    identities = run.extra.get("system_identities") or {}
    generation = run.extra.get("generation") or _scored_counts(run)
    out = []
    for name in run.systems:
        identity = identities.get(name) or {}
        g = generation.get(name) or {}
        out.append(
            {"name": name, "kind": str(identity.get("kind", "builtin")), "identity": identity}
            | {k: g.get(k) for k in ("instances", "generated", "failed", "withheld")}
            | {"failed_samples": g.get("failed_samples") or 0}
            | {"first_instance": g.get("first_instance"), "first_error": g.get("first_error")}
            | {"baseline": name in baselines, "reference": name == REFERENCE}
        )
    return out


def _scopes(board: pd.DataFrame) -> list[dict]:
    n = (board["n"] + board["n_undefined"]).groupby(board["scope"]).max() if len(board) else {}
    return [
        {"name": s, "label": SCOPE_LABELS.get(s, s), "instances": int(n[s])}
        for s in scope_order(board["scope"].unique())
    ]


def build_results(
    run: Any,
    tables: tuple[pd.DataFrame, pd.DataFrame],
    manifest: dict[str, Any],
    baselines: list[str],
    sampling: pd.DataFrame | None = None,
) -> Results:
    """The Results of a run (tasks.score.outputs.ScoreRun), its board and paired tests
    (leaderboard_tables), the manifest it writes beside them and its baseline systems."""
    board, paired = tables
    metrics = metric_order(board["metric"].unique()) if len(board) else list(run.selection)
    lower = registry.lower_is_better()
    primary = {k: v for k, v in (board.attrs.get("primary") or {}).items() if k != "rows"}
    request = {
        "systems": run.extra.get("system_identities"),
        "metrics": run.selection,
        "settings": manifest["settings"],
        "llm": run.llm,
    }
    data = {
        "release": manifest["release"],
        "systems": _systems(run, baselines),
        "metrics": [
            {"name": m, "direction": "lower" if m in lower else "higher", "range": registry.metric_range(m)}
            for m in metrics
        ],
        "scopes": _scopes(board),
        "primary": primary,
        "order": board_order(board, None, run.extra.get("generation")),
        "cells": _cells(board),
        "common": board.attrs.get("common") or {"instances": 0, "of": 0, "left_out": []},
        "pairs": run.pairs,
        "paired": [
            {k: (_num(v) if isinstance(v, float) else v) for k, v in r.items()}
            for r in paired.to_dict("records")
        ],
        "settings": run.settings,
        "bootstrap": board.attrs.get("bootstrap") or {},
        "judges": run.llm,
        "versions": {
            "frame": frame_version(),
            "release": manifest["release"],
            "release_manifest_sha256": manifest.get("release_manifest_sha256"),
            "scoring_code": run.scoring_code,
        },
        "config_sha256": run.config_sha256 or request_sha256(request),
        "started_at": run.extra.get("started_at") or manifest["scored_at"],
        "scored_at": manifest["scored_at"],
        "subset": run.extra.get("subset"),
        "sampling": _sampling(sampling),
    }
    return Results.model_validate(data)


def _sampling(table: pd.DataFrame | None) -> list[dict]:
    """The `--epochs` table (tasks.score.leaderboard.epochs.sampling) as rows, NaN as null; none when
    every system was sampled once."""
    if table is None or not len(table) or int(table["samples"].max()) <= 1:
        return []
    rows = table.to_dict("records")
    plain = [
        {k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()} for r in rows
    ]  # numpy scalars
    return [{k: (_num(v) if isinstance(v, float) else v) for k, v in r.items()} for r in plain]


def read_results(folder: Path) -> Results:
    """The results.json of a scoring run's output folder."""
    return Results.model_validate_json((Path(folder) / "results.json").read_text(encoding="utf-8"))
