"""Section-by-section generation (tasks/generate/sections.py) over real HTTP against tests/llm_server.py:
S's outline kept, one request per section with text of its own holding that section's passages only,
cached reruns, bounded parallelism, the input budget, invalid replies retried then failing loudly."""

from __future__ import annotations

import hashlib
import re

import pyarrow.parquet as pq
import pytest

import tests.llm_server as fake_llm
from tasks.errors import FrameInputError
from tasks.generate.llm import input_budget
from tasks.generate.sections import (
    SECTION_PASSAGES,
    body_problem,
    plan_sections,
    section_by_section,
)
from tasks.llm.client import LLMOutputError
from tasks.llm.prompts import load_prompt
from tasks.markdown.document import headings
from tests.llm_server import fast_settings

llm_server = fake_llm.llm_server

KEY_ENV = "FRAME_TEST_SECTIONS_KEY"

SAMPLE = """# Acme Corp quarterly report (Q1)

## Results of Operations

Revenue grew to $1,200 million, up 12% year over year, driven by Widgets.

| Segment | Q1 |
|---|---|
| Widgets | 900 |
| Gadgets | 300 |

## Liquidity

### Cash

Cash and equivalents were $400 million at quarter end.

## Risk Factors

Component supply risks could constrain production.
"""

MDNA = (
    "# Management's Discussion and Analysis\n\n## Results of Operations\n\n"
    "Revenue was $1,350 million for the quarter, up 15% from a year ago, on Widgets demand.\n\n"
    "(In millions)\n\n| Segment | Q2 |\n|---|---|\n| Widgets | 1,010 |\n| Gadgets | 340 |\n\n"
    "## Liquidity and Capital Resources\n\n"
    "Cash and cash equivalents were $455 million at quarter end.\n"
)
RISK = "# Risk Factors\n\nSupply of components may be constrained in 2026.\n"


def _row(doc_id: str, title: str, markdown: str) -> dict:
    return {
        "grounding_set_id": "acme/Q2",
        "doc_id": doc_id,
        "title": title,
        "kind": "mixed",
        "tokens": 100,
        "tables": 0,
        "images": 0,
        "source_kind": "edgar",
        "markdown": markdown,
    }


G_ROWS = [
    _row("mdna", "Management's Discussion and Analysis", MDNA),
    _row("risk", "Risk Factors", RISK),
    _row("other-set", "Not this instance", "# Elsewhere\n\nRevenue of another company was $9 million.\n")
    | {"grounding_set_id": "acme/Q3"},
]
INSTANCE = {
    "instance_id": "financial_quarterly/acme/Q1->Q2",
    "category": "financial_quarterly",
    "domain": "acme",
    "t_target": "Q2",
    "grounding_set_id": "acme/Q2",
    "grounding_doc_ids": ["mdna", "risk"],
    "sample_markdown": SAMPLE,
}
SECTION = re.compile(r"^Section to write: (.+)$", re.M)
PASSAGE = re.compile(r"<<<PASSAGE \d+ from (\S+) \([^\n]*\)\n(.*?)\nPASSAGE>>>", re.S)


def section_of(req: fake_llm.Recorded) -> str:
    return SECTION.search(req.messages[1]["content"]).group(1)


def passages_of(req: fake_llm.Recorded) -> list[tuple[str, str]]:
    return PASSAGE.findall(req.messages[1]["content"])


def answer(req: fake_llm.Recorded) -> fake_llm.Reply:
    """A valid body naming the section it was asked for (so the test can see where it landed)."""
    return fake_llm.json_reply({"section_markdown": f"Body of {section_of(req)} for Q2."}, prompt_tokens=100)


def settings_for(server, **overrides):
    return fast_settings(server, KEY_ENV, **{"transient_retries": 1, "invalid_retries": 1, **overrides})


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-sections")


