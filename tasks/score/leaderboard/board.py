"""The long-form board (mean and bootstrap CI per system, scope and metric) and the FRAME score that
orders the systems (``primary_scores``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd

from tasks.score import registry
from tasks.score.leaderboard.core import (
    BOARD_COLUMNS,
    CI_METHOD,
    OVERALL,
    PRIMARY,
    PRIMARY_COLUMNS,
    PRIMARY_LABEL,
    PRIMARY_METHOD,
    SKIPPED,
    _checked_scores,
    bootstrap_ci,
    cell_seed,
    metric_order,
    on_common,
    scope_order,
    skipped_periods,
)


def _empty_board() -> pd.DataFrame:
    board = pd.DataFrame({c: pd.Series(dtype=object) for c in BOARD_COLUMNS})
    for c in ("n", "n_undefined", "own_n"):
        board[c] = board[c].astype("int64")
    for c in ("mean", "ci_low", "ci_high", "own_mean"):
        board[c] = board[c].astype(float)
    return board


def _cell_row(key: tuple[str, str, str], cell: pd.DataFrame, seed: int, n_resamples: int, confidence: float):
    """One board row of the cell (system, scope, metric): the mean and bootstrap CI of its defined
    values, ordered by instance_id."""
    system, scope, metric = key
    cell = cell.sort_values(["instance_id"], kind="mergesort")
    vals = cell["value"].to_numpy(dtype=float)
    defined = vals[~np.isnan(vals)]
    mean, low, high = bootstrap_ci(
        defined,
        n_resamples=n_resamples,
        confidence=confidence,
        seed=cell_seed(seed, system, scope, metric),
    )
    judges = sorted({str(j) for j in cell["judge"].dropna() if str(j)})
    return {
        "system": system,
        "scope": scope,
        "metric": metric,
        "n": int(defined.size),
        "n_undefined": int(vals.size - defined.size),
        "mean": mean,
        "ci_low": low,
        "ci_high": high,
        "judges": ";".join(judges),
    }


def _sorted_board(board: pd.DataFrame) -> pd.DataFrame:
    """Rows by system, then scope_order, then metric_order."""
    s_rank = {s: i for i, s in enumerate(scope_order(board["scope"]))}
    m_rank = {m: i for i, m in enumerate(metric_order(board["metric"]))}
    return (
        board.assign(_s=board["scope"].map(s_rank), _m=board["metric"].map(m_rank))
        .sort_values(["system", "_s", "_m"], kind="mergesort")
        .drop(columns=["_s", "_m"])
        .reset_index(drop=True)
    )


def leaderboard(
    scores: pd.DataFrame,
    *,
    seed: int = 0,
    n_resamples: int = 2000,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Long-form board: one row per (system, scope, metric), scope = "overall" or a category.

    Columns: system, scope, metric, n (instances with a defined value), n_undefined (NaN values
    excluded), mean, ci_low, ci_high, judges (distinct ``judge`` values of the cell, ";"-joined), own_n
    and own_mean (the system's defined values over all its instances, no CI). n, mean and the CI are
    over the instances every system of the table has (``on_common``; they and the ones left out in
    ``board.attrs["common"]``): when a system lacks some, the others are compared on what it has.
    Rows are ordered by system (sorted), scope (``scope_order``), metric (``metric_order``). The
    bootstrap settings are kept in ``board.attrs["bootstrap"]`` for the markdown caption, the primary
    score of each (system, scope) (``primary_scores``, same seed and resamples) in
    ``board.attrs["primary"]`` (its rows under "rows"): ``leaderboard_markdown`` orders the systems by it.

    An instance with no category counts only in "overall"; one whose snapshots skip source periods
    (``periods_skipped`` > 0) only in the scope "skipped_periods". Duplicate (instance_id, system,
    metric) rows (e.g. two judges for one metric) are an error: filter the scores to one judge per metric
    first.
    """
    df = _checked_scores(scores)
    common_df, common = on_common(df)
    long, full = _long(common_df), _long(df)
    keys = ["system", "scope", "metric"]
    on_common_cells = {k: c for k, c in long.groupby(keys, sort=False)}
    rows = [
        _cell_row(k, on_common_cells.get(k, cell.iloc[:0]), seed, n_resamples, confidence) | _own(cell)
        for k, cell in full.groupby(keys, sort=False)
    ]
    board = _sorted_board(pd.DataFrame(rows, columns=list(BOARD_COLUMNS))) if rows else _empty_board()
    board.attrs["bootstrap"] = {
        "method": CI_METHOD,
        "confidence": confidence,
        "n_resamples": n_resamples,
        "seed": seed,
    }
    board.attrs["common"] = common
    primary = _primary_frame(long, seed, n_resamples, confidence)
    own = _own_primary(full, primary.attrs["primary"]["metrics"])
    rows = [r | own.get((r["system"], r["scope"]), {}) for r in primary.to_dict("records")]
    board.attrs["primary"] = {**primary.attrs["primary"], "rows": rows}
    return board


def _own(cell: pd.DataFrame) -> dict:
    """A system's own figures of one (scope, metric): its defined values over all its instances, not only
    the instances every system has (``on_common``)."""
    vals = cell["value"].to_numpy(dtype=float)
    defined = vals[~np.isnan(vals)]
    return {"own_n": int(defined.size), "own_mean": float(defined.mean()) if defined.size else math.nan}


