"""Frame's hierarchical report rubric: paper 003's layers (G0 deliverability gates, G1 report identity, G2
completeness) and equation 1, filled with frame's own items for Markdown reports, decided by offline checks
(or, for the judged items, an LLM) and aggregated into the total S: frame's rubric score, not 003's. Items
are data (``schemas/rubric.toml``); the specification of the layers, the score, every check and both
judges, and the map of 003's 35 items to frame's, is docs/metrics/rubric.md.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Protocol

from pydantic import BaseModel, Field, field_validator
from rapidfuzz import fuzz

from schemas.rubric import Decision, RubricDecision, RubricItem, category_family, load_rubric
from schemas.scoring import ItemScore, MetricResult
from tasks.errors import FrameInputError
from tasks.markdown.document import Block, is_separator, parse, split_row, title_block
from tasks.markdown.numbers import Num, NumberPool, derivation, numbers_in
from tasks.markdown.pieces import clean, stated_scale, table_cell_figures
from tasks.markdown.text import split_sentences
from tasks.score.llm_judge import LLMJudge
from tasks.score.metric import Inputs, JudgeEnv, MetricFamily, MetricSpec
from tasks.tokens import count_tokens, count_tokens_many

__all__ = [
    "CHECKS",
    "Finding",
    "LLMRubricJudge",
    "OfflineRubricJudge",
    "RubricContext",
    "RubricJudge",
    "RubricReply",
    "rubric_items",
    "rubric_total",
    "score_rubric",
]

OFFLINE_NAME = "offline:rubric-checks"
MATCH_CUTOFF = 85  # rapidfuzz token_sort_ratio for "the same heading"
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


def rubric_items(path: Any = None) -> list[RubricItem]:
    """The rubric (default ``schemas/rubric.toml``); every item must name a check of :data:`CHECKS`."""
    return load_rubric(path, checks=CHECKS)


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


# ======================================================================== G0 checks


@_check("nonempty")
def check_nonempty(doc: _Doc, ctx: RubricContext) -> Finding:
    count = 0
    first = None
    for b in doc.blocks:
        if b.kind in ("paragraph", "list"):
            count += len(_words(_clean(_flat(b))))
        elif b.kind == "table":
            count += sum(
                len(_words(_clean(c))) for ln in b.lines for c in split_row(ln) if not is_separator(ln, 1)
            )
        else:
            continue
        first = first or b
    evidence = _snip(first.lines[0]) if first else ""
    ref = f"line {first.start}" if first else "whole report"
    if count >= 50:
        return Finding("pass", evidence, ref, f"{count} words of prose/list/table text (>= 50)")
    return Finding("fail", evidence, ref, f"only {count} words of prose/list/table text (< 50)")


@_check("parseable")
def check_parseable(doc: _Doc, ctx: RubricContext) -> Finding:
    for b in doc.blocks:
        if b.kind == "code" and not b.closed:
            return Finding(
                "fail", _snip(b.lines[0]), f"line {b.start}", "code fence opened here is never closed"
            )
    for t in doc.tables:
        width = len(t.header)
        for ln, cells in t.rows:
            if len(cells) != width:
                return Finding(
                    "fail",
                    _snip(doc.lines[ln - 1]),
                    f"line {ln} (table {t.index})",
                    f"table row has {len(cells)} cells, its header row (line {t.start}) has {width}",
                )
    if not doc.headings:
        first = next((b for b in doc.blocks), None)
        return Finding(
            "fail",
            _snip(first.lines[0]) if first else "",
            f"line {first.start}" if first else "",
            "no heading",
        )
    return Finding(
        "pass",
        _snip(doc.headings[0].lines[0]),
        f"line {doc.headings[0].start}",
        f"{len(doc.headings)} headings, {len(doc.tables)} well-formed tables, code fences closed",
    )


_PLACEHOLDERS: list[tuple[str, re.Pattern[str]]] = [
    ("marker", re.compile(r"\b(?:TODO|TBD|FIXME|XXX+)\b")),
    (
        "bracket",
        re.compile(
            r"\[\s*(?:placeholder|insert\b[^\]]*|to be (?:added|completed|determined|confirmed)|"
            r"(?:company|date|name|year|quarter|amount|value|number|figure|ticker|period|author|"
            r"title|topic)(?: name| here)?|\.\.\.|…)\s*\]",
            re.I,
        ),
    ),
    ("template", re.compile(r"\{\{[^{}\n]{0,80}\}\}|<\s*insert\b[^>\n]*>|<!--\s*FILL\b", re.I)),
    ("figure", re.compile(r"[$€£]\s?X+(?:[.,]X+)?\b|\bX+(?:\.X+)?\s?(?:%|percent\b|billion\b|million\b)")),
    ("lorem", re.compile(r"\blorem ipsum\b", re.I)),
]


def _prose_lines(doc: _Doc) -> Iterable[tuple[int, str]]:
    """Every line outside code blocks, with inline code spans blanked (template text there is quoted)."""
    for b in doc.blocks:
        if b.kind == "code":
            continue
        for i, s in enumerate(b.lines):
            yield b.start + i, re.sub(r"`[^`\n]*`", "``", s)


@_check("no_placeholder")
def check_no_placeholder(doc: _Doc, ctx: RubricContext) -> Finding:
    for ln, s in _prose_lines(doc):
        for kind, rx in _PLACEHOLDERS:
            m = rx.search(s)
            if m:
                return Finding(
                    "fail", _snip(s), f"line {ln}", f"leftover placeholder {m.group(0)!r} ({kind})"
                )
    return Finding("pass", "", "whole report", "no placeholder or template residue outside code")


_DANGLING = re.compile(
    r"(?:\b(?:the|a|an|of|to|and|or|in|for|with|by|on|at|from|as|that|which|was|were|is|are|its|their)|"
    r"[,;:(\-–—])$",
    re.I,
)
_END_OK = re.compile(r"[.!?)\]\"'”’…$]$")


@_check("not_truncated")
def check_not_truncated(doc: _Doc, ctx: RubricContext) -> Finding:
    content = [b for b in doc.blocks if b.kind != "rule"]
    if not content:
        return Finding("na", "", "", "empty report")
    last = content[-1]
    if last.kind == "heading":
        return Finding(
            "pass",
            _snip(last.lines[0]),
            _where_heading(last),
            "ends on a heading (an empty last section is graded by g2_no_empty_sections)",
        )
    if last.kind == "code":
        if not last.closed:
            return Finding(
                "fail", _snip(last.lines[0]), f"line {last.start}", "ends inside an unclosed code block"
            )
        return Finding("pass", _snip(last.lines[-1]), f"line {last.end}", "ends with a closed code block")
    if last.kind == "figure":
        return Finding("pass", _snip(last.lines[0]), f"line {last.start}", "ends with a figure")
    if last.kind == "table":
        t = doc.tables[-1]
        ln, cells = t.rows[-1] if t.rows else (t.start, t.header)
        if len(cells) != len(t.header):
            return Finding(
                "fail", _snip(doc.lines[ln - 1]), f"line {ln}", "the last table row is cut (fewer/more cells)"
            )
        return Finding("pass", _snip(doc.lines[ln - 1]), f"line {ln}", "ends with a complete table row")
    if last.kind == "list":
        ln, item = last.items[-1]
        text = _clean(item).rstrip("*_ ")
        if _DANGLING.search(text):
            return Finding("fail", _snip(item), f"line {ln}", "the last list item stops mid-sentence")
        return Finding("pass", _snip(item), f"line {ln}", "the last list item is complete")
    line = last.lines[-1].strip()
    text = _clean(line).rstrip("*_ ")
    if _END_OK.search(text):
        return Finding("pass", _snip(line), f"line {last.end}", "the last paragraph ends a sentence")
    upper, lower = len(re.findall(r"[A-Z]", text)), len(re.findall(r"[a-z]", text))
    if upper >= 8 and lower * 10 <= upper and not _DANGLING.search(text):
        return Finding("pass", _snip(line), f"line {last.end}", "the last line is a capitalised title line")
    return Finding(
        "fail", _snip(line), f"line {last.end}", "the last paragraph stops without terminal punctuation"
    )


# ======================================================================== G1 checks

_CORP_WORDS = frozenset("inc corp corporation co company ltd plc llc holdings group the".split())
_STOP = frozenset("and of the in for on to a an with".split())
_SUMMARY = re.compile(
    r"\b(?:summary|overview|highlights?|introduction|abstract|key (?:findings|takeaways|points|figures)|"
    r"at a glance|executive)\b",
    re.I,
)
_PERIOD_TITLE = re.compile(
    rf"{_MONTH}\s+\d{{1,2}}|\b(?:19|20)\d\d\b|\bQ[1-4]\b|\bquarter\b|\bfiscal\b|\bFY\s?\d{{2,4}}\b|\bH[12]\b",
    re.I,
)


_TITLE_DATE = re.compile(rf"({_MONTH})\s+\d{{1,2}},?\s+((?:19|20)\d\d)\b")
_MONTH_NO = {m: i for i, m in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split(), 1)}


def _ticker(domain: str) -> str:
    m = re.match(r"^([A-Za-z.]{1,6})-10-[QK]$", domain)
    return m.group(1).upper() if m else ""


def _company(sample: str) -> list[str]:
    """Core words of the company name in S's title ("Apple Inc. 10-Q report ..." -> ["apple"])."""
    h1 = _parse(sample).h1 if sample else None
    if h1 is None:
        return []
    m = re.match(r"^(.*?)\s+(?:10-[QK]\b|annual\b|quarterly\b|report\b|form\b)", h1.title, re.I)
    name = m.group(1) if m else ""
    return [w for w in re.findall(r"[a-z0-9&]+", name.lower()) if w not in _CORP_WORDS and len(w) >= 2]


