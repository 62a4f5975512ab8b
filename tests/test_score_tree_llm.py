"""LLM mode of the structure tree (tasks/score/tree_llm.py) over a local OpenAI-compatible server."""

from __future__ import annotations

import pytest

import tests.llm_server as fake_llm
from tasks.errors import FrameInputError
from tasks.llm.client import LLMOutputError
from tasks.score.structural_similarity import structural_similarity
from tasks.score.tree import report_tree, tree_size
from tasks.score.tree_llm import llm_report_tree
from tests.llm_server import fast_settings

llm_server = fake_llm.llm_server
KEY_ENV = "FRAME_TEST_TREE_KEY"

REPORT = """# Acme Corp Q2 Report

## Results of Operations

Revenue rose to $1.2 billion.

| Segment | Revenue |
| --- | --- |
| Cloud | 700 |

## Liquidity

Cash was $300 million.
"""

TREE = {
    "title": "Acme Corp Q2 Report",
    "children": [
        {
            "type": "section",
            "title": "Results of Operations",
            "objective": "Explains revenue and its segments.",
            "children": [
                {"type": "text", "title": "", "objective": "Revenue change.", "children": []},
                {"type": "table", "title": "", "objective": "Revenue by segment.", "children": []},
            ],
        },
        {
            "type": "section",
            "title": "Liquidity",
            "objective": "Cash position.",
            "children": [{"type": "text", "title": "", "objective": "Cash balance.", "children": []}],
        },
    ],
}


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-tree")


def test_llm_tree_has_the_deterministic_shape_and_scores(llm_server, api_key, tmp_path):
    llm_server.script(fake_llm.json_reply(TREE))
    tree, meta = llm_report_tree(REPORT, fast_settings(llm_server, KEY_ENV), tmp_path)
    assert tree["type"] == "report" and tree["title"] == "Acme Corp Q2 Report"
    assert [c["title"] for c in tree["children"]] == ["Results of Operations", "Liquidity"]
    # the model's "text" nodes are left out (prose is no node, paper 000 §4.1): root, 2 sections, 1 table
    assert tree_size(tree) == tree_size(report_tree(REPORT)) == 4
    assert [c["type"] for c in tree["children"][0]["children"]] == ["table"]
    assert meta["parts"] == 1 and meta["prompt_sha256"]
    # the same report as the prompt's payload, and the tree feeds Algorithm 1 like a deterministic one
    assert "Revenue rose to $1.2 billion." in llm_server.chat_requests[0].messages[-1]["content"]

    def exact(r, s):
        return 1.0 if (r["type"], r.get("title")) == (s["type"], s.get("title")) else 0.0

    assert structural_similarity(tree, tree, exact) == 1.0
    # cached: a second call does not reach the server
    llm_report_tree(REPORT, fast_settings(llm_server, KEY_ENV), tmp_path)
    assert len(llm_server.chat_requests) == 1


def test_llm_tree_rejects_leaf_with_children_then_fails_loudly(llm_server, api_key, tmp_path):
    bad = {
        "title": "x",
        "children": [
            {
                "type": "table",
                "title": "",
                "objective": "t",
                "children": [{"type": "text", "title": "", "objective": "inside a table", "children": []}],
            }
        ],
    }
    llm_server.script(fake_llm.json_reply(bad), fake_llm.json_reply(TREE))
    tree, _ = llm_report_tree(REPORT, fast_settings(llm_server, KEY_ENV), tmp_path)
    assert len(llm_server.chat_requests) == 2 and tree_size(tree) == 4
    assert "cannot have children" in llm_server.chat_requests[1].messages[-1]["content"]

    llm_server.script(*[fake_llm.json_reply(bad)] * 5)
    with pytest.raises(LLMOutputError, match="score_structure"):
        llm_report_tree(REPORT + "\nMore.\n", fast_settings(llm_server, KEY_ENV), tmp_path)


def test_long_report_is_split_at_sections_not_cut(llm_server, api_key, tmp_path):
    body = " ".join(f"word{i}" for i in range(700))
    long_report = "# Long\n\n" + "".join(f"## Part {k}\n\n{body}\n\n" for k in range(4))
    settings = fast_settings(llm_server, KEY_ENV, context_tokens=4000, max_output_tokens=1000)

    def reply(req):
        text = req.messages[-1]["content"]
        titles = [line[3:].strip() for line in text.splitlines() if line.startswith("## ")]
        return fake_llm.json_reply(
            {
                "title": "",
                "children": [{"type": "section", "title": t, "objective": t, "children": []} for t in titles],
            }
        )

    llm_server.script(*[reply] * 4)
    tree, meta = llm_report_tree(long_report, settings, tmp_path)
    assert meta["parts"] >= 2
    assert [c["title"] for c in tree["children"]] == [f"Part {k}" for k in range(4)]  # all, in order
    assert "part 1 of" in llm_server.chat_requests[0].messages[-1]["content"]

    huge = "# H\n\n## One\n\n" + " ".join(f"w{i}" for i in range(5000))
    with pytest.raises(FrameInputError, match="One"):
        llm_report_tree(huge, settings, tmp_path)
