"""Pairwise votes and the Bradley-Terry ranking (paper 002 §4.2): the offline metric vote by hand, both
display orders with an LLM judge over the local OpenAI-compatible test server (tests/llm_server.py),
and Bradley-Terry fits on synthetic votes whose true strengths are known."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import tests.llm_server as fake_llm
from tasks.llm.client import LLMClient, LLMOutputError
from tasks.score.holistic import input_budget
from tasks.score.pairwise import (
    BT_COLUMNS,
    VOTE_COLUMNS,
    LLMPairwiseJudge,
    OfflinePairwiseJudge,
    bradley_terry,
    bt_markdown,
    compare_both_orders,
    offline_vote,
    pairwise_instance,
)
from tasks.tokens import count_tokens
from tests.llm_server import fast_settings, json_reply, malformed

llm_server = fake_llm.llm_server
KEY_ENV = "FRAME_TEST_PAIRWISE_KEY"

TRUE = {"alpha": 1.5, "bravo": 0.5, "charlie": 0.0, "delta": -1.0}


def synthetic_votes(n_instances: int, seed: int = 0, tie_rate: float = 0.1) -> pd.DataFrame:
    """Votes of every pair in both orders per instance: a tie with probability `tie_rate`, else A wins
    with the Bradley-Terry probability sigma(theta_a - theta_b)."""
    rng = np.random.default_rng(seed)
    names = sorted(TRUE)
    rows = []
    for n in range(n_instances):
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                p = 1.0 / (1.0 + math.exp(-(TRUE[a] - TRUE[b])))
                for order in ("ab", "ba"):
                    tie = rng.random() < tie_rate
                    vote = "tie" if tie else ("A" if rng.random() < p else "B")
                    rows.append(
                        {
                            "instance_id": f"inst-{n:04d}",
                            "system_a": a,
                            "system_b": b,
                            "order": order,
                            "vote": vote,
                        }
                    )
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- offline vote


def test_offline_vote_majority_and_lower_is_better():
    a = {"coverage": 0.80, "faithfulness": 0.70, "text_edit_distance": 0.30}
    b = {"coverage": 0.60, "faithfulness": 0.90, "text_edit_distance": 0.50}
    vote, why = offline_vote(a, b)
    # coverage -> A, faithfulness -> B, text_edit_distance: lower is better -> A
    assert vote == "A"
    assert "coverage: A" in why and "faithfulness: B" in why
    assert "text_edit_distance: A (0.3 vs 0.5, lower is better)" in why
    assert why.endswith("A 2, B 1, abstain 0 -> A")
    assert offline_vote(b, a)[0] == "B"


def test_offline_vote_tolerance_abstains_relative_to_the_range():
    # 0.005 apart on a 0-1 metric: |diff| <= 0.01 abstains; 0.05 apart on the 0-100 rubric abstains too
    a = {"coverage": 0.805, "rubric": 70.0, "structure": 0.9}
    b = {"coverage": 0.800, "rubric": 70.5, "structure": 0.5}
    vote, why = offline_vote(a, b)
    assert vote == "A" and why.endswith("A 1, B 0, abstain 2 -> A")
    assert "coverage: abstain" in why and "rubric: abstain" in why
    # holistic metrics range 1-10: a 0.05 gap is within 1% of 9
    assert offline_vote({"holistic_faithfulness": 8.0}, {"holistic_faithfulness": 8.05})[0] == "tie"
    assert offline_vote({"holistic_faithfulness": 8.0}, {"holistic_faithfulness": 9.0})[0] == "B"
    # custom range and tolerance
    assert offline_vote({"x": 5.0}, {"x": 6.0}, ranges={"x": (0.0, 1000.0)})[0] == "tie"
    assert offline_vote({"x": 0.5}, {"x": 0.6}, tol=0.2)[0] == "tie"


def test_offline_vote_ties_and_missing_values():
    assert (
        offline_vote({"coverage": 0.9, "faithfulness": 0.1}, {"coverage": 0.1, "faithfulness": 0.9})[0]
        == "tie"
    )
    vote, why = offline_vote({"coverage": None, "structure": 0.5}, {"coverage": 0.9, "faithfulness": 0.3})
    assert vote == "tie" and why == "no metric with a value for both systems -> tie"
    assert offline_vote({"coverage": float("nan")}, {"coverage": 0.2})[0] == "tie"


def test_offline_judge_in_both_orders():
    judge = OfflinePairwiseJudge(
        {"zulu": {"coverage": 0.9, "faithfulness": 0.8}, "alpha": {"coverage": 0.5, "faithfulness": 0.4}}
    )
    rows = compare_both_orders("i1", "zulu", "alpha", "gold", "report z", "report a", judge)
    assert [tuple(r) for r in rows] == [VOTE_COLUMNS] * 2
    assert [(r["system_a"], r["system_b"], r["order"], r["raw_vote"], r["vote"]) for r in rows] == [
        ("alpha", "zulu", "ab", "2", "B"),  # alpha shown first, zulu (second) wins
        ("alpha", "zulu", "ba", "1", "B"),
    ]
    assert rows[0]["judge"] == "offline:metric-vote" and "coverage: B" in rows[0]["rationale"]
    with pytest.raises(KeyError, match="echo"):
        compare_both_orders("i1", "echo", "alpha", "g", "", "", judge)


def test_pairwise_instance_covers_every_pair_twice():
    scores = pd.DataFrame(
        [
            {"instance_id": "i1", "system": s, "metric": m, "value": v}
            for s, vals in {"c": (0.9, 0.9), "a": (0.5, 0.5), "b": (0.7, None)}.items()
            for m, v in zip(("coverage", "faithfulness"), vals, strict=True)
        ]
        + [{"instance_id": "i2", "system": "a", "metric": "coverage", "value": 1.0}]
    )
    judge = OfflinePairwiseJudge.from_scores(scores, "i1")
    assert judge.values["b"] == {"coverage": 0.7, "faithfulness": None}
    rows = pairwise_instance("i1", ["c", "a", "b"], "gold", {"a": "", "b": "", "c": ""}, judge)
    assert [(r["system_a"], r["system_b"], r["order"]) for r in rows] == [
        ("a", "b", "ab"),
        ("a", "b", "ba"),
        ("a", "c", "ab"),
        ("a", "c", "ba"),
        ("b", "c", "ab"),
        ("b", "c", "ba"),
    ]
    assert [r["vote"] for r in rows] == ["B", "B", "B", "B", "B", "B"]
    assert pairwise_instance("i1", ["c", "a", "b"], "g", {s: "" for s in "abc"}, judge, workers=3) == rows
    with pytest.raises(ValueError, match="no report"):
        pairwise_instance("i1", ["a", "b"], "g", {"a": ""}, judge)


# ---------------------------------------------------------------- Bradley-Terry


def test_bt_recovers_the_true_order_and_cis_shrink():
    small = bradley_terry(synthetic_votes(20, seed=1), n_boot=300, seed=0)
    large = bradley_terry(synthetic_votes(320, seed=1), n_boot=300, seed=0)
    assert list(large.columns) == list(BT_COLUMNS)
    truth = sorted(TRUE, key=lambda s: -TRUE[s])
    assert list(large["system"]) == truth and list(large["rank"]) == [1, 2, 3, 4]
    assert large["score"].mean() == pytest.approx(0.0, abs=1e-9)  # centred
    assert (large["ci_low"] <= large["score"]).all() and (large["score"] <= large["ci_high"]).all()
    assert list(large["rank_low"]) == [1, 2, 3, 4] and list(large["rank_high"]) == [1, 2, 3, 4]
    width = lambda df: float((df["ci_high"] - df["ci_low"]).mean())  # noqa: E731
    assert width(large) < 0.5 * width(small)  # ~ 1/sqrt(16) = 0.25 expected
    assert large["elo"].tolist() == pytest.approx((1000 + 400 / math.log(10) * large["score"]).tolist())
    # every pair, both orders, each instance: 3 opponents x 2 orders x 320 games per system
    assert (large["games"] == 320 * 6).all()
    assert (large["wins"] + large["losses"] + large["ties"] == large["games"]).all()
    assert large.attrs["n_instances"] == 320 and large.attrs["n_boot"] == 300


def test_bt_is_seeded_and_row_order_free():
    votes = synthetic_votes(30, seed=2)
    a = bradley_terry(votes, n_boot=200, seed=5)
    b = bradley_terry(votes.sample(frac=1.0, random_state=3), n_boot=200, seed=5)
    pd.testing.assert_frame_equal(a, b)
    c = bradley_terry(votes, n_boot=200, seed=6)
    assert not np.allclose(a["ci_low"], c["ci_low"])
    assert np.allclose(a["score"], c["score"])


def test_ties_count_as_half_wins():
    # x beats y 6 times, loses 2, ties 4: wins with ties as halves 8 : 4 -> score gap log 2
    votes = pd.DataFrame(
        [
            {"instance_id": f"i{k}", "system_a": "x", "system_b": "y", "vote": v}
            for k, v in enumerate("AAAAAABB")
        ]
        + [{"instance_id": f"t{k}", "system_a": "y", "system_b": "x", "vote": "tie"} for k in range(4)]
    )
    df = bradley_terry(votes, n_boot=100).set_index("system")
    assert df.loc["x", "score"] - df.loc["y", "score"] == pytest.approx(math.log(8 / 4), abs=0.01)
    assert (df.loc["x", ["wins", "losses", "ties", "games"]] == [6, 2, 4, 12]).all()
    assert (df.loc["y", ["wins", "losses", "ties", "games"]] == [2, 6, 4, 12]).all()
    # only ties: equal strengths, shared rank
    only = pd.DataFrame([{"instance_id": "i", "system_a": "x", "system_b": "y", "vote": "tie"}] * 3)
    df = bradley_terry(only, n_boot=50)
    assert df["score"].abs().max() < 1e-9 and list(df["rank"]) == [1, 1]


def test_bt_fits_disconnected_and_perfectly_separated_votes():
    votes = pd.DataFrame(
        [{"instance_id": f"i{k}", "system_a": "x", "system_b": "y", "vote": "A"} for k in range(5)]
        + [{"instance_id": "j", "system_a": "v", "system_b": "w", "vote": "B"}]
    )
    df = bradley_terry(votes, systems=["v", "w", "x", "y", "zulu"], n_boot=100).set_index("system")
    assert np.isfinite(df["score"]).all() and np.isfinite(df["ci_low"]).all()
    assert df.loc["x", "score"] > df.loc["y", "score"] and df.loc["w", "score"] > df.loc["v", "score"]
    assert df.loc["zulu", "games"] == 0


def test_bt_rejects_bad_input():
    with pytest.raises(ValueError, match="no pairwise vote"):
        bradley_terry(pd.DataFrame(columns=["instance_id", "system_a", "system_b", "vote"]))
    bad = pd.DataFrame([{"instance_id": "i", "system_a": "x", "system_b": "y", "vote": "1"}])
    with pytest.raises(ValueError, match=r"unknown vote value\(s\) \['1'\]"):
        bradley_terry(bad)
    with pytest.raises(ValueError, match="lack column"):
        bradley_terry(pd.DataFrame([{"system_a": "x", "system_b": "y", "vote": "A"}]))
    ok = pd.DataFrame([{"instance_id": "i", "system_a": "x", "system_b": "y", "vote": "A"}])
    with pytest.raises(ValueError, match="not in `systems`"):
        bradley_terry(ok, systems=["x"])


def test_bt_markdown():
    df = bradley_terry(synthetic_votes(10, seed=4), n_boot=100)
    md = bt_markdown(df)
    lines = md.strip().split("\n")
    assert lines[0].startswith("| Rank | System | BT score [95% CI]") and len(lines) == 2 + 4
    assert "| alpha |" in lines[2] and "[" in lines[2]


# ---------------------------------------------------------------- LLM judge over HTTP


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-pairwise")


def _judge(server, tmp_path, **overrides) -> LLMPairwiseJudge:
    settings = fast_settings(server, KEY_ENV, **overrides)
    return LLMPairwiseJudge(LLMClient(settings, tmp_path / "llm-cache"), settings)


GOLD = "# Acme Q2\n\n## Results\n\nRevenue was $1.2 billion, up 10%.\n"
REPORT_X = "# Acme Q2\n\n## Results\n\nRevenue reached $1.2 billion.\n"
REPORT_Y = "# Acme\n\nSales were fine.\n"


def test_position_biased_judge_gives_opposite_canonical_votes(llm_server, api_key, tmp_path):
    llm_server.default_chat = lambda req: json_reply({"winner": "1", "rationale": "the first one"})
    judge = _judge(llm_server, tmp_path)
    rows = compare_both_orders("inst-1", "sys-y", "sys-x", GOLD, REPORT_Y, REPORT_X, judge)
    assert [(r["system_a"], r["system_b"], r["order"], r["raw_vote"], r["vote"]) for r in rows] == [
        ("sys-x", "sys-y", "ab", "1", "A"),
        ("sys-x", "sys-y", "ba", "1", "B"),
    ]
    assert {r["judge"] for r in rows} == {"openai:test-model"}
    reqs = llm_server.chat_requests
    assert len(reqs) == 2
    first, second = (r.messages[-1]["content"] for r in reqs)
    # order "ab" shows sys-x's report first, "ba" shows sys-y's first
    assert first.index("Revenue reached") < first.index("Sales were fine")
    assert second.index("Sales were fine") < second.index("Revenue reached")
    assert "Revenue was $1.2 billion, up 10%." in first and "All texts are shown in full." in first
    for r in reqs:  # blind: no system name is sent
        assert all("sys-" not in m["content"] for m in r.messages)
    # the position bias cancels in the ranking
    df = bradley_terry(pd.DataFrame(rows), n_boot=50)
    assert df["score"].abs().max() < 1e-9


def test_llm_judge_winner_is_normalised(llm_server, api_key, tmp_path):
    llm_server.script(json_reply({"winner": 2, "rationale": "r"}), json_reply({"winner": " Tie "}))
    judge = _judge(llm_server, tmp_path)
    assert judge.compare(GOLD, REPORT_X, REPORT_Y) == ("2", "r")
    assert judge.compare(GOLD, REPORT_Y, REPORT_X) == ("tie", "")


def test_llm_invalid_replies_retry_then_fail(llm_server, api_key, tmp_path):
    llm_server.script(
        malformed(), json_reply({"winner": "A"}), json_reply({"winner": "1", "rationale": "ok"})
    )
    judge = _judge(llm_server, tmp_path)
    assert judge.compare(GOLD, REPORT_X, REPORT_Y) == ("1", "ok")
    reqs = llm_server.chat_requests
    assert len(reqs) == 3 and "could not be used" in reqs[1].messages[-1]["content"]
    assert "winner" in reqs[2].messages[-1]["content"]  # the schema violation is named
    llm_server.script(malformed(), malformed(), json_reply({"winner": "3"}))
    with pytest.raises(LLMOutputError, match="score_pairwise"):
        judge.compare(GOLD, REPORT_Y, REPORT_X + "\nMore.")
    assert len(llm_server.chat_requests) == 6


def test_llm_empty_reports_need_no_request(llm_server, api_key, tmp_path):
    judge = _judge(llm_server, tmp_path)
    assert judge.compare(GOLD, "", REPORT_X)[0] == "2"
    assert judge.compare(GOLD, REPORT_X, " \n")[0] == "1"
    assert judge.compare(GOLD, "", "")[0] == "tie"
    assert llm_server.chat_requests == []


def test_llm_long_texts_are_cut_proportionally_and_said(llm_server, api_key, tmp_path):
    def text(tag: str, n: int) -> str:
        return "\n".join(f"{tag} line {i}: the figure was {i * 3}.5 units." for i in range(n))

    llm_server.default_chat = lambda req: json_reply({"winner": "2", "rationale": "fuller"})
    judge = _judge(llm_server, tmp_path, context_tokens=4096, max_output_tokens=400)
    raw, why = judge.compare(text("gold", 300), text("one", 100), text("two", 400))
    assert raw == "2" and why.startswith("fuller [texts cut: ")
    req = llm_server.chat_requests[0]
    msg = req.messages[-1]["content"]
    assert sum(count_tokens(m["content"]) for m in req.messages) <= input_budget(judge.settings)
    assert "NOTE: the texts were too long" in msg and msg.count("[... cut here:") == 3
    for tag in ("gold", "one", "two"):
        assert f"{tag} line 0:" in msg
    # the same fraction of each: report 2 (4x longer) keeps about 4x the lines of report 1
    shown = {tag: sum(1 for ln in msg.split("\n") if ln.startswith(f"{tag} line ")) for tag in ("one", "two")}
    assert 3.0 < shown["two"] / shown["one"] < 5.0