def _stem(w: str) -> str:
    w = w.lower()
    return w[:-1] if len(w) > 3 and w.endswith("s") else w


@_check("title_entity")
def check_title_entity(doc: _Doc, ctx: RubricContext) -> Finding:
    h1 = doc.h1
    if h1 is None:
        first = doc.blocks[0] if doc.blocks else None
        return Finding(
            "fail",
            _snip(first.lines[0]) if first else "",
            f"line {first.start}" if first else "",
            "no H1 title",
        )
    title = h1.title
    ref = _where_heading(h1)
    if ctx.family == "financial":
        ticker, company = _ticker(ctx.domain), _company(ctx.sample_markdown)
        low = title.lower()
        named = bool(ticker and re.search(rf"\b{re.escape(ticker)}\b", title)) or bool(
            company and all(re.search(rf"\b{re.escape(w)}\b", low) for w in company)
        )
        m = _PERIOD_TITLE.search(title)
        period = m.group(0) if m else ""
        stale = ""
        target = re.match(r"^((?:19|20)\d\d)-\d\d-\d\d$", ctx.target_period)
        if period and target:
            want = int(target.group(1))
            month = int(ctx.target_period[5:7])
            dates = [(int(y), _MONTH_NO[m[:3].lower()]) for m, y in _TITLE_DATE.findall(_fix_dates(title))]
            years = {int(y) for y in _YEAR.findall(_fix_dates(title))}
            if dates and (want, month) not in dates:  # a dated title must name the target month
                named_dates = ", ".join(f"{y}-{m:02d}" for y, m in dates)
                stale = f"names {named_dates}, not the target period {ctx.target_period[:7]}"
                period = ""
            elif years and not years & {want, want + 1}:  # +1: fiscal-year names ("Q2 FY2026")
                stale, period = f"names {sorted(years)}, not the target period's year {want}", ""
        who = " / ".join(x for x in (ticker, " ".join(company)) if x) or "(unknown)"
        if named and period:
            return Finding("pass", title, ref, f"names the company ({who}) and the period ({period})")
        if named or period:
            miss = (
                f"the right period ({stale})" if stale else "the period" if named else f"the company ({who})"
            )
            return Finding("partial", title, ref, f"title does not name {miss}")
        return Finding("fail", title, ref, f"title names neither the company ({who}) nor the period")
    topic = [w for w in re.split(r"[-_\s]+", ctx.domain.lower()) if w and w not in _STOP]
    if not topic:
        return Finding("na", title, ref, "no topic words in the domain name")
    have = {_stem(w) for w in re.findall(r"[a-z0-9]+", title.lower())}
    found = [w for w in topic if _stem(w) in have]
    acronym = "".join(w[0] for w in topic)
    windows = set(re.findall(r"\bW\d+\b", title))
    if ctx.target_period and windows and ctx.target_period not in windows:
        return Finding("partial", title, ref, f"names window {sorted(windows)}, not {ctx.target_period}")
    if len(found) == len(topic) or (len(topic) >= 2 and _stem(acronym) in have):
        return Finding("pass", title, ref, f"names the topic ({' '.join(topic)})")
    if len(found) * 2 >= len(topic):
        return Finding(
            "partial", title, ref, f"names {len(found)}/{len(topic)} topic words ({' '.join(topic)})"
        )
    return Finding("fail", title, ref, f"does not name the topic ({' '.join(topic)})")


_CHAT_OPEN = re.compile(
    r"^(?:sure|certainly|of course|absolutely|okay|ok|great question|happy to help)\b[\s,!.:]"
    r"|\bhere(?:'s|’s| is| are)\b[^.]{0,60}\b(?:report|summary|analysis|overview|draft|survey)\b"
    r"|\bI(?:'ve|’ve| have)? (?:prepared|written|compiled|drafted|created|put together)\b"
    r"|\bas (?:requested|you asked)\b|\bbelow is (?:the|a|your)\b",
    re.I,
)
_ASSISTANT = re.compile(
    r"\bas an AI\b|\bas a (?:large )?language model\b|\bI (?:cannot|can't|can’t|am unable to)\b", re.I
)
_CHAT_ANY = re.compile(
    r"\bI hope (?:this|that|it) helps\b|\blet me know\b|\bfeel free to\b|\bwould you like\b|"
    r"\bdo you want me\b|"
    r"\bhappy to help\b|\bif you (?:need|want|have any)\b",
    re.I,
)
_YOU = re.compile(r"\byou(?:r|rs)?\b", re.I)


@_check("report_register")
def check_report_register(doc: _Doc, ctx: RubricContext) -> Finding:
    prose = [b for b in doc.blocks if b.kind in ("paragraph", "list")]
    for ln, s in _prose_lines(doc):
        m = _ASSISTANT.search(s)
        if m:
            return Finding("fail", _snip(s), f"line {ln}", f"assistant voice: {m.group(0)!r}")
    opening: list[tuple[int, str]] = []
    words = 0
    for b in prose:
        for i, s in enumerate(b.lines):
            if words >= 80:
                break
            opening.append((b.start + i, s))
            words += len(s.split())
    first_lines = [(b.start, b.lines[0]) for b in doc.blocks[:1] if b.kind != "heading"]
    for ln, s in first_lines + opening[:3]:
        m = _CHAT_OPEN.search(_clean(s))
        if m:
            return Finding("fail", _snip(s), f"line {ln}", f"opens as a chat reply: {m.group(0).strip()!r}")
    for ln, s in _prose_lines(doc):
        m = _CHAT_ANY.search(s)
        if m:
            return Finding("partial", _snip(s), f"line {ln}", f"conversational remark: {m.group(0)!r}")
    for ln, s in opening:
        m = _YOU.search(_clean(s))
        if m:
            return Finding("partial", _snip(s), f"line {ln}", "the opening addresses the reader as 'you'")
    ev = opening[0] if opening else None
    return Finding(
        "pass",
        _snip(ev[1]) if ev else "",
        f"line {ev[0]}" if ev else "",
        "no chat framing, assistant voice or second-person address in the opening",
    )


