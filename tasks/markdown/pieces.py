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
from tasks.markdown.numbers import Num, numbers_in
from tasks.markdown.text import split_sentences

__all__ = [
    "DATE",
    "Block",
    "Piece",
    "cells",
    "clean",
    "fix_dates",
    "heading_title",
    "markdown_pieces",
    "md_blocks",
    "numbers",
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
_IGNORED = re.compile(r"(?<=[A-Za-z)\]])\(\d{1,2}\)|^\s*\(\d{1,2}\)|\bLevel\s+[1-3]\b")


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


def _table_pieces(block: Block) -> list[Piece]:
    rows = [cells(ln) for ln in block.lines]
    raw_rows = [block.lines[0]] + block.lines[2:]
    rows = [rows[0]] + rows[2:]
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    headers, k = _headers(rows, width)
    out: list[Piece] = []
    context = ""
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
        head = f"{context.rstrip(':').strip()}: {label}" if context and label else (label or context)
        text = f"{head} | " + "; ".join(parts) if head else "; ".join(parts)
        own = tuple(n for x in (label, *values) if x for n in numbers(x))
        header_text = " ".join(headers)
        out.append(Piece("row", text, raw.strip(), block.path, own, numbers(f"{text} {header_text}")))
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


def markdown_pieces(markdown: str) -> list[Piece]:
    """Every piece of a Markdown report, in order; headings, the title and fenced code are not pieces."""
    return list(_pieces(markdown))


# The same report is read by several families and judges of a run (the gold report Y by every one of
# them, per system); pieces are immutable, so one reading serves them all.
@functools.lru_cache(maxsize=256)
def _pieces(markdown: str) -> tuple[Piece, ...]:
    out: list[Piece] = []
    for b in md_blocks(markdown):
        if b.kind in ("title", "heading", "code"):
            continue
        if b.kind == "table":
            out.extend(_table_pieces(b))
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
