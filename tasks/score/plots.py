"""Metric trends against instance characteristics (paper 000 Figures 5-7): one PNG per metric, titled at
the top, the mean per system with a band of its bootstrap CI (the leaderboard's ``bootstrap_ci``) against
buckets of gold length, grounding length and table count.

Specification: docs/diagnostics.md, section "Trend plots"
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from tasks.atomic import atomic_write_bytes
from tasks.score.leaderboard import REFERENCE, bootstrap_ci, cell_seed, metric_order

__all__ = [
    "FEATURES",
    "PAPER_EDGES",
    "Buckets",
    "bucketize",
    "metric_figures",
    "plot_metric_vs_buckets",
    "quantile_edges",
]

# (feature column, x-axis label, kind): kind "tokens" -> k/M labels, "count" -> integer labels.
FEATURES: tuple[tuple[str, str, str], ...] = (
    ("gold_tokens", "Gold Output Report Length (Token Count)", "tokens"),
    ("grounding_tokens", "Grounding Data Length (Token Count)", "tokens"),
    ("gold_tables", "Number of Tables in Gold Output Report", "count"),
)
PAPER_EDGES: dict[str, tuple[float, ...]] = {
    "gold_tokens": (5_000, 10_000, 15_000, 20_000),
    "grounding_tokens": (20_000, 30_000, 40_000, 60_000),
    "gold_tables": (5, 10, 15, 25),
}
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")


@dataclass(frozen=True)
class Buckets:
    """Bucket assignment of a set of values: codes[i] indexes labels (-1: no value)."""

    edges: tuple[float, ...]  # interior edges; bucket b = [edges[b-1], edges[b])
    codes: np.ndarray  # per value, the index into labels, -1 for NaN
    labels: tuple[str, ...]  # non-empty buckets only, in increasing order
    counts: tuple[int, ...]  # values per label


def _nice(x: float, integer: bool) -> float:
    """x rounded to two significant digits (and to an integer for counts)."""
    if x <= 0:
        return 0.0
    mag = 10.0 ** math.floor(math.log10(x))
    y = math.floor(x / mag * 10 + 0.5) / 10 * mag
    y = float(f"{y:.12g}")  # drop float noise (e.g. 3.5000000000000004)
    return float(math.floor(y + 0.5)) if integer else y


def quantile_edges(
    values: Sequence[float] | np.ndarray, *, max_buckets: int = 5, integer: bool = False
) -> list[float]:
    """Interior bucket edges at rounded quantiles (see the module doc); every bucket is non-empty."""
    v = np.asarray(values, dtype=float)
    v = np.sort(v[np.isfinite(v)])
    if v.size == 0:
        return []
    k = min(max(1, int(max_buckets)), int(np.unique(v).size))
    lo, hi = float(v[0]), float(v[-1])
    cand = sorted({_nice(float(np.quantile(v, j / k)), integer) for j in range(1, k)})
    edges = [e for e in cand if lo < e <= hi]
    # Drop an edge whenever the bucket it closes ([previous kept edge, edge)) would hold no value.
    kept: list[float] = []
    for e in edges:
        prev = kept[-1] if kept else -math.inf
        if np.any((v >= prev) & (v < e)):
            kept.append(e)
    return kept


def _fmt_tokens(x: float) -> str:
    if x >= 1_000_000:
        return f"{x / 1_000_000:.3g}M"
    if x >= 1_000:
        return f"{x / 1_000:.3g}k"
    return f"{x:.3g}"


def _fmt_count(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _label(lo: float, hi: float, kind: str) -> str:
    """Label of [lo, hi); lo = -inf / hi = inf for the open-ended first / last bucket."""
    fmt = _fmt_count if kind == "count" else _fmt_tokens
    if math.isinf(lo) and math.isinf(hi):
        return "all"
    if math.isinf(lo):
        return f"<{fmt(hi)}"
    if math.isinf(hi):
        return f"{fmt(lo)}+"
    if kind == "count" and float(lo).is_integer() and float(hi).is_integer():
        last = int(hi) - 1  # the integers the bucket holds
        return str(int(lo)) if last <= lo else f"{int(lo)}-{last}"
    return f"{fmt(lo)}-{fmt(hi)}"


def bucketize(
    values: Sequence[float] | np.ndarray, edges: Sequence[float], *, kind: str = "tokens"
) -> Buckets:
    """Assign values to the half-open buckets of ``edges``; empty buckets are left out of the labels.

    A single bucket (no edge) is labelled by its value range ("3.2k", "2-7") instead of "all".
    """
    v = np.asarray(values, dtype=float)
    edges = tuple(sorted(float(e) for e in edges))
    raw = np.where(np.isfinite(v), np.searchsorted(np.asarray(edges, dtype=float), v, side="right"), -1)
    bounds = (-math.inf, *edges, math.inf)
    present = sorted({int(b) for b in raw if b >= 0})
    labels, counts, remap = [], [], {}
    for i, b in enumerate(present):
        remap[b] = i
        lab = _label(bounds[b], bounds[b + 1], kind)
        if lab == "all":
            fin = v[np.isfinite(v)]
            fmt = _fmt_count if kind == "count" else _fmt_tokens
            a, z = fmt(float(fin.min())), fmt(float(fin.max()))
            lab = a if a == z else f"{a}-{z}"
        labels.append(lab)
        counts.append(int(np.sum(raw == b)))
    codes = np.array([remap.get(int(b), -1) for b in raw], dtype=int)
    return Buckets(edges=edges, codes=codes, labels=tuple(labels), counts=tuple(counts))


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(name)).strip("._") or "metric"


def _render(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=fig.dpi, metadata={"Software": None})
    return buf.getvalue()


def _inputs(scores: pd.DataFrame, features: pd.DataFrame) -> tuple[pd.DataFrame, list[str], dict]:
    """(typed score rows, sorted instance ids, {feature column: values per instance}); a ValueError for
    missing columns."""
    missing = [c for c, _, _ in FEATURES if c not in features.columns]
    if missing or "instance_id" not in features.columns:
        raise ValueError(f"features lacks column(s) {missing or ['instance_id']}")
    for c in ("instance_id", "system", "metric", "value"):
        if c not in scores.columns:
            raise ValueError(f"scores lacks column {c!r}")
    df = scores[["instance_id", "system", "metric", "value"]].copy()
    for c in ("instance_id", "system", "metric"):
        df[c] = df[c].astype(str)
    df["value"] = pd.to_numeric(df["value"], errors="coerce").astype(float)
    feats = features.copy()
    feats["instance_id"] = feats["instance_id"].astype(str)
    feats = feats.drop_duplicates("instance_id").set_index("instance_id")
    instances = sorted(df["instance_id"].unique())
    feat_vals = {
        col: pd.to_numeric(feats[col], errors="coerce").reindex(instances).to_numpy(dtype=float)
        for col, _, _ in FEATURES
    }
    return df, instances, feat_vals


def _bucket_stats(
    vals: np.ndarray,
    codes: np.ndarray,
    n_buckets: int,
    cell: tuple[str, str, str],
    ci: tuple[int, int, float],
) -> np.ndarray:
    """(mean, ci_low, ci_high) per bucket (NaN rows where the system has no defined value): the
    leaderboard's seeded percentile bootstrap of the mean, seeded per (system, feature bucket, metric)."""
    system, scope, metric = cell
    seed, n_resamples, confidence = ci
    out = np.full((n_buckets, 3), np.nan)
    for b in range(n_buckets):
        sel = vals[(codes == b) & ~np.isnan(vals)]
        if sel.size:
            out[b] = bootstrap_ci(
                sel,
                n_resamples=n_resamples,
                confidence=confidence,
                seed=cell_seed(seed, system, f"{scope}#{b}", metric),
            )
    return out


