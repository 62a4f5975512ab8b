"""Gold report filling: each placeholder is filled from the passages of G retrieved for it.

Grounding sets are usually larger than one prompt should carry, so filling is explicitly
per-element retrieval within a token budget (`budget_tokens`); passages are never cut mid-way and
the budget used is recorded per element. An LLM backend gets its budget filled
(`RetrievalIndex.search_budget`: whole passages in rank order while they fit, the first 8 exactly as a
top-8 search takes them, later ones only while relevant, at most `FILL_CEILING`; see
tasks/synthesize/retrieve.py, "Budget"). An extractive backend (`backend.extractive`, the offline one,
whose demo gold and its annotations are shipped) keeps the fixed top `EXTRACTIVE_K` = 8 that fit
(`RetrievalIndex.search`); an explicit `k` asks for that fixed top-k with any backend. Placeholders are
filled in outline order; an extractive backend also gets the set of sentences already placed, so a
sentence is never repeated in a later section (see tasks/synthesize/offline/fill.py). Whatever the
backend, each element then goes through `tasks.synthesize.tidy.ReportTidy` (no sentence or table placed
twice, no heading glued to its paragraph, no raw figure link, a filing's text in the third person), so
the gold passes the repetition and placeholder items of frame's own rubric (tasks/score/gold_check.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.structure import ReportStructure
from tasks.ground.load import GroundingSet
from tasks.llm.backend import Backend, StepContext
from tasks.sources import source_kind
from tasks.synthesize.outline import fill_placeholders, find_placeholders
from tasks.synthesize.retrieve import RetrievalIndex
from tasks.synthesize.tidy import ReportTidy

EXTRACTIVE_K = 8  # passages per element for an extractive backend (the demo gold's retrieval)


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
    k: int | None = None,
) -> FillResult:
    index = RetrievalIndex(gset)
    extractive = bool(getattr(backend, "extractive", False))
    top_k = k if k is not None else (EXTRACTIVE_K if extractive else None)
    # An extractive backend (offline) is told which sentences earlier placeholders already hold, so that
    # no sentence of G is copied into two sections; an LLM backend writes its own text.
    placed: set[str] | None = set() if extractive else None
    tidy = ReportTidy(third=source_kind(ctx.source_kind).layout == "filing")
    contents: dict[str, str] = {}
    evidence: dict[str, list[str]] = {}
    used: dict[str, int] = {}
    for ph in find_placeholders(outline):
        node = structure.find(ph.id)
        if top_k is None:
            passages = index.search_budget(node, structure, budget_tokens=budget_tokens)
        else:
            passages = index.search(node, structure, budget_tokens=budget_tokens, k=top_k)
        if placed is None:
            content = backend.fill(node, structure, passages, ctx)
        else:
            content = backend.fill(node, structure, passages, ctx, used=placed)  # type: ignore[call-arg]
        content = tidy(content)
        if "<!-- FILL" in content:
            raise ValueError(f"fill for {node.id} left a placeholder")
        contents[node.id] = content
        evidence[node.id] = [p.doc_id for p in passages]
        used[node.id] = sum(p.tokens for p in passages)
    return FillResult(fill_placeholders(outline, contents), contents, evidence, used)
