"""Holistic direct scores (paper 001 App. G.7): the offline proxy on tiny hand-computed reports and the LLM
judge over the local OpenAI-compatible test server (tests/llm_server.py)."""

from __future__ import annotations

import pytest

import tests.llm_server as fake_llm
from schemas.scoring import GroundingText
from tasks.llm.client import LLMClient, LLMOutputError
from tasks.score.holistic import (
    HOLISTIC_METRICS,
    LLMHolisticJudge,
    OfflineHolisticJudge,
    cut_to_tokens,
    holistic,
    input_budget,
    proportional_caps,
    water_fill,
)
from tasks.tokens import count_tokens
from tests.llm_server import fast_settings, json_reply, malformed

llm_server = fake_llm.llm_server
KEY_ENV = "FRAME_TEST_HOLISTIC_KEY"

G = [
    GroundingText(
        "d1",
        "Quarterly report",
        "Revenue was $1,234.5 million in the quarter. Net income was $210.3 million.\n\n"
        "Headcount reached 5,120 employees on June 30, 2025.",
    )
]

GOLD = """# Acme Q2 report

## Results

Revenue was $1,234.5 million in the quarter. Net income was $210.3 million.

## People

Headcount reached 5,120 employees.
"""


def _values(results):
    return {r.metric: r.value for r in results}


# ---------------------------------------------------------------- offline proxy


def test_report_with_all_figures_in_g_is_fully_faithful():
    report = "# Acme\n\n## Results\n\nRevenue was $1,234.5 million. Net income was $210.3 million.\n"
    res = holistic(GOLD, report, G, OfflineHolisticJudge())
    assert [r.metric for r in res] == list(HOLISTIC_METRICS)
    assert all(r.judge == "offline:holistic-proxy" and r.items == [] for r in res)
    v = _values(res)
    assert v["holistic_faithfulness"] == 10.0 and v["holistic_hallucination"] == 10.0
    assert v["holistic_understandability"] == 10.0  # heading, short sentences, no repeat, no HTML
    # completeness: Y's figures 2/3 found (5,120 missing), Y's H2 headings 1/2 (People missing)
    # -> 1 + 9 * mean(2/3, 1/2) = 1 + 9 * 7/12 = 6.25 -> 6
    assert v["holistic_completeness"] == 6.0
    detail = res[0].detail
    assert detail["faithfulness_share"] == 1.0 and detail["figures"] == 2
    assert "faithfulness: R' strong figures found in G 2/2" in detail["rationale"]
    assert detail["gold_figures_share"] == pytest.approx(2 / 3) and detail["gold_headings_share"] == 0.5


def test_half_the_figures_missing_from_g():
    # figures: $1,234.5 million (in G), $999.9 million (not), 17.4% (not), 5,120 (in G); 2025 is a year
    report = (
        "## Results\n\nRevenue was $1,234.5 million. Net income was $999.9 million and the margin 17.4%.\n\n"
        "Headcount reached 5,120 employees in 2025.\n"
    )
    res = holistic(GOLD, report, G, OfflineHolisticJudge())
    v = _values(res)
    assert v["holistic_faithfulness"] == 6.0  # 1 + 9 * 2/4 = 5.5, rounded half up
    assert v["holistic_hallucination"] == 7.0  # 1 of 3 sentences unsupported: 1 + 9 * 2/3 = 7
    d = res[0].detail
    assert (d["figures"], d["figures_found"], d["unsupported_pieces"], d["pieces"]) == (4, 2, 1, 3)
    assert "found in G 2/4" in d["rationale"] and "found nowhere in G 1/3" in d["rationale"]


def test_gold_against_itself_is_complete():
    res = holistic(GOLD, GOLD, G, OfflineHolisticJudge())
    v = _values(res)
    assert v["holistic_completeness"] == 10.0
    assert v["holistic_faithfulness"] == 10.0 and v["holistic_hallucination"] == 10.0
    # fuzzy headings: numbering and case do not matter
    renamed = GOLD.replace("## Results", "## 1. results").replace("## People", "### 2 People")
    assert _values(holistic(GOLD, renamed, G, OfflineHolisticJudge()))["holistic_completeness"] == 10.0


