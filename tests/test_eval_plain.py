"""Issue 35 point 3: a system under test answers in plain Markdown, as the papers' baselines do, and its
reply is the report. Driven through the CLI (`frame generate`, `frame score`) against the local
OpenAI-compatible test server over HTTP, on a two-instance release cut from the demo release."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

import tests.llm_server as fake_llm
from tests.conftest import frame_env

llm_server = fake_llm.llm_server

KEY_ENV = "FRAME_TEST_PLAIN_KEY"
INSTANCES = 2


def small_release(demo_release: Path, root: Path, version: str) -> Path:
    """A copy of the demo release holding its first INSTANCES instances only (the other tables whole)."""
    import shutil

    out = root / "data" / "releases" / "demo" / version
    shutil.copytree(demo_release, out)
    table = pq.read_table(demo_release / "instances.parquet")
    ids = sorted(table.column("instance_id").to_pylist())[:INSTANCES]
    keep = [i for i, v in enumerate(table.column("instance_id").to_pylist()) if v in ids]
    pq.write_table(table.take(keep), out / "instances.parquet")
    return out


def eval_config(path: Path, server: fake_llm.LLMTestServer, temperature: float = 0.0) -> Path:
    path.write_text(
        "[systems.plain]\n"
        'kind = "openai"\n'
        f'base_url = "{server.base_url}"\n'
        'model = "plain-model"\n'
        f'api_key_env = "{KEY_ENV}"\n'
        f"temperature = {temperature}\n"
        "invalid_retries = 1\n"
        "transient_retries = 0\n",
        encoding="utf-8",
    )
    return path


def frame(args: list[str], tmp: Path) -> subprocess.CompletedProcess:
    env = {**frame_env(tmp / "prefect"), KEY_ENV: "sk-plain-test"}
    cmd = [sys.executable, "-m", "flows.cli", *args, "--no-preflight"]
    return subprocess.run(
        cmd, capture_output=True, text=True, env=env, timeout=600, cwd=Path(__file__).parents[1]
    )


def title_of(req: fake_llm.Recorded) -> str:
    """The sample's title line (the prompt's first H1), as a model keeping the form would start."""
    user = next(m["content"] for m in req.messages if m["role"] == "user")
    return next(ln for ln in user.splitlines() if ln.startswith("# "))


@pytest.fixture(scope="module")
def release(demo_release, tmp_path_factory) -> Path:
    return small_release(demo_release, tmp_path_factory.mktemp("plain"), "plain")


def test_plain_markdown_replies_are_the_reports(llm_server, release, tmp_path):
    """Plain Markdown (one reply in a ```markdown fence) makes n reports, exit 0; the request asks for
    Markdown, never for JSON (no response_format, no JSON wrapper in the prompt). Today: every reply is
    "not valid JSON", zero reports."""
    seen = []

    def answer(req):
        seen.append(req)
        body = f"{title_of(req)}\n\n## Overview\n\nRevenue grew in the period.\n"
        return fake_llm.chat_reply(f"```markdown\n{body}```" if len(seen) == 1 else body)

    llm_server.default_chat = answer
    cfg = eval_config(tmp_path / "eval.toml", llm_server)
    res = frame(["generate", "--release", str(release), "--system", "plain", "--config", str(cfg)], tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert f"({INSTANCES} of {INSTANCES} report(s))" in res.stdout
    gens = pd.read_parquet(
        release.parents[2] / "generations" / "demo" / release.name / "plain" / "generations.parquet"
    )
    assert len(gens) == INSTANCES and gens["error"].isna().all()
    for md in gens["markdown"]:
        assert md.startswith("# ") and "```" not in md and "Revenue grew in the period." in md
    assert len(seen) == INSTANCES  # one reply each: no corrective turn was needed
    for req in seen:
        assert "response_format" not in req.body
        assert (
            "report_markdown" not in json.dumps(req.messages)
            and "Markdown only" in req.messages[0]["content"]
        )


def test_garbage_without_headings_fails_visibly(llm_server, release, tmp_path):
    """A model answering text without any Markdown heading is asked again, then each instance fails:
    `frame generate` exits non-zero and names the problem, one line per instance, no traceback (`frame
    score` drives the same system: tests/test_eval_epochs.py)."""
    llm_server.default_chat = lambda req: fake_llm.chat_reply("sure! here is some text, no report at all")
    cfg = eval_config(tmp_path / "eval.toml", llm_server)
    res = frame(["generate", "--release", str(release), "--system", "plain", "--config", str(cfg)], tmp_path)
    assert res.returncode != 0, res.stdout[-2000:]
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("frame: error: generate plain: ")]
    assert len(errors) == INSTANCES and all("has no Markdown heading line" in e for e in errors), errors
    assert f"(0 of {INSTANCES} report(s))" in res.stdout
    assert "Traceback" not in res.stderr
    # asked twice per instance (invalid_retries = 1), the second time with a corrective turn
    assert len(llm_server.chat_requests) == 2 * INSTANCES
    corrective = [r for r in llm_server.chat_requests if len(r.messages) > 2]
    assert len(corrective) == INSTANCES
    assert "Markdown only" in corrective[0].messages[-1]["content"]
