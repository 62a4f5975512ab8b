"""The fill step's evidence budget (issue 42, point 6): an LLM backend gets its passage budget filled
(`RetrievalIndex.search_budget`), the extractive offline backend keeps its top 8 within 1,500 tokens.

Oracles: token counts are recomputed with `count_tokens`; which passages a budget must take is derived
here from the passages' texts (a small grounding set whose relevant paragraphs are known) or by walking
the ranking with the documented rule (a real grounding set); the order is checked against the ranking's
scores.
"""

from __future__ import annotations

import pytest

from schemas.structure import ReportStructure, StructureNode
from tasks.ground.load import GroundingSet, grounding_set_from_rows
from tasks.llm.backend import Passage, StepContext
from tasks.synthesize.fill import fill_report
from tasks.synthesize.offline import OfflineBackend
from tasks.synthesize.outline import render_outline
from tasks.synthesize.retrieve import (
    FILL_CEILING,
    FILL_FLOOR,
    MIN_RELEVANCE,
    PROSE_BOOST,
    RetrievalIndex,
    chunk_grounding_set,
)
from tasks.tokens import count_tokens

WORDS = (
    "amber birch cedar delta ember fjord grove heron iris jade kelp lotus maple nectar onyx pearl "
    "quartz raven sage tulip umber violet willow yarrow"
).split()
RELEVANT = [
    f"Deferred revenue recognition for contract {w} follows the delivery schedule agreed with the customer."
    for w in WORDS
]
# relevant too (it names the query terms many times), but longer than the small budgets below
LONG = " ".join(
    f"Deferred revenue recognition under clause {w} defers revenue recognition until delivery."
    for w in WORDS[:16]
)
# share one query term ("recognition") with the element, buried in long paragraphs: a stray match
NOISE = [
    f"The {w} warehouse moved pallets, trucks, crates and boxes across the northern depot during the "
    "quarter, and the freight desk rebalanced routes, schedules, drivers and loading bays twice, with "
    "recognition of staff noted briefly at the close of a long operational summary about logistics."
    for w in WORDS[:10]
]
UNRELATED = [f"Rain fell over the {w} valley on most afternoons." for w in WORDS[:6]]

STRUCTURE = ReportStructure.model_validate(
    {
        "title": "Acme report",
        "nodes": [
            {
                "id": "s1",
                "type": "section",
                "title": "Revenue",
                "children": [
                    {
                        "id": "s1.t1",
                        "type": "text",
                        "title": "Revenue recognition",
                        "objective": "Explains deferred revenue recognition.",
                    }
                ],
            }
        ],
    }
)
NODE = STRUCTURE.find("s1.t1")


def small_set(long_first: bool) -> GroundingSet:
    revenue = ([LONG] if long_first else []) + RELEVANT
    docs = [
        ("revenue", "Revenue", revenue),
        ("operations", "Operations", NOISE),
        ("weather", "Weather", UNRELATED),
    ]
    return grounding_set_from_rows(
        {"doc_id": d, "title": t, "markdown": f"# {t}\n\n" + "\n\n".join(paras) + "\n"}
        for d, t, paras in docs
    )


def greedy(texts: list[str], budget: int) -> list[str]:
    """Whole texts in the given order while they fit what is left of `budget` (a misfit is skipped)."""
    out, left = [], budget
    for t in texts:
        n = count_tokens(t)
        if n <= left:
            out.append(t)
            left -= n
    return out


def non_increasing(passages: list[Passage]) -> bool:
    return all(a.score >= b.score for a, b in zip(passages, passages[1:], strict=False))


def test_budget_is_filled_beyond_eight_with_whole_passages_in_score_order():
    index = RetrievalIndex(small_set(long_first=False))
    budget = 200  # ~12 of the 24 relevant paragraphs (15-16 tokens each)
    got = index.search_budget(NODE, STRUCTURE, budget_tokens=budget)
    # equal-scored relevant paragraphs come in document order; the oracle takes them while they fit
    want = greedy(RELEVANT, budget)
    assert len(want) > FILL_FLOOR
    assert [p.text for p in got] == want
    assert sum(count_tokens(p.text) for p in got) <= budget
    assert all(p.tokens == count_tokens(p.text) for p in got)
    assert non_increasing(got)
    # the fixed top 8 is the first 8 of the same list
    assert [p.text for p in index.search(NODE, STRUCTURE, budget_tokens=budget, k=8)] == want[:8]


