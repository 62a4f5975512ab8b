"""iXBRL filings: validation, the facts table, and cleaning to plain semantic HTML (SPEC §2.2).

The cleaned HTML keeps only what a reader sees and what the splitter needs: block structure,
bold/italic, tables with their spans, images. XBRL markup, styles, hidden parts, page headers,
footers, page numbers and the table of contents are gone.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

from lxml import etree

from tasks.errors import FrameInputError
from tasks.ground.glue import layout_of
from tasks.ground.textblocks import note_blocks

XHTML = "http://www.w3.org/1999/xhtml"
IX = "http://www.xbrl.org/2013/inlineXBRL"
XBRLI = "http://www.xbrl.org/2003/instance"
XBRLDI = "http://xbrl.org/2006/xbrldi"

_BLOCK_TAGS = {"div", "p", "table", "ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "center"}
_KEEP_ATTRS = {"colspan", "rowspan", "src", "alt", "data-bold", "data-page-break"}  # + cleaning's marks
_BOUNDARY_LAYOUTS = ("block", "cell", "br")  # where a browser renders whitespace (glue.layout_of)
# Inline wrappers unwrapped by cleaning (their text and tails join the parent).
_STRIPPED = (
    "span",
    "font",
    "a",
    "ix-nonnumeric",
    "ix-continuation",
    "ix-exclude",
    "ix-footnote",
    "ix-fraction",
    "ix-tuple",
    "ix-relationship",
    "ix-references",
    "ix-resources",
)


@dataclass
class Fact:
    fact_id: str
    concept: str
    fact_type: str
    context_id: str
    period_start: str | None
    period_end: str | None
    period_instant: str | None
    dimensions: str
    unit: str | None
    decimals: str | None
    scale: int | None
    sign: str | None
    format: str | None
    displayed_text: str
    value: float | None
    hidden: bool


@dataclass
class CleanFiling:
    """A cleaned filing: semantic HTML, its facts and the dei: cover facts."""

    html: str
    facts: list[Fact]
    dei: dict[str, str] = field(default_factory=dict)
    removed: dict[str, int] = field(default_factory=dict)  # what cleaning dropped, for QA/logs

    @property
    def form(self) -> str:
        return self.dei.get("DocumentType", "")


def _local(tag: object) -> str:
    if not isinstance(tag, str):
        return ""
    return tag.rsplit("}", 1)[-1].lower()


_STRING = etree.XPath("string()", smart_strings=False)  # the text joined in C (itertext + join: 2x slower)


def _text(el: etree._Element) -> str:
    """The element's text, whitespace runs folded to one space (str.split's whitespace is re's \\s)."""
    return " ".join(_STRING(el).split())


def parse_ixbrl(data: bytes, source_name: str) -> etree._Element:
    """Parse bytes as an iXBRL (XHTML) document, or raise a one-line FrameInputError."""
    if not data or not data.strip():
        raise FrameInputError(source_name, "file is empty")
    head = data[:4096]
    if b"\x00" in head:
        raise FrameInputError(source_name, "binary data, not an HTML/iXBRL document")
    if b"<" not in head:
        raise FrameInputError(source_name, "not HTML (no markup in the first 4 KB)")
    if not data.rstrip().lower().endswith(b"</html>") and re.search(rb"inlineXBRL", data[:20000]):
        raise FrameInputError(source_name, "truncated file (it does not end with </html>)")
    parser = etree.XMLParser(huge_tree=True, resolve_entities=False, no_network=True, remove_comments=True)
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as exc:
        msg = str(exc).splitlines()[0]
        if "Premature end of data" in msg or "EndTag" in msg or "end of data" in msg.lower():
            raise FrameInputError(source_name, f"truncated or corrupt XHTML ({msg})") from None
        if not re.search(rb"inlineXBRL", data[:20000]):
            raise FrameInputError(source_name, "not an iXBRL filing (no inline XBRL namespace)") from None
        raise FrameInputError(source_name, f"not well-formed XHTML ({msg})") from None
    if root.find(f".//{{{IX}}}header") is None or root.find(f".//{{{IX}}}nonFraction") is None:
        raise FrameInputError(source_name, "not an iXBRL filing (no ix:header / ix:nonFraction facts)")
    return root


