"""Gold report filling: each placeholder is filled from the passages of G retrieved for it.

Grounding sets are usually larger than one prompt should carry, so filling is explicitly
per-element retrieval within a token budget (`budget_tokens`); passages are never cut mid-way and
the budget used is recorded per element. Placeholders are filled in outline order; an extractive
backend (`backend.extractive`, the offline one) also gets the set of sentences already placed, so a
sentence is never repeated in a later section (for paper sets; see tasks/synthesize/offline/fill.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.structure import ReportStructure
from tasks.ground.load import GroundingSet
from tasks.llm.backend import Backend, StepContext
from tasks.synthesize.outline import fill_placeholders, find_placeholders
from tasks.synthesize.retrieve import RetrievalIndex


@dataclass
class FillResult:
    report: str
    contents: dict[str, str]  # node id -> content
    evidence: dict[str, list[str]]  # node id -> doc_ids of the passages given to the backend
    passage_tokens: dict[str, int]


def fill_report(
    backend: Backend,
    outline: str,
    structure: ReportStructure,
    gset: GroundingSet,
    ctx: StepContext,
    budget_tokens: int = 1500,
    k: int = 8,
) -> FillResult:
    index = RetrievalIndex(gset)
    # An extractive backend (offline) is told which sentences earlier placeholders already hold, so that
    # no sentence of G is copied into two sections; an LLM backend writes its own text.
    placed: set[str] | None = set() if getattr(backend, "extractive", False) else None
    contents: dict[str, str] = {}
    evidence: dict[str, list[str]] = {}
    used: dict[str, int] = {}
    for ph in find_placeholders(outline):
        node = structure.find(ph.id)
        passages = index.search(node, structure, budget_tokens=budget_tokens, k=k)
        if placed is None:
            content = backend.fill(node, structure, passages, ctx)
        else:
            content = backend.fill(node, structure, passages, ctx, used=placed)  # type: ignore[call-arg]
        if "<!-- FILL" in content:
            raise ValueError(f"fill for {node.id} left a placeholder")
        contents[node.id] = content
        evidence[node.id] = [p.doc_id for p in passages]
        used[node.id] = sum(p.tokens for p in passages)
    return FillResult(fill_placeholders(outline, contents), contents, evidence, used)
