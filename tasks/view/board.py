"""The index page (the run, its leaderboard per scope, every instance) and a page per system (its
instances, sortable by any metric)."""

from __future__ import annotations

import json

import pandas as pd

from tasks.view.load import GOLD, Run
from tasks.view.page import esc, fmt, num_cell, page, page_name, sortable_table, table

__all__ = ["index_page", "instance_href", "system_href", "system_page"]


def system_href(system: str, up: str = "") -> str:
    return f"{up}systems/{page_name(system)}.html"


def instance_href(instance_id: str, up: str = "") -> str:
    return f"{up}instances/{page_name(instance_id)}.html"


def _notes(run: Run) -> str:
    return "".join(f'<p class="note">{esc(n)}</p>' for n in run.notes)


def _run_table(run: Run) -> str:
    m = run.manifest
    rows = [
        ["release", esc(m.get("release", ""))],
        ["scored at", esc(m.get("scored_at", ""))],
        ["instances", esc(run.scores["instance_id"].nunique())],
        ["systems", esc(", ".join(run.systems))],
        ["metrics", esc(", ".join(run.metrics))],
        ["judges", esc(", ".join(map(str, m.get("judges") or [])))],
        ["settings", esc(json.dumps(m.get("settings") or {}, sort_keys=True))],
    ]
    return table(["run", ""], rows)


def _ci(r: dict) -> str:
    lo, hi = r.get("ci_low"), r.get("ci_high")
    ci = f" [{fmt(lo)}, {fmt(hi)}]" if fmt(lo) != "–" else ""
    n = f' <span class="muted">n={esc(r["n"])}</span>' if pd.notna(r.get("n")) else ""
    return f"{fmt(r.get('mean'))}{ci}{n}"


def _lb_table(rows_of: list[tuple[str, str]], cells: dict, metrics: list[str], first: str) -> str:
    """A sortable table of leaderboard cells: one row per (label HTML, key), one column per metric."""
    cols = [(first, first, False)] + [(m, m, True) for m in metrics]
    rows = []
    for label, key in rows_of:
        row = [label]
        for m in metrics:
            r = cells.get((key, m))
            v = f' data-v="{float(r["mean"]):.6g}"' if r is not None and fmt(r["mean"]) != "–" else ""
            row.append(f'<td class="n"{v}>{_ci(r) if r is not None else "–"}</td>')
        rows.append(row)
    return sortable_table(cols, rows)


def _scope_table(run: Run, scope: pd.DataFrame) -> str:
    """One scope of the leaderboard: a row per system (linked), a column per metric."""
    metrics = list(dict.fromkeys(scope["metric"]))
    cells = {(r["system"], r["metric"]): r for r in scope.to_dict("records")}
    systems = [s for s in run.systems if any((s, m) in cells for m in metrics)]
    rows = [(f'<td data-v="{esc(s)}"><a href="{esc(system_href(s))}">{esc(s)}</a></td>', s) for s in systems]
    return _lb_table(rows, cells, metrics, "system")


def _system_scopes(lb: pd.DataFrame) -> str:
    """One system's leaderboard rows: a row per scope."""
    metrics = list(dict.fromkeys(lb["metric"]))
    cells = {(r["scope"], r["metric"]): r for r in lb.to_dict("records")}
    rows = [(esc(s), s) for s in dict.fromkeys(lb["scope"])]
    return _lb_table(rows, cells, metrics, "scope")


def _failures(run: Run) -> str:
    rows = [
        [
            f'<a href="{esc(system_href(s))}">{esc(s)}</a>',
            esc(len(errs)),
            f"<pre>{esc(next(iter(errs.values())))}</pre>",
        ]
        for s, errs in run.errors.items()
        if errs
    ]
    if not rows:
        return ""
    return "<h2>Failed generations</h2>" + table(["system", "failed", "first error"], rows)


def index_page(run: Run) -> str:
    parts = [
        _notes(run),
        _run_table(run),
        "<h2>Leaderboard</h2>",
        '<p class="muted">Mean [95% CI] per system and metric (leaderboard.csv); click a header to sort.</p>',
    ]
    for scope, g in run.leaderboard.groupby("scope", sort=False):
        parts.append(f"<h3>{esc(scope)}</h3>{_scope_table(run, g)}")
    parts.append(_failures(run))
    parts.append("<h2>Systems</h2><ul>")
    parts += [f'<li><a href="{esc(system_href(s))}">{esc(s)}</a></li>' for s in run.systems]
    parts.append("</ul><h2>Instances</h2>")
    n = run.scores.groupby("instance_id")["system"].nunique()
    rows = [
        [f'<a href="{esc(instance_href(i))}">{esc(i)}</a>', esc(c), esc(int(n.get(i, 0)))]
        for i, c in zip(run.instances["instance_id"], run.instances["category"], strict=True)
    ]
    parts.append(
        sortable_table(
            [
                ("instance", "instance", False),
                ("category", "category", False),
                ("systems", "systems scored", True),
            ],
            rows,
        )
    )
    return page(f"frame scores: {run.manifest.get('release', '')}", "".join(parts))


def system_page(run: Run, system: str) -> str:
    """The system's leaderboard row and every instance with its value of each metric, sortable."""
    mine = run.scores[run.scores["system"] == system]
    values = mine.pivot_table(index="instance_id", columns="metric", values="value", aggfunc="first")
    metrics = [m for m in run.metrics if m in values.columns]
    category = dict(zip(run.instances["instance_id"], run.instances["category"], strict=True))
    rows = []
    for iid in values.index:
        link = f'<a href="{esc(instance_href(iid, "../"))}">{esc(iid)}</a>' if iid in category else esc(iid)
        row = [
            f'<td data-v="{esc(iid)}">{link}</td>',
            esc(category.get(iid, "")),
        ]
        row += [num_cell(values.at[iid, m]) for m in metrics]
        rows.append(row)
    cols = [("instance", "instance", False), ("category", "category", False)] + [
        (m, m, True) for m in metrics
    ]
    lb = run.leaderboard[run.leaderboard["system"] == system]
    parts = [_notes(run)]
    if not lb.empty:
        parts.append("<h2>Leaderboard</h2>" + _system_scopes(lb))
    errs = run.errors.get(system) or {}
    if errs:
        parts.append(f"<h2>Failed generations ({len(errs)})</h2>")
        parts.append(
            table(["instance", "error"], [[esc(i), f"<pre>{esc(e)}</pre>"] for i, e in errs.items()])
        )
    note = "gold is Y itself: its values are each metric's ceiling." if system == GOLD else ""
    parts.append(
        f'<h2>Instances ({len(rows)})</h2><p class="muted">Click a header to sort '
        f"(or open this page with <code>?sort=METRIC&amp;dir=asc|desc</code>). {esc(note)}</p>"
    )
    parts.append(sortable_table(cols, rows, main=True))
    return page(f"system: {system}", "".join(parts), [("../index.html", "index")])
