"""The evidence of each metric on one (instance, system), as HTML: one small renderer per kind of evidence
(MetricSpec.evidence: "recall" = gold units covered or missed, "support" = claims with the passages
checked, "checks" = rubric items), the tables family's matches, the headings of the structure metric,
and a plain table of every column for any other family (a plugin's included).
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pandas as pd

from tasks.score import registry
from tasks.score.diagnostic.failures import MISS_BELOW
from tasks.score.headings import same_heading
from tasks.view.page import esc, fmt, markdown_headings, table

__all__ = ["detail_table", "evidence_summary", "headings_alignment", "metric_evidence", "parse_detail"]

HEADING_CUTOFF = 80.0  # rapidfuzz token_sort_ratio for "the same heading" (the rubric's section match)
_COLUMNS = ("kind", "text", "source", "score", "stage", "evidence", "evidence_ref", "rationale")


def _pre(text: object) -> str:
    return f"<pre>{esc(text)}</pre>" if text else ""


def _rows(items: pd.DataFrame, cols: list[tuple[str, str]]) -> list[list[str]]:
    columns = [items[c].tolist() if c in items else [""] * len(items) for c, _ in cols]
    return [
        [
            f'<td class="n">{fmt(v, 2)}</td>' if how == "n" else (_pre(v) if how == "pre" else esc(v))
            for v, (_, how) in zip(values, cols, strict=True)
        ]
        for values in zip(*columns, strict=True)
    ]


def _split(
    items: pd.DataFrame, cut: float, bad: str, good: str, cols: list[tuple[str, str]], heads: list[str]
) -> str:
    """Items below `cut` shown (`bad`), the rest folded (`good`)."""
    low, high = items[items["score"] < cut], items[items["score"] >= cut]
    out = [
        f'<p><span class="bad">{len(low)} {esc(bad)}</span>, <span class="ok">{len(high)} {esc(good)}</span> '
        f"(threshold {cut:g}).</p>"
    ]
    if len(low):
        out.append(table(heads, _rows(low, cols), "ev-bad"))
    if len(high):
        out.append(
            f"<details><summary>{len(high)} {esc(good)}</summary>"
            f"{table(heads, _rows(high, cols), 'ev-ok')}</details>"
        )
    return "".join(out)


def _recall(items: pd.DataFrame, cut: float) -> str:
    cols = [
        ("kind", "t"),
        ("text", "pre"),
        ("score", "n"),
        ("evidence", "pre"),
        ("evidence_ref", "t"),
        ("rationale", "t"),
    ]
    heads = ["type", "gold unit", "score", "best match in the report", "where", "why"]
    return _split(items, cut, "missed", "covered", cols, heads)


def _support(items: pd.DataFrame, cut: float) -> str:
    cols = [
        ("text", "pre"),
        ("score", "n"),
        ("stage", "t"),
        ("evidence", "pre"),
        ("evidence_ref", "t"),
        ("rationale", "t"),
    ]
    heads = ["claim of the report", "support", "stage", "passage checked", "from", "why"]
    return _split(items, cut, "unsupported", "supported", cols, heads)


def _checks(items: pd.DataFrame, cut: float) -> str:
    cols = [
        ("kind", "t"),
        ("text", "t"),
        ("score", "n"),
        ("evidence", "pre"),
        ("evidence_ref", "t"),
        ("rationale", "t"),
    ]
    heads = ["item", "title", "credit", "evidence", "where", "rationale"]
    return _split(items, cut, "failed", "passed", cols, heads)


def _tables(items: pd.DataFrame, cut: float) -> str:
    cols = [
        ("kind", "t"),
        ("text", "pre"),
        ("score", "n"),
        ("evidence", "pre"),
        ("evidence_ref", "t"),
        ("rationale", "t"),
    ]
    heads = ["", "gold table", "score", "matched table of the report", "which", "match"]
    matched = int(((items["kind"] == "table") & (items["evidence_ref"] != "")).sum())
    gold = int((items["kind"] == "table").sum())
    spurious = int((items["kind"] == "spurious_table").sum())
    head = (
        f"<p>{matched}/{gold} gold table(s) matched; "
        f"{spurious} table(s) of the report without a gold counterpart.</p>"
    )
    return head + table(heads, _rows(items, cols))


def _generic(items: pd.DataFrame, cut: float) -> str:
    cols = [
        (c, "n" if c == "score" else ("pre" if c in ("text", "evidence") else "t"))
        for c in _COLUMNS
        if c in items
    ]
    return table([c for c, _ in cols], _rows(items, cols))


_BY_EVIDENCE: dict[str, Callable[[pd.DataFrame, float], str]] = {
    "recall": _recall,
    "support": _support,
    "checks": _checks,
}
_BY_FAMILY: dict[str, Callable[[pd.DataFrame, float], str]] = {"tables": _tables}


def metric_evidence(metric: str, items: pd.DataFrame, detail: dict | None = None) -> str:
    """HTML of one metric's evidence items (rows of evidence.parquet for one instance, system, metric);
    `detail` (the score's detail) may name the metric's own `threshold`, else MISS_BELOW (as `frame
    report`); a rubric item fails below full credit."""
    if items.empty:
        return '<p class="muted">No evidence items.</p>'
    items = items.sort_values("index", kind="mergesort")
    fam = next((f for f, cls in registry.families().items() if metric in cls.metric_names()), "")
    render = _BY_FAMILY.get(fam) or _BY_EVIDENCE.get(registry.spec(metric).evidence) or _generic
    return render(items, _cut(metric, detail))


def _cut(metric: str, detail: dict | None) -> float:
    """Below this an item is missed / unsupported / failed: full credit for a rubric item, else the
    metric's own `threshold` in the score's detail, else MISS_BELOW."""
    if registry.spec(metric).evidence == "checks":
        return 1.0
    cut = (detail or {}).get("threshold", MISS_BELOW)
    return float(cut) if isinstance(cut, int | float) and 0 < cut <= 1 else MISS_BELOW


_FAILED = {"recall": "missed", "support": "unsupported", "checks": "failed"}


def evidence_summary(metric: str, items: pd.DataFrame, detail: dict | None = None) -> str:
    """ "k missed of n" (unsupported, failed) for a metric whose items have verdicts, else "n item(s)"."""
    word = _FAILED.get(registry.spec(metric).evidence)
    if word is None or items.empty:
        return f"{len(items)} evidence item(s)"
    return f"{int((items['score'] < _cut(metric, detail)).sum())} {word} of {len(items)}"


def parse_detail(detail_json: object) -> dict:
    """A score's `detail_json` as a dict ({} when absent or not a JSON object)."""
    try:
        detail = json.loads(str(detail_json)) if detail_json else {}
    except ValueError:
        return {"detail_json": str(detail_json)}
    return detail if isinstance(detail, dict) else {"detail_json": detail}


def detail_table(detail: dict) -> str:
    """A score's detail as a key/value table; nested values as JSON."""
    if not detail:
        return ""
    rows = [
        [
            f"<code>{esc(k)}</code>",
            esc(v if isinstance(v, str | int | float) else json.dumps(v, sort_keys=True)),
        ]
        for k, v in detail.items()
    ]
    return table(["detail", "value"], rows, "detail")


def headings_alignment(gold: str, report: str) -> tuple[str, str]:
    """Gold's headings beside the report's: each gold heading matched to the first unused report heading
    naming the same section (tasks.score.headings.same_heading); report headings left over listed after.
    The structure score itself compares the two heading trees with embeddings: this is its readable side.
    Returns (HTML, a one-line summary)."""
    g_heads, r_heads = markdown_headings(gold), markdown_headings(report)
    used: set[int] = set()
    rows = []
    for level, title in g_heads:
        j = next(
            (
                k
                for k, (_, t) in enumerate(r_heads)
                if k not in used and same_heading(title, t, HEADING_CUTOFF)
            ),
            None,
        )
        if j is not None:
            used.add(j)
        match = (
            esc(f"{'#' * r_heads[j][0]} {r_heads[j][1]}")
            if j is not None
            else '<span class="bad">(none)</span>'
        )
        rows.append([esc(f"{'#' * level} {title}"), match])
    rows += [
        ['<span class="muted">(none)</span>', esc(f"{'#' * lv} {t}")]
        for k, (lv, t) in enumerate(r_heads)
        if k not in used
    ]
    found = len(used)
    summary = f"{found}/{len(g_heads)} gold heading(s) found in the report"
    head = f"<p>{summary}; {len(r_heads) - found} heading(s) of the report not in gold.</p>"
    return head + table(["gold heading", "report heading"], rows), summary