@_check("summary")
def check_summary(doc: _Doc, ctx: RubricContext) -> Finding:
    h1 = doc.h1
    lead: list[Block] = []
    started = h1 is None
    for b in doc.blocks:
        if b is h1:
            started = True
            continue
        if b.kind == "heading":
            if started:
                break
            continue
        if started and b.kind in ("paragraph", "list"):
            lead.append(b)
    lead_words = sum(len(_words(_clean(_flat(b)))) for b in lead)
    if lead_words >= 20:
        return Finding(
            "pass",
            _snip(lead[0].lines[0]),
            f"line {lead[0].start}",
            f"lead paragraph of {lead_words} words before the first section",
        )
    top = min((b.level for b in doc.headings if b is not h1), default=2)
    sections = [b for b in doc.headings if b.level == top and b is not h1]
    later = None
    for pos, b in enumerate(sections):
        if not _SUMMARY.search(b.title):
            continue
        content = [c for c in _section_content(doc, b) if c.kind in ("paragraph", "list", "table", "figure")]
        if pos < 2 and content:
            return Finding(
                "pass", b.lines[0].strip(), _where_heading(b), f"section {pos + 1} is a summary section"
            )
        later = later or (b, pos, bool(content))
    if later:
        b, pos, has = later
        why = f"the summary section is section {pos + 1}" if pos >= 2 else "the summary section is empty"
        return Finding("partial", b.lines[0].strip(), _where_heading(b), why)
    first = sections[0] if sections else None
    return Finding(
        "fail",
        first.lines[0].strip() if first else "",
        _where_heading(first) if first else "",
        "no lead paragraph and no summary / overview / highlights section up front",
    )


_GLUED_DATE = re.compile(rf"({_MONTH}\s+\d{{1,2}}),((?:19|20)\d\d)\b")


def _fix_dates(text: str) -> str:
    """ "June 28,2025" (as the demo's tables print dates) -> "June 28, 2025"."""
    return _GLUED_DATE.sub(r"\1, \2", text)


_PERIOD_LABEL = re.compile(
    rf"^\s*(?:FY\s?)?(?:19|20)\d\d\s*$|{_MONTH}\s+\d{{1,2}}|{_MONTH}\s+(?:19|20)\d\d|"
    r"\b(?:fiscal|quarter|year|years|months|weeks|ended|ending|as of|FY|Q[1-4]|H[12]|YTD)\b",
    re.I,
)


def _period_labels(doc: _Doc) -> list[tuple[int, str, str]]:
    """(year, label text, where) for years naming periods in headings (below H1) and table header rows."""
    out: list[tuple[int, str, str]] = []
    h1 = doc.h1
    for b in doc.headings:
        if b is h1:
            continue
        if not _PERIOD_LABEL.search(b.title):
            continue
        for m in _YEAR.finditer(_fix_dates(b.title)):
            if re.search(rf"\b(?:ASU|No\.|Rule|Topic)\s*[^\s]*{m.group(0)}", b.title):
                continue
            out.append((int(m.group(0)), b.title, _where_heading(b)))
    for t in doc.tables:
        for r, (ln, cells) in enumerate(t.header_rows()):
            for c, cell in enumerate(cells[1:], 2):
                if not _PERIOD_LABEL.search(_clean(cell)):
                    continue  # "2007 Equity Incentive Plan" names no period
                for m in _YEAR.finditer(_fix_dates(_clean(cell))):
                    out.append(
                        (
                            int(m.group(0)),
                            _clean(cell),
                            f"table {t.index} header row {r + 1} col {c} (line {ln})",
                        )
                    )
    return out


@_check("period_consistency")
def check_period_consistency(doc: _Doc, ctx: RubricContext) -> Finding:
    if doc.h1 is None:
        return Finding("na", "", "", "no title")
    years = [int(y) for y in _YEAR.findall(_fix_dates(doc.h1.title))]
    if not years:
        return Finding("na", doc.h1.title, _where_heading(doc.h1), "no year in the title")
    y = max(years)
    labels = _period_labels(doc)
    if not labels:
        return Finding(
            "na", doc.h1.title, _where_heading(doc.h1), "no period label in headings or table headers"
        )
    future = [lab for lab in labels if lab[0] > y + 1]
    if future:
        yr, text, where = future[0]
        return Finding(
            "fail", text, where, f"period {yr} is after the title's year {y} (+1 for fiscal names)"
        )
    latest = max(labels, key=lambda lab: lab[0])
    if latest[0] < y:
        return Finding(
            "fail",
            latest[1],
            latest[2],
            f"the latest labelled period is {latest[0]}, before the title's year {y} (stale)",
        )
    old = [lab for lab in labels if lab[0] < y - 3]
    if old:
        yr, text, where = old[0]
        return Finding(
            "partial", text, where, f"period {yr} is more than 3 years before the title's year {y}"
        )
    return Finding(
        "pass",
        latest[1],
        latest[2],
        f"{len(labels)} period labels, all within {y - 3}..{y + 1} (title year {y})",
    )


# ======================================================================== G2 checks: form


def _norm_heading(title: str) -> str:
    t = title.lower()
    t = re.sub(r"^(?:item\s+\d+[a-z]?\.?|part\s+[ivx]+\.?|\d+(?:\.\d+)*\.?|[ivx]+\.)\s+", "", t)
    return " ".join(re.findall(r"[a-z0-9]+", t))


def _match_headings(sample: list[Block], report: list[Block]) -> list[tuple[int, int, float]]:
    """One-to-one fuzzy match (i in sample, j in report, score): best scores first, near positions on ties."""
    if not sample or not report:
        return []
    ns, nr = len(sample), len(report)
    sa = [_norm_heading(b.title) for b in sample]
    ra = [_norm_heading(b.title) for b in report]
    cands = []
    for i, a in enumerate(sa):
        for j, r in enumerate(ra):
            if not a or not r:
                continue
            s = fuzz.token_sort_ratio(a, r)
            if s >= MATCH_CUTOFF:
                cands.append((-s, abs(i / ns - j / nr), i, j))
    cands.sort()
    used_i: set[int] = set()
    used_j: set[int] = set()
    out = []
    for neg, _, i, j in cands:
        if i in used_i or j in used_j:
            continue
        used_i.add(i)
        used_j.add(j)
        out.append((i, j, -neg))
    return sorted(out)


def _sub_headings(doc: _Doc) -> list[Block]:
    return [b for b in doc.headings if b is not doc.h1]


@_check("section_order")
def check_section_order(doc: _Doc, ctx: RubricContext) -> Finding:
    s_heads = _sub_headings(_parse(ctx.sample_markdown)) if ctx.sample_markdown else []
    r_heads = _sub_headings(doc)
    pairs = _match_headings(s_heads, r_heads)
    if len(pairs) < 2:
        return Finding("na", "", "", f"{len(pairs)} heading(s) of the report match the sample's (< 2)")
    total = concordant = 0
    worst = None
    for a in range(len(pairs)):
        for b in range(a + 1, len(pairs)):
            total += 1
            if pairs[a][1] < pairs[b][1]:
                concordant += 1
            elif worst is None:
                worst = (pairs[a], pairs[b])
    agree = concordant / total
    why = f"{len(pairs)} matched headings, {concordant}/{total} pairs in the sample's order ({agree:.2f})"
    decision: Decision = "pass" if agree >= 0.9 else "partial" if agree >= 0.6 else "fail"
    if worst is None:
        first = r_heads[pairs[0][1]]
        return Finding(decision, first.lines[0].strip(), _where_heading(first), why)
    (i1, j1, _), (i2, j2, _) = worst
    early, late = r_heads[j2], r_heads[j1]
    evidence = early.lines[0].strip()
    why += (
        f"; e.g. '{early.title}' (line {early.start}) precedes '{late.title}' (line {late.start}), "
        "the sample has them the other way round"
    )
    return Finding(decision, evidence, _where_heading(early), why)


