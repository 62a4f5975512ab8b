"""Leaderboard of scored systems (paper 000 Table 6): bootstrap CIs, paired tests, win matrices.

From the long score table (one row per instance, system, metric; NaN = undefined): ``leaderboard`` (mean
and seeded percentile bootstrap CI per system, scope and metric, plus the FRAME score that orders the
systems), ``leaderboard_markdown`` (title, systems best first, gold marked as the ceiling, baselines
marked), ``paired_tests`` (each system vs the next best) and ``win_matrix`` (per-instance wins). The
output is the same bytes whatever the row order of the input. Definitions: docs/metrics/leaderboard.md.
"""

from __future__ import annotations

import hashlib
import inspect
import io
import math
import re
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from schemas.config import CATEGORY_LABELS, CATEGORY_ORDER
from schemas.evaluation import BUILTIN_NAMES
from tasks.score import registry

__all__ = [
    "BASELINES",
    "BOARD_COLUMNS",
    "CATEGORY_ORDER",
    "OVERALL",
    "PAIRED_COLUMNS",
    "PRIMARY",
    "PRIMARY_COLUMNS",
    "REFERENCE",
    "SCOPE_LABELS",
    "WIN_COLUMNS",
    "bootstrap_ci",
    "cell_seed",
    "leaderboard",
    "leaderboard_csv",
    "leaderboard_files",
    "leaderboard_markdown",
    "metric_order",
    "pair_seed",
    "paired_tests",
    "paired_tests_csv",
    "primary_metrics",
    "primary_scores",
    "ranking",
    "ranking_metrics",
    "scope_order",
    "self_judged_notes",
    "win_matrices",
    "win_matrix",
    "win_matrix_csv",
]

OVERALL = "overall"
SCOPE_LABELS = {OVERALL: "Overall", **CATEGORY_LABELS}
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
)
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
_PERMUTATION_RNG_KW = (
    "rng" if "rng" in inspect.signature(stats.permutation_test).parameters else "random_state"
)


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
    """Scope "overall" first, then known categories in CATEGORY_ORDER, then other categories sorted."""
    return _ordered(scopes, (OVERALL, *CATEGORY_ORDER))


def metric_order(metrics: Iterable[str]) -> list[str]:
    """structure, coverage, faithfulness first (paper order), then any other metric sorted."""
    return _ordered(metrics, registry.metric_order())


