"""The sections of a system's page: header, families side by side, separating axes, per category,
pairwise preference and worst instances.
"""

from __future__ import annotations

import math

import pandas as pd

from tasks.score import registry
from tasks.score.diagnostic.analysis import (
    GOLD,
    SATURATION_SPREAD,
    _baseline,
    _family,
    _metric_key,
    _Stats,
    _width,
)
from tasks.score.diagnostic.formatting import (
    _category,
    _ci,
    _ci_note,
    _dates,
    _fmt_cell,
    _metric_label,
    _num,
    _release_label,
    _spread_text,
    _table,
    _txt,
)
from tasks.score.diagnostic.load import _Folder

SATURATED = "saturated: does not separate systems"


WORST_N = 5


def _header(folder: _Folder, st: _Stats, system: str) -> list[str]:
    df = folder.scores
    mine = df[df["system"] == system]
    judges = sorted({j for j in mine["judge"] if j}) or [str(j) for j in folder.manifest.get("judges") or []]
    n_all = df["instance_id"].nunique()
    n_mine = mine["instance_id"].nunique()
    others = [s for s in st.competitors if s != system]
    role = " (reference: the gold report scored against itself)" if system == GOLD else ""
    ref = f" (+ `{GOLD}` as reference)" if GOLD in st.systems and system != GOLD else ""
    return [
        f"# {_txt(system, None)}: diagnostic report",
        "",
        "[← all systems](index.md)",
        "",
        f"- Release: {_release_label(folder)}",
        f"- System: `{_txt(system, None)}`{role}",
        f"- Judges: {'; '.join(f'`{_txt(j, None)}`' for j in judges) or '–'}",
        f"- Instances: {n_mine} of {n_all} ({len(st.categories)} categories), metrics: {len(st.metrics)}",
        f"- Compared with: {', '.join(f'`{_txt(s, None)}`' for s in others) or 'no other system'}{ref}",
        *_dates(folder),
        f"- {_ci_note(st)}",
        "- Trend plots of every metric, all systems: [index](index.md#trend-plots)",
        "",
    ]


def _families_section(st: _Stats, system: str) -> list[str]:
    show_gold = GOLD in st.systems and system != GOLD
    n_comp = len(st.competitors)
    headers = ["Family", "Metric", f"`{_txt(system, None)}` mean [95% CI]", "Rank", "Best other (mean)"]
    headers += [f"`{GOLD}`"] if show_gold else []
    headers += ["Spread", "Separates?"]
    rows = []
    last = None
    for metric in st.metrics:
        fam = _family(metric)
        rank = st.ranks.get((system, metric))
        rank_txt = (
            "ref" if system == GOLD and GOLD not in st.competitors else f"{rank}/{n_comp}" if rank else "–"
        )
        bo_s, bo_v = st.best_other(system, metric)
        sp = st.spreads[metric]
        row = [
            f"**{fam}**" if fam != last else "",
            _metric_label(metric),
            _ci(metric, st.cells.get((system, metric))),
        ]
        row += [rank_txt, f"`{_txt(bo_s, None)}` {_num(metric, bo_v)}" if bo_s else "–"]
        row += [_num(metric, st.mean(GOLD, metric))] if show_gold else []
        row += [
            _spread_text(sp),
            f"⚠ {SATURATED}" if sp.saturated else ("yes" if not math.isnan(sp.spread) else "–"),
        ]
        rows.append(row)
        last = fam
    gold_note = f" (`{GOLD}` excluded: it is the reference column)" if GOLD in st.systems else ""
    intro = (
        f"Rank among {n_comp} system(s){gold_note}; 1 = best, lower-is-better metrics ranked ascending. "
        f"Spread = (max − min of the system means) / width of the metric's range; below {SATURATION_SPREAD} "
        "the metric does not separate the systems."
    )
    return [
        "## All families side by side",
        "",
        intro,
        "",
        *_table(headers, rows, "llrrlrrl" if show_gold else "llrrlrl"),
    ]


