"""What every rubric check shares: the instance context, the finding a check returns, the registry of
checks (CHECKS) and the one cached reading of a Markdown report (blocks, tables, prose sentences)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache

from schemas.rubric import Decision, category_family
from tasks.markdown.document import Block, parse, title_block
from tasks.markdown.pieces import clean
from tasks.markdown.text import split_sentences

EVIDENCE_CHARS = 240


@dataclass(frozen=True)
class RubricContext:
    """What the rubric knows about the instance besides R': its category, domain and sample report S."""

    category: str  # "financial_quarterly", "academic_simple", ...
    domain: str  # "AAPL-10-Q", "large-language-models", ...
    sample_markdown: str = ""
    target_period: str = ""  # optional: the instance's t_target ("2025-06-28", "W2"); the title must name it

    @property
    def family(self) -> str:
        return category_family(self.category)


@dataclass(frozen=True)
class Finding:
    """What a check decides (a RubricDecision without item id, layer and judge)."""

    decision: Decision
    evidence: str = ""
    evidence_ref: str = ""
    rationale: str = ""


CheckFn = Callable[[str, RubricContext], Finding]  # what CHECKS hold: (report R', context) -> finding
DocCheck = Callable[["_Doc", RubricContext], Finding]  # how checks are written: on the parsed report
CHECKS: dict[str, CheckFn] = {}


def _check(name: str) -> Callable[[DocCheck], DocCheck]:
    """Register a check under `name`; CHECKS[name] takes the report text and parses it (cached)."""

    def register(fn: DocCheck) -> DocCheck:
        CHECKS[name] = lambda report, ctx: fn(_parse(report), ctx)
        return fn

    return register


# ======================================================================== Markdown reading

_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
    r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?"
)
_YEAR = re.compile(r"(?<![\d.,])(?:19|20)\d\d(?![\d])")
_EMPHASIS = re.compile(r"(?<!\w)\*(?=\S)|(?<=\S)\*(?!\w)")  # single-star *emphasis*


def _clean(text: str) -> str:
    """`tasks.markdown.pieces.clean` (links, bold, code ticks, tags) and single-star emphasis removed."""
    return " ".join(_EMPHASIS.sub("", clean(text)).split())


