"""A Markdown report as *pieces*: its sentences, list-item sentences, figure captions and table data rows,
each with its heading path and figures. Coverage cuts units and segments with it, faithfulness claims
and evidence units, and the other scorers reuse the same cut. How rows become text and which figures are
weak: docs/metrics/coverage.md.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from tasks.markdown.document import heading_of, parse, split_row, title_block
from tasks.markdown.numbers import PERCENT, POINTS, Num, header_period, numbers_in
from tasks.markdown.text import split_sentences

__all__ = [
    "DATE",
    "Block",
    "Piece",
    "cells",
    "clean",
    "fix_dates",
    "heading_title",
    "markdown_numbers",
    "markdown_pieces",
    "md_blocks",
    "numbers",
    "row_figures",
    "row_figures_strong",
    "row_parts",
    "stated_scale",
    "table_cell_figures",
    "unit_note",
    "strong_numbers",
]

_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")  # a link or image -> its text
_MARKUP = re.compile(r"\*\*|__|`+|<[^>\n]+>")


def clean(text: str) -> str:
    """Text without links (their text kept), bold, code ticks and HTML tags; blanks folded."""
    text = _LINK.sub(r"\1", text)
    text = _MARKUP.sub("", text)
    return " ".join(text.split())


# ---------------------------------------------------------------- blocks


@dataclass
class Block:
    kind: str  # title | heading | table | list | text | figure | code
    lines: list[str]
    path: tuple[str, ...]  # heading titles above it (the H1 title left out)
    level: int = 0  # headings: 1..6
    items: tuple[str, ...] = field(default=(), compare=False, repr=False)  # lists: item texts

    @property
    def raw(self) -> str:
        return "\n".join(self.lines)


def md_blocks(markdown: str) -> list[Block]:
    """Blocks of a Markdown report in order, each with its heading path (deterministic, fence-aware).

    The reading of `tasks.markdown.document.parse` (a fence closes at any line starting with its run,
    images are whole lines); rules are dropped. The report's title (`tasks.markdown.document.title_block`,
    the reading every family shares) is kind ``title`` and stays out of heading paths; heading titles in
    paths are `clean`ed."""
    doc = parse(markdown, fences="prefix", images="whole")
    head = title_block(doc.blocks)
    out: list[Block] = []
    titles: dict[int, str] = {}  # block index in doc -> cleaned title (not for the report title)
    for i, b in enumerate(doc.blocks):
        if b.kind == "rule":
            continue
        path = tuple(titles[p] for p in b.parents if p in titles)
        if b.kind == "heading":
            is_title = b is head
            out.append(Block("title" if is_title else "heading", list(b.lines), path, b.level))
            if not is_title:
                titles[i] = clean(b.title)
            continue
        kind = "text" if b.kind == "paragraph" else b.kind
        out.append(Block(kind, list(b.lines), path, items=tuple(it.text for it in b.items)))
    return out


def heading_title(block: Block) -> str:
    """The cleaned title of a heading block ("" for another block)."""
    head = heading_of(block.lines[0])
    return clean(head.title) if head else ""


def cells(line: str) -> list[str]:
    """The cleaned cells of a pipe-table row."""
    return [clean(c) for c in split_row(line)]


_SCALE_NOTE = re.compile(
    r"^\(?\s*(?:in|dollars in|amounts in)\s+(?:thousands|millions|billions)\b[^)]*\)?$", re.I
)
_YEAR_CELL = re.compile(r"^(?:19|20)\d\d$")


# a table's stated unit: "(In millions)", "($ in millions, except per share data)", "(dollars in thousands)",
# "The following table presents revenue (in millions):"
_STATED = re.compile(
    r"\((?:[^()]*?\b)?in\s+(?P<scale>thousands|millions|billions)\b[^()]*\)"
    r"|\b(?:dollars|amounts|\$)\s+in\s+(?P<scale2>thousands|millions|billions)\b",
    re.I,
)
_STATED_SHARES = re.compile(r"\bshares\b[^()]*?\bin\s+(?P<scale>thousands|millions)\b", re.I)
_FACTORS = {"thousands": 1e3, "millions": 1e6, "billions": 1e9}
_PER_SHARE = re.compile(r"\bper[- ](?:common |diluted |basic |ordinary )?share\b", re.I)
_SHARES = re.compile(r"\bshares\b", re.I)
_PERCENT_HEAD = re.compile(r"%|\bpercent(?:age)?s?\b|\bbasis points\b|\bbps\b", re.I)
_LOSS_LABEL = re.compile(r"\b(?:loss(?:es)?|deficit)\b", re.I)
_GAIN_LABEL = re.compile(r"\b(?:income|gains?|profits?|earnings)\b|\((?:[^()]*\b)?loss(?:es)?\)", re.I)
_CURRENCY_SIGN = re.compile(r"[$€£¥]")


def stated_scale(text: str) -> tuple[float, float] | None:
    """(scale of amounts, scale of share counts) a table's stated unit gives, from a note such as
    "(In millions, except number of shares, which are reflected in thousands, and per-share amounts)";
    None when `text` states none."""
    m = _STATED.search(text)
    if not m:
        return None
    scale = _FACTORS[(m.group("scale") or m.group("scale2")).lower()]
    sh = _STATED_SHARES.search(text)
    return scale, (_FACTORS[sh.group("scale").lower()] if sh else scale)


def _is_note(text: str) -> bool:
    """A short paragraph stating a table's unit (it may precede the table, with "(Unaudited)" between)."""
    return len(text.split()) <= 80 and stated_scale(text) is not None