# ---------------------------------------------------------------- facts


def _contexts(root: etree._Element) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for ctx in root.iter(f"{{{XBRLI}}}context"):
        period = ctx.find(f"{{{XBRLI}}}period")
        start = end = instant = None
        if period is not None:
            s, e, i = (period.find(f"{{{XBRLI}}}{t}") for t in ("startDate", "endDate", "instant"))
            start = s.text.strip() if s is not None and s.text else None
            end = e.text.strip() if e is not None and e.text else None
            instant = i.text.strip() if i is not None and i.text else None
        dims: dict[str, str] = {}
        for member in ctx.iter(f"{{{XBRLDI}}}explicitMember", f"{{{XBRLDI}}}typedMember"):
            dims[member.get("dimension", "")] = _text(member)
        out[ctx.get("id", "")] = {"start": start, "end": end, "instant": instant, "dims": dims}
    return out


def _units(root: etree._Element) -> dict[str, str]:
    out: dict[str, str] = {}
    for unit in root.iter(f"{{{XBRLI}}}unit"):
        num = unit.find(f".//{{{XBRLI}}}unitNumerator")
        den = unit.find(f".//{{{XBRLI}}}unitDenominator")
        if num is not None and den is not None:
            out[unit.get("id", "")] = f"{_text(num)}/{_text(den)}"
        else:
            out[unit.get("id", "")] = " ".join(_text(m) for m in unit.iter(f"{{{XBRLI}}}measure"))
    return out


_NUM_WORDS = {
    "no": 0,
    "none": 0,
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
    "hundred": 100,
}


def numeric_value(displayed: str, fmt: str | None, scale: str | None, sign: str | None) -> float | None:
    """The number a nonFraction fact stands for (ixt transformation, then scale and sign)."""
    f = (fmt or "").split(":")[-1].replace("-", "")
    text = displayed.strip()
    number: Decimal | None
    if f in ("fixedzero", "zerodash") or (text and set(text) <= set("—–-")):
        number = Decimal(0)
    elif f in ("numwordsen", "numwordsen"):
        words = [w for w in re.split(r"[\s-]+", text.lower()) if w and w != "and"]
        if words and all(w in _NUM_WORDS for w in words):
            total = 0
            for w in words:
                total = total * 100 if w == "hundred" else total + _NUM_WORDS[w]
            number = Decimal(total)
        else:
            number = _plain_number(text)
    elif f in ("numcommadecimal",):
        number = _plain_number(text.replace(".", "").replace(" ", "").replace(",", "."))
    else:
        number = _plain_number(text)
    if number is None:
        return None
    try:
        number = number.scaleb(int(scale or 0))
    except (ValueError, ArithmeticError):  # not an integer, or a scale beyond Decimal's exponent range
        return None
    if sign == "-":
        number = -number
    value = float(number)
    return value if math.isfinite(value) else None


def _plain_number(text: str) -> Decimal | None:
    cleaned = re.sub(r"[^\d.]", "", text)
    if not cleaned or cleaned.count(".") > 1:
        return None
    try:
        return Decimal(cleaned)
    except InvalidOperation:
        return None


_SCALE = re.compile(r"-?\d+")


