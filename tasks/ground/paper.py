"""arXiv LaTeXML HTML paper -> one Markdown grounding document (SPEC §2.3, "Papers").

Input: an arxiv.org/html page, an ar5iv page or a locally rendered LaTeXML HTML5 file. Output: one
Markdown document that keeps every section heading, display equation, table and figure caption:

- ``# Title``, a metadata bullet list (arXiv id, authors, dates, license when known), ``## Abstract``;
- the section hierarchy as headings (section / appendix -> ``##``, subsection -> ``###``,
  subsubsection -> ``####``); paragraph, theorem, proof and acknowledgement titles as bold lines;
- inline math as ``$tex$`` and display equations (``ltx_equation``, ``ltx_equationgroup``, eqnarray)
  as one ``$$tex$$`` line per displayed row, followed by the equation number when there is one.
  TeX comes from the MathML ``alttext`` attribute, never from the MathML tree; LaTeXML's ``%<newline>``
  line-wrap markers are removed and whitespace is collapsed (``normalize_tex``);
- tables (``ltx_tabular``, with or without a ``figure.ltx_table`` wrapper) as GitHub Markdown tables
  via ``tasks.ground.tables`` (spans expanded, no EDGAR fragment merging); a tabular nested inside a
  cell is flattened into that cell's text; captions ("Table 1: ...") kept as plain lines;
- figures (``ltx_figure``, each sub-figure separately) as ``![caption](figure-id)`` followed by the
  caption as a plain line;
- footnotes inlined as ``[Footnote 1: ...]``; citations keep their visible text;
- ``## References`` with one list item per bibliography entry (``li.ltx_bibitem``), at the end.

Page chrome (scripts, styles, nav/TOC, arXiv/ar5iv header and footer, buttons, LaTeXML logo) is
dropped, and so is the text of ``ltx_ERROR`` spans that only carry an undefined-macro marker such as
``\\ac`` or ``{mdframed}`` (the paper text around them is kept). In prose, ``$`` and a ``<`` that would
open an HTML tag are backslash-escaped so the Markdown renders as the paper reads.

Bad input raises ``FrameInputError(source_name, problem)``: empty, binary/undecodable, truncated
(no closing ``</html>``/``</body>``) or not a LaTeXML paper.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from lxml import etree
from lxml import html as lxml_html

from tasks.errors import FrameInputError
from tasks.ground.paper_meta import has_class, info_lines, paper_metadata
from tasks.ground.tables import Cell, collapse_ws, expand_spans, grid_to_markdown

__all__ = ["PaperMarkdown", "paper_to_markdown", "normalize_tex"]


@dataclass
class PaperMarkdown:
    markdown: str
    title: str
    authors: list[str]
    abstract: str
    sections: list[tuple[int, str]]
    equations: int
    tables: int
    figures: int
    references: int
    metadata: dict = field(default_factory=dict)


# ----------------------------------------------------------------------------------------------
# small helpers

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


# ----------------------------------------------------------------------------------------------
# the renderer


@dataclass
class _Stats:
    equations: int = 0
    tables: int = 0
    figures: int = 0
    references: list[str] = field(default_factory=list)
    sections: list[tuple[int, str]] = field(default_factory=list)
    figure_seq: int = 0


class _Renderer:
    """Walks LaTeXML HTML and writes Markdown blocks.

    In block mode, block-level elements end the current paragraph and write their own blocks.
    In flat mode (table cells, captions, headings, footnotes, references) everything is written
    on one line.
    """

    def __init__(self, stats: _Stats, *, flat: bool = False, figure_stack: list | None = None) -> None:
        self.stats = stats
        self.flat = flat
        self.blocks: list[str] = []
        self.buf: list[str] = []
        self.notes: list[str] = []  # flat mode, collect_notes: footnotes pulled out of a heading
        self.collect_notes = False
        self.figure_stack: list[dict] = figure_stack if figure_stack is not None else []

    # --- output primitives ----------------------------------------------------------------------
    def text(self, s: str | None) -> None:
        if s:
            self.buf.append(_escape_prose(s))

    def raw(self, s: str) -> None:
        if s:
            self.buf.append(s)

    def flush(self) -> None:
        if self.flat:
            self.buf.append(" ")
            return
        line = collapse_ws("".join(self.buf))
        self.buf = []
        if line:
            line = _escape_line_start(line)
            self.blocks.append(line)

    def block(self, s: str) -> None:
        self.flush()
        if self.flat:
            self.buf.append(" " + s + " ")
        elif s.strip():
            self.blocks.append(s)

    def finish(self) -> list[str]:
        self.flush()
        return self.blocks

    def line(self) -> str:
        """Flat mode result."""
        return collapse_ws("".join(self.buf))

    def sub(self, *, flat: bool) -> _Renderer:
        return _Renderer(self.stats, flat=flat, figure_stack=self.figure_stack)

    def flat_text(self, el: Any, *, skip: set | None = None, collect_notes: bool = False) -> tuple[str, list]:
        r = self.sub(flat=True)
        r.collect_notes = collect_notes
        r.children(el, skip=skip)
        return r.line(), r.notes

    # --- traversal ------------------------------------------------------------------------------
    def children(self, el: Any, *, skip: set | None = None) -> None:
        self.text(el.text)
        for child in el:
            if skip is None or child not in skip:
                self.node(child)
            self.text(child.tail)

    def node(self, el: Any) -> None:
        tag = el.tag
        if not isinstance(tag, str):  # comment / processing instruction
            return
        tag = tag.lower()
        if ":" in tag:
            tag = tag.rsplit(":", 1)[1]
        cls = _classes(el)
        if _is_skipped(el, cls):
            return
        if tag == "math":
            self.math(el)
            return
        if "ltx_ERROR" in cls:
            if _MACRO_ERROR.match(el.text_content() or ""):
                return
            self.children(el)
            return
        if "ltx_note" in cls:
            self.note(el, cls)
            return
        if "ltx_bibitem" in cls:
            self.bibitem(el)
            return
        if "ltx_bibliography" in cls:
            for item in el.xpath(f".//*[{has_class('ltx_bibitem')}]"):
                self.bibitem(item)
            return
        if cls & _FRONT_MATTER or "ltx_abstract" in cls or "ltx_title_document" in cls:
            return
        if tag == "table" and cls & {"ltx_equation", "ltx_equationgroup"}:
            self.equation_table(el)
            return
        if "ltx_tabular" in cls:
            self.tabular(el)
            return
        kind = _figure_kind(el, cls)
        if kind:
            self.figure(el, cls, kind)
            return
        if tag == "figcaption" or "ltx_caption" in cls:
            self.caption(el)
            return
        if tag in ("h1", "h2", "h3", "h4", "h5", "h6") or "ltx_title" in cls:
            self.title(el, cls)
            return
        if tag in ("ul", "ol", "dl"):
            self.list_(el, tag)
            return
        if tag == "img":
            return  # figures write their own image reference; other images are icons/decoration
        if tag == "br":
            self.raw(" ")
            return
        if "ltx_listing" in cls or tag == "pre":
            self.listing(el, cls)
            return
        if tag == "sup" and "ltx_note_mark" not in cls:
            t = collapse_ws(el.text_content())
            if _NUMERIC_SUP.match(t):
                self.raw("^")
            self.children(el)
            return
        if "ltx_acknowledgements" in cls:
            self.flush()
            titled = any(isinstance(c.tag, str) and "ltx_title" in _classes(c) for c in el)
            if not titled and el.text_content().strip():
                self.block("**Acknowledgements**")
            self.children(el)
            self.flush()
            return
        if tag in _BLOCK_TAGS or cls & _BLOCK_CLASSES:
            self.flush()
            self.children(el)
            self.flush()
            return
        self.children(el)

    # --- inline pieces --------------------------------------------------------------------------
    def math(self, el: Any) -> None:
        tex = _math_tex(el)
        if not tex:
            return
        if el.get("display") == "block" and not self.flat:
            self.stats.equations += 1
            self.block(_display(tex))
        elif el.get("display") == "block":
            self.stats.equations += 1
            self.raw(f" {_display(tex)} ")
        else:
            last = next((b for b in reversed(self.buf) if b), "")
            if last.endswith("$") and not last.endswith("\\$"):
                self.raw(" ")  # "$a$$b$" would read as a display delimiter
            self.raw(f"${tex}$")

    def note(self, el: Any, cls: set[str]) -> None:
        mark = ""
        kind = ""
        content = None
        for d in el.iter():
            if not isinstance(d.tag, str):
                continue
            dc = _classes(d)
            if "ltx_note_mark" in dc and not mark:
                mark = collapse_ws(d.text_content())
            elif "ltx_note_type" in dc and not kind:
                kind = collapse_ws(d.text_content()).rstrip(":").strip()
            elif "ltx_note_content" in dc and content is None:
                content = d
        if content is None:
            return
        skip = {
            c
            for c in content
            if isinstance(c.tag, str) and _classes(c) & {"ltx_note_mark", "ltx_note_type", "ltx_tag_note"}
        }
        text, _ = self.flat_text(content, skip=skip)
        if not text:
            return
        if "ltx_role_footnote" in cls or kind.lower() == "footnote" or not kind:
            label = f"Footnote {mark}".strip() if mark and mark not in ("†", "*", "∗") else "Footnote"
        else:
            label = kind[:1].upper() + kind[1:]
        if "ltx_note_frontmatter" in cls and not self.flat:
            self.block(f"{label}: {text}")
            return
        rendered = f"[{label}: {text}]"
        if self.collect_notes:
            self.notes.append(rendered)
        else:
            self.raw(" " + rendered + " ")

    def bibitem(self, el: Any) -> None:
        text, _ = self.flat_text(el)
        self.stats.references.append(text)

    # --- block pieces ---------------------------------------------------------------------------
    def title(self, el: Any, cls: set[str]) -> None:
        if cls & _OTHER_TITLES:
            return
        text, notes = self.flat_text(el, collect_notes=True)
        level = next((lv for c, lv in _HEADING_LEVEL.items() if c in cls), None)
        if self.flat:
            self.raw(f" {text} ")
            for n in notes:
                self.raw(f" {n} ")
            return
        self.flush()
        if level is not None:
            self.blocks.append(("#" * (level + 1)) + " " + (text or "(untitled)"))
            self.stats.sections.append((level, text or "(untitled)"))
        elif text:
            self.blocks.append(f"**{text}**")
        for n in notes:
            self.blocks.append(n)

    def list_(self, el: Any, tag: str) -> None:
        if self.flat:
            self.children(el)
            return
        self.flush()
        lines: list[str] = []
        items: list[tuple[str, Any]] = []
        if tag == "dl":
            term = ""
            for c in el:
                if not isinstance(c.tag, str):
                    continue
                if c.tag == "dt":
                    term = self.flat_text(c)[0]
                elif c.tag == "dd":
                    items.append((f"**{term}**" if term else "", c))
                    term = ""
            if term:
                lines.append(f"- **{term}**")
        else:
            for c in el:
                if isinstance(c.tag, str) and (c.tag == "li" or "ltx_item" in _classes(c)):
                    items.append(("", c))
        for marker, li in items:
            skip = set()
            if not marker:
                for c in li:
                    if isinstance(c.tag, str) and "ltx_tag" in _classes(c):
                        marker = collapse_ws(c.text_content())
                        skip.add(c)
                        break
            r = self.sub(flat=False)
            r.children(li, skip=skip)
            body = "\n\n".join(r.finish())
            if re.fullmatch(r"\d+[.)]", marker):
                prefix = marker + " "
            elif marker in ("", "•", "∙", "·", "◦", "▪", "–", "—", "-", "*", "∗", "⋅"):
                prefix = "- "
            else:
                prefix = f"- {marker} "
            pad = " " * len(prefix) if prefix[0].isdigit() else "  "
            body_lines = body.split("\n") if body else [""]
            out = [prefix + body_lines[0]] + [(pad + ln) if ln else "" for ln in body_lines[1:]]
            lines.append("\n".join(out).rstrip())
        if lines:
            self.blocks.append("\n".join(lines))

    def listing(self, el: Any, cls: set[str]) -> None:
        rows = [d for d in el.iter() if isinstance(d.tag, str) and "ltx_listingline" in _classes(d)]
        has_math = bool(el.xpath(".//*[local-name()='math']"))
        if has_math or self.flat:
            # pseudo-code (algorithm2e, algorithmic): text lines with inline math
            parts = [self.flat_text(r)[0] for r in rows] if rows else [self.flat_text(el)[0]]
            parts = [p for p in parts if p]
            if self.flat:
                self.raw(" " + " ".join(parts) + " ")
            else:
                self.block("\n".join(("\\" + p) if p[0] in "#|>" else p for p in parts))
            return
        if rows:
            code_lines = [r.text_content().replace("\xa0", " ").rstrip() for r in rows]
        else:
            code_lines = el.text_content().replace("\xa0", " ").strip("\n").split("\n")
        code = "\n".join(code_lines).strip("\n")
        if code.strip():
            self.block("```\n" + code.replace("```", "'''") + "\n```")

    def equation_table(self, el: Any) -> None:
        rows = [tr for tr in el.iter("tr") if _closest_table(tr) is el]
        lines: list[str] = []
        for tr in rows:
            parts: list[str] = []
            numbers: list[str] = []
            for td in tr:
                if not isinstance(td.tag, str) or td.tag not in ("td", "th"):
                    continue
                if "ltx_eqn_eqno" in _classes(td):
                    n = collapse_ws(td.text_content())
                    if n:
                        numbers.append(n)
                    continue
                _eq_cell(td, parts, numbers)
            parts = [p for p in parts if p]
            if not parts:
                if numbers and lines:
                    lines[-1] += " " + " ".join(numbers)
                continue
            self.stats.equations += 1
            line = _display(" ".join(parts))
            if numbers:
                line += " " + " ".join(numbers)
            lines.append(line)
        for ln in lines:
            self.block(ln)

    def tabular(self, el: Any) -> None:
        rows = _tabular_rows(el)
        if self.flat:
            for row, _ in rows:
                for c in row:
                    self.raw(" " + self.flat_text(c)[0] + " ")
            return
        cell_rows: list[list[Cell]] = []
        head_flags: list[bool] = []
        for row, in_head in rows:
            cells = []
            for c in row:
                cc = _classes(c)
                text, _ = self.flat_text(c)
                cells.append(
                    Cell(
                        text,
                        colspan=_int_attr(c, "colspan"),
                        rowspan=_int_attr(c, "rowspan"),
                        header=c.tag == "th" or "ltx_th" in cc,
                    )
                )
            if not cells:
                continue
            is_head = in_head or all(
                x.header and "ltx_th_row" not in _classes(c) for x, c in zip(cells, row, strict=False)
            )
            cell_rows.append(cells)
            head_flags.append(is_head)
        if not cell_rows:
            cell_rows = [[Cell("")]]
            head_flags = [False]
        header_rows = 0
        for f in head_flags:
            if not f:
                break
            header_rows += 1
        grid = expand_spans(cell_rows)
        if not grid or not grid[0]:
            grid = [[""]]
        md = grid_to_markdown(grid, header_rows=max(1, header_rows))
        self.stats.tables += 1
        self.block(md)

    def caption(self, el: Any) -> None:
        text, _ = self.flat_text(el)
        if not text:
            return
        if self.flat:
            self.raw(f" {text} ")
            return
        fig = self.figure_stack[-1] if self.figure_stack else None
        if fig is not None and fig["want_ref"] and not fig["ref_done"]:
            self.image_ref(fig, fig["caption"] or text)
        self.block(text)

    def image_ref(self, fig: dict, caption: str) -> None:
        alt = caption.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")
        self.block(f"![{alt}]({fig['target']})")
        fig["ref_done"] = True
        self.stats.figures += 1

    def figure(self, el: Any, cls: set[str], kind: str) -> None:
        if self.flat:
            self.children(el)
            return
        self.flush()
        own_graphics, nested, own_tabular, captions = _figure_scan(el)
        if kind == "ltx_figure":
            want_ref = own_graphics or (not nested and not own_tabular)
        else:
            want_ref = own_graphics
        target = el.get("id")
        if not target:
            imgs = [i for i in el.iter("img") if i.get("src")]
            self.stats.figure_seq += 1
            target = imgs[0].get("src") if imgs else f"figure-{self.stats.figure_seq}"
        target = target.replace(" ", "%20").replace("(", "%28").replace(")", "%29")
        caption = self.flat_text(captions[0])[0] if captions else ""
        if not caption and self.figure_stack:  # uncaptioned panel: describe it by its parent's caption
            caption = self.figure_stack[-1]["caption"]
        state = {"want_ref": want_ref, "ref_done": False, "target": target, "caption": caption}
        self.figure_stack.append(state)
        try:
            self.children(el)
            self.flush()
        finally:
            self.figure_stack.pop()
        if want_ref and not state["ref_done"]:
            self.image_ref(state, caption)


def _closest_table(el: Any) -> Any:
    for a in el.iterancestors("table"):
        return a
    return None


def _eq_cell(el: Any, parts: list[str], numbers: list[str]) -> None:
    """Collect TeX pieces of one equation cell: math alttext, other text as \\text{...}."""
    if el.text and el.text.strip():
        parts.append(_texttext(el.text))
    for c in el:
        if isinstance(c.tag, str):
            cls = _classes(c)
            if c.tag == "math":
                parts.append(_math_tex(c))
            elif cls & {"ltx_tag_equation", "ltx_tag_equationgroup", "ltx_tag"}:
                n = collapse_ws(c.text_content())
                if n:
                    numbers.append(n)
            elif "ltx_ERROR" in cls and _MACRO_ERROR.match(c.text_content() or ""):
                pass
            elif "ltx_note" in cls or _is_skipped(c, cls):
                pass
            else:
                _eq_cell(c, parts, numbers)
        if c.tail and c.tail.strip():
            parts.append(_texttext(c.tail))


def _tabular_rows(tab: Any) -> list[tuple[list[Any], bool]]:
    """Rows of a tabular (``table`` or ``span`` markup) as lists of cell elements, not descending
    into nested tabulars; the flag says the row sits in a thead."""
    rows: list[tuple[list[Any], bool]] = []

    def visit(el: Any, in_head: bool) -> None:
        for c in el:
            if not isinstance(c.tag, str):
                continue
            cc = _classes(c)
            if c.tag == "tr" or "ltx_tr" in cc:
                cells = [
                    x
                    for x in c
                    if isinstance(x.tag, str) and (x.tag in ("td", "th") or "ltx_td" in _classes(x))
                ]
                rows.append((cells, in_head))
            elif "ltx_tabular" in cc:
                continue
            else:
                visit(c, in_head or c.tag == "thead" or "ltx_thead" in cc)

    visit(tab, False)
    return rows


def _figure_scan(fig: Any) -> tuple[bool, bool, bool, list[Any]]:
    """(own graphics?, nested figures?, own tabular?, own captions) of a figure, ignoring what
    belongs to nested figures."""
    graphics = nested = tabular = False
    captions: list[Any] = []
    stack = list(fig)
    while stack:
        el = stack.pop()
        if not isinstance(el.tag, str):
            continue
        cls = _classes(el)
        if _figure_kind(el, cls):
            nested = True
            continue
        if el.tag in ("img", "svg") or cls & _GRAPHIC_CLASSES:
            graphics = True
        if "ltx_tabular" in cls:
            tabular = True
        if el.tag == "figcaption" or "ltx_caption" in cls:
            captions.append(el)
            continue
        if el.tag == "math":
            continue
        stack.extend(el)
    captions.sort(key=lambda e: e.sourceline or 0)
    return graphics, nested, tabular, captions


# ----------------------------------------------------------------------------------------------
# input checks and parsing


def _decode(data: bytes | str, source_name: str) -> str:
    if isinstance(data, bytes):
        if not data.strip():
            raise FrameInputError(source_name, "empty file")
        if data.startswith((b"\xff\xfe", b"\xfe\xff")):
            try:
                text = data.decode("utf-16")
            except UnicodeDecodeError as exc:
                raise FrameInputError(source_name, "binary data, not UTF-16 text") from exc
        else:
            if b"\x00" in data:
                raise FrameInputError(source_name, "binary data (NUL bytes), not HTML")
            try:
                text = data.decode("utf-8-sig")
            except UnicodeDecodeError as exc:
                raise FrameInputError(
                    source_name, f"binary or non-UTF-8 data (undecodable byte at offset {exc.start})"
                ) from exc
    elif isinstance(data, str):
        text = data.lstrip("\ufeff")
    else:
        raise FrameInputError(source_name, f"expected HTML bytes or str, got {type(data).__name__}")
    if not text.strip():
        raise FrameInputError(source_name, "empty file")
    if "\x00" in text:
        raise FrameInputError(source_name, "binary data (NUL characters), not HTML")
    return text


_END_RE = re.compile(r"</(?:html|body)\s*>(?:\s|<!--.*?-->)*\Z", re.I | re.S)


def _check_complete(text: str, source_name: str) -> None:
    if not _END_RE.search(text[-4096:]):
        raise FrameInputError(source_name, "truncated HTML (no closing </body> or </html> at the end)")


def _parse(text: str, source_name: str) -> Any:
    if not any(m in text for m in ("ltx_document", "ltx_page_main", "ltx_title_document")):
        raise FrameInputError(
            source_name, "not a LaTeXML paper (no ltx_document/ltx_page_main/ltx_title_document)"
        )
    parser = lxml_html.HTMLParser(encoding="utf-8", remove_comments=False, huge_tree=True)
    try:
        root = lxml_html.document_fromstring(text.encode("utf-8"), parser=parser)
    except (etree.ParserError, ValueError) as exc:
        raise FrameInputError(source_name, f"unparseable HTML ({exc})".replace("\n", " ")) from exc
    return root


def _pick_document(root: Any, source_name: str) -> Any:
    docs = root.xpath(f"//*[{has_class('ltx_document')}]")
    # the innermost one: fixture wrappers put ltx_document on <body> around the real <article>
    inner = [d for d in docs if not d.xpath(f".//*[{has_class('ltx_document')}]")]
    if inner:
        return inner[0]
    for name in ("ltx_page_content", "ltx_page_main"):
        found = root.xpath(f"//*[{has_class(name)}]")
        if found:
            return found[0]
    titles = root.xpath(f"//*[{has_class('ltx_title_document')}]")
    if titles:
        return titles[0].getparent()
    raise FrameInputError(
        source_name, "not a LaTeXML paper (no ltx_document/ltx_page_main/ltx_title_document)"
    )


# ----------------------------------------------------------------------------------------------
# front matter and metadata

_AUTHOR_SPLIT = re.compile(r"\s*(?:,|;|\band\b|&|\u2003|\u2002|\u2001|\u2000|\s{3,})\s*")


def _author_names(doc: Any, r: _Renderer) -> tuple[list[str], list[str]]:
    """Author names (heuristic: the first line of each author block) and the other author lines
    (affiliations, e-mails) from ``ltx_creator`` elements."""
    names: list[str] = []
    extra: list[str] = []
    for creator in doc.xpath(f".//*[{has_class('ltx_creator')}]"):
        if "ltx_role_author" not in _classes(creator) and "ltx_role_editor" not in _classes(creator):
            continue
        for pn in creator.xpath(f".//*[{has_class('ltx_personname')}]"):
            for group in _personname_groups(pn):
                # names run on over a <br> when each of those lines carries affiliation marks
                # ("A¹ B² <br> C¹ <br> ¹Univ"), the affiliation lines start with their mark
                n = 1
                if _MARK in group[0]:
                    while n < len(group) and _MARK in group[n] and not group[n].startswith(_MARK):
                        if "@" in group[n]:
                            break
                        n += 1
                first = "\u2003".join(x.replace(_MARK, "") for x in group[:n])
                rest = [collapse_ws(x.replace(_MARK, "")) for x in group[n:]]
                for part in _AUTHOR_SPLIT.split(first):
                    part = part.strip(" ,;*†‡§¶∗0123456789")
                    if names and re.fullmatch(r"(?:Jr|Sr)\.?|I{2,3}|IV", part):
                        names[-1] += ", " + part  # "J. I. Bailey, III"
                    elif part and re.search(r"[^\W\d_]", part) and part not in names:
                        names.append(part)
                extra.extend(x for x in rest if x and x not in extra)
        for contact in creator.xpath(f".//*[{has_class('ltx_role_affiliation')}]"):
            t, _ = r.flat_text(contact)
            if t and t not in extra:
                extra.append(t)
    return names, extra


_MARK_TEX = re.compile(r"^\s*(?:\{\})?\s*\^|^\s*\\(?:ast|dagger|ddagger|star|S|P|sharp|flat|natural)\s*$")
_AUTHOR_BREAK_MACROS = {"\\AND", "\\And", "\\and"}
_MARK = "\x01"  # where an affiliation mark (superscript) was dropped


def _personname_groups(pn: Any) -> list[list[str]]:
    """Lines of a personname (split at <br>; superscript marks, notes and contact blocks dropped),
    grouped per author block: a block starts at a line opening with "&" or at LaTeX's \\And."""
    lines: list[list[str]] = [[]]

    def at_line_start() -> bool:
        current = "".join(lines[-1])
        return not current.strip() or bool(re.search(r"\n[ \t\xa0]*$", current))

    def visit(el: Any) -> None:
        if el.text:
            lines[-1].append(el.text)
        for c in el:
            if isinstance(c.tag, str):
                cc = _classes(c)
                if c.tag == "br":
                    lines.append([])
                elif c.tag == "math":
                    tex = _math_tex(c)
                    if not _MARK_TEX.search(tex):
                        lines[-1].append(f"${tex}$")
                    else:
                        if at_line_start():  # "{}^{1}Department of ...": an affiliation line
                            lines.append([])
                        lines[-1].append(_MARK)
                elif "ltx_ERROR" in cc:
                    if c.text_content().strip() in _AUTHOR_BREAK_MACROS:
                        lines.append(["&"])
                    elif not _MACRO_ERROR.match(c.text_content() or ""):
                        visit(c)
                elif c.tag == "sup":
                    lines[-1].append(_MARK)
                elif c.tag == "sub" or cc & {"ltx_note", "ltx_contact", "ltx_author_notes"}:
                    pass
                else:
                    visit(c)
            if c.tail:
                lines[-1].append(c.tail)

    visit(pn)
    groups: list[list[str]] = []
    pieces: list[str] = []
    for parts in lines:  # an "&" at the start of a source line also opens an author block
        raw = re.split(r"\n[ \t\xa0]*(?=&)", "".join(parts))
        pieces.extend(raw)
    for s in pieces:
        s = re.sub(r"[ \t\r\n\f\v\xa0]+", " ", s).strip()  # keep em spaces: they separate authors
        starts_block = s.startswith("&")
        s = s.lstrip("& ").strip()
        if not s.replace(_MARK, "").strip():
            s = ""
        if not s:
            if starts_block:
                groups.append([])
            continue
        if starts_block or not groups:
            groups.append([s])
        else:
            groups[-1].append(s)
    return [g for g in groups if g]