@_check("sections_present")
def check_sections_present(doc: _Doc, ctx: RubricContext) -> Finding:
    sdoc = _parse(ctx.sample_markdown) if ctx.sample_markdown else None
    if sdoc is None:
        return Finding("na", "", "", "no sample report")
    s_h = [b for b in sdoc.headings if b.level == 2]
    if not s_h:
        return Finding("na", "", "", "the sample report has no H2 section")
    r_heads = _sub_headings(doc)
    missing = []
    for b in s_h:
        key = _norm_heading(b.title)
        if not any(fuzz.token_sort_ratio(key, _norm_heading(r.title)) >= MATCH_CUTOFF for r in r_heads):
            missing.append(b)
    share = 1 - len(missing) / len(s_h)
    decision: Decision = "pass" if share >= 0.8 else "partial" if share >= 0.5 else "fail"
    why = f"{len(s_h) - len(missing)}/{len(s_h)} of the sample's H2 sections present ({share:.2f})"
    if missing:
        names = "; ".join(f"'{b.title}'" for b in missing[:5])
        why += f"; missing: {names}"
        return Finding(
            decision,
            missing[0].lines[0].strip(),
            f"sample heading '{missing[0].title}' (sample line {missing[0].start})",
            why,
        )
    return Finding(decision, "", "all sample H2 headings", why)


@_check("heading_hierarchy")
def check_heading_hierarchy(doc: _Doc, ctx: RubricContext) -> Finding:
    heads = doc.headings
    issues: list[tuple[Block, str]] = []
    if doc.h1 is None and heads:
        issues.append((heads[0], "no H1 title"))
    for b in heads:
        if b.level == 1 and b is not doc.h1:  # an H1 after the title, or after content: not the title
            issues.append((b, "a second H1" if doc.h1 is not None else "an H1 after the report's start"))
    prev = 0
    for b in heads:
        if prev and b.level > prev + 1:
            issues.append((b, f"H{prev} followed by H{b.level} (level skipped)"))
        prev = b.level
    if not heads:
        return Finding("na", "", "", "no heading")
    if not issues:
        return Finding("pass", "", "all headings", f"{len(heads)} headings, one H1, no skipped level")
    b, what = issues[0]
    decision: Decision = "partial" if len(issues) == 1 else "fail"
    return Finding(decision, b.lines[0].strip(), _where_heading(b), f"{len(issues)} issue(s); first: {what}")


@_check("no_empty_sections")
def check_no_empty_sections(doc: _Doc, ctx: RubricContext) -> Finding:
    blocks = [b for b in doc.blocks if b.kind != "rule"]
    heads = [b for b in doc.headings if b is not doc.h1]
    if not heads:
        return Finding("na", "", "", "no section heading")
    empty = []
    for k, b in enumerate(blocks):
        if b.kind != "heading" or b is doc.h1:
            continue
        nxt = blocks[k + 1] if k + 1 < len(blocks) else None
        if nxt is None or (nxt.kind == "heading" and nxt.level <= b.level):
            empty.append(b)
    if not empty:
        return Finding("pass", "", "all headings", f"{len(heads)} sections, none empty")
    share = len(empty) / len(heads)
    decision: Decision = "partial" if share <= 0.2 else "fail"
    return Finding(
        decision,
        empty[0].lines[0].strip(),
        _where_heading(empty[0]),
        f"{len(empty)}/{len(heads)} sections empty ({share:.2f}); first shown",
    )


# ======================================================================== G2 checks: data discipline


def _numeric_tables(doc: _Doc) -> list[_Table]:
    out = []
    for t in doc.tables:
        cells = [
            c for _, row in t.data_rows() for c in row[1:] if _clean(c) and not _DASH_CELL.match(_clean(c))
        ]
        nums = sum(1 for c in cells if _is_num_cell(c))
        if nums >= 3 and nums * 3 >= len(cells):
            out.append(t)
    return out


_UNIT = re.compile(
    r"[$€£¥%]|\\\$|\b(?:USD|EUR|GBP|JPY|RMB|CNY|bps)\b|\b(?:thousands?|millions?|billions?|trillions?)\b|"
    r"\bshares?\b|\bper share\b|\bpercent(?:age)?\b|\bbasis points?\b|\bdollars?\b|\bratio\b",
    re.I,
)
_PERIOD_CELL = re.compile(
    rf"{_MONTH}\s+\d{{1,2}}|\b(?:19|20)\d\d\b|\bQ[1-4]\b|\b(?:quarter|fiscal|FY|months?|weeks?|year|years|"
    rf"ended|ending|as of|YTD|TTM|LTM)\b",
    re.I,
)


def _table_text(doc: _Doc, t: _Table) -> str:
    return "\n".join(doc.lines[t.start - 1 : t.start + len(t.rows) + 1])


def _share_decision(ok: int, n: int) -> Decision:
    share = ok / n
    return "pass" if share >= 0.9 else "partial" if share >= 0.5 else "fail"


def _numeric_tables_finding(
    doc: _Doc, has: Callable[[_Doc, _Table], bool], what: str, ref: str, lacks: str, first_above: bool
) -> Finding:
    """Share of numeric tables for which `has` holds; evidence = the first table lacking it (else the first
    table: its line above when `first_above`, its first line otherwise)."""
    tables = _numeric_tables(doc)
    if not tables:
        return Finding("na", "", "", "no numeric table")
    lacking = [t for t in tables if not has(doc, t)]
    ok = len(tables) - len(lacking)
    decision = _share_decision(ok, len(tables))
    why = f"{ok}/{len(tables)} numeric tables {what}"
    if lacking:
        t = lacking[0]
        return Finding(
            decision, _snip(doc.lines[t.start - 1]), ref.format(t=t), why + f"; table {t.index} {lacks}"
        )
    t = tables[0]
    shown = (t.above if first_above else "") or doc.lines[t.start - 1]
    return Finding(decision, _snip(shown), ref.format(t=t), why)


@_check("table_units")
def check_table_units(doc: _Doc, ctx: RubricContext) -> Finding:
    return _numeric_tables_finding(
        doc,
        lambda doc, t: bool(_UNIT.search(" ".join((_table_text(doc, t), t.above, t.below)))),
        "carry a unit or scale note",
        "table {t.index} (line {t.start})",
        "has none in its cells, header or the lines around it",
        first_above=True,
    )


@_check("table_periods")
def check_table_periods(doc: _Doc, ctx: RubricContext) -> Finding:
    def has_period(doc: _Doc, t: _Table) -> bool:
        head = " ".join(_clean(c) for _, row in t.header_rows() for c in row)
        return bool(_PERIOD_CELL.search(head) or _PERIOD_CELL.search(_clean(t.above)))

    return _numeric_tables_finding(
        doc,
        has_period,
        "name their periods in the header (or the line above)",
        "table {t.index} header (line {t.start})",
        "names no period",
        first_above=False,
    )


_GENERIC_LABELS = frozenset(
    "total other basic diluted net gross change amount amounts item "
    "items income revenue revenues cost costs assets liabilities equity cash".split()
)
_WEAK_SPANS = re.compile(
    rf"{_MONTH}\s+\d{{1,2}}(?:,\s*\d{{4}})?|\b(?:19|20)\d\d\b|"
    r"\b(?:Note|Notes|Item|Items|Section|Table|Figure|Part|Rule|Rules|Level|Form|No\.|Topic|Chapter|Appendix|"
    r"Exhibit|Schedule|Article)\s+\d[\w.()-]*|"
    r"\b\d+(?:\.\d+)?[\s-]*(?:months?|years?|days?|weeks?|quarters?|hours?)\b|\(\d\)",
    re.I,
)
# "<row label> [revenue|net sales|...] [for <period>] was|were|totaled|increased to ... <figure>": the
# label is the sentence's subject and the figure is its value. Anything else between label and figure (a
# modifier such as "credit carryforwards", "an unfavorable impact of") means the figure is about something
# else: no pair.
_LINK = re.compile(
    r"^\s*(?:(?:net sales|sales|revenues?|expenses?|costs?|income|margin|balance|total)\s+)?"
    r"(?:(?:for|in|during|as of|at the end of)\s+[^,.;$%]{0,45}?\s*,?\s+)?"
    r"(?:was|were|is|are|of|totaled|totalled|amounted to|reached|stood at|came in at|increased to|"
    r"decreased to|rose to|fell to|grew to|declined to|:|=)\s*"
    r"(?:approximately |about |roughly |nearly |around |over )?$",
    re.I,
)
# "... $1.9 billion and $1.7 billion", "... 72.7% in fiscal 2024 from 56.9%": comparatives of the same row.
_COMPARATIVE = re.compile(
    r"^\s*(?:(?:in|for|during|as of)\s+[^,.;$%]{0,45}?\s*)?,?\s*"
    r"(?:and|from|compared (?:to|with)|versus|vs\.?)\s+"
    r"(?:approximately |about |roughly )?$",
    re.I,
)


