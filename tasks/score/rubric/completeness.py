"""G2 completeness checks: form (sections against the sample, hierarchy, no empty section), data
discipline (table units and periods, prose figures agreeing with the tables), generation traces and
substance proxies (references, risks, information density)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from rapidfuzz import fuzz

from schemas.rubric import Decision
from tasks.markdown.document import Block
from tasks.markdown.numbers import Num, NumberPool, derivation, numbers_in
from tasks.markdown.pieces import stated_scale, table_cell_figures
from tasks.score.headings import form_items_of, same_heading
from tasks.score.rubric.reading import (
    _DASH_CELL,
    _MONTH,
    Finding,
    RubricContext,
    _check,
    _clean,
    _Doc,
    _is_num_cell,
    _parse,
    _prose_lines,
    _section_content,
    _Sentence,
    _sentences,
    _snip,
    _Table,
    _where_heading,
)

MATCH_CUTOFF = 85  # rapidfuzz token_sort_ratio for "the same heading"


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
            if s < MATCH_CUTOFF and form_items_of(sample[i].title) & form_items_of(report[j].title):
                s = MATCH_CUTOFF  # one Form item under two filers' titles: the same section
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
        if not any(same_heading(b.title, r.title, MATCH_CUTOFF, _norm_heading) for r in r_heads):
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