def _empty_board() -> pd.DataFrame:
    board = pd.DataFrame({c: pd.Series(dtype=object) for c in BOARD_COLUMNS})
    for c in ("n", "n_undefined"):
        board[c] = board[c].astype("int64")
    for c in ("mean", "ci_low", "ci_high"):
        board[c] = board[c].astype(float)
    return board


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
    excluded), mean, ci_low, ci_high, judges (distinct ``judge`` values of the cell, ";"-joined).
    Rows are ordered by system (sorted), scope (``scope_order``), metric (``metric_order``). The
    bootstrap settings are kept in ``board.attrs["bootstrap"]`` for the markdown caption, the primary
    score of each (system, scope) (``primary_scores``, same seed and resamples) in
    ``board.attrs["primary"]`` (its rows under "rows"): ``leaderboard_markdown`` orders the systems by it.

    An instance with no category counts only in "overall". Duplicate (instance_id, system, metric) rows
    (e.g. two judges for one metric) are an error: filter the scores to one judge per metric first.
    """
    df = _checked_scores(scores)
    long = _long(df)
    rows = [
        _cell_row(key, cell, seed, n_resamples, confidence)
        for key, cell in long.groupby(["system", "scope", "metric"], sort=False)
    ]
    board = _sorted_board(pd.DataFrame(rows, columns=list(BOARD_COLUMNS))) if rows else _empty_board()
    board.attrs["bootstrap"] = {
        "method": CI_METHOD,
        "confidence": confidence,
        "n_resamples": n_resamples,
        "seed": seed,
    }
    primary = _primary_frame(long, seed, n_resamples, confidence)
    board.attrs["primary"] = {**primary.attrs["primary"], "rows": primary.to_dict("records")}
    return board


def _long(df: pd.DataFrame) -> pd.DataFrame:
    """The checked scores with a ``scope`` column: every row once as "overall", once as its category."""
    overall = df.assign(scope=OVERALL)
    by_cat = df[df["category"].notna()].assign(scope=lambda d: d["category"].astype(str))
    return pd.concat([overall, by_cat], ignore_index=True)


# ---------------------------------------------------------------- the primary score


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


# ---------------------------------------------------------------- rankings, paired tests, win matrices


def _canonical(scores: pd.DataFrame) -> pd.DataFrame:
    """The checked score table in (metric, system, instance_id) order: every mean, pair and matrix is
    then computed over the same values in the same order whatever the row order of the input."""
    df = _checked_scores(scores)
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
    }


def _empty_paired() -> pd.DataFrame:
    out = pd.DataFrame({c: pd.Series(dtype=object) for c in PAIRED_COLUMNS})
    for c in ("rank", "n"):
        out[c] = out[c].astype("int64")
    for c in ("mean_diff", "ci_low", "ci_high", "p_value"):
        out[c] = out[c].astype(float)
    return out


def paired_tests(
    scores: pd.DataFrame,
    *,
    seed: int = 0,
    n_resamples: int = 9999,
    confidence: float = 0.95,
    reference: str | None = REFERENCE,
) -> pd.DataFrame:
    """Each system vs the next best, per metric, overall scope.

    Per metric (``metric_order``), systems are ranked by overall mean (``ranking``; ``reference`` is
    not ranked); the system at rank r is compared with the one at rank r + 1 over the instances both
    have defined: ``mean_diff`` = mean of (system - versus), in the metric's units (negative for the
    better system where lower is better), ``ci_low``/``ci_high`` its paired percentile bootstrap CI,
    ``p_value`` a two-sided sign-flip permutation test (exact when 2**n <= n_resamples). Both draw from
    generators seeded by ``pair_seed``. Columns: PAIRED_COLUMNS; settings in ``attrs["paired"]``.
    """
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    df = _canonical(scores)
    rows = []
    for metric in metric_order(df["metric"].unique()):
        order = [s for s, _ in _ranked(df, metric, reference)]
        if len(order) < 2:
            continue
        wide = _wide(df, metric, order)
        for r, pair in enumerate(zip(order, order[1:], strict=False), start=1):
            rows.append(_paired_row(wide, pair, metric, r, (seed, n_resamples, confidence)))
    out = pd.DataFrame(rows, columns=list(PAIRED_COLUMNS)) if rows else _empty_paired()
    out.attrs["paired"] = {
        "method": PAIRED_METHOD,
        "confidence": confidence,
        "n_resamples": n_resamples,
        "seed": seed,
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


def self_judged_notes(judge_model: str | None, system_models: Mapping[str, str | None]) -> dict[str, str]:
    """{system: "self-judged"} for each system whose model is the judge's model (names compared after
    stripping surrounding blanks); pass the result as ``notes`` to ``leaderboard_markdown``."""
    judge = (judge_model or "").strip()
    if not judge:
        return {}
    return {s: "self-judged" for s, m in sorted(system_models.items()) if (m or "").strip() == judge}


# ---------------------------------------------------------------- rendering

CEILING, BASELINE, SELF_JUDGED = "ceiling", "baseline", "self-judged"
_LEGEND = {
    CEILING: (
        f"_{CEILING}: `{REFERENCE}` is the gold report scored against itself: the ceiling each metric "
        "reaches, shown for reference, never ranked or bold._"
    ),
    BASELINE: (
        f"_{BASELINE}: a builtin non-LLM reference system (copy-sample returns the sample report S "
        "unchanged, extractive fills S's headings with passages of the grounding documents): a floor to "
        "beat, ranked like the others._"
    ),
    SELF_JUDGED: "_self-judged: the judge model is the system's own model; its judged scores may favour it._",
}


def _fmt(x: float) -> str:
    return "nan" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def _fmt_diff(x: float, *, signed: bool = False) -> str:
    """3 decimals; a value that rounds to zero prints as 0.000 (never -0.000)."""
    if x is None or math.isnan(x):
        return "nan"
    r = round(float(x), 3) or 0.0
    return f"{r:+.3f}" if signed else f"{r:.3f}"


def _fmt_p(p: float) -> str:
    if p is None or math.isnan(p):
        return "n/a"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _flags(
    present: Iterable[str], notes: Mapping[str, str] | None, baselines: Iterable[str] | None
) -> dict[str, list[str]]:
    """Per system, the flags shown beside its name: "ceiling" (gold), "baseline", then its note."""
    base = set(BASELINES if baselines is None else baselines)
    out = {}
    for s in present:
        flags = [CEILING] if s == REFERENCE else [BASELINE] if s in base else []
        if notes and notes.get(s):
            flags.append(str(notes[s]))
        out[s] = flags
    return out


def _label(system: str, flags: Mapping[str, list[str]]) -> str:
    """A system's name with its flag(s) beside it, e.g. ``gold _(ceiling)_``."""
    text = _md_escape(system)
    shown = flags.get(system) or []
    return f"{text} _({_md_escape('; '.join(shown))})_" if shown else text


