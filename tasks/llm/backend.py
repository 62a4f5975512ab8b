"""The contract every LLM backend fulfils: one method per synthesis role.

Two implementations: `tasks.synthesize.offline.OfflineBackend` (deterministic, documented algorithms,
no network) and `tasks.llm.openai_backend.OpenAIBackend` (any OpenAI-compatible endpoint).
Both return validated schema objects and record their provenance (`backend`, model, prompt hash,
token counts) on what they return.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from schemas.structure import ReportStructure, StructureNode
from tasks.ground.load import GroundingSet


@dataclass(frozen=True)
class StepContext:
    """Names the step in errors and logs: role, domain and snapshot."""

    domain: str
    snapshot: str
    category: str
    source_kind: str  # the source kind's name (tasks.sources): its traits shape synthesis


@dataclass(frozen=True)
class Passage:
    """A retrieved piece of G for one placeholder: a paragraph, a list or a whole table."""

    doc_id: str
    text: str
    kind: Literal["text", "table", "figure", "list", "heading"]
    score: float
    tokens: int


class Backend(Protocol):
    name: Literal["offline", "openai"]

    def propose_structure(self, gset: GroundingSet, ctx: StepContext) -> ReportStructure:
        """Form-free structure at the first snapshot (no questions yet)."""

    def adapt_structure(self, prev: ReportStructure, gset: GroundingSet, ctx: StepContext) -> ReportStructure:
        """Form-restricted: keep `prev`'s layout; add/drop elements only where evidence appears/vanishes."""

    def add_questions(
        self, structure: ReportStructure, gset: GroundingSet, prev: ReportStructure | None, ctx: StepContext
    ) -> ReportStructure:
        """5-8 guiding questions per section (adapted from `prev` when given)."""

    def fill(
        self, node: StructureNode, structure: ReportStructure, passages: list[Passage], ctx: StepContext
    ) -> str:
        """Markdown content for one leaf placeholder, from the retrieved passages only (no headings)."""
