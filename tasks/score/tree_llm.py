"""LLM mode of the structure tree (paper 000 §4.1): a model reads a Markdown report and returns its tree.

Same node shape as the deterministic :func:`tasks.score.tree.report_tree` (``type``, ``title``,
``objective``, ``children``; root type ``report``), so either feeds
:func:`tasks.score.structure.structural_similarity`. The reply is validated by :class:`TreeReply`
(known node types, content elements without children, depth <= 8, <= 2000 nodes); an invalid reply gets
the client's corrective retries and then fails the step loudly.

Long reports are handled explicitly, never silently cut: when the whole report does not fit the input
budget (context minus output minus a reserve, o200k tokens), it is split at top-level (``##``) headings
into consecutive parts that fit, one call per part, and the parts' sections are concatenated under one
root. A single section larger than the budget is an error naming the section.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from schemas.config import LLMSettings
from tasks.errors import FrameInputError
from tasks.ground.tokens import count_tokens
from tasks.llm.client import LLMClient
from tasks.llm.prompts import load_prompt, render

__all__ = ["PROMPT", "TreeNode", "TreeReply", "llm_report_tree"]

PROMPT = "score_structure"
MAX_DEPTH = 8
MAX_NODES = 2000
_RESERVE = 2500
_H1 = re.compile(r"^#[ \t]+(.+?)\s*#*\s*$", re.M)
_H2 = re.compile(r"^##[ \t]+\S", re.M)

NodeKind = Literal["section", "subsection", "table", "figure", "list", "text"]
_LEAVES = {"table", "figure", "list", "text"}


class TreeNode(BaseModel):
    type: NodeKind
    title: str = ""
    objective: str = ""
    children: list[TreeNode] = Field(default_factory=list)

    @model_validator(mode="after")
    def _leaf(self) -> TreeNode:
        if self.type in _LEAVES and self.children:
            what = self.title or self.objective[:40]
            raise ValueError(f"a {self.type} node cannot have children ({what!r})")
        return self


class TreeReply(BaseModel):
    title: str = ""
    children: list[TreeNode]

    @model_validator(mode="after")
    def _bounds(self) -> TreeReply:
        count, todo = 0, [(c, 1) for c in self.children]
        while todo:
            node, depth = todo.pop()
            count += 1
            if depth > MAX_DEPTH:
                raise ValueError(f"tree deeper than {MAX_DEPTH} levels")
            todo.extend((c, depth + 1) for c in node.children)
        if count > MAX_NODES:
            raise ValueError(f"tree has {count} nodes (more than {MAX_NODES})")
        if any(c.type not in ("section", "text", "table", "list", "figure") for c in self.children):
            raise ValueError("top-level nodes must be sections or content elements, not subsections")
        return self


def _parts(markdown: str, budget: int, overhead: int) -> list[str]:
    """The report split at `##` headings into consecutive parts of at most `budget` tokens each."""
    starts = [m.start() for m in _H2.finditer(markdown)]
    pieces = [markdown[a:b] for a, b in zip([0, *starts], [*starts, len(markdown)], strict=True) if b > a]
    parts: list[str] = []
    cur = ""
    for piece in pieces:
        if count_tokens(piece) + overhead > budget:
            head = piece.strip().splitlines()[0] if piece.strip() else ""
            raise FrameInputError(
                "llm.context_tokens",
                f"section {head[:80]!r} alone exceeds the input budget of {budget} tokens",
            )
        if cur and count_tokens(cur + piece) + overhead > budget:
            parts.append(cur)
            cur = ""
        cur += piece
    if cur:
        parts.append(cur)
    return parts


def _as_dict(node: TreeNode) -> dict[str, Any]:
    return {
        "type": node.type,
        "title": node.title,
        "objective": node.objective,
        "children": [_as_dict(c) for c in node.children],
    }


def llm_report_tree(
    markdown: str, settings: LLMSettings, cache_dir: Any, *, client: LLMClient | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(tree, metadata): the report's structure tree by the `score_structure` role, plus provenance."""
    prompt = load_prompt(PROMPT)
    client = client or LLMClient(settings, cache_dir)
    reserve = min(_RESERVE, settings.context_tokens // 10)
    budget = settings.context_tokens - settings.max_output_tokens - reserve
    overhead = sum(count_tokens(m["content"]) for m in render(prompt, report="", part_note=" (part 1 of 1)"))
    parts = _parts(markdown, budget, overhead) if count_tokens(markdown) + overhead > budget else [markdown]
    h1 = _H1.search(markdown)
    root: dict[str, Any] = {"type": "report", "title": h1.group(1).strip() if h1 else "", "objective": ""}
    children: list[dict[str, Any]] = []
    meta: dict[str, Any] = {"prompt": PROMPT, "prompt_sha256": prompt.sha256, "parts": len(parts)}
    meta["calls"] = []
    for i, part in enumerate(parts, 1):
        note = ""
        if len(parts) > 1:
            note = f" (part {i} of {len(parts)}; the report was split at top-level headings)"
        messages = render(prompt, report=part.strip(), part_note=note)
        result = client.complete_json(PROMPT, messages, TreeReply, None)
        if i == 1 and result.value.title and not root["title"]:
            root["title"] = result.value.title
        children.extend(_as_dict(c) for c in result.value.children)
        meta["model"] = result.model
        meta["calls"].append({"request_hash": result.request_hash, "cached": result.cached})
    root["objective"] = root["title"]
    root["children"] = children
    return root, meta
