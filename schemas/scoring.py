"""Shapes of report scoring (SPEC §4): information units, claims, item-level scores, metric results.

Coverage grades *information units* of the gold report Y against a generated report R'; faithfulness
grades *claims* of R' against the grounding documents G. Every graded item keeps its score and the
evidence the judge used, so a score can be audited and compared with human labels (`frame align`).
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

import pyarrow as pa
from pydantic import BaseModel, Field, model_validator

__all__ = [
    "Claim",
    "EVIDENCE_SCHEMA",
    "GroundingText",
    "InfoUnit",
    "ItemScore",
    "MetricResult",
    "SCORES_SCHEMA",
    "ScoreSettings",
    "UNIT_TYPES",
]


class GroundingText(NamedTuple):
    """The text of one grounding document of G, as scoring reads it (a row of the release table
    `grounding_documents`); its metadata record is `schemas.documents.GroundingDocument`, a loaded snapshot
    folder `tasks.ground.load.GroundingSet`."""

    doc_id: str
    title: str
    markdown: str


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

    metric: str  # a registered metric name (tasks.score.registry)
    value: float | None  # None when undefined (e.g. a report with no claim at all)
    judge: str  # who scored: "offline:<method>" or "openai:<model>", embedder included
    population: int = 0  # units / claims before sampling
    items: list[ItemScore] = Field(default_factory=list)
    detail: dict[str, Any] = Field(default_factory=dict)  # metric-specific figures (tree sizes, stage counts)

    @classmethod
    def undefined(cls, metric: str, judge: str, reason: str, **detail: Any) -> MetricResult:
        """The result of a report with nothing to score (no unit, no claim): no value, the reason why."""
        return cls(metric=metric, value=None, judge=judge, detail={**detail, "sampled": 0, "reason": reason})


class ScoreSettings(BaseModel):
    """How `frame score` grades: judges, embedder, tree mode, sampling, node similarity, bootstrap."""

    judge: Literal["offline", "openai"] = "offline"  # coverage + faithfulness judges
    embedder: str = "minilm"  # "minilm" (local all-MiniLM-L6-v2) or "openai:<embedding model>"
    # MiniLM forward pass: "auto" = $FRAME_EMBED_PRECISION, else bf16 where the CPU has bf16 instructions
    embed_precision: Literal["auto", "fp32", "bf16"] = "auto"
    # structure trees of both reports; not given: "llm" (paper 000 §4.1) with the openai judge, else
    # "deterministic" (resolved here, so settings and score files hold the builder used)
    tree: Literal["deterministic", "llm"] = "deterministic"

    @model_validator(mode="before")
    @classmethod
    def _default_tree(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("tree") is None:
            data = {**data, "tree": "llm" if data.get("judge") == "openai" else "deterministic"}
        return data

    max_items: int = Field(default=100, ge=1)  # sampled units / claims per report (paper: 100)
    seed: int = 0  # base seed: per-instance sampling seeds and bootstrap seeds derive from it
    type_weight: float = Field(default=0.2, ge=0.0, le=1.0)  # w of SPEC §4 node similarity
    proj: Literal["rbf", "linear", "power"] = "rbf"
    delta: float = Field(default=0.10, gt=0.0)
    # Where delta and w come from: "calibrated for <embedder>", "paper" or "user". Unless given, delta and
    # w are the embedder's values of schemas/projection.toml (_projection below).
    delta_source: str = ""
    type_weight_source: str = ""
    power_n: int = Field(default=2, ge=1)
    gamma: float = Field(default=0.0, ge=0.0)  # depth-weighted variant of Algorithm 1 (0 = plain)
    bootstrap: int = Field(default=2000, ge=100)  # resamples for the leaderboard's 95% CIs

    @model_validator(mode="after")
    def _projection(self) -> ScoreSettings:
        """delta / type_weight not given: the embedder's calibrated (or the paper's) values; given: "user".
        A source already set (settings read back from a score file) is kept."""
        from schemas.projection import projection_for

        given = self.model_fields_set
        p = projection_for(self.embedder)
        for key, value, source in (
            ("delta", p.delta, p.delta_source),
            ("type_weight", p.type_weight, p.type_weight_source),
        ):
            if f"{key}_source" in given and getattr(self, f"{key}_source"):
                continue
            if key in given:
                source = "user"
            else:
                setattr(self, key, value)
            setattr(self, f"{key}_source", source)
        return self


# The two tables every `frame score` run writes (tasks.score.outputs).
SCORES_SCHEMA = pa.schema(
    [
        pa.field("instance_id", pa.string(), nullable=False),
        pa.field("category", pa.string(), nullable=False),
        pa.field("system", pa.string(), nullable=False),
        pa.field("metric", pa.string(), nullable=False),
        pa.field("value", pa.float64()),  # null when undefined (e.g. a report without any claim)
        pa.field("judge", pa.string(), nullable=False),
        pa.field("population", pa.int64()),  # units / claims before sampling (0 for structure)
        pa.field("sampled", pa.int64()),  # items graded
        pa.field("detail_json", pa.string()),
        # the instance's source periods between S and G (instances.periods_skipped): > 0 is scored
        # apart from the leaderboard's headline scopes; null when the release does not record it
        pa.field("periods_skipped", pa.int32()),
        # which sample of the system's report this row scores (`--epochs K`: 0..K-1; 0 when sampled once)
        pa.field("epoch", pa.int32()),
    ]
)
EVIDENCE_SCHEMA = pa.schema(
    [
        pa.field("item_id", pa.string(), nullable=False),  # "<instance_id>|<system>|<metric>|<index>"
        pa.field("instance_id", pa.string(), nullable=False),
        pa.field("system", pa.string(), nullable=False),
        pa.field("metric", pa.string(), nullable=False),
        pa.field("index", pa.int64(), nullable=False),
        pa.field("kind", pa.string()),
        pa.field("text", pa.string()),
        pa.field("source", pa.string()),
        pa.field("score", pa.float64(), nullable=False),
        pa.field("stage", pa.int32()),
        pa.field("evidence", pa.string()),
        pa.field("evidence_ref", pa.string()),
        pa.field("rationale", pa.string()),
        pa.field("judge", pa.string(), nullable=False),
    ]
)