def extract_facts(root: etree._Element) -> list[Fact]:
    contexts = _contexts(root)
    units = _units(root)
    facts: list[Fact] = []
    dims_json: dict[str, str] = {}  # per context: a filing has thousands of facts, hundreds of contexts
    for el in root.iter(f"{{{IX}}}nonFraction", f"{{{IX}}}nonNumeric"):
        kind = etree.QName(el).localname
        ctx_id = el.get("contextRef", "")
        ctx = contexts.get(ctx_id, {})
        dims = dims_json.get(ctx_id)
        if dims is None:
            dims = dims_json[ctx_id] = json.dumps(ctx.get("dims", {}), sort_keys=True)
        displayed = _text(el)
        fmt = el.get("format")
        value = None
        if kind == "nonFraction" and el.get("{http://www.w3.org/2001/XMLSchema-instance}nil") != "true":
            value = numeric_value(displayed, fmt, el.get("scale"), el.get("sign"))
        scale = el.get("scale")
        facts.append(
            Fact(
                fact_id=el.get("id", ""),
                concept=el.get("name", ""),
                fact_type=kind,
                context_id=ctx_id,
                period_start=ctx.get("start"),
                period_end=ctx.get("end"),
                period_instant=ctx.get("instant"),
                dimensions=dims,
                unit=units.get(el.get("unitRef", "")) if el.get("unitRef") else None,
                decimals=el.get("decimals"),
                scale=int(scale) if scale and _SCALE.fullmatch(scale) else None,
                sign=el.get("sign"),
                format=fmt,
                displayed_text=displayed,
                value=value,
                # By ancestry, not by id(): lxml proxies are transient and their ids get reused.
                hidden=next(el.iterancestors(f"{{{IX}}}hidden"), None) is not None,
            )
        )
    return facts


def dei_facts(facts: list[Fact]) -> dict[str, str]:
    """Cover-page facts (dei:DocumentType, dei:DocumentPeriodEndDate, ...) by local name."""
    out: dict[str, str] = {}
    for f in facts:
        if f.concept.startswith("dei:"):
            out.setdefault(f.concept.split(":", 1)[1], f.displayed_text)
    return out


# ---------------------------------------------------------------- cleaning

_STYLE_PROP = re.compile(r"([a-z-]+)\s*:\s*([^;]+)")


def _style(el: etree._Element) -> dict[str, str]:
    s = el.get("style")
    if not s:
        return {}
    return _parse_style(s)


@functools.lru_cache(maxsize=8192)
def _parse_style(s: str) -> dict[str, str]:
    """A style attribute's properties (cached: a filing repeats a few hundred style strings; the
    dict is shared, callers only read it)."""
    return {k.strip().lower(): v.strip().lower() for k, v in _STYLE_PROP.findall(s)}


def _is_hidden(el: etree._Element) -> bool:
    style = el.get("style")
    if not style or ("display" not in style and "visibility" not in style):
        return False  # (a quick test first: most elements have neither property)
    st = _style(el)
    return st.get("display") == "none" or st.get("visibility") == "hidden"


# elements whose style names display/visibility: _is_hidden's quick test, run in C over the tree
_STYLED_HIDDEN_CANDIDATES = etree.XPath(
    "descendant-or-self::*[contains(@style, 'display') or contains(@style, 'visibility')]"
)


def hidden_elements(root: etree._Element) -> list[etree._Element]:
    """`root` and its descendants that a reader does not see (display:none, visibility:hidden), in
    document order."""
    return [e for e in _STYLED_HIDDEN_CANDIDATES(root) if _is_hidden(e)]


def _is_page_break(style: str | None) -> bool:
    """Whether an element with this style attribute starts or ends a printed page."""
    if not style or "break" not in style:
        return False
    st = _parse_style(style)
    return any(
        st.get(k) in ("always", "page")
        for k in ("page-break-after", "page-break-before", "break-after", "break-before")
    )


def _has_fact(el: etree._Element) -> bool:
    return el.find(".//nonfraction-fact") is not None


_PAGE_NUMBER = re.compile(r"^(page\s*)?([ivxlc]+|[a-z]?-?\d{1,3}|\d{1,3}\.)$", re.I)


