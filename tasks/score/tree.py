"""Deterministic structure tree of a Markdown report (SPEC §4, "Structure tree").

``report_tree(markdown)`` returns nested dicts ``{"type", "title", "objective", "children"}``:

* root ``{"type": "report", "title": <first H1 or "">}``; the first H1 only names the report (a later H1
  is treated like an H2 section);
* ``##`` -> ``section``, ``###`` and deeper -> ``subsection``, nested by heading level;
* content nodes (leaves) under the innermost open heading: ``table`` (a GitHub pipe table), ``figure`` (an
  image line ``![alt](src)``), ``list`` (a run of bullet/numbered items, incl. indented continuation
  lines), ``text`` (a paragraph; block quotes and fenced code blocks count as text);
* objective: containers = heading text + the first ~30 words of their leading content (the content before
  their first child heading); content nodes = their first ~40 words (tables: header row + first-column
  labels; figures: alt text / caption).

Pure function of the text: no network, no randomness.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["report_tree", "tree_size", "CONTAINER_WORDS", "CONTENT_WORDS"]

CONTAINER_WORDS = 30
CONTENT_WORDS = 40

# Markdown block patterns, shared with tasks.score.coverage (one reading of a report's blocks).
HEADING_RE = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
LIST_ITEM_RE = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+")
TABLE_SEP_RE = re.compile(r"^\s*\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$")
HRULE_RE = re.compile(r"^ {0,3}([-*_])(\s*\1){2,}\s*$")
LINK_RE = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_HEADING, _FENCE, _LIST_ITEM, _TABLE_SEP, _HRULE, _LINK = (
    HEADING_RE,
    FENCE_RE,
    LIST_ITEM_RE,
    TABLE_SEP_RE,
    HRULE_RE,
    LINK_RE,
)
_IMAGE = re.compile(r"^\s*!\[([^\]]*)\]\(([^)\s]*)(?:\s+\"([^\"]*)\")?\)\s*$")
_MARKUP = re.compile(r"[*_`]+|<[^>]+>")


def _clean(text: str) -> str:
    text = _LINK.sub(r"\1", text)
    text = _MARKUP.sub("", text)
    return " ".join(text.split())


def _words(text: str, k: int) -> str:
    return " ".join(_clean(text).split()[:k])


def _cells(line: str) -> list[str]:
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|") and not s.endswith("\\|"):
        s = s[:-1]
    return [_clean(c) for c in re.split(r"(?<!\\)\|", s)]


def _is_table_start(lines: list[str], k: int) -> bool:
    return (
        "|" in lines[k]
        and k + 1 < len(lines)
        and "|" in lines[k + 1] + lines[k]
        and "-" in lines[k + 1]
        and bool(_TABLE_SEP.match(lines[k + 1]))
    )


def _node(ntype: str, title: str = "", objective: str = "") -> dict[str, Any]:
    return {"type": ntype, "title": title, "objective": objective, "children": []}


def _blocks(lines: list[str]) -> list[tuple[str, Any]]:
    """Split into ('heading', (level, text)) and content blocks ('table'|'figure'|'list'|'text', payload)."""
    out: list[tuple[str, Any]] = []
    k, n = 0, len(lines)
    while k < n:
        line = lines[k]
        if not line.strip() or _HRULE.match(line):
            k += 1
            continue
        fence = _FENCE.match(line)
        if fence:
            mark = fence.group(1)
            body = [line]
            k += 1
            while k < n and not lines[k].strip().startswith(mark):
                body.append(lines[k])
                k += 1
            k += 1
            out.append(("text", "\n".join(body[1:])))
            continue
        head = _HEADING.match(line)
        if head:
            out.append(("heading", (len(head.group(1)), _clean(head.group(2)))))
            k += 1
            continue
        if _is_table_start(lines, k):
            rows = [_cells(lines[k])]
            k += 2
            while k < n and lines[k].strip() and "|" in lines[k] and not _HEADING.match(lines[k]):
                rows.append(_cells(lines[k]))
                k += 1
            out.append(("table", rows))
            continue
        img = _IMAGE.match(line)
        if img:
            caption = " ".join(x for x in (img.group(1), img.group(3) or "") if x)
            out.append(("figure", caption or img.group(2)))
            k += 1
            continue
        if _LIST_ITEM.match(line):
            items: list[str] = []
            while k < n:
                cur = lines[k]
                if _LIST_ITEM.match(cur):
                    items.append(_LIST_ITEM.sub("", cur, count=1))
                elif cur.strip() and cur[:1] in (" ", "\t") and items:
                    items[-1] += " " + cur.strip()  # continuation / nested text
                elif not cur.strip():
                    nxt = k + 1
                    while nxt < n and not lines[nxt].strip():
                        nxt += 1
                    if nxt < n and _LIST_ITEM.match(lines[nxt]):  # loose list continues
                        k = nxt
                        continue
                    break
                else:
                    break
                k += 1
            out.append(("list", items))
            continue
        para = [line]
        k += 1
        while k < n:
            cur = lines[k]
            if (
                not cur.strip()
                or _HEADING.match(cur)
                or _FENCE.match(cur)
                or _IMAGE.match(cur)
                or _LIST_ITEM.match(cur)
                or _is_table_start(lines, k)
            ):
                break
            para.append(cur)
            k += 1
        out.append(("text", " ".join(s.strip().lstrip(">").strip() for s in para)))
    return out


def _content_text(kind: str, payload: Any) -> str:
    if kind == "table":
        header = payload[0] if payload else []
        labels = [r[0] for r in payload[1:] if r and r[0]]
        return " ".join([*header, *labels])
    if kind == "list":
        return " ".join(payload)
    return str(payload)


def report_tree(markdown: str) -> dict[str, Any]:
    """Structure tree of a Markdown report (see the module docstring)."""
    lines = markdown.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    root = _node("report")
    root["_level"] = 1
    stack: list[dict[str, Any]] = [root]
    lead: dict[int, list[str]] = {id(root): []}
    seen_h1 = False
    for kind, payload in _blocks(lines):
        if kind == "heading":
            level, text = payload
            if level == 1 and not seen_h1:
                seen_h1 = True
                root["title"] = text
                continue
            level = max(level, 2)
            while len(stack) > 1 and stack[-1]["_level"] >= level:
                stack.pop()
            node = _node("section" if level == 2 else "subsection", title=text)
            node["_level"] = level
            stack[-1]["children"].append(node)
            stack.append(node)
            lead[id(node)] = []
            continue
        text = _content_text(kind, payload)
        leaf = _node(kind, objective=_words(text, CONTENT_WORDS))
        parent = stack[-1]
        if not any(c["type"] in ("section", "subsection") for c in parent["children"]):
            lead[id(parent)].append(text)  # leading content: before the first child heading
        parent["children"].append(leaf)

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


def table_grids(markdown: str) -> list[list[list[str]]]:
    """Every pipe table of a Markdown text as rows of cleaned cell texts (header row first), in order."""
    lines = markdown.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return [payload for kind, payload in _blocks(lines) if kind == "table"]