def test_a_passage_that_does_not_fit_is_skipped_whole_not_cut():
    index = RetrievalIndex(small_set(long_first=True))
    ranked = index.rank(NODE, STRUCTURE)
    assert ranked[0].text == LONG and ranked[0].score > ranked[1].score  # the long one ranks first
    budget = count_tokens(LONG) - 1
    got = index.search_budget(NODE, STRUCTURE, budget_tokens=budget)
    assert LONG not in [p.text for p in got]
    assert all(p.text in RELEVANT for p in got)  # whole paragraphs, none a piece of LONG
    assert [p.text for p in got] == greedy(RELEVANT, budget)
    assert len(got) > FILL_FLOOR
    assert sum(count_tokens(p.text) for p in got) <= budget
    # with room for it, it comes first and whole
    roomy = index.search_budget(NODE, STRUCTURE, budget_tokens=count_tokens(LONG) + 50)
    assert roomy[0].text == LONG and [p.text for p in roomy[1:]] == greedy(RELEVANT, 50)


def test_stray_matches_and_unrelated_passages_do_not_top_up_the_budget():
    index = RetrievalIndex(small_set(long_first=True))
    ranked = index.rank(NODE, STRUCTURE)
    noise = [p for p in ranked if p.doc_id == "operations"]
    # precondition of the fixture: the noise is ranked (positive score) but a stray match
    assert len(noise) == len(NOISE) and all(0 < p.score - PROSE_BOOST < MIN_RELEVANCE for p in noise)
    assert not any(p.doc_id == "weather" for p in ranked)  # no shared term: score 0, never ranked
    got = index.search_budget(NODE, STRUCTURE, budget_tokens=100_000)
    assert sorted(p.text for p in got) == sorted([LONG, *RELEVANT])
    # the floor: an element with fewer relevant passages than 8 still gets 8, as the top 8 gave
    few = grounding_set_from_rows(
        {"doc_id": d, "title": t, "markdown": f"# {t}\n\n" + "\n\n".join(paras) + "\n"}
        for d, t, paras in [("revenue", "Revenue", RELEVANT[:3]), ("operations", "Operations", NOISE)]
    )
    small = RetrievalIndex(few)
    got = small.search_budget(NODE, STRUCTURE, budget_tokens=100_000)
    assert [p.text for p in got] == [p.text for p in small.search(NODE, STRUCTURE, 100_000, k=8)]
    assert len(got) == 8 and [p.text for p in got[:3]] == RELEVANT[:3]
    # the ceiling
    assert len(index.search_budget(NODE, STRUCTURE, budget_tokens=100_000, ceiling=10)) == 10


class Recorder:
    """A backend that records the passages each element is given (no text of its own)."""

    def __init__(self, extractive: bool) -> None:
        self.extractive = extractive
        self.given: dict[str, list[Passage]] = {}

    def fill(self, node, structure, passages, ctx, used=None) -> str:
        assert (used is not None) == self.extractive
        self.given[node.id] = list(passages)
        return f"Content of {node.id}."


CTX = StepContext("acme", "2025", "financial_quarterly", "edgar")


def test_fill_report_fills_the_budget_for_an_llm_backend_only():
    gset = small_set(long_first=True)
    outline = render_outline(STRUCTURE)
    llm, extractive = Recorder(False), Recorder(True)
    done = fill_report(llm, outline, STRUCTURE, gset, CTX, budget_tokens=400)
    fill_report(extractive, outline, STRUCTURE, gset, CTX, budget_tokens=400)
    assert len(llm.given["s1.t1"]) > 8 and len(extractive.given["s1.t1"]) == 8
    assert [p.text for p in llm.given["s1.t1"]] == greedy([LONG, *RELEVANT], 400)
    assert [p.text for p in extractive.given["s1.t1"]] == greedy([LONG, *RELEVANT], 400)[:8]
    assert done.passage_tokens["s1.t1"] == sum(count_tokens(p.text) for p in llm.given["s1.t1"]) <= 400
    assert done.evidence["s1.t1"] == [p.doc_id for p in llm.given["s1.t1"]]
    # an explicit k is the fixed top k with any backend
    fixed = Recorder(False)
    fill_report(fixed, outline, STRUCTURE, gset, CTX, budget_tokens=400, k=8)
    assert fixed.given["s1.t1"] == extractive.given["s1.t1"]


