"""Reply shapes of the coverage LLM roles (score_units, score_coverage) and the check that a grading reply
names exactly the units of its batch."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from pydantic import BaseModel, Field, field_validator

from schemas.scoring import UNIT_TYPES
from tasks.score.llm_judge import ids_check, stripped_text

_UnitContent = stripped_text("content must not be blank")


class _UnitOut(BaseModel):
    type: str
    content: _UnitContent
    source_sentence: str = ""
    section: str = ""

    @field_validator("type")
    @classmethod
    def _known_type(cls, v: str) -> str:
        t = re.sub(r"[\s-]+", "_", v.strip().lower())
        if t not in UNIT_TYPES:
            raise ValueError(f"type must be one of {', '.join(UNIT_TYPES)} (got {v!r})")
        return t


class UnitsReply(BaseModel):
    """Reply of role score_units."""

    units: list[_UnitOut]


class _Judgment(BaseModel):
    unit_id: int
    score: float = Field(ge=0.0, le=1.0)
    evidence: str = ""
    rationale: str = ""


class CoverageReply(BaseModel):
    """Reply of role score_coverage."""

    judgments: list[_Judgment]


def _batch_check(ids: Sequence[int]) -> Callable[[CoverageReply], None]:
    want = list(ids)

    def explain(dupes: list, extra: list, missing: list) -> str:
        if dupes:
            return f"unit_id given more than once: {dupes}"
        return (
            "judgments must cover exactly the unit_ids "
            + ", ".join(map(str, want))
            + (f"; unknown unit_id: {extra}" if extra else "")
            + (f"; missing unit_id: {missing}" if missing else "")
        )

    return ids_check(want, lambda reply: [j.unit_id for j in reply.judgments], explain)
