"""Structural similarity (SPEC §4, Algorithm 1): the polynomial DP against the literal recursion, hand
cases, the default node similarity, and the deterministic Markdown structure tree."""

from __future__ import annotations

import math
import random
import zlib
from collections import Counter

import numpy as np
import pytest

from schemas.structure import ReportStructure, StructureNode
from tasks.score.structural_similarity import (
    flatten,
    literal_cost,
    make_node_similarity,
    structural_cost,
    structural_similarity,
)
from tasks.score.tree import report_tree, tree_size

TYPES = ("section", "subsection", "text", "table", "figure", "list")


def node(ntype: str, *kids: dict, objective: str = "") -> dict:
    return {"type": ntype, "title": ntype, "objective": objective or ntype, "children": list(kids)}


def random_tree(rng: random.Random, size: int) -> dict:
    nodes = [node("report")]
    for _ in range(size - 1):
        child = node(rng.choice(TYPES), objective=f"o{rng.randint(0, 5)}")
        rng.choice(nodes)["children"].append(child)
        nodes.append(child)
    return nodes[0]


class TableSim:
    """Seeded random similarity per (r, s) object pair; counts calls."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.table: dict[tuple[int, int], float] = {}
        self.calls: Counter = Counter()

    def __call__(self, r, s) -> float:
        key = (id(r), id(s))
        self.calls[key] += 1
        if key not in self.table:
            # some exact 0/1 values too, to exercise ties
            self.table[key] = self.rng.choice([0.0, 1.0, self.rng.random(), self.rng.random()])
        return self.table[key]


def type_equal(r, s) -> float:
    return 1.0 if (r["type"], r["objective"]) == (s["type"], s["objective"]) else 0.0


# ---------------------------------------------------------------- DP == literal recursion


@pytest.mark.parametrize("seed", range(4))
def test_dp_matches_literal_recursion(seed):
    rng = random.Random(1000 + seed)
    checked = 0
    for _ in range(100):
        a = random_tree(rng, rng.randint(1, 12))
        b = random_tree(rng, rng.randint(1, 12))
        sim = TableSim(rng)
        for gamma in (0.0, 0.5, 1.0):
            dp = structural_cost(a, b, sim, gamma)
            lit = literal_cost(a, b, sim, gamma)
            assert dp == pytest.approx(lit, abs=1e-9), (seed, gamma)
            checked += 1
    assert checked == 300  # 4 seeds x 300 = 1200 comparisons over 400 tree pairs


def test_dp_matches_literal_on_deep_chains_and_wide_fans():
    rng = random.Random(7)
    chain = node("report")
    cur = chain
    for k in range(10):
        nxt = node(TYPES[k % len(TYPES)] if k % 3 else "section")
        cur["children"].append(nxt)
        cur = nxt
    fan = node("report", *[node(TYPES[k % len(TYPES)]) for k in range(11)])
    for a, b in ((chain, fan), (fan, chain), (chain, chain), (fan, fan)):
        sim = TableSim(rng)
        for gamma in (0.0, 1.0):
            assert structural_cost(a, b, sim, gamma) == pytest.approx(
                literal_cost(a, b, sim, gamma), abs=1e-9
            )


def _hash_embed(texts):
    # deterministic, unnormalised 16-dim vectors (make_node_similarity normalises them)
    return np.stack([np.frombuffer(zlib.crc32(t.encode()).to_bytes(4, "big") * 4, np.uint8) for t in texts])


@pytest.mark.parametrize("proj", ["rbf", "linear", "power"])
def test_node_similarity_matrix_is_the_pairwise_similarity(proj):
    # the score path fills the cost matrix from `sim.matrix` in array operations; it must be the
    # pair-by-pair similarity, and the DP on it the literal recursion on pair-by-pair calls
    rng = random.Random(11)
    sim = make_node_similarity(_hash_embed, proj=proj, delta=0.3)
    for _ in range(30):
        a = random_tree(rng, rng.randint(1, 10))
        b = random_tree(rng, rng.randint(1, 10))
        fa, fb = flatten(a), flatten(b)
        want = np.array([[sim(r, s) for s in fb.objs] for r in fa.objs])
        np.testing.assert_allclose(sim.matrix(fa.objs, fb.objs), want, rtol=0, atol=1e-12)
        for gamma in (0.0, 1.0):
            assert structural_cost(a, b, sim, gamma) == pytest.approx(
                literal_cost(a, b, sim, gamma), abs=1e-9
            )


# ---------------------------------------------------------------- hand-computed cases


def test_two_single_roots():
    assert structural_similarity(node("a"), node("b"), lambda r, s: 0.5) == pytest.approx(0.5)
    assert structural_similarity(node("a"), node("b"), lambda r, s: 1.0) == pytest.approx(1.0)
    assert structural_similarity(node("a"), node("b"), lambda r, s: 0.0) == pytest.approx(0.0)


def test_root_with_child_vs_root_alone():
    a = node("report", node("text"))
    b = node("report")
    assert structural_similarity(a, b, lambda r, s: 1.0) == pytest.approx(1 - 1 / 3)
    assert structural_similarity(b, a, lambda r, s: 1.0) == pytest.approx(1 - 1 / 3)
    # empty vs non-empty forests: cost = the size of the other forest
    big = node("report", node("section", node("text"), node("table")), node("list"))
    assert structural_cost(big, b, lambda r, s: 1.0) == pytest.approx(4.0)
    assert structural_cost(b, big, lambda r, s: 1.0) == pytest.approx(4.0)
    assert structural_similarity(big, b, lambda r, s: 1.0) == pytest.approx(1 - 4 / 6)


def test_deletion_promotes_children():
    # gold nests two leaves in a subsection, generated has them flat: one deletion
    gold = node("report", node("section", node("subsection", node("text"), node("table"))))
    gen = node("report", node("section", node("text"), node("table")))
    assert structural_cost(gold, gen, type_equal) == pytest.approx(1.0)
    assert structural_similarity(gold, gen, type_equal) == pytest.approx(1 - 1 / 9)
    assert structural_cost(gen, gold, type_equal) == pytest.approx(1.0)


def test_substitution_beats_delete_insert_when_similar():
    a = node("report", node("text"))
    b = node("report", node("table"))

    def sim(r, s):
        return 1.0 if r["type"] == s["type"] else 0.75

    # substitution 2 * (1 - 0.75) = 0.5 < delete + insert = 2
    assert structural_cost(a, b, sim) == pytest.approx(0.5)
    # with sim 0 for the children: substitution 2 == delete + insert 2
    assert structural_cost(a, b, type_equal) == pytest.approx(2.0)


def test_depth_weighting():
    a = node("report", node("text"))
    b = node("report", node("table"))

    def sim(r, s):
        return 1.0 if r["type"] == s["type"] else 0.5

    assert structural_cost(a, b, sim, gamma=0.0) == pytest.approx(1.0)
    assert structural_cost(a, b, sim, gamma=1.0) == pytest.approx(0.5)  # d_eff = 1 -> / 2
    assert structural_cost(a, b, sim, gamma=2.0) == pytest.approx(0.25)
    # roots are at depth 0: never discounted
    assert structural_cost(node("a"), node("b"), lambda r, s: 0.5, gamma=3.0) == pytest.approx(1.0)


@pytest.mark.parametrize("size", [1, 2, 5, 12, 60])
def test_identical_trees_score_one(size):
    t = random_tree(random.Random(size), size)
    assert structural_similarity(t, t, type_equal) == pytest.approx(1.0)
    assert structural_similarity(t, t, type_equal, gamma=1.0) == pytest.approx(1.0)


def test_similarity_in_unit_interval():
    rng = random.Random(3)
    for _ in range(50):
        a, b = random_tree(rng, rng.randint(1, 30)), random_tree(rng, rng.randint(1, 30))
        s = structural_similarity(a, b, TableSim(rng))
        assert 0.0 <= s <= 1.0


def test_node_similarity_called_at_most_once_per_pair():
    rng = random.Random(11)
    for _ in range(20):
        a, b = random_tree(rng, rng.randint(1, 40)), random_tree(rng, rng.randint(1, 40))
        sim = TableSim(rng)
        structural_similarity(a, b, sim)
        assert sim.calls and max(sim.calls.values()) == 1
        sim2 = TableSim(rng)
        literal_cost(a if tree_size(a) <= 12 else node("x"), b if tree_size(b) <= 12 else node("y"), sim2)
        assert max(sim2.calls.values()) == 1


def test_large_trees_no_recursion_limit():
    rng = random.Random(5)
    chain = node("report")
    cur = chain
    for _ in range(1500):  # deeper than the default recursion limit
        nxt = node("section")
        cur["children"].append(nxt)
        cur = nxt
    assert structural_similarity(chain, chain, type_equal) == pytest.approx(1.0)
    a, b = random_tree(rng, 120), random_tree(rng, 120)
    assert 0.0 <= structural_similarity(a, b, TableSim(rng)) <= 1.0


# ---------------------------------------------------------------- pydantic inputs


def test_pydantic_report_structure_and_dicts_agree():
    rs = ReportStructure(
        title="Acme 10-K",
        nodes=[
            StructureNode(
                id="s1",
                type="section",
                title="Overview",
                objective="business overview",
                children=[StructureNode(id="s1.t1", type="text", objective="what the company does")],
            ),
            StructureNode(
                id="s2",
                type="section",
                title="Financials",
                objective="income statement",
                children=[StructureNode(id="s2.tb1", type="table", objective="revenue by segment")],
            ),
        ],
    )
    flat = flatten(rs)
    assert len(flat) == 5 and flat.objs[0] is rs and flat.depth == [0, 1, 2, 1, 2]
    as_dict = {
        "type": "report",
        "title": "Acme 10-K",
        "objective": "Acme 10-K",
        "children": [n.model_dump() for n in rs.nodes],
    }

    def key(x):
        if isinstance(x, ReportStructure):
            return ("report", x.title)
        if isinstance(x, dict):
            return (x["type"], x.get("objective") or x.get("title"))
        return (x.type, x.objective or x.title)

    def sim(r, s):
        return 1.0 if key(r) == key(s) else 0.0

    assert structural_similarity(rs, as_dict, sim) == pytest.approx(1.0)
    assert structural_similarity(rs.nodes[0], as_dict["children"][0], sim) == pytest.approx(1.0)
    assert structural_similarity(rs, rs.nodes[0], sim) < 1.0


# ---------------------------------------------------------------- make_node_similarity


def bag_of_words_embed(texts: list[str]) -> np.ndarray:
    """Deterministic bag-of-words vectors (crc32 buckets), the same for a text in every batch."""
    out = np.zeros((len(texts), 4096))
    for row, t in enumerate(texts):
        for w in t.lower().split() or ["<empty>"]:
            out[row, zlib.crc32(w.encode()) % 4096] += 1.0
    return out


def test_make_node_similarity_formula_and_batching():
    batches: list[list[str]] = []

    def embed(texts):
        batches.append(list(texts))
        return bag_of_words_embed(texts)

    sim = make_node_similarity(embed)
    a = node("report", node("section", objective="revenue growth"), node("table", objective="segment sales"))
    b = node("report", node("section", objective="revenue growth"), node("text", objective="risk factors"))
    score = structural_similarity(a, b, sim)
    assert 0.0 < score < 1.0
    assert len(batches) == 1  # one batched call via prepare()
    assert len(batches[0]) == len(set(batches[0]))  # each distinct text once
    # identical type + objective -> 1; rbf of cos 0 is exp(-1/(2*0.01)) ~ 0
    x = node("text", objective="alpha beta")
    y = node("table", objective="gamma delta")
    assert sim(x, node("text", objective="alpha beta")) == pytest.approx(1.0)
    expected = 0.2 * math.exp(-1 / 0.02) + 0.8 * math.exp(-1 / 0.02)
    assert sim(x, y) == pytest.approx(expected, abs=1e-12)
    lin = make_node_similarity(bag_of_words_embed, proj="linear")
    assert lin(x, y) == pytest.approx(0.5)  # cos 0 -> (0 + 1) / 2 on both terms
    power = make_node_similarity(bag_of_words_embed, proj="power", n=3)
    assert power(x, y) == pytest.approx(0.125)
    with pytest.raises(ValueError):
        make_node_similarity(bag_of_words_embed, proj="cubic")


# ---------------------------------------------------------------- report_tree

SAMPLE = """# Acme Corp Annual Report

