"""OpenAIBackend and prompt templates, over real HTTP against the local scripted server."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import pytest

import tests.llm_server as fake_llm
from schemas.documents import GroundingDocument
from schemas.structure import Provenance, ReportStructure, StructureNode
from tasks.ground.load import GroundingSet
from tasks.llm.backend import Backend, Passage, StepContext
from tasks.llm.client import LLMOutputError
from tasks.llm.openai_backend import ContextBudgetError, OpenAIBackend, document_digest
from tasks.llm.prompts import PromptError, load_prompt, parse_prompt, render
from tasks.tokens import count_tokens
from tests.llm_server import LLMTestServer, fast_settings, json_reply

llm_server = fake_llm.llm_server  # the pytest fixture (a started local server), used by name below

SECRET = "sk-test-SECRET-123"
KEY_ENV = "FRAME_TEST_LLM_KEY"
EDGAR = StepContext(
    domain="acme-10q", snapshot="2024-03-31", category="financial_quarterly", source_kind="edgar"
)
ARXIV = StepContext(domain="gw-astro", snapshot="2024a", category="academic_simple", source_kind="arxiv")

MDNA = """# Management's Discussion and Analysis

Net sales rose 12% to $4,210 million in the quarter, driven by services.

## Results of Operations

| | Q1 2024 | Q1 2023 |
|---|---|---|
| Net sales | 4,210 | 3,759 |

## Liquidity

Cash and equivalents were $1,020 million at quarter end.
"""
RISK = """# Risk Factors

Supply constraints could reduce margins.

## Competition