def _label_key(cell: str) -> str:
    t = _clean(cell).lower()
    t = re.sub(r"\(\d\)|\[\d\]", "", t)
    t = re.sub(r"[:*]+$", "", t).strip()
    return " ".join(t.split())


@dataclass(frozen=True)
class _Row:
    table: _Table
    number: int  # 1-based row of the table, header rows included
    line: int
    cells: tuple[str, ...]
    pool: NumberPool


def _row_pools(doc: _Doc) -> dict[str, list[_Row]]:
    """label -> labelled numeric rows (with the pool of their figures)."""
    out: dict[str, list[_Row]] = {}
    for t in doc.tables:
        # the table's stated unit ("(In millions)" above it, in a header cell or as a row label) scales its
        # cells, as every reader of tables does (tasks.markdown.pieces.table_cell_figures)
        heads = t.header_rows()
        notes = [t.above, *(c for _, row in heads for c in row), *(row[0] for _, row in t.data_rows() if row)]
        stated = next((st for c in notes if c and (st := stated_scale(_clean(c))) is not None), None)
        width = max((len(row) for _, row in heads), default=0)
        column = [" ".join(_clean(row[i]) for _, row in heads if i < len(row)).strip() for i in range(width)]
        for r, (ln, cells) in enumerate(t.data_rows(), 1):
            if len(cells) < 2:
                continue
            key = _label_key(cells[0])
            if len(key) < 4 or key in _GENERIC_LABELS or len(key.split()) > 8 or not re.search(r"[a-z]", key):
                continue
            nums = [
                n
                for i, c in enumerate(cells[1:], 1)
                for n in table_cell_figures(
                    _clean(c).replace("\\$", "$"), column[i] if i < width else "", _clean(cells[0]), stated
                )
            ]
            if nums:
                out.setdefault(key, []).append(_Row(t, r + t.n_header_rows, ln, cells, NumberPool(nums)))
    return out


def _strong_numbers(text: str) -> list[Num]:
    """Figures of a sentence: not years, dates, durations, cross-references or bare one-digit counts."""
    weak = [m.span() for m in _WEAK_SPANS.finditer(text)]
    out = []
    for n in numbers_in(text):
        if n.yearlike or any(a <= n.start < b for a, b in weak):
            continue
        bare = not (n.percent or re.search(r"[$€£¥]|[a-z]", n.text, re.I))
        if bare and n.sig_digits < 2 and n.step >= 1:
            continue
        out.append(n)
    return out


def _figure_pairs(doc: _Doc, rows: dict[str, list[_Row]]) -> list[tuple[_Sentence, str, Num]]:
    """(sentence, row label, figure) where the figure is the value the sentence gives for that row label."""
    patterns = {k: re.compile(rf"(?<![A-Za-z0-9]){re.escape(k)}(?![A-Za-z0-9])") for k in rows}
    out = []
    for sent in _sentences(doc):
        text = sent.text.replace("\\$", "$")
        low = text.lower()
        mentions = sorted(
            ((m.start(), m.end(), k) for k, rx in patterns.items() for m in rx.finditer(low)),
            key=lambda e: (e[0], -len(e[2])),
        )
        if not mentions:
            continue
        nums = _strong_numbers(text)
        for start, end, key in mentions:
            if any(s2 < start < e2 for s2, e2, _ in mentions):  # inside a longer label ("total net sales")
                continue
            after = [n for n in nums if n.start >= end]
            if not after or not _LINK.match(text[end : after[0].start]):
                continue
            out.append((sent, key, after[0]))
            prev = after[0]
            for n in after[1:]:
                if not _COMPARATIVE.match(text[prev.end : n.start]):
                    break
                out.append((sent, key, n))
                prev = n
    return out


def _agrees(num: Num, rows: list[_Row]) -> bool | None:
    """True: the figure is in a row with that label; a percentage may also follow from the row's figures
    (a change or share); None: a percentage the row cannot show (no percent cell, not derivable)."""
    if any(r.pool.contains(num) for r in rows):
        return True
    if num.percent:
        if any(derivation(num, r.pool.nums) for r in rows):
            return True
        if not any(n.percent for r in rows for n in r.pool.nums):
            return None
    return False


@_check("numbers_agree")
def check_numbers_agree(doc: _Doc, ctx: RubricContext) -> Finding:
    rows = _row_pools(doc)
    if not rows:
        return Finding("na", "", "", "no labelled numeric table row")
    pairs = agree = 0
    first_bad: tuple[_Sentence, str, Num] | None = None
    first_ok: tuple[_Sentence, str, Num] | None = None
    for sent, key, num in _figure_pairs(doc, rows):
        verdict = _agrees(num, rows[key])
        if verdict is None:
            continue
        pairs += 1
        if verdict:
            agree += 1
            first_ok = first_ok or (sent, key, num)
        elif first_bad is None:
            first_bad = (sent, key, num)
    if not pairs:
        return Finding("na", "", "", "no prose figure given as the value of a table row label")
    share = agree / pairs
    decision: Decision = "pass" if share >= 0.9 else "partial" if share >= 0.7 else "fail"
    why = f"{agree}/{pairs} prose figures agree with the table row they name ({share:.2f})"
    if first_bad:
        sent, key, num = first_bad
        row = rows[key][0]
        shown = _snip(" | ".join(_clean(c) for c in row.cells), 120)
        why += (
            f"; e.g. {num.text!r} for '{key}' is not in its row "
            f"(table {row.table.index} row {row.number}, line {row.line}: {shown})"
        )
        return Finding(decision, _snip(sent.text), f"line {sent.line}", why)
    assert first_ok is not None
    sent, key, num = first_ok
    return Finding(decision, _snip(sent.text), f"line {sent.line}", why + f"; e.g. {num.text!r} for '{key}'")


# ======================================================================== G2 checks: generation traces

_ARTIFACTS: list[tuple[str, re.Pattern[str]]] = [
    (
        "mentions its inputs",
        re.compile(
            r"\b(?:the|these|those) (?:provided|supplied|attached|grounding) "
            r"(?:documents?|docs|passages|excerpts|materials|sources|filings|context)\b|"
            r"\bthe given documents?\b|"
            r"\bbased on the (?:provided |given )?(?:context|documents|excerpts|information provided)\b|"
            r"\b(?:the|a) (?:sample|example) report\b|\b(?:in|from) the context (?:above|provided|given)\b",
            re.I,
        ),
    ),
    (
        "assistant voice",
        re.compile(r"\bas an AI\b|\bas a (?:large )?language model\b|\bknowledge cut-?off\b", re.I),
    ),
    (
        "internal id",
        re.compile(
            r"\[(?:doc|document|source|src|ref|chunk|passage)[\s_#:-]*\d+\]|\bdoc_id\b|【[^】]*】|"
            r"\b(?:doc|chunk|passage)_\d+\b",
            re.I,
        ),
    ),
    ("template token", re.compile(r"<\|[a-z_]+\|>|\breport_markdown\b|^\s*\{\s*\"report", re.I)),
]
_ARTIFACT_FENCE = re.compile(r"^ {0,3}(?:`{3,}|~{3,})\s*(?:json|markdown|md)\b", re.I)


@_check("no_artifacts")
def check_no_artifacts(doc: _Doc, ctx: RubricContext) -> Finding:
    hits: list[tuple[int, str, str]] = []
    for b in doc.blocks:
        if b.kind == "code" and _ARTIFACT_FENCE.match(b.lines[0]):
            hits.append((b.start, b.lines[0], f"report content in a {b.lines[0].strip()} fence"))
    for ln, s in _prose_lines(doc):
        for kind, rx in _ARTIFACTS:
            m = rx.search(s)
            if m:
                hits.append((ln, s, f"{kind}: {m.group(0)!r}"))
                break
    hits.sort()
    lines = sorted({h[0] for h in hits})
    if not hits:
        return Finding("pass", "", "whole report", "no generation artifact")
    ln, s, what = hits[0]
    decision: Decision = "partial" if len(lines) == 1 else "fail"
    return Finding(decision, _snip(s), f"line {ln}", f"{len(lines)} line(s) with artifacts; first: {what}")


