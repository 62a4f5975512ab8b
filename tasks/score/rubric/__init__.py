"""Frame's hierarchical report rubric: paper 003's layers (G0 deliverability gates, G1 report identity, G2
completeness) and equation 1, filled with frame's own items for Markdown reports, decided by offline checks
(or, for the judged items, an LLM) and aggregated into the total S: frame's rubric score, not 003's. Items
are data (``schemas/rubric.toml``); the specification of the layers, the score, every check and both
judges, and the map of 003's 35 items to frame's, is docs/metrics/rubric.md.

Layout: ``reading`` (context, finding, the CHECKS registry, the parsed report), ``gates`` (G0),
``identity`` (G1), ``completeness`` (G2), ``judges`` (offline and LLM), ``scoring`` (rubric_total,
score_rubric); the family is defined here.
"""

from __future__ import annotations

from schemas.scoring import MetricResult
from tasks.score.metric import Inputs, JudgeEnv, MetricFamily, MetricSpec

# the check modules fill CHECKS when imported: every rubric item's check must be registered
from tasks.score.rubric import gates as gates
from tasks.score.rubric import identity as identity
from tasks.score.rubric.completeness import DENSITY_PARTIAL as DENSITY_PARTIAL
from tasks.score.rubric.completeness import DENSITY_PASS as DENSITY_PASS
from tasks.score.rubric.completeness import MATCH_CUTOFF as MATCH_CUTOFF
from tasks.score.rubric.judges import OFFLINE_NAME as OFFLINE_NAME
from tasks.score.rubric.judges import LLMRubricJudge, OfflineRubricJudge, RubricJudge, RubricReply
from tasks.score.rubric.reading import CHECKS, Finding, RubricContext
from tasks.score.rubric.reading import EVIDENCE_CHARS as EVIDENCE_CHARS
from tasks.score.rubric.reading import CheckFn as CheckFn
from tasks.score.rubric.reading import DocCheck as DocCheck
from tasks.score.rubric.scoring import rubric_items, rubric_total, score_rubric

__all__ = [
    "CHECKS",
    "Finding",
    "LLMRubricJudge",
    "OfflineRubricJudge",
    "RubricContext",
    "RubricJudge",
    "RubricReply",
    "rubric_items",
    "rubric_total",
    "score_rubric",
]


# Total S (0-100, 0 when a G0 gate fails), G0 pass (1/0), G1 and G2 percentages (paper 003).
RUBRIC_METRICS: tuple[str, ...] = ("rubric", "rubric_g0", "rubric_g1", "rubric_g2")


# What the metric checklist does not hold the rubric to (docs/metrics/robustness.md).
_FORM = (
    "frame's rubric grades a report's form (gates, layout, presentation, agreement of prose with its own "
    "tables), not what it says; its section checks compare R' with S, one check of 21"
)
_UNCLAIMED = tuple((a, _FORM) for a in ("figures", "directions", "periods", "content", "order", "tables"))


class RubricFamily(MetricFamily):
    """Frame's hierarchical rubric (paper 003's layers, frame's items): G0 gates, G1 and G2 checks of R'."""

    name = "rubric"
    metrics = (
        MetricSpec("rubric", 0.0, 100.0, evidence="checks", unclaimed=_UNCLAIMED),
        MetricSpec("rubric_g0", evidence="checks", unclaimed=_UNCLAIMED),
        MetricSpec("rubric_g1", 0.0, 100.0, evidence="checks", unclaimed=_UNCLAIMED),
        MetricSpec("rubric_g2", 0.0, 100.0, evidence="checks", unclaimed=_UNCLAIMED),
    )
    reads = frozenset({"sample", "context"})
    summary = "frame's hierarchical rubric: G0 gates, G1 form and G2 content checks (score 0-100)"

    def __init__(self, env: JudgeEnv) -> None:
        super().__init__(env)
        self.judge: RubricJudge = OfflineRubricJudge() if env.offline else LLMRubricJudge(env.client, env.llm)

    def score(self, inputs: Inputs) -> list[MetricResult]:
        c = inputs.context
        ctx = RubricContext(
            category=c.get("category", ""),
            domain=c.get("domain", ""),
            sample_markdown=inputs.sample,
            target_period=c.get("t_target", ""),
        )
        return score_rubric(inputs.generated, ctx, self.judge)
