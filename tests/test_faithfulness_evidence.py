"""The evidence the LLM faithfulness verifier is shown (docs/metrics/faithfulness.md, "Evidence of the LLM
judge"), measured as benchmarks/retrieval_recall.py measures it: a small G and an extractive Y whose every
sentence and row has a known source in G, judged over the local OpenAI-compatible test server; and which
stage's score counts."""

from __future__ import annotations

import re

import pytest

import tests.llm_server as fake_llm
from benchmarks.retrieval_recall import Sources, evidence_by_claim
from schemas.scoring import GroundingText
from tasks.llm.client import LLMClient
from tasks.score.evidence import cut
from tasks.score.faithfulness import LLMFaithfulnessJudge, claims_of, faithfulness
from tasks.tokens import count_tokens
from tests.llm_server import fast_settings

llm_server = fake_llm.llm_server

KEY_ENV = "FRAME_TEST_EVIDENCE_KEY"
REGIONS = ["Americas", "Europe", "Greater China", "Japan", "Rest of Asia Pacific", "Middle East", "Africa"]
PRODUCTS = ["Widgets", "Gadgets", "Sprockets", "Gizmos", "Doohickeys", "Thingamajigs", "Contraptions"]
ROWS = 500  # a statement table of ~9,000 tokens: larger than any excerpt budget of the old verifier


def row(k: int) -> str:
    return f"| {PRODUCTS[k % 7]} line {k} in {REGIONS[k // 7 % 7]} | {1000 + 7 * k:,} | {900 + 5 * k:,} |"


TABLE_HEAD = "| Product line | Fiscal 2025 | Fiscal 2024 |\n|---|---|---|"
STATEMENTS = (
    "# Consolidated Statements of Operations\n\n## Net sales by product line\n\n(In millions)\n\n"
    + TABLE_HEAD
    + "\n"
    + "\n".join(row(k) for k in range(ROWS))
    + "\n"
)
MDNA = "# Management's Discussion and Analysis\n\n## Results of Operations\n\n" + "\n\n".join(
    f"Net sales of {p} in {r} were ${2000 + 37 * i:,} million in fiscal 2025, compared with "
    f"${1800 + 29 * i:,} million in fiscal 2024, as demand for {p.lower()} in {r} changed."
    for i, (p, r) in enumerate((p, r) for p in PRODUCTS for r in REGIONS)
)
G = [
    GroundingText("statements", "Consolidated Statements of Operations", STATEMENTS),
    GroundingText("mdna", "Management's Discussion and Analysis", MDNA),
]
PICKED_ROWS = [3, 77, 150, 311, 488]
SENTENCES = [s for s in MDNA.split("\n\n") if s.startswith("Net sales of")][5:40:7]
Y = (
    "# Acme fiscal 2025\n\n## Results\n\n"
    + " ".join(SENTENCES)
    + "\n\n## Net sales\n\n(In millions)\n\n"
    + TABLE_HEAD
    + "\n"
    + "\n".join(row(k) for k in PICKED_ROWS)
    + "\n"
)


def ids_of(req: fake_llm.Recorded) -> list[int]:
    return [int(x) for x in re.findall(r"^### Claim (\d+)\s*$", req.messages[1]["content"], re.M)]


def stage_of(req: fake_llm.Recorded) -> int:
    return 2 if "second, deeper look" in req.messages[0]["content"] else 1


@pytest.fixture
def make_judge(llm_server, monkeypatch, tmp_path):
    """An LLM faithfulness judge on the test server; every verdict is `score(stage, claim_id)`."""
    monkeypatch.setenv(KEY_ENV, "sk-test-evidence")

    def make(score=lambda stage, cid: 0.0, **overrides):
        def answer(req: fake_llm.Recorded) -> fake_llm.Reply:
            verdicts = [
                {
                    "claim_id": i,
                    "score": score(stage_of(req), i),
                    "doc_id": "mdna",
                    "rationale": f"s{stage_of(req)}",
                }
                for i in ids_of(req)
            ]
            return fake_llm.json_reply({"verdicts": verdicts})

        llm_server.default_chat = answer
        settings = fast_settings(llm_server, KEY_ENV, **{"concurrency": 1, **overrides})
        return LLMFaithfulnessJudge(LLMClient(settings, tmp_path / "llm-cache"), settings), settings

    return make