_DEBRIS = re.compile(
    r"</?(?:div|span|p|br|hr|table|thead|tbody|tfoot|tr|td|th|font|b|i|u|em|strong|sup|sub|img|a|ul|ol|li|"
    r"h[1-6]|section|article|style|script|center|small|code|pre)\b[^>\n]*>|<!--|"
    r"&(?:nbsp|amp|lt|gt|quot|apos|#\d{2,5}|#x[0-9a-f]{2,4});|\\u00[0-9a-f]{2}",
    re.I,
)


@_check("no_markup_debris")
def check_no_markup_debris(doc: _Doc, ctx: RubricContext) -> Finding:
    hits = [(ln, s, m.group(0)) for ln, s in _prose_lines(doc) for m in [_DEBRIS.search(s)] if m]
    if not hits:
        return Finding("pass", "", "whole report", "no raw HTML or escaped entity outside code")
    ln, s, what = hits[0]
    decision: Decision = "partial" if len(hits) <= 2 else "fail"
    return Finding(
        decision, _snip(s), f"line {ln}", f"{len(hits)} line(s) with HTML/entity debris; first: {what!r}"
    )


@_check("no_repetition")
def check_no_repetition(doc: _Doc, ctx: RubricContext) -> Finding:
    # sentence by sentence: where the paragraph breaks fall must not hide (or make) a repeat
    seen: dict[str, int] = {}
    for s in _sentences(doc):
        key = " ".join(re.findall(r"[a-z0-9]+", s.text.lower()))
        if len(key.split()) < 8:
            continue
        if key in seen:
            return Finding(
                "fail", _snip(s.text), f"line {s.line}", f"this passage repeats the one at line {seen[key]}"
            )
        seen[key] = s.line
    return Finding("pass", "", "whole report", f"{len(seen)} sentences of >= 8 words, none repeated")


# ======================================================================== G2 checks: substance (proxies)

_CITATIONS = [
    re.compile(r"\barXiv:\s?\d{4}\.\d{4,5}(?:v\d+)?|\b\d{4}\.\d{4,5}v\d+\b", re.I),
    re.compile(r"\b10\.\d{4,9}/[^\s,;)\]]+"),
    re.compile(r"\b[A-Z][A-Za-z'’-]+ et al\.?,? \(?(?:19|20)\d\d[a-z]?\b"),
    re.compile(r"\b[A-Z][A-Za-z'’-]+(?: (?:and|&) [A-Z][A-Za-z'’-]+)? \((?:19|20)\d\d[a-z]?\)"),
    re.compile(r"\(([A-Z][A-Za-z'’-]+(?: (?:and|&) [A-Z][A-Za-z'’-]+| et al\.?)?),? (?:19|20)\d\d[a-z]?[;)]"),
]
_PAPER_COLUMN = re.compile(
    r"^(?:paper|papers|title|work|works|study|studies|reference|references|article|source)s?$", re.I
)

_RISK = re.compile(
    r"\brisks?\b|\buncertaint|\blimitations?\b|\bchallenges?\b|\bopen (?:questions?|problems?|issues?)\b|"
    r"\bfuture (?:work|research|directions?)\b|\boutlook\b|\bcaveats?\b|\bheadwinds?\b|\bthreats?\b",
    re.I,
)


def _named_works(doc: _Doc) -> dict[str, tuple[str, str]]:
    """Distinct works named: key -> (evidence, where)."""
    refs: dict[str, tuple[str, str]] = {}
    for ln, s in _prose_lines(doc):
        for rx in _CITATIONS:
            for m in rx.finditer(s):
                refs.setdefault(" ".join(m.group(0).lower().split()), (s, f"line {ln}"))
    for t in doc.tables:
        cols = [c for c, h in enumerate(t.header) if _PAPER_COLUMN.match(_clean(h))]
        for c in cols:
            for ln, cells in t.data_rows():
                if c < len(cells) and len(_clean(cells[c]).split()) >= 2:
                    refs.setdefault(
                        _clean(cells[c]).lower(), (cells[c], f"table {t.index} line {ln} col {c + 1}")
                    )
    for b in doc.headings:
        # surveys give each paper a subsection titled by the paper: "Name: subtitle" or a long title
        if b.level >= 3 and (re.match(r"^[^:]{2,60}:\s+\S+\s+\S+", b.title) or len(b.title.split()) >= 5):
            refs.setdefault(b.title.lower(), (b.lines[0].strip(), _where_heading(b)))
    return refs


@_check("academic_references")
def check_academic_references(doc: _Doc, ctx: RubricContext) -> Finding:
    """Proxy (heuristic): distinct arXiv ids, DOIs, author-year citations, cells of a Paper/Title column and
    paper-title headings below H2 ("Name: subtitle", or >= 5 words). The bar is 3 works, or as many as the
    sample report names when it names fewer (a window may hold one or two papers)."""
    refs = _named_works(doc)
    in_sample = len(_named_works(_parse(ctx.sample_markdown))) if ctx.sample_markdown else 0
    need = min(3, in_sample) if in_sample else 3
    n = len(refs)
    if not n:
        return Finding("fail", "", "whole report", "no named work (arXiv id, DOI, author-year, paper title)")
    decision: Decision = "pass" if n >= need else "partial"
    s, where = next(iter(refs.values()))
    return Finding(decision, _snip(s), where, f"{n} distinct works named (proxy count; {need} needed)")


@_check("risks_limitations")
def check_risks_limitations(doc: _Doc, ctx: RubricContext) -> Finding:
    """Proxy (heuristic): a non-empty section whose heading names risks / limitations / open problems."""
    for b in doc.headings:
        if b is doc.h1 or not _RISK.search(b.title):
            continue
        if any(c.kind in ("paragraph", "list", "table") for c in _section_content(doc, b)):
            return Finding("pass", b.lines[0].strip(), _where_heading(b), "a section dedicated to them")
    for s in _sentences(doc):
        m = _RISK.search(s.text)
        if m:
            return Finding(
                "partial",
                _snip(s.text),
                f"line {s.line}",
                f"mentioned in passing ({m.group(0)!r}), no dedicated section",
            )
    return Finding("fail", "", "whole report", "no risk, limitation, challenge or open problem discussed")


_ENTITY = re.compile(r"\b[A-Z][a-zA-Z&'’-]+")
_TECH = re.compile(
    r"\b(?:[A-Za-z]+\d[\w-]*|\d+[A-Za-z]\w*|[A-Z]{2,}[a-z]?s?|[a-z]+[A-Z]\w*|[a-z]{3,}-[a-z]{3,}[\w-]*)\b|"
    r"\$[^$\n]+\$"
)
DENSITY_PASS, DENSITY_PARTIAL = 0.6, 0.35


@_check("information_density")
def check_information_density(doc: _Doc, ctx: RubricContext) -> Finding:
    """Proxy (heuristic): share of prose sentences (>= 6 words; a parenthetical note is not a sentence) with a
    number, a capitalised name after the first word, or a technical token (digits in a word, an acronym,
    camelCase, a hyphenated compound, inline math). The demo gold reports score 0.55-0.8 on it."""
    sents = [
        s for s in _sentences(doc) if len(s.text.split()) >= 6 and not re.fullmatch(r"\(.*\)\.?", s.text)
    ]
    if len(sents) < 3:
        return Finding("na", "", "", f"{len(sents)} prose sentence(s) of >= 6 words (< 3)")
    thin = []
    for s in sents:
        body = s.text.split(" ", 1)[1] if " " in s.text else ""
        if not (numbers_in(s.text) or _ENTITY.search(body) or _TECH.search(s.text)):
            thin.append(s)
    share = 1 - len(thin) / len(sents)
    decision: Decision = (
        "pass" if share >= DENSITY_PASS else "partial" if share >= DENSITY_PARTIAL else "fail"
    )
    why = f"{len(sents) - len(thin)}/{len(sents)} prose sentences carry a figure, name or term ({share:.2f})"
    if thin:
        return Finding(
            decision, _snip(thin[0].text), f"line {thin[0].line}", why + "; first generic sentence shown"
        )
    return Finding(decision, _snip(sents[0].text), f"line {sents[0].line}", why)