def test_empty_report_gets_one_everywhere():
    for report in ("", "   \n", "# Title\n\n## Section\n"):
        res = holistic(GOLD, report, G, OfflineHolisticJudge())
        assert list(_values(res).values()) == [1.0, 1.0, 1.0, 1.0]
        assert "no content" in res[0].detail["rationale"]


def test_understandability_checks():
    para = "The plant in Ohio opened as planned and hired local staff."
    bad = f"Revenue was $1,234.5 million.<br>\n\n{para}\n\n{para}\n"
    res = holistic(GOLD, bad, G, OfflineHolisticJudge())
    checks = res[0].detail["readability_checks"]
    assert checks == {
        "has_headings": False,
        "short_sentences": True,
        "no_repeated_sentence": False,
        "no_raw_html": False,
    }
    assert _values(res)["holistic_understandability"] == 3.0  # 1 + 9 * 1/4 = 3.25 -> 3
    # the repeat inside longer paragraphs is still a repeat; re-paragraphing does not change the check
    merged = f"# T\n\n## Part\n\nIt began in May. {para}\n\nSales rose in June. {para}\n"
    res = holistic(GOLD, merged, G, OfflineHolisticJudge())
    assert res[0].detail["readability_checks"]["no_repeated_sentence"] is False


def test_long_sentences_fail_the_readability_check():
    long = " ".join(["word"] * 40) + "."
    other = " ".join(["term"] * 40) + "."
    report = f"# T\n\n## Part\n\n{long} {other}\n"
    res = holistic(GOLD, report, G, OfflineHolisticJudge())
    assert res[0].detail["readability_checks"]["short_sentences"] is False
    assert _values(res)["holistic_understandability"] == 8.0  # 1 + 9 * 3/4 = 7.75 -> 8


def test_figure_free_report_is_vacuously_faithful():
    res = holistic(
        GOLD, "## Results\n\nThe company did well this quarter overall.\n", G, OfflineHolisticJudge()
    )
    v = _values(res)
    assert v["holistic_faithfulness"] == 10.0 and v["holistic_hallucination"] == 10.0
    assert "vacuously faithful" in res[0].detail["rationale"]


def test_truncation_helpers():
    text = "\n".join(f"Line {i} holds a few words of text." for i in range(200))
    cut, was_cut = cut_to_tokens(text, 100)
    assert was_cut and count_tokens(cut) <= 100
    assert cut.startswith("Line 0 holds") and cut.endswith("lines shown ...]")
    body = cut.rsplit("\n", 1)[0]
    assert all(line in text.split("\n") for line in body.split("\n"))  # whole lines only
    assert cut_to_tokens(text, 10**6) == (text, False)
    one_line = " ".join(f"w{i}" for i in range(500))
    cut, was_cut = cut_to_tokens(one_line, 60)
    assert was_cut and count_tokens(cut) <= 60 and one_line.startswith(cut.split("\n")[0])
    assert proportional_caps([100, 300], 1000) == [100, 300]
    assert proportional_caps([100, 300], 200) == [50, 150]
    assert water_fill([10, 500, 1000], 610) == [10, 300, 300]
    assert water_fill([10, 20], 100) == [10, 20]


# ---------------------------------------------------------------- LLM judge over HTTP


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-holistic")


def _judge(server, tmp_path, **overrides) -> LLMHolisticJudge:
    settings = fast_settings(server, KEY_ENV, **overrides)
    return LLMHolisticJudge(LLMClient(settings, tmp_path / "llm-cache"), settings)


def _reply(f=8, c=6, u=9, h=9, why="mostly right"):
    return json_reply(
        {"faithfulness": f, "completeness": c, "understandability": u, "hallucination": h, "rationale": why}
    )


