"""Table and text fidelity of a generated report against the gold report (SPEC §5; paper 002 §4.1, App. A,
adapted from HTML pages to Markdown reports).

**Tables.** Every pipe table of both reports becomes a tree table -> rows -> cells (Markdown has no spans,
so every cell spans 1; the header row is a row like the others, as ``th`` counts as ``td``). Each gold x
generated pair gets the candidate score

    0.45 TEDS + 0.25 TEDS-S + 0.20 s_text + 0.10 s_pos

where TEDS / TEDS-S come from :func:`tasks.score.tables.teds_trees`, s_text is rapidfuzz's
``partial_ratio`` / 100 of the two tables' whitespace-collapsed texts (cells joined row by row), and s_pos
replaces the paper's box overlap (reports have no page geometry): 1 - |relative position of the table
among its report's tables, gold vs generated| (relative position = index / (count - 1), 0 for a single
table). Pairs below 0.40 are unavailable; the rest are assigned one-to-one by
``scipy.optimize.linear_sum_assignment`` (global, not greedy), and assigned pairs below 0.40 are dropped.

Report-level table scores: ``teds`` and ``teds_s`` = mean over matched pairs + unmatched gold tables +
unmatched generated tables, an unmatched table counting 0 (a missing table and a spurious one both cost).
A gold report without tables has no table score (None), as pages without a ground-truth table are left
out of the paper's table means.

**Text.** ``text_edit_distance`` = Levenshtein(T_g, T_p) / max(|T_g|, |T_p|, 1) over the whole reports'
texts, normalised conservatively: whitespace runs collapsed, ``$`` delimiters removed, everything else
(punctuation, Markdown table pipes, headings marks) kept. 0 = identical; lower is better.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
from rapidfuzz import fuzz
from rapidfuzz.distance import Levenshtein
from scipy.optimize import linear_sum_assignment

from tasks.score.tables import TableCell, TableTree, teds_trees
from tasks.score.tree import table_grids

__all__ = [
    "MATCH_THRESHOLD",
    "TableMatch",
    "TableFidelity",
    "markdown_tables",
    "normalise_text",
    "table_fidelity",
    "text_edit_distance",
]

WEIGHTS = (0.45, 0.25, 0.20, 0.10)  # TEDS, TEDS-S, text similarity, position similarity
MATCH_THRESHOLD = 0.40
_WS = re.compile(r"\s+")


def markdown_tables(markdown: str) -> list[TableTree]:
    """The pipe tables of a Markdown report as TEDS trees, in document order."""
    return [
        TableTree(rows=tuple(tuple(TableCell(text=c) for c in row) for row in grid))
        for grid in table_grids(markdown)
    ]


def _table_text(t: TableTree) -> str:
    return " ".join(" ".join(c.text for c in row) for row in t.rows)


def _positions(n: int) -> np.ndarray:
    return np.zeros(n) if n <= 1 else np.arange(n) / (n - 1)


@dataclass(frozen=True)
class TableMatch:
    gold: int  # index among the gold report's tables
    generated: int
    score: float  # the candidate score
    teds: float
    teds_s: float


@dataclass
class TableFidelity:
    n_gold: int
    n_generated: int
    matches: list[TableMatch] = field(default_factory=list)

    @property
    def denominator(self) -> int:
        return self.n_gold + self.n_generated - len(self.matches)

    @property
    def teds(self) -> float | None:
        if not self.n_gold:
            return None
        return sum(m.teds for m in self.matches) / self.denominator

    @property
    def teds_s(self) -> float | None:
        if not self.n_gold:
            return None
        return sum(m.teds_s for m in self.matches) / self.denominator


def table_fidelity(gold_markdown: str, generated_markdown: str) -> TableFidelity:
    """Tables of both reports matched one-to-one (thresholded Hungarian) with their TEDS / TEDS-S."""
    g, p = markdown_tables(gold_markdown), markdown_tables(generated_markdown)
    out = TableFidelity(len(g), len(p))
    if not g or not p:
        return out
    gpos, ppos = _positions(len(g)), _positions(len(p))
    gtext, ptext = [_table_text(t) for t in g], [_table_text(t) for t in p]
    score = np.zeros((len(g), len(p)))
    parts: dict[tuple[int, int], tuple[float, float]] = {}
    for i, a in enumerate(g):
        for j, b in enumerate(p):
            t, ts = teds_trees(a, b), teds_trees(a, b, structure_only=True)
            s_text = fuzz.partial_ratio(gtext[i], ptext[j]) / 100.0
            s_pos = 1.0 - abs(gpos[i] - ppos[j])
            score[i, j] = WEIGHTS[0] * t + WEIGHTS[1] * ts + WEIGHTS[2] * s_text + WEIGHTS[3] * s_pos
            parts[(i, j)] = (t, ts)
    # unavailable pairs count 0: the assignment maximises the total score of available pairs
    masked = np.where(score >= MATCH_THRESHOLD, score, 0.0)
    rows, cols = linear_sum_assignment(masked, maximize=True)
    for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
        if score[i, j] >= MATCH_THRESHOLD:
            out.matches.append(TableMatch(i, j, float(score[i, j]), *parts[(i, j)]))
    return out


def normalise_text(markdown: str) -> str:
    return _WS.sub(" ", markdown.replace("$", "")).strip()


def text_edit_distance(gold_markdown: str, generated_markdown: str) -> float:
    """Levenshtein / max(len, 1) of the normalised whole-report texts (0 = identical)."""
    a, b = normalise_text(gold_markdown), normalise_text(generated_markdown)
    return Levenshtein.distance(a, b) / max(len(a), len(b), 1)
