"""Rankings by overall mean, paired tests (each system vs the next best) and per-instance win matrices."""

from __future__ import annotations

import hashlib
import inspect
import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from tasks.score import registry
from tasks.score.leaderboard.core import (
    PAIRED_COLUMNS,
    PAIRED_METHOD,
    PAIRS,
    REFERENCE,
    TIE_TOLERANCE,
    _checked_scores,
    bootstrap_ci,
    metric_order,
    skipped_periods,
)

# scipy >= 1.15 takes `rng`; older versions take `random_state` (as _BOOTSTRAP_RNG_KW in core).
_PERMUTATION_RNG_KW = (
    "rng" if "rng" in inspect.signature(stats.permutation_test).parameters else "random_state"
)


def _canonical(scores: pd.DataFrame) -> pd.DataFrame:
    """The checked score table in (metric, system, instance_id) order: every mean, pair and matrix is
    then computed over the same values in the same order whatever the row order of the input. Like
    Overall, it leaves out the instances that skip source periods."""
    df = _checked_scores(scores)
    df = df[~skipped_periods(df)]
    return df.sort_values(["metric", "system", "instance_id"], kind="mergesort").reset_index(drop=True)


def _wide(df: pd.DataFrame, metric: str, systems: Sequence[str]) -> pd.DataFrame:
    """instance_id x system values of one metric (NaN where undefined or missing), rows sorted."""
    sub = df[(df["metric"] == metric) & df["system"].isin(list(systems))]
    wide = sub.pivot(index="instance_id", columns="system", values="value")
    return wide.reindex(columns=list(systems)).sort_index()


def _ranked(df: pd.DataFrame, metric: str, reference: str | None) -> list[tuple[str, float]]:
    """(system, overall mean) of one metric, best first (lowest first where lower is better), ties by
    name; the reference system and systems with no defined value are left out."""
    sub = df[(df["metric"] == metric) & (df["system"] != reference)]
    means = {str(s): float(np.mean(v)) for s, v in sub.dropna(subset=["value"]).groupby("system")["value"]}
    sign = 1.0 if metric in registry.lower_is_better() else -1.0
    return sorted(means.items(), key=lambda kv: (sign * kv[1], kv[0]))


def ranking(scores: pd.DataFrame, metric: str, *, reference: str | None = REFERENCE) -> list[str]:
    """Systems by overall mean of ``metric``, best first (respecting lower_is_better), ties broken by
    name; ``reference`` (gold) and systems with no defined value are not ranked."""
    return [s for s, _ in _ranked(_canonical(scores), metric, reference)]


def pair_seed(seed: int, system: str, versus: str, metric: str) -> int:
    """The seed of one paired test: first 8 bytes of sha256 over ("paired", seed, system, versus, metric)."""
    key = "\x1f".join(("paired", str(int(seed)), str(system), str(versus), str(metric)))
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big")


def _mean_statistic(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x, axis=axis)


def _sign_flip_p(diffs: np.ndarray, n_resamples: int, rng: np.random.Generator) -> float:
    """Two-sided p of a paired permutation test on the mean difference: the null distribution flips the
    sign of each per-instance difference (exact enumeration when 2**n <= n_resamples)."""
    if diffs.size == 0:
        return math.nan
    if diffs.size == 1 or bool(np.all(diffs == 0.0)):
        return 1.0  # one instance (or no difference): every sign flip is as extreme as the observed one
    res = stats.permutation_test(
        (diffs,),
        _mean_statistic,
        permutation_type="samples",
        vectorized=True,
        n_resamples=n_resamples,
        alternative="two-sided",
        **{_PERMUTATION_RNG_KW: rng},
    )
    return float(min(1.0, res.pvalue))


