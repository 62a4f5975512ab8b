"""The "Items it failed most" section of a system's page: rubric items, missed gold units, unsupported
claims and low items of other metrics, read from evidence.parquet.
"""

from __future__ import annotations

import re

import pandas as pd

from tasks.score.diagnostic.analysis import GOLD, _Stats, _with_evidence
from tasks.score.diagnostic.formatting import _table, _txt
from tasks.score.diagnostic.load import _Folder

MISS_BELOW = 0.5  # a gold unit / claim scoring below this is missed / unsupported


_RUBRIC_KIND = re.compile(r"^G\d+\s*:")


def _rubric_table(ev: pd.DataFrame, st: _Stats, system: str, top_n: int) -> list[str]:
    rub = ev[ev["kind"].str.match(_RUBRIC_KIND) | ev["metric"].isin(_with_evidence("checks"))]
    if rub.empty or not (rub["system"] == system).any():
        return []
    # one verdict per (system, instance, item): the lowest if an item is stored under several metrics
    per = rub.sort_values("score", kind="mergesort").drop_duplicates(["system", "instance_id", "kind"])
    per = per.assign(failed=per["score"] < 1.0)
    mine = per[per["system"] == system]
    others = per[per["system"].isin([s for s in st.competitors if s != system])]
    o_fail = others.groupby("kind")["failed"].agg(["sum", "count"])
    agg = mine.groupby("kind").agg(failed=("failed", "sum"), graded=("failed", "count")).reset_index()
    agg = agg[agg["failed"] > 0]
    total = int(mine["failed"].sum())
    out = [
        "### Rubric items",
        "",
        f"{total} failed verdict(s) (score < 1) over {len(mine)} graded item(s).",
        "",
    ]
    if agg.empty:
        return out + ["_No rubric item failed._", ""]
    agg = agg.assign(rate=agg["failed"] / agg["graded"]).sort_values(
        ["failed", "rate", "kind"], ascending=[False, False, True], kind="mergesort"
    )
    rows = []
    for r in agg.head(top_n).itertuples(index=False):
        fails = mine[(mine["kind"] == r.kind) & mine["failed"]].sort_values(
            ["score", "instance_id"], kind="mergesort"
        )
        ex = fails.iloc[0]
        example = " — ".join(x for x in (ex["evidence"], ex["rationale"]) if x) or ex["text"]
        other = (
            f"{int(o_fail.loc[r.kind, 'sum'])}/{int(o_fail.loc[r.kind, 'count'])}"
            if r.kind in o_fail.index
            else "–"
        )
        rows.append(
            [
                f"`{_txt(r.kind, None)}`",
                str(int(r.failed)),
                str(int(r.graded)),
                other,
                _txt(ex["instance_id"], 80),
                _txt(example),
            ]
        )
    headers = [
        "Rubric item",
        "Failed",
        "Graded",
        "Other systems failed",
        "Example instance",
        "Example evidence / rationale",
    ]
    return out + _table(headers, rows, "lrrrll")


