"""Deterministic structure tree of a Markdown report (docs/metrics/structure.md): nested dicts
``{"type", "title", "objective", "children"}`` built from the blocks of `tasks.markdown.document.parse`.
A pure function of the text."""

from __future__ import annotations

from typing import Any

from tasks.markdown.document import Block, Fences, image_of, inline_text, parse
from tasks.markdown.tables import table_grids

__all__ = ["report_tree", "table_grids", "tree_size", "CONTAINER_WORDS", "CONTENT_WORDS"]

CONTAINER_WORDS = 30
CONTENT_WORDS = 40
FENCES: Fences = "prefix"  # a fence closes at any line starting with its opening run (the tree's reading)


def _words(text: str, k: int) -> str:
    return " ".join(inline_text(text).split()[:k])


def _node(ntype: str, title: str = "", objective: str = "") -> dict[str, Any]:
    return {"type": ntype, "title": title, "objective": objective, "children": []}


def _content(b: Block) -> tuple[str, str]:
    """(node type, text) of a content block: tables give their header row and first-column labels,
    figures their caption (alt text and title, else the source), code blocks their inner lines and
    paragraphs their lines without block-quote marks."""
    if b.kind == "table" and b.table is not None:
        grid = [[inline_text(c) for c in row] for row in (b.table.header, *b.table.rows)]
        return "table", " ".join([*grid[0], *(r[0] for r in grid[1:] if r and r[0])])
    if b.kind == "figure":
        alt, src, title = image_of(b.lines[0]) or ("", "", "")
        return "figure", " ".join(x for x in (alt, title) if x) or src
    if b.kind == "list":
        return "list", " ".join(item.text for item in b.items)
    if b.kind == "code":
        return "text", "\n".join(b.lines[1 : -1 if b.closed else None])
    return "text", " ".join(s.strip().lstrip(">").strip() for s in b.lines)


def report_tree(markdown: str) -> dict[str, Any]:
    """Structure tree of a Markdown report: root ``report`` titled by the first H1, ``section`` (##) and
    ``subsection`` (### and deeper) containers nested by level, content leaves under the innermost open
    heading (see docs/metrics/structure.md)."""
    root = _node("report")
    root["_level"] = 1
    stack: list[dict[str, Any]] = [root]
    lead: dict[int, list[str]] = {id(root): []}
    seen_h1 = False
    for b in parse(markdown, fences=FENCES, images="strict").blocks:
        if b.kind == "rule":
            continue
        if b.kind == "heading":
            text = inline_text(b.title)
            if b.level == 1 and not seen_h1:
                seen_h1 = True
                root["title"] = text
                continue
            level = max(b.level, 2)  # a later H1 counts as a section
            while len(stack) > 1 and stack[-1]["_level"] >= level:
                stack.pop()
            node = _node("section" if level == 2 else "subsection", title=text)
            node["_level"] = level
            stack[-1]["children"].append(node)
            stack.append(node)
            lead[id(node)] = []
            continue
        kind, text = _content(b)
        parent = stack[-1]
        if not any(c["type"] in ("section", "subsection") for c in parent["children"]):
            lead[id(parent)].append(text)  # leading content: before the first child heading
        parent["children"].append(_node(kind, objective=_words(text, CONTENT_WORDS)))

    # iterative post-processing (reports can nest deeply)
    todo = [root]
    while todo:
        cur = todo.pop()
        if "_level" in cur:
            del cur["_level"]
            lead_words = _words(" ".join(lead.get(id(cur), [])), CONTAINER_WORDS)
            cur["objective"] = " ".join(x for x in (cur["title"], lead_words) if x)
        todo.extend(cur["children"])
    return root


def tree_size(tree: dict[str, Any]) -> int:
    """Number of nodes of a report_tree() dict."""
    count, todo = 0, [tree]
    while todo:
        cur = todo.pop()
        count += 1
        todo.extend(cur["children"])
    return count
