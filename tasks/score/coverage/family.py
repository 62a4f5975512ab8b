"""The coverage driver (sample Y's units, grade them, average: the IUR) and the metric family."""

from __future__ import annotations

import math

import numpy as np

from schemas.scoring import MetricResult
from tasks.score.coverage.llm import LLMCoverageJudge
from tasks.score.coverage.offline import OfflineCoverageJudge
from tasks.score.judges import MAX_ITEMS, CoverageJudge, SampledFamily, sample_items
from tasks.score.metric import Inputs, MetricSpec


def coverage(
    gold_markdown: str,
    generated_markdown: str,
    judge: CoverageJudge,
    *,
    max_items: int = MAX_ITEMS,
    seed: int = 0,
) -> MetricResult:
    """IUR of `generated_markdown` against `gold_markdown` (docs/metrics/coverage.md)."""
    units = judge.extract_units(gold_markdown)
    if not units:
        why = "the gold report has no information unit"
        return MetricResult.undefined("coverage", judge.name, why, seed=seed)
    sample = sample_items(units, max_items, seed)
    items = judge.grade(sample, generated_markdown)
    if len(items) != len(sample) or [i.index for i in items] != [u.unit_id for u in sample]:
        raise ValueError(
            f"{judge.name}: grade returned {len(items)} scores for {len(sample)} units (or out of order)"
        )
    value = float(np.mean([i.score for i in items]))
    by_type: dict[str, list[float]] = {}
    for i in items:
        by_type.setdefault(i.kind, []).append(i.score)
    return MetricResult(
        metric="coverage",
        value=value if math.isfinite(value) else None,
        judge=judge.name,
        population=len(units),
        items=items,
        detail={
            "sampled": len(sample),
            "seed": seed,
            "max_items": max_items,
            "by_type": {k: {"n": len(v), "mean": float(np.mean(v))} for k, v in sorted(by_type.items())},
        },
    )


# what the metric checklist does not hold a recall to (docs/metrics/robustness.md)
RECALL_UNCLAIMED = (("order", "a recall of Y's information units, wherever they stand in R'"),)


class CoverageFamily(
    SampledFamily,
    metric=MetricSpec("coverage", group="frame", evidence="recall", unclaimed=RECALL_UNCLAIMED),
    reads="gold",
    judges=(OfflineCoverageJudge, LLMCoverageJudge),
):
    """Information-unit recall: share of the gold report's sampled units that R' conveys."""

    def measure(self, inputs: Inputs, *, max_items: int, seed: int) -> MetricResult:
        return coverage(inputs.gold, inputs.generated, self.judge, max_items=max_items, seed=seed)

    def embeds_ahead(self) -> bool:
        return isinstance(self.judge, OfflineCoverageJudge)  # the LLM judge embeds nothing

    def embedding_texts(self, inputs: Inputs) -> list[str]:
        if not self.embeds_ahead():
            return []
        units = self.judge.extract_units(inputs.gold)
        sample = sample_items(units, self.env.settings.max_items, inputs.seed)
        return self.judge.embedding_texts(sample, inputs.generated)