def _legend(flags: Mapping[str, list[str]], order: Iterable[str]) -> list[str]:
    """The footnotes of the flags shown on the board (reference rows first), one line each."""
    shown = {f for s in order for f in flags.get(s, [])}
    return [x for f in (CEILING, BASELINE, SELF_JUDGED) if f in shown for x in (_LEGEND[f], "")]


def _metric_label(metric: str) -> str:
    return f"{metric} (lower is better)" if metric in registry.lower_is_better() else metric


def _primary(board: pd.DataFrame) -> dict:
    """The primary score of the board: {metrics, composite, label, rows}. Read from ``attrs`` (set by
    ``leaderboard``); a board without them (e.g. read back from CSV) gets the means of its cells and no CI."""
    info = dict(board.attrs.get("primary") or {})
    if info.get("metrics") is not None and "rows" in info:
        return info
    metrics = ranking_metrics(board["metric"].unique())
    composite = len(metrics) >= 2
    rows = []
    if composite:
        sub = board[board["metric"].isin(metrics)]
        for (system, scope), g in sub.groupby(["system", "scope"], sort=True):
            means = g.set_index("metric")["mean"].reindex(metrics).to_numpy(dtype=float)
            mean = float(means.mean()) if not np.isnan(means).any() else math.nan
            rows.append(
                {"system": system, "scope": scope, "n": int(g["n"].max())}
                | {"mean": mean, "ci_low": math.nan, "ci_high": math.nan}
            )
    label = PRIMARY_LABEL if composite else (metrics[0] if metrics else "")
    return {"metrics": metrics, "composite": composite, "label": label, "method": "", "rows": rows}


def _primary_means(board: pd.DataFrame, primary: dict) -> dict[str, float]:
    """Each system's overall primary score: the composite's, else its single metric's overall mean."""
    if primary["composite"]:
        return {str(r["system"]): float(r["mean"]) for r in primary["rows"] if r["scope"] == OVERALL}
    if not primary["metrics"]:
        return {}
    cells = board[(board["scope"] == OVERALL) & (board["metric"] == primary["metrics"][0])]
    return {str(r["system"]): float(r["mean"]) for r in cells.to_dict("records")}