def _header_like(row: list[str]) -> bool:
    """A row continuing the header: empty first cell, other cells words or years (not figures)."""
    if row[0] or not any(row[1:]):
        return False
    return all(not c or re.search(r"[A-Za-z]", c) or _YEAR_CELL.match(c) for c in row[1:])


# ---------------------------------------------------------------- figures


@dataclass(frozen=True)
class Piece:
    """A sentence, list-item sentence, caption or table row of a report, with what grading needs."""

    kind: str  # sentence | item | caption | row
    text: str  # cleaned text (table rows: "label | header: value; ...")
    source: str  # the raw sentence / table row line
    path: tuple[str, ...]  # heading path
    numbers: tuple[Num, ...] = field(default=(), compare=False)  # the piece's own figures (unit side)
    context_numbers: tuple[Num, ...] = field(default=(), compare=False)  # all figures of its text (R' side)

    @property
    def section(self) -> str:
        return " > ".join(self.path)


_MONTHS = (
    r"Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|"
    r"Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?"
)
_GLUED_DATE = re.compile(rf"\b((?:{_MONTHS})\.?\s+\d{{1,2}}),(\d{{4}})\b")
DATE = re.compile(
    rf"\b(?:(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,\s*\d{{4}})?|\d{{1,2}}\s+(?:{_MONTHS})\b)"
)
MATH = re.compile(r"\$[^$\n]*[\\^_{}][^$\n]*\$")  # inline LaTeX holding \ ^ _ { }: exponents, not figures
_XREF = re.compile(
    r"\b(?:Sections?|Sec\.|Figures?|Figs?\.|Tables?|Tab\.|Appendix|Appendices|Eqs?\.|Equations?|Chapters?|"
    r"Items?|Parts?|Notes?|Rules?|Topic|No\.|Nos\.|Steps?|Stages?|Phases?|Form)\s*\(?[A-Z]?\d+[A-Za-z]?"
    r"(?:[.\-–]\d+[A-Za-z]?)*(?:\s*(?:,|and|or|&|-|–|to)\s*[A-Z]?\d+(?:[.\-]\d+)*)*"
)


def fix_dates(text: str) -> str:
    """'June 28,2025' -> 'June 28, 2025' (otherwise read as the figure 28,202)."""
    return _GLUED_DATE.sub(r"\1, \2", text)


# labels that are not information: footnote markers glued to a word or opening a note ("income(1)",
# "(2) Includes ..."), fair-value hierarchy levels ("Level 2")
# (a cell "(12)" alone is a negative figure, not a note marker)
_IGNORED = re.compile(r"(?<=[A-Za-z)\]])\(\d{1,2}\)|^\s*\(\d{1,2}\)(?=\s*[A-Za-z])|\bLevel\s+[1-3]\b")


def numbers(text: str) -> tuple[Num, ...]:
    """The numbers of `text` (dates fixed up), footnote markers and hierarchy levels left out."""
    text = fix_dates(text)
    skip = [m.span() for m in _IGNORED.finditer(text)]
    return tuple(n for n in numbers_in(text) if not any(a <= n.start and n.end <= b for a, b in skip))