def clean_filing(data: bytes, source_name: str) -> CleanFiling:
    """iXBRL bytes -> CleanFiling (semantic HTML + facts). Raises FrameInputError on bad input."""
    root = parse_ixbrl(data, source_name)
    facts = extract_facts(root)
    dei = dei_facts(facts)
    removed: Counter[str] = Counter()

    body = root.find(f"{{{XHTML}}}body")
    if body is None:
        raise FrameInputError(source_name, "iXBRL document has no <body>")

    # 1. Hidden content and the XBRL header go first: they are not part of what a reader sees.
    _remove_unseen(body, removed)

    # Where each note starts, from its note-level text block (the filing's own evidence, read before
    # the ix: tags go); the anchor is an empty inline element that the splitter looks for.
    notes = note_blocks(root)
    # 2. Facts keep their visible text; mark numeric ones so page-furniture detection spares them.
    for el in body.iter(f"{{{IX}}}nonFraction"):
        el.tag = "nonfraction-fact"
    # 3. Bold/italic spans become <b>/<i>, other inline wrappers are unwrapped, namespaces and styles go
    boundaries = _normalise_elements(body)
    for note in notes:
        anchor = etree.Element("note-anchor")
        anchor.set("data-concept", note.concept)
        note.element.insert(0, anchor)
        anchor.tail, note.element.text = note.element.text, None
    etree.strip_tags(body, *_STRIPPED)

    removed.update(_remove_page_furniture(body))
    removed["toc_tables"] += _remove_toc(body)
    # 4. Rendered boundaries become spaces, last, so that page-furniture and table-of-contents
    #    detection read the text as before.
    _space_boundaries(body, boundaries)
    etree.strip_tags(body, "nonfraction-fact", "page-break", "block-span")

    html_root = etree.Element("html")
    html_root.append(body)
    etree.cleanup_namespaces(html_root)
    html = etree.tostring(html_root, encoding="unicode", method="html")
    return CleanFiling(html=html, facts=facts, dei=dei, removed=dict(removed))


def _remove_unseen(body: etree._Element, removed: Counter[str]) -> None:
    """Remove what a reader never sees: the XBRL header, hidden content, scripts and styles (counted)."""
    for el in list(body.iter(f"{{{IX}}}header")):
        _remove(el)
        removed["ix_header"] += 1
    for el in hidden_elements(body):
        if el.getparent() is not None:
            _remove(el)
            removed["hidden"] += 1
    for el in list(body.iter(f"{{{XHTML}}}script", f"{{{XHTML}}}style")):
        _remove(el)
        removed["script_style"] += 1


def _normalise_elements(body: etree._Element) -> set[etree._Element]:
    """Bold/italic spans become <b>/<i> (the splitter reads headings from them); other inline wrappers
    are marked for unwrapping; namespaces and styles go. Returns the elements where a browser renders a
    boundary (block, table cell, <br>), read before styles go; they stay referenced, so they keep their
    identity until the boundaries become spaces. (One pass over every element: the tag and style are
    read once each, as lxml builds a new string on every read.)"""
    boundaries: set[etree._Element] = set()
    xhtml_ns = f"{{{XHTML}}}"
    for el in body.iter():
        tag = el.tag
        if not isinstance(tag, str):
            continue
        name = _local(tag)
        namespaced = tag.startswith("{")
        xhtml = not namespaced or tag.startswith(xhtml_ns)
        style = el.get("style")
        if layout_of(name if xhtml else f"{name}@ix", style) in _BOUNDARY_LAYOUTS:
            boundaries.add(el)
        if namespaced:
            tag = el.tag = name if xhtml else f"ix-{name}"
        if name == "span" or (name in ("div", "p") and len(el) == 0):
            st = _parse_style(style) if style and ("font-weight" in style or "font-style" in style) else {}
            weight = st.get("font-weight", "")
            bold = weight in ("bold", "bolder") or (weight.isdigit() and int(weight) >= 600)
            italic = st.get("font-style") == "italic"
            if name == "span":
                tag = el.tag = "b" if bold else ("i" if italic else "span")
            elif bold and _text(el):
                el.set("data-bold", "1")
        if name == "hr" and _is_page_break(style):
            tag = el.tag = "page-break"
        elif name in ("div", "p") and _is_page_break(style):
            el.set("data-page-break", "1")
        for attr in el.keys():
            if attr not in _KEEP_ATTRS:
                del el.attrib[attr]
        if tag in _STRIPPED and el in boundaries:
            el.tag = "block-span"  # a display:block span: unwrapped after step 4, which reads it
    return boundaries