def _system_order(
    present: Iterable[str], systems: Sequence[str] | None, means: Mapping[str, float], lower: bool
) -> list[str]:
    """gold (the ceiling) first; then ``systems`` in the order given (those present), then every other
    system by its primary score, best first (ties and systems without a score by name, the latter last)."""
    present = set(present)
    rest = present - {REFERENCE}
    fixed = [s for s in dict.fromkeys(systems or ()) if s in rest]

    def key(s: str) -> tuple[bool, float, str]:
        v = means.get(s, math.nan)
        return (math.isnan(v), 0.0 if math.isnan(v) else (v if lower else -v), s)

    return ([REFERENCE] if REFERENCE in present else []) + fixed + sorted(rest - set(fixed), key=key)


def _ci_text(board: pd.DataFrame) -> str:
    bs = board.attrs.get("bootstrap") or {}
    if not bs:
        return f"CI by {CI_METHOD} (level, resamples and seed not recorded on this board)"
    return (
        f"{round(100 * float(bs['confidence']), 2):g}% CI by {bs.get('method', CI_METHOD)}, "
        f"{bs['n_resamples']} resamples, seed {bs['seed']} (per-cell seed = sha256 of "
        "(seed, system, scope, metric))"
    )


def _order_text(primary: dict, order: list[str], *, fixed: bool) -> str:
    """The sentence that says how the systems are ordered and what the primary score is."""
    metrics = primary["metrics"]
    if primary["composite"]:
        names = ", ".join(metrics[:-1]) + f" and {metrics[-1]}"
        ci = (
            f"its CI by percentile bootstrap over instances resampled jointly for the {len(metrics)} metrics"
            if primary.get("method")
            else "no CI (this board holds no per-instance values)"
        )
        what = (
            f"the {PRIMARY_LABEL} (Overall): the unweighted mean of the system's {names} means, shown in "
            f"the first rows, {ci}"
        )
    elif metrics:
        what = f"their Overall {_md_escape(_metric_label(metrics[0]))} mean"
    else:
        what = "name"
    lead = f"`{REFERENCE}` (the ceiling) first, then " if REFERENCE in order else ""
    how = "in the order asked for, the others" if fixed else "systems"
    return f"Order: {lead}{how} by {what}, best first."


def _caption(board: pd.DataFrame, scopes: list[str], order_text: str, *, wide: bool = False) -> str:
    """The table caption: how the systems are ordered first, then what a cell holds."""
    n_scope = (board["n"] + board["n_undefined"]).groupby(board["scope"]).max()
    counts = ", ".join(f"{SCOPE_LABELS.get(s, s)} {int(n_scope[s])}" for s in scopes if s in n_scope.index)
    n_undef = int(board.loc[board["scope"] == OVERALL, "n_undefined"].sum())
    parts = [order_text]
    if wide:
        parts.append(
            "Columns = systems, rows = metric x scope (Overall, then categories), as in paper 000 Table 6."
        )
    parts += [
        f"Cells: mean [CI low, CI high] over instances; {_ci_text(board)}.",
        f"n = instances per scope: {counts}.",
    ]
    if wide:
        parts.append(
            "Best system per row in bold (lowest where lower is better; the ceiling never); a cell with "
            "fewer defined values than its row shows its own n."
        )
    else:
        parts.append("A cell with fewer defined values than its column shows its own n.")
    if n_undef:
        parts.append(f"{n_undef} undefined (instance, system, metric) value(s) excluded.")
    return " ".join(parts)


def _title(
    board: pd.DataFrame, release: str | None, order: list[str], flags: Mapping[str, list[str]]
) -> list[str]:
    """The title line (release) and one line saying what is scored."""
    head = f"# Leaderboard: {_md_escape(release)}" if release else "# Leaderboard"
    if board.empty:
        return [head, ""]
    overall = board[board["scope"] == OVERALL]
    n_inst = int((overall["n"] + overall["n_undefined"]).max()) if len(overall) else 0
    cats = [s for s in scope_order(board["scope"].unique()) if s != OVERALL]
    metrics = metric_order(board["metric"].unique())
    refs = [s for s in order if CEILING in flags.get(s, []) or BASELINE in flags.get(s, [])]
    ranked = len(order) - len(refs) + sum(BASELINE in flags.get(s, []) for s in refs)
    cat_text = f" in {len(cats)} categor{'y' if len(cats) == 1 else 'ies'}" if cats else ""
    line = (
        f"Scored: {len(order)} system(s) ({ranked} ranked"
        + (f"; reference rows: {', '.join(_md_escape(s) for s in refs)}" if refs else "")
        + f") on {n_inst} instance(s){cat_text}, by {len(metrics)} metric(s): "
        + ", ".join(_md_escape(m) for m in metrics)
        + "."
    )
    return [head, "", line, ""]


