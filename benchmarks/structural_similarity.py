"""Benchmark: structural similarity (SPEC §4, Algorithm 1) on two seeded ~300-node report-shaped trees.

Times the polynomial (i, e1, j, e2) dynamic programme with a precomputed node-similarity lookup (no
embeddings) against the 0.5 s target, and the literal memoised recursion on 12-node trees for comparison.

    .venv/bin/python benchmarks/structural_similarity.py
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tasks.score.structural_similarity import flatten, literal_cost, structural_cost, structural_similarity  # noqa: E402

TARGET_S = 0.5
LEAVES = ("text", "table", "figure", "list")


def report_shaped(rng: random.Random, size: int) -> dict:
    """root -> sections -> (content | subsections -> (content | subsections -> content))."""
    root = {"type": "report", "title": "r", "objective": "r", "children": []}
    count = 1
    containers = [(root, 0)]
    while count < size:
        parent, depth = rng.choice(containers)
        if depth < 3 and rng.random() < 0.25:
            node = {"type": "section" if depth == 0 else "subsection", "title": f"h{count}", "children": []}
            containers.append((node, depth + 1))
        else:
            node = {"type": rng.choice(LEAVES), "title": "", "children": []}
        node["objective"] = f"o{count}"
        parent["children"].append(node)
        count += 1
    return root


def random_tree(rng: random.Random, size: int) -> dict:
    nodes = [{"type": "report", "children": []}]
    for _ in range(size - 1):
        child = {"type": rng.choice(LEAVES + ("section",)), "children": []}
        rng.choice(nodes)["children"].append(child)
        nodes.append(child)
    return nodes[0]


def lookup_similarity(rng: random.Random, a: dict, b: dict):
    """A precomputed table of similarities keyed by node identity (stands in for cached embeddings)."""
    ta, tb = flatten(a), flatten(b)
    table = {(id(x), id(y)): rng.random() for x in ta.objs for y in tb.objs}
    return lambda r, s: table[(id(r), id(s))]


def depth_of(t) -> int:
    return max(flatten(t).depth)


def main() -> None:
    rng = random.Random(20250101)
    a, b = report_shaped(rng, 300), report_shaped(rng, 300)
    sim = lookup_similarity(rng, a, b)
    ta, tb = flatten(a), flatten(b)
    print(f"trees: {len(ta)} nodes (depth {max(ta.depth)}) vs {len(tb)} nodes (depth {max(tb.depth)})")
    best = float("inf")
    for gamma in (0.0, 0.5):
        for _ in range(3):
            t0 = time.perf_counter()
            score = structural_similarity(a, b, sim, gamma=gamma)
            dt = time.perf_counter() - t0
            best = min(best, dt) if gamma == 0.0 else best
        print(f"gamma={gamma}: similarity={score:.6f}  last run {dt:.3f} s")
    print(f"DP best wall time (gamma=0): {best:.3f} s  ratio to {TARGET_S} s target: {best / TARGET_S:.2f}")

    # deeper, unbalanced random trees (worse for the O(n*depth*m*depth) bound)
    c, d = random_tree(rng, 300), random_tree(rng, 300)
    sim2 = lookup_similarity(rng, c, d)
    t0 = time.perf_counter()
    structural_similarity(c, d, sim2)
    print(
        f"random-shape 300-node trees (depth {depth_of(c)}, {depth_of(d)}): {time.perf_counter() - t0:.3f} s"
    )

    # literal recursion vs DP on 12-node trees
    pairs = [(random_tree(rng, 12), random_tree(rng, 12)) for _ in range(20)]
    sims = [lookup_similarity(rng, x, y) for x, y in pairs]
    t0 = time.perf_counter()
    lit = [literal_cost(x, y, s) for (x, y), s in zip(pairs, sims, strict=True)]
    t_lit = (time.perf_counter() - t0) / len(pairs)
    t0 = time.perf_counter()
    dp = [structural_cost(x, y, s) for (x, y), s in zip(pairs, sims, strict=True)]
    t_dp = (time.perf_counter() - t0) / len(pairs)
    err = max(abs(p - q) for p, q in zip(lit, dp, strict=True))
    print(
        f"12-node trees: literal {t_lit * 1e3:.2f} ms/pair, DP {t_dp * 1e3:.2f} ms/pair, max |diff| {err:.1e}"
    )


if __name__ == "__main__":
    main()