# ---------------------------------------------------------------- a real grounding set


@pytest.fixture(scope="module")
def aapl(grounding_sets) -> tuple[GroundingSet, ReportStructure]:
    g = grounding_sets("AAPL-10-Q", "2025-03-29")
    be, c = OfflineBackend(), StepContext("AAPL-10-Q", "2025-03-29", "financial_quarterly", "edgar")
    return g, be.add_questions(be.propose_structure(g, c), g, None, c)


def documented_rule(ranked: list[Passage], node: StructureNode, budget: int) -> list[Passage]:
    """The module docstring's rule, walked over the ranking: whole passages while they fit, the first
    8 unconditionally, later ones only with relevance (score without the prose bonus) >= 0.1."""
    prose_leaf = node.type in ("text", "list")
    out: list[Passage] = []
    left = budget
    for p in ranked:
        if len(out) == 128:
            break
        relevance = p.score - (0.15 if prose_leaf and p.kind in ("text", "list") else 0.0)
        if count_tokens(p.text) <= left and (len(out) < 8 or relevance >= 0.1 - 1e-9):
            out.append(p)
            left -= count_tokens(p.text)
    return out


@pytest.mark.parametrize("budget", [12_000, 8_000])
def test_real_set_budget_filled_whole_and_in_rank_order(aapl, budget):
    assert (FILL_FLOOR, FILL_CEILING, MIN_RELEVANCE, PROSE_BOOST) == (8, 128, 0.1, 0.15)  # documented
    gset, structure = aapl
    index = RetrievalIndex(gset)
    flat = {d: " ".join(t.split()) for d, t in gset.texts.items()}
    chunks = {(p.doc_id, p.text) for p in chunk_grounding_set(gset)}
    more = 0
    for node in structure.leaves():
        ranked = index.rank(node, structure)
        got = index.search_budget(node, structure, budget_tokens=budget)
        assert sum(count_tokens(p.text) for p in got) <= budget, node.id
        assert [(p.doc_id, p.text) for p in got] == [
            (p.doc_id, p.text) for p in documented_rule(ranked, node, budget)
        ]
        # never cut: each passage is a whole piece of its document, in the ranking's order
        assert all((p.doc_id, p.text) in chunks for p in got), node.id
        assert all(" ".join(p.text.split()) in flat[p.doc_id] for p in got), node.id
        pos = {(p.doc_id, p.text): i for i, p in enumerate(ranked)}
        assert [pos[(p.doc_id, p.text)] for p in got] == sorted(pos[(p.doc_id, p.text)] for p in got)
        if node.type == "text" and len(node.sources) <= 1:  # no kind tier, no round-robin: by score
            assert non_increasing(got), node.id
        top8 = index.search(node, structure, budget_tokens=budget, k=8)
        assert got[: len(top8)] == top8, node.id
        more += len(got) > 8
    assert more >= len(structure.leaves()) * 0.9  # nearly every element gets more than the top 8


def test_offline_fill_keeps_its_top_eight_within_1500(aapl):
    gset, structure = aapl
    index = RetrievalIndex(gset)
    rec = Recorder(True)
    outline = render_outline(structure)
    fill_report(rec, outline, structure, gset, CTX)  # the defaults the offline build uses
    for node in structure.leaves():
        want = greedy([p.text for p in index.rank(node, structure)], 1500)
        # the first 8 that fit 1500 tokens, in rank order (a misfit skipped)
        oracle, left = [], 1500
        for p in index.rank(node, structure):
            if len(oracle) == 8:
                break
            if count_tokens(p.text) <= left:
                oracle.append(p.text)
                left -= count_tokens(p.text)
        assert [p.text for p in rec.given[node.id]] == oracle == want[:8], node.id
    # and the offline backend's report is the same whichever way its passages are asked for
    be = OfflineBackend()
    a = fill_report(be, outline, structure, gset, CTX, budget_tokens=1500)
    b = fill_report(OfflineBackend(), outline, structure, gset, CTX, budget_tokens=1500, k=8)
    assert a.report == b.report and a.evidence == b.evidence and a.passage_tokens == b.passage_tokens
