"""Structure synthesis: form-free at a domain's first snapshot, form-restricted after it."""

from __future__ import annotations

from schemas.structure import ReportStructure
from tasks.ground.load import GroundingSet
from tasks.llm.backend import Backend, StepContext


def synthesize_structure(
    backend: Backend, gset: GroundingSet, prev: ReportStructure | None, ctx: StepContext
) -> ReportStructure:
    if prev is None:
        structure = backend.propose_structure(gset, ctx)
        return structure.model_copy(update={"form_restricted": False})
    structure = backend.adapt_structure(prev, gset, ctx)
    return structure.model_copy(update={"form_restricted": True})
