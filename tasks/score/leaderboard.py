"""Leaderboard of scored systems with seeded bootstrap confidence intervals (paper 000 Table 6).

Input is the long score table, one row per (instance_id, system, metric) with columns ``instance_id``,
``category``, ``system``, ``metric``, ``value`` (float in [0, 1]; NaN/None = undefined for that
instance) and ``judge``. Output is a long-form board, one row per (system, scope, metric), where scope
is ``"overall"`` or a category. Each cell is the mean over instances with a percentile bootstrap
confidence interval over instances (``scipy.stats.bootstrap``, method="percentile").

Reproducibility: every cell draws from its own generator, seeded by a hash of
(seed, system, scope, metric), and resamples the cell's values ordered by instance_id. A cell is thus
the same whatever the row order of the input, and whatever other systems/metrics/categories are in it.
Undefined values (NaN) are excluded from the mean and the bootstrap and counted in ``n_undefined``.
"""

from __future__ import annotations

import hashlib
import inspect
import io
import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from tasks.score import registry

__all__ = [
    "BOARD_COLUMNS",
    "CATEGORY_ORDER",
    "OVERALL",
    "bootstrap_ci",
    "cell_seed",
    "leaderboard",
    "leaderboard_csv",
    "leaderboard_markdown",
    "metric_order",
    "scope_order",
]

OVERALL = "overall"
CATEGORY_ORDER: tuple[str, ...] = (
    "financial_quarterly",
    "financial_annual",
    "academic_simple",
    "academic_complex",
)
SCOPE_LABELS = {
    OVERALL: "Overall",
    "financial_quarterly": "Financial Qtr.",
    "financial_annual": "Financial Ann.",
    "academic_simple": "Academic Simp.",
    "academic_complex": "Academic Comp.",
}
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
REQUIRED_SCORE_COLUMNS = ("instance_id", "category", "system", "metric", "value")
CI_METHOD = "percentile bootstrap over instances (scipy.stats.bootstrap)"

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
    bootstrap settings are kept in ``board.attrs["bootstrap"]`` for the markdown caption.

    An instance with no category counts only in "overall". Duplicate (instance_id, system, metric) rows
    (e.g. two judges for one metric) are an error: filter the scores to one judge per metric first.
    """
    df = _checked_scores(scores)
    overall = df.assign(scope=OVERALL)
    by_cat = df[df["category"].notna()].assign(scope=lambda d: d["category"].astype(str))
    long = pd.concat([overall, by_cat], ignore_index=True)
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
    return board


def _fmt(x: float) -> str:
    return "nan" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _caption(board: pd.DataFrame, scopes: list[str]) -> str:
    bs = board.attrs.get("bootstrap") or {}
    if bs:
        ci = (
            f"{round(100 * float(bs['confidence']), 2):g}% CI by {bs.get('method', CI_METHOD)}, "
            f"{bs['n_resamples']} resamples, seed {bs['seed']} (per-cell seed = sha256 of "
            "(seed, system, scope, metric))"
        )
    else:
        ci = f"CI by {CI_METHOD} (level, resamples and seed not recorded on this board)"
    n_scope = (board["n"] + board["n_undefined"]).groupby(board["scope"]).max()
    counts = ", ".join(f"{SCOPE_LABELS.get(s, s)} {int(n_scope[s])}" for s in scopes if s in n_scope.index)
    n_undef = int(board.loc[board["scope"] == OVERALL, "n_undefined"].sum())
    parts = [
        f"Cells: mean [CI low, CI high] over instances; {ci}.",
        f"n = instances per scope: {counts}.",
        "Best mean per column in bold (lowest where lower is better); a cell with fewer defined values than "
        "its column shows its own n.",
    ]
    if n_undef:
        parts.append(f"{n_undef} undefined (instance, system, metric) value(s) excluded.")
    return " ".join(parts)


def leaderboard_markdown(board: pd.DataFrame, *, systems: Sequence[str] | None = None) -> str:
    """Markdown tables like paper 000 Table 6: one table per metric, rows = systems, columns = scopes.

    Columns are "Overall" first, then categories (``scope_order``). Cells read "0.812 [0.774, 0.850]";
    the best mean of each column is bold (all of them on an exact tie); a cell whose n is below the
    column's largest n carries "(n=k)"; a missing cell is "–". ``systems`` fixes the row order
    (default: sorted). A caption line names the CI method, resamples, seed and n.
    """
    if board.empty:
        return "_No scores._\n"
    scopes = scope_order(board["scope"].unique())
    metrics = metric_order(board["metric"].unique())
    present = set(board["system"].astype(str))
    order = [s for s in systems if s in present] if systems else []
    order += sorted(present - set(order))
    cells = board.set_index(["system", "scope", "metric"])
    out = [f"_{_caption(board, scopes)}_", ""]
    for metric in metrics:
        sub = board[board["metric"] == metric]
        judges = sorted({j for js in sub["judges"].dropna() for j in str(js).split(";") if j})
        lower = metric in registry.lower_is_better()
        title = f"### {metric}" + (" (lower is better)" if lower else "")
        title += f" (judge: {', '.join(judges)})" if judges else ""
        out += [title, ""]
        out.append("| System | " + " | ".join(SCOPE_LABELS.get(s, _md_escape(s)) for s in scopes) + " |")
        out.append("|---|" + "---:|" * len(scopes))
        best = {}
        max_n = {}
        for scope in scopes:
            col = sub[sub["scope"] == scope]
            means = col["mean"].to_numpy(dtype=float)
            pick = np.nanmin if lower else np.nanmax
            best[scope] = float(pick(means)) if np.isfinite(means).any() else math.nan
            max_n[scope] = int(col["n"].max()) if len(col) else 0
        for system in order:
            row = [_md_escape(system)]
            for scope in scopes:
                key = (system, scope, metric)
                if key not in cells.index:
                    row.append("–")
                    continue
                c = cells.loc[key]
                mean = float(c["mean"])
                if math.isnan(mean):
                    row.append("n/a (n=0)")
                    continue
                text = f"{_fmt(mean)} [{_fmt(float(c['ci_low']))}, {_fmt(float(c['ci_high']))}]"
                if not math.isnan(best[scope]) and math.isclose(mean, best[scope], rel_tol=1e-12, abs_tol=0):
                    text = f"**{text}**"
                if int(c["n"]) < max_n[scope]:
                    text += f" (n={int(c['n'])})"
                row.append(text)
            out.append("| " + " | ".join(row) + " |")
        out.append("")
    return "\n".join(out)


def leaderboard_csv(board: pd.DataFrame) -> str:
    """The long-form board as CSV: fixed column order, floats as %.6f, NaN as empty, "\\n" line ends."""
    cols = [c for c in BOARD_COLUMNS if c in board.columns] + [
        c for c in board.columns if c not in BOARD_COLUMNS
    ]
    buf = io.StringIO()
    board[cols].to_csv(buf, index=False, float_format="%.6f", na_rep="", lineterminator="\n")
    return buf.getvalue()
