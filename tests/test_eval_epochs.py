"""Issue 35 point 7: `frame score --epochs K` samples a model with temperature > 0 K times per instance
(each sample its own request and cache entry), scores every sample, ranks on the per-instance mean and
reports the sampling variance beside the CI; a model with temperature 0 is sampled once. Through the CLI,
against the local OpenAI-compatible test server, on a two-instance release cut from the demo release."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pandas as pd
import pytest

import tests.llm_server as fake_llm
from tests.test_eval_plain import INSTANCES, KEY_ENV, frame, small_release

llm_server = fake_llm.llm_server

EPOCHS = 3


def config(path: Path, server: fake_llm.LLMTestServer) -> Path:
    systems = {"warm": 0.7, "cold": 0.0}
    path.write_text(
        "".join(
            f'[systems.{name}]\nkind = "openai"\nbase_url = "{server.base_url}"\nmodel = "{name}-model"\n'
            f'api_key_env = "{KEY_ENV}"\ntemperature = {t}\n\n'
            for name, t in systems.items()
        ),
        encoding="utf-8",
    )
    return path


def varying_answer():
    """A model that writes a different share of the sample report each time it is asked one prompt (1/3,
    2/3, all of it, in turn): its samples of one instance differ, and so do their scores."""
    count: dict[tuple[str, str], int] = {}
    lock = threading.Lock()

    def answer(req: fake_llm.Recorded) -> fake_llm.Reply:
        user = req.messages[-1]["content"]
        with lock:
            key = (req.body["model"], user)
            count[key] = count.get(key, 0) + 1
            k = (count[key] - 1) % EPOCHS + 1
        sample = user.split("<<<SAMPLE\n", 1)[1].split("\nSAMPLE>>>", 1)[0]
        return fake_llm.chat_reply(sample[: len(sample) * k // EPOCHS])

    return answer


@pytest.fixture(scope="module")
def release(demo_release, tmp_path_factory) -> Path:
    return small_release(demo_release, tmp_path_factory.mktemp("epochs"), "epochs")


def test_epochs_sample_warm_models_and_report_the_sampling_variance(llm_server, release, tmp_path):
    llm_server.default_chat = varying_answer()
    cfg = config(tmp_path / "eval.toml", llm_server)
    out = tmp_path / "scores"
    args = ["score", "--release", str(release), "--config", str(cfg), "--metrics", "rouge_l"]
    res = frame([*args, "--epochs", str(EPOCHS), "--out", str(out)], tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]

    # each sample is its own request: 3 per instance for the warm model, 1 for the cold one
    models = pd.Series([r.body["model"] for r in llm_server.chat_requests]).value_counts().to_dict()
    assert models == {"warm-model": EPOCHS * INSTANCES, "cold-model": INSTANCES}

    gens = pd.read_parquet(
        release.parents[2] / "generations" / "demo" / release.name / "warm" / "generations.parquet"
    )
    assert sorted(gens["epoch"]) == sorted(list(range(EPOCHS)) * INSTANCES)
    assert gens.groupby("instance_id")["markdown"].nunique().eq(EPOCHS).all()  # distinct samples

    scores = pd.read_parquet(out / "scores.parquet")
    warm, cold = scores[scores["system"] == "warm"], scores[scores["system"] == "cold"]
    assert all(sorted(g) == list(range(EPOCHS)) for _, g in warm.groupby("instance_id")["epoch"])
    assert set(cold["epoch"]) == {0} and len(cold) == INSTANCES

    # the board ranks on the per-instance mean over samples (the oracle: pandas over scores.parquet)
    board = pd.read_csv(out / "leaderboard.csv")
    cell = board[(board.system == "warm") & (board.scope == "overall") & (board.metric == "rouge_l")]
    expected = warm.groupby("instance_id")["value"].mean().mean()
    assert cell["n"].item() == INSTANCES and cell["mean"].item() == pytest.approx(expected, abs=1e-6)

    # the repeated-samples table: samples, mean, CI and the sampling variance (mean within-instance var)
    text = (out / "leaderboard.md").read_text(encoding="utf-8")
    assert f"## Repeated samples (--epochs {EPOCHS})" in text
    row = re.search(
        r"^\| warm \| 3 \| rouge_l \| 2 \| ([\d.]+) \| \[([\d.]+), ([\d.]+)\] \| ([\d.]+) \|$", text, re.M
    )
    assert row is not None, text
    variance = warm.groupby("instance_id")["value"].var(ddof=1).mean()
    assert variance > 0 and float(row.group(4)) == pytest.approx(variance, abs=1e-5)
    assert float(row.group(1)) == pytest.approx(expected, abs=1e-3)
    assert re.search(r"^\| cold \| 1 \| rouge_l \| 2 \| .* \| — \(sampled once\) \|$", text, re.M), text
    # the same table in results.json, as data
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    mine = {(r["system"], r["metric"]): r for r in results["sampling"]}
    assert mine[("warm", "rouge_l")]["samples"] == EPOCHS
    assert mine[("warm", "rouge_l")]["sampling_variance"] == pytest.approx(variance, abs=1e-9)
