"""What the paper renderer (tasks.ground.paper) recognises in LaTeXML HTML: the tags and classes it skips,
treats as blocks, headings or figures; TeX read from a MathML ``alttext``; the escapes that keep prose from
reading as Markdown syntax. Shared by the renderer and the author-line reader (tasks.ground.paper_authors)."""

from __future__ import annotations

import re
from typing import Any

_TEX_WRAP = re.compile(r"(?<!\\)%\r?\n")
_MACRO_ERROR = re.compile(r"^\s*(\\[A-Za-z@]+\*?|\\.|\{[A-Za-z@*]+\}|\\(begin|end)\{[A-Za-z@*]+\})\s*$")
_ESC_LT = re.compile(r"<(?=[A-Za-z/!?])")
_NUMERIC_SUP = re.compile(r"^[\-−–+]?\d+(?:[.,]\d+)?$")
_HEADING_LEVEL = {
    "ltx_title_part": 1,
    "ltx_title_chapter": 1,
    "ltx_title_section": 1,
    "ltx_title_appendix": 1,
    "ltx_title_subsection": 2,
    "ltx_title_subsubsection": 3,
}
# titles handled elsewhere (front matter, abstract, bibliography, table of contents)
_OTHER_TITLES = {"ltx_title_document", "ltx_title_abstract", "ltx_title_bibliography", "ltx_title_contents"}
_SKIP_TAGS = {
    "script", "style", "noscript", "nav", "header", "footer", "button", "form", "dialog", "input",
    "textarea", "select", "template", "head", "title", "meta", "link", "base", "iframe", "object",
    "embed", "canvas", "svg", "audio", "video",
}  # fmt: skip
_SKIP_CLASSES = {
    "ltx_page_logo", "ltx_page_navbar", "ltx_page_header", "ltx_page_footer", "ltx_TOC", "ltx_LaTeXML_logo",
    "ltx_bib_cited", "ltx_listing_data", "infobox", "floating-btn", "modal", "sr-only", "ltx_role_orcid",
    "ltx_pagination",
}  # fmt: skip
_SKIP_CLASS_PREFIXES = ("ar5iv-", "arxiv-html-", "ds-", "html-header")
_FRONT_MATTER = {"ltx_authors", "ltx_dates", "ltx_keywords", "ltx_classification", "ltx_subtitle"}
_BLOCK_TAGS = {
    "div", "p", "section", "article", "blockquote", "figure", "figcaption", "center", "main", "aside",
    "h1", "h2", "h3", "h4", "h5", "h6", "pre", "dd", "dt", "li", "address", "hr",
}  # fmt: skip
_BLOCK_CLASSES = {"ltx_p", "ltx_para", "ltx_inline-para", "ltx_block", "ltx_logical-block"}
_GRAPHIC_CLASSES = {"ltx_graphics", "ltx_picture", "ltx_missing_image", "ltx_missing"}
_FIGURE_KINDS = ("ltx_figure", "ltx_table", "ltx_float")


def normalize_tex(tex: str) -> str:
    """TeX from a MathML ``alttext``: drop LaTeXML's ``%<newline>`` wraps, collapse whitespace."""
    out = " ".join(_TEX_WRAP.sub("", tex).split())
    if re.search(r"(?<!\\)(?:\\\\)*\\$", out):
        out += " "  # a control space "\ " at the very end keeps its space
    return out


def _escape_line_start(line: str) -> str:
    """Keep a prose line from reading as a heading, table row, quote, list item or code fence."""
    if line[:1] in ("#", "|", ">", "-", "+", "*", "`", "=") and (
        line[:1] in "#|>" or line.startswith("```") or re.match(r"^[-+*=](?:\s|$)", line)
    ):
        return "\\" + line
    return re.sub(r"^(\d+)([.)])(?=\s|$)", r"\1\\\2", line)


def _classes(el: Any) -> set[str]:
    c = el.get("class")
    return set(c.split()) if c else set()


def _escape_prose(text: str) -> str:
    return _ESC_LT.sub(r"\\<", text.replace("$", "\\$"))


def _is_skipped(el: Any, cls: set[str]) -> bool:
    if el.tag in _SKIP_TAGS or cls & _SKIP_CLASSES:
        return True
    if el.get("id") in ("license-tr", "watermark-tr", "header", "footer"):
        return True
    if el.get("aria-hidden") == "true" and not cls & {"ltx_Math"}:
        return True
    return any(c.startswith(_SKIP_CLASS_PREFIXES) for c in cls)


def _display(tex: str) -> str:
    """``$$tex$$``; a trailing control symbol such as ``\\,`` gets a space so ``$$`` stays visible."""
    return f"$${tex} $$" if re.search(r"\\[^A-Za-z]$", tex) else f"$${tex}$$"


def _math_tex(el: Any) -> str:
    alt = el.get("alttext")
    if alt is None:
        ann = el.xpath('.//*[local-name()="annotation"][@encoding="application/x-tex"]')
        alt = ann[0].text_content() if ann else el.text_content()
    return normalize_tex(alt or "")


def _figure_kind(el: Any, cls: set[str]) -> str | None:
    if el.tag == "img":
        return None
    for kind in _FIGURE_KINDS:
        if kind in cls:
            return kind
    return None


def _int_attr(el: Any, name: str) -> int:
    try:
        return max(1, int(el.get(name) or 1))
    except ValueError:
        return 1


def _texttext(text: str) -> str:
    """Plain text placed inside a display equation as ``\\text{...}``."""
    text = " ".join(text.split())
    text = re.sub(r"([#$%&_{}])", r"\\\1", text)
    return "\\text{" + text + "}" if text else ""
