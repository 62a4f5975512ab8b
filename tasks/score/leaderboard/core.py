"""The leaderboard's shared constants, the seeded bootstrap CI and cell seeds, the scope and metric
orders, and the check of a score table.
"""

from __future__ import annotations

import hashlib
import inspect
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from schemas.domains import category_labels
from schemas.evaluation import BUILTIN_NAMES
from tasks.score import registry

OVERALL = "overall"
# The scope of the instances whose two snapshots have source periods between them (instances
# `periods_skipped` > 0): scored apart, never in Overall, a category, a paired test or a win matrix.
SKIPPED = "skipped_periods"


class _ScopeLabels(Mapping[str, str]):
    """ "Overall", the label of every registered source kind's categories, read when used (a kind
    registered after this import is labelled too), and the skipped-periods scope."""

    def _all(self) -> dict[str, str]:
        return {OVERALL: "Overall", **category_labels(), SKIPPED: "Skipped periods (not in Overall)"}

    def __getitem__(self, scope: str) -> str:
        return self._all()[scope]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


SCOPE_LABELS: Mapping[str, str] = _ScopeLabels()
BOARD_COLUMNS: tuple[str, ...] = (
    "system",
    "scope",
    "metric",
    "n",
    "n_undefined",
    "mean",
    "ci_low",
    "ci_high",
    "judges",
    "own_n",
    "own_mean",
)
PAIRED_COLUMNS: tuple[str, ...] = (
    "metric",
    "rank",
    "system",
    "versus",
    "n",
    "mean_diff",
    "ci_low",
    "ci_high",
    "p_value",
    "p_holm",
)
PAIRS = ("next", "all")  # paired tests: each system vs the next best, or every pair
WIN_COLUMNS: tuple[str, ...] = ("metric", "system", "versus", "n", "wins", "losses", "ties")
REQUIRED_SCORE_COLUMNS = ("instance_id", "category", "system", "metric", "value")
REFERENCE = "gold"  # the gold report scored against itself: a ceiling shown for reference, never ranked
# The builtin non-LLM baselines (tasks.generate.baselines): ranked like any system, but marked on the
# board as references (a floor to beat), not as contenders. A config may give them other names: callers
# that know the systems' identities pass ``baselines`` explicitly.
BASELINES: tuple[str, ...] = tuple(n for n in BUILTIN_NAMES if n != REFERENCE)
PRIMARY = "frame_score"  # key of the composite primary score (never a metric of the score table)
PRIMARY_LABEL = "FRAME score"
PRIMARY_COLUMNS: tuple[str, ...] = ("system", "scope", "n", "mean", "ci_low", "ci_high")
PRIMARY_METHOD = "percentile bootstrap over instances, resampled jointly for the metrics it averages"
CI_METHOD = "percentile bootstrap over instances (scipy.stats.bootstrap)"
PAIRED_METHOD = (
    "paired percentile bootstrap over instances (CI); two-sided paired permutation test by sign flips "
    "of the per-instance differences (scipy.stats.permutation_test, p)"
)
# Two per-instance values closer than this are a tie: scores computed along different code paths may
# differ in the last bits without either report being better.
TIE_TOLERANCE = 1e-12

# scipy >= 1.15 takes `rng`; older versions take `random_state`. Both accept a numpy Generator.
_BOOTSTRAP_RNG_KW = "rng" if "rng" in inspect.signature(stats.bootstrap).parameters else "random_state"