def _own_primary(full: pd.DataFrame, metrics: list[str]) -> dict[tuple[str, str], dict]:
    """{(system, scope): {own_n, own_mean}}: the primary score's mean over all of the system's instances
    (the mean of its metrics' own means; no CI)."""
    if len(metrics) < 2:
        return {}
    out = {}
    for (system, scope), cell in full[full["metric"].isin(metrics)].groupby(["system", "scope"]):
        means = [_own(cell[cell["metric"] == m])["own_mean"] for m in metrics]
        out[(system, scope)] = {
            "own_n": int(cell.dropna(subset=["value"])["instance_id"].nunique()),
            "own_mean": float(np.mean(means)),
        }
    return out


def _long(df: pd.DataFrame) -> pd.DataFrame:
    """The checked scores with a ``scope`` column: every row once as "overall", once as its category;
    a row of an instance that skips periods only once, as SKIPPED (the headline scopes leave it out)."""
    marked = skipped_periods(df)
    head, apart = df[~marked], df[marked]
    overall = head.assign(scope=OVERALL)
    by_cat = head[head["category"].notna()].assign(scope=lambda d: d["category"].astype(str))
    return pd.concat([overall, by_cat, apart.assign(scope=SKIPPED)], ignore_index=True)


def ranking_metrics(metrics: Iterable[str]) -> list[str]:
    """What the primary score is made of: FRAME's three metrics (registry.DEFAULT) among ``metrics``;
    when none of them is there, the first metric in ``metric_order`` alone."""
    present = metric_order(metrics)
    return [m for m in present if m in registry.DEFAULT] or present[:1]


def _primary_cell(vals: np.ndarray, seed: int, n_resamples: int, confidence: float) -> tuple[float, ...]:
    """(n, mean, low, high) of one system and scope: ``vals`` is instances (sorted) x metrics, NaN where
    undefined. mean = the mean over metrics of each metric's mean over its defined values (NaN when a
    metric has none); the CI resamples instances jointly for all metrics (percentile bootstrap)."""
    defined = ~np.isnan(vals)
    n = int(defined.any(axis=1).sum())
    counts = defined.sum(axis=0)
    if vals.size == 0 or (counts == 0).any():
        return (n, math.nan, math.nan, math.nan)
    filled = np.where(defined, vals, 0.0)
    mean = float(np.mean(filled.sum(axis=0) / counts))
    rows = vals.shape[0]
    if rows == 1 or bool(np.all(vals[defined] == vals[defined][0])):
        return (n, mean, mean, mean)
    rng = np.random.default_rng(seed)
    chunk = max(1, 4_000_000 // (rows * vals.shape[1]))  # bounds the memory of one resampling batch
    means = []
    for start in range(0, n_resamples, chunk):
        idx = rng.integers(0, rows, size=(min(chunk, n_resamples - start), rows))
        sums, cnts = filled[idx].sum(axis=1), defined[idx].sum(axis=1)
        per_metric = np.where(cnts > 0, sums / np.maximum(cnts, 1), np.nan)
        means.append(per_metric.mean(axis=1))  # NaN where a resample drew no value of some metric
    boot = np.concatenate(means)
    boot = boot[~np.isnan(boot)]
    if boot.size == 0:
        return (n, mean, math.nan, math.nan)
    tail = (1.0 - confidence) / 2.0
    low, high = (float(x) for x in np.quantile(boot, [tail, 1.0 - tail]))
    return (n, mean, min(low, mean), max(high, mean))  # last-ulp guard, as in bootstrap_ci


def _primary_frame(long: pd.DataFrame, seed: int, n_resamples: int, confidence: float) -> pd.DataFrame:
    metrics = ranking_metrics(long["metric"].unique()) if len(long) else []
    composite = len(metrics) >= 2
    rows = []
    if composite:
        sub = long[long["metric"].isin(metrics)]
        for (system, scope), cell in sub.groupby(["system", "scope"], sort=True):
            wide = cell.pivot(index="instance_id", columns="metric", values="value")
            vals = wide.reindex(columns=metrics).sort_index().to_numpy(dtype=float)
            n, mean, low, high = _primary_cell(
                vals, cell_seed(seed, str(system), str(scope), PRIMARY), n_resamples, confidence
            )
            rows.append(
                {"system": system, "scope": scope, "n": n, "mean": mean, "ci_low": low, "ci_high": high}
            )
    out = pd.DataFrame(rows, columns=list(PRIMARY_COLUMNS))
    out.attrs["primary"] = {
        "metrics": metrics,
        "composite": composite,
        "label": PRIMARY_LABEL if composite else (metrics[0] if metrics else ""),
        "method": PRIMARY_METHOD,
    }
    return out


def primary_scores(
    scores: pd.DataFrame, *, seed: int = 0, n_resamples: int = 2000, confidence: float = 0.95
) -> pd.DataFrame:
    """The FRAME score of each (system, scope): the unweighted mean of the system's means of
    structure, coverage and faithfulness (those scored; ``ranking_metrics``), each over its defined
    values, with a seeded percentile bootstrap CI that resamples the instances jointly for the three
    metrics (seed = ``cell_seed(seed, system, scope, PRIMARY)``). Columns PRIMARY_COLUMNS; n counts
    the instances with at least one defined value. A system lacking every value of one of the metrics
    has no score (NaN). With a single ranking metric there is no composite: the frame is empty and
    ``attrs["primary"]["label"]`` names that metric (the board orders by it directly)."""
    return _primary_frame(_long(_checked_scores(scores)), seed, n_resamples, confidence)
