"""`frame score` on the OpenAI path end to end: one-shot generation, LLM structure trees, LLM coverage and
faithfulness judges and OpenAI-compatible embeddings, all over HTTP to the local test server; a rerun
makes no request; the API key never lands in outputs or caches."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

import tests.llm_server as fake_llm
from schemas.release import TABLE_SCHEMAS
from tests.conftest import frame_env

llm_server = fake_llm.llm_server
FRAME = str(Path(sys.executable).with_name("frame"))
SECRET = "sk-test-score-openai-9f3c"

S = """# Acme Corp quarterly report (Q1 2025)

## Results of Operations

Revenue was $1,200 million, up 10% from a year earlier.

## Liquidity

Cash and equivalents were $300 million at quarter end.
"""
Y = S.replace("Q1", "Q2").replace("1,200", "1,350").replace("10%", "12.5%").replace("$300", "$320")
G = [
    ("mdna", "Management's Discussion and Analysis", "Revenue was $1,350 million in Q2 2025, up 12.5%."),
    ("balance", "Balance Sheet", "| Item | June 28, 2025 |\n|---|---|\n| Cash and equivalents | 320 |"),
]


def write_release(root: Path, sample: str = S, target: str = Y) -> Path:
    rel = root / "data" / "releases" / "tiny" / "1.0.0"
    rel.mkdir(parents=True)
    iid = "financial_quarterly/ACME-10-Q/t1->t2"
    instances = [
        {
            "instance_id": iid,
            "category": "financial_quarterly",
            "domain": "ACME-10-Q",
            "t_sample": "t1",
            "t_target": "t2",
            "sample_report_id": "ACME-10-Q/t1",
            "target_report_id": "ACME-10-Q/t2",
            "grounding_set_id": "ACME-10-Q/t2",
            "grounding_doc_ids": [d for d, _, _ in G],
            "sample_markdown": sample,
            "target_markdown": target,
        }
    ]
    docs = [
        {
            "grounding_set_id": "ACME-10-Q/t2",
            "domain": "ACME-10-Q",
            "snapshot": "t2",
            "doc_id": d,
            "title": t,
            "kind": "prose",
            "tokens": len(md.split()),
            "tables": md.count("|---"),
            "images": 0,
            "source_sha256": "0" * 64,
            "source_kind": "edgar",
            "markdown": md,
            "metadata_json": "{}",
        }
        for d, t, md in G
    ]
    for name, rows in (("instances", instances), ("grounding_documents", docs)):
        schema = TABLE_SCHEMAS[name]
        rows = [{f.name: r.get(f.name) for f in schema} for r in rows]
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), rel / f"{name}.parquet")
    return rel


def answer(req: fake_llm.Recorded) -> fake_llm.Reply:
    """Plays every role from what its prompt asks for (valid JSON of that role's shape)."""
    user = req.messages[-1]["content"]
    if "Sample report (earlier period" in user:
        return fake_llm.json_reply({"report_markdown": Y})
    if '{"units"' in user:
        return fake_llm.json_reply(
            {
                "units": [
                    {"type": "statistic", "content": "Revenue was $1,350 million.", "source_sentence": "x"}
                ]
            }
        )
    if '{"judgments"' in user:
        ids = re.search(r"Grade each of the units ([\d, ]+) against", user).group(1)
        return fake_llm.json_reply(
            {"judgments": [{"unit_id": int(i), "score": 1.0, "evidence": "Revenue"} for i in ids.split(",")]}
        )
    if '{"claims"' in user:
        return fake_llm.json_reply(
            {"claims": [{"content": "Revenue was $1,350 million."}, {"content": "Cash was $320 million."}]}
        )
    ids = [int(i) for i in re.findall(r"^### Claim (\d+)", user, re.M)]
    if "Score every claim above" in user:  # stage 1: claim 0 is left for stage 2
        verdicts = [{"claim_id": i, "score": 0.5 if i == 0 else 1.0, "doc_id": "mdna"} for i in ids]
        return fake_llm.json_reply({"verdicts": verdicts})
    if "Decide for every claim above" in user:
        return fake_llm.json_reply(
            {"verdicts": [{"claim_id": i, "score": 0.9, "doc_id": "mdna"} for i in ids]}
        )
    if "<<<REPORT\n" in user:
        titles = re.findall(r"^## (.+)$", user, re.M)
        sections = [
            {"type": "section", "title": t, "objective": f"About {t}", "children": []} for t in titles
        ]
        return fake_llm.json_reply({"title": "", "children": sections})
    return fake_llm.error(400, "unexpected request")


def test_score_over_openai_compatible_endpoint(llm_server, tmp_path):
    rel = write_release(tmp_path)
    llm_server.default_chat = answer
    env = {
        **frame_env(tmp_path / "ph"),
        "FRAME_LLM_BACKEND": "openai",
        "FRAME_LLM_BASE_URL": llm_server.base_url,
        "FRAME_LLM_MODEL": "judge-model",
        "OPENAI_API_KEY": SECRET,
    }
    args = [
        FRAME, "score", "--release", str(rel), "--systems", "gold,one-shot",
        "--judge", "openai", "--tree", "llm", "--embedder", "openai:test-embed",
    ]  # fmt: skip
    first = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:] + first.stdout[-3000:]
    calls = len(llm_server.requests)
    assert calls and all(r.headers["authorization"] == f"Bearer {SECRET}" for r in llm_server.requests)
    assert llm_server.embedding_requests  # node similarity through the endpoint's embeddings

    out = tmp_path / "data" / "scores" / "tiny" / "1.0.0"
    scores = pd.read_parquet(out / "scores.parquet").set_index(["system", "metric"])
    assert scores.loc[("gold", "structure"), "value"] == 1.0
    assert scores.loc[("one-shot", "coverage"), "value"] == 1.0
    # stage 1 left claim 0 at 0.5, stage 2 raised it to 0.9; claim 1 stayed at 1.0
    assert abs(scores.loc[("one-shot", "faithfulness"), "value"] - 0.95) < 1e-9
    assert scores.loc[("one-shot", "faithfulness"), "judge"] == "openai:judge-model"
    assert scores.loc[("one-shot", "structure"), "judge"].startswith("llm-tree:judge-model+test-embed")
    evidence = pd.read_parquet(out / "evidence.parquet")
    faith = evidence[(evidence.metric == "faithfulness") & (evidence.system == "one-shot")].set_index("index")
    assert faith.loc[0, "stage"] == 2 and faith.loc[1, "stage"] == 1
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["llm"]["model"] == "judge-model" and SECRET not in json.dumps(manifest)

    second = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    assert len(llm_server.requests) == calls  # everything from cache: no request at all
    states = re.findall(r"Task run '(?:score|generate)-[^']*' - Finished in state (\w+)", second.stdout)
    assert states and set(states) == {"Cached"}

    for path in (tmp_path / "data").rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
