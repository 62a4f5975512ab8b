"""G0 deliverability gates: can the report be delivered at all (text, parseable Markdown, no template
residue, not cut off)? A failed gate zeroes the total S (docs/metrics/rubric.md)."""

from __future__ import annotations

import re

from tasks.markdown.document import is_separator, split_row
from tasks.score.rubric.reading import (
    Finding,
    RubricContext,
    _check,
    _clean,
    _Doc,
    _flat,
    _prose_lines,
    _snip,
    _where_heading,
    _words,
)


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