REPORT = "# Acme\n\n## Results\n\nRevenue was $1,234.5 million.\n"


def test_llm_judge_valid_reply(llm_server, api_key, tmp_path):
    llm_server.script(_reply())
    judge = _judge(llm_server, tmp_path)
    res = holistic(GOLD, REPORT, G, judge)
    assert judge.name == "openai:test-model"
    assert _values(res) == {
        "holistic_faithfulness": 8.0,
        "holistic_completeness": 6.0,
        "holistic_understandability": 9.0,
        "holistic_hallucination": 9.0,
    }
    assert all(r.judge == "openai:test-model" and r.detail["rationale"] == "mostly right" for r in res)
    reqs = llm_server.chat_requests
    assert len(reqs) == 1
    msg = reqs[0].messages[-1]["content"]
    assert "All inputs are shown in full." in msg
    assert "Headcount reached 5,120 employees." in msg  # the gold report
    assert "### Document d1: Quarterly report" in msg and "June 30, 2025" in msg  # the grounding
    assert "Revenue was $1,234.5 million." in msg  # the report to evaluate
    holistic(GOLD, REPORT, G, judge)  # cached: no new request
    assert len(llm_server.chat_requests) == 1


def test_llm_out_of_range_score_gets_a_corrective_retry(llm_server, api_key, tmp_path):
    llm_server.script(_reply(f=11), _reply(f=7))
    res = holistic(GOLD, REPORT, G, _judge(llm_server, tmp_path))
    assert _values(res)["holistic_faithfulness"] == 7.0
    reqs = llm_server.chat_requests
    assert len(reqs) == 2
    retry = reqs[1].messages
    assert retry[-2]["role"] == "assistant" and '"faithfulness": 11' in retry[-2]["content"]
    assert "could not be used" in retry[-1]["content"] and "faithfulness" in retry[-1]["content"]


def test_llm_persistently_invalid_fails_loudly(llm_server, api_key, tmp_path):
    llm_server.script(_reply(u=0), malformed(), _reply(h=8.5))
    with pytest.raises(LLMOutputError, match="score_holistic"):
        holistic(GOLD, REPORT, G, _judge(llm_server, tmp_path, invalid_retries=2))
    assert len(llm_server.chat_requests) == 3


def test_llm_empty_report_needs_no_request(llm_server, api_key, tmp_path):
    res = holistic(GOLD, "  \n", G, _judge(llm_server, tmp_path))
    assert list(_values(res).values()) == [1.0] * 4
    assert llm_server.chat_requests == []


def test_llm_inputs_too_long_are_cut_and_said(llm_server, api_key, tmp_path):
    def text(tag: str, n: int) -> str:
        return "\n".join(f"{tag} line {i}: the figure was {i * 7}.5 units." for i in range(n))

    gold = "# Gold\n\n" + text("gold", 300)
    report = "# Report\n\n" + text("report", 300)
    docs = [GroundingText(f"doc{k}", f"Doc {k}", text(f"doc{k}", 200)) for k in range(40)]
    llm_server.script(_reply())
    judge = _judge(llm_server, tmp_path, context_tokens=8192, max_output_tokens=400)
    res = holistic(gold, report, docs, judge)
    msg = llm_server.chat_requests[0].messages[-1]["content"]
    sent = sum(count_tokens(m["content"]) for m in llm_server.chat_requests[0].messages)
    assert sent <= input_budget(judge.settings)
    assert "NOTE: the inputs were too long" in msg
    assert "the gold report is cut" in msg and "the report to evaluate is cut" in msg
    assert "grounding documents left out for lack of room: " in msg  # 40 docs cannot all get 100 tokens
    assert "### Document doc0: Doc 0" in msg and "[... cut here:" in msg
    assert "gold line 0:" in msg and "report line 0:" in msg  # kept from the start
    assert "inputs shortened" in res[0].detail["rationale"] and "truncation" in res[0].detail
