"""Coverage (SPEC §4, paper 000 §4.2): Information Unit Recall of a generated report R' against the gold Y.

    IUR = mean of c_i over up to 100 information units u_i of Y, drawn with a seeded RNG (``sample_items``),
    c_i in [0, 1] graded by a judge: 0 absent, 1 fully covered, partial values in between.

:func:`coverage` is the driver; a judge implements ``tasks.score.judges.CoverageJudge``. Two judges:

**OfflineCoverageJudge** (deterministic, no network; ``name = "offline:number-aware+<embedder>"``)

*Pieces.* Both reports are cut into pieces by one deterministic Markdown walk (fence-aware): every sentence
of a paragraph (``split_sentences`` of ``tasks.synthesize.retrieve``), every sentence of a list item, every
caption line of a figure, and every data row of a pipe table. A table row becomes the text
``"<context label>: <row label> | <column header>: <value>; ..."`` where the column header joins all header
rows of its column (a multi-row header: rows right after the separator whose first cell is empty and whose
other cells are words or years; a spanning header cell is carried over the empty cells to its right) and
the context label is the last label-only row above it (a row whose value cells are empty or only a scale
note such as ``(In millions)``: "Net sales:", "Current assets:"). Label-only rows, headings and fenced
code are never pieces. Markdown markup (links, emphasis, HTML tags) is removed from the text.

*Units* (``extract_units``) are the pieces of Y except: placeholders ("N/A", "TBD", "not available", a
short "[...]", "the documents of the period do not cover ..."), boilerplate notes (a whole sentence in
parentheses without a digit such as "(In millions, except par value)", "(Unaudited)", "Table of
Contents"), fragments of prose with fewer than ``MIN_WORDS`` = 4 words, and exact repeats of an earlier
unit (same text after whitespace/case normalisation). ``unit_id`` = position, ``section`` = heading path
(" > "-joined, the leading H1 title left out), ``source_sentence`` = the raw sentence or table row line.
``type`` by the first rule that applies:

1. ``statistic``: the piece shows a *strong* number (see below);
2. table row without one: ``entity`` (a row names things);
3. ``finding``: a result cue ("we find", "show(s/ed)", "suggest", "indicate", "demonstrate", "reveal",
   "conclude", "confirm", "observed", "results");
4. ``method``: a method cue ("we use/present/propose/develop/introduce/apply/employ", "algorithm",
   "framework", "pipeline", "method");
5. ``event``: a year or a date, or an event verb ("announced", "acquired", "launched", "completed",
   "issued", "repurchased", "declared", "entered into", "released");
6. ``entity``: 6 words or fewer; otherwise ``factual_claim``.

*Numbers* are found by ``tasks.score.numbers.numbers_in`` after one fix-up ("June 28,2025" is read as
"June 28, 2025", not as 28,202). A number is *weak* when it is a year (1900-2100, no separator/decimals),
part of a date (day next to a month name), inside LaTeX math (``$...$`` holding ``\\ ^ _ { }``: an
exponent is not a reported figure) or a cross-reference ("Section 4", "Figure 3", "Table 2", "Item 1A",
"Note 7", "Rule 13a-15"); every other number is *strong*. Footnote markers ("income(1)", a note opening
with "(2)") and fair-value levels ("Level 2") are labels, not numbers, and are left out. The numbers of a
table-row unit are those of its row label and cells (not of the column headers: "June 28, 2025" belongs to
the column).

*Grading* (``grade``): all pieces of R' are segments (no filtering); a segment's number pool is every number
of its text, column headers included, so a sentence "net sales were $94.0 billion in 2025" can be found in
a table row whose header says 2025. Unit and segment texts are embedded in one batched call (``embed``
returns L2-normalised rows, so cosine = dot product). For unit u and segment s:

    share(u, s) = (numbers of u that appear in s) / (numbers of u)        (``NumberPool.matches``)
    ramp(x; lo, hi) = clip((x - lo) / (hi - lo), 0, 1)
    score(u, s) = ramp(cos(u, s); 0.55, 0.85)                 u has no number
                = share(u, s) * ramp(cos(u, s); 0.55, 0.85)   u has only weak numbers (years, dates)
                = share(u, s) * ramp(cos(u, s); 0.35, 0.65)   u has a strong number
    c_u = max over segments s of score(u, s); evidence = that segment (ties: higher cosine, then earlier)

A unit whose text is a segment of R' verbatim (whitespace and case aside) with all its numbers scores 1
on that segment without being embedded (its cosine is 1); only the other units and, if there is any, all
segments go to the embedder.

So a unit with a number is covered only where the same number appears *in the matching segment*
(numbers elsewhere in R' give no credit: a coincidental "10%" in another paragraph is not coverage), and a
wrong figure gives 0 however similar the wording ("$1.3 billion" never covers "$1.2 billion"). Matching
follows ``same_number``: magnitudes at the coarser displayed precision and, for figures with at least two
significant digits, up to a factor 1000^k, because tables state their scale once in a header. Hence
"Revenue was $1.2 billion" *is* covered by "revenue of 1,200 (in millions)" (1,200 x 10^6 = 1.2 x 10^9 at
the precision of "1.2 billion"), and "428.9M" by "approximately 429M" (scored 1, where the paper's LLM judge
gives ~0.95 to such near matches). A strong figure that matches makes the segment likely about the same
thing, hence the lower cosine ramp; years and dates are weak evidence, so they must match but do not lower
the ramp. Cosine bounds: MiniLM cosines of paraphrases lie around 0.7-0.95, of unrelated sentences of one
topic around 0.3-0.6. ``rationale`` records the numbers matched / missing and the cosine; ``evidence_ref``
the segment's heading path in R'.

*Limits* (an embedding is not a reader): two statements in one frame that share a figure but differ in
their subject ("Revenue was $1.2 billion" / "Operating expenses were $1.2 billion") have a high cosine, so
the second covers the first; a stale sentence that differs from the gold one only by a word ("second"
vs "third quarter") is covered; a gold row of four figures of which R' shows two scores 0.5. The LLM judge
is the reference; this one is cheap, deterministic and fails in documented ways.

**LLMCoverageJudge** (an OpenAI-compatible model through ``tasks.llm.client.LLMClient``;
``name = "openai:<model>"``)

* role ``score_units`` (prompt ``prompts/score_units.md``): the gold report is split section by section -
  consecutive top-level sections packed into one request while they fit ``_unit_chunk_budget`` tokens (the
  input budget, and at most half of ``max_output_tokens`` since the reply repeats source sentences); a
  section too large for one request is cut at its subsections, then its blocks; a block too large alone at
  table rows (header repeated), sentences or words. Each request is told which part of the report it holds
  and, for a continuation, which section it continues. Nothing is dropped. The reply
  ``{"units": [{"type", "content", "source_sentence", "section"}]}`` is validated (type one of
  ``UNIT_TYPES``, case and spaces normalised); units are numbered in report order; a unit without a section
  gets the heading path of the block holding its source sentence.
* role ``score_coverage`` (prompt ``prompts/score_coverage.md``): units are graded in batches of
  ``BATCH_UNITS`` = 20 against R'; the reply ``{"judgments": [{"unit_id", "score", "evidence",
  "rationale"}]}`` must name exactly the batch's unit ids (``check``: otherwise a corrective retry, then
  ``LLMOutputError``). When R' does not fit the input budget next to the batch, the request holds R's
  sections ranked by lexical overlap with the batch's units (added while they fit, shown in report order),
  the prompt says that it is an excerpt and names the omitted sections, and so does every rationale of
  that batch: R' is never cut silently.

Everything here is deterministic for a given input (the LLM judge up to the model's replies, which the
client caches).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel, Field, field_validator

from schemas.config import LLMSettings
from schemas.scoring import UNIT_TYPES, InfoUnit, ItemScore, MetricResult
from tasks.errors import FrameInputError
from tasks.ground.tokens import count_tokens
from tasks.llm.prompts import load_prompt, render
from tasks.score.judges import MAX_ITEMS, CoverageJudge, EmbedFn, sample_items
from tasks.score.numbers import Num, NumberPool, numbers_in
from tasks.score.tree import FENCE_RE as _FENCE
from tasks.score.tree import HEADING_RE as _HEADING
from tasks.score.tree import HRULE_RE as _HRULE
from tasks.score.tree import LINK_RE as _LINK
from tasks.score.tree import LIST_ITEM_RE as _LIST_ITEM
from tasks.score.tree import TABLE_SEP_RE as _TABLE_SEP
from tasks.synthesize.retrieve import split_sentences, terms

__all__ = [
    "BATCH_UNITS",
    "LLMCoverageJudge",
    "OfflineCoverageJudge",
    "Piece",
    "coverage",
    "markdown_pieces",
]

MIN_WORDS = 4  # prose units shorter than this are fragments
PROSE_RAMP = (0.55, 0.85)  # cosine -> [0, 1] for units without a strong number
NUMBER_RAMP = (0.35, 0.65)  # ... for units with a strong number (the number must match as well)
BATCH_UNITS = 20  # units per score_coverage request
RESERVE_TOKENS = 2000  # room kept free in the context for message framing and token-count drift

# ======================================================================== Markdown -> pieces

_IMAGE = re.compile(r"^\s*!\[([^\]]*)\]\([^)]*\)\s*$")
_MARKUP = re.compile(r"\*\*|__|`+|<[^>\n]+>")
_WORDS = re.compile(r"[A-Za-z][A-Za-z'’-]*")


def _clean(text: str) -> str:
    text = _LINK.sub(r"\1", text)
    text = _MARKUP.sub("", text)
    return " ".join(text.split())


@dataclass
class _Block:
    kind: str  # title | heading | table | list | text | figure | code
    lines: list[str]
    path: tuple[str, ...]  # heading titles above it (the H1 title left out)
    level: int = 0  # headings: 1..6

    @property
    def raw(self) -> str:
        return "\n".join(self.lines)


def _is_table_start(lines: list[str], k: int) -> bool:
    return (
        "|" in lines[k]
        and k + 1 < len(lines)
        and "-" in lines[k + 1]
        and bool(_TABLE_SEP.match(lines[k + 1]))
        and "|" in lines[k] + lines[k + 1]
    )


def _md_blocks(markdown: str) -> list[_Block]:
    """Blocks of a Markdown report in order, each with its heading path (deterministic, fence-aware).

    A first H1 before any content is the report's title (kind ``title``) and stays out of heading paths."""
    lines = markdown.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out: list[_Block] = []
    stack: list[tuple[int, str, bool]] = []  # (level, title, is the report title)

    def path() -> tuple[str, ...]:
        return tuple(t for _, t, is_title in stack if not is_title)

    k, n = 0, len(lines)
    while k < n:
        line = lines[k]
        if not line.strip() or _HRULE.match(line):
            k += 1
            continue
        fence = _FENCE.match(line)
        if fence:
            mark, j = fence.group(1), k + 1
            while j < n and not lines[j].strip().startswith(mark):
                j += 1
            out.append(_Block("code", lines[k : min(j + 1, n)], path()))
            k = j + 1
            continue
        head = _HEADING.match(line)
        if head:
            level, title = len(head.group(1)), _clean(head.group(2))
            is_title = level == 1 and not out
            stack = [e for e in stack if e[0] < level]
            out.append(_Block("title" if is_title else "heading", [line], path(), level))
            stack.append((level, title, is_title))
            k += 1
            continue
        if _is_table_start(lines, k):
            j = k + 2
            while j < n and lines[j].strip() and "|" in lines[j] and not _HEADING.match(lines[j]):
                j += 1
            out.append(_Block("table", lines[k:j], path()))
            k = j
            continue
        if _IMAGE.match(line):
            out.append(_Block("figure", [line], path()))
            k += 1
            continue
        if _LIST_ITEM.match(line):
            j = k
            while j < n:
                cur = lines[j]
                if _LIST_ITEM.match(cur) or (cur.strip() and cur[:1] in (" ", "\t") and j > k):
                    j += 1
                    continue
                if not cur.strip():
                    nxt = j + 1
                    while nxt < n and not lines[nxt].strip():
                        nxt += 1
                    if nxt < n and _LIST_ITEM.match(lines[nxt]):
                        j = nxt
                        continue
                break
            out.append(_Block("list", lines[k:j], path()))
            k = j
            continue
        j = k + 1
        while j < n:
            cur = lines[j]
            if (
                not cur.strip()
                or _HEADING.match(cur)
                or _FENCE.match(cur)
                or _IMAGE.match(cur)
                or _LIST_ITEM.match(cur)
                or _is_table_start(lines, j)
            ):
                break
            j += 1
        out.append(_Block("text", lines[k:j], path()))
        k = j
    return out


