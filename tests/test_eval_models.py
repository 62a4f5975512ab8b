"""A model on the command line (issue 35, point 1): `frame score --model openai/<m> --judge-model openai/<j>`
scores a model with no config file, all LLM traffic over HTTP to the local OpenAI-compatible test server;
the scores folder gets the equivalent config.toml (no secret), and `frame score --config` on it repeats the
run exactly: not one request more (every generation and judgement from cache) and identical scores.
`frame generate --model` does the same for the generations folder."""

from __future__ import annotations

import json
import subprocess
import tomllib

import pandas as pd

import tests.llm_server as fake_llm
from tests.conftest import frame_env
from tests.test_eval_systems_flow import reply
from tests.test_score_openai_flow import FRAME, role_of, write_release

llm_server = fake_llm.llm_server
SECRET = "sk-test-eval-models-77a1"
METRICS = "coverage"


def _run(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([FRAME, *args], capture_output=True, text=True, env=env, timeout=600)


def test_model_flags_score_write_a_config_that_repeats_the_run(llm_server, tmp_path):
    rel = write_release(tmp_path)
    llm_server.default_chat = reply
    env = {**frame_env(tmp_path / "ph"), "EVAL_KEY": SECRET, "OPENAI_API_KEY": SECRET}
    out1, out2 = tmp_path / "run1", tmp_path / "run2"
    first = _run(
        ["score", "--release", str(rel), "--systems", "gold", "--model", "openai/org/model-a",
         "--model-base-url", llm_server.base_url, "--model-arg", "temperature=0.3",
         "--model-arg", "api_key_env=EVAL_KEY", "--judge-model", "openai/judge-model",
         "--metrics", METRICS, "--bootstrap", "100", "--out", str(out1)],
        env,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr[-3000:] + first.stdout[-3000:]
    gens = [r for r in llm_server.chat_requests if role_of(r) == "generate_one_shot"]
    assert [(r.body["model"], r.body["temperature"]) for r in gens] == [("org/model-a", 0.3)]
    judged = [r for r in llm_server.chat_requests if role_of(r) != "generate_one_shot"]
    assert judged and {r.body["model"] for r in judged} == {"judge-model"}
    assert all(r.headers["authorization"] == f"Bearer {SECRET}" for r in llm_server.requests)
    scores = pd.read_parquet(out1 / "scores.parquet")
    assert set(scores.system) == {"gold", "model-a"}  # the system is named by the model

    text = (out1 / "config.toml").read_text(encoding="utf-8")
    assert SECRET not in text
    written = tomllib.loads(text)
    assert written["systems"]["gold"] == {"kind": "builtin", "builtin": "gold"}
    assert written["systems"]["model-a"] == {
        "kind": "openai", "base_url": llm_server.base_url, "model": "org/model-a",
        "api_key_env": "EVAL_KEY", "temperature": 0.3,
    }  # fmt: skip
    assert written["judge"] == {"base_url": llm_server.base_url, "model": "judge-model"}
    assert written["score"] == {"metrics": METRICS.split(","), "bootstrap": 100}

    calls = len(llm_server.requests)
    second = _run(
        ["score", "--release", str(rel), "--config", str(out1 / "config.toml"), "--out", str(out2)], env
    )
    assert second.returncode == 0, second.stderr[-3000:] + second.stdout[-3000:]
    assert len(llm_server.requests) == calls  # same cache keys: nothing generated or judged again
    again = pd.read_parquet(out2 / "scores.parquet")
    pd.testing.assert_frame_equal(scores, again)
    m1, m2 = (json.loads((o / "manifest.json").read_text(encoding="utf-8")) for o in (out1, out2))
    for key in ("settings", "system_identities", "generations_sha256", "llm", "metrics"):
        assert m1[key] == m2[key], key


def test_generate_with_a_model_flag_writes_its_config(llm_server, tmp_path):
    rel = write_release(tmp_path)
    llm_server.default_chat = reply
    env = {**frame_env(tmp_path / "ph"), "OPENAI_API_KEY": SECRET}
    args = [
        "generate",
        "--release",
        str(rel),
        "--model",
        "openai/model-b",
        "--model-base-url",
        llm_server.base_url,
    ]
    res = _run(args, env)
    assert res.returncode == 0, res.stderr[-3000:]
    folder = tmp_path / "data" / "generations" / "tiny" / "1.0.0" / "model-b"
    assert len(list((folder / "reports").glob("*.md"))) == 1
    written = tomllib.loads((folder / "config.toml").read_text(encoding="utf-8"))
    assert written["systems"] == {
        "model-b": {"kind": "openai", "base_url": llm_server.base_url, "model": "model-b"}
    }
    assert [r.body["model"] for r in llm_server.chat_requests if role_of(r) == "generate_one_shot"] == [
        "model-b"
    ]


def test_bad_model_flags_are_one_line_errors(tmp_path):
    from typer.testing import CliRunner

    from flows.cli import app

    rel = write_release(tmp_path)
    config = tmp_path / "eval.toml"
    config.write_text('[systems.extractive]\nkind = "builtin"\n', encoding="utf-8")
    cases = [
        ("--model-arg", ["--model", "openai/m", "--model-arg", "colour=red"]),  # unknown key
        ("--model-arg", ["--model", "openai/m", "--model-arg", "temperature=9"]),  # refused value
        ("--model", ["--model", "anthropic/m"]),
        ("--model-base-url", ["--model", "openai/m", "--model-base-url", "ftp://x"]),
        ("--model-base-url", ["--model", "openai/a", "--model", "openai/b", "--model-base-url", "http://x/v1",
                              "--model-base-url", "http://y/v1", "--model-base-url", "http://z/v1"]),
        ("--judge-base-url", ["--judge-base-url", "http://x/v1"]),
    ]  # fmt: skip
    for flag, extra in cases:
        res = CliRunner().invoke(app, ["score", "--release", str(rel), *extra])
        assert res.exit_code == 2, (flag, res.output)
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith(f"frame: error: {flag}:"), (flag, res.stderr)
    res = CliRunner().invoke(
        app, ["score", "--release", str(rel), "--config", str(config), "--model", "openai/m"]
    )
    assert res.exit_code == 2 and "--model" in res.stderr and "--config" in res.stderr
    res = CliRunner().invoke(app, ["generate", "--release", str(rel), "--model-arg", "temperature=1"])
    assert res.exit_code == 2 and res.stderr.startswith("frame: error: --model-arg:"), res.stderr
