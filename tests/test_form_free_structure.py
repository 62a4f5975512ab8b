"""Issue 34 point 3: the offline form-free structure at t1 follows the domain's own documents.

Two 10-Ks of one category get top-level sections named by their own Items and notes (so they differ
where their filings differ), and two arXiv topics get themes named by words of their own papers. The
oracles are read here from the grounding documents (built from the shared corpus by
tests/conftest.py `grounding_sets`), not from the code under test.
"""

from __future__ import annotations

import re

import pytest

from tasks.llm.backend import StepContext
from tasks.synthesize.offline import OfflineBackend
from tests.conftest import arxiv_rows

FILINGS = {"AAPL-10-K": "2023-09-30", "NVDA-10-K": "2023-01-29"}
TOPICS = {  # the demo windows' papers, by arXiv id
    "gravitational-wave-astrophysics": ["2111.08717", "2111.13700", "2206.04062"],
    "exoplanets-and-host-stars": ["2010.01074", "2102.05672", "2110.06271", "2110.11839", "2111.08660"],
}
GW_W2 = ["2207.12409", "2210.12834", "2302.05333"]
TEMPLATE = {"Business Overview", "Financial Highlights", "Research Themes", "Overview", "Open Questions"}


def clean(title: str) -> str:
    """A heading without its "Item 7." / "Note 4 –" label, "(Unaudited)", case and quote style."""
    t = title.replace("’", "'").replace("–", "-").replace("—", "-")
    t = re.sub(r"(?i)^\s*(part\s+[ivx]+\W*)?item\s+\d+[a-z]?\s*[.:-]?\s*", "", t)
    t = re.sub(r"(?i)^\s*note\s+\d+[a-z]?\s*[-:.]\s*", "", t)
    t = re.sub(r"(?i)\(unaudited\)", "", t)
    return " ".join(t.lower().split()).strip(" .:")


def prose_words(markdown: str) -> int:
    lines = [ln for ln in markdown.splitlines() if ln.strip() and not ln.lstrip().startswith(("#", "|"))]
    return sum(len(ln.split()) for ln in lines)


def numeric_cells(markdown: str) -> int:
    rows = [ln for ln in markdown.splitlines() if ln.lstrip().startswith("|")]
    return sum(1 for r in rows for c in r.split("|") if re.search(r"\d", c))


@pytest.fixture(scope="module")
def filings(grounding_sets):
    be = OfflineBackend()
    out = {}
    for domain, snap in FILINGS.items():
        g = grounding_sets(domain, snap)
        out[domain] = (g, be.propose_structure(g, StepContext(domain, snap, "financial_annual", "edgar")))
    return out


def test_filing_sections_are_the_filings_own_items_and_notes(filings):
    (ga, sa), (gb, sb) = filings["AAPL-10-K"], filings["NVDA-10-K"]
    kinds = ("item", "note", "statement")
    heads = {
        k: {clean(d.title): d for d in g.documents if d.metadata.get("section_type") in kinds}
        for k, g in (("a", ga), ("b", gb))
    }
    ta, tb = {clean(n.title) for n in sa.nodes}, {clean(n.title) for n in sb.nodes}
    assert not {n.title for n in sa.nodes + sb.nodes} & TEMPLATE
    assert ta <= set(heads["a"]) and tb <= set(heads["b"]), (ta - set(heads["a"]), tb - set(heads["b"]))
    assert ta != tb
    # what both filings report at length is a section of both
    for common in ("business", "risk factors", "controls and procedures"):
        assert common in ta and common in tb
    assert any(t.startswith("management's discussion and analysis") for t in ta & tb)
    # each company's own segment note is a section of its report, and of no other
    for mine, other, g in ((ta, tb, ga), (tb, ta, gb)):
        (seg,) = [
            clean(d.title)
            for d in g.documents
            if d.metadata.get("section_type") == "note" and "segment" in d.title.lower()
        ]
        assert seg in mine and seg not in other
    # a section only one report has: the other filing lacks that heading, or says less under it
    for mine, other, g_mine, g_other, h_other in ((ta, tb, ga, gb, heads["b"]), (tb, ta, gb, ga, heads["a"])):
        for t in mine - other:
            if t not in h_other:
                continue
            d_other = h_other[t]
            d_mine = next(d for d in g_mine.documents if clean(d.title) == t)
            if d_other.metadata["section_type"] == "item":
                assert prose_words(g_other.texts[d_other.doc_id]) < prose_words(
                    g_mine.texts[d_mine.doc_id]
                ), t
            else:  # a note: the other report's notes are the more numeric (or segment) ones
                chosen = [
                    h_other[x]
                    for x in other
                    if h_other.get(x) and h_other[x].metadata["section_type"] == "note"
                ]
                n = numeric_cells(g_other.texts[d_other.doc_id])
                assert all(
                    numeric_cells(g_other.texts[c.doc_id]) >= n or "segment" in c.title.lower()
                    for c in chosen
                ), t