def _snip(text: str, limit: int = EVIDENCE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _flat(b: Block) -> str:
    """A block's lines joined by spaces, block-quote marks dropped."""
    return " ".join(s.strip().lstrip(">").strip() for s in b.lines)


@dataclass(frozen=True)
class _Table:
    index: int  # 1-based among the report's tables
    start: int  # line of the header row
    header: tuple[str, ...]
    rows: tuple[tuple[int, tuple[str, ...]], ...]  # data rows (line, raw cells) after the separator
    n_header_rows: int  # header line + header-like rows right after the separator
    above: str  # the line right above the table (its caption / scale note), "" when a heading or none
    above_line: int
    below: str  # the line right below (a "Table 3: ..." caption)

    def header_rows(self) -> list[tuple[int, tuple[str, ...]]]:
        return [(self.start, self.header), *self.rows[: self.n_header_rows - 1]]

    def data_rows(self) -> list[tuple[int, tuple[str, ...]]]:
        return list(self.rows[self.n_header_rows - 1 :])


@dataclass(frozen=True)
class _Doc:
    """The report as `tasks.markdown.document` blocks (heading titles cleaned) and its tables."""

    lines: tuple[str, ...]
    blocks: tuple[Block, ...]
    tables: tuple[_Table, ...] = field(default=())

    @property
    def headings(self) -> list[Block]:
        return [b for b in self.blocks if b.kind == "heading"]

    @property
    def h1(self) -> Block | None:
        """The report's title: the reading every family shares (`title_block`)."""
        return title_block(self.blocks)


_NUM_CELL = re.compile(r"^\(?\s*[-−–]?\s*[$€£¥]?\s*\d[\d,]*(?:\.\d+)?\s*(?:%|[kKmMbB]|bn)?\s*\)?\s*%?$")
_DASH_CELL = re.compile(r"^[-−–—]+$")


def _is_num_cell(cell: str) -> bool:
    c = _clean(cell).replace("\\$", "$")
    return bool(_NUM_CELL.match(c))


def _header_like(cells: Sequence[str]) -> bool:
    """A row continuing the header: empty first cell, other cells words / dates / years, no plain figures."""
    cells = [_clean(c) for c in cells]
    if not cells or cells[0] or not any(cells[1:]):
        return False
    return all(not c or re.search(r"[A-Za-z]", c) or _YEAR.fullmatch(c) for c in cells[1:])


@lru_cache(maxsize=16)
def _parse(markdown: str) -> _Doc:
    """The one reading every check shares: `tasks.markdown.document.parse` (fence-aware; a line starting
    with "![" is a figure) with cleaned heading titles, plus the pipe tables with header rows and captions."""
    doc = parse(markdown, images="start")
    blocks: list[Block] = []
    tables: list[_Table] = []
    for b in doc.blocks:
        if b.kind == "heading":
            b = replace(b, title=_clean(b.title))
        elif b.kind == "table":
            tables.append(_table(doc.lines, b, blocks[-1] if blocks else None, len(tables) + 1))
        blocks.append(b)
    return _Doc(doc.lines, tuple(blocks), tuple(tables))


def _table(lines: Sequence[str], b: Block, prev: Block | None, index: int) -> _Table:
    assert b.table is not None
    rows = tuple((b.start + 2 + i, row) for i, row in enumerate(b.table.rows))
    nh = 1
    while nh - 1 < len(rows) and _header_like(rows[nh - 1][1]):
        nh += 1
    # the caption / scale note right above: a paragraph ending on the line before or one blank up
    adjacent = prev is not None and prev.kind == "paragraph" and prev.end >= b.start - 2
    # its last sentence, lines joined: a hard-wrapped note ("... (in millions,\nexcept ...)") is one note
    above = ""
    if adjacent and prev is not None:
        joined = " ".join(line.strip() for line in prev.lines)
        above = (split_sentences(joined) or [joined])[-1].strip()
    after = b.end  # 0-based index of the line after the table
    nxt = after + 1 if after < len(lines) and not lines[after].strip() else after
    below = lines[nxt].strip() if nxt < len(lines) else ""
    return _Table(
        index, b.start, b.table.header, rows, nh, above, prev.end if above and prev is not None else 0, below
    )


def _where_heading(b: Block) -> str:
    return f"heading '{_snip(b.title, 80)}' (line {b.start})"


@dataclass(frozen=True)
class _Sentence:
    line: int
    text: str  # cleaned


def _sentences(doc: _Doc) -> list[_Sentence]:
    """Prose sentences (paragraphs and list items; not tables, headings, figures or code), with their line."""
    out: list[_Sentence] = []

    def add(raw_lines: Sequence[tuple[int, str]]) -> None:
        joined = " ".join(s for _, s in raw_lines)
        for sent in split_sentences(_clean(joined)):
            probe = sent[:30]
            line = next((ln for ln, s in raw_lines if probe and probe in _clean(s)), raw_lines[0][0])
            out.append(_Sentence(line, sent))

    for b in doc.blocks:
        if b.kind == "paragraph":
            add([(b.start + i, s.strip().lstrip(">").strip()) for i, s in enumerate(b.lines)])
        elif b.kind == "list":
            for ln, item in b.items:
                add([(ln, item)])
    return out


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z0-9][A-Za-z0-9'’.,%$-]*", text)


def _section_content(doc: _Doc, heading: Block, *, deep: bool = True) -> list[Block]:
    """Blocks under `heading` up to the next heading of the same or a higher level (deep: subsections too)."""
    out: list[Block] = []
    started = False
    for b in doc.blocks:
        if b is heading:
            started = True
            continue
        if not started:
            continue
        if b.kind == "heading" and (b.level <= heading.level or not deep):
            break
        out.append(b)
    return out


def _prose_lines(doc: _Doc) -> Iterable[tuple[int, str]]:
    """Every line outside code blocks, with inline code spans blanked (template text there is quoted)."""
    for b in doc.blocks:
        if b.kind == "code":
            continue
        for i, s in enumerate(b.lines):
            yield b.start + i, re.sub(r"`[^`\n]*`", "``", s)
