"""The reply shapes of the scaffold's LLM roles (extraction and judgment) and the id checks of a reply."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from pydantic import AliasChoices, BaseModel, Field, field_validator

from schemas.scaffold import Tier


def _tier_label(value: Any) -> str:
    """ "main point" / "Main" / "supporting_detail" / "Other" -> main | supporting | other."""
    s = re.sub(r"[\s_-]+", " ", str(value).strip().lower())
    if s.startswith("main"):
        return "main"
    if s.startswith("support"):
        return "supporting"
    if s in ("other", "metadata", "boilerplate"):
        return "other"
    raise ValueError(f'tier must be "main point", "supporting detail" or "other" (got {value!r})')


def _stripped(v: str) -> str:
    if not v.strip():
        raise ValueError("must not be blank")
    return v.strip()


class _FactOut(BaseModel):
    fact: str = Field(min_length=1, validation_alias=AliasChoices("fact", "text"))
    tier: Tier = Field(validation_alias=AliasChoices("tier", "type"))
    source: str = ""
    section: str = ""

    _tier = field_validator("tier", mode="before")(_tier_label)
    _text = field_validator("fact")(_stripped)


class FactsReply(BaseModel):
    """Reply of role score_scaffold_facts."""

    facts: list[_FactOut]


class _QuestionOut(BaseModel):
    question: str = Field(min_length=1)
    answer: str = Field(min_length=1, validation_alias=AliasChoices("answer", "expected_answer"))
    tier: Tier = Field(validation_alias=AliasChoices("tier", "type"))
    source: str = ""
    section: str = ""

    _tier = field_validator("tier", mode="before")(_tier_label)
    _text = field_validator("question", "answer")(_stripped)


class QuestionsReply(BaseModel):
    """Reply of role score_scaffold_questions."""

    questions: list[_QuestionOut]


class _AttributeOut(BaseModel):
    attribute: str = Field(min_length=1, validation_alias=AliasChoices("attribute", "text"))
    tier: Tier = Field(validation_alias=AliasChoices("tier", "type"))
    source: str = ""

    _tier = field_validator("tier", mode="before")(_tier_label)
    _text = field_validator("attribute")(_stripped)


class _EntityOut(BaseModel):
    name: str = Field(min_length=1, validation_alias=AliasChoices("name", "entity_name", "entity"))
    type: str = Field(default="other", validation_alias=AliasChoices("type", "entity_type"))
    attributes: list[_AttributeOut] = Field(default_factory=list)

    _text = field_validator("name")(_stripped)


class EntitiesReply(BaseModel):
    """Reply of role score_scaffold_entities."""

    entities: list[_EntityOut]


class _Verdict(BaseModel):
    """The judge's verdict on one listed id, with its reasons."""

    id: int
    justification: str = ""


class _AlignOut(_Verdict):
    ok: bool
    sentence_ids: list[int] = Field(default_factory=list)


class AlignReply(BaseModel):
    """Reply of role score_scaffold_align (facts or questions)."""

    alignments: list[_AlignOut]


class _EntityCheckOut(BaseModel):
    name: str = ""
    preserved_ids: list[int] = Field(default_factory=list)
    sentence_ids: list[int] = Field(default_factory=list)


class EntityCheckReply(BaseModel):
    """Reply of role score_scaffold_entity_check: only entities found in R' are listed."""

    entities: list[_EntityCheckOut]


class _FaithfulOut(_Verdict):
    supported: bool
    evidence_ids: list[int] = Field(default_factory=list)


class FaithfulReply(BaseModel):
    """Reply of role score_scaffold_faithful."""

    sentences: list[_FaithfulOut]


class _FocusOut(_Verdict):
    aligned: bool
    fact_ids: list[int] = Field(default_factory=list)


class FocusReply(BaseModel):
    """Reply of role score_scaffold_focus."""

    sentences: list[_FocusOut]


def _exact_ids(label: str, want: Sequence[int], got: Sequence[int]) -> None:
    """Raise ValueError unless `got` names every id of `want` once and nothing else."""
    counts = Counter(got)
    dupes = sorted(i for i, n in counts.items() if n > 1)
    if dupes:
        raise ValueError(f"{label} given more than once: {dupes}")
    extra = sorted(set(counts) - set(want))
    missing = [i for i in want if i not in counts]
    if extra or missing:
        raise ValueError(
            f"the reply must give exactly the {label}s "
            + ", ".join(map(str, want))
            + (f"; unknown {label}: {extra}" if extra else "")
            + (f"; missing {label}: {missing}" if missing else "")
        )


def _known_ids(label: str, ids: Sequence[int], shown: set[int], total: int) -> None:
    bad = sorted({i for i in ids if i not in shown})
    if bad:
        where = f"1..{total}" if len(shown) == total else "the ids shown in the excerpt"
        raise ValueError(f"{label} must be {where}; not in the report: {bad}")