def evidence_seen(llm_server, judge, claims) -> dict[int, dict[int, str]]:
    """{stage: {claim id: evidence text}} of verify + entail over G, from the requests the server got."""
    first = judge.verify(claims, G)
    judge.entail(claims, first, G)
    seen: dict[int, dict[int, str]] = {1: {}, 2: {}}
    for req in llm_server.chat_requests:
        seen[stage_of(req)].update(evidence_by_claim(req.messages[1]["content"]))
    return seen


def budget_of(context: int, output: int) -> int:
    """The documented input budget: context - reply - a framing reserve of min(2000, context / 10)."""
    return context - output - min(2000, context // 10)


# ---------------------------------------------------------------- the oracle itself


def test_sources_locate_copied_cleaned_and_foreign_text():
    src = Sources(
        [
            GroundingText(
                "p",
                "A paper",
                "# A paper\n\nGaussian processes (Smith:2016qas; Lee:2022jpn) model **stellar** variability "
                "well.\n\n| Kernel | Form |\n|---|---|\n| RBF | exp |\n",
            )
        ]
    )
    assert src.of("Gaussian processes model stellar variability well.", "") == [
        ["Gaussian processes (Smith:2016qas; Lee:2022jpn) model stellar variability well"]
    ]
    assert src.of("RBF | Form: exp", "| RBF | exp |") == [["| Kernel | Form |", "| RBF | exp |"]]
    assert src.of("Planets form in discs of gas and dust.", "") is None
    shown = evidence_by_claim(
        "Documents:\n<<<\n| Kernel | Form |\n>>>\n\n### Claim 0\nClaim: RBF\n<<<\n| RBF | exp |\n>>>\n"
        "### Claim 1\nClaim: x\n<<<\nother\n>>>"
    )
    assert "| RBF | exp |" in shown[0] and "| RBF | exp |" not in shown[1]
    assert "| Kernel | Form |" in shown[1]  # shared bodies count for every claim of the request


# ---------------------------------------------------------------- recall of the evidence


@pytest.mark.parametrize(
    ("context", "output", "whole"),
    [(128_000, 4096, True), (12_000, 1000, False)],
    ids=["G-fits-whole", "G-as-excerpts"],
)
def test_every_claim_is_shown_its_source_at_both_stages(llm_server, make_judge, context, output, whole):
    claims = claims_of(Y)
    src = Sources(G)
    sources = {c.claim_id: src.of(c.content, c.source_sentence) for c in claims}
    assert len(claims) == len(SENTENCES) + len(PICKED_ROWS) and all(sources.values())
    g_tokens = sum(count_tokens(d.markdown) for d in G)
    assert (g_tokens < budget_of(context, output)) == whole  # the case the parameters name
    judge, _ = make_judge(context_tokens=context, max_output_tokens=output)
    seen = evidence_seen(llm_server, judge, claims)
    for stage in (1, 2):
        missed = [
            c.content[:60]
            for c in claims
            if not any(all(t in seen[stage].get(c.claim_id, "") for t in alt) for alt in sources[c.claim_id])
        ]
        assert not missed, f"stage {stage}: source not shown for {missed}"
    shown = "\n".join(r.messages[1]["content"] for r in llm_server.chat_requests)
    assert ("all 2 of them, whole" in shown) == whole
    if not whole:  # the big table is cut at rows: each part with its units line and header
        assert "part " in shown and "of a passage cut to fit" in shown


def own_evidence(user: str) -> dict[int, set[str]]:
    """Per claim of a request, the bodies named as found for it ("Excerpts found for it: E3, E1") or shown
    inside its block, or all bodies when G is shown whole."""
    bodies = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^Excerpt (E\d+) - .*?\n<<<\n(.*?)\n>>>", user, re.S | re.M)
    }
    whole = set(re.findall(r"<<<\n(.*?)\n>>>", user, re.S)) if "whole:" in user else set()
    out = {}
    for m in re.finditer(r"^### Claim (\d+)\s*$(.*?)(?=^### Claim |\Z)", user, re.S | re.M):
        names = re.search(r"^Excerpts found for it, most relevant first: (.*)$", m.group(2), re.M)
        named = re.findall(r"E\d+", names.group(1)) if names else []
        inside = set(re.findall(r"<<<\n(.*?)\n>>>", m.group(2), re.S))  # excerpts inside the claim's block
        out[int(m.group(1))] = whole | inside | {bodies[n] for n in named}
    return out