# ======================================================================== aggregation


def rubric_total(decisions: Iterable[RubricDecision], items: Sequence[RubricItem]) -> dict[str, Any]:
    """Layer points and the total S of paper 003 eq. 1 (docs/metrics/rubric.md) from item decisions.

    Items without a decision count as na. Returns g0_pass, g1, d1, g2, d2, s1, s2, S, not_applicable
    (ids), failed (ids: decided "fail", gates included), partial (ids)."""
    by_id = {it.id: it for it in items}
    g = {"G1": 0.0, "G2": 0.0}
    d = {"G1": 0.0, "G2": 0.0}
    g0_pass = True
    na: list[str] = []
    failed: list[str] = []
    partial: list[str] = []
    decided = set()
    for dec in decisions:
        item = by_id.get(dec.item_id)
        if item is None:
            raise ValueError(f"decision for unknown rubric item {dec.item_id!r}")
        if dec.layer != item.layer:
            raise ValueError(f"decision for {dec.item_id!r} says layer {dec.layer}, the item is {item.layer}")
        decided.add(dec.item_id)
        if dec.decision == "na":
            na.append(dec.item_id)
            continue
        if dec.decision == "fail":
            failed.append(dec.item_id)
        elif dec.decision == "partial":
            partial.append(dec.item_id)
        if item.layer == "G0":
            g0_pass = g0_pass and dec.decision != "fail"
            continue
        assert dec.credit is not None
        g[item.layer] += item.weight * dec.credit
        d[item.layer] += item.weight
    na.extend(it.id for it in items if it.id not in decided)
    g1, d1, g2, d2 = g["G1"], d["G1"], g["G2"], d["G2"]
    s1 = 100.0 * g1 / d1 if d1 else 100.0
    s2 = 100.0 * g2 / d2 if d2 else 100.0
    if not g0_pass:
        total = 0.0
    elif d1 + d2 == 0:
        total = 100.0
    else:
        total = 100.0 * (g1 + (s1 / 100.0) * g2) / (d1 + d2)
    return {
        "g0_pass": g0_pass,
        "g1": g1,
        "d1": d1,
        "g2": g2,
        "d2": d2,
        "s1": s1,
        "s2": s2,
        "S": total,
        "not_applicable": na,
        "failed": failed,
        "partial": partial,
    }


# ======================================================================== judges


class RubricJudge(Protocol):
    name: str

    def decide(
        self, report_markdown: str, ctx: RubricContext, items: Sequence[RubricItem]
    ) -> list[RubricDecision]:
        """One decision per item given (all applicable to ctx.category), same order."""


def _decision(item: RubricItem, f: Finding, judge: str) -> RubricDecision:
    return RubricDecision(
        item_id=item.id,
        layer=item.layer,
        decision=f.decision,
        evidence=f.evidence,
        evidence_ref=f.evidence_ref,
        rationale=f.rationale,
        judge=judge,
    )


def _run_check(item: RubricItem, report: str, ctx: RubricContext) -> Finding:
    fn = CHECKS.get(item.check)
    if fn is None:
        raise FrameInputError("rubric", f"item {item.id!r}: unknown check {item.check!r}")
    return fn(report, ctx)


class OfflineRubricJudge:
    """Every item decided by its offline check (deterministic; judged items by their documented proxy)."""

    name = OFFLINE_NAME

    def __repr__(self) -> str:
        return "OfflineRubricJudge()"

    def decide(
        self, report_markdown: str, ctx: RubricContext, items: Sequence[RubricItem]
    ) -> list[RubricDecision]:
        return [_decision(it, _run_check(it, report_markdown, ctx), self.name) for it in items]


class _ItemDecision(BaseModel):
    item_id: str
    decision: Decision
    evidence: str = ""
    rationale: str = ""

    @field_validator("item_id", mode="before")
    @classmethod
    def _strip_id(cls, v: Any) -> Any:
        return v.strip() if isinstance(v, str) else v

    @field_validator("decision", mode="before")
    @classmethod
    def _norm_decision(cls, v: Any) -> Any:
        if isinstance(v, str):
            key = v.strip().lower().replace("-", " ").replace("_", " ")
            return {"n/a": "na", "not applicable": "na", "passed": "pass", "failed": "fail"}.get(key, key)
        return v

    @field_validator("evidence", "rationale", mode="before")
    @classmethod
    def _none_to_empty(cls, v: Any) -> Any:
        return "" if v is None else v


class RubricReply(BaseModel):
    """Reply of role score_rubric."""

    decisions: list[_ItemDecision] = Field(default_factory=list)


def _ids_check(ids: Sequence[str]) -> Callable[[RubricReply], None]:
    want = list(ids)

    def check(reply: RubricReply) -> None:
        got = [d.item_id for d in reply.decisions]
        dupes = sorted({i for i in got if got.count(i) > 1})
        if dupes:
            raise ValueError(f"item_id given more than once: {dupes}")
        extra = sorted(set(got) - set(want))
        missing = [i for i in want if i not in set(got)]
        if extra or missing:
            # the problems first: the client cuts the reason to one short line
            raise ValueError(
                "; ".join(
                    [f"unknown item_id: {extra}"] * bool(extra)
                    + [f"missing item_id: {missing}"] * bool(missing)
                    + ["decisions must cover exactly the item_ids " + ", ".join(want)]
                )
            )

    return check


def _locate(doc: _Doc, quote: str) -> str:
    """'line N' of the first line of R' holding the quoted evidence (its first 80 characters), else ''."""
    probe = " ".join(_clean(quote).lower().split())[:80].strip(" .…\"'")
    if len(probe) < 4:
        return ""
    for i, s in enumerate(doc.lines):
        if probe in " ".join(_clean(s).lower().split()):
            return f"line {i + 1}"
    return ""