def _cells(board: pd.DataFrame) -> dict[tuple[str, str, str], dict]:
    return {(str(r["system"]), str(r["scope"]), str(r["metric"])): r for r in board.to_dict("records")}


def _primary_cells(primary: dict) -> dict[tuple[str, str, str], dict]:
    if not primary["composite"]:
        return {}
    return {(str(r["system"]), str(r["scope"]), PRIMARY): r for r in primary["rows"]}


def _best(cells: Sequence[dict | None], metric: str) -> float:
    means = np.array([float(c["mean"]) for c in cells if c is not None], dtype=float)
    if not np.isfinite(means).any():
        return math.nan
    pick = np.nanmin if metric in registry.lower_is_better() else np.nanmax
    return float(pick(means))


def _cell_text(c: dict | None, best: float, max_n: int) -> str:
    """'0.812 [0.774, 0.850]', bold when its mean is ``best``, '(n=k)' when k < ``max_n``."""
    if c is None:
        return "–"
    mean = float(c["mean"])
    if math.isnan(mean):
        return "n/a (n=0)" if int(c["n"]) == 0 else "n/a"
    low, high = float(c["ci_low"]), float(c["ci_high"])
    text = _fmt(mean) if math.isnan(low) else f"{_fmt(mean)} [{_fmt(low)}, {_fmt(high)}]"
    if not math.isnan(best) and math.isclose(mean, best, rel_tol=1e-12, abs_tol=0):
        text = f"**{text}**"
    if int(c["n"]) < max_n:
        text += f" (n={int(c['n'])})"
    return text


def _judges_line(board: pd.DataFrame, metrics: list[str]) -> str:
    parts = []
    for metric in metrics:
        js = board.loc[board["metric"] == metric, "judges"].dropna()
        judges = sorted({j for x in js for j in str(x).split(";") if j})
        if judges:
            parts.append(f"{_md_escape(metric)}: {_md_escape(', '.join(judges))}")
    return f"_Judges: {'; '.join(parts)}._" if parts else ""


_LLM_TREE = re.compile(r"^llm-tree:([^+]*)\+(.+)$")  # StructureFamily's judge names
_OWN_TREE = re.compile(r"^(\w+)-tree\+(.+)$")


def _structure_line(board: pd.DataFrame) -> str:
    """Who built the structure trees and which embedder compared their nodes, read from the structure
    judges' names ("" without structure rows)."""
    js = board.loc[board["metric"] == "structure", "judges"].dropna()
    parts = []
    for judge in sorted({j for x in js for j in str(x).split(";") if j}):
        if m := _LLM_TREE.match(judge):
            parts.append(f"LLM-extracted by {m.group(1)} (paper 000 §4.1); node embedder: {m.group(2)}")
        elif m := _OWN_TREE.match(judge):
            parts.append(f"{m.group(1)} (frame's Markdown reader); node embedder: {m.group(2)}")
    return f"_Structure trees: {_md_escape('; '.join(parts))}._" if parts else ""