def _separation_section(st: _Stats, system: str | None) -> list[str]:
    def by_spread(m: str) -> tuple[int, float, tuple[int, int, str]]:
        spread = st.spreads[m].spread
        return (1, 0.0, _metric_key(m)) if math.isnan(spread) else (0, -spread, _metric_key(m))

    order = sorted(st.metrics, key=by_spread)  # most separating first; undefined spreads last
    holistic = [
        st.spreads[m].spread for m in st.metrics if _baseline(m) and not math.isnan(st.spreads[m].spread)
    ]
    headers = ["#", "Metric", "Family", "Spread", "Lowest system (mean)", "Highest system (mean)"]
    headers += [f"`{_txt(system, None)}` rank"] if system else []
    headers += ["Note"]
    rows = []
    for i, m in enumerate(order, 1):
        sp = st.spreads[m]
        notes = []
        if _baseline(m):
            notes.append("holistic 1–10: saturation baseline")
        if sp.saturated:
            notes.append(f"⚠ {SATURATED}")
        row = [str(i), _metric_label(m), _family(m), _spread_text(sp)]
        row += [f"`{_txt(sp.low_system, None)}` {_num(m, sp.low_mean)}" if sp.low_system else "–"]
        row += [f"`{_txt(sp.high_system, None)}` {_num(m, sp.high_mean)}" if sp.high_system else "–"]
        if system:
            r = st.ranks.get((system, m))
            row.append(f"{r}/{len(st.competitors)}" if r else "–")
        row.append("; ".join(notes))
        rows.append(row)
    out = ["## Which axes separate systems", ""]
    if holistic:
        base = max(holistic)
        above = sum(1 for m in st.metrics if not _baseline(m) and st.spreads[m].spread > base)
        out += [
            f"Holistic 1–10 scores are the saturation baseline: their largest spread is {base:.3f}; "
            f"{above} other metric(s) separate the systems more than that.",
            "",
        ]
    else:
        out += ["Metrics by relative spread across systems, most separating first.", ""]
    return out + _table(headers, rows, "rllrll" + ("r" if system else "") + "l")


def _category_section(st: _Stats, system: str) -> list[str]:
    if not st.categories:
        return ["## Per category", "", "_No categories in scores.parquet._", ""]
    headers = ["Metric", "Overall", *[_category(c) for c in st.categories]]
    rows = []
    for m in st.metrics:
        row = [_metric_label(m), _num(m, st.mean(system, m))]
        for c in st.categories:
            v = st.cat_means.get((system, c, m), math.nan)
            text = _num(m, v)
            if system in st.competitors and not math.isnan(v):
                _, bo = st.best_other(system, m, c)
                better = math.isnan(bo) or (v <= bo if m in registry.lower_is_better() else v >= bo)
                text = f"**{text}**" if better and len(st.competitors) > 1 else text
            row.append(text)
        rows.append(row)
    note = (
        "Mean over the category's instances; bold = best system in that category."
        if len(st.competitors) > 1
        else "Mean over the category's instances."
    )
    return ["## Per category", "", note, "", *_table(headers, rows, "l" + "r" * (len(headers) - 1))]


def _pairwise_section(folder: _Folder, st: _Stats, system: str) -> list[str]:
    if folder.bt is None and folder.pairwise is None:
        return []
    out = ["## Pairwise preference (Bradley–Terry)", ""]
    bt = folder.bt
    if bt is not None:
        row = bt[bt["system"] == system]
        if row.empty:
            out += [f"`{_txt(system, None)}` is not in bradley_terry.csv.", ""]
        else:
            r = row.iloc[0]

            def get(c: str) -> str:
                return _fmt_cell(r[c]) if c in r.index else "–"

            out += [
                f"- Score {get('score')} [{get('ci_low')}, {get('ci_high')}]; rank {get('rank')} "
                f"(rank CI {get('rank_low')}–{get('rank_high')}); "
                f"record {get('wins')}–{get('losses')}–{get('ties')} (W–L–T) in {get('games')} game(s)",
                "",
            ]
        sort_cols = ["rank", "system"] if "rank" in bt.columns else ["system"]
        table = bt.sort_values(sort_cols, kind="mergesort")
        rows = []
        for rec in table.itertuples(index=False):
            cells = [_fmt_cell(v) for v in rec]
            if rec.system == system:
                cells = [f"**{c}**" for c in cells]
            rows.append(cells)
        out += _table([_txt(c, None) for c in table.columns], rows, "l" + "r" * (len(table.columns) - 1))
    pw = folder.pairwise
    if pw is not None:
        out += ["### Pairwise record", ""]
        games = []
        for r in pw.itertuples(index=False):
            if r.system_a == system:
                opp, win, loss = r.system_b, r.vote == "a", r.vote == "b"
            elif r.system_b == system:
                opp, win, loss = r.system_a, r.vote == "b", r.vote == "a"
            else:
                continue
            tie = r.vote == "tie"
            if win or loss or tie:
                games.append((opp, int(win), int(loss), int(tie)))
        if not games:
            out += ["_No pairwise vote involves this system._", ""]
        else:
            g = pd.DataFrame(games, columns=["opp", "w", "l", "t"]).groupby("opp").sum()
            rows = []
            for opp, r in g.iterrows():
                n = int(r["w"] + r["l"] + r["t"])
                rate = (r["w"] + 0.5 * r["t"]) / n
                rows.append(
                    [
                        f"`{_txt(opp, None)}`",
                        str(int(r["w"])),
                        str(int(r["l"])),
                        str(int(r["t"])),
                        str(n),
                        f"{rate:.2f}",
                    ]
                )
            out += _table(
                ["Opponent", "Wins", "Losses", "Ties", "Votes", "Win rate (ties ½)"], rows, "lrrrrr"
            )
    return out


