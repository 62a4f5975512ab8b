"""The four holistic axes, the judge protocol, and the driver turning one rating into the four metrics."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from schemas.scoring import GroundingText, MetricResult

AXES: tuple[str, ...] = ("faithfulness", "completeness", "understandability", "hallucination")
HOLISTIC_METRICS: tuple[str, ...] = tuple(f"holistic_{a}" for a in AXES)  # hallucination: 10 = none


class HolisticJudge(Protocol):
    name: str

    def rate(self, gold_markdown: str, generated_markdown: str, grounding: Sequence[GroundingText]) -> dict:
        """{"faithfulness", "completeness", "understandability", "hallucination": int 1..10,
        "rationale": str, "detail": dict of judge-specific figures}."""


def holistic(
    gold_markdown: str,
    generated_markdown: str,
    grounding: Sequence[GroundingText],
    judge: HolisticJudge,
) -> list[MetricResult]:
    """The four holistic metrics (``HOLISTIC_METRICS`` order) of R' from one rating by `judge`."""
    rating = judge.rate(gold_markdown, generated_markdown, list(grounding))
    detail = {"rationale": rating.get("rationale", ""), **rating.get("detail", {})}
    out = []
    for metric, axis in zip(HOLISTIC_METRICS, AXES, strict=True):
        value = int(rating[axis])
        if not 1 <= value <= 10:
            raise ValueError(f"{judge.name}: {axis} score {value} is outside 1..10")
        out.append(MetricResult(metric=metric, value=float(value), judge=judge.name, detail=dict(detail)))
    return out
