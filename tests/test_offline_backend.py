"""The offline backend on real demo grounding sets: structure, adaptation, questions, extractive fill.

Grounding sets are built once per session from ../shared/corpus by the current code (tests/conftest.py
`grounding_sets`), never read from the checkout's data/ folder.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from schemas.structure import LEAVES, ReportStructure, structure_json
from tasks.ground.load import GroundingSet
from tasks.llm.backend import Passage, StepContext
from tasks.synthesize.offline import NO_EVIDENCE, OfflineBackend
from tasks.synthesize.retrieve import RetrievalIndex
from tasks.tokens import count_tokens

ROOT = Path(__file__).resolve().parents[1]
PAPERS = {  # two windows of gravitational-wave papers (the demo config's W1 and W2), by id
    "W1": ["2111.08717", "2111.13700", "2206.04062"],
    "W2": ["2207.12409", "2210.12834", "2302.05333"],
}
GW = "gravitational-wave-astrophysics"
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
HEADING_LINE = re.compile(r"^\s{0,3}#{1,6}\s", re.M)


@pytest.fixture(scope="session")
def grounding(grounding_sets):
    """get(domain, snapshot): the real grounding set, built from the corpus by the current code."""
    return lambda domain, snapshot: grounding_sets(
        domain, snapshot, PAPERS.get(snapshot) if domain == GW else None
    )


def ctx(domain: str, snapshot: str) -> StepContext:
    if domain == GW:
        return StepContext(domain, snapshot, "academic_simple", "arxiv")
    cat = "financial_annual" if domain.endswith("10-K") else "financial_quarterly"
    return StepContext(domain, snapshot, cat, "edgar")


def build(
    grounding, domain: str, snapshots: list[str]
) -> list[tuple[GroundingSet, StepContext, ReportStructure]]:
    """Structure + questions per snapshot, the first form-free, the next ones adapted."""
    be = OfflineBackend()
    out, prev = [], None
    for snap in snapshots:
        g, c = grounding(domain, snap), ctx(domain, snap)
        s = be.propose_structure(g, c) if prev is None else be.adapt_structure(prev, g, c)
        s = be.add_questions(s, g, prev, c)
        out.append((g, c, s))
        prev = s
    return out


def fill_all(
    g: GroundingSet, c: StepContext, s: ReportStructure, budget: int = 1500, k: int = 8
) -> dict[str, str]:
    be, index = OfflineBackend(), RetrievalIndex(g)
    return {n.id: be.fill(n, s, index.search(n, s, budget_tokens=budget, k=k), c) for n in s.leaves()}


CASES = [("AAPL-10-Q", "2025-03-29"), ("NVDA-10-K", "2025-01-26"), (GW, "W1")]


@pytest.fixture(scope="module")
def built(grounding):
    return {case: build(grounding, case[0], [case[1]])[0] for case in CASES}


@pytest.fixture(scope="module")
def filled(built):
    return {case: fill_all(*built[case]) for case in CASES}


# ---------------------------------------------------------------- structure


def test_backend_protocol_and_provenance(built):
    be = OfflineBackend()
    assert be.name == "offline"
    for g, _, s in built.values():
        provs = [(p.backend, p.model, p.role) for p in s.provenance]
        assert ("offline", "frame-offline-structure-v1", "structure") in provs
        assert ("offline", "frame-offline-questions-v1", "questions") in provs
        assert not s.form_restricted
        ReportStructure.model_validate_json(s.model_dump_json())  # round trip
        ids = {d.doc_id for d in g.documents}
        for leaf in s.leaves():
            assert leaf.sources and set(leaf.sources) <= ids, leaf.id
            assert leaf.objective.strip() and leaf.title.strip()
        for n in s.walk():
            expect = r"s\d+(\.\d+)*" + (r"\.(t|tb|f|l)\d+" if n.type in LEAVES else "")
            assert re.fullmatch(expect, n.id), n.id


def _statements(s: ReportStructure):
    """The section of the primary statements (titled by the filing's own financial-statements Item)."""
    return next(n for n in s.nodes if n.title.startswith("Financial Statements"))


def test_filing_structure_shape(built):
    for case in CASES[:2]:
        _, _, s = built[case]
        titles = [n.title for n in s.nodes]
        assert "Controls and Procedures" in titles and "Risk Factors" in titles, (case, titles)
        fh = _statements(s)
        assert [c.sources for c in fh.children] == [
            ["statement-of-operations"],
            ["balance-sheet"],
            ["statement-of-cash-flows"],
        ]
        assert all(c.type == "table" for c in fh.children)
        mdna = next(n for n in s.nodes if n.title.replace("’", "'").startswith("Management's Discussion"))
        assert 1 <= len(mdna.children) <= 6 and all(c.type == "subsection" for c in mdna.children)
    assert "Business" in [n.title for n in built[CASES[1]][2].nodes]  # 10-K only
    assert "Business" not in [n.title for n in built[CASES[0]][2].nodes]


def test_paper_structure_shape(built):
    g, _, s = built[(GW, "W1")]
    papers = [c for sec in s.nodes for c in sec.children if c.type == "subsection"]
    assert sorted(c.title for c in papers) == sorted(d.title.strip() for d in g.documents)
    docs = {d.title.strip(): d for d in g.documents}
    for sub in papers:
        doc = docs[sub.title]
        kinds = [c.type for c in sub.children]
        assert kinds[:2] == ["text", "text"]
        assert ("table" in kinds) == (doc.tables > 0) and ("figure" in kinds) == (doc.images > 0)
    for sec in s.nodes:  # a theme of several papers compares them in one table
        subs = [c for c in sec.children if c.type == "subsection"]
        grids = [c for c in sec.children if c.type == "table"]
        assert len(grids) == (len(subs) >= 2)
        if grids:
            assert grids[0].sources == [c.sources[0] for c in subs]


def test_questions_per_section(built):
    for _, _, s in built.values():
        for sec in s.nodes:
            assert 5 <= len(sec.questions) <= 8, (sec.title, sec.questions)
            assert len({q.lower() for q in sec.questions}) == len(sec.questions)
        for n in s.walk():
            assert all(q.endswith("?") and len(q) > 10 for q in n.questions)
            if n.type != "section":
                assert 1 <= len(n.questions) <= 3, (n.id, n.questions)


def test_questions_name_salient_facts(built):
    _, _, s = built[("AAPL-10-Q", "2025-03-29")]
    fh = _statements(s)
    assert "What was Total net sales — Three Months Ended March 29, 2025?" in fh.questions
    assert any(q.startswith("How did Total assets change from") for q in fh.questions)
    _, _, p = built[(GW, "W1")]
    qs = [q for n in p.walk() for q in n.questions]
    assert "What method does LEGWORK use?" in qs
    assert any(q.startswith("What dataset does") for q in qs)
    assert any(re.match(r"What does .* report for the .*\?$", q) for q in qs)


def test_deterministic_structures_and_fill(grounding, built, filled):
    for case in CASES:
        again = build(grounding, case[0], [case[1]])[0][2]
        assert structure_json(again) == structure_json(built[case][2])
    g, c, s = built[CASES[0]]
    assert fill_all(g, c, s) == filled[CASES[0]]


def _digest(structure: ReportStructure, contents: dict[str, str]) -> str:
    return hashlib.sha256((structure_json(structure) + repr(sorted(contents.items()))).encode()).hexdigest()


def test_byte_identical_across_processes(built, filled):
    """Another interpreter with another hash seed produces the same bytes (no set-order dependence)."""
    g, _, s = built[CASES[0]]
    code = (
        "import sys; sys.path.insert(0, {root!r}); sys.path.insert(0, {tests!r})\n"
        "import test_offline_backend as t\n"
        "from tasks.ground.load import load_grounding_set\n"
        "g = load_grounding_set({folder!r})\n"
        "(g2, c, s), = t.build(lambda d, sn: g, 'AAPL-10-Q', ['2025-03-29'])\n"
        "print(t._digest(s, t.fill_all(g2, c, s)))\n"
    ).format(root=str(ROOT), tests=str(ROOT / "tests"), folder=str(g.folder))
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == _digest(s, filled[CASES[0]])


# ---------------------------------------------------------------- form-restricted adaptation


def test_adapt_filing_keeps_layout(grounding):
    (g1, _, s1), (g2, _, s2) = build(grounding, "AAPL-10-Q", ["2025-03-29", "2025-06-28"])
    assert s2.form_restricted
    assert [(n.id, n.title) for n in s2.nodes] == [(n.id, n.title) for n in s1.nodes]
    ids2 = {d.doc_id for d in g2.documents}
    for leaf in s2.leaves():
        assert set(leaf.sources) <= ids2
    old = {n.id: n for n in s1.walk()}
    kept = [n for n in s2.walk() if n.id in old]
    assert len(kept) >= 0.8 * len(old)  # a quarter later the filing is organised the same way
    for n in kept:
        assert n.type == old[n.id].type
        if n.type in ("section", "subsection"):
            assert n.title == old[n.id].title
    assert "2025-06-28" not in s1.title and "June 28, 2025" in s2.title
    # kept questions only mention numbers (dates) that the new filing still contains
    text2 = "\n".join(g2.texts.values())
    old_qs = {q for n in s1.walk() for q in n.questions}
    for n in s2.walk():
        for q in n.questions:
            if q in old_qs:
                assert all(x in text2 for x in NUMBER.findall(q)), q


def test_adapt_papers_replaces_per_paper_subsections(grounding):
    (g1, _, s1), (g2, _, s2) = build(grounding, GW, ["W1", "W2"])
    assert [n.id for n in s2.nodes] == [n.id for n in s1.nodes]  # the themes, in place
    for sec in s2.nodes[1:-1]:  # ... each theme (between Overview and Open Questions) named by its papers
        text = " ".join(g2.texts[i] for i in sec.sources).lower()
        assert all(kw.lower() in text for kw in re.split(r", | and ", sec.title)), sec.title
    papers = [c for sec in s2.nodes for c in sec.children if c.type == "subsection"]
    assert sorted(c.title for c in papers) == sorted(d.title.strip() for d in g2.documents)
    old = {c.id for sec in s1.nodes for c in sec.children if c.type == "subsection"}
    assert not {c.id for c in papers} & old  # new ids, no reuse
    ids2 = {d.doc_id for d in g2.documents}
    for leaf in s2.leaves():
        assert leaf.sources and set(leaf.sources) <= ids2
    for sec in s2.nodes:
        assert 5 <= len(sec.questions) <= 8
    assert not any("LEGWORK" in q for n in s2.walk() for q in n.questions)  # W1 paper no longer there


def test_adapt_drops_only_without_evidence(grounding, built):
    g, c, s = built[("AAPL-10-Q", "2025-03-29")]
    gone = {"part-2-item-1a-risk-factors", "note-02-revenue"}
    reduced = GroundingSet(
        g.folder,
        [d for d in g.documents if d.doc_id not in gone],
        {k: v for k, v in g.texts.items() if k not in gone},
        g.facts,
    )
    a = OfflineBackend().adapt_structure(s, reduced, c)
    assert [n.title for n in a.nodes] == [n.title for n in s.nodes]  # layout kept
    risk = next(n for n in a.nodes if n.title == "Risk Factors")
    assert [leaf.sources for leaf in risk.children] == [[]]  # no evidence left: one empty text leaf
    revenue = next(n for n in a.nodes if n.title == "Revenue")  # the note's own section, now empty
    assert [leaf.sources for leaf in revenue.children] == [[]]
    others = [n for n in a.nodes if n.title != "Revenue"]
    assert all(
        leaf.sources
        for n in others
        if n.title != "Risk Factors"
        for leaf in n.children
        if leaf.type in LEAVES
    )
    text = OfflineBackend().fill(risk.children[0], a, [], c)
    assert text == NO_EVIDENCE


# ---------------------------------------------------------------- fill


def test_fill_numbers_are_verbatim(built, filled):
    for case in CASES:
        g, _, s = built[case]
        corpus = "\n".join(g.texts.values())
        contents = filled[case]
        assert set(contents) == {n.id for n in s.leaves()}
        for node_id, text in contents.items():
            assert text.strip(), node_id
            assert "<!-- FILL" not in text
            assert not HEADING_LINE.search(text), (node_id, text[:200])
            for num in NUMBER.findall(text):
                assert num in corpus, (case, node_id, num)


def test_fill_kinds(built, filled):
    for case in CASES:
        _, _, s = built[case]
        for n in s.leaves():
            text = filled[case][n.id]
            if text == NO_EVIDENCE:
                continue
            if n.type == "table":
                assert re.search(r"^\|.*\|\s*$", text, re.M), n.id
            if n.type == "figure":  # an image only when it links a file; a paper's anchor link is its caption
                for link in re.findall(r"^!\[.*\]\(([^)\s]*)\)$", text, re.M):
                    assert re.search(r"^https?://|\.(?:png|jpe?g|gif|svg)$", link), (n.id, link)
            if n.type == "list":
                assert all(line.startswith("- ") for line in text.splitlines() if line.strip()), n.id
    g, _, s = built[(GW, "W1")]
    comparison = next(n for n in s.leaves() if n.title == "Comparison of approaches")
    grid = filled[(GW, "W1")][comparison.id].splitlines()
    theme = next(sec for sec in s.nodes if comparison in sec.walk())
    assert grid[0] == "| Paper | Approach | Key result |" and len(grid) >= 2 + 1
    # a row per paper of the theme whose approach and result were both found; no row with an empty cell
    assert len(grid) - 2 <= len([c for c in theme.children if c.type == "subsection"])
    assert all(all(cell.strip() for cell in row.strip("|").split("|")) for row in grid[2:])


def test_fill_sizes(built, filled):
    sizes = {case: sum(count_tokens(t) for t in filled[case].values()) for case in CASES}
    assert 1500 <= sizes[("AAPL-10-Q", "2025-03-29")] <= 7000, sizes
    assert 1500 <= sizes[("NVDA-10-K", "2025-01-26")] <= 10000, sizes
    assert 1000 <= sizes[(GW, "W1")] <= 8000, sizes
    for case in CASES:
        for node_id, text in filled[case].items():
            node = built[case][2].find(node_id)
            if node.type == "text":
                assert count_tokens(text) <= 600 + 20, node_id  # budget plus paragraph separators


def test_fill_sanitizes_and_handles_no_evidence():
    from schemas.structure import StructureNode

    be, c = OfflineBackend(), StepContext("d", "t", "financial_quarterly", "edgar")
    node = StructureNode(
        id="s1.t1", type="text", title="Revenue growth", objective="Explain revenue growth.", sources=["doc"]
    )
    s = ReportStructure(
        title="r", nodes=[StructureNode(id="s1", type="section", title="Revenue", children=[node])]
    )
    assert be.fill(node, s, [], c) == NO_EVIDENCE
    assert not re.search(r"\d", NO_EVIDENCE)
    table = StructureNode(id="s1.tb1", type="table", title="Revenue table", sources=["doc"])
    p = Passage(
        "doc", "## Revenue\n\n<!-- FILL x -->\n\n| a | b |\n|---|---|\n| Revenue | 1,234 |", "table", 1.0, 20
    )
    out = be.fill(table, s, [p], c)
    assert "**Revenue**" in out and "<!-- FILL" not in out and "| Revenue | 1,234 |" in out
    assert not HEADING_LINE.search(out)
    prose = Passage(
        "doc", "Revenue growth was 12% in the quarter. The weather was fine today.", "text", 1.0, 16
    )
    assert be.fill(node, s, [prose], c) == "Revenue growth was 12% in the quarter."
