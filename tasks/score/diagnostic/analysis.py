"""What the diagnostic pages analyse: per system and metric the mean and bootstrap CI, ranks, how far each
metric spreads across systems (saturation) and per-category means.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tasks.score import registry
from tasks.score.diagnostic.load import _Folder
from tasks.score.leaderboard import (
    OVERALL,
    bootstrap_ci,
    cell_seed,
    scope_order,
)

GOLD = "gold"  # pseudo-system: the gold report scored against itself (reference, not a competitor)
SATURATION_SPREAD = 0.05  # relative spread below which a metric does not separate systems


def _family(metric: str) -> str:
    return registry.group_of(metric)


def _metric_key(metric: str) -> tuple[int, int, str]:
    groups, order = registry.group_order(), registry.metric_order()
    pos = order.index(metric) if metric in order else len(order)
    return (groups.index(_family(metric)) if _family(metric) in groups else len(groups), pos, metric)


def _with_evidence(kind: str) -> tuple[str, ...]:
    """Metrics whose evidence items are of `kind` (MetricSpec.evidence): recall, support, checks."""
    return tuple(m for m, s in registry.specs().items() if s.evidence == kind)


def _baseline(metric: str) -> bool:
    return registry.spec(metric).saturation_baseline


def _width(metric: str) -> float:
    lo, hi = registry.metric_range(metric)
    return (hi - lo) or 1.0


@dataclass(frozen=True)
class _Cell:
    mean: float
    low: float
    high: float
    n: int


@dataclass(frozen=True)
class _Spread:
    metric: str
    spread: float  # relative to the range width; nan with fewer than two systems
    low_system: str
    low_mean: float
    high_system: str
    high_mean: float
    n_systems: int

    @property
    def saturated(self) -> bool:
        return not math.isnan(self.spread) and self.spread < SATURATION_SPREAD


@dataclass
class _Stats:
    systems: list[str]
    competitors: list[str]  # systems ranked (gold excluded)
    metrics: list[str]
    categories: list[str]
    cells: dict[tuple[str, str], _Cell]
    ranks: dict[tuple[str, str], int]
    spreads: dict[str, _Spread]
    cat_means: dict[tuple[str, str, str], float]  # (system, category, metric)
    seed: int
    n_resamples: int

    def mean(self, system: str, metric: str) -> float:
        cell = self.cells.get((system, metric))
        return cell.mean if cell else math.nan

    def best_other(self, system: str, metric: str, category: str | None = None) -> tuple[str, float]:
        """Best competitor other than ``system`` (overall or in a category), or ("", nan)."""
        pool = []
        for s in self.competitors:
            if s == system:
                continue
            v = (
                self.mean(s, metric)
                if category is None
                else self.cat_means.get((s, category, metric), math.nan)
            )
            if not math.isnan(v):
                pool.append((v, s))
        if not pool:
            return ("", math.nan)
        lower = metric in registry.lower_is_better()
        v, s = sorted(pool, key=lambda t: (t[0] if lower else -t[0], t[1]))[0]
        return (s, v)


def _system_order(scores: pd.DataFrame, manifest: dict[str, Any]) -> list[str]:
    present = set(scores["system"])
    listed = [str(s) for s in manifest.get("systems") or [] if str(s) in present]
    return list(dict.fromkeys(listed)) + sorted(present - set(listed))


def _ranks(values: dict[str, float], lower: bool) -> dict[str, int]:
    """Competition ranks (1 = best; ties share the best rank) of the defined values."""
    defined = {s: v for s, v in values.items() if not math.isnan(v)}
    out = {}
    for s, v in defined.items():
        better = sum(
            1
            for w in defined.values()
            if (w < v if lower else w > v) and not math.isclose(w, v, rel_tol=1e-12, abs_tol=1e-12)
        )
        out[s] = 1 + better
    return out


def _stats(folder: _Folder, seed: int | None, n_resamples: int | None) -> _Stats:
    settings = folder.manifest.get("settings") or {}
    seed = int(settings.get("seed", 0)) if seed is None else int(seed)
    n_resamples = int(settings.get("bootstrap", 2000)) if n_resamples is None else int(n_resamples)
    df = folder.scores
    systems = _system_order(df, folder.manifest)
    competitors = [s for s in systems if s != GOLD] or list(systems)
    metrics = sorted(set(df["metric"]), key=_metric_key)
    categories = [c for c in scope_order(set(df["category"]) - {""}) if c != OVERALL]

    cells: dict[tuple[str, str], _Cell] = {}
    for (system, metric), g in df.groupby(["system", "metric"], sort=False):
        vals = g.sort_values("instance_id", kind="mergesort")["value"].to_numpy(dtype=float)
        vals = vals[~np.isnan(vals)]
        mean, low, high = bootstrap_ci(
            vals, n_resamples=n_resamples, seed=cell_seed(seed, str(system), OVERALL, str(metric))
        )
        cells[(str(system), str(metric))] = _Cell(mean, low, high, int(vals.size))

    ranks: dict[tuple[str, str], int] = {}
    spreads: dict[str, _Spread] = {}
    for metric in metrics:
        means = {s: cells[(s, metric)].mean for s in competitors if (s, metric) in cells}
        for s, r in _ranks(means, metric in registry.lower_is_better()).items():
            ranks[(s, metric)] = r
        defined = sorted(((v, s) for s, v in means.items() if not math.isnan(v)), key=lambda t: (t[0], t[1]))
        if len(defined) >= 2:
            (lo_v, lo_s), (hi_v, hi_s) = defined[0], defined[-1]
            spreads[metric] = _Spread(
                metric, (hi_v - lo_v) / _width(metric), lo_s, lo_v, hi_s, hi_v, len(defined)
            )
        elif defined:
            v, s = defined[0]
            spreads[metric] = _Spread(metric, math.nan, s, v, s, v, 1)
        else:
            spreads[metric] = _Spread(metric, math.nan, "", math.nan, "", math.nan, 0)

    cat = df[df["category"] != ""].groupby(["system", "category", "metric"])["value"].mean()
    cat_means = {(str(s), str(c), str(m)): float(v) for (s, c, m), v in cat.items()}
    return _Stats(
        systems, competitors, metrics, categories, cells, ranks, spreads, cat_means, seed, n_resamples
    )
