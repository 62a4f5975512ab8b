"""Shapes of report scoring (SPEC §4): information units, claims, item-level scores, metric results.

Coverage grades *information units* of the gold report Y against a generated report R'; faithfulness
grades *claims* of R' against the grounding documents G. Every graded item keeps its score and the
evidence the judge used, so a score can be audited and compared with human labels (`frame align`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

__all__ = [
    "ALL_METRICS",
    "FAMILIES",
    "FAMILY_OF",
    "HOLISTIC_METRICS",
    "METRIC_GROUP",
    "PAIRWISE",
    "RUBRIC_METRICS",
    "SCAFFOLD_METRICS",
    "SELECTABLE",
    "families_for",
    "metric_range",
    "LOWER_IS_BETTER",
    "METRICS",
    "Claim",
    "InfoUnit",
    "ItemScore",
    "MetricName",
    "MetricResult",
    "UNIT_TYPES",
]

MetricName = Literal["structure", "coverage", "faithfulness"]
METRICS: tuple[str, ...] = ("structure", "coverage", "faithfulness")  # FRAME's three (the default)
# Further families (SPEC §5), chosen with `frame score --metrics`: table and text fidelity (paper 002).
FIDELITY_METRICS: tuple[str, ...] = ("teds", "teds_s", "text_edit_distance")
# Semantic scaffold (paper 001 §4): one extraction from Y per instance, one judgment per system, all
# eight values from that judgment. Main and supporting coverage are shown beside FPS, never replaced by it.
SCAFFOLD_METRICS: tuple[str, ...] = (
    "fps",
    "qps",
    "eps",
    "fact_faithfulness",  # F: share of R' sentences supported by Y
    "fact_coverage",  # FC: share of scaffold facts (main + supporting) inferable from R'
    "question_coverage",  # QC: share of scaffold questions answerable from R'
    "main_coverage",  # M_s / M_c
    "supporting_coverage",  # S_s / S_c
)
# Hierarchical rubric (paper 003): total S (0-100, 0 when a G0 gate fails), G0 pass (1/0), G1 and G2 %.
RUBRIC_METRICS: tuple[str, ...] = ("rubric", "rubric_g0", "rubric_g1", "rubric_g2")
# Holistic direct scores 1-10 (paper 001 App. G.7): the saturation baseline.
HOLISTIC_METRICS: tuple[str, ...] = (
    "holistic_faithfulness",
    "holistic_completeness",
    "holistic_understandability",
    "holistic_hallucination",  # absence of hallucination: 10 = none
)
# A family is computed by one task per instance x system ("unit") and yields all its metrics at once.
FAMILIES: dict[str, tuple[str, ...]] = {
    "structure": ("structure",),
    "coverage": ("coverage",),
    "faithfulness": ("faithfulness",),
    "tables": ("teds", "teds_s"),  # one Hungarian table matching gives both
    "text_edit_distance": ("text_edit_distance",),
    "scaffold": SCAFFOLD_METRICS,
    "rubric": RUBRIC_METRICS,
    "holistic": HOLISTIC_METRICS,
}
# Family of each metric name (a metric of a multi-metric family selects its whole family).
FAMILY_OF: dict[str, str] = {m: f for f, ms in FAMILIES.items() for m in ms}
# Pairwise A/B/tie votes + Bradley-Terry: per instance over all systems, not per (instance, system).
PAIRWISE = "pairwise"
ALL_METRICS: tuple[str, ...] = tuple(FAMILY_OF)
SELECTABLE: tuple[str, ...] = tuple(dict.fromkeys((*FAMILIES, *ALL_METRICS, PAIRWISE)))
LOWER_IS_BETTER: frozenset[str] = frozenset({"text_edit_distance"})
# Value range of each metric (default (0, 1)): reports compare spreads relative to the range.
METRIC_RANGE: dict[str, tuple[float, float]] = {
    **{m: (0.0, 100.0) for m in ("rubric", "rubric_g1", "rubric_g2")},
    **{m: (1.0, 10.0) for m in HOLISTIC_METRICS},
}
# Which family a metric reports under (for side-by-side tables).
METRIC_GROUP: dict[str, str] = {
    **{m: "frame" for m in METRICS},
    **{m: "fidelity" for m in FIDELITY_METRICS},
    **{m: "scaffold" for m in SCAFFOLD_METRICS},
    **{m: "rubric" for m in RUBRIC_METRICS},
    **{m: "holistic" for m in HOLISTIC_METRICS},
}


def metric_range(metric: str) -> tuple[float, float]:
    return METRIC_RANGE.get(metric, (0.0, 1.0))


def families_for(selection: list[str]) -> list[str]:
    """Family units to compute for a `--metrics` selection (names of families or metrics), in order.

    "pairwise" is not a unit (see PAIRWISE); unknown names raise ValueError."""
    out: list[str] = []
    for name in selection:
        if name == PAIRWISE:
            continue
        fam = name if name in FAMILIES else FAMILY_OF.get(name)
        if fam is None:
            raise ValueError(name)
        if fam not in out:
            out.append(fam)
    return out


# Paper 000 App. B: "each unit records its type (entity, statistic, factual claim, etc.)".
UNIT_TYPES: tuple[str, ...] = ("statistic", "entity", "event", "factual_claim", "finding", "method", "other")


class InfoUnit(BaseModel):
    """One atomic piece of information of the gold report (coverage)."""

    unit_id: int = Field(ge=0)  # position in the extracted population (stable across systems)
    type: str  # one of UNIT_TYPES
    content: str = Field(min_length=1)  # the unit as a short self-contained statement
    source_sentence: str = ""  # the sentence / table row of the gold report it was derived from
    section: str = ""  # heading path of the gold report where it sits


class Claim(BaseModel):
    """One checkable proposition of a generated report (faithfulness)."""

    claim_id: int = Field(ge=0)  # position in the extracted population
    content: str = Field(min_length=1)
    source_sentence: str = ""  # the sentence / table row of the generated report it came from
    section: str = ""


class ItemScore(BaseModel):
    """The graded score of one sampled unit or claim, with the evidence behind it."""

    index: int = Field(ge=0)  # unit_id / claim_id
    kind: str  # unit type, or "claim"
    text: str  # the unit / claim content
    source: str = ""  # its source sentence
    score: float = Field(ge=0.0, le=1.0)
    stage: int = Field(default=1, ge=1, le=2)  # faithfulness: 2 when the deeper stage decided
    evidence: str = ""  # best-matching text: a sentence/row of R' (coverage) or a passage of G (faithfulness)
    evidence_ref: str = ""  # where the evidence sits: a heading path of R', or a doc_id of G
    rationale: str = ""  # the judge's reason, or the offline computation (numbers, similarity, arithmetic)


class MetricResult(BaseModel):
    """A report-level metric value plus its items (empty for structure)."""

    metric: str  # structure | coverage | faithfulness
    value: float | None  # None when undefined (e.g. a report with no claim at all)
    judge: str  # who scored: "offline:<method>" or "openai:<model>", embedder included
    population: int = 0  # units / claims before sampling
    items: list[ItemScore] = Field(default_factory=list)
    detail: dict[str, Any] = Field(default_factory=dict)  # metric-specific figures (tree sizes, stage counts)


class ScoreSettings(BaseModel):
    """How `frame score` grades: judges, embedder, tree mode, sampling, node similarity, bootstrap."""

    judge: Literal["offline", "openai"] = "offline"  # coverage + faithfulness judges
    embedder: str = "minilm"  # "minilm" (local all-MiniLM-L6-v2) or "openai:<embedding model>"
    tree: Literal["deterministic", "llm"] = "deterministic"  # structure trees of both reports
    max_items: int = Field(default=100, ge=1)  # sampled units / claims per report (paper: 100)
    seed: int = 0  # base seed: per-instance sampling seeds and bootstrap seeds derive from it
    type_weight: float = Field(default=0.2, ge=0.0, le=1.0)  # w of SPEC §4 node similarity
    proj: Literal["rbf", "linear", "power"] = "rbf"
    delta: float = Field(default=0.10, gt=0.0)
    power_n: int = Field(default=2, ge=1)
    gamma: float = Field(default=0.0, ge=0.0)  # depth-weighted variant of Algorithm 1 (0 = plain)
    bootstrap: int = Field(default=2000, ge=100)  # resamples for the leaderboard's 95% CIs