def _wide_board(
    board: pd.DataFrame, order: list[str], flags: Mapping[str, list[str]], primary: dict, order_text: str
) -> list[str]:
    """Table 6: systems as columns (gold first, then by primary score), one row per metric x scope, the
    primary score's rows first; bold = best non-reference system of the row."""
    scopes = scope_order(board["scope"].unique())
    metrics = metric_order(board["metric"].unique())
    cells = {**_cells(board), **_primary_cells(primary)}
    out = [f"_{_caption(board, scopes, order_text, wide=True)}_", "", *_legend(flags, order)]
    out.append("| Metric | Data | " + " | ".join(_label(s, flags) for s in order) + " |")
    out.append("|---|---|" + "---:|" * len(order))
    for metric in ([PRIMARY] if primary["composite"] else []) + metrics:
        first = True
        for scope in scopes:
            row = [cells.get((s, scope, metric)) for s in order]
            if all(c is None for c in row):
                continue
            best = _best([c for s, c in zip(order, row, strict=True) if s != REFERENCE], metric)
            max_n = max(int(c["n"]) for c in row if c is not None)
            texts = [
                _cell_text(c, math.nan if s == REFERENCE else best, max_n)
                for s, c in zip(order, row, strict=True)
            ]
            name = f"**{PRIMARY_LABEL}**" if metric == PRIMARY else _md_escape(_metric_label(metric))
            label = name if first else ""
            out.append(
                f"| {label} | {SCOPE_LABELS.get(scope, _md_escape(scope))} | " + " | ".join(texts) + " |"
            )
            first = False
    out.append("")
    judges = _judges_line(board, metrics)
    return out + ([judges, ""] if judges else [])


def _per_metric_tables(
    board: pd.DataFrame, order: list[str], flags: Mapping[str, list[str]], primary: dict, order_text: str
) -> list[str]:
    """One system (with or without gold): one table per metric (the primary score first), rows =
    systems, columns = scopes. No bold: there is nothing to rank against."""
    scopes = scope_order(board["scope"].unique())
    cells = {**_cells(board), **_primary_cells(primary)}
    out = [f"_{_caption(board, scopes, order_text)}_", "", *_legend(flags, order)]
    for metric in ([PRIMARY] if primary["composite"] else []) + metric_order(board["metric"].unique()):
        if metric == PRIMARY:
            title = f"### {PRIMARY_LABEL} (mean of {', '.join(primary['metrics'])})"
            sub = pd.DataFrame(primary["rows"], columns=list(PRIMARY_COLUMNS))
        else:
            sub = board[board["metric"] == metric]
            judges = sorted({j for js in sub["judges"].dropna() for j in str(js).split(";") if j})
            title = f"### {_metric_label(metric)}" + (f" (judge: {', '.join(judges)})" if judges else "")
        out += [title, ""]
        out.append("| System | " + " | ".join(SCOPE_LABELS.get(s, _md_escape(s)) for s in scopes) + " |")
        out.append("|---|" + "---:|" * len(scopes))
        max_n = {
            sc: int(sub.loc[sub["scope"] == sc, "n"].max()) if (sub["scope"] == sc).any() else 0
            for sc in scopes
        }
        for system in order:
            texts = [_cell_text(cells.get((system, sc, metric)), math.nan, max_n[sc]) for sc in scopes]
            out.append(f"| {_label(system, flags)} | " + " | ".join(texts) + " |")
        out.append("")
    return out


def _paired_markdown(paired: pd.DataFrame, flags: Mapping[str, list[str]]) -> list[str]:
    st = paired.attrs.get("paired") or {}
    level = f"{round(100 * float(st.get('confidence', 0.95)), 2):g}%"
    settings = (
        f"{st['n_resamples']} resamples, seed {st['seed']} "
        "(per-pair seed = sha256 of (seed, system, next, metric))"
        if st
        else "resamples and seed not recorded"
    )
    caption = (
        "Per metric, systems ranked by overall mean (best first; gold not ranked); each is compared with "
        "the next one over the instances both have defined. Difference = mean of (system - next) in the "
        f"metric's units (negative favours the system where lower is better); {level} CI by paired "
        "percentile bootstrap over instances; p = two-sided paired permutation test by sign flips of the "
        f"per-instance differences (exact when 2^n <= resamples); {settings}."
    )
    out = ["### Paired tests: each system vs the next best (overall)", "", f"_{caption}_", ""]
    out.append(f"| Metric | Rank | System | vs next | n | Difference [{level} CI] | p |")
    out.append("|---|---:|---|---|---:|---:|---:|")
    for r in paired.to_dict("records"):
        diff = (
            f"{_fmt_diff(r['mean_diff'], signed=True)} [{_fmt_diff(r['ci_low'])}, {_fmt_diff(r['ci_high'])}]"
            if int(r["n"])
            else "n/a (n=0)"
        )
        out.append(
            f"| {_md_escape(_metric_label(str(r['metric'])))} | {int(r['rank'])} "
            f"| {_label(str(r['system']), flags)} | {_label(str(r['versus']), flags)} | {int(r['n'])} "
            f"| {diff} | {_fmt_p(float(r['p_value']))} |"
        )
    out.append("")
    return out


