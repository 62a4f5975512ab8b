"""Repeated samples (`--epochs K`): a system sampled with a temperature > 0 writes K reports per instance,
each scored (a row per sample in scores.parquet, column ``epoch``). The leaderboard stays per instance:
``per_instance`` folds a system's samples into one row per (instance, system, metric) whose value is
the mean of the samples' defined values, so the bootstrap CIs and paired tests resample instances as
before. ``sampling`` gives, per system and metric, the samples per instance, the mean and its CI (the
board's Overall cell: same values, same seed) and the sampling variance: the mean over instances of the
variance of the metric across one instance's samples (ddof = 1, over instances with two defined values
or more). ``sampling_markdown`` renders it under the board (nothing when every system was sampled once).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tasks.score.leaderboard.core import (
    OVERALL,
    bootstrap_ci,
    cell_seed,
    metric_order,
    skipped_periods,
)

__all__ = ["SAMPLING_COLUMNS", "per_instance", "sampling", "sampling_markdown"]

SAMPLING_COLUMNS = ("system", "metric", "samples", "n", "mean", "ci_low", "ci_high", "sampling_variance")
_KEY = ["instance_id", "system", "metric"]


def _epochs(scores: pd.DataFrame) -> pd.Series:
    if "epoch" not in scores.columns:
        return pd.Series(0, index=scores.index)
    return pd.to_numeric(scores["epoch"], errors="coerce").fillna(0).astype(int)


def per_instance(scores: pd.DataFrame) -> pd.DataFrame:
    """One row per (instance, system, metric): the first sample's row with ``value`` the mean of the
    samples' defined values (NaN when none is defined). A table sampled once is returned as is."""
    epochs = _epochs(scores)
    if scores.empty or not (epochs > 0).any():
        return scores
    df = scores.assign(epoch=epochs, value=pd.to_numeric(scores["value"], errors="coerce").astype(float))
    means = df.groupby(_KEY, sort=False)["value"].mean()  # NaN skipped; all NaN -> NaN
    first = df.sort_values("epoch", kind="mergesort").drop_duplicates(_KEY).set_index(_KEY)
    first["value"] = means.reindex(first.index)
    return first.reset_index()[list(scores.columns)]


def sampling(scores: pd.DataFrame, *, seed: int = 0, n_resamples: int = 2000) -> pd.DataFrame:
    """Per (system, metric) of a table with repeated samples: SAMPLING_COLUMNS (empty when every
    system was sampled once). The CI is the board's Overall one (instances between skipped periods
    left out, per-instance means in instance order, the cell's seed)."""
    epochs = _epochs(scores)
    if scores.empty or not (epochs > 0).any():
        return pd.DataFrame(columns=list(SAMPLING_COLUMNS))
    df = scores.assign(epoch=epochs, value=pd.to_numeric(scores["value"], errors="coerce").astype(float))
    df = df[~skipped_periods(df)]
    rows = []
    for (system, metric), cell in df.groupby(["system", "metric"], sort=True):
        within = cell.groupby("instance_id")["value"].agg(
            lambda v: v.var(ddof=1) if v.notna().sum() > 1 else np.nan
        )
        means = cell.groupby("instance_id")["value"].mean().sort_index()
        defined = means.dropna().to_numpy(dtype=float)
        mean, low, high = bootstrap_ci(
            defined, n_resamples=n_resamples, seed=cell_seed(seed, str(system), OVERALL, str(metric))
        )
        rows.append(
            {
                "system": system,
                "metric": metric,
                "samples": int(cell["epoch"].max()) + 1,
                "n": int(defined.size),
                "mean": mean,
                "ci_low": low,
                "ci_high": high,
                "sampling_variance": float(within.mean()) if within.notna().any() else math.nan,
            }
        )
    return pd.DataFrame(rows, columns=list(SAMPLING_COLUMNS))


def _num(x: float, digits: int = 3) -> str:
    return "n/a" if x is None or math.isnan(x) else f"{x:.{digits}f}"


def sampling_markdown(table: pd.DataFrame) -> str:
    """The repeated-samples section of leaderboard.md ("" when no system was sampled more than once)."""
    if table.empty or int(table["samples"].max()) < 2:
        return ""
    k = int(table["samples"].max())
    lines = [
        "",
        f"## Repeated samples (--epochs {k})",
        "",
        "A system sampled with a temperature > 0 wrote several reports per instance, each scored; its "
        "per-instance score above is the mean over its samples, so the CIs and paired tests stay per "
        "instance. Sampling variance: the mean over instances of the variance of the metric across one "
        "instance's samples (ddof 1). Systems whose report is fixed (temperature 0, builtins, programs, "
        "submissions) are sampled once.",
        "",
        "| System | Samples | Metric | n | Mean | 95% CI | Sampling variance |",
        "|---|---:|---|---:|---:|---|---:|",
    ]
    order = {m: i for i, m in enumerate(metric_order(table["metric"]))}
    ranked = table.assign(_m=table["metric"].map(order)).sort_values(["system", "_m"], kind="mergesort")
    for r in ranked.itertuples():
        ci = f"[{_num(r.ci_low)}, {_num(r.ci_high)}]"
        var = _num(r.sampling_variance, 5) if r.samples > 1 else "— (sampled once)"
        system = str(r.system).replace("|", "\\|")
        lines.append(f"| {system} | {r.samples} | {r.metric} | {r.n} | {_num(r.mean)} | {ci} | {var} |")
    return "\n".join(lines) + "\n"
