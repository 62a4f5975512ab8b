"""Algorithm 1 for K node-similarity matrices at once (`batched_similarity`), the form `frame meta
structure` uses to score many settings of the node similarity in one pass."""

from __future__ import annotations

import numpy as np

from tasks.score.structural_similarity.algorithm import _forest_starts
from tasks.score.structural_similarity.flat import FlatTree

__all__ = ["batched_similarity"]


def batched_similarity(t1: FlatTree, t2: FlatTree, sims: np.ndarray, gammas: np.ndarray) -> np.ndarray:
    """`structural_similarity(t1, t2, sim_k, gamma_k)` for K node-similarity matrices at once.

    ``sims`` is (K, len(t1), len(t2)), ``gammas`` (K,). The (i, e1, j, e2) programme of
    `structural_cost` with every cell a K-vector and every row of a forest table one numpy step: along a
    row the insertion chain ``row[j] = min(a[j], row[j + 1] + 1)`` is a suffix minimum of ``a[k] + k``.
    Equal to the scalar programme up to rounding (tests/test_meta_structure.py). Slower than the scalar
    programme for one setting on small or deep trees, so `frame score` keeps that one; `frame meta
    structure` (16 settings at once) uses this.
    """
    k, n, m = len(gammas), len(t1), len(t2)
    depth = np.minimum.outer(np.asarray(t1.depth, dtype=float), np.asarray(t2.depth, dtype=float))
    g = np.asarray(gammas, dtype=float)
    cost = 2.0 * (1.0 - np.moveaxis(sims, 0, -1)) / (depth[:, :, None] + 1.0) ** g  # (n, m, K)
    starts1, starts2 = _forest_starts(t1), _forest_starts(t2)
    if not starts1 or not starts2:  # a root without children: insert/delete everything else
        return 1.0 - (cost[0, 0] + (n - 1) + (m - 1)) / (n + m)
    end1, end2 = t1.end, t2.end
    leaf1, leaf2 = [end1[i] == i + 1 for i in range(n)], [end2[j] == j + 1 for j in range(m)]
    below1 = np.asarray(end1)[:, None] - np.arange(n)[:, None] - 1  # descendants of each node
    below2 = np.asarray(end2)[None, :] - np.arange(m)[None, :] - 1
    # CostT: closed form when one side is a leaf; two inner nodes add their child forests on first use
    closed = np.where(np.asarray(leaf1)[:, None], below2, np.where(np.asarray(leaf2)[None, :], below1, 0))
    tcost = cost + closed[:, :, None]
    known = [[leaf1[i] or leaf2[j] for j in range(m)] for i in range(n)]
    per2 = {}  # what a table of forest end e2 needs, whatever e1
    for e2, s2 in starts2.items():
        steps = np.arange(e2 - s2 + 1, dtype=float)[:, None]
        rest_at = np.asarray(end2[s2:e2]) - s2
        inner = [j for j in range(s2, e2) if not leaf2[j]]
        per2[e2] = (s2, steps, rest_at, inner, np.repeat(e2 - s2 - steps, k, axis=1))  # last: F1 empty
    tables: dict[tuple[int, int], list[np.ndarray]] = {}
    for e1 in sorted(starts1):
        s1 = starts1[e1]
        for e2 in sorted(starts2):
            s2, steps, rest_at, inner, empty = per2[e2]
            rows: list[np.ndarray] = [empty] * (e1 - s1 + 1)
            tables[(e1, e2)] = rows
            for i in range(e1 - 1, s1 - 1, -1):
                ei = end1[i]
                if not leaf1[i]:
                    for j in (j for j in inner if not known[i][j]):
                        ej = end2[j]
                        tcost[i, j] += tables[(ei, ej)][i + 1 - starts1[ei]][j + 1 - starts2[ej]]
                        known[i][j] = True
                best = np.empty((len(steps), k))
                np.minimum(
                    tcost[i, s2:e2] + rows[ei - s1][rest_at], rows[i + 1 - s1][:-1] + 1.0, out=best[:-1]
                )
                best[-1] = e1 - i  # F2 empty: delete the rest of F1
                best += steps
                rows[i - s1] = np.minimum.accumulate(best[::-1], axis=0)[::-1] - steps
    root = tables[(n, m)][1 - starts1[n]][1 - starts2[m]]
    return 1.0 - (cost[0, 0] + root) / (n + m)
