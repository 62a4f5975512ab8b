"""The offline pairwise vote: the majority of the metrics both systems have, and the judge casting it
from one instance's metric values per system (docs/metrics/pairwise.md)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd


def _value(x: float | None) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


def offline_vote(
    a: Mapping[str, float | None],
    b: Mapping[str, float | None],
    lower_is_better: frozenset[str] | set[str] | None = None,
    tol: float = 0.01,
    ranges: Mapping[str, tuple[float, float]] | None = None,
) -> tuple[str, str]:
    """("A"|"B"|"tie", rationale): the majority vote of the metrics both systems have
    (docs/metrics/pairwise.md). Ranges and directions default to the registered metrics' specs."""
    from tasks.score import registry  # late: the registry lists this module's family

    if lower_is_better is None:
        lower_is_better = registry.lower_is_better()
    metric_range = registry.metric_range
    n_a = n_b = n_abstain = 0
    parts: list[str] = []
    for metric in sorted(set(a) & set(b)):
        va, vb = _value(a[metric]), _value(b[metric])
        if va is None or vb is None:
            continue
        lo, hi = (ranges or {}).get(metric) or metric_range(metric)
        margin = tol * (hi - lo)
        diff = (vb - va) if metric in lower_is_better else (va - vb)
        if abs(diff) <= margin:
            n_abstain += 1
            parts.append(f"{metric}: abstain ({va:.4g} vs {vb:.4g}, |diff| <= {margin:.4g})")
            continue
        side = "A" if diff > 0 else "B"
        if side == "A":
            n_a += 1
        else:
            n_b += 1
        arrow = ", lower is better" if metric in lower_is_better else ""
        parts.append(f"{metric}: {side} ({va:.4g} vs {vb:.4g}{arrow})")
    verdict = "A" if n_a > n_b else "B" if n_b > n_a else "tie"
    summary = f"A {n_a}, B {n_b}, abstain {n_abstain} -> {verdict}"
    if not parts:
        summary = "no metric with a value for both systems -> tie"
    return verdict, "; ".join([*parts, summary])


class OfflinePairwiseJudge:
    """The offline pairwise judge: :func:`offline_vote` over one instance's metric values per system."""

    name = "offline:metric-vote"

    def __init__(
        self,
        values_by_system: Mapping[str, Mapping[str, float | None]],
        *,
        tol: float = 0.01,
        lower_is_better: frozenset[str] | set[str] | None = None,
        ranges: Mapping[str, tuple[float, float]] | None = None,
    ) -> None:
        self.values = {s: dict(v) for s, v in values_by_system.items()}
        self.tol = tol
        self.lower_is_better = lower_is_better
        self.ranges = ranges

    @classmethod
    def from_scores(
        cls, scores: pd.DataFrame, instance_id: str, metrics: Sequence[str] | None = None, **kw: Any
    ) -> OfflinePairwiseJudge:
        """From the long score table (instance_id, system, metric, value), one instance's rows, optionally
        only `metrics`."""
        rows = scores[scores["instance_id"] == instance_id]
        if metrics is not None:
            rows = rows[rows["metric"].isin(list(metrics))]
        values: dict[str, dict[str, float | None]] = {}
        for system, metric, value in zip(rows["system"], rows["metric"], rows["value"], strict=True):
            values.setdefault(str(system), {})[str(metric)] = _value(value)
        return cls(values, **kw)

    def compare(
        self, gold_markdown: str, report_1: str, report_2: str, *, systems: tuple[str, str] | None = None
    ) -> tuple[str, str]:
        if systems is None:
            raise ValueError(f"{self.name} votes from metric values: compare() needs systems=(s1, s2)")
        missing = [s for s in systems if s not in self.values]
        if missing:
            raise KeyError(f"{self.name}: no metric values for system(s) {missing}")
        vote, why = offline_vote(
            self.values[systems[0]],
            self.values[systems[1]],
            lower_is_better=self.lower_is_better,
            tol=self.tol,
            ranges=self.ranges,
        )
        return {"A": "1", "B": "2", "tie": "tie"}[vote], why