Intro paragraph before any section.

## Business Overview

Acme makes **anvils** and [rockets](http://example.com) for coyotes.
It operates in two segments.

- Anvils
- Rockets
  with boosters
1. numbered too

### Segments

| Segment | 2024 | 2023 |
|---|---:|---|
| Anvils | 10 | 9 |
| Rockets | 5 | 4 |

![Revenue by segment](fig/rev.png)

#### Deep dive

Deep text.

## Risks

Only text here.

```
code block
```
"""


def test_report_tree_small_markdown():
    t = report_tree(SAMPLE)
    assert t["type"] == "report" and t["title"] == "Acme Corp Annual Report"
    # paragraphs are no nodes (paper 000 §4.1): the intro feeds the root's objective
    assert t["objective"] == "Acme Corp Annual Report Intro paragraph before any section."
    types = [c["type"] for c in t["children"]]
    assert types == ["section", "section"]
    overview, risks = t["children"]
    assert overview["title"] == "Business Overview"
    assert overview["objective"] == (
        "Business Overview Acme makes anvils and rockets for coyotes. It operates in two segments."
    )
    assert [c["type"] for c in overview["children"]] == ["list", "subsection"]
    assert overview["children"][0]["objective"] == "Anvils Rockets with boosters numbered too"
    seg = overview["children"][1]
    assert seg["type"] == "subsection" and seg["title"] == "Segments" and seg["objective"] == "Segments"
    assert [c["type"] for c in seg["children"]] == ["table", "figure", "subsection"]
    assert seg["children"][0]["objective"] == "Segment 2024 2023 Anvils Rockets"
    assert seg["children"][1]["objective"] == "Revenue by segment"
    deep = seg["children"][2]
    assert (
        deep["title"] == "Deep dive"
        and deep["children"] == []
        and deep["objective"] == "Deep dive Deep text."
    )
    assert risks["children"] == [] and risks["objective"] == "Risks Only text here. code block"
    assert all(set(n) == {"type", "title", "objective", "children"} for n in _walk(t))
    assert report_tree(SAMPLE) == t  # deterministic
    assert tree_size(t) == 8


def test_report_tree_word_limits_and_edge_cases():
    long_para = " ".join(f"w{k}" for k in range(100))
    long_list = "\n".join(f"- i{k}" for k in range(100))
    t = report_tree(f"## Head\n\n{long_para}\n\n{long_list}\n")
    sec = t["children"][0]
    assert len(sec["objective"].split()) == 1 + 30
    assert len(sec["children"][0]["objective"].split()) == 40
    assert report_tree("") == {"type": "report", "title": "", "objective": "", "children": []}
    # headings without content; a level jump; no H1
    t = report_tree("## A\n#### B\n### C\n## D\n")
    assert t["title"] == ""
    a, d = t["children"]
    assert [c["title"] for c in a["children"]] == ["B", "C"] and d["children"] == []
    assert a["objective"] == "A"


def _walk(t):
    yield t
    for c in t["children"]:
        yield from _walk(c)


def test_report_tree_on_gold_report(demo_release):
    """The first gold report of each category of the demo release the session built (never data/)."""
    import pyarrow.parquet as pq

    rows = sorted(pq.read_table(demo_release / "reports.parquet").to_pylist(), key=lambda r: r["report_id"])
    firsts = {r["category"]: r["markdown"] for r in reversed(rows)}
    assert firsts
    for text in firsts.values():
        t = report_tree(text)
        assert t["type"] == "report" and t["children"]
        assert any(n["type"] == "section" for n in t["children"])
        assert all(n["type"] != "report" for n in list(_walk(t))[1:])
        assert all(not n["children"] for n in _walk(t) if n["type"] in ("table", "figure", "list"))
        assert all(n["type"] != "text" for n in _walk(t))  # paragraphs are no nodes
        if "|---" in text or "| ---" in text:
            assert any(n["type"] == "table" for n in _walk(t))
        # a report is structurally identical to itself and the DP handles its full size
        assert structural_similarity(t, t, type_equal) == pytest.approx(1.0)