def _coverage_table(ev: pd.DataFrame, st: _Stats, system: str, top_n: int) -> list[str]:
    cov = ev[ev["metric"].isin(_with_evidence("recall")) & ~ev["kind"].str.match(_RUBRIC_KIND)]
    mine = cov[cov["system"] == system]
    if mine.empty:
        return []
    missed = mine[mine["score"] < MISS_BELOW]
    summary = []
    for m in [x for x in _with_evidence("recall") if x in set(mine["metric"])]:
        g = mine[mine["metric"] == m]
        miss = g["score"] < MISS_BELOW
        by_kind = (
            g.assign(miss=miss)
            .groupby("kind")["miss"]
            .agg(["sum", "count"])
            .sort_values("sum", ascending=False)
        )
        kinds = ", ".join(
            f"{_txt(k, 40)} {int(r['sum'])}/{int(r['count'])}" for k, r in by_kind.head(8).iterrows()
        )
        summary.append(f"- `{m}`: {int(miss.sum())}/{len(g)} missed; by type: {kinds}")
    out = ["### Gold units most often missed", "", f"Missed = score < {MISS_BELOW}.", "", *summary, ""]
    if missed.empty:
        return out + ["_No gold unit missed._", ""]
    key = ["instance_id", "metric", "index"]
    comp = [s for s in st.competitors if s != system]
    o = cov[cov["system"].isin(comp)].assign(miss=lambda d: d["score"] < MISS_BELOW)
    o_miss = o.groupby(key)["miss"].agg(o_missed="sum", o_graded="count").reset_index()
    gold_ref = (
        cov.loc[cov["system"] == GOLD, [*key, "evidence_ref"]]
        .drop_duplicates(key)
        .rename(columns={"evidence_ref": "gold_section"})
    )
    # "most often": the same unit text missed in several instances counts once per instance
    missed = missed.assign(norm=missed["text"].str.lower().str.split().str.join(" "))
    missed = missed.sort_values(["score", "instance_id", "index"], kind="mergesort")
    missed = missed.merge(o_miss, on=key, how="left")
    missed[["o_missed", "o_graded"]] = missed[["o_missed", "o_graded"]].fillna(0).astype(int)
    agg = missed.groupby(["metric", "norm"], sort=False).agg(
        times=("instance_id", "nunique"),
        mean=("score", "mean"),
        all_o_missed=("o_missed", "sum"),
        all_o_graded=("o_graded", "sum"),
    )
    first = missed.drop_duplicates(["metric", "norm"]).drop(columns=["o_missed", "o_graded"])
    first = first.join(agg, on=["metric", "norm"]).merge(gold_ref, on=key, how="left")
    first = first.rename(columns={"all_o_missed": "o_missed", "all_o_graded": "o_graded"})
    first = first.sort_values(
        ["times", "mean", "o_missed", "instance_id", "index"],
        ascending=[False, True, True, True, True],
        kind="mergesort",
    ).head(top_n)
    rows = [
        [
            f"`{r.metric}`",
            str(int(r.times)),
            f"{r.mean:.2f}",
            f"{r.o_missed}/{r.o_graded}" if r.o_graded else "–",
            _txt(r.kind, 40),
            _txt(r.text),
            _txt(r.gold_section if isinstance(r.gold_section, str) and r.gold_section else "–", 120),
            _txt(r.instance_id, 80),
        ]
        for r in first.itertuples(index=False)
    ]
    headers = [
        "Metric",
        "Times missed",
        "Score",
        "Missed by others",
        "Type",
        "Gold unit",
        "Section (in gold)",
        "Instance",
    ]
    return out + _table(headers, rows, "lrrrllll")


def _faithfulness_table(ev: pd.DataFrame, system: str, top_n: int) -> list[str]:
    mine = ev[(ev["system"] == system) & ev["metric"].isin(_with_evidence("support"))]
    if mine.empty:
        return []
    summary = [
        f"- `{m}`: {int((g['score'] < MISS_BELOW).sum())}/{len(g)} claims unsupported (score < {MISS_BELOW})"
        for m, g in mine.groupby("metric", sort=True)
    ]
    low = mine[mine["score"] < 1.0].sort_values(["score", "metric", "instance_id", "index"], kind="mergesort")
    if low.empty:
        return ["### Lowest-supported claims", "", *summary, "", "_Every claim is fully supported._", ""]
    low = low.head(top_n)
    rows = [
        [
            f"`{r.metric}`",
            f"{r.score:.2f}",
            _txt(r.text),
            _txt(r.rationale),
            _txt(r.evidence_ref or "–", 80),
            _txt(r.instance_id, 80),
        ]
        for r in low.itertuples(index=False)
    ]
    headers = ["Metric", "Support", "Claim", "Rationale", "Evidence from", "Instance"]
    return ["### Lowest-supported claims", "", *summary, "", *_table(headers, rows, "lrllll")]


def _other_items_table(ev: pd.DataFrame, system: str, top_n: int) -> list[str]:
    handled = {*_with_evidence("recall"), *_with_evidence("support"), *_with_evidence("checks")}
    mine = ev[(ev["system"] == system) & ~ev["metric"].isin(handled) & ~ev["kind"].str.match(_RUBRIC_KIND)]
    if mine.empty:
        return []
    low = mine[mine["score"] < 1.0].sort_values(["score", "metric", "instance_id", "index"], kind="mergesort")
    if low.empty:
        return []
    low = low.head(top_n)
    rows = [
        [
            f"`{r.metric}`",
            _txt(r.kind, 40),
            f"{r.score:.2f}",
            _txt(r.text),
            _txt(r.rationale),
            _txt(r.instance_id, 80),
        ]
        for r in low.itertuples(index=False)
    ]
    headers = ["Metric", "Kind", "Score", "Item", "Rationale", "Instance"]
    return ["### Lowest-scored items of other metrics", "", *_table(headers, rows, "llrlll")]


def _failures_section(folder: _Folder, st: _Stats, system: str, top_n: int) -> list[str]:
    out = ["## Items it failed most", ""]
    ev = folder.evidence
    if ev is None:
        return out + ["_No evidence.parquet in the scores folder._", ""]
    ev = ev[ev["score"].notna()]
    parts = (
        _rubric_table(ev, st, system, top_n)
        + _coverage_table(ev, st, system, top_n)
        + _faithfulness_table(ev, system, top_n)
        + _other_items_table(ev, system, top_n)
    )
    return out + (parts or ["_No graded items for this system._", ""])