def _space_boundaries(body: etree._Element, boundaries: set[etree._Element]) -> None:
    """Where a boundary (block, cell, <br>) separates two pieces of text with no whitespace between
    them, append a space to the earlier piece, so that reading the text (itertext) keeps "Three
    Months Ended<br/>June 30" two words apart. The space goes into the innermost text before the
    boundary (inside a bold run that ends there, so bold headings read as before). One pass in
    document order."""
    pending = False  # a boundary since the last text
    last: etree._Element | None = None  # where the last text is: last.tail if in_tail, else last.text
    in_tail = False
    ends_space = True  # the document's start counts as whitespace
    for event, el in etree.iterwalk(body, events=("start", "end")):
        if el in boundaries:
            pending = True
        if event == "start":
            text = el.text
            if not text or not isinstance(el.tag, str):
                continue  # a processing instruction's text is not shown; its tail comes at "end"
        else:
            text = el.tail
            if not text or el is body:
                continue
        if pending and not ends_space and not text[0].isspace() and last is not None:
            if in_tail:
                last.tail += " "
            else:
                last.text += " "
        pending = False
        last, in_tail, ends_space = el, event == "end", text[-1].isspace()


def _space_before(el: etree._Element) -> None:
    """Append a space to the text just before `el`, innermost (inside a <b> that ends there)."""
    prev = el.getprevious()
    if prev is None:
        parent = el.getparent()
        parent.text = (parent.text or "") + " "
        return
    node = prev
    while True:
        if node.tail:
            node.tail += " "
            return
        if not isinstance(node.tag, str) or len(node) == 0:
            break
        node = node[-1]
    if isinstance(node.tag, str) and node.text:
        node.text += " "
    else:
        prev.tail = " "


def _remove(el: etree._Element) -> None:
    """Remove an element but keep its tail text (which belongs to the parent), whitespace included:
    a space between two words may be all there is of it."""
    parent = el.getparent()
    if parent is None:
        return
    tail = el.tail
    if tail and not tail.strip():
        _space_before(el)
    elif tail:
        prev = el.getprevious()
        if prev is not None:
            prev.tail = (prev.tail or "") + tail
        else:
            parent.text = (parent.text or "") + tail
    parent.remove(el)


def _is_block(el: etree._Element) -> bool:
    return isinstance(el.tag, str) and el.tag in _BLOCK_TAGS | {"page-break"}


def _wrap_inline_runs(el: etree._Element) -> None:
    """In an element holding blocks, wrap loose text and runs of inline nodes into <div>s (in place),
    so a sentence followed by a table becomes two blocks and no tail text is lost."""
    children = list(el)
    run: etree._Element | None = None
    new: list[etree._Element] = []

    def text_run(text: str | None) -> etree._Element | None:
        if text and text.strip():
            d = etree.Element("div")
            d.text = text
            return d
        return None

    run = text_run(el.text)
    el.text = None
    for child in children:
        el.remove(child)
        tail, child.tail = child.tail, None
        if _is_block(child):
            if run is not None:
                new.append(run)
            new.append(child)
            run = text_run(tail)
        else:
            if run is None:
                run = etree.Element("div")
            run.append(child)
            child.tail = tail
    if run is not None:
        new.append(run)
    el.extend(new)