def _cells(line: str) -> list[str]:
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|") and not s.endswith("\\|"):
        s = s[:-1]
    return [_clean(c) for c in re.split(r"(?<!\\)\|", s)]


_SCALE_NOTE = re.compile(
    r"^\(?\s*(?:in|dollars in|amounts in)\s+(?:thousands|millions|billions)\b[^)]*\)?$", re.I
)
_YEAR_CELL = re.compile(r"^(?:19|20)\d\d$")


def _header_like(cells: list[str]) -> bool:
    """A row continuing the header: empty first cell, other cells words or years (not figures)."""
    if cells[0] or not any(cells[1:]):
        return False
    return all(not c or re.search(r"[A-Za-z]", c) or _YEAR_CELL.match(c) for c in cells[1:])


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
_DATE = re.compile(
    rf"\b(?:(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,\s*\d{{4}})?|\d{{1,2}}\s+(?:{_MONTHS})\b)"
)
_MATH = re.compile(r"\$[^$\n]*[\\^_{}][^$\n]*\$")
_XREF = re.compile(
    r"\b(?:Sections?|Sec\.|Figures?|Figs?\.|Tables?|Tab\.|Appendix|Appendices|Eqs?\.|Equations?|Chapters?|"
    r"Items?|Parts?|Notes?|Rules?|Topic|No\.|Nos\.|Steps?|Stages?|Phases?|Form)\s*\(?[A-Z]?\d+[A-Za-z]?"
    r"(?:[.\-–]\d+[A-Za-z]?)*(?:\s*(?:,|and|or|&|-|–|to)\s*[A-Z]?\d+(?:[.\-]\d+)*)*"
)


