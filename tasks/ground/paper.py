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

from tasks.errors import FrameInputError
from tasks.ground.paper_authors import _author_names
from tasks.ground.paper_html import (
    _BLOCK_CLASSES,
    _BLOCK_TAGS,
    _FRONT_MATTER,
    _GRAPHIC_CLASSES,
    _HEADING_LEVEL,
    _MACRO_ERROR,
    _NUMERIC_SUP,
    _OTHER_TITLES,
    _classes,
    _display,
    _escape_line_start,
    _escape_prose,
    _figure_kind,
    _int_attr,
    _is_skipped,
    _math_tex,
    _texttext,
    normalize_tex,
)
from tasks.ground.paper_input import _check_complete, _decode, _parse, _pick_document
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

    # read in page order: the renderer's counts (equations, figures, references) run across every part
    title, title_notes = _title(doc, root, meta, r)
    subtitle = ""
    sub_els = doc.xpath(f".//*[{has_class('ltx_subtitle')}]")
    if sub_els:
        subtitle = r.flat_text(sub_els[0])[0]

    authors, affiliations = _author_names(doc, r)

    dates = _front(doc, r, "ltx_dates")
    keywords = _front(doc, r, "ltx_keywords")
    classification = _front(doc, r, "ltx_classification")
    abstract = _abstract(doc, r)

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

    info = info_lines(metadata, affiliations, dates, classification)
    refs = stats.references
    markdown = _document_markdown(title, info, title_notes, abstract, body_blocks, refs)

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


def _title(doc: Any, root: Any, meta: dict, r: _Renderer) -> tuple[str, list[str]]:
    """The title (the page's own value wins over the manifest's, then the HTML <title>) and the notes
    pulled out of it."""
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
    return title, title_notes


def _front(doc: Any, r: _Renderer, name: str) -> str:
    """One line of every front-matter element of class `name` (dates, keywords, classification)."""
    els = doc.xpath(f".//*[{has_class(name)}]")
    return " ".join(t for t in (r.flat_text(e)[0] for e in els) if t)


def _abstract(doc: Any, r: _Renderer) -> str:
    """The abstract(s) as Markdown blocks, without their "Abstract" titles."""
    abstract_blocks: list[str] = []
    for ab in doc.xpath(f".//*[{has_class('ltx_abstract')}]"):
        if ab.xpath(f"ancestor::*[{has_class('ltx_abstract')}]"):
            continue
        ar = r.sub(flat=False)
        skip = {c for c in ab if isinstance(c.tag, str) and "ltx_title_abstract" in _classes(c)}
        ar.children(ab, skip=skip)
        abstract_blocks.extend(ar.finish())
    return "\n\n".join(abstract_blocks)


def _document_markdown(
    title: str,
    info: list[str],
    title_notes: list[str],
    abstract: str,
    body_blocks: list[str],
    refs: list[str],
) -> str:
    """The document: title, info bullets, title notes, abstract, body, references."""
    lines = [f"# {title}", ""]
    lines += info + [""]
    for n in title_notes:
        lines += [n, ""]
    if abstract:
        lines += ["## Abstract", "", abstract, ""]
    for b in body_blocks:
        lines += [b, ""]
    if refs:
        lines += ["## References", ""]
        lines += ["- " + (ref or "(empty entry)") for ref in refs]
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"
