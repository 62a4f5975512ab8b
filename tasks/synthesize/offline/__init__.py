"""The offline backend: deterministic, documented algorithms for the synthesis roles (SPEC §3).

No network, no model, no randomness: the same grounding set and structure give byte-identical output.
Every structure it returns carries `Provenance(backend="offline", model="frame-offline-<role>-v1")`.
Gold reports built with it are **extractive baselines** (sentences, tables and figure lines copied
from the grounding documents); real benchmark builds use an LLM endpoint (`backend = "openai"`).

- `structure` role (form-free and form-restricted): `tasks/synthesize/offline/structure.py`
- `questions` role: `tasks/synthesize/offline/questions.py`
- `fill` role: `tasks/synthesize/offline/fill.py` (passages come from `tasks/synthesize/retrieve.py`)
"""

from __future__ import annotations

from typing import Literal

from schemas.structure import ReportStructure, StructureNode
from tasks.ground.load import GroundingSet
from tasks.llm.backend import Passage, StepContext
from tasks.synthesize.offline.fill import NO_EVIDENCE
from tasks.synthesize.offline.fill import fill as _fill
from tasks.synthesize.offline.questions import add_questions as _add_questions
from tasks.synthesize.offline.structure import ALGORITHM_VERSION
from tasks.synthesize.offline.structure import adapt_structure as _adapt_structure
from tasks.synthesize.offline.structure import propose_structure as _propose_structure

__all__ = ["ALGORITHM_VERSION", "NO_EVIDENCE", "OfflineBackend"]


class OfflineBackend:
    """Backend protocol implementation (see `tasks.llm.backend.Backend`) without any model."""

    name: Literal["offline"] = "offline"
    # `fill` takes `used` (the sentences already placed in the report): see tasks/synthesize/fill.py
    extractive = True

    def propose_structure(self, gset: GroundingSet, ctx: StepContext) -> ReportStructure:
        return _propose_structure(gset, ctx)

    def adapt_structure(self, prev: ReportStructure, gset: GroundingSet, ctx: StepContext) -> ReportStructure:
        return _adapt_structure(prev, gset, ctx)

    def add_questions(
        self, structure: ReportStructure, gset: GroundingSet, prev: ReportStructure | None, ctx: StepContext
    ) -> ReportStructure:
        return _add_questions(structure, gset, prev, ctx)

    def fill(
        self,
        node: StructureNode,
        structure: ReportStructure,
        passages: list[Passage],
        ctx: StepContext,
        used: set[str] | None = None,
    ) -> str:
        return _fill(node, structure, passages, ctx, used)
