"""TablesFamily and TextEditDistanceFamily: their metric specs, the tables family's evidence items (one per
gold table, one per spurious generated table) and what the metric checklist does not hold them to."""

from __future__ import annotations

from schemas.scoring import ItemScore, MetricResult
from tasks.markdown.teds import TableTree
from tasks.score.fidelity.matching import TableFidelity, markdown_tables, table_fidelity
from tasks.score.fidelity.text import text_edit_distance
from tasks.score.metric import Inputs, MetricFamily, MetricSpec


def _head(t: TableTree) -> str:
    return " | ".join(c.text for c in t.rows[0])[:300] if t.rows else ""


def table_items(
    fid: TableFidelity, gold_t: list[TableTree], gen_t: list[TableTree], teds_s: bool
) -> list[ItemScore]:
    """One evidence item per gold table (its match's TEDS or TEDS-S, 0 unmatched), one per spurious table."""
    by_gold = {m.gold: m for m in fid.matches}
    items = []
    for i, t in enumerate(gold_t):
        m = by_gold.get(i)
        items.append(
            ItemScore(
                index=i,
                kind="table",
                text=_head(t),
                score=((m.teds_s if teds_s else m.teds) if m else 0.0),
                evidence=_head(gen_t[m.generated]) if m else "",
                evidence_ref=f"generated table {m.generated}" if m else "",
                rationale=f"matched, candidate score {m.score:.3f}"
                if m
                else "no generated table scores >= 0.40",
            )
        )
    matched = {m.generated for m in fid.matches}
    for j, t in enumerate(gen_t):
        if j not in matched:
            items.append(
                ItemScore(
                    index=len(gold_t) + j,
                    kind="spurious_table",
                    text=_head(t),
                    score=0.0,
                    evidence_ref=f"generated table {j}",
                    rationale="generated table without a gold counterpart",
                )
            )
    return items


# What the metric checklist does not hold these to (docs/metrics/robustness.md).
_TABLES_ONLY = "compares the reports' tables only; direction words live in prose"
_MATCHED = "each table of Y is scored against its matched table of R', wherever that stands"
_YEAR_CELL = "a shifted year is a header cell or two of a table's hundreds, weighed as one cell each"
_CELL_CHARACTERS = (
    "cells compared as strings (paper 002 §4.1): a figure counts by its characters, so a sign (one or two"
    " characters of a cell) moves it less than a rescaled figure does, and neither by what it means"
)
_TEDS_UNCLAIMED = (
    ("directions", _TABLES_ONLY),
    ("order", _MATCHED),
    ("periods", _YEAR_CELL),
    ("figures", _CELL_CHARACTERS),
)
_STRUCTURE_ONLY = "structure only: the text of a cell costs nothing"
_TEDS_S_UNCLAIMED = (
    *((a, _STRUCTURE_ONLY) for a in ("figures", "directions", "periods")),
    ("order", _MATCHED),
)
_CHARACTERS = (
    "a character distance over the whole text: a changed figure or word is a few characters of thousands,"
    " and a removed table counts by its share of the characters (under 5% for the small tables of surveys)"
)
_TED_UNCLAIMED = tuple((a, _CHARACTERS) for a in ("figures", "directions", "periods", "tables"))


class TablesFamily(MetricFamily):
    """TEDS and TEDS-S over the Hungarian-matched tables of Y and R' (paper 002 §4.1)."""

    name = "tables"
    metrics = (
        MetricSpec("teds", group="fidelity", unclaimed=_TEDS_UNCLAIMED),
        MetricSpec("teds_s", group="fidelity", unclaimed=_TEDS_S_UNCLAIMED),
    )
    reads = frozenset({"gold"})
    summary = "table fidelity: TEDS and structure-only TEDS-S of the matched tables"

    def score(self, inputs: Inputs) -> list[MetricResult]:
        fid = table_fidelity(inputs.gold, inputs.generated)
        gold_t, gen_t = markdown_tables(inputs.gold), markdown_tables(inputs.generated)
        detail = {"gold_tables": fid.n_gold, "generated_tables": fid.n_generated, "matched": len(fid.matches)}
        return [
            MetricResult(
                metric=metric,
                value=fid.teds_s if structure_only else fid.teds,
                judge="deterministic",
                population=len(gold_t),
                items=table_items(fid, gold_t, gen_t, structure_only) if gold_t else [],
                detail=dict(detail),
            )
            for metric, structure_only in (("teds", False), ("teds_s", True))
        ]


class TextEditDistanceFamily(MetricFamily):
    """Normalised Levenshtein distance of the two reports' texts (paper 002); lower is better."""

    name = "text_edit_distance"
    metrics = (
        MetricSpec("text_edit_distance", higher_is_better=False, group="fidelity", unclaimed=_TED_UNCLAIMED),
    )
    reads = frozenset({"gold"})
    summary = "normalised edit distance of the whole texts (0 = identical; lower is better)"

    def score(self, inputs: Inputs) -> list[MetricResult]:
        value = text_edit_distance(inputs.gold, inputs.generated)
        return [MetricResult(metric="text_edit_distance", value=value, judge="deterministic")]