def _style(k: int, system: str) -> dict:
    """Line style of the k-th system: gold (the ceiling) dashed grey, the others in the colour cycle."""
    if system == REFERENCE:
        return {"color": "0.35", "linestyle": "--", "marker": "_"}
    return {"color": f"C{k % 10}", "linestyle": "-", "marker": _MARKERS[k % len(_MARKERS)]}


def _panel(
    ax,
    sub: pd.DataFrame,
    bk: Buckets,
    feature: str,
    systems: Sequence[str],
    inst_pos: dict[str, int],
    ci: tuple[int, int, float],
) -> None:
    """One line per system: its mean defined value per bucket (NaN, a gap, where it has none), with its
    bootstrap CI as a shaded band."""
    x = np.arange(len(bk.labels))
    metric = str(sub["metric"].iloc[0]) if len(sub) else ""
    for k, system in enumerate(systems):
        rows = sub[sub["system"] == system].sort_values("instance_id", kind="mergesort")
        codes = bk.codes[[inst_pos[i] for i in rows["instance_id"]]] if len(rows) else np.array([], dtype=int)
        st = _bucket_stats(
            rows["value"].to_numpy(dtype=float), codes, len(bk.labels), (system, feature, metric), ci
        )
        style = _style(k, system)
        ax.fill_between(x, st[:, 1], st[:, 2], color=style["color"], alpha=0.15, linewidth=0)
        ax.plot(x, st[:, 0], linewidth=1.6, markersize=6, label=system, **style)
    ax.set_xticks(x, [f"{lab}\n(n={n})" for lab, n in zip(bk.labels, bk.counts, strict=True)])
    if len(x):
        ax.set_xlim(-0.5, len(x) - 0.5)