Competitors may cut prices.
"""


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)


def doc(doc_id: str, title: str, text: str, source_kind: str = "edgar") -> GroundingDocument:
    return GroundingDocument(
        doc_id=doc_id,
        title=title,
        kind="mixed",
        tokens=count_tokens(text),
        tables=text.count("|---"),
        images=0,
        source_sha256=hashlib.sha256(text.encode()).hexdigest(),
        source_kind=source_kind,
        file=f"{doc_id}.md",
        source_ids=["0000000000-24-000001"],
    )


def gset(tmp_path: Path, texts: dict[str, tuple[str, str]]) -> GroundingSet:
    docs = [doc(i, title, text) for i, (title, text) in texts.items()]
    return GroundingSet(folder=tmp_path, documents=docs, texts={i: t for i, (_, t) in texts.items()})


def small_gset(tmp_path: Path) -> GroundingSet:
    return gset(
        tmp_path, {"item-2-mdna": ("Item 2. MD&A", MDNA), "item-1a-risk": ("Item 1A. Risk Factors", RISK)}
    )


def make_backend(server: LLMTestServer, tmp_path: Path, **overrides) -> OpenAIBackend:
    return OpenAIBackend(fast_settings(server, KEY_ENV, **overrides), tmp_path / "cache")


STRUCTURE = {
    "title": "Acme Q1 2024 Report",
    "sections": [
        {
            "id": "s1",
            "type": "section",
            "title": "Results of Operations",
            "objective": "Sales and their drivers.",
            "sources": ["item-2-mdna"],
            "children": [
                {
                    "id": "s1.p1",
                    "type": "text",
                    "objective": "Explain sales growth.",
                    "sources": ["item-2-mdna"],
                },
                {
                    "id": "s1.t1",
                    "type": "table",
                    "objective": "Net sales by quarter.",
                    "sources": ["item-2-mdna"],
                },
            ],
        },
        {
            "id": "s2",
            "type": "section",
            "title": "Risks",
            "objective": "Main risks.",
            "sources": ["item-1a-risk"],
            "children": [
                {
                    "id": "s2.1",
                    "type": "subsection",
                    "title": "Competition",
                    "sources": ["item-1a-risk"],
                    "children": [{"id": "s2.1.l1", "type": "list", "objective": "Competitive risks."}],
                }
            ],
        },
    ],
}
QUESTIONS = {
    "sections": [
        {"id": "s1", "questions": [f"Results question {i}?" for i in range(1, 6)]},
        {"id": "s2", "questions": [f"Risk question {i}?" for i in range(1, 6)]},
        {"id": "s2.1", "questions": ["How may competitors act?"]},
    ]
}


def body_text(server: LLMTestServer, i: int = -1) -> str:
    return server.chat_requests[i].raw.decode("utf-8")


def user_message(server: LLMTestServer, i: int = -1) -> str:
    return server.chat_requests[i].messages[1]["content"]


def system_message(server: LLMTestServer, i: int = -1) -> str:
    return server.chat_requests[i].messages[0]["content"]


# ------------------------------------------------------------------------------------- prompts


def test_prompt_files_load_and_hash():
    for name in ("structure_free", "structure_restricted", "questions", "fill"):
        p = load_prompt(name)
        raw = (Path(__file__).resolve().parents[1] / "prompts" / f"{name}.md").read_bytes()
        assert p.sha256 == hashlib.sha256(raw).hexdigest()
        assert p.system and p.user and {"edgar", "arxiv"} <= set(p.parts)
    assert {"text", "table", "figure", "list"} <= set(load_prompt("fill").parts)


def test_render_keeps_json_braces_and_does_not_reexpand():
    p = parse_prompt(
        "t",
        '---system---\nShape: {"a": {"b": 1}} {{source_brief}}\n---user---\nDocs: {{docs}}\n'
        "---edgar---\nFiling of {{domain}}.\n",
    )
    msgs = render(p, docs="literal {{domain}} and {x}", source_kind="edgar", domain="acme")
    assert msgs[0] == {"role": "system", "content": 'Shape: {"a": {"b": 1}} Filing of acme.'}
    assert msgs[1]["content"] == "Docs: literal {{domain}} and {x}"
    with pytest.raises(PromptError, match="docs"):
        render(p, source_kind="edgar", domain="acme")
    with pytest.raises(PromptError, match="---user---"):
        parse_prompt("bad", "---system---\nonly a system part\n")


# --------------------------------------------------------------------------------------- roles


def test_backend_satisfies_protocol(llm_server, tmp_path):
    backend: Backend = make_backend(llm_server, tmp_path)
    assert backend.name == "openai"


def test_propose_structure(llm_server, tmp_path):
    llm_server.script(json_reply(STRUCTURE, prompt_tokens=500, completion_tokens=120))
    backend = make_backend(llm_server, tmp_path)
    s = backend.propose_structure(small_gset(tmp_path), EDGAR)
    assert isinstance(s, ReportStructure) and not s.form_restricted
    assert [n.id for n in s.walk()] == ["s1", "s1.p1", "s1.t1", "s2", "s2.1", "s2.1.l1"]
    [prov] = s.provenance
    assert prov.backend == "openai" and prov.role == "structure_free" and prov.model == "test-model-2024"
    assert prov.prompt_sha256 == load_prompt("structure_free").sha256
    assert (prov.calls, prov.prompt_tokens, prov.completion_tokens) == (1, 500, 120)
    user, system = user_message(llm_server), system_message(llm_server)
    assert "Net sales rose 12% to $4,210 million" in user and "Competitors may cut prices." in user
    assert 'doc_id="item-2-mdna"' in user and "Every document is given in full." in user
    assert "SEC filing" in system and "{{" not in system + user
    assert llm_server.chat_requests[0].body["response_format"] == {"type": "json_object"}
    # rerun: cached, identical provenance, no HTTP call
    again = backend.propose_structure(small_gset(tmp_path), EDGAR)
    assert again == s and len(llm_server.chat_requests) == 1
    assert backend.usage["structure_free"] == {
        "requests": 2,
        "cached": 1,
        "calls": 2,
        "prompt_tokens": 1000,
        "completion_tokens": 240,
    }
    assert backend.client.stats.calls_made == 1


def test_propose_structure_academic_wording(llm_server, tmp_path):
    llm_server.script(json_reply(STRUCTURE))
    make_backend(llm_server, tmp_path).propose_structure(small_gset(tmp_path), ARXIV)
    system = system_message(llm_server)
    assert "research papers" in system and "SEC filing" not in system


def test_invalid_structure_gets_corrective_retry(llm_server, tmp_path):
    dup = json.loads(json.dumps(STRUCTURE))
    dup["sections"][1]["id"] = "s1"  # duplicate id
    unknown = json.loads(json.dumps(STRUCTURE))
    unknown["sections"][0]["sources"] = ["no-such-doc"]
    llm_server.script(json_reply(dup), json_reply(unknown), json_reply(STRUCTURE))
    s = make_backend(llm_server, tmp_path).propose_structure(small_gset(tmp_path), EDGAR)
    assert s.provenance[0].calls == 3
    second, third = llm_server.chat_requests[1].messages, llm_server.chat_requests[2].messages
    assert "unique" in second[-1]["content"] and "s1" in second[-1]["content"]
    assert "no-such-doc" in third[-1]["content"] and "item-2-mdna" in third[-1]["content"]


def test_structure_with_empty_section_is_invalid(llm_server, tmp_path):
    empty = json.loads(json.dumps(STRUCTURE))
    empty["sections"][1]["children"] = []
    llm_server.script(*[json_reply(empty)] * 3)
    with pytest.raises(LLMOutputError) as exc:
        make_backend(llm_server, tmp_path).propose_structure(small_gset(tmp_path), EDGAR)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("role structure_free, domain acme-10q, snapshot 2024-03-31:")
    assert "content element" in msg and "s2" in msg


def test_adapt_structure(llm_server, tmp_path):
    prev = ReportStructure.model_validate({"title": STRUCTURE["title"], "nodes": STRUCTURE["sections"]})
    prev.nodes[0].questions = ["Old question?"]
    new = json.loads(json.dumps(STRUCTURE))
    new["title"] = "Acme Q2 2024 Report"
    llm_server.script(json_reply(new))
    ctx = StepContext(
        domain="acme-10q", snapshot="2024-06-30", category="financial_quarterly", source_kind="edgar"
    )
    s = make_backend(llm_server, tmp_path).adapt_structure(prev, small_gset(tmp_path), ctx)
    assert s.form_restricted and s.title == "Acme Q2 2024 Report"
    assert s.provenance[0].role == "structure_restricted"
    assert s.provenance[0].prompt_sha256 == load_prompt("structure_restricted").sha256
    user = user_message(llm_server)
    assert '"Results of Operations"' in user and '"s2.1.l1"' in user and "Old question?" not in user
    assert "Net sales rose 12%" in user and "2024-06-30" in user


def test_a_restricted_title_naming_the_earlier_period_is_asked_again_never_cached(llm_server, tmp_path):
    # issue 42 points 3 and 5: the rule `frame qa gold` checks is part of the reply check
    prev = ReportStructure.model_validate(
        {"title": "Acme 10-Q report for the period ended March 31, 2024", "nodes": STRUCTURE["sections"]}
    )
    prev.nodes[0].title = "Results for the Three Months Ended March 31, 2024"
    stale = json.loads(json.dumps(STRUCTURE))
    stale["title"] = "Acme 10-Q report for the period ended June 30, 2024"
    stale["sections"][0]["title"] = "Results for the Three Months Ended March 31, 2024"  # kept as it was
    good = json.loads(json.dumps(stale))
    good["sections"][0]["title"] = "Results for the Three Months Ended June 30, 2024"
    llm_server.script(json_reply(stale), json_reply(good))
    ctx = StepContext(
        domain="acme-10q", snapshot="2024-06-30", category="financial_quarterly", source_kind="edgar"
    )
    backend = make_backend(llm_server, tmp_path)
    s = backend.adapt_structure(prev, small_gset(tmp_path), ctx)
    assert s.nodes[0].title == "Results for the Three Months Ended June 30, 2024"
    first, second = llm_server.chat_requests
    correction = second.messages[-1]["content"]
    assert "earlier edition's period" in correction and "s1 " in correction and "March 31, 2024" in correction
    assert "(report title)" not in correction  # the report title names the new period
    # the stale reply was never cached: asked once more, the cache answers with the good one
    again = make_backend(llm_server, tmp_path).adapt_structure(prev, small_gset(tmp_path), ctx)
    assert again.nodes[0].title == s.nodes[0].title and len(llm_server.chat_requests) == 2


def test_add_questions(llm_server, tmp_path):
    structure = ReportStructure.model_validate({"title": STRUCTURE["title"], "nodes": STRUCTURE["sections"]})
    structure.provenance = [Provenance(backend="offline", model="outline-v1", role="structure_free")]
    missing = {"sections": QUESTIONS["sections"][:1]}
    llm_server.script(json_reply(missing), json_reply(QUESTIONS))
    backend = make_backend(llm_server, tmp_path)
    out = backend.add_questions(structure, small_gset(tmp_path), None, EDGAR)
    assert out.find("s1").questions == QUESTIONS["sections"][0]["questions"]
    assert out.find("s2.1").questions == ["How may competitors act?"]
    assert out.find("s1.p1").questions == []
    assert [p.role for p in out.provenance] == ["structure_free", "questions"]
    assert out.provenance[1].calls == 2
    assert "no questions for section(s) s2" in llm_server.chat_requests[1].messages[-1]["content"]
    assert "first edition):\nnone\n" in user_message(llm_server, 0)
    assert structure.find("s1").questions == []  # input not mutated


def test_a_question_count_outside_5_to_8_is_asked_again_and_never_cached(llm_server, tmp_path):
    # issue 42: the step's 5-8 rule used to be checked only after the reply was cached, so a reply of 9
    # questions failed the step on every rerun, from the cache
    structure = ReportStructure.model_validate({"title": STRUCTURE["title"], "nodes": STRUCTURE["sections"]})
    nine = {"sections": [{**QUESTIONS["sections"][0], "questions": [f"Q{i}?" for i in range(9)]}]}
    nine["sections"] += QUESTIONS["sections"][1:]
    llm_server.script(json_reply(nine), json_reply(QUESTIONS))
    out = make_backend(llm_server, tmp_path).add_questions(structure, small_gset(tmp_path), None, EDGAR)
    assert len(out.find("s1").questions) == 5 and out.provenance[-1].calls == 2
    assert "5-8 guiding questions; not so for s1 (9)" in llm_server.chat_requests[1].messages[-1]["content"]
    # the valid reply is what was cached: a rerun asks nothing
    make_backend(llm_server, tmp_path).add_questions(structure, small_gset(tmp_path), None, EDGAR)
    assert len(llm_server.chat_requests) == 2


def test_a_cached_reply_that_breaks_todays_rule_is_a_miss(llm_server, tmp_path):
    structure = ReportStructure.model_validate({"title": STRUCTURE["title"], "nodes": STRUCTURE["sections"]})
    nine = {"sections": [{**QUESTIONS["sections"][0], "questions": [f"Q{i}?" for i in range(9)]}]}
    nine["sections"] += QUESTIONS["sections"][1:]
    backend = make_backend(llm_server, tmp_path)
    # a reply cached by an older frame that did not check the count: the request's own cache entry
    llm_server.script(json_reply(QUESTIONS))
    first = backend.add_questions(structure, small_gset(tmp_path), None, EDGAR)
    [entry] = [p for p in (tmp_path / "cache").rglob("*.json") if '"questions"' in p.read_text()]
    cached = json.loads(entry.read_text())
    cached["text"] = json.dumps(nine)
    entry.write_text(json.dumps(cached))
    llm_server.script(json_reply(QUESTIONS))
    again = make_backend(llm_server, tmp_path).add_questions(structure, small_gset(tmp_path), None, EDGAR)
    assert len(llm_server.chat_requests) == 2  # asked again, not failed from the cache
    assert again.find("s1").questions == first.find("s1").questions


def test_add_questions_adapts_previous(llm_server, tmp_path):
    prev = ReportStructure.model_validate({"title": "old", "nodes": STRUCTURE["sections"]})
    prev.find("s1").questions = ["How did net sales change last quarter?"]
    structure = ReportStructure.model_validate({"title": "new", "nodes": STRUCTURE["sections"]})
    llm_server.script(json_reply(QUESTIONS))
    make_backend(llm_server, tmp_path).add_questions(structure, small_gset(tmp_path), prev, EDGAR)
    assert "How did net sales change last quarter?" in user_message(llm_server)


def _structure_with_questions() -> ReportStructure:
    s = ReportStructure.model_validate({"title": STRUCTURE["title"], "nodes": STRUCTURE["sections"]})
    s.find("s1").questions = ["How much did net sales grow?"]
    return s


PASSAGES = [
    Passage(
        doc_id="item-2-mdna", text="Net sales rose 12% to $4,210 million.", kind="text", score=0.9, tokens=12
    ),
    Passage(doc_id="item-2-mdna", text="| Net sales | 4,210 | 3,759 |", kind="table", score=0.5, tokens=12),
]


def test_fill(llm_server, tmp_path):
    llm_server.script(json_reply({"content": "Net sales rose 12% to $4,210 million, led by services.\n"}))
    backend = make_backend(llm_server, tmp_path)
    s = _structure_with_questions()
    text = backend.fill(s.find("s1.p1"), s, PASSAGES, EDGAR)
    assert text == "Net sales rose 12% to $4,210 million, led by services."
    user = user_message(llm_server)
    assert ">> " in user and "s1.p1 [text]" in user and "Explain sales growth." in user
    assert "How much did net sales grow?" in user  # inherited from the section
    assert "Net sales rose 12% to $4,210 million." in user and "| Net sales | 4,210 | 3,759 |" in user
    assert "Results of Operations" in user and "one to four paragraphs" in user
    assert backend.usage["fill"]["requests"] == 1
    prov = backend.provenance("fill")
    assert prov.role == "fill" and prov.calls == 1 and prov.prompt_sha256 == load_prompt("fill").sha256


def test_fill_rejects_headings_and_placeholders(llm_server, tmp_path):
    llm_server.script(
        json_reply({"content": "## Results\nNet sales rose."}),
        json_reply({"content": "Net sales rose.\n<!-- FILL s1.p1 -->"}),
        json_reply({"content": "Net sales rose 12%."}),
    )
    s = _structure_with_questions()
    text = make_backend(llm_server, tmp_path).fill(s.find("s1.p1"), s, PASSAGES, EDGAR)
    assert text == "Net sales rose 12%."
    reqs = llm_server.chat_requests
    assert len(reqs) == 3
    assert "heading" in reqs[1].messages[-1]["content"]
    assert "<!-- FILL" in reqs[2].messages[-1]["content"]


def test_fill_always_headings_fails(llm_server, tmp_path):
    llm_server.script(*[json_reply({"content": "# Title\ntext"})] * 3)
    s = _structure_with_questions()
    with pytest.raises(
        LLMOutputError, match=r"^role fill, domain acme-10q, snapshot 2024-03-31: invalid output"
    ):
        make_backend(llm_server, tmp_path).fill(s.find("s1.t1"), s, PASSAGES, EDGAR)


# --------------------------------------------------------------------------------- context budget


def _long_text(marker: str, paragraphs: int) -> str:
    parts = [f"# {marker} document", f"Opening paragraph of the {marker} document explains its scope."]
    for i in range(paragraphs):
        parts.append(f"## {marker} part {i}")
        parts.append(" ".join(f"{marker}-detail-{i}-{j} revenue grew by {j} percent." for j in range(20)))
    return "\n\n".join(parts)


def test_oversized_grounding_set_uses_digests(llm_server, tmp_path, caplog):
    long = _long_text("LONGDOC", 60)
    assert count_tokens(long) > 8000
    g = gset(
        tmp_path, {"item-2-mdna": ("Item 2. MD&A", MDNA), "notes": ("Notes to Financial Statements", long)}
    )
    llm_server.script(json_reply({**STRUCTURE, "sections": STRUCTURE["sections"][:1]}))
    backend = make_backend(llm_server, tmp_path, context_tokens=6000, max_output_tokens=500)
    with caplog.at_level(logging.WARNING):
        s = backend.propose_structure(g, EDGAR)
    assert s.nodes[0].id == "s1"
    body = body_text(llm_server)
    user = user_message(llm_server)
    assert "LONGDOC-detail-30-5" not in body  # full text not sent
    assert "Notes to Financial Statements" in user and "Item 2. MD&A" in user  # titles are
    assert "## LONGDOC part 59" in user  # headings are
    assert "Opening paragraph of the LONGDOC document" in user
    assert 'shown="digest"' in user and "Net sales rose 12%" in user  # the small doc stays in full
    assert "digests" in caplog.text and "notes" in caplog.text
    assert count_tokens(user) + count_tokens(system_message(llm_server)) <= backend.input_budget


def test_grounding_too_large_even_as_digests(llm_server, tmp_path):
    heads = "\n\n".join(f"## Heading number {i} with a rather long descriptive title" for i in range(80))
    g = gset(tmp_path, {f"doc-{i}": (f"Document {i}", heads) for i in range(6)})
    backend = make_backend(llm_server, tmp_path, context_tokens=4096, max_output_tokens=500)
    with pytest.raises(ContextBudgetError, match=r"^role structure_free, domain acme-10q, .*does not fit"):
        backend.propose_structure(g, EDGAR)
    assert llm_server.chat_requests == []


def test_fill_drops_lowest_scoring_passages_that_do_not_fit(llm_server, tmp_path, caplog):
    big = " ".join(f"filler-{i} words" for i in range(1500))
    passages = [
        Passage(doc_id="item-2-mdna", text="KEEP-ME net sales rose 12%.", kind="text", score=0.9, tokens=8),
        Passage(doc_id="notes", text="DROP-ME " + big, kind="text", score=0.1, tokens=4000),
    ]
    llm_server.script(json_reply({"content": "Net sales rose 12%."}))
    backend = make_backend(llm_server, tmp_path, context_tokens=4096, max_output_tokens=500)
    s = _structure_with_questions()
    with caplog.at_level(logging.WARNING):
        backend.fill(s.find("s1.p1"), s, passages, EDGAR)
    user = user_message(llm_server)
    assert "KEEP-ME" in user and "DROP-ME" not in user
    assert "1 of 2 retrieved passages" in caplog.text


def test_document_digest_shape():
    d = doc("x", "Title X", MDNA)
    digest = document_digest(d, MDNA)
    assert digest.startswith("Title: Title X")
    assert "## Results of Operations" in digest and "## Liquidity" in digest
    assert "Net sales rose 12% to $4,210 million" in digest
    assert "Cash and equivalents" not in digest and "3,759" not in digest


def test_structure_node_children_type_check():
    # sanity: the schema rejects leaves with children, which the backend relies on
    with pytest.raises(ValueError):
        StructureNode(id="a", type="text", children=[StructureNode(id="b", type="text")])