def test_filing_subsections_are_the_documents_own_headings(filings):
    mdna_titles = []
    for g, s in filings.values():
        for sec in s.nodes:
            subs = [c for c in sec.children if c.type == "subsection"]
            for sub in subs:
                (doc,) = set(sub.sources)
                own = {h.strip() for h in re.findall(r"^##\s+(.+)$", g.texts[doc], re.M)}
                assert sub.title in own, (sec.title, sub.title)
            if sec.title.startswith("Management"):
                mdna_titles.append({c.title for c in subs})
        n = sum(1 for x in s.walk() if x.type in ("section", "subsection"))
        assert 10 <= n <= 25, n  # paper 000 Table 1: ~19 sections in a 10-K gold report
    assert mdna_titles[0] != mdna_titles[1]


@pytest.fixture(scope="module")
def topics(grounding_sets):
    be = OfflineBackend()
    out = {}
    for topic, papers in TOPICS.items():
        g = grounding_sets(topic, "W1", papers)
        out[topic] = (g, be.propose_structure(g, StepContext(topic, "W1", "academic_simple", "arxiv")))
    return out


def themes(s) -> list:
    """The theme sections of a survey plan: all but its frame, an Overview first and Open Questions last."""
    assert [s.nodes[0].title, s.nodes[-1].title] == ["Overview", "Open Questions"]
    return s.nodes[1:-1]


def test_topics_get_their_own_themes(topics):
    titles = {topic: [n.title for n in themes(s)] for topic, (_, s) in topics.items()}
    a, b = titles.values()
    assert not set(a) & set(b) and not (set(a) | set(b)) & TEMPLATE, titles
    for g, s in topics.values():
        papers = {d.doc_id for d in g.documents}
        placed = [c.sources[0] for sec in s.nodes for c in sec.children if c.type == "subsection"]
        assert sorted(placed) == sorted(papers)  # every paper in exactly one theme
        for sec in themes(s):
            text = " ".join(g.texts[i] for i in sec.sources).lower()
            keywords = re.split(r", | and ", sec.title)
            assert len(keywords) >= 2
            for kw in keywords:
                assert kw.lower() in text, (sec.title, kw)


def _named_by_own_papers(g, sec) -> None:
    """Each keyword of a theme's title occurs in the papers the theme holds (oracle: their own text)."""
    text = " ".join(g.texts[i] for i in sec.sources).lower()
    for kw in re.split(r", | and ", sec.title):
        assert kw.lower() in text, (sec.title, kw)


def test_next_window_keeps_the_themes(grounding_sets, topics):
    """The themes keep their place (ids, order); each is named by the papers it holds now, not by W1's."""
    topic = "gravitational-wave-astrophysics"
    _, s1 = topics[topic]
    g2 = grounding_sets(topic, "W2", GW_W2)
    s2 = OfflineBackend().adapt_structure(s1, g2, StepContext(topic, "W2", "academic_simple", "arxiv"))
    assert [n.id for n in s2.nodes] == [n.id for n in s1.nodes]
    assert [s2.nodes[0].title, s2.nodes[-1].title] == ["Overview", "Open Questions"]
    ids2 = {d.doc_id for d in g2.documents}
    for sec in themes(s2):  # no theme left empty: each holds new papers, and is named by them
        subs = [c for c in sec.children if c.type == "subsection"]
        assert subs and all(set(c.sources) <= ids2 for c in subs), sec.title
        _named_by_own_papers(g2, sec)
    placed = sorted(c.sources[0] for sec in s2.nodes for c in sec.children if c.type == "subsection")
    assert placed == sorted(ids2)


def test_a_theme_no_new_paper_joins_is_dropped(grounding_sets):
    """mixed-sciences: two unrelated W1 papers make two themes; the next window's single paper fills one.
    The other, named by a W1 paper's words only, must not reach the W2 report (oracle: the MANIFEST's
    papers of the topic by date, and the papers' own text)."""
    topic = "mixed-sciences"
    rows = sorted((r for r in arxiv_rows() if r["topic"] == topic), key=lambda r: r["first_version_date"])
    w1, w2 = [r["arxiv_id"] for r in rows[:2]], [rows[2]["arxiv_id"]]
    be = OfflineBackend()
    g1, g2 = grounding_sets(topic, "W1", w1), grounding_sets(topic, "W2", w2)
    s1 = be.propose_structure(g1, StepContext(topic, "W1", "academic_simple", "arxiv"))
    s2 = be.adapt_structure(s1, g2, StepContext(topic, "W2", "academic_simple", "arxiv"))
    t1, t2 = themes(s1), themes(s2)
    assert len(t1) == 2 and len(t2) == 1
    assert t2[0].id in {n.id for n in t1}
    assert not {n.title for n in t2} & {n.title for n in t1}
    assert set(t2[0].sources) == {d.doc_id for d in g2.documents}
    _named_by_own_papers(g2, t2[0])