def bootstrap_ci(
    values: Iterable[float | None],
    *,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int | np.random.Generator = 0,
) -> tuple[float, float, float]:
    """(mean, ci_low, ci_high) of ``values``: seeded percentile bootstrap of the mean.

    NaN/None values are dropped first. No value -> (nan, nan, nan); one value, or all values equal ->
    (v, v, v) (no resampling, so no degenerate-data warning). The values are resampled in the order
    given: pass them in a canonical order (``leaderboard`` sorts by instance_id) for order-independence.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    arr = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=float).ravel()
    arr = arr[~np.isnan(arr)]
    if arr.size == 0:
        return (math.nan, math.nan, math.nan)
    mean = float(np.mean(arr))
    if arr.size == 1 or bool(np.all(arr == arr[0])):
        v = float(arr[0])
        return (v, v, v)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    res = stats.bootstrap(
        (arr,),
        np.mean,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method="percentile",
        vectorized=True,
        **{_BOOTSTRAP_RNG_KW: rng},
    )
    low = float(res.confidence_interval.low)
    high = float(res.confidence_interval.high)
    # Guard only against last-ulp differences between np.mean here and scipy's batched means.
    if low > mean and math.isclose(low, mean, rel_tol=1e-12, abs_tol=1e-15):
        low = mean
    if high < mean and math.isclose(high, mean, rel_tol=1e-12, abs_tol=1e-15):
        high = mean
    return (mean, low, high)


def cell_seed(seed: int, system: str, scope: str, metric: str) -> int:
    """The seed of one leaderboard cell: first 8 bytes of sha256 over (seed, system, scope, metric)."""
    key = "\x1f".join((str(int(seed)), str(system), str(scope), str(metric)))
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big")


def _ordered(names: Iterable[str], fixed: Sequence[str]) -> list[str]:
    names = set(names)
    return [x for x in fixed if x in names] + sorted(names - set(fixed))


def scope_order(scopes: Iterable[str]) -> list[str]:
    """Scope "overall" first, then the registered categories in display order, the skipped-periods
    scope, then others sorted."""
    return _ordered(scopes, (OVERALL, *category_labels(), SKIPPED))


def skipped_periods(df: pd.DataFrame) -> pd.Series:
    """Per score row: whether its instance pairs snapshots with source periods between them (column
    ``periods_skipped`` > 0; a table without the column, or a null, counts as consecutive)."""
    if "periods_skipped" not in df.columns:
        return pd.Series(False, index=df.index)
    return pd.to_numeric(df["periods_skipped"], errors="coerce").fillna(0) > 0


def metric_order(metrics: Iterable[str]) -> list[str]:
    """structure, coverage, faithfulness first (paper order), then any other metric sorted."""
    return _ordered(metrics, registry.metric_order())


def _checked_scores(scores: pd.DataFrame) -> pd.DataFrame:
    """A copy of the score table with typed columns; a ValueError for missing columns, duplicate
    (instance_id, system, metric) rows or values outside a metric's range."""
    missing = [c for c in REQUIRED_SCORE_COLUMNS if c not in scores.columns]
    if missing:
        raise ValueError(f"scores lacks column(s) {missing}")
    df = scores.copy()
    if "judge" not in df.columns:
        df["judge"] = ""
    df["value"] = pd.to_numeric(df["value"], errors="coerce").astype(float)
    for c in ("instance_id", "system", "metric"):
        df[c] = df[c].astype(str)
    dup = df.duplicated(["instance_id", "system", "metric"], keep=False)
    if dup.any():
        example = df.loc[dup, ["instance_id", "system", "metric"]].iloc[0].tolist()
        raise ValueError(
            f"{int(dup.sum())} duplicate (instance_id, system, metric) rows, e.g. {example}: "
            "keep one judge per metric before building the leaderboard"
        )
    for metric, vals in df.dropna(subset=["value"]).groupby("metric")["value"]:
        lo, hi = registry.metric_range(str(metric))
        if ((vals < lo) | (vals > hi)).any():
            raise ValueError(f"{metric} values must lie in [{lo:g}, {hi:g}] (or be NaN for undefined)")
    return df


def common_instances(df: pd.DataFrame) -> list[str]:
    """The instances every system of the score table has a row for (gold included; a system with no row
    at all, whose every generation failed, is not in the table and so does not empty the set): the
    leaderboard ranks and tests the systems on these only, so that no system's mean is over instances
    another lacks. Sorted."""
    if df.empty:
        return []
    per_system = [set(g) for _, g in df.groupby("system")["instance_id"]]
    return sorted(set.intersection(*per_system))


def on_common(df: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """(the rows of ``common_instances``, {"instances": how many, "of": instances in the table,
    "left_out": the instances some system lacks})."""
    common = common_instances(df)
    every = sorted(set(df["instance_id"].astype(str))) if len(df) else []
    info = {"instances": len(common), "of": len(every), "left_out": sorted(set(every) - set(common))}
    return df[df["instance_id"].astype(str).isin(common)], info
