"""Glued words: text a converter joined without the whitespace the source renders (issue 12).

`rendered_text` reads an (X)HTML element the way a browser lays it out: a boundary (whitespace) at
every block element, `<br>` and table cell, and none between inline elements, so a word split over
two spans stays one word. `glued_tokens` then finds Markdown tokens that the source shows as two or
more adjacent words ("Three Months Ended<br/>June 30" written as "EndedJune").
"""

from __future__ import annotations

import re

from lxml import etree

from tasks.markdown.document import markdown_plain

# Elements a browser lays out as blocks (a line break before and after), by local name.
BLOCK_TAGS = frozenset(
    {
        "address", "article", "aside", "blockquote", "body", "caption", "center", "dd", "details",
        "dialog", "dir", "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form",
        "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "html", "legend", "li", "main", "menu",
        "nav", "ol", "p", "pre", "section", "summary", "table", "tbody", "tfoot", "thead", "tr", "ul",
    }
)  # fmt: skip
CELL_TAGS = frozenset({"td", "th"})
# Never rendered as text. ix:header holds the XBRL contexts/units and hidden facts.
SKIP_TAGS = frozenset({"head", "script", "style", "title", "template", "noscript", "header@ix"})

_BREAK = "\ue000"  # private-use sentinel for a rendered boundary, folded to whitespace at the end
_WS = re.compile(r"\s+")
_BREAKS = re.compile(r" ?\ue000[\ue000 ]*")
_DISPLAY = re.compile(r"(?:^|;)\s*display\s*:\s*([a-z-]+)", re.I)
_VISIBILITY = re.compile(r"(?:^|;)\s*visibility\s*:\s*hidden", re.I)
_IX_NS = "http://www.xbrl.org/2013/inlineXBRL"


_DEFAULT_LAYOUT = {
    **{t: "block" for t in BLOCK_TAGS},
    **{t: "cell" for t in CELL_TAGS},
    **{t: "skip" for t in SKIP_TAGS},
    "br": "br",
}
_INLINE_DISPLAY = frozenset({"inline", "inline-block", "inline-flex", "inline-table", "contents"})
_BLOCK_DISPLAY = frozenset({"block", "flex", "grid", "list-item", "table", "table-row", "flow-root"})


def _name(tag: str) -> str:
    """Local name, lower-cased; elements of the inline XBRL namespace get an '@ix' suffix."""
    if tag[:1] == "{":
        ns, _, local = tag[1:].partition("}")
        return local.lower() + "@ix" if ns == _IX_NS else local.lower()
    low = tag.lower()
    return low[3:] + "@ix" if low.startswith("ix:") else low.rsplit(":", 1)[-1]


def rendered_layout(el: etree._Element) -> str:
    """'skip' | 'block' | 'cell' | 'br' | 'inline' for one element: by tag, CSS display winning."""
    return layout_of(_name(el.tag), el.get("style"))


def layout_of(name: str, style: str | None) -> str:
    """`rendered_layout` from an element's lower-case local name ('@ix'-suffixed for inline XBRL
    elements) and its style attribute."""
    layout = _DEFAULT_LAYOUT.get(name, "inline")
    if not style or layout == "skip":
        return layout
    if not ("isplay" in style or "ISPLAY" in style or "isibility" in style or "ISIBILITY" in style):
        return layout  # (a quick test first: most styles set neither)
    style = style.lower()
    if _VISIBILITY.search(style):
        return "skip"
    m = _DISPLAY.search(style)
    if m:
        display = m.group(1)
        if display == "none":
            return "skip"
        if display in _INLINE_DISPLAY:
            return "cell" if layout == "cell" else "inline"
        if display == "table-cell":
            return "cell"
        if display in _BLOCK_DISPLAY:
            return "block"
    return layout


def rendered_text(el: etree._Element) -> str:
    """The visible text of `el` as a browser renders it: whitespace at block, `<br>` and cell
    boundaries, inline elements joined as they are, display:none / visibility:hidden / ix:header /
    script / style skipped, whitespace (NBSP included) folded to single spaces, zero-width spaces
    dropped. Iterative (filings nest deeper than Python's recursion limit)."""
    out: list[str] = []
    # (element, layout when closing / None when opening): an explicit stack instead of recursion.
    stack: list[tuple[etree._Element, str | None]] = [(el, None)]
    while stack:
        node, closing = stack.pop()
        if closing is not None:
            if closing != "inline":
                out.append(_BREAK)
            if node is not el and node.tail:
                out.append(node.tail)
            continue
        if not isinstance(node.tag, str):  # comment / processing instruction: its tail is text
            if node is not el and node.tail:
                out.append(node.tail)
            continue
        kind = rendered_layout(node)
        if kind == "skip":  # not shown, but its tail is
            if node is not el and node.tail:
                out.append(node.tail)
            continue
        if kind != "inline":
            out.append(_BREAK)
        if node.text:
            out.append(node.text)
        stack.append((node, kind))
        stack.extend((child, None) for child in reversed(node))
    text = _WS.sub(" ", "".join(out).replace("\u200b", ""))
    return _BREAKS.sub(" ", text).strip()


# ---------------------------------------------------------------- glued tokens

_TRIM = re.compile(r"^\W+|\W+$")
_LEAD = re.compile(r"^\W+")
MAX_PARTS = 4  # a glued token may join up to this many adjacent source tokens


def _word_char(c: str) -> bool:
    return c.isalnum() or c == "_"  # what the regex class \w matches


def _trim(token: str) -> str:
    if token and _word_char(token[0]) and _word_char(token[-1]):
        return token  # (the common case, without a regex)
    return _TRIM.sub("", token)


def glued_tokens(source_text: str, markdown: str, max_examples: int = 20) -> tuple[int, list[str]]:
    """Markdown tokens that the source does not have as a token but shows as 2..MAX_PARTS adjacent
    tokens written together ("Ended June" -> "EndedJune", "28, 2025" -> "28,2025"). Tokens are
    whitespace-separated and trimmed of surrounding punctuation; case-sensitive. Returns the number
    of such token occurrences in the Markdown and up to `max_examples` distinct examples (most
    frequent first). Linear in the size of both texts."""
    raw_source = source_text.split()
    source = {_trim(t) for t in raw_source}
    md_counts: dict[str, int] = {}
    for raw in markdown_plain(markdown).split():
        tok = _trim(raw)
        if tok and tok not in source:
            md_counts[tok] = md_counts.get(tok, 0) + 1
    if not md_counts:
        return 0, []
    # A glued token starts with its first source token (leading punctuation trimmed): only source
    # positions whose token begins some candidate are joined with their neighbours.
    prefixes = {t[:k] for t in md_counts for k in range(1, len(t) + 1)}
    glued: set[str] = set()
    n = len(raw_source)
    for i in range(n - 1):
        head = raw_source[i]
        if not _word_char(head[0]):
            head = _LEAD.sub("", head)  # no word character at all: the glued token starts later
        if head not in prefixes:
            continue
        joined = raw_source[i]
        for k in range(1, MAX_PARTS):
            if i + k >= n:
                break
            joined += raw_source[i + k]
            t = _trim(joined)
            if t in md_counts:
                glued.add(t)
    total = sum(md_counts[t] for t in glued)
    examples = sorted(glued, key=lambda t: (-md_counts[t], t))[:max_examples]
    return total, examples