def _weak_spans(text: str) -> list[tuple[int, int]]:
    text = fix_dates(text)
    return [m.span() for rx in (DATE, MATH, _XREF) for m in rx.finditer(text)]


def strong_numbers(text: str) -> list[Num]:
    """Numbers of `text` that are figures: not years, not parts of dates, not inside LaTeX math, not
    cross-references."""
    spans = _weak_spans(text)
    return [
        n for n in numbers(text) if not n.yearlike and not any(a <= n.start and n.end <= b for a, b in spans)
    ]


# ---------------------------------------------------------------- pieces


def _headers(rows: list[list[str]], width: int) -> tuple[list[str], int]:
    """Column headers (all header rows of a column joined) and the number of header rows."""
    header_rows = [rows[0]]
    k = 1
    while k < len(rows) and _header_like(rows[k]):
        header_rows.append(rows[k])
        k += 1
    filled = []
    for h, hr in enumerate(header_rows):
        cur = list(hr)
        if h < len(header_rows) - 1:  # a spanning cell of an upper header row covers the empty cells after it
            for c in range(2, width):
                if not cur[c]:
                    cur[c] = cur[c - 1]
        filled.append(cur)
    return [fix_dates(" ".join(x for x in (fr[c] for fr in filled) if x)) for c in range(width)], k


def table_cell_figures(
    cell: str, header: str, label: str, stated: tuple[float, float] | None, context: str = ""
) -> tuple[Num, ...]:
    """The figures of a value cell read with its table: the stated unit scales amounts and share counts
    (not per-share amounts, percentages or years), a percent column or row makes its plain figures
    percentages, a row of shares makes them share counts, a loss row makes them negative (a loss is a
    negative amount however it is shown: "(45)" there stays -45) and the column header gives the
    period (docs/metrics/numbers.md, "Tables"). `context`: the label of the label-only row above ("Net
    income per share:" over "Diluted"); a loss in it counts for a per-share row only ("Adjustments to
    reconcile net loss to net cash ..." does not make depreciation a loss)."""
    out = []
    period = header_period(header)
    own_label, label = label, f"{context} {label}".strip()
    per_share = bool(_PER_SHARE.search(label) or _PER_SHARE.search(header)) and not _SHARES.search(label)
    shares = bool(_SHARES.search(label)) and not per_share
    percent = bool(_PERCENT_HEAD.search(_STATED.sub("", header)) or _PERCENT_HEAD.search(label))
    named = label if per_share else own_label
    loss = bool(_LOSS_LABEL.search(named)) and not _GAIN_LABEL.search(named)
    money = bool(_CURRENCY_SIGN.search(cell))
    for n in numbers(cell):
        if n.yearlike and not n.unit:
            out.append(n)
            continue
        changes: dict = {}
        if not n.period and period:
            changes["period"] = period
        if percent and not n.unit and not money:
            changes.update(unit=PERCENT, percent=True)
        elif shares and not n.unit and not money:
            changes["unit"] = "count:share"
        unit = changes.get("unit", n.unit)
        if stated and unit not in (PERCENT, POINTS) and not n.worded and not per_share:
            f = stated[1] if shares else stated[0]
            changes.update(value=n.value * f, step=n.step * f, implied=f)
        if loss and n.value > 0:
            changes["value"] = -changes.get("value", n.value)
        out.append(n.replace(**changes) if changes else n)
    return tuple(out)


_WORDS_OF = {1e3: "thousands", 1e6: "millions", 1e9: "billions"}
_UNIT_NOTE = re.compile(
    r"(?:^|; )(\(in (?:thousands|millions|billions)(?:, shares in (?:thousands|millions))?\))$"
)


def unit_note(stated: tuple[float, float]) -> str:
    """The canonical note of a stated unit, as a table row's text ends with it: "(in millions)", "(in
    millions, shares in thousands)"."""
    scale, shares = stated
    extra = f", shares in {_WORDS_OF[shares]}" if shares != scale else ""
    return f"(in {_WORDS_OF[scale]}{extra})"