def test_outline_kept_and_each_request_holds_its_own_passages(llm_server, api_key, tmp_path):
    llm_server.default_chat = answer
    settings = settings_for(llm_server)
    md, meta = section_by_section(INSTANCE, G_ROWS, settings, tmp_path / "cache")

    assert headings(md) == headings(SAMPLE)
    assert [ln for ln in md.splitlines() if ln.startswith("#")] == [
        ln for ln in SAMPLE.splitlines() if ln.startswith("#")
    ]
    # bodies land under their own heading; a pure container of S stays empty
    lines = [ln for ln in md.splitlines() if ln.strip()]
    for title in ("Results of Operations", "Cash", "Risk Factors"):
        head = next(i for i, ln in enumerate(lines) if ln.endswith(" " + title))
        assert lines[head + 1] == f"Body of {title} for Q2."
    assert lines[lines.index("## Liquidity") + 1] == "### Cash"
    assert "1,200" not in md  # nothing of S's content is carried over

    reqs = llm_server.chat_requests
    assert sorted(section_of(r) for r in reqs) == ["Cash", "Results of Operations", "Risk Factors"]
    _, plans = plan_sections(INSTANCE, G_ROWS, settings, load_prompt("generate_section"))
    planned = {p.path[-1]: [(x.doc_id, x.text.strip()) for x in p.passages] for p in plans if p}
    for r in reqs:
        sent = passages_of(r)
        assert sent == planned[section_of(r)]  # exactly the passages retrieved for this section
        assert len(sent) <= SECTION_PASSAGES
        assert all(doc in ("mdna", "risk") for doc, _ in sent)  # never another grounding set
    by_section = {section_of(r): r.messages[1]["content"] for r in reqs}
    assert "| Widgets | 1,010 |" in by_section["Results of Operations"]
    assert "Supply of components" in by_section["Risk Factors"]
    assert "Supply of components" not in by_section["Results of Operations"]
    assert "$455 million" not in by_section["Risk Factors"]
    # S's own text is shown as the section's form, under its own heading only
    assert "Component supply risks" in by_section["Risk Factors"]
    assert "Component supply risks" not in by_section["Cash"]

    assert meta["strategy"] == "section-by-section"
    assert meta["prompt_sha256"] == load_prompt("generate_section").sha256
    assert (meta["sections"], meta["requests"], meta["cached_requests"]) == (5, 3, 0)
    assert (meta["prompt_tokens"], meta["completion_tokens"]) == (300, 21)
    assert meta["model"] == "test-model-2024"
    assert all(
        s["input_tokens"] <= meta["input_budget"] == input_budget(settings) for s in meta["per_section"]
    )

    md2, meta2 = section_by_section(INSTANCE, G_ROWS, settings, tmp_path / "cache")
    assert md2 == md and len(llm_server.chat_requests) == 3  # a rerun sends nothing
    assert meta2["cached_requests"] == meta2["requests"] == 3 and meta2["cached"]


def test_requests_run_in_parallel_up_to_concurrency(llm_server, api_key, tmp_path):
    llm_server.default_chat = lambda req: fake_llm.slow(answer(req), 0.3)
    settings = settings_for(llm_server, concurrency=2)
    section_by_section(INSTANCE, G_ROWS, settings, tmp_path / "cache")
    assert len(llm_server.chat_requests) == 3
    assert llm_server.max_in_flight == 2


def test_invalid_reply_is_retried_then_fails_loudly(llm_server, api_key, tmp_path):
    inst = dict(INSTANCE, sample_markdown="# Acme (Q1)\n\n## Risk Factors\n\nComponent supply risks.\n")
    settings = settings_for(llm_server)
    sneaky = fake_llm.json_reply({"section_markdown": "Supply may be tight.\n\n## Outlook\n\nMore text."})
    llm_server.script(sneaky, sneaky)
    with pytest.raises(LLMOutputError, match=r"invalid output after 2 attempts.*heading line.*Risk Factors"):
        section_by_section(inst, G_ROWS, settings, tmp_path / "cache")
    reqs = llm_server.chat_requests
    assert len(reqs) == 2
    assert "heading line" in reqs[1].messages[-1]["content"]  # the corrective turn says what was wrong

    # nothing invalid was cached: the next run asks again and accepts a valid reply after a bad one
    llm_server.script(
        fake_llm.json_reply({"section_markdown": "```\nopen fence"}),
        fake_llm.json_reply({"section_markdown": "Supply may be tight in 2026."}),
    )
    md, meta = section_by_section(inst, G_ROWS, settings, tmp_path / "cache")
    assert "Supply may be tight in 2026." in md and meta["attempts"] == 2
    assert "code fence" in llm_server.chat_requests[3].messages[-1]["content"]