def _win_cell(wins: int, ties: int) -> str:
    return f"{wins} (+{ties} tie{'' if ties == 1 else 's'})" if ties else str(wins)


def _win_markdown(metric: str, wins: pd.DataFrame, flags: Mapping[str, list[str]]) -> list[str]:
    order = [str(s) for s in wins.index]
    ties = wins.attrs.get("ties") or {}
    better = "lower" if metric in registry.lower_is_better() else "higher"
    caption = (
        f"Cell = instances on which the row system beats the column system on {_md_escape(metric)} (strictly "
        f"{better}; only instances both have defined). Ties (absolute difference <= {TIE_TOLERANCE:g}) are "
        "counted separately, never as half wins, and shown as (+k ties); the column system's wins are in the "
        "mirrored cell. Systems ranked by overall mean, best first."
    )
    out = [f"### Win matrix: {_md_escape(_metric_label(metric))}", "", f"_{caption}_", ""]
    out.append("| System | " + " | ".join(_label(s, flags) for s in order) + " |")
    out.append("|---|" + "---:|" * len(order))
    for a in order:
        texts = [
            "–" if a == b else _win_cell(int(wins.loc[a, b]), int(ties.get(a, {}).get(b, 0))) for b in order
        ]
        out.append(f"| {_label(a, flags)} | " + " | ".join(texts) + " |")
    out.append("")
    return out


def leaderboard_markdown(
    board: pd.DataFrame,
    *,
    systems: Sequence[str] | None = None,
    notes: Mapping[str, str] | None = None,
    paired: pd.DataFrame | None = None,
    wins: Mapping[str, pd.DataFrame] | None = None,
    release: str | None = None,
    baselines: Iterable[str] | None = None,
) -> str:
    """The board as Markdown: a title (``release``, e.g. "demo/0.1.0") and a line saying what is scored,
    then the board, then (when given) the paired tests and the win matrices.

    Systems are ordered by their primary score (``ranking_metrics``: the FRAME score, mean of
    structure, coverage and faithfulness; else the one metric), best first, gold (the ceiling) first;
    ``systems`` puts the ones it names first, in that order. Reference rows are flagged beside the name
    with a footnote: gold "ceiling" (never ranked or bold) and the ``baselines`` (default: the builtin
    copy-sample and extractive) "baseline"; ``notes`` adds a flag of its own (e.g. "self-judged").

    With >= 2 systems besides gold: paper 000 Table 6, systems as columns, rows = the FRAME score then
    metric x scope (Overall, then categories), cells "0.812 [0.774, 0.850]", the best non-gold mean of
    each row bold (lowest where lower is better; all of them on an exact tie), "(n=k)" on a cell with
    fewer defined values than its row, "–" for a missing cell. With one system: one table per metric,
    rows = systems, columns = scopes.
    """
    present = sorted(board["system"].astype(str).unique())
    primary = _primary(board)
    lower = (
        not primary["composite"]
        and bool(primary["metrics"])
        and (primary["metrics"][0] in registry.lower_is_better())
    )
    order = _system_order(present, systems, _primary_means(board, primary), lower)
    flags = _flags(order, notes, baselines)
    out = _title(board, release, order, flags)
    if board.empty:
        return "\n".join([*out, "_No scores._", ""])
    order_text = _order_text(primary, order, fixed=bool([s for s in systems or () if s in present]))
    contenders = [s for s in order if s != REFERENCE]
    render = _wide_board if len(contenders) >= 2 else _per_metric_tables
    out += render(board, order, flags, primary, order_text)
    trees = _structure_line(board)
    out += [trees, ""] if trees else []
    if paired is not None and not paired.empty:
        out += _paired_markdown(paired, flags)
    for metric in metric_order((wins or {}).keys()):
        if len(wins[metric]) >= 2:
            out += _win_markdown(metric, wins[metric], flags)
    return "\n".join(out)


