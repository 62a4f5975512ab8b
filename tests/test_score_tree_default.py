"""Which structure trees `frame score` uses (issue 41, item 2): with an LLM judge configured, the paper's
LLM-extracted trees unless `--tree deterministic` is given; offline, the deterministic trees. The results
and the leaderboard state the tree builder and the embedder. Over HTTP to the local test server."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import tests.llm_server as fake_llm
from schemas.scoring import ScoreSettings
from tests.conftest import frame_env
from tests.test_score_openai_flow import write_release

llm_server = fake_llm.llm_server
FRAME = str(Path(sys.executable).with_name("frame"))
SECRET = "sk-test-tree-default-41"
MODEL = "tree-judge-model"


def test_settings_default_tree_follows_the_judge():
    assert ScoreSettings().tree == "deterministic"
    assert ScoreSettings(judge="offline").tree == "deterministic"
    assert ScoreSettings(judge="openai").tree == "llm"
    assert ScoreSettings(judge="openai", tree="deterministic").tree == "deterministic"
    assert ScoreSettings(judge="offline", tree="llm").tree == "llm"
    # what a score file records is the resolved builder, and it reads back the same
    dumped = ScoreSettings(judge="openai").model_dump(mode="json")
    assert dumped["tree"] == "llm" and ScoreSettings(**dumped) == ScoreSettings(judge="openai")


def answer(req):
    """score_structure: one section per `## ` line of the report; nothing else is asked."""
    user = req.messages[-1]["content"]
    if "<<<REPORT\n" not in user:
        return fake_llm.error(400, "only structure trees are asked here")
    titles = re.findall(r"^## (.+)$", user, re.M)
    sections = [{"type": "section", "title": t, "objective": f"About {t}", "children": []} for t in titles]
    return fake_llm.json_reply({"title": "", "children": sections})


def _score(tmp_path: Path, server, *extra: str) -> tuple[pd.DataFrame, dict, str]:
    rel = write_release(tmp_path)
    env = {
        **frame_env(tmp_path / "ph"),
        "FRAME_LLM_BACKEND": "openai",
        "FRAME_LLM_BASE_URL": server.base_url,
        "FRAME_LLM_MODEL": MODEL,
        "OPENAI_API_KEY": SECRET,
    }
    args = [FRAME, "score", "--release", str(rel), "--systems", "gold,copy-sample", "--metrics", "structure"]
    args += ["--judge", "openai", "--bootstrap", "100", *extra]
    run = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:] + run.stdout[-3000:]
    out = tmp_path / "data" / "scores" / "tiny" / "1.0.0"
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    return pd.read_parquet(out / "scores.parquet"), manifest, (out / "leaderboard.md").read_text("utf-8")


@pytest.mark.parametrize("given", [(), ("--tree", "deterministic")])
def test_openai_judge_uses_llm_trees_unless_told_otherwise(llm_server, tmp_path, given):
    llm_server.default_chat = answer
    scores, manifest, board = _score(tmp_path, llm_server, *given)
    asked = [r for r in llm_server.chat_requests if "<<<REPORT\n" in r.messages[-1]["content"]]
    detail = [json.loads(d) for d in scores["detail_json"]]
    if given:  # told: Markdown trees, no tree request
        assert not asked
        assert manifest["settings"]["tree"] == "deterministic"
        assert set(scores["judge"]) == {f"deterministic-tree+{detail[0]['embedder']}"}
        assert {d["tree"] for d in detail} == {"deterministic"}
        assert "Structure trees: deterministic" in board
    else:  # the paper's method: each distinct report's tree asked of the judge model
        # the two distinct reports (Y, S); racing tasks may ask one twice before its reply is cached
        assert len({r.messages[-1]["content"] for r in asked}) == 2
        assert manifest["settings"]["tree"] == "llm"
        assert all(j.startswith(f"llm-tree:{MODEL}+") for j in scores["judge"])
        assert {d["tree"] for d in detail} == {f"llm:{MODEL}"}
        assert f"Structure trees: LLM-extracted by {MODEL}" in board
    embedder = detail[0]["embedder"]
    assert embedder.startswith("all-MiniLM-L6-v2") and {d["embedder"] for d in detail} == {embedder}
    assert f"node embedder: {embedder}" in board