def test_body_problem():
    assert body_problem("Plain text.\n\n| a | b |\n|---|---|\n| 1 | 2 |") is None
    assert body_problem("Text.\n\n```python\n# a comment, not a heading\n```") is None
    assert "heading line" in body_problem("Text.\n\n### Sub\n\nMore.")
    assert "heading line" in body_problem("  # indented heading")
    assert "code fence" in body_problem("Text.\n\n~~~\nnever closed")


def test_input_budget_drops_passages_and_refuses_too_small_a_context(llm_server, api_key, tmp_path):
    sentence = "Revenue from Widgets demand shaped the results of operations this quarter. "
    filler = "\n\n".join(f"Paragraph {i}. " + sentence * 12 for i in range(40))  # ~150 tokens each
    big = _row("annex", "Results annex", f"# Results of Operations annex\n\n{filler}\n")
    rows = [G_ROWS[0], big]
    inst = dict(INSTANCE, grounding_doc_ids=["mdna", "annex"])
    small = settings_for(llm_server, context_tokens=2400, max_output_tokens=600)
    _, plans = plan_sections(inst, rows, small, load_prompt("generate_section"))
    budget = input_budget(small)
    for p in filter(None, plans):
        assert p.input_tokens <= budget
    results = next(p for p in plans if p and p.path[-1] == "Results of Operations")
    roomy = settings_for(llm_server)
    _, roomy_plans = plan_sections(inst, rows, roomy, load_prompt("generate_section"))
    more = next(p for p in roomy_plans if p and p.path[-1] == "Results of Operations")
    assert 0 < len(results.passages) < len(more.passages)

    tiny = settings_for(llm_server, context_tokens=1024, max_output_tokens=800)
    with pytest.raises(FrameInputError, match="context_tokens"):
        section_by_section(inst, rows, tiny, tmp_path / "cache")
    assert llm_server.chat_requests == []


def test_custom_prompt_file(llm_server, api_key, tmp_path):
    text = (
        "custom\n---system---\nYou are a terse writer.\n---user---\n{{section_path}}\n"
        "Section to write: {{section_heading}}\n{{passages}}\n"
    )
    custom = tmp_path / "my_prompt.md"
    custom.write_text(text, encoding="utf-8")
    llm_server.default_chat = answer
    md, meta = section_by_section(INSTANCE, G_ROWS, settings_for(llm_server), tmp_path / "cache", custom)
    assert headings(md) == headings(SAMPLE)
    assert meta["prompt_sha256"] == hashlib.sha256(text.encode()).hexdigest()
    assert {r.messages[0]["content"] for r in llm_server.chat_requests} == {"You are a terse writer."}

    bad = tmp_path / "bad.md"
    bad.write_text("---system---\nx\n---user---\n{{no_such_value}}\n", encoding="utf-8")
    with pytest.raises(FrameInputError, match="no_such_value"):
        section_by_section(INSTANCE, G_ROWS, settings_for(llm_server), tmp_path / "cache", bad)


# ---------------------------------------------------------------- the demo release


def test_demo_instances_keep_their_outline(llm_server, api_key, demo_release, tmp_path):
    instances = pq.read_table(demo_release / "instances.parquet").to_pylist()
    grounding = pq.read_table(demo_release / "grounding_documents.parquet").to_pylist()
    picked = [
        next(i for i in instances if i["category"] == c) for c in ("financial_annual", "academic_simple")
    ]
    llm_server.default_chat = answer
    settings = settings_for(llm_server, concurrency=4)
    for inst in picked:
        before = len(llm_server.chat_requests)
        md, meta = section_by_section(inst, grounding, settings, tmp_path / "cache")
        # S's headings, those naming S's period renewed for the target's (as the gold report names them)
        got, was, target = headings(md), headings(inst["sample_markdown"]), headings(inst["target_markdown"])
        assert len(got) == len(was) and got[0] == target[0], inst["instance_id"]
        assert all(g == w or g in target for g, w in zip(got, was, strict=True)), inst["instance_id"]
        reqs = llm_server.chat_requests[before:]
        assert len(reqs) == meta["requests"] > 0
        docs = set(inst["grounding_doc_ids"])
        sent = [passages_of(r) for r in reqs]
        assert all({d for d, _ in one} <= docs for one in sent)  # only this instance's G
        assert sum(map(bool, sent)) >= len(reqs) // 2  # most sections found passages
        assert max(s["input_tokens"] for s in meta["per_section"]) <= meta["input_budget"]
