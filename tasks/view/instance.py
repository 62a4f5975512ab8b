"""A page per instance (S, Y and each system's report side by side, every metric's value and evidence
per system) and a page per pair of systems on it (a line diff of their reports)."""

from __future__ import annotations

import difflib
from itertools import combinations

import pandas as pd

from tasks.view.board import instance_href, system_href
from tasks.view.evidence import (
    detail_table,
    evidence_summary,
    headings_alignment,
    metric_evidence,
    parse_detail,
)
from tasks.view.load import GOLD, Run
from tasks.view.page import esc, fmt, markdown_html, num_cell, page, page_name, table

__all__ = ["diff_href", "diff_page", "instance_page", "pairs"]

_NONE = pd.DataFrame(columns=["index", "score"])
_META = ("category", "domain", "t_sample", "t_target", "periods_skipped", "grounding_doc_ids")


def _shown(value: object) -> str:
    """A metadata value as text: a list (numpy array) as its items joined."""
    if hasattr(value, "__len__") and not isinstance(value, str):
        return ", ".join(map(str, value))  # type: ignore[arg-type]
    return str(value)


def diff_href(instance_id: str, a: str, b: str, up: str = "") -> str:
    return f"{up}diffs/{page_name(instance_id, 40)}-{page_name(a + chr(0) + b, 20)}.html"


def pairs(run: Run, instance_id: str) -> list[tuple[str, str]]:
    """Every pair of systems with a report on the instance (gold's is Y), in the run's system order."""
    have = [s for s in run.systems if instance_id in run.reports.get(s, {})]
    return list(combinations(have, 2))


def _column(title: str, markdown: str | None, error: str = "") -> str:
    body = markdown_html(markdown) if markdown is not None else f'<p class="bad">no report: {esc(error)}</p>'
    return f'<div class="col"><h3>{esc(title)}</h3><div class="doc">{body}</div></div>'


def _scores_table(run: Run, mine: pd.DataFrame) -> str:
    values = mine.pivot_table(index="system", columns="metric", values="value", aggfunc="first")
    metrics = [m for m in run.metrics if m in values.columns]
    rows = [
        [
            f'<a href="{esc(system_href(s, "../"))}">{esc(s)}</a>',
            *(num_cell(values.at[s, m]) for m in metrics),
        ]
        for s in run.systems
        if s in values.index
    ]
    return table(["system", *metrics], rows)


def _evidence(run: Run, iid: str, system: str, mine: pd.DataFrame, ev: dict) -> str:
    """One <details> per metric of `system` on the instance: its value, detail and evidence items."""
    out = []
    rows = mine[mine["system"] == system].set_index("metric")
    for metric in [m for m in run.metrics if m in rows.index]:
        r = rows.loc[metric]
        items = ev.get((system, metric), _NONE)
        detail = parse_detail(r.get("detail_json")) if "detail_json" in rows.columns else {}
        body = detail_table(detail)
        summary = esc(evidence_summary(metric, items, detail))
        if metric == "structure":
            aligned, summary = headings_alignment(
                run.reports[GOLD].get(iid, ""), run.reports.get(system, {}).get(iid, "")
            )
            body += aligned
        if not items.empty or metric != "structure":
            body += metric_evidence(metric, items, detail)
        out.append(
            f'<details class="metric" data-metric="{esc(metric)}"><summary><b>{esc(metric)}</b> = '
            f'{fmt(r["value"])} <span class="muted">({summary})</span></summary>'
            f"{body}</details>"
        )
    return "".join(out)


def _neighbours(run: Run, iid: str) -> list[tuple[str, str]]:
    ids = list(run.instances["instance_id"])
    i = ids.index(iid)
    crumbs = [("../index.html", "index")]
    if i > 0:
        crumbs.append((instance_href(ids[i - 1], "../"), "previous instance"))
    if i + 1 < len(ids):
        crumbs.append((instance_href(ids[i + 1], "../"), "next instance"))
    return crumbs


def instance_page(run: Run, inst: dict) -> str:
    iid = str(inst["instance_id"])
    mine = run.scores[run.scores["instance_id"] == iid]
    rows = run.evidence[run.evidence["instance_id"] == iid]
    ev = {k: g for k, g in rows.groupby(["system", "metric"], sort=False)}
    meta = [[esc(k), esc(_shown(inst[k]))] for k in _META if k in inst]
    cols = [
        _column("S: sample report", str(inst["sample_markdown"])),
        _column("Y: gold report", str(inst["target_markdown"])),
    ]
    for s in run.systems:
        if s != GOLD:
            cols.append(
                _column(
                    f"report: {s}",
                    run.reports.get(s, {}).get(iid),
                    run.errors.get(s, {}).get(iid, "not generated"),
                )
            )
    parts = [
        table(["instance", iid], meta),  # table() escapes its headers
        "<h2>Scores</h2>",
        _scores_table(run, mine),
        '<h2 id="reports">Reports side by side</h2>',
        f'<div class="cols">{"".join(cols)}</div>',
        "<h2>Diffs</h2><ul>",
    ]
    parts += [
        f'<li><a href="{esc(diff_href(iid, a, b, "../"))}">{esc(a)} vs {esc(b)}</a></li>'
        for a, b in pairs(run, iid)
    ]
    parts.append('</ul><h2 id="evidence">Evidence</h2>')
    scored = set(mine["system"])
    for s in [s for s in run.systems if s in scored and s != GOLD] + [GOLD] * (GOLD in scored):
        parts.append(
            f'<section class="system" data-system="{esc(s)}">'
            f'<h3><a href="{esc(system_href(s, "../"))}">{esc(s)}</a></h3>'
            f"{_evidence(run, iid, s, mine, ev)}</section>"
        )
    return page(f"instance: {iid}", "".join(parts), _neighbours(run, iid))


def _diff_rows(a: str, b: str) -> list[str]:
    rows = []
    for line in difflib.unified_diff(a.splitlines(), b.splitlines(), "a", "b", n=3, lineterm=""):
        if line.startswith(("---", "+++")):
            continue
        cls = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "")
        rows.append(f'<tr class="{cls}"><td>{esc(line)}</td></tr>')
    return rows


def diff_page(run: Run, iid: str, a: str, b: str) -> str:
    """A unified diff of the reports of `a` and `b` on instance `iid` (lines only in a's: -, in b's: +)."""
    ra, rb = run.reports[a][iid], run.reports[b][iid]
    rows = _diff_rows(ra, rb)
    ratio = difflib.SequenceMatcher(None, ra.splitlines(), rb.splitlines(), autojunk=False).ratio()
    body = (
        f'<p>Lines <span class="bad">- only in {esc(a)}</span>, <span class="ok">+ only in {esc(b)}</span>; '
        f"line similarity {ratio:.3f}.</p>"
        + (
            f'<table class="diff"><tbody>{"".join(rows)}</tbody></table>'
            if rows
            else "<p>The two reports are identical.</p>"
        )
    )
    crumbs = [("../index.html", "index"), (instance_href(iid, "../"), "instance")]
    return page(f"diff: {a} vs {b} on {iid}", body, crumbs)