def row_parts(text: str, source: str) -> tuple[str, str, list[tuple[str, str]], tuple[float, float] | None]:
    """(label, context, [(column header, value)], stated unit) of a table-row piece, read back from its text
    ("<context>: <label> | <header>: <value>; ...[; (in millions)]") with its raw row's cells as anchors:
    a row's text says all a reader needs to read its figures (docs/metrics/numbers.md, "Tables")."""
    raw = cells(source)
    if not raw:
        return "", "", [], None
    label, values = raw[0], [v for v in raw[1:] if v]
    head, sep, rest = text.partition(" | ")
    if not sep:
        head, rest = ("", text) if values else (text, "")
    stated = None
    m = _UNIT_NOTE.search(rest)
    if m and not any(v == m.group(1) for v in values[-1:]):
        stated, rest = stated_scale(m.group(1)), rest[: m.start()]
    found: list[tuple[str, str]] = []
    pos = 0
    for v in values:
        idx, start = -1, pos
        while True:
            k = rest.find(v, start)
            if k < 0:
                break
            end = k + len(v)
            if end == len(rest) or rest.startswith("; ", end):
                idx = k
                break
            start = k + 1
        if idx < 0:
            found.append(("", v))
            continue
        # a raw line holding only some of the row's cells (one cell of it, graded alone) skips the
        # "header: value" pairs before its value: the header is what follows the last "; "
        part = rest[pos:idx].rsplit("; ", 1)[-1]
        found.append(((part[:-2] if part.endswith(": ") else part).strip(), v))
        pos = idx + len(v) + 2
    context = ""
    if label and head.endswith(label) and len(head) > len(label):
        context = head[: -len(label)].rstrip().rstrip(":").strip()
    return label, context, found, stated


def row_figures(text: str, source: str) -> list[tuple[Num, str]]:
    """The figures of a table-row piece, each with the cell it is read from: those of its label as
    written, those of its value cells read with the table (`table_cell_figures`: the stated unit and the
    column header the row's text holds). The same from the row's text and raw line wherever they go (a
    unit or claim exported and graded again reads as it did when it was cut)."""
    label, context, pairs, stated = row_parts(text, source)
    out = [(n, label) for n in numbers(label)] if label else []
    for header, v in pairs:
        if not _SCALE_NOTE.match(v):
            out.extend((n, v) for n in table_cell_figures(v, header, label, stated, context))
    return out


def row_figures_strong(text: str, source: str) -> list[tuple[Num, bool]]:
    """`row_figures`, each figure with whether it is strong (`strong_numbers` of its cell: not a year,
    a date part, math or a cross-reference)."""
    figs = row_figures(text, source)
    spans = {cell: {(n.start, n.end) for n in strong_numbers(cell)} for cell in {c for _, c in figs}}
    return [(n, (n.start, n.end) in spans[c]) for n, c in figs]


def _table_pieces(block: Block, stated_before: str = "") -> list[Piece]:
    """The data rows of a table as pieces; `stated_before`: a note above the table stating its unit."""
    rows = [cells(ln) for ln in block.lines]
    raw_rows = [block.lines[0]] + block.lines[2:]
    rows = [rows[0]] + rows[2:]
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    headers, k = _headers(rows, width)
    # the table's stated unit: a header cell, a row label or a cell that is a note, else the note above
    own_note = next((c for i, r in enumerate(rows) for c in (r if i < k else r[:1]) if c and _is_note(c)), "")
    if not own_note:
        own_note = next((c for r in rows[k:] for c in r[1:] if c and _SCALE_NOTE.match(c)), "")
    stated = stated_scale(own_note or stated_before)
    out: list[Piece] = []
    context = ""
    header_numbers = numbers(" ".join(headers))
    for raw, row in zip(raw_rows[k:], rows[k:], strict=True):
        label, values = row[0], row[1:]
        if width == 1:
            if label:
                out.append(Piece("row", label, raw.strip(), block.path, numbers(label), numbers(label)))
            continue
        if not any(v and not _SCALE_NOTE.match(v) for v in values):  # a label-only row: context of the next
            if label:
                context = label
            continue
        parts = [f"{headers[c + 1]}: {v}" if headers[c + 1] else v for c, v in enumerate(values) if v]
        if stated:  # the table's unit, written into the row so that the row's text says what it shows
            parts.append(unit_note(stated))
        head = f"{context.rstrip(':').strip()}: {label}" if context and label else (label or context)
        text = f"{head} | " + "; ".join(parts) if head else "; ".join(parts)
        own = tuple(n for n, _ in row_figures(text, raw))
        around = numbers(context) + header_numbers
        out.append(Piece("row", text, raw.strip(), block.path, own, own + around))
    return out


