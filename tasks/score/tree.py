"""Deterministic structure tree of a Markdown report (docs/metrics/structure.md): nested dicts
``{"type", "title", "objective", "children"}`` built from the blocks of `tasks.markdown.document.parse`.
Nodes are what paper 000 §4.1 names (sections, subsections, tables, figures, bullet groups); paragraphs
are no nodes but feed the objective of the section that holds them. A pure function of the text."""

from __future__ import annotations

from typing import Any

from tasks.markdown.document import Block, Fences, image_of, inline_text, parse, title_block
from tasks.markdown.tables import table_grids

__all__ = ["report_tree", "table_grids", "tree_size", "CONTAINER_WORDS", "CONTENT_WORDS"]

# Words of prose after a container's heading in its objective. The prose is read as one run of words
# across its paragraphs, so merging or splitting paragraphs leaves the objective as it is; the run is cut
# because an embedder reads only the start of a long text anyway (MiniLM: 128 word pieces), and a heading
# plus 30 words stays inside that cut.
CONTAINER_WORDS = 30
CONTENT_WORDS = 40  # words of a table's, figure's or list's own text in its objective
FENCES: Fences = "prefix"  # a fence closes at any line starting with its opening run (the tree's reading)
_LEAVES = {"table", "figure", "list"}


def _words(text: str, k: int) -> str:
    return " ".join(inline_text(text).split()[:k])


def _node(ntype: str, title: str = "", objective: str = "") -> dict[str, Any]:
    return {"type": ntype, "title": title, "objective": objective, "children": []}


def _text(b: Block) -> str:
    """The words of a block: tables give their header row and first-column labels, figures their caption
    (alt text and title, else the source), lists their items, code and math blocks their inner lines and
    paragraphs their lines without block-quote marks."""
    if b.kind == "table" and b.table is not None:
        grid = [[inline_text(c) for c in row] for row in (b.table.header, *b.table.rows)]
        return " ".join([*grid[0], *(r[0] for r in grid[1:] if r and r[0])])
    if b.kind == "figure":
        alt, src, title = image_of(b.lines[0]) or ("", "", "")
        return " ".join(x for x in (alt, title) if x) or src
    if b.kind == "list":
        return " ".join(item.text for item in b.items)
    if b.kind in ("code", "math"):
        return "\n".join(b.lines[1 : -1 if b.closed else None])
    return " ".join(s.strip().lstrip(">").strip() for s in b.lines)


def report_tree(markdown: str) -> dict[str, Any]:
    """Structure tree of a Markdown report: root ``report`` titled by the report's title
    (`tasks.markdown.document.title_block`); every other heading a container nested by its written level,
    a ``section`` when it sits right under the root, a ``subsection`` deeper; ``table``, ``figure`` and
    ``list`` leaves under the innermost open heading; the prose (paragraphs, quotes, code) of a container
    in its objective (see docs/metrics/structure.md)."""
    blocks = parse(markdown, fences=FENCES, images="strict").blocks
    head = title_block(blocks)
    root = _node("report", title=inline_text(head.title) if head is not None else "")
    prose: list[tuple[dict[str, Any], list[str]]] = [(root, [])]
    stack: list[tuple[int, dict[str, Any], list[str]]] = [(0, root, prose[0][1])]  # (level, node, prose)
    for b in blocks:
        if b is head or b.kind == "rule":
            continue
        if b.kind == "heading":
            while len(stack) > 1 and stack[-1][0] >= b.level:
                stack.pop()
            node = _node("section" if len(stack) == 1 else "subsection", title=inline_text(b.title))
            stack[-1][1]["children"].append(node)
            words: list[str] = []
            prose.append((node, words))
            stack.append((b.level, node, words))
        elif b.kind in _LEAVES:
            stack[-1][1]["children"].append(_node(b.kind, objective=_words(_text(b), CONTENT_WORDS)))
        else:
            stack[-1][2].append(_text(b))
    for node, texts in prose:
        lead = _words(" ".join(texts), CONTAINER_WORDS)
        node["objective"] = " ".join(x for x in (node["title"], lead) if x)
    return root


def tree_size(tree: dict[str, Any]) -> int:
    """Number of nodes of a report_tree() dict."""
    count, todo = 0, [tree]
    while todo:
        cur = todo.pop()
        count += 1
        todo.extend(cur["children"])
    return count