def _worst_section(folder: _Folder, st: _Stats, system: str) -> list[str]:
    out = ["## Worst instances", ""]
    others = [s for s in st.competitors if s != system]
    if not others and GOLD in st.systems and system != GOLD:
        others = [GOLD]
    frame = [m for m in registry.DEFAULT if m in st.metrics] or list(st.metrics)
    if not others:
        return out + ["_No other system to compare with._", ""]
    df = folder.scores
    sub = df[df["metric"].isin(frame) & df["system"].isin([system, *others])]
    piv = sub.pivot(index=["instance_id", "metric"], columns="system", values="value")
    if system not in piv.columns:
        return out + ["_No FRAME scores for this system._", ""]
    opp = piv[[s for s in others if s in piv.columns]]
    records = []
    for (iid, metric), own in piv[system].items():
        vals = opp.loc[(iid, metric)].dropna()
        if math.isnan(own) or vals.empty:
            continue
        lower = metric in registry.lower_is_better()
        best_s = str(vals.idxmin() if lower else vals.idxmax())
        best = float(vals[best_s])
        gap = (own - best if lower else best - own) / _width(metric)
        records.append((iid, metric, float(own), best, best_s, gap))
    if not records:
        return out + ["_No instance scored for both this system and another._", ""]
    r = pd.DataFrame(records, columns=["iid", "metric", "own", "best", "best_s", "gap"])
    # shortfall only: being above the best on one metric does not hide a miss on another
    gaps = r.assign(gap=r["gap"].clip(lower=0.0)).groupby("iid")["gap"].mean()
    gaps = gaps.sort_index().sort_values(ascending=False, kind="mergesort")
    gaps = gaps[gaps > 0].head(WORST_N)
    label = "the best other system" if others != [GOLD] else f"`{GOLD}`"
    out += [
        f"The {WORST_N} instances where `{_txt(system, None)}` is furthest below {label}: mean shortfall "
        f"max(best − own, 0) / range width over {', '.join(f'`{m}`' for m in frame)}; "
        "cells read own vs best (who).",
        "",
    ]
    if gaps.empty:
        return out + ["_No instance where this system is below the best other system._", ""]
    cat = df.drop_duplicates("instance_id").set_index("instance_id")["category"]
    rows = []
    for iid, gap in gaps.items():
        row = [_txt(iid, 100), _category(cat.get(iid, "")) if cat.get(iid) else "–", f"{gap:.3f}"]
        for m in frame:
            hit = r[(r["iid"] == iid) & (r["metric"] == m)]
            if hit.empty:
                row.append("–")
            else:
                h = hit.iloc[0]
                row.append(f"{_num(m, h['own'])} vs {_num(m, h['best'])} (`{_txt(h['best_s'], None)}`)")
        rows.append(row)
    return out + _table(
        ["Instance", "Category", "Mean shortfall", *[f"`{m}`" for m in frame]], rows, "llr" + "l" * len(frame)
    )
