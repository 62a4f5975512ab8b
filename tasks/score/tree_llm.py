"""LLM mode of the structure tree (paper 000 §4.1): the `score_structure` role reads a Markdown report and
returns its tree, in the node shape and with the node types of `tasks.score.tree.report_tree`. Validation,
splitting of long reports and limits: docs/metrics/structure.md."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from schemas.config import LLMSettings
from tasks.errors import FrameInputError
from tasks.llm.client import LLMClient
from tasks.llm.prompts import render
from tasks.markdown.document import parse, title, title_block
from tasks.score.llm_judge import LLMJudge
from tasks.score.tree import FENCES
from tasks.tokens import count_tokens

__all__ = ["PROMPT", "TreeJudge", "TreeNode", "TreeReply", "llm_report_tree"]

PROMPT = "score_structure"
MAX_DEPTH = 8
MAX_NODES = 2000

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


def _section_starts(markdown: str) -> list[int]:
    """Offsets of the lines that open a top-level section, in the reading of the deterministic tree (one
    reading for every family): a heading other than the report's title with no heading above it but the
    title (`parse`'s nesting by level; fence-aware)."""
    line_starts = [0, *(m.end() for m in re.finditer(r"\r\n|\r|\n", markdown))]  # as `split_lines` cuts
    blocks = parse(markdown, fences=FENCES, images="strict").blocks
    head = title_block(blocks)
    top = {i for i, b in enumerate(blocks) if b is head}
    return [
        line_starts[b.start - 1]
        for b in blocks
        if b.kind == "heading" and b is not head and set(b.parents) <= top
    ]


def _parts(markdown: str, budget: int, overhead: int) -> list[str]:
    """The report split at its top-level section headings into consecutive parts of at most `budget`
    tokens each."""
    starts = _section_starts(markdown)
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
        "children": [_as_dict(c) for c in node.children if c.type != "text"],
    }


class TreeJudge(LLMJudge):
    """The `score_structure` role: one call per part of the report, the parts' sections under one root."""

    ROLES = (PROMPT,)
    RESERVE = 2500

    def tree(self, markdown: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """(tree, metadata): the report's structure tree plus provenance (prompt, parts, calls, model)."""
        budget = self.input_budget()
        overhead = self.overhead(PROMPT, report="", part_note=" (part 1 of 1)")
        parts = (
            _parts(markdown, budget, overhead) if count_tokens(markdown) + overhead > budget else [markdown]
        )
        # the title is the Markdown's (the reading every family shares), never one the model names
        root: dict[str, Any] = {"type": "report", "title": title(markdown), "objective": ""}
        children: list[dict[str, Any]] = []
        meta: dict[str, Any] = {"prompt": PROMPT, "prompt_sha256": self.prompts[PROMPT].sha256}
        meta["parts"] = len(parts)
        meta["calls"] = []
        for i, part in enumerate(parts, 1):
            note = ""
            if len(parts) > 1:
                note = f" (part {i} of {len(parts)}; the report was split at top-level headings)"
            messages = render(self.prompts[PROMPT], report=part.strip(), part_note=note)
            result = self.ask_messages(PROMPT, messages, TreeReply)
            # prose is no node (paper 000 §4.1): a "text" node the model still returns is left out
            children.extend(_as_dict(c) for c in result.value.children if c.type != "text")
            meta["model"] = result.model
            meta["calls"].append({"request_hash": result.request_hash, "cached": result.cached})
        root["objective"] = root["title"]
        root["children"] = children
        return root, meta


def llm_report_tree(
    markdown: str, settings: LLMSettings, cache_dir: Any, *, client: LLMClient | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(tree, metadata) of `TreeJudge.tree`, with a client made from `settings` when none is given."""
    return TreeJudge(client or LLMClient(settings, cache_dir), settings).tree(markdown)
