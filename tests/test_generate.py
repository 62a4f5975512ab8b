"""Baseline generators (tasks/generate): copy-sample and extractive, on the demo release when built
(`make demo` -> data/releases/demo/0.1.0) and always on a small hand-made instance."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import tests.llm_server as fake_llm
from tasks.errors import FrameInputError
from tasks.generate import GENERATORS, copy_sample, extractive, generate_report
from tasks.generate.baselines import grounding_rows_for, sample_sections
from tasks.generate.llm import input_budget, one_shot
from tasks.llm.prompts import load_prompt
from tasks.tokens import count_tokens
from tests.llm_server import fast_settings

llm_server = fake_llm.llm_server

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_HEADING = re.compile(r"^#{1,6}[ \t]+\S")


def heading_lines(markdown: str) -> list[str]:
    return [s.line for s in sample_sections(markdown)[1]]


def body_numbers(markdown: str) -> set[str]:
    """Numbers outside heading lines (headings are S's, byte-identical; everything else comes from G)."""
    out: set[str] = set()
    for line in markdown.splitlines():
        if not _HEADING.match(line):
            out.update(_NUMBER.findall(line))
    return out


def check_extractive(inst: dict, rows: list[dict]) -> str:
    sample = inst["sample_markdown"]
    out = extractive(inst, rows)
    assert out.strip()
    # S's headings, those naming S's period renewed for the target's (as the gold report names them)
    out_heads, s_heads = heading_lines(out), heading_lines(sample)
    target = heading_lines(inst["target_markdown"]) if inst.get("target_markdown") else []
    assert len(out_heads) == len(s_heads)
    for got, was in zip(out_heads, s_heads, strict=True):
        assert got == was or got in target, (was, got)
    assert out.splitlines()[0] == (target[0] if target else sample.splitlines()[0])  # the H1 title line
    g = "\n".join(r["markdown"] for r in rows)
    missing = sorted(n for n in body_numbers(out) if n not in g)
    assert not missing, f"numbers not in G: {missing[:10]}"
    assert out != sample
    # every content line is G's text verbatim (up to whitespace: the chunker re-joins a paragraph split
    # by a page break and keeps a one-line pseudo-heading with the paragraph under it)
    g_flat = " ".join(g.split())
    body = [ln for ln in out.splitlines() if ln.strip() and not _HEADING.match(ln)]
    assert body
    for ln in body:
        assert " ".join(ln.lstrip("\\").split()) in g_flat, ln[:200]
    return out


# ---------------------------------------------------------------- hand-made instance (always runs)

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

```
# not a heading: inside a fence
```
"""

G_ROWS = [
    {
        "grounding_set_id": "acme/Q2",
        "doc_id": "mdna",
        "title": "Management's Discussion and Analysis",
        "kind": "mixed",
        "tokens": 120,
        "tables": 1,
        "images": 0,
        "source_kind": "edgar",
        "markdown": "# Management's Discussion and Analysis\n\n## Results of Operations\n\n"
        "Revenue was $1,350 million for the quarter, up 15% from a year ago, on Widgets demand.\n\n"
        "(In millions)\n\n| Segment | Q2 |\n|---|---|\n| Widgets | 1,010 |\n| Gadgets | 340 |\n\n"
        "## Liquidity and Capital Resources\n\n"
        "Cash and cash equivalents were $455 million at quarter end.\n\n"
        "We returned $75 million to shareholders through buybacks.\n",
    },
    {
        "grounding_set_id": "acme/Q2",
        "doc_id": "risk",
        "title": "Risk Factors",
        "kind": "prose",
        "tokens": 30,
        "tables": 0,
        "images": 0,
        "source_kind": "edgar",
        "markdown": "# Risk Factors\n\nSupply of components may be constrained in 2026.\n",
    },
]
INSTANCE = {
    "instance_id": "financial_quarterly/acme/Q1->Q2",
    "grounding_set_id": "acme/Q2",
    "grounding_doc_ids": ["mdna", "risk"],
    "sample_markdown": SAMPLE,
}


def test_sample_sections_skip_fenced_lines():
    lines = heading_lines(SAMPLE)
    assert lines == [
        "# Acme Corp quarterly report (Q1)",
        "## Results of Operations",
        "## Liquidity",
        "### Cash",
    ]
    secs = {s.line: s for s in sample_sections(SAMPLE)[1]}
    assert secs["## Results of Operations"].has_table
    assert secs["## Results of Operations"].first_sentence.startswith("Revenue grew")
    assert not secs["## Liquidity"].body  # a pure container
    assert secs["### Cash"].path == ("Acme Corp quarterly report (Q1)", "Liquidity", "Cash")


def test_copy_sample_returns_sample():
    assert copy_sample(INSTANCE) == SAMPLE
    assert generate_report("copy-sample", INSTANCE, G_ROWS) == SAMPLE


def test_extractive_small_instance():
    rows = grounding_rows_for(INSTANCE, G_ROWS)
    out = check_extractive(INSTANCE, rows)
    assert "| Widgets | 1,010 |" in out  # the table of G where S had a table
    assert "$1,350 million" in out
    assert "$455 million" in out
    # the container heading of S stays empty: "### Cash" follows "## Liquidity" directly
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert lines[lines.index("## Liquidity") + 1] == "### Cash"
    assert generate_report("extractive", INSTANCE, G_ROWS) == out


def test_extractive_never_emits_a_new_heading():
    rows = [dict(G_ROWS[1], markdown="# Risk Factors\n\nSupply risk.\n\n```\n# Supply risk in code\n```\n")]
    inst = dict(INSTANCE, sample_markdown="# T\n\n## Supply risk\n\nSupply risk may rise.\n")
    out = extractive(inst, rows)
    assert heading_lines(out) == ["# T", "## Supply risk"]


def test_unknown_generator():
    with pytest.raises(ValueError, match="unknown generator"):
        generate_report("nope", INSTANCE, G_ROWS)
    assert set(GENERATORS) >= {"copy-sample", "extractive"}


# ---------------------------------------------------------------- the demo release


@pytest.fixture(scope="module")
def demo(demo_release):
    instances = pq.read_table(demo_release / "instances.parquet").to_pylist()
    grounding = pq.read_table(demo_release / "grounding_documents.parquet").to_pylist()
    return instances, grounding


def test_demo_copy_sample(demo):
    instances, grounding = demo
    for inst in instances:
        assert (
            generate_report("copy-sample", inst, grounding_rows_for(inst, grounding))
            == (inst["sample_markdown"])
        )


def test_demo_extractive(demo):
    instances, grounding = demo
    assert instances
    for inst in instances:
        rows = grounding_rows_for(inst, grounding)
        assert rows, inst["instance_id"]
        assert {r["doc_id"] for r in rows} == set(inst["grounding_doc_ids"])
        out = check_extractive(inst, rows)
        # G content present: at least one whole paragraph of G beyond the headings
        assert len(out) > len("\n".join(heading_lines(out))) + 200, inst["instance_id"]


def test_demo_extractive_deterministic(demo):
    instances, grounding = demo
    inst = instances[0]
    rows = grounding_rows_for(inst, grounding)
    assert extractive(inst, rows) == extractive(inst, rows)


# ---------------------------------------------------------------- one-shot LLM over real HTTP

KEY_ENV = "FRAME_TEST_GENERATE_KEY"
REPORT = "# Acme Corp quarterly report (Q2)\n\n## Results of Operations\n\nRevenue was $1,350 million.\n"


def llm_settings(server, **overrides):
    return fast_settings(server, KEY_ENV, **{"transient_retries": 1, "invalid_retries": 1, **overrides})


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-generate")


def test_one_shot_over_http(llm_server, api_key, tmp_path):
    llm_server.script(
        fake_llm.json_reply({"report_markdown": REPORT}, prompt_tokens=900, completion_tokens=40)
    )
    settings = llm_settings(llm_server)
    md, meta = one_shot(INSTANCE, G_ROWS, settings, tmp_path / "cache")
    assert md == REPORT
    assert meta["digested"] == []
    assert meta["model"] == "test-model-2024"
    assert meta["prompt_sha256"] == load_prompt("generate_one_shot").sha256
    assert (meta["prompt_tokens"], meta["completion_tokens"]) == (900, 40)
    assert 0 < meta["input_tokens"] <= meta["input_budget"] == input_budget(settings)
    (req,) = llm_server.chat_requests
    user = req.messages[-1]["content"]
    assert SAMPLE.strip() in user
    for r in G_ROWS:
        assert r["markdown"].strip() in user  # whole documents, nothing cut
    # cached: a second run makes no request
    md2, meta2 = one_shot(INSTANCE, G_ROWS, settings, tmp_path / "cache")
    assert md2 == md and meta2["cached"] and len(llm_server.chat_requests) == 1


def test_one_shot_invalid_then_valid(llm_server, api_key, tmp_path):
    llm_server.script(
        fake_llm.json_reply({"report_markdown": "   "}),
        fake_llm.json_reply({"report_markdown": REPORT}),
    )
    md, meta = one_shot(INSTANCE, G_ROWS, llm_settings(llm_server), tmp_path / "cache")
    assert md == REPORT and meta["attempts"] == 2
    assert "empty" in llm_server.chat_requests[1].messages[-1]["content"]


def test_one_shot_digests_oversized_documents(llm_server, api_key, tmp_path):
    filler = "\n\n".join(
        f"Paragraph {i} of the long annex repeats filler text about widgets." for i in range(2000)
    )
    big = dict(
        G_ROWS[1],
        doc_id="annex",
        title="Long Annex",
        markdown=f"# Long Annex\n\nThe annex opens here.\n\n## Part A\n\n{filler}\n\n## Part B\n\nEnd.\n",
    )
    rows = [G_ROWS[0], big]
    settings = llm_settings(llm_server, context_tokens=8000, max_output_tokens=1000)
    assert count_tokens(big["markdown"]) > input_budget(settings)
    llm_server.script(fake_llm.json_reply({"report_markdown": REPORT}))
    md, meta = one_shot(INSTANCE, rows, settings, tmp_path / "cache")
    assert md == REPORT
    assert meta["digested"] == ["annex"]
    # context - output budget - reserve, 10% of it kept for other tokenizers (llm.token_margin)
    assert meta["input_tokens"] <= meta["input_budget"] == int((8000 - 1000 - 800) * 0.9)
    user = llm_server.chat_requests[0].messages[-1]["content"]
    assert "DIGEST" in user and "digests" in user
    assert "The annex opens here." in user and "## Part B" in user  # first paragraph + headings
    assert "Paragraph 5 of" not in user  # the body is not sent, and nothing is half-cut
    assert G_ROWS[0]["markdown"].strip() in user  # the small document stays whole


def test_one_shot_too_small_context_raises(llm_server, api_key, tmp_path):
    settings = llm_settings(llm_server, context_tokens=1024, max_output_tokens=900)
    with pytest.raises(FrameInputError, match="context_tokens"):
        one_shot(INSTANCE, G_ROWS, settings, tmp_path / "cache")
    assert llm_server.chat_requests == []


def test_cli_one_shot_over_http(llm_server, demo_release, tmp_path):
    """`frame generate --system one-shot` in a subprocess talks HTTP to the local server: one call per
    instance, the API key only in the Authorization header, reports written per instance."""
    import subprocess
    import sys

    import pandas as pd

    from tests.conftest import frame_env

    def answer(req):
        user = req.messages[-1]["content"]
        title = next(ln for ln in user.splitlines() if ln.startswith("# "))
        return fake_llm.json_reply({"report_markdown": f"{title}\n\n## Overview\n\nA generated report.\n"})

    llm_server.default_chat = answer
    env = {
        **frame_env(tmp_path / "ph"),
        "FRAME_LLM_BACKEND": "openai",
        "FRAME_LLM_BASE_URL": llm_server.base_url,
        "FRAME_LLM_MODEL": "test-model",
        "OPENAI_API_KEY": "sk-test-one-shot-secret",
        "FRAME_CACHE_DIR": str(tmp_path / "cache"),
    }
    frame = str(Path(sys.executable).with_name("frame"))
    args = [frame, "generate", "--release", str(demo_release), "--system", "one-shot"]
    res = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    n = len(pd.read_parquet(demo_release / "instances.parquet"))
    assert len(llm_server.chat_requests) == n
    auth = {r.headers["authorization"] for r in llm_server.chat_requests}
    assert auth == {"Bearer sk-test-one-shot-secret"}
    out = demo_release.parents[2] / "generations" / "demo" / "0.1.0" / "one-shot"
    gens = pd.read_parquet(out / "generations.parquet")
    assert len(gens) == n and gens["markdown"].str.contains("A generated report.").all()
    assert "sk-test-one-shot-secret" not in (out / "generations.parquet").read_bytes().decode("latin-1")
    assert all(json.loads(m)["model"] for m in gens["metadata_json"])
    # without an endpoint: one line, exit 2, nothing generated
    env.pop("FRAME_LLM_BASE_URL")
    env["FRAME_LLM_BACKEND"] = "offline"
    res = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 2 and "one-shot needs an OpenAI-compatible endpoint" in res.stderr