def _paired_row(
    wide: pd.DataFrame, pair: tuple[str, str], metric: str, rank: int, settings: tuple[int, int, float]
) -> dict:
    """One paired test: ``pair[0]`` (ranked ``rank``) minus ``pair[1]`` (ranked next) over the
    instances both have defined, in instance_id order."""
    system, versus = pair
    seed, n_resamples, confidence = settings
    d = (wide[system] - wide[versus]).dropna().to_numpy(dtype=float)
    s = pair_seed(seed, system, versus, metric)
    mean, low, high = bootstrap_ci(
        d, n_resamples=n_resamples, confidence=confidence, seed=np.random.default_rng([s, 0])
    )
    p = _sign_flip_p(d, n_resamples, np.random.default_rng([s, 1]))
    return {
        "metric": metric,
        "rank": rank,
        "system": system,
        "versus": versus,
        "n": int(d.size),
        "mean_diff": mean,
        "ci_low": low,
        "ci_high": high,
        "p_value": p,
        "p_holm": math.nan,  # set per metric once all its pairs are tested (_holm)
    }


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of ``p_values`` (one family of tests; NaN stays NaN and is not
    counted): the k-th smallest of m p-values becomes max over j <= k of min(1, (m - j + 1) * p_(j))."""
    idx = [i for i, p in enumerate(p_values) if not math.isnan(p)]
    out = [math.nan] * len(p_values)
    running = 0.0
    for rank, i in enumerate(sorted(idx, key=lambda i: p_values[i])):
        running = max(running, min(1.0, (len(idx) - rank) * p_values[i]))
        out[i] = running
    return out


def _empty_paired() -> pd.DataFrame:
    out = pd.DataFrame({c: pd.Series(dtype=object) for c in PAIRED_COLUMNS})
    for c in ("rank", "n"):
        out[c] = out[c].astype("int64")
    for c in ("mean_diff", "ci_low", "ci_high", "p_value", "p_holm"):
        out[c] = out[c].astype(float)
    return out


def paired_tests(
    scores: pd.DataFrame,
    *,
    seed: int = 0,
    n_resamples: int = 9999,
    confidence: float = 0.95,
    reference: str | None = REFERENCE,
    pairs: str = "next",
) -> pd.DataFrame:
    """Each system vs the next best (``pairs="next"``) or vs every system ranked below it
    (``pairs="all"``), per metric, overall scope.

    Per metric (``metric_order``), systems are ranked by overall mean (``ranking``; ``reference`` is
    not ranked); the system at rank r is compared with the one at rank r + 1 over the instances both
    have defined: ``mean_diff`` = mean of (system - versus), in the metric's units (negative for the
    better system where lower is better), ``ci_low``/``ci_high`` its paired percentile bootstrap CI,
    ``p_value`` a two-sided sign-flip permutation test (exact when 2**n <= n_resamples). Both draw from
    generators seeded by ``pair_seed``. ``p_holm`` is ``p_value`` adjusted by Holm's method over the
    pairs of the metric (``holm``). Columns: PAIRED_COLUMNS; settings in ``attrs["paired"]``.
    """
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if pairs not in PAIRS:
        raise ValueError(f"pairs must be one of {', '.join(PAIRS)}, got {pairs!r}")
    df = _canonical(scores)
    rows = []
    for metric in metric_order(df["metric"].unique()):
        order = [s for s, _ in _ranked(df, metric, reference)]
        if len(order) < 2:
            continue
        wide = _wide(df, metric, order)
        tested = [
            _paired_row(wide, (a, b), metric, r, (seed, n_resamples, confidence))
            for r, a in enumerate(order, start=1)
            for b in (order[r:] if pairs == "all" else order[r : r + 1])
        ]
        for row, adjusted in zip(tested, holm([t["p_value"] for t in tested]), strict=True):
            row["p_holm"] = adjusted
        rows += tested
    out = pd.DataFrame(rows, columns=list(PAIRED_COLUMNS)) if rows else _empty_paired()
    out.attrs["paired"] = {
        "method": PAIRED_METHOD,
        "confidence": confidence,
        "n_resamples": n_resamples,
        "seed": seed,
        "pairs": pairs,
        "correction": "Holm over the pairs of each metric (p_holm)",
    }
    return out


def primary_metrics(metrics: Iterable[str]) -> list[str]:
    """FRAME's three metrics (registry.DEFAULT) among ``metrics``; all of them if none of the three is."""
    present = metric_order(metrics)
    primary = [m for m in present if m in registry.DEFAULT]
    return primary or present


def win_matrix(
    scores: pd.DataFrame,
    metric: str,
    *,
    systems: Sequence[str] | None = None,
    reference: str | None = REFERENCE,
) -> pd.DataFrame:
    """Per-instance wins on ``metric``: cell (row, column) = instances on which the row system is
    strictly better than the column system (higher, or lower where lower is better), counting only
    instances both have defined. Ties (|difference| <= TIE_TOLERANCE) are counted separately, not as
    half wins: ``attrs["ties"][row][column]``; ``attrs["n"][row][column]`` = instances compared. The
    diagonal is 0. Systems: ``systems`` in that order, else ``ranking`` (best first, reference left out).
    """
    df = _canonical(scores)
    order = list(systems) if systems is not None else [s for s, _ in _ranked(df, metric, reference)]
    vals = _wide(df, metric, order).to_numpy(dtype=float)
    sign = -1.0 if metric in registry.lower_is_better() else 1.0
    diff = sign * (vals[:, :, None] - vals[:, None, :])  # instance x row x column
    both = ~np.isnan(diff)
    wins = ((diff > TIE_TOLERANCE) & both).sum(axis=0)
    ties = ((np.abs(diff) <= TIE_TOLERANCE) & both).sum(axis=0)
    n = both.sum(axis=0)
    np.fill_diagonal(ties, 0)
    np.fill_diagonal(n, 0)
    out = pd.DataFrame(wins.astype("int64"), index=pd.Index(order, name="system"), columns=list(order))
    out.columns.name = "versus"
    out.attrs["metric"] = metric
    out.attrs["lower_is_better"] = sign < 0
    out.attrs["ties"] = {a: {b: int(ties[i, j]) for j, b in enumerate(order)} for i, a in enumerate(order)}
    out.attrs["n"] = {a: {b: int(n[i, j]) for j, b in enumerate(order)} for i, a in enumerate(order)}
    return out


def win_matrices(
    scores: pd.DataFrame, metrics: Sequence[str] | None = None, *, reference: str | None = REFERENCE
) -> dict[str, pd.DataFrame]:
    """``win_matrix`` of each metric (default: ``primary_metrics`` of the scores) with >= 2 ranked
    systems, in metric order."""
    df = _canonical(scores)
    chosen = metric_order(metrics) if metrics is not None else primary_metrics(df["metric"].unique())
    out = {}
    for metric in chosen:
        if len(_ranked(df, metric, reference)) >= 2:
            out[metric] = win_matrix(df, metric, reference=reference)
    return out
