"""Structural similarity of two report structure trees (SPEC §4, paper 000 §4): Algorithm 1 (semantic tree
edit distance) computed by a polynomial dynamic programme, the embedding node similarity, and the
`structure` family. Definitions, the DP and its proof sketch: docs/metrics/structure.md."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

import numpy as np

from schemas.scoring import MetricResult
from tasks.score.metric import Inputs, JudgeEnv, MetricFamily, MetricSpec
from tasks.score.tree import report_tree, tree_size

__all__ = [
    "PROJECTIONS",
    "project_array",
    "FlatTree",
    "batched_similarity",
    "flatten",
    "literal_cost",
    "make_node_similarity",
    "node_fields",
    "structural_cost",
    "structural_similarity",
]

NodeSimilarity = Callable[[Any, Any], float]


# ---------------------------------------------------------------- normalisation


def _children_of(node: Any) -> list[Any]:
    if isinstance(node, dict):
        if "children" in node:
            return list(node.get("children") or [])
        if "type" not in node:  # a serialised ReportStructure / StructureOutput
            return list(node.get("nodes") or node.get("sections") or [])
        return []
    for attr in ("children", "nodes", "sections"):
        kids = getattr(node, attr, None)
        if kids is not None:
            return list(kids)
    return []


class FlatTree:
    """A tree numbered in preorder: ``objs[i]`` the original node, ``end[i]`` one past its subtree,
    ``depth[i]`` (root 0) and ``children[i]`` (preorder indices)."""

    __slots__ = ("objs", "end", "depth", "children")

    def __init__(self, root: Any):
        self.objs: list[Any] = []
        self.depth: list[int] = []
        self.children: list[list[int]] = []
        parent: list[int] = []
        stack: list[tuple[Any, int, int]] = [(root, 0, -1)]
        while stack:
            node, d, par = stack.pop()
            idx = len(self.objs)
            self.objs.append(node)
            self.depth.append(d)
            self.children.append([])
            parent.append(par)
            if par >= 0:
                self.children[par].append(idx)
            for kid in reversed(_children_of(node)):
                stack.append((kid, d + 1, idx))
        n = len(self.objs)
        self.end = list(range(1, n + 1))
        for idx in range(n - 1, 0, -1):  # children have larger indices than their parent
            p = parent[idx]
            if self.end[idx] > self.end[p]:
                self.end[p] = self.end[idx]

    def __len__(self) -> int:
        return len(self.objs)


def flatten(tree: Any) -> FlatTree:
    return tree if isinstance(tree, FlatTree) else FlatTree(tree)


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


# ---------------------------------------------------------------- default node similarity


def node_fields(node: Any) -> tuple[str, str]:
    """(type, objective text) of a node; the objective falls back to the title when empty."""
    if isinstance(node, dict):
        ntype = node.get("type") or ("report" if "children" not in node else "")
        return str(ntype), str(node.get("objective") or node.get("title") or "")
    ntype = getattr(node, "type", None)
    if ntype is None:  # ReportStructure / StructureOutput root
        return "report", str(getattr(node, "title", "") or "")
    return str(ntype), str(getattr(node, "objective", "") or getattr(node, "title", "") or "")


def _proj_rbf(x: float, delta: float, n: int) -> float:
    return math.exp(-((1.0 - x) ** 2) / (2.0 * delta * delta))


def _proj_linear(x: float, delta: float, n: int) -> float:
    return (x + 1.0) / 2.0


def _proj_power(x: float, delta: float, n: int) -> float:
    return ((x + 1.0) / 2.0) ** n


PROJECTIONS = {"rbf": _proj_rbf, "linear": _proj_linear, "power": _proj_power}


def project_array(x: np.ndarray, proj: str, delta: float, n: int) -> np.ndarray:
    """`PROJECTIONS[proj]` elementwise on an array of cosines."""
    if proj == "rbf":
        return np.exp(-((1.0 - x) ** 2) / (2.0 * delta * delta))
    if proj == "linear":
        return (x + 1.0) / 2.0
    if proj == "power":
        return ((x + 1.0) / 2.0) ** n
    raise ValueError(f"proj must be one of {sorted(PROJECTIONS)} (got {proj!r})")


def make_node_similarity(
    embed: Callable[[list[str]], np.ndarray],
    w: float = 0.2,
    proj: str = "rbf",
    delta: float = 0.10,
    n: int = 2,
) -> NodeSimilarity:
    """sim(r, s) = w * proj(cos(e_type)) + (1 - w) * proj(cos(e_obj)) (SPEC §4).

    ``embed(texts) -> array (len(texts), dim)``. Each distinct text is embedded once; the returned callable
    has ``prepare(nodes)``, which :func:`structural_similarity` calls with all nodes of both trees so the
    embeddings are fetched in one batched call.
    """
    if proj not in PROJECTIONS:
        raise ValueError(f"proj must be one of {sorted(PROJECTIONS)} (got {proj!r})")
    pfun = PROJECTIONS[proj]
    vectors: dict[str, np.ndarray] = {}

    def _ensure(texts: Sequence[str]) -> None:
        missing = sorted({t for t in texts if t not in vectors})
        if not missing:
            return
        arr = np.asarray(embed(missing), dtype=float)
        if arr.shape[0] != len(missing):
            raise ValueError(f"embed returned {arr.shape[0]} vectors for {len(missing)} texts")
        norms = np.linalg.norm(arr, axis=1, keepdims=True)
        arr = np.divide(arr, norms, out=np.zeros_like(arr), where=norms > 0)
        for text, vec in zip(missing, arr, strict=True):
            vectors[text] = vec

    def _cos(a: str, b: str) -> float:
        return float(np.clip(np.dot(vectors[a], vectors[b]), -1.0, 1.0))

    def sim(r: Any, s: Any) -> float:
        (tr, orr), (ts, os_) = node_fields(r), node_fields(s)
        _ensure([tr, orr, ts, os_])
        return w * pfun(_cos(tr, ts), delta, n) + (1.0 - w) * pfun(_cos(orr, os_), delta, n)

    def prepare(nodes: Sequence[Any]) -> None:
        texts: list[str] = []
        for node in nodes:
            texts.extend(node_fields(node))
        _ensure(texts)

    def matrix(nodes_a: Sequence[Any], nodes_b: Sequence[Any]) -> np.ndarray:
        """sim(r, s) for every r of `nodes_a` and s of `nodes_b` at once: (len(a), len(b))."""
        fa, fb = [node_fields(x) for x in nodes_a], [node_fields(x) for x in nodes_b]
        _ensure([t for pair in fa + fb for t in pair])

        def cos(i: int) -> np.ndarray:
            va = np.stack([vectors[f[i]] for f in fa])
            vb = np.stack([vectors[f[i]] for f in fb])
            return np.clip(va @ vb.T, -1.0, 1.0)

        return w * project_array(cos(0), proj, delta, n) + (1.0 - w) * project_array(cos(1), proj, delta, n)

    sim.prepare = prepare  # type: ignore[attr-defined]
    sim.matrix = matrix  # type: ignore[attr-defined]
    return sim


# ---------------------------------------------------------------- the family


_NOT_FIGURES = "compares the tree of sections, tables and lists by type, heading and opening words: what the"
_NOT_FIGURES += " figures say is coverage's and faithfulness'"
_ONE_NODE = "a table is one node of the tree (paper 000 §4.1), and removing it costs one deletion over the"
_ONE_NODE += " two trees' sizes (|T1| + |T2|): under 0.05 once the trees hold more than 10 nodes each"
_UNCLAIMED = (  # docs/metrics/robustness.md
    *((aspect, _NOT_FIGURES) for aspect in ("figures", "directions", "periods")),
    ("tables", _ONE_NODE),
)


class StructureFamily(MetricFamily):
    """Structural similarity of R' to Y: Algorithm 1 over both reports' structure trees."""

    name = "structure"
    metrics = (MetricSpec("structure", group="frame", unclaimed=_UNCLAIMED),)
    reads = frozenset({"gold"})
    summary = "structural similarity of the two reports' section trees (semantic tree edit, Algorithm 1)"

    def __init__(self, env: JudgeEnv) -> None:
        super().__init__(env)
        s = env.settings
        self.similarity = make_node_similarity(
            env.embed, w=s.type_weight, proj=s.proj, delta=s.delta, n=s.power_n
        )
        self.tree_judge = None
        if s.tree == "llm":
            from tasks.score.tree_llm import TreeJudge

            self.tree_judge = TreeJudge(env.client, env.llm)
            self.builder = f"llm:{env.llm.model if env.llm else ''}"
            self.judge = f"llm-tree:{env.llm.model if env.llm else ''}+{env.embedder}"
        else:
            self.builder = s.tree
            self.judge = f"{s.tree}-tree+{env.embedder}"

    def tree(self, markdown: str) -> dict[str, Any]:
        if self.tree_judge is not None:
            return self.tree_judge.tree(markdown)[0]
        return report_tree(markdown)

    def embeds_ahead(self) -> bool:
        return self.tree_judge is None  # LLM trees come from LLM calls: left to the concurrent score tasks

    def embedding_texts(self, inputs: Inputs) -> list[str]:
        if not self.embeds_ahead():
            return []
        nodes = [*flatten(self.tree(inputs.gold)).objs, *flatten(self.tree(inputs.generated)).objs]
        return [text for node in nodes for text in node_fields(node)]

    def score(self, inputs: Inputs) -> list[MetricResult]:
        a, b = self.tree(inputs.gold), self.tree(inputs.generated)
        value = structural_similarity(a, b, self.similarity, gamma=self.env.settings.gamma)
        s = self.env.settings
        detail = {"gold_nodes": tree_size(a), "generated_nodes": tree_size(b), "proj": s.proj}
        # the node similarity's parameters and where they came from (calibrated / paper / user)
        detail |= {"delta": s.delta, "delta_source": s.delta_source}
        detail |= {"type_weight": s.type_weight, "type_weight_source": s.type_weight_source}
        detail |= {"tree": self.builder, "embedder": self.env.embedder}  # who built the trees, who embeds
        return [MetricResult(metric="structure", value=float(value), judge=self.judge, detail=detail)]