# ---------------------------------------------------------------- csv, files


def _csv(frame: pd.DataFrame, columns: Sequence[str]) -> str:
    cols = [c for c in columns if c in frame.columns] + [c for c in frame.columns if c not in columns]
    buf = io.StringIO()
    frame[cols].to_csv(buf, index=False, float_format="%.6f", na_rep="", lineterminator="\n")
    return buf.getvalue()


def leaderboard_csv(board: pd.DataFrame) -> str:
    """The long-form board as CSV, one row per (system, scope, metric), scope "overall" or a category:
    fixed column order, floats as %.6f, NaN as empty, "\\n" line ends."""
    return _csv(board, BOARD_COLUMNS)


def paired_tests_csv(paired: pd.DataFrame) -> str:
    """``paired_tests`` as CSV (PAIRED_COLUMNS, floats as %.6f, NaN as empty, "\\n" line ends)."""
    return _csv(paired, PAIRED_COLUMNS)


def win_matrix_csv(wins: Mapping[str, pd.DataFrame]) -> str:
    """Win matrices in long form, one row per (metric, system, versus), system != versus: n compared
    instances, wins (system better), losses (versus better), ties. Metrics in metric order, systems in
    each matrix's order."""
    rows = []
    for metric in metric_order(wins.keys()):
        m = wins[metric]
        ties, n = m.attrs.get("ties") or {}, m.attrs.get("n") or {}
        for a in m.index:
            for b in m.columns:
                if a != b:
                    rows.append(
                        {
                            "metric": metric,
                            "system": a,
                            "versus": b,
                            "n": int(n.get(a, {}).get(b, 0)),
                            "wins": int(m.loc[a, b]),
                            "losses": int(m.loc[b, a]),
                            "ties": int(ties.get(a, {}).get(b, 0)),
                        }
                    )
    return _csv(pd.DataFrame(rows, columns=list(WIN_COLUMNS)), WIN_COLUMNS)


def leaderboard_files(
    scores: pd.DataFrame,
    *,
    seed: int = 0,
    n_resamples: int = 2000,
    systems: Sequence[str] | None = None,
    notes: Mapping[str, str] | None = None,
    release: str | None = None,
    baselines: Iterable[str] | None = None,
) -> dict[str, str]:
    """Everything the leaderboard writes, by file name: leaderboard.md (title naming ``release``,
    board ordered by the primary score, paired tests, win matrices of the primary metrics),
    leaderboard.csv, paired_tests.csv, win_matrix.csv. The bootstrap and the permutation tests use
    ``n_resamples`` and ``seed``; ``systems``, ``notes`` and ``baselines`` as in ``leaderboard_markdown``."""
    board = leaderboard(scores, seed=seed, n_resamples=n_resamples)
    paired = paired_tests(scores, seed=seed, n_resamples=n_resamples)
    wins = win_matrices(scores)
    return {
        "leaderboard.md": leaderboard_markdown(
            board,
            systems=systems,
            notes=notes,
            paired=paired,
            wins=wins,
            release=release,
            baselines=baselines,
        ),
        "leaderboard.csv": leaderboard_csv(board),
        "paired_tests.csv": paired_tests_csv(paired),
        "win_matrix.csv": win_matrix_csv(wins),
    }