class LLMRubricJudge(LLMJudge):
    """Judged items decided by an LLM in one request per report; deterministic items by their checks."""

    ROLE = "score_rubric"
    ROLES = (ROLE,)
    MIN_REPORT_TOKENS = 200  # below this the report cannot be judged: refuse

    def _report_view(self, report: str, room: int) -> tuple[str, str, bool]:
        """(text sent, note for the prompt, excerpted?): the whole report, or its head and tail."""
        if count_tokens(report) <= room:
            return report, "Below is the complete report.", False
        lines = report.split("\n")
        sizes = count_tokens_many([ln + "\n" for ln in lines])
        marker = 40  # tokens kept for the omission marker
        half = max(0, (room - marker) // 2)
        head_end, used = 0, 0
        while head_end < len(lines) and used + sizes[head_end] <= half:
            used += sizes[head_end]
            head_end += 1
        tail_start, used = len(lines), 0
        while tail_start > head_end and used + sizes[tail_start - 1] <= half:
            used += sizes[tail_start - 1]
            tail_start -= 1
        omitted = (head_end + 1, tail_start)
        text = "\n".join(
            [*lines[:head_end], f"[... lines {omitted[0]}-{omitted[1]} omitted ...]", *lines[tail_start:]]
        )
        note = (
            f"The report is too long for this request: below are its first {head_end} lines and its last "
            f"{len(lines) - tail_start} lines; lines {omitted[0]}-{omitted[1]} (of {len(lines)}) are omitted "
            f"and marked [... lines {omitted[0]}-{omitted[1]} omitted ...]. Judge from what you see and do "
            "not penalise the omission itself."
        )
        return text, note, True

    def decide(
        self, report_markdown: str, ctx: RubricContext, items: Sequence[RubricItem]
    ) -> list[RubricDecision]:
        items = list(items)
        judged = [it for it in items if it.mode == "judged"]
        out: dict[str, RubricDecision] = {
            it.id: _decision(it, _run_check(it, report_markdown, ctx), OFFLINE_NAME)
            for it in items
            if it.mode != "judged"
        }
        self.last_calls = []
        if judged:
            out.update(self._judge(report_markdown, ctx, judged))
        return [out[it.id] for it in items]

    def _judge(self, report: str, ctx: RubricContext, judged: list[RubricItem]) -> dict[str, RubricDecision]:
        """The decisions on the judged items: one request holding the report (or its head and tail)."""
        listing = "\n".join(
            json.dumps({"item_id": it.id, "title": it.title, "criterion": it.criterion}, ensure_ascii=False)
            for it in judged
        )
        variables = {
            "category": ctx.category,
            "domain": ctx.domain,
            "items": listing,
            "item_ids": ", ".join(it.id for it in judged),
            "report_note": "",
        }
        room = self.room(self.ROLE, self.MIN_REPORT_TOKENS, "the report", report="", **variables)
        if report.strip():
            view, note, excerpted = self._report_view(report, room)
        else:
            view, note, excerpted = "(the report is empty)", "The report is empty.", False
        variables["report_note"] = note
        ids = _ids_check([it.id for it in judged])
        reply: RubricReply = self.ask(self.ROLE, RubricReply, check=ids, report=view, **variables).value
        doc = _parse(report)
        by_id = {d.item_id: d for d in reply.decisions}
        suffix = " [judged on the head and tail of the report only]" if excerpted else ""
        self.last_calls.append({"role": self.ROLE, "items": len(judged), "excerpted": excerpted})
        return {
            it.id: RubricDecision(
                item_id=it.id,
                layer=it.layer,
                decision=by_id[it.id].decision,
                evidence=by_id[it.id].evidence.strip(),
                evidence_ref=_locate(doc, by_id[it.id].evidence),
                rationale=(by_id[it.id].rationale.strip() + suffix).strip(),
                judge=self.name,
            )
            for it in judged
        }


# ======================================================================== driver


def _items_hash(items: Sequence[RubricItem]) -> str:
    blob = json.dumps([it.model_dump() for it in items], sort_keys=True).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:16]


def score_rubric(
    report_markdown: str,
    ctx: RubricContext,
    judge: RubricJudge,
    items: Sequence[RubricItem] | None = None,
) -> list[MetricResult]:
    """The four rubric metrics of one report: ``rubric`` (S), ``rubric_g0``, ``rubric_g1``, ``rubric_g2``."""
    items = list(items) if items is not None else rubric_items()
    decisions = _all_decisions(report_markdown, ctx, judge, items)
    tot = rubric_total(decisions, items)
    layer_of = {it.id: it.layer for it in items}

    def layer(name: str) -> tuple[dict[str, str], int]:
        """The layer's decisions by item id, and how many are not na."""
        got = {d.item_id: d.decision for d in decisions if layer_of[d.item_id] == name}
        return got, sum(1 for v in got.values() if v != "na")

    g0, n0 = layer("G0")
    total = None if tot["d1"] + tot["d2"] == 0 and tot["g0_pass"] else tot["S"]
    detail = {k: tot[k] for k in ("g1", "d1", "g2", "d2", "s1", "s2", "g0_pass", "not_applicable", "failed")}
    detail.update(partial=tot["partial"], rubric_hash=_items_hash(items), category=ctx.category)
    scores = _item_scores(items, decisions)
    name = judge.name
    failed_gates = [i for i in tot["failed"] if layer_of[i] == "G0"]
    out = [
        MetricResult(
            metric="rubric", value=total, judge=name, population=len(scores), items=scores, detail=detail
        ),
        MetricResult(
            metric="rubric_g0",
            value=1.0 if tot["g0_pass"] else 0.0,
            judge=name,
            population=n0,
            detail={"gates": g0, "failed": failed_gates},
        ),
    ]
    for k in (1, 2):  # rubric_g1, rubric_g2: S1 / S2, None when no item of the layer applies
        got, n = layer(f"G{k}")
        d = tot[f"d{k}"]
        out.append(
            MetricResult(
                metric=f"rubric_g{k}",
                value=tot[f"s{k}"] if d else None,
                judge=name,
                population=n,
                detail={f"g{k}": tot[f"g{k}"], f"d{k}": d, "decisions": got},
            )
        )
    return out


def _all_decisions(
    report: str, ctx: RubricContext, judge: RubricJudge, items: list[RubricItem]
) -> list[RubricDecision]:
    """One decision per item in `items` order: the judge's for the applicable ones, na for the others."""
    applicable = [it for it in items if it.applies(ctx.category)]
    decided = judge.decide(report, ctx, applicable)
    if [d.item_id for d in decided] != [it.id for it in applicable]:
        raise ValueError(f"{judge.name}: decisions do not match the applicable rubric items (ids or order)")
    skipped = [
        RubricDecision(
            item_id=it.id,
            layer=it.layer,
            decision="na",
            rationale=f"applies to {', '.join(it.applies_to)} reports, not {ctx.family}",
            judge=judge.name,
        )
        for it in items
        if not it.applies(ctx.category)
    ]
    by_id = {d.item_id: d for d in [*decided, *skipped]}
    return [by_id[it.id] for it in items]


def _item_scores(items: list[RubricItem], decisions: list[RubricDecision]) -> list[ItemScore]:
    """The evidence items: one per decided (not na) item, its rationale led by the decision."""
    scores: list[ItemScore] = []
    for pos, (it, d) in enumerate(zip(items, decisions, strict=True)):
        if d.decision == "na":
            continue
        rationale = d.rationale.strip()
        if not rationale.lower().startswith(f"{d.decision}:"):
            rationale = f"{d.decision}: {rationale}" if rationale else d.decision
        assert d.credit is not None
        scores.append(
            ItemScore(
                index=pos,
                kind=f"{it.layer}:{it.id}",
                text=it.title,
                score=d.credit,
                evidence=d.evidence,
                evidence_ref=d.evidence_ref,
                rationale=rationale,
            )
        )
    return scores


# ======================================================================== the family

# Total S (0-100, 0 when a G0 gate fails), G0 pass (1/0), G1 and G2 percentages (paper 003).
RUBRIC_METRICS: tuple[str, ...] = ("rubric", "rubric_g0", "rubric_g1", "rubric_g2")


# What the metric checklist does not hold the rubric to (docs/metrics/robustness.md).
_FORM = (
    "frame's rubric grades a report's form (gates, layout, presentation, agreement of prose with its own "
    "tables), not what it says; its section checks compare R' with S, one check of 21"
)
_UNCLAIMED = tuple((a, _FORM) for a in ("figures", "directions", "periods", "content", "order", "tables"))


class RubricFamily(MetricFamily):
    """Frame's hierarchical rubric (paper 003's layers, frame's items): G0 gates, G1 and G2 checks of R'."""

    name = "rubric"
    metrics = (
        MetricSpec("rubric", 0.0, 100.0, evidence="checks", unclaimed=_UNCLAIMED),
        MetricSpec("rubric_g0", evidence="checks", unclaimed=_UNCLAIMED),
        MetricSpec("rubric_g1", 0.0, 100.0, evidence="checks", unclaimed=_UNCLAIMED),
        MetricSpec("rubric_g2", 0.0, 100.0, evidence="checks", unclaimed=_UNCLAIMED),
    )
    reads = frozenset({"sample", "context"})
    summary = "frame's hierarchical rubric: G0 gates, G1 form and G2 content checks (score 0-100)"

    def __init__(self, env: JudgeEnv) -> None:
        super().__init__(env)
        self.judge: RubricJudge = OfflineRubricJudge() if env.offline else LLMRubricJudge(env.client, env.llm)

    def score(self, inputs: Inputs) -> list[MetricResult]:
        c = inputs.context
        ctx = RubricContext(
            category=c.get("category", ""),
            domain=c.get("domain", ""),
            sample_markdown=inputs.sample,
            target_period=c.get("t_target", ""),
        )
        return score_rubric(inputs.generated, ctx, self.judge)