def test_requests_stay_within_the_input_budget_and_stage_2_sees_what_stage_1_saw(llm_server, make_judge):
    claims = claims_of(Y)
    for context, output in ((6_000, 500), (12_000, 1000), (128_000, 4096)):
        llm_server.requests.clear()
        judge, _ = make_judge(context_tokens=context, max_output_tokens=output)
        judge.entail(claims, judge.verify(claims, G), G)
        budget = budget_of(context, output)
        own: dict[int, dict[int, set[str]]] = {1: {}, 2: {}}
        for req in llm_server.chat_requests:
            assert sum(count_tokens(m["content"]) for m in req.messages) <= budget, (context, stage_of(req))
            own[stage_of(req)].update(own_evidence(req.messages[1]["content"]))
        for c in claims:
            assert own[1][c.claim_id] and own[1][c.claim_id] <= own[2][c.claim_id], (context, c.claim_id)


def test_cut_table_parts_keep_the_units_line_and_header_and_every_row():
    passage = "(In millions)\n\n" + TABLE_HEAD + "\n" + "\n".join(row(k) for k in range(120))
    parts = cut(passage, "table", 400)
    assert len(parts) > 3 and all(count_tokens(p) <= 400 for p in parts)
    assert all(p.startswith("(In millions)\n\n" + TABLE_HEAD + "\n") for p in parts)
    rows = [ln for p in parts for ln in p.split("\n")[4:]]
    assert rows == [row(k) for k in range(120)]
    assert cut("Short text.", "text", 400) == ["Short text."]


# ---------------------------------------------------------------- which stage's score counts

CLAIMS = {
    "claims": [
        {
            "content": f"Net sales of {p} grew.",
            "source_sentence": f"Net sales of {p} grew.",
            "section": "Results",
        }
        for p in PRODUCTS[:3]
    ]
}


def test_stage_2_score_is_kept_also_when_lower(llm_server, make_judge):
    """Stage 1 gives 0.5 / 0.6 / 1.0; stage 2 (claims 0 and 1) 0.2 / 0.9: the deeper stage's verdict is the
    claim's score both ways, the stage-1 one is recorded."""
    stage1 = {0: 0.5, 1: 0.6, 2: 1.0}
    stage2 = {0: 0.2, 1: 0.9}
    judge, _ = make_judge(lambda stage, cid: stage1[cid] if stage == 1 else stage2[cid])
    llm_server.script(fake_llm.json_reply(CLAIMS))
    res = faithfulness("# R\n\n## Results\n\nNet sales grew.\n", G, judge)
    assert [(it.index, it.stage, it.score) for it in res.items] == [(0, 2, 0.2), (1, 2, 0.9), (2, 1, 1.0)]
    assert res.value == pytest.approx((0.2 + 0.9 + 1.0) / 3, abs=1e-6)
    assert res.detail["stage1_mean"] == pytest.approx(0.7, abs=1e-6)
    assert (res.detail["stage2"], res.detail["raised_in_stage2"], res.detail["lowered_in_stage2"]) == (
        2,
        1,
        1,
    )
    assert res.items[0].rationale.startswith("stage 1 score 0.500 (s1); s2")
    entail = [r for r in llm_server.chat_requests if stage_of(r) == 2]
    assert len(entail) == 1 and ids_of(entail[0]) == [0, 1]
    assert "First-pass verdict: score 0.50; s1" in entail[0].messages[1]["content"]
