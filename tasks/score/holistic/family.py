"""HolisticFamily: the four direct 1-10 scores of R', offline proxy or LLM judge, shown as a baseline."""

from __future__ import annotations

from schemas.scoring import MetricResult
from tasks.score.holistic.llm import LLMHolisticJudge
from tasks.score.holistic.offline import OfflineHolisticJudge
from tasks.score.holistic.rating import HOLISTIC_METRICS, HolisticJudge, holistic
from tasks.score.metric import Inputs, JudgeEnv, MetricFamily, MetricSpec

# What the metric checklist does not hold the offline proxy's axes to (docs/metrics/robustness.md).
_NO_WORDS = "the offline proxy reads figures and headings, not direction words"
_NO_YEARS = "years are not among the figures the offline proxy reads"
_SHARE = "shares of figures and headings found anywhere, wherever they stand"
_PRECISE = "a share of R's figures found in G: leaving something out states nothing false"
_WHOLE_POINTS = (
    "a whole-point 1-10 rating of the share of Y's figures and headings found: a table holding under a"
    " ninth of Y's figures (the small tables of surveys) moves it by less than a point"
)
_SURFACE = "surface readability checks (headings, sentence length, repetition, raw HTML), not what R' says"
_UNCLAIMED = {
    "holistic_completeness": (
        ("directions", _NO_WORDS),
        ("periods", _NO_YEARS),
        ("order", _SHARE),
        ("tables", _WHOLE_POINTS),
    ),
    "holistic_faithfulness": (
        ("directions", _NO_WORDS),
        ("periods", _NO_YEARS),
        ("content", _PRECISE),
        ("order", _SHARE),
        ("tables", _PRECISE),
    ),
    "holistic_understandability": tuple(
        (a, _SURFACE) for a in ("figures", "directions", "periods", "content", "order", "tables")
    ),
}
_UNCLAIMED["holistic_hallucination"] = _UNCLAIMED["holistic_faithfulness"]


class HolisticFamily(MetricFamily):
    """Four direct 1-10 scores of R': the saturation baseline shown beside the other families."""

    name = "holistic"
    metrics = tuple(
        MetricSpec(m, 1.0, 10.0, saturation_baseline=True, unclaimed=_UNCLAIMED[m]) for m in HOLISTIC_METRICS
    )
    reads = frozenset({"gold", "grounding"})
    summary = "direct 1-10 scores (faithfulness, completeness, understandability, hallucination): a baseline"

    def __init__(self, env: JudgeEnv) -> None:
        super().__init__(env)
        self.judge: HolisticJudge = (
            OfflineHolisticJudge() if env.offline else LLMHolisticJudge(env.client, env.llm)
        )

    def score(self, inputs: Inputs) -> list[MetricResult]:
        return holistic(inputs.gold, inputs.generated, inputs.grounding, self.judge)