# ----------------------------------------------------------------------------------------------
# entry point


def paper_to_markdown(
    html: bytes | str, *, source_name: str, meta: dict | None = None, source_ref: str | None = None
) -> PaperMarkdown:
    """Convert one LaTeXML paper page to a Markdown grounding document (see module docstring).

    `source_name` names the page in error messages; `source_ref` (default `source_name`) is the
    portable name the document records (`- Source:` line, metadata `source_name`): a URL, a
    mirror-relative path or a file name, never a path of the building machine."""
    meta = dict(meta or {})
    text = _decode(html, source_name)
    _check_complete(text, source_name)
    root = _parse(text, source_name)
    try:
        return _convert(root, text, source_name, meta, source_ref or source_name)
    except RecursionError:
        # the renderer recurses per element: real LaTeXML pages nest a few dozen levels, not hundreds
        raise FrameInputError(source_name, "elements nested too deeply to convert") from None


def _convert(root: Any, text: str, source_name: str, meta: dict, source_ref: str) -> PaperMarkdown:
    doc = _pick_document(root, source_name)

    stats = _Stats()
    r = _Renderer(stats)

    # title (the page's own value wins), subtitle
    title_els = doc.xpath(f".//*[{has_class('ltx_title_document')}]") or root.xpath(
        f"//*[{has_class('ltx_title_document')}]"
    )
    title_notes: list[str] = []
    title = ""
    if title_els:
        title, title_notes = r.flat_text(title_els[0], collect_notes=True)
    if not title:
        title = collapse_ws(str(meta.get("title") or "")) or collapse_ws(
            (root.findtext(".//title") or "").strip()
        )
    subtitle = ""
    sub_els = doc.xpath(f".//*[{has_class('ltx_subtitle')}]")
    if sub_els:
        subtitle = r.flat_text(sub_els[0])[0]

    authors, affiliations = _author_names(doc, r)

    def _front(name: str) -> str:
        els = doc.xpath(f".//*[{has_class(name)}]")
        return " ".join(t for t in (r.flat_text(e)[0] for e in els) if t)

    dates = _front("ltx_dates")
    keywords = _front("ltx_keywords")
    classification = _front("ltx_classification")

    # abstract(s)
    abstract_blocks: list[str] = []
    for ab in doc.xpath(f".//*[{has_class('ltx_abstract')}]"):
        if ab.xpath(f"ancestor::*[{has_class('ltx_abstract')}]"):
            continue
        ar = r.sub(flat=False)
        skip = {c for c in ab if isinstance(c.tag, str) and "ltx_title_abstract" in _classes(c)}
        ar.children(ab, skip=skip)
        abstract_blocks.extend(ar.finish())
    abstract = "\n\n".join(abstract_blocks)

    # body
    r.children(doc)
    body_blocks = r.finish()

    # metadata: meta wins for ids/dates, the page for title and (when present) license
    metadata = paper_metadata(root, text, source_name, meta, title)
    metadata.update(
        {
            "source_name": source_ref,
            "authors": authors,
            "subtitle": subtitle or None,
            "keywords": keywords or None,
        }
    )

    lines = [f"# {title}", ""]
    info = info_lines(metadata, affiliations, dates, classification)
    lines += info + [""]
    for n in title_notes:
        lines += [n, ""]
    if abstract:
        lines += ["## Abstract", "", abstract, ""]
    for b in body_blocks:
        lines += [b, ""]
    refs = stats.references
    if refs:
        lines += ["## References", ""]
        lines += ["- " + (ref or "(empty entry)") for ref in refs]
        lines.append("")
    markdown = "\n".join(lines).rstrip("\n") + "\n"

    return PaperMarkdown(
        markdown=markdown,
        title=title,
        authors=authors,
        abstract=abstract,
        sections=list(stats.sections),
        equations=stats.equations,
        tables=stats.tables,
        figures=stats.figures,
        references=len(refs),
        metadata=metadata,
    )