def _figure(
    metric: str,
    sub: pd.DataFrame,
    buckets: dict[str, Buckets],
    systems: Sequence[str],
    inst_pos: dict[str, int],
    title: str,
    dpi: int,
    ci: tuple[int, int, float],
) -> Figure:
    """The three panels of one metric: `title` at the top, the shared legend at the bottom."""
    fig = Figure(figsize=(15, 5.2), dpi=dpi)
    axes = fig.subplots(1, len(FEATURES), sharey=True)
    any_defined = bool(sub["value"].notna().any())
    for ax, (col, xlabel, _) in zip(axes, FEATURES, strict=True):
        _panel(ax, sub, buckets[col], col, systems, inst_pos, ci)
        ax.set_xlabel(xlabel)
        ax.grid(True, axis="y", alpha=0.3)
        if not any_defined:
            ax.text(0.5, 0.5, "no defined values", transform=ax.transAxes, ha="center", va="center")
    axes[0].set_ylabel(f"{metric} (mean)")
    if not any_defined:
        axes[0].set_ylim(0.0, 1.0)
    fig.suptitle(title, y=0.985, va="top", fontsize=12)
    if systems:
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(
            handles,
            labels,
            loc="lower center",
            ncol=min(len(labels), 6),
            frameon=False,
            bbox_to_anchor=(0.5, 0.0),
        )
    fig.tight_layout(rect=(0, 0.06, 1, 0.95))
    return fig


def metric_figures(
    scores: pd.DataFrame,
    features: pd.DataFrame,
    *,
    bucketing: str = "quantile",
    max_buckets: int = 5,
    metrics: Sequence[str] | None = None,
    systems: Sequence[str] | None = None,
    dpi: int = 100,
    seed: int = 0,
    n_resamples: int = 1000,
    confidence: float = 0.95,
) -> dict[str, Figure]:
    """The figure of each metric (in metric order), as ``plot_metric_vs_buckets`` draws them."""
    if bucketing not in ("quantile", "paper"):
        raise ValueError(f"bucketing must be 'quantile' or 'paper', got {bucketing!r}")
    df, instances, feat_vals = _inputs(scores, features)
    buckets: dict[str, Buckets] = {}
    for col, _, kind in FEATURES:
        vals = feat_vals[col]
        edges = (
            PAPER_EDGES[col]
            if bucketing == "paper"
            else quantile_edges(vals, max_buckets=max_buckets, integer=(kind == "count"))
        )
        buckets[col] = bucketize(vals, edges, kind=kind)

    all_metrics = metric_order(df["metric"].unique())
    chosen_metrics = [m for m in metrics if m in set(all_metrics)] if metrics is not None else all_metrics
    present = sorted(df["system"].unique())
    chosen_systems = [s for s in systems if s in set(present)] if systems is not None else present
    inst_pos = {iid: i for i, iid in enumerate(instances)}
    level = f"{round(100 * confidence, 2):g}%"
    ci = (seed, n_resamples, confidence)
    out = {}
    for metric in chosen_metrics:
        title = (
            f"{metric}: mean per system by instance characteristics ({bucketing} buckets); "
            f"bands = {level} bootstrap CI"
        )
        out[metric] = _figure(
            metric, df[df["metric"] == metric], buckets, chosen_systems, inst_pos, title, dpi, ci
        )
    return out


def plot_metric_vs_buckets(
    scores: pd.DataFrame,
    features: pd.DataFrame,
    out_dir: str | Path,
    *,
    bucketing: str = "quantile",
    max_buckets: int = 5,
    metrics: Sequence[str] | None = None,
    systems: Sequence[str] | None = None,
    dpi: int = 100,
    seed: int = 0,
    n_resamples: int = 1000,
    confidence: float = 0.95,
) -> list[Path]:
    """Write ``<metric>_vs_buckets.png`` per metric into ``out_dir``; return the paths in metric order.

    ``scores``: one row per (instance_id, system, metric) with ``value`` (NaN = undefined, skipped).
    ``features``: one row per instance_id with gold_tokens, grounding_tokens, gold_tables. Instances
    without a feature row (or with a NaN feature) are left out of that panel. ``metrics`` / ``systems``
    select and order (default: every metric in paper order, systems sorted). Each point is a mean with a
    band of its ``confidence`` bootstrap CI (``n_resamples``, per-point seeds derived from ``seed``).
    """
    figures = metric_figures(
        scores,
        features,
        bucketing=bucketing,
        max_buckets=max_buckets,
        metrics=metrics,
        systems=systems,
        dpi=dpi,
        seed=seed,
        n_resamples=n_resamples,
        confidence=confidence,
    )
    out_dir = Path(out_dir)
    paths: list[Path] = []
    for metric, fig in figures.items():
        path = out_dir / f"{_slug(metric)}_vs_buckets.png"
        atomic_write_bytes(path, _render(fig))
        paths.append(path)
    return paths