def _fix_dates(text: str) -> str:
    """'June 28,2025' -> 'June 28, 2025' (otherwise read as the figure 28,202)."""
    return _GLUED_DATE.sub(r"\1, \2", text)


# labels that are not information: footnote markers glued to a word or opening a note ("income(1)",
# "(2) Includes ..."), fair-value hierarchy levels ("Level 2")
_IGNORED = re.compile(r"(?<=[A-Za-z)\]])\(\d{1,2}\)|^\s*\(\d{1,2}\)|\bLevel\s+[1-3]\b")


def _numbers(text: str) -> tuple[Num, ...]:
    """The numbers of `text` (dates fixed up), footnote markers and hierarchy levels left out."""
    text = _fix_dates(text)
    skip = [m.span() for m in _IGNORED.finditer(text)]
    return tuple(n for n in numbers_in(text) if not any(a <= n.start and n.end <= b for a, b in skip))


def _weak_spans(text: str) -> list[tuple[int, int]]:
    text = _fix_dates(text)
    return [m.span() for rx in (_DATE, _MATH, _XREF) for m in rx.finditer(text)]


def _strong_numbers(text: str) -> list[Num]:
    """Numbers of `text` that are figures: not years, not parts of dates, not inside LaTeX math."""
    spans = _weak_spans(text)
    return [
        n for n in _numbers(text) if not n.yearlike and not any(a <= n.start and n.end <= b for a, b in spans)
    ]


