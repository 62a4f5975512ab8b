"""Table matching (paper 002 §4.1): the pipe tables of both reports paired one-to-one by a thresholded
Hungarian assignment on a candidate score, with the TEDS and TEDS-S of every matched pair."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from rapidfuzz import fuzz
from scipy.optimize import linear_sum_assignment

from tasks.markdown.tables import table_trees
from tasks.markdown.teds import TableTree, teds_trees

WEIGHTS = (0.45, 0.25, 0.20, 0.10)  # TEDS, TEDS-S, text similarity, position similarity
MATCH_THRESHOLD = 0.40
_SLACK = 1e-6  # bounds are loosened by this much, so rounding never drops a pair that reaches the threshold


def markdown_tables(markdown: str) -> list[TableTree]:
    """The pipe tables of a Markdown report as TEDS trees, in document order (the scorers' reading)."""
    return table_trees(markdown)


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


def candidate_scores(
    g: list[TableTree], p: list[TableTree]
) -> tuple[np.ndarray, dict[tuple[int, int], tuple[float, float]]]:
    """The candidate score of every (gold, generated) table pair that reaches MATCH_THRESHOLD, 0 for the
    others, and the (TEDS, TEDS-S) of the pairs that reach it.

    Only those pairs take part in the matching, so a pair whose score cannot reach the threshold is left at
    0 without its costly parts: exact, and it skips most of the work on reports with many tables."""
    gpos, ppos = _positions(len(g)), _positions(len(p))
    gtext, ptext = [_table_text(t) for t in g], [_table_text(t) for t in p]
    score = np.zeros((len(g), len(p)))
    parts: dict[tuple[int, int], tuple[float, float]] = {}
    w_t, w_ts, w_text, w_pos = WEIGHTS
    for i, a in enumerate(g):
        for j, b in enumerate(p):
            s_pos = 1.0 - abs(gpos[i] - ppos[j])
            # TED >= |n_a - n_b| (unit insertions/deletions), so TEDS and TEDS-S <= n_min / n_max
            ceiling = min(a.n_nodes, b.n_nodes) / max(a.n_nodes, b.n_nodes, 1)
            if (w_t + w_ts) * ceiling + w_text + w_pos * s_pos < MATCH_THRESHOLD - _SLACK:
                continue
            t, ts = teds_trees(a, b), teds_trees(a, b, structure_only=True)
            rest = w_t * t + w_ts * ts + w_pos * s_pos
            # the text similarity the pair needs to reach the threshold (0-100; below it rapidfuzz says 0)
            need = (MATCH_THRESHOLD - rest) / w_text * 100.0 - _SLACK
            if need > 100.0:
                continue
            s_text = fuzz.partial_ratio(gtext[i], ptext[j], score_cutoff=max(0.0, need)) / 100.0
            value = w_t * t + w_ts * ts + w_text * s_text + w_pos * s_pos  # the documented order
            if value >= MATCH_THRESHOLD:
                score[i, j] = value
                parts[(i, j)] = (t, ts)
    return score, parts


def table_fidelity(gold_markdown: str, generated_markdown: str) -> TableFidelity:
    """Tables of both reports matched one-to-one (thresholded Hungarian) with their TEDS / TEDS-S."""
    g, p = markdown_tables(gold_markdown), markdown_tables(generated_markdown)
    out = TableFidelity(len(g), len(p))
    if not g or not p:
        return out
    # pairs below the threshold are unavailable (0): the assignment maximises the total of available pairs
    score, parts = candidate_scores(g, p)
    rows, cols = linear_sum_assignment(score, maximize=True)
    for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
        if score[i, j] >= MATCH_THRESHOLD:
            out.matches.append(TableMatch(i, j, float(score[i, j]), *parts[(i, j)]))
    return out
