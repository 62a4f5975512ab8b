"""G1 report identity checks: is the report recognisably the one asked for (title naming its company and
period or topic, report register, a lead summary, periods agreeing with the title)?"""

from __future__ import annotations

import re

from tasks.markdown.document import Block
from tasks.score.rubric.reading import (
    _MONTH,
    _YEAR,
    Finding,
    RubricContext,
    _check,
    _clean,
    _Doc,
    _flat,
    _parse,
    _prose_lines,
    _section_content,
    _snip,
    _where_heading,
    _words,
)

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