def _table_pieces(block: _Block) -> list[Piece]:
    rows = [_cells(ln) for ln in block.lines]
    raw_rows = [block.lines[0]] + block.lines[2:]
    rows = [rows[0]] + rows[2:]
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
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
    headers = [_fix_dates(" ".join(x for x in (fr[c] for fr in filled) if x)) for c in range(width)]
    out: list[Piece] = []
    context = ""
    for raw, cells in zip(raw_rows[k:], rows[k:], strict=True):
        label, values = cells[0], cells[1:]
        if width == 1:
            if label:
                out.append(Piece("row", label, raw.strip(), block.path, _numbers(label), _numbers(label)))
            continue
        if not any(v and not _SCALE_NOTE.match(v) for v in values):
            if label:
                context = label
            continue
        parts = [f"{headers[c + 1]}: {v}" if headers[c + 1] else v for c, v in enumerate(values) if v]
        head = f"{context.rstrip(':').strip()}: {label}" if context and label else (label or context)
        text = f"{head} | " + "; ".join(parts) if head else "; ".join(parts)
        own = tuple(n for x in (label, *values) if x for n in _numbers(x))
        header_text = " ".join(headers)
        out.append(Piece("row", text, raw.strip(), block.path, own, _numbers(f"{text} {header_text}")))
    return out


_CURRENCY = re.compile(r"\$(?=\s?\(?\d)")


def _sentences(text: str) -> list[str]:
    """``split_sentences`` with currency dollars hidden (it reads "$" as inline math and would not split
    "Revenue was $1.2 billion. Costs rose." at all)."""
    masked = _CURRENCY.sub("\x00", _clean(text))
    return [s.replace("\x00", "$") for s in split_sentences(masked) if s.strip()]


def _list_items(lines: list[str]) -> list[str]:
    items: list[str] = []
    for ln in lines:
        if _LIST_ITEM.match(ln):
            items.append(_LIST_ITEM.sub("", ln, count=1).strip())
        elif ln.strip() and items:
            items[-1] += " " + ln.strip()
    return items


def _prose_piece(kind: str, sentence: str, path: tuple[str, ...]) -> Piece:
    nums = _numbers(sentence)
    return Piece(kind, sentence, sentence, path, nums, nums)


def markdown_pieces(markdown: str) -> list[Piece]:
    """Every piece of a Markdown report, in order (module docstring, "Pieces")."""
    out: list[Piece] = []
    for b in _md_blocks(markdown):
        if b.kind in ("title", "heading", "code"):
            continue
        if b.kind == "table":
            out.extend(_table_pieces(b))
        elif b.kind == "list":
            for item in _list_items(b.lines):
                out.extend(_prose_piece("item", s, b.path) for s in _sentences(item))
        elif b.kind == "figure":
            m = _IMAGE.match(b.lines[0])
            alt = _clean(m.group(1)) if m else ""
            if alt:
                out.append(_prose_piece("caption", alt, b.path))
        else:
            text = " ".join(ln.strip().lstrip(">").strip() for ln in b.lines)
            out.extend(_prose_piece("sentence", s, b.path) for s in _sentences(text))
    return out


# ======================================================================== offline judge

_PLACEHOLDER = re.compile(
    r"^(?:n/?a|tbd|tba|none|nil|not applicable|not available|to be (?:determined|added|confirmed)|"
    r"\.{2,}|…|[-–—]+|\[[^\]]{0,40}\]|placeholder|lorem ipsum.*)\.?$",
    re.I,
)
_NO_CONTENT = re.compile(
    r"\b(?:documents?|sources?|filings?) (?:of|for) (?:the|this) period (?:do(?:es)? not|did not) "
    r"(?:cover|mention|discuss|report)\b",
    re.I,
)
_BOILERPLATE = re.compile(
    r"^(?:\([^\d]*\)|table of contents|\(?unaudited\)?|see accompanying notes.*)\.?$", re.I
)
_FINDING = re.compile(
    r"\b(?:we find|we found|finds?|found that|shows?|showed|shown|suggests?|suggested|indicates?|indicated|"
    r"demonstrates?|demonstrated|reveals?|revealed|conclude[sd]?|confirms?|confirmed|observed?|results?)\b",
    re.I,
)
_METHOD = re.compile(
    r"\b(?:we (?:use|used|present|propose|develop|developed|introduce|apply|applied|employ|adopt|train)|"
    r"algorithms?|framework|pipeline|methods?|methodology)\b",
    re.I,
)
_EVENT = re.compile(
    r"\b(?:announced|acquired|acquisition of|launched|completed|issued|repurchased|declared|entered into|"
    r"released|signed|filed)\b",
    re.I,
)


def _figures(content: str, source: str) -> tuple[list[Num], bool]:
    """A unit's numbers and whether one of them is strong; a table row (its source is a pipe-table line):
    the numbers of its label and cells, not of the column headers in its content."""
    if source.strip().startswith("|"):
        cells = [c for c in _cells(source) if c]
        return [n for c in cells for n in _numbers(c)], any(_strong_numbers(c) for c in cells)
    return list(_numbers(content)), bool(_strong_numbers(content))


def _unit_type(p: Piece) -> str:
    """The rule of the module docstring ("Units")."""
    if _figures(p.text, p.source)[1]:
        return "statistic"
    if p.kind == "row":
        return "entity"
    if _FINDING.search(p.text):
        return "finding"
    if _METHOD.search(p.text):
        return "method"
    if any(n.yearlike for n in p.numbers) or _DATE.search(p.text) or _EVENT.search(p.text):
        return "event"
    if len(_WORDS.findall(p.text)) <= 6:
        return "entity"
    return "factual_claim"