_CURRENCY = re.compile(r"\$(?=\s?\(?\d)")


def _sentences(text: str) -> list[str]:
    """``split_sentences`` with currency dollars hidden (it reads "$" as inline math and would not split
    "Revenue was $1.2 billion. Costs rose." at all)."""
    masked = _CURRENCY.sub("\x00", clean(text))
    return [s.replace("\x00", "$") for s in split_sentences(masked) if s.strip()]


def _prose_piece(kind: str, sentence: str, path: tuple[str, ...]) -> Piece:
    nums = numbers(sentence)
    return Piece(kind, sentence, sentence, path, nums, nums)


def markdown_pieces(markdown: str, stated: str = "") -> list[Piece]:
    """Every piece of a Markdown report, in order; headings, the title and fenced code are not pieces.
    `stated`: a note stating the unit of a table at the start of `markdown` that carries none (a note
    that a passage of a grounding document left in the passage before)."""
    return list(_pieces(markdown, stated))


def markdown_numbers(markdown: str, stated: str = "", *, cache: bool = True) -> list[Num]:
    """Every figure of a Markdown text: table cells read with their table (stated unit, column periods)
    and the figures of their column headers, prose, lists, captions, headings and code read as written.
    `cache`: keep the reading of whole documents (read again for every system); False for many small
    passages read once."""
    return list(_numbers_cached(markdown, stated) if cache else _numbers(markdown, stated))


@functools.lru_cache(maxsize=512)
def _numbers_cached(markdown: str, stated: str) -> tuple[Num, ...]:
    return _numbers(markdown, stated)


def _numbers(markdown: str, stated: str) -> tuple[Num, ...]:
    out: list[Num] = []
    for b, note in _with_notes(md_blocks(markdown), stated):
        if b.kind == "table":
            out.extend(n for p in _table_pieces(b, note) for n in p.context_numbers)
        elif b.kind == "text":  # read as its pieces read it: lines joined, quote marks dropped
            out.extend(numbers(" ".join(ln.strip().lstrip(">").strip() for ln in b.lines)))
        elif b.kind == "list":
            out.extend(n for item in b.items for n in numbers(item))
        else:
            out.extend(numbers(b.raw))
    return tuple(out)


def _with_notes(blocks: list[Block], stated: str) -> list[tuple[Block, str]]:
    """Each block with the note stating a unit that applies to it (tables only; `stated` at the start): a
    short paragraph stating a unit holds for the next table, across short paragraphs ("(Unaudited)") and
    tables; a heading, a longer paragraph or another block ends it."""
    out = []
    note = stated
    for b in blocks:
        out.append((b, note if b.kind == "table" else ""))
        if b.kind == "table":
            continue
        if b.kind == "text":
            text = " ".join(ln.strip().lstrip(">").strip() for ln in b.lines)
            last = (split_sentences(text) or [""])[-1]
            if _is_note(text):
                note = text
            elif _is_note(last):  # "... as follows. (In millions)": paragraphs joined above a table
                note = last
            elif len(text.split()) > 12:
                note = ""
        else:
            note = ""
    return out


# The same report is read by several families and judges of a run (the gold report Y by every one of
# them, per system); pieces are immutable, so one reading serves them all.
@functools.lru_cache(maxsize=256)
def _pieces(markdown: str, stated: str = "") -> tuple[Piece, ...]:
    out: list[Piece] = []
    for b, note in _with_notes(md_blocks(markdown), stated):
        if b.kind in ("title", "heading", "code"):
            continue
        if b.kind == "table":
            out.extend(_table_pieces(b, note))
        elif b.kind == "list":
            for item in b.items:
                out.extend(_prose_piece("item", s, b.path) for s in _sentences(item))
        elif b.kind == "figure":
            line = b.lines[0].strip()  # a whole-line image: its alt text ends at the first "]"
            alt = clean(line[2 : line.index("]")])
            if alt:
                out.append(_prose_piece("caption", alt, b.path))
        else:
            text = " ".join(ln.strip().lstrip(">").strip() for ln in b.lines)
            out.extend(_prose_piece("sentence", s, b.path) for s in _sentences(text))
    return tuple(out)
