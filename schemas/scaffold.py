"""Shapes of the Semantic Scaffold (paper 001 §4): facts, questions and entity attributes extracted once
from the gold report Y, and one judgment of a generated report R' against them.

A scaffold is extracted once per instance and stored as JSON; every system's R' is judged against the same
scaffold (`tasks.score.scaffold`). Every item carries a tier: "main" (a main point), "supporting" (a
supporting detail) or "other" (metadata and boilerplate, never counted by a metric). Ids are 1-based, like
the paper's ("M1", sentence "1"); attribute ids run over all entities of a scaffold. R' sentence ids are the
1-based positions of ``tasks.markdown.pieces.markdown_pieces(R')``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

__all__ = [
    "TIERS",
    "Alignment",
    "Scaffold",
    "ScaffoldAttribute",
    "ScaffoldEntity",
    "ScaffoldFact",
    "ScaffoldJudgment",
    "ScaffoldQuestion",
    "Tier",
]

Tier = Literal["main", "supporting", "other"]
TIERS: tuple[str, ...] = ("main", "supporting", "other")


def _tier_counts(tiers: list[str]) -> dict[str, int]:
    return {t: tiers.count(t) for t in TIERS}


class ScaffoldFact(BaseModel):
    """One atomic, self-contained fact of Y."""

    id: int = Field(ge=1)
    text: str = Field(min_length=1)
    tier: Tier
    source: str = ""  # the gold sentence / table row it comes from
    section: str = ""  # heading path of Y (" > "-joined)


class ScaffoldQuestion(BaseModel):
    """A question Y answers, with its expected answer."""

    id: int = Field(ge=1)
    question: str = Field(min_length=1)
    answer: str = Field(min_length=1)
    tier: Tier
    source: str = ""  # the gold sentence / row the answer comes from
    section: str = ""
    fact_id: int | None = None  # offline scaffolds: the fact the answer was taken from


class ScaffoldAttribute(BaseModel):
    """One defining property of an entity, as a single statement."""

    id: int = Field(ge=1)  # global over all entities of the scaffold
    text: str = Field(min_length=1)
    tier: Tier
    source: str = ""
    value: str = ""  # table-row attributes: the cell as displayed (``text`` is "<header>: <value>")
    fact_id: int | None = None  # offline scaffolds: the fact (sentence or row) the attribute comes from


class ScaffoldEntity(BaseModel):
    name: str = Field(min_length=1)
    type: str = "other"
    attributes: list[ScaffoldAttribute] = Field(default_factory=list)


class Scaffold(BaseModel):
    """Everything extracted from one gold report; reused for every system's judgment."""

    extractor: str  # "offline:scaffold-heuristic" or "openai:<model>"
    facts: list[ScaffoldFact] = Field(default_factory=list)
    questions: list[ScaffoldQuestion] = Field(default_factory=list)
    entities: list[ScaffoldEntity] = Field(default_factory=list)
    # The gold report itself: fact faithfulness (F) grades R' sentences against it. Empty -> F undefined.
    gold_markdown: str = ""
    detail: dict[str, Any] = Field(default_factory=dict)  # extraction figures (parts, caps applied)

    @model_validator(mode="after")
    def _unique_ids(self) -> Scaffold:
        for what, ids in (
            ("fact", [f.id for f in self.facts]),
            ("question", [q.id for q in self.questions]),
            ("attribute", [a.id for a in self.attributes()]),
        ):
            if len(ids) != len(set(ids)):
                dupes = sorted({i for i in ids if ids.count(i) > 1})
                raise ValueError(f"{what} ids must be unique (repeated: {dupes[:10]})")
        return self

    def attributes(self) -> list[ScaffoldAttribute]:
        """All attributes, entity by entity."""
        return [a for e in self.entities for a in e.attributes]

    def entity_of(self) -> dict[int, ScaffoldEntity]:
        """Attribute id -> its entity."""
        return {a.id: e for e in self.entities for a in e.attributes}

    def counts(self) -> dict[str, Any]:
        """Items per kind and tier: {"facts": {"main": 4, "supporting": 3, "other": 1, "total": 8}, ...}."""
        out: dict[str, Any] = {}
        for kind, tiers in (
            ("facts", [f.tier for f in self.facts]),
            ("questions", [q.tier for q in self.questions]),
            ("attributes", [a.tier for a in self.attributes()]),
        ):
            out[kind] = {**_tier_counts(tiers), "total": len(tiers)}
        out["entities"] = len(self.entities)
        return out


class Alignment(BaseModel):
    """The judge's verdict on one scaffold item (or, kind "sentence", on one sentence of R': whether Y
    supports it, for F, or whether it states a main or supporting scaffold fact, for Fact Focus)."""

    item_id: int = Field(ge=0)  # fact / question / attribute id; R' sentence id for kind "sentence"
    kind: Literal["fact", "question", "attribute", "sentence"]
    text: str = ""  # kind "sentence": the R' sentence (other kinds: see the scaffold item)
    ok: bool  # inferable / answerable / preserved / supported by Y
    score: float = Field(ge=0.0, le=1.0)  # the graded score behind `ok` (LLM judges: 1 or 0)
    # facts, questions, attributes: ids of the R' sentences relied on; kind "sentence": ids of the
    # pieces of Y (markdown_pieces(Y), 1-based) that support it (F), or of the scaffold facts it states
    # (Fact Focus)
    sentence_ids: list[int] = Field(default_factory=list)
    evidence: str = ""  # the text of the (best) supporting sentence / passage
    evidence_ref: str = ""  # its heading path
    rationale: str = ""


class ScaffoldJudgment(BaseModel):
    """One system's R' judged against a scaffold."""

    judge: str
    sentences: int = Field(ge=0)  # sentences (pieces) of R'
    alignments: list[Alignment] = Field(default_factory=list)  # kinds fact, question, attribute
    faithful: list[Alignment] = Field(default_factory=list)  # kind "sentence": the graded R' sentences
    # kind "sentence": the sampled R' sentences, each aligned or not to a main / supporting fact
    focus: list[Alignment] = Field(default_factory=list)
    detail: dict[str, Any] = Field(default_factory=dict)  # sampling, excerpts, requests and retries