def _blocks(body: etree._Element) -> list[etree._Element]:
    """Top-level blocks in reading order, descending through wrappers that hold blocks."""
    out: list[etree._Element] = []

    def children(el: etree._Element) -> list[etree._Element]:
        if (el.text and el.text.strip()) or any(
            not _is_block(c) or (c.tail and c.tail.strip()) for c in el if isinstance(c.tag, str)
        ):
            _wrap_inline_runs(el)
        return [c for c in el if isinstance(c.tag, str)]

    # An explicit stack, not recursion: wrappers may nest deeper than Python's recursion limit.
    stack = [iter(children(body))]
    while stack:
        child = next(stack[-1], None)
        if child is None:
            stack.pop()
        elif child.tag in ("div", "p", "center") and any(_is_block(c) for c in child):
            stack.append(iter(children(child)))
        else:
            out.append(child)
    return out


def _remove_page_furniture(body: etree._Element) -> Counter[str]:
    """Drop running headers/footers and page numbers: short blocks next to page breaks whose
    text (digits folded) repeats on several pages, or that are a bare page number."""
    removed: Counter[str] = Counter()
    blocks = _blocks(body)
    breaks = [i for i, b in enumerate(blocks) if b.tag == "page-break" or b.get("data-page-break")]
    if not breaks:
        return removed
    candidates: list[tuple[etree._Element, str, str]] = []
    for i in breaks:
        for step in (-1, +1):
            seen = 0
            j = i + step if blocks[i].tag == "page-break" else (i if step == -1 else i + 1)
            while 0 <= j < len(blocks) and seen < 3:
                b = blocks[j]
                if b.tag == "page-break" or b.get("data-page-break") and j != i:
                    break
                t = _text(b)
                if t:
                    seen += 1
                    small_table = b.tag == "table" and sum(1 for r in b.iter("tr") if _text(r)) <= 2
                    if len(t) <= 160 and (b.tag != "table" or small_table) and not _has_fact(b):
                        candidates.append((b, t, re.sub(r"\d+", "#", t.lower())))
                    if (b.tag == "table" and not small_table) or len(t) > 160:
                        break
                j += step
    shape_count = Counter(
        shape for _, _, shape in {(id(b), t, s): (b, t, s) for b, t, s in candidates}.values()
    )
    done: set[int] = set()
    for b, t, shape in candidates:
        if id(b) in done or b.getparent() is None:
            continue
        if _PAGE_NUMBER.match(t) or shape_count[shape] >= 3:
            done.add(id(b))
            _remove(b)
            removed["page_number" if _PAGE_NUMBER.match(t) else "running_header_footer"] += 1
    return removed


_TOC_ENTRY = re.compile(r"^(part\s+(i|ii|iii|iv)\b|item\s*\d+[a-c]?\b)", re.I)
_TOC_TITLE = re.compile(r"^(table of contents|index|contents)$", re.I)


def _remove_toc(body: etree._Element) -> int:
    """Drop table-of-contents tables: rows that name Parts/Items and end in a page number."""
    n = 0
    for table in list(body.iter("table")):
        rows = [r for r in table.iter("tr") if _text(r)]
        if len(rows) < 4:
            continue
        entries = paged = 0
        for r in rows:
            cells = [t for t in (_text(c) for c in r if isinstance(c.tag, str)) if t]
            if not cells or not re.fullmatch(r"\d{1,3}|[ivx]+", cells[-1], re.I):
                continue
            paged += 1
            if any(_TOC_ENTRY.match(c) for c in cells):
                entries += 1
        if entries >= 3 and paged >= 0.5 * len(rows):
            prev = table.getprevious()
            while prev is not None and not _text(prev):
                prev = prev.getprevious()
            if prev is not None and _TOC_TITLE.match(_text(prev)):
                _remove(prev)
            _remove(table)
            n += 1
    return n