def _is_unit(p: Piece) -> bool:
    text = p.text.strip()
    if not text or _PLACEHOLDER.match(text) or _BOILERPLATE.match(text) or _NO_CONTENT.search(text):
        return False
    if p.kind == "row":
        return True
    return len(_WORDS.findall(text)) >= MIN_WORDS


def _key(text: str) -> str:
    return " ".join(text.lower().split())


def _ramp(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    return np.clip((x - lo) / (hi - lo), 0.0, 1.0)


class OfflineCoverageJudge:
    """Number-aware embedding judge (module docstring). `embed` returns L2-normalised rows."""

    def __init__(self, embed: EmbedFn, embedder_name: str) -> None:
        self.embed = embed
        self.embedder_name = embedder_name
        self.name = f"offline:number-aware+{embedder_name}"
        self._pieces: dict[int, Piece] = {}  # unit_id -> piece, of the last extract_units call

    def __repr__(self) -> str:
        return f"OfflineCoverageJudge({self.embedder_name!r})"

    def extract_units(self, gold_markdown: str) -> list[InfoUnit]:
        units: list[InfoUnit] = []
        seen: set[str] = set()
        for p in markdown_pieces(gold_markdown):
            if not _is_unit(p):
                continue
            key = _key(p.text)
            if key in seen:
                continue
            seen.add(key)
            units.append(
                InfoUnit(
                    unit_id=len(units),
                    type=_unit_type(p),
                    content=p.text,
                    source_sentence=p.source,
                    section=p.section,
                )
            )
        return units

    def grade(self, units: Sequence[InfoUnit], generated_markdown: str) -> list[ItemScore]:
        units = list(units)
        if not units:
            return []
        segs = markdown_pieces(generated_markdown)
        if not segs:
            return [
                ItemScore(
                    index=u.unit_id,
                    kind=u.type,
                    text=u.content,
                    source=u.source_sentence,
                    score=0.0,
                    rationale="the generated report has no content",
                )
                for u in units
            ]
        pool_nums = [n for s in segs for n in s.context_numbers]
        owner = np.array([i for i, s in enumerate(segs) for _ in s.context_numbers], dtype=np.int64)
        pool = NumberPool(pool_nums)
        first_of: dict[str, int] = {}
        for i, seg in enumerate(segs):
            first_of.setdefault(_key(seg.text), i)
        plans = []  # per unit: numbers, strong, hits (numbers x segments), segment with the identical text
        for u in units:
            nums, strong = _figures(u.content, u.source_sentence)
            hits = np.zeros((len(nums), len(segs)), dtype=bool)
            for k, n in enumerate(nums):
                mask = pool.matches(n)
                if mask.any():
                    hits[k, owner[mask]] = True
            same = first_of.get(_key(u.content))
            if same is not None and not hits[:, same].all():
                same = None
            plans.append((nums, strong, hits, same))
        # identical text with every number present scores 1 (its cosine is 1): no embedding needed
        need = [ui for ui, plan in enumerate(plans) if plan[3] is None]
        cos = np.zeros((len(units), len(segs)), dtype=np.float64)
        if need:
            vecs = np.asarray(
                self.embed([units[ui].content for ui in need] + [seg.text for seg in segs]), dtype=np.float32
            )
            cos[need] = np.clip(vecs[: len(need)] @ vecs[len(need) :].T, -1.0, 1.0).astype(np.float64)
        out: list[ItemScore] = []
        for ui, u in enumerate(units):
            nums, strong, hits, same = plans[ui]
            ramp = "number" if strong else "prose"
            if same is not None:
                best, value, cosine = same, 1.0, "identical text in R'"
            else:
                c = cos[ui]
                if nums:
                    lo, hi = NUMBER_RAMP if strong else PROSE_RAMP
                    score = hits.mean(axis=0) * _ramp(c, lo, hi)
                else:
                    score = _ramp(c, *PROSE_RAMP)
                # best segment: highest score, then highest cosine, then earliest
                best = int(np.lexsort((np.arange(len(segs)), -c, -score))[0])
                value = min(1.0, max(0.0, float(round(score[best], 6))))
                cosine = f"cosine {c[best]:.3f}"
            if nums:
                found = [n.text for k, n in enumerate(nums) if hits[k, best]]
                missing = [n.text for k, n in enumerate(nums) if not hits[k, best]]
                rationale = (
                    f"numbers matched {len(found)}/{len(nums)}"
                    + (f" ({', '.join(found[:8])})" if found else "")
                    + (f"; missing: {', '.join(missing[:8])}" if missing else "")
                    + (f"; {cosine}" if same is not None else f"; {cosine} ({ramp} ramp)")
                )
            else:
                rationale = cosine if same is not None else f"{cosine} (prose ramp, no number)"
            seg = segs[best]
            out.append(
                ItemScore(
                    index=u.unit_id,
                    kind=u.type,
                    text=u.content,
                    source=u.source_sentence,
                    score=value,
                    evidence=seg.source if seg.kind == "row" else seg.text,
                    evidence_ref=seg.section,
                    rationale=rationale,
                )
            )
        return out


# ======================================================================== LLM judge


class _UnitOut(BaseModel):
    type: str
    content: str = Field(min_length=1)
    source_sentence: str = ""
    section: str = ""

    @field_validator("type")
    @classmethod
    def _known_type(cls, v: str) -> str:
        t = re.sub(r"[\s-]+", "_", v.strip().lower())
        if t not in UNIT_TYPES:
            raise ValueError(f"type must be one of {', '.join(UNIT_TYPES)} (got {v!r})")
        return t

    @field_validator("content")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("content must not be blank")
        return v.strip()


class UnitsReply(BaseModel):
    """Reply of role score_units."""

    units: list[_UnitOut]


class _Judgment(BaseModel):
    unit_id: int
    score: float = Field(ge=0.0, le=1.0)
    evidence: str = ""
    rationale: str = ""


class CoverageReply(BaseModel):
    """Reply of role score_coverage."""

    judgments: list[_Judgment]


def _batch_check(ids: Sequence[int]) -> Callable[[CoverageReply], None]:
    want = list(ids)

    def check(reply: CoverageReply) -> None:
        got = [j.unit_id for j in reply.judgments]
        dupes = sorted({i for i in got if got.count(i) > 1})
        if dupes:
            raise ValueError(f"unit_id given more than once: {dupes}")
        extra = sorted(set(got) - set(want))
        missing = [i for i in want if i not in set(got)]
        if extra or missing:
            raise ValueError(
                "judgments must cover exactly the unit_ids "
                + ", ".join(map(str, want))
                + (f"; unknown unit_id: {extra}" if extra else "")
                + (f"; missing unit_id: {missing}" if missing else "")
            )

    return check


@dataclass
class _Atom:
    text: str  # raw Markdown
    path: tuple[str, ...]  # heading path (of the section it opens, for headings)
    top: int  # index of the top-level section it belongs to
    flat: int  # index of the (innermost) section it belongs to
    tokens: int


def _split_oversized(text: str, limit: int, kind: str) -> list[str]:
    """Cut one block into pieces of at most `limit` tokens without dropping anything."""
    if count_tokens(text) <= limit:
        return [text]
    lines = text.split("\n")
    if kind == "table" and len(lines) > 3:
        head, body = lines[:2], lines[2:]
        parts: list[str] = []
        cur: list[str] = []
        for ln in body:
            trial = "\n".join(head + cur + [ln])
            if cur and count_tokens(trial) > limit:
                parts.append("\n".join(head + cur))
                cur = []
            cur.append(ln)
        parts.append("\n".join(head + cur))
        return [q for p in parts for q in _split_oversized(p, limit, "text")] if len(parts) > 1 else parts
    units = split_sentences(" ".join(text.split()))
    if len(units) <= 1:
        units = text.split()
    parts, cur = [], []
    for u in units:
        if cur and count_tokens(" ".join([*cur, u])) > limit:
            parts.append(" ".join(cur))
            cur = []
        cur.append(u)
    if cur:
        parts.append(" ".join(cur))
    return parts


def _heading_title(block: _Block) -> str:
    m = _HEADING.match(block.lines[0])
    return _clean(m.group(2)) if m else ""


def _atoms(markdown: str, limit: int) -> list[_Atom]:
    """Blocks of `markdown` as atoms of at most `limit` tokens, with their top-level and innermost section
    indices (the title and any content before the first heading form section 0)."""
    blocks = _md_blocks(markdown)
    top_level = min((b.level for b in blocks if b.kind == "heading"), default=2)
    out: list[_Atom] = []
    top = flat = 0
    for b in blocks:
        if b.kind == "heading":
            if out:
                flat += 1
                if b.level <= top_level:
                    top += 1
            out.append(_Atom(b.raw, (*b.path, _heading_title(b)), top, flat, count_tokens(b.raw)))
            continue
        if b.kind == "title":
            out.append(_Atom(b.raw, (), top, flat, count_tokens(b.raw)))
            continue
        for part in _split_oversized(b.raw, limit, b.kind):
            out.append(_Atom(part, b.path, top, flat, count_tokens(part)))
    return out


def _size(atoms: Sequence[_Atom]) -> int:
    return sum(a.tokens + 1 for a in atoms)


def _pack(atoms: list[_Atom], limit: int, keys: Sequence[Callable[[_Atom], int]]) -> list[list[_Atom]]:
    """Consecutive groups of atoms (grouped by ``keys[0]``) packed into chunks of at most `limit` tokens; a
    group larger than the limit is packed the same way by the next key (subsections), and finally atom by
    atom (every atom is at most `limit` tokens). Order is kept and nothing is dropped."""
    groups: list[list[_Atom]] = []
    if keys:
        for a in atoms:
            if groups and keys[0](groups[-1][-1]) == keys[0](a):
                groups[-1].append(a)
            else:
                groups.append([a])
    else:
        groups = [[a] for a in atoms]
    chunks: list[list[_Atom]] = []
    cur: list[_Atom] = []
    for g in groups:
        if _size(g) > limit:
            if cur:
                chunks.append(cur)
                cur = []
            chunks.extend(_pack(g, limit, keys[1:]))
            continue
        if cur and _size(cur) + _size(g) > limit:
            chunks.append(cur)
            cur = []
        cur.extend(g)
    if cur:
        chunks.append(cur)
    return chunks


def _norm(text: str) -> str:
    return " ".join(_clean(text).lower().split())


class LLMCoverageJudge:
    """The paper's LLM extractor + judge (module docstring), over any OpenAI-compatible endpoint."""

    UNITS_ROLE = "score_units"
    COVERAGE_ROLE = "score_coverage"

    def __init__(self, client: Any, settings: LLMSettings, *, ctx: Any = None, batch_size: int = BATCH_UNITS):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1 (got {batch_size})")
        self.client = client
        self.settings = settings
        self.ctx = ctx
        self.batch_size = batch_size
        self.name = f"openai:{settings.model}"
        self.units_prompt = load_prompt(self.UNITS_ROLE)
        self.coverage_prompt = load_prompt(self.COVERAGE_ROLE)
        self.last_calls: list[dict[str, Any]] = []  # accounting of the last extract/grade (tests, logs)

    def __repr__(self) -> str:
        return f"LLMCoverageJudge(model={self.settings.model!r})"

    # -- budgets

    def _input_budget(self) -> int:
        s = self.settings
        reserve = min(RESERVE_TOKENS, s.context_tokens // 10)
        return s.context_tokens - s.max_output_tokens - reserve

    def _overhead(self, prompt: Any, **variables: str) -> int:
        return sum(count_tokens(m["content"]) for m in render(prompt, **variables))

    def _unit_chunk_budget(self) -> int:
        overhead = self._overhead(self.units_prompt, report_part="", part_note="", unit_types="")
        budget = min(self._input_budget() - overhead - 200, self.settings.max_output_tokens // 2)
        if budget < 64:
            raise FrameInputError(
                "llm.context_tokens",
                f"context_tokens {self.settings.context_tokens} / max_output_tokens "
                f"{self.settings.max_output_tokens} leave no room to send the gold report to "
                f"{self.UNITS_ROLE}",
            )
        return budget

    # -- units

    def _run(self, fn: Callable[[Any], Any], jobs: list[Any]) -> list[Any]:
        if len(jobs) <= 1 or self.settings.concurrency <= 1:
            return [fn(j) for j in jobs]
        with ThreadPoolExecutor(max_workers=min(self.settings.concurrency, len(jobs))) as pool:
            return list(pool.map(fn, jobs))

    def extract_units(self, gold_markdown: str) -> list[InfoUnit]:
        if not gold_markdown.strip():
            return []
        budget = self._unit_chunk_budget()
        atoms = _atoms(gold_markdown, budget)
        if not any(a.text.strip() for a in atoms):
            return []
        chunks = _pack(atoms, budget, (lambda a: a.top, lambda a: a.flat))
        total = len(chunks)

        def ask(job: tuple[int, list[_Atom]]) -> tuple[list[_UnitOut], list[_Atom]]:
            i, chunk = job
            first = chunk[0]
            where = " > ".join(first.path) or "(report start)"
            starts_at_heading = bool(_HEADING.match(first.text.split("\n", 1)[0]))
            note = f"This is part {i + 1} of {total} of the gold report."
            if not starts_at_heading and first.path:
                note += f" It continues the section {where}."
            messages = render(
                self.units_prompt,
                report_part="\n\n".join(a.text for a in chunk),
                part_note=note,
                unit_types=", ".join(UNIT_TYPES),
            )
            result = self.client.complete_json(self.UNITS_ROLE, messages, UnitsReply, self.ctx)
            return result.value.units, chunk

        replies = self._run(ask, list(enumerate(chunks)))
        units: list[InfoUnit] = []
        for got, chunk in replies:
            for u in got:
                units.append(
                    InfoUnit(
                        unit_id=len(units),
                        type=u.type,
                        content=u.content,
                        source_sentence=u.source_sentence.strip(),
                        section=u.section.strip() or self._section_of(chunk, u.source_sentence),
                    )
                )
        self.last_calls = [{"role": self.UNITS_ROLE, "parts": total, "units": len(units)}]
        return units

    @staticmethod
    def _section_of(chunk: list[_Atom], source: str) -> str:
        """Heading path of the atom of `chunk` holding `source` (else of its first atom under a heading)."""
        probe = _norm(source)[:120]
        if probe:
            for a in chunk:
                if probe in _norm(a.text.replace("|", " ")):
                    return " > ".join(a.path)
        return next((" > ".join(a.path) for a in chunk if a.path), "")

    # -- grading

    def _report_view(self, atoms: list[_Atom], batch: list[InfoUnit], room: int) -> tuple[str, list[str]]:
        """R' whole when it fits `room` tokens, else its sections most related to the batch (report order)
        and the names of the omitted ones."""
        full = "\n\n".join(a.text for a in atoms)
        if count_tokens(full) <= room:
            return full, []
        want = set(terms(" ".join(u.content for u in batch)))
        parts = _pack(atoms, max(1, room // 2), (lambda a: a.flat,))
        scored = []
        for pi, part in enumerate(parts):
            have = set(terms(" ".join(a.text for a in part)))
            size = _size(part) + 8
            scored.append((-len(want & have), pi, size))
        chosen: set[int] = set()
        used = 0
        for _, pi, size in sorted(scored):
            if used + size <= room:
                chosen.add(pi)
                used += size

        def part_names(part: list[_Atom]) -> list[str]:
            return list(dict.fromkeys(" > ".join(a.path) or "(report start)" for a in part))

        shown = {name for pi in chosen for name in part_names(parts[pi])}
        names: list[str] = []
        for pi, part in enumerate(parts):
            if pi not in chosen:
                for name in part_names(part):
                    label = f"{name} (in part)" if name in shown else name
                    if label not in names:
                        names.append(label)
        pieces = []
        for pi, part in enumerate(parts):
            if pi in chosen:
                pieces.append("\n\n".join(a.text for a in part))
            elif not pieces or pieces[-1] != "[... omitted ...]":
                pieces.append("[... omitted ...]")
        return "\n\n".join(pieces), names

    def grade(self, units: Sequence[InfoUnit], generated_markdown: str) -> list[ItemScore]:
        units = list(units)
        if not units:
            return []
        batches = [units[i : i + self.batch_size] for i in range(0, len(units), self.batch_size)]
        base = self._overhead(
            self.coverage_prompt, generated_report="", report_note="", units="", unit_ids=""
        )
        blocks = _md_blocks(generated_markdown)
        budget = self._input_budget()
        atom_limit = max(64, (budget - base) // 4)
        atoms = _atoms(generated_markdown, atom_limit) if generated_markdown.strip() else []

        def ask(batch: list[InfoUnit]) -> list[ItemScore]:
            listing = "\n".join(
                json.dumps({"unit_id": u.unit_id, "type": u.type, "content": u.content}, ensure_ascii=False)
                for u in batch
            )
            ids = ", ".join(str(u.unit_id) for u in batch)
            room = budget - base - count_tokens(listing) - count_tokens(ids) - 200
            if room < 64:
                raise FrameInputError(
                    "llm.context_tokens",
                    f"context_tokens {self.settings.context_tokens} leave no room for the generated report "
                    f"next to a batch of {len(batch)} units in {self.COVERAGE_ROLE}",
                )
            if not atoms:
                view, omitted = "(the generated report is empty)", []
            else:
                view, omitted = self._report_view(atoms, batch, room)
            if omitted:
                note = (
                    "The generated report is too long for this request: below is an EXCERPT holding its "
                    "sections most related to these units. Omitted sections: " + "; ".join(omitted) + "."
                )
            else:
                note = "Below is the complete generated report."
            messages = render(
                self.coverage_prompt, generated_report=view, report_note=note, units=listing, unit_ids=ids
            )
            result = self.client.complete_json(
                self.COVERAGE_ROLE,
                messages,
                CoverageReply,
                self.ctx,
                check=_batch_check([u.unit_id for u in batch]),
            )
            by_id = {j.unit_id: j for j in result.value.judgments}
            suffix = (
                f" [R' excerpted to fit the context; omitted sections: {'; '.join(omitted)}]"
                if omitted
                else ""
            )
            out = []
            for u in batch:
                j = by_id[u.unit_id]
                out.append(
                    ItemScore(
                        index=u.unit_id,
                        kind=u.type,
                        text=u.content,
                        source=u.source_sentence,
                        score=float(j.score),
                        evidence=j.evidence.strip(),
                        evidence_ref=self._locate(blocks, j.evidence),
                        rationale=(j.rationale.strip() + suffix).strip(),
                    )
                )
            return out

        results = self._run(ask, batches)
        self.last_calls = [{"role": self.COVERAGE_ROLE, "batches": len(batches)}]
        return [s for batch in results for s in batch]

    @staticmethod
    def _locate(blocks: list[_Block], evidence: str) -> str:
        """Heading path of the block of R' that holds the quoted evidence ('' when not found)."""
        quote = _norm(evidence)
        if not quote:
            return ""
        probe = quote[:120]
        for b in blocks:
            if b.kind not in ("title", "heading") and probe in _norm(b.raw.replace("|", " ")):
                return " > ".join(b.path)
        for b in blocks:  # a table row quoted with its cell bars
            if b.kind == "table" and probe in _norm(b.raw):
                return " > ".join(b.path)
        return ""


# ======================================================================== driver


def coverage(
    gold_markdown: str,
    generated_markdown: str,
    judge: CoverageJudge,
    *,
    max_items: int = MAX_ITEMS,
    seed: int = 0,
) -> MetricResult:
    """IUR of `generated_markdown` against `gold_markdown` (module docstring)."""
    units = judge.extract_units(gold_markdown)
    if not units:
        return MetricResult(
            metric="coverage",
            value=None,
            judge=judge.name,
            population=0,
            items=[],
            detail={"sampled": 0, "seed": seed, "reason": "the gold report has no information unit"},
        )
    sample = sample_items(units, max_items, seed)
    items = judge.grade(sample, generated_markdown)
    if len(items) != len(sample) or [i.index for i in items] != [u.unit_id for u in sample]:
        raise ValueError(
            f"{judge.name}: grade returned {len(items)} scores for {len(sample)} units (or out of order)"
        )
    value = float(np.mean([i.score for i in items]))
    by_type: dict[str, list[float]] = {}
    for i in items:
        by_type.setdefault(i.kind, []).append(i.score)
    return MetricResult(
        metric="coverage",
        value=value if math.isfinite(value) else None,
        judge=judge.name,
        population=len(units),
        items=items,
        detail={
            "sampled": len(sample),
            "seed": seed,
            "max_items": max_items,
            "by_type": {k: {"n": len(v), "mean": float(np.mean(v))} for k, v in sorted(by_type.items())},
        },
    )
