"""Algorithm 1 (semantic tree edit distance, paper 000 §4): the node cost matrix, the polynomial
(i, e1, j, e2) dynamic programme, the similarity it yields and a literal transcription kept as the
reference. Definitions, the DP and its proof sketch: docs/metrics/structure.md."""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from tasks.score.structural_similarity.flat import FlatTree, flatten
from tasks.score.structural_similarity.node_similarity import NodeSimilarity

__all__ = ["literal_cost", "structural_cost", "structural_similarity"]


def _cost_matrix(
    t1: FlatTree, t2: FlatTree, node_similarity: NodeSimilarity, gamma: float
) -> list[list[float]]:
    """CostN for the root pair and every non-root pair (the only pairs the recursion can reach)."""
    n, m = len(t1), len(t2)
    matrix = getattr(node_similarity, "matrix", None)
    if callable(matrix):  # every pair in a few array operations (make_node_similarity)
        depth = np.minimum.outer(np.asarray(t1.depth, dtype=float), np.asarray(t2.depth, dtype=float))
        c = 2.0 * (1.0 - np.asarray(matrix(t1.objs, t2.objs), dtype=float))
        return (c / (depth + 1.0) ** gamma if gamma else c).tolist()
    prepare = getattr(node_similarity, "prepare", None)
    if callable(prepare):
        prepare(list(t1.objs) + list(t2.objs))
    cost = [[0.0] * m for _ in range(n)]
    for i in range(n):
        di = t1.depth[i]
        oi = t1.objs[i]
        row = cost[i]
        for j in range(1 if i else 0, m if i else 1):
            d = min(di, t2.depth[j])
            c = 2.0 * (1.0 - float(node_similarity(oi, t2.objs[j])))
            row[j] = c / (d + 1) ** gamma if gamma else c
    return cost


# ---------------------------------------------------------------- polynomial DP


def _forest_starts(t: FlatTree) -> dict[int, int]:
    """Distinct forest ends e -> smallest start of a CostF range ending at e (child forests of nodes)."""
    starts: dict[int, int] = {}
    for p in range(len(t)):
        if t.children[p]:
            e = t.end[p]
            if e not in starts or p + 1 < starts[e]:
                starts[e] = p + 1
    return starts


def structural_cost(tree_a: Any, tree_b: Any, node_similarity: NodeSimilarity, gamma: float = 0.0) -> float:
    """CostT(T1, T2) of Algorithm 1, computed by the (i, e1, j, e2) dynamic programme."""
    t1, t2 = flatten(tree_a), flatten(tree_b)
    cost = _cost_matrix(t1, t2, node_similarity, gamma)
    end1, end2 = t1.end, t2.end
    n, m = len(t1), len(t2)
    starts1, starts2 = _forest_starts(t1), _forest_starts(t2)
    if not starts1 or not starts2:  # a root without children: insert/delete everything else
        return cost[0][0] + (n - 1) + (m - 1)

    # T[i][j] = CostT(subtree i, subtree j); leaf cases are closed-form, the rest filled on first use
    leaf1 = [end1[i] == i + 1 for i in range(n)]
    leaf2 = [end2[j] == j + 1 for j in range(m)]
    tcost: list[list[float | None]] = []
    for i in range(n):
        ci = cost[i]
        if leaf1[i]:
            tcost.append([ci[j] + (end2[j] - j - 1) for j in range(m)])
        else:
            inner = end1[i] - i - 1
            tcost.append([ci[j] + inner if leaf2[j] else None for j in range(m)])

    tables: dict[tuple[int, int], list[list[float]]] = {}
    for e1 in sorted(starts1):
        s1 = starts1[e1]
        for e2 in sorted(starts2):
            s2 = starts2[e2]
            width = e2 - s2 + 1
            rows: list[list[float]] = [[]] * (e1 - s1 + 1)
            rows[e1 - s1] = [float(e2 - j) for j in range(s2, e2 + 1)]  # F1 empty: insert the rest of F2
            tables[(e1, e2)] = rows
            for i in range(e1 - 1, s1 - 1, -1):
                row = [0.0] * width
                row[width - 1] = float(e1 - i)  # F2 empty: delete the rest of F1
                ei = end1[i]
                rest = rows[ei - s1]
                below = rows[i + 1 - s1]
                ti = tcost[i]
                ci = cost[i]
                ins = row[width - 1]
                for j in range(e2 - 1, s2 - 1, -1):
                    jj = j - s2
                    t = ti[j]
                    if t is None:
                        ej = end2[j]
                        sub_rows = tables[(ei, ej)]
                        t = ci[j] + sub_rows[i + 1 - starts1[ei]][j + 1 - starts2[ej]]
                        ti[j] = t
                    best = t + rest[end2[j] - s2]
                    d = below[jj] + 1.0
                    if d < best:
                        best = d
                    ins += 1.0
                    if ins < best:
                        best = ins
                    row[jj] = best
                    ins = best
                rows[i - s1] = row
    root_rows = tables[(n, m)]
    return cost[0][0] + root_rows[1 - starts1[n]][1 - starts2[m]]


def structural_similarity(
    tree_a: Any, tree_b: Any, node_similarity: NodeSimilarity, gamma: float = 0.0
) -> float:
    """1 - CostT(T1, T2) / (Size(T1) + Size(T2)) (Algorithm 1; ``gamma > 0``: depth-weighted CostN)."""
    t1, t2 = flatten(tree_a), flatten(tree_b)
    return 1.0 - structural_cost(t1, t2, node_similarity, gamma) / (len(t1) + len(t2))


# ---------------------------------------------------------------- literal reference


def literal_cost(tree_a: Any, tree_b: Any, node_similarity: NodeSimilarity, gamma: float = 0.0) -> float:
    """CostT(T1, T2) by a literal transcription of Algorithm 1 on tuples of nodes (reference; small trees)."""
    t1, t2 = flatten(tree_a), flatten(tree_b)
    size1 = [t1.end[i] - i for i in range(len(t1))]
    size2 = [t2.end[j] - j for j in range(len(t2))]
    sims: dict[tuple[int, int], float] = {}

    def cost_n(r: int, s: int) -> float:
        if (r, s) not in sims:
            sims[(r, s)] = float(node_similarity(t1.objs[r], t2.objs[s]))
        d = min(t1.depth[r], t2.depth[s])
        return 2.0 * (1.0 - sims[(r, s)]) / (d + 1) ** gamma

    def cost_t(r: int, s: int) -> float:
        return cost_n(r, s) + cost_f(tuple(t1.children[r]), tuple(t2.children[s]))

    @cache
    def cost_f(f1: tuple[int, ...], f2: tuple[int, ...]) -> float:
        if not f1:
            return float(sum(size2[u] for u in f2))
        if not f2:
            return float(sum(size1[t] for t in f1))
        t, u = f1[0], f2[0]
        c_sub = cost_t(t, u) + cost_f(f1[1:], f2[1:])
        c_del = 1.0 + cost_f(tuple(t1.children[t]) + f1[1:], f2)
        c_ins = 1.0 + cost_f(f1, tuple(t2.children[u]) + f2[1:])
        return min(c_sub, c_del, c_ins)

    return cost_t(0, 0)
