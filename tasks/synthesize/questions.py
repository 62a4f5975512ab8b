"""Question augmentation: 5-8 guiding questions per section (adapted from the previous report's)."""

from __future__ import annotations

from schemas.structure import MAX_QUESTIONS, MIN_QUESTIONS, ReportStructure
from tasks.errors import FrameInputError
from tasks.ground.load import GroundingSet
from tasks.llm.backend import Backend, StepContext

__all__ = ["MAX_QUESTIONS", "MIN_QUESTIONS", "augment_questions"]


def augment_questions(
    backend: Backend,
    structure: ReportStructure,
    gset: GroundingSet,
    prev: ReportStructure | None,
    ctx: StepContext,
) -> ReportStructure:
    out = backend.add_questions(structure, gset, prev, ctx)
    for section in out.nodes:
        n = len(section.questions)
        if not MIN_QUESTIONS <= n <= MAX_QUESTIONS:
            raise FrameInputError(
                f"questions {ctx.domain} {ctx.snapshot}",
                f"section {section.id} has {n} guiding questions, expected {MIN_QUESTIONS}-{MAX_QUESTIONS}",
            )
    return out
