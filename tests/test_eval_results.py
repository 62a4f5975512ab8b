"""Issue 35 point 9: every `frame score` run writes results.json (schemas.results.Results) whose numbers
are leaderboard.csv's and paired_tests.csv's, and `flows.api.evaluate` returns the same object."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from schemas.results import RESULTS_SCHEMA_VERSION, Results
from tests.conftest import ROOT, frame_env

FRAME = str(Path(sys.executable).with_name("frame"))
SYSTEMS = ["gold", "copy-sample", "extractive"]


@pytest.fixture(scope="module")
def scored(demo_release, tmp_path_factory) -> dict:
    """`frame score` of the builtins on a copy of the demo release (rouge_l, every pair tested)."""
    tmp = tmp_path_factory.mktemp("results")
    rel = tmp / "data" / "releases" / "demo" / "0.1.0"
    shutil.copytree(demo_release, rel)
    out = tmp / "out"
    args = [FRAME, "score", "--release", str(rel), "--systems", ",".join(SYSTEMS), "--metrics", "rouge_l"]
    res = subprocess.run(
        [*args, "--out", str(out), "--pairs", "all"],
        capture_output=True,
        text=True,
        env=frame_env(tmp / "ph"),
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return {"release": rel, "out": out}


def _evaluate(home: Path, **kwargs) -> Results:
    """flows.api.evaluate(**kwargs) in a Python process of its own, as a user's script calls it (the
    scoring run's memory stays out of this test process: other tests measure their children's peak RSS,
    which a forked child inherits); the child checks it got a Results and prints it as JSON."""
    script = (
        "import json, sys\n"
        "from flows.api import evaluate\n"
        "from schemas.results import Results\n"
        "got = evaluate(**json.loads(sys.argv[1]))\n"
        "assert isinstance(got, Results), type(got)\n"
        "sys.stdout.write('RESULTS ' + got.model_dump_json())\n"
    )
    env = frame_env(home) | {"PYTHONPATH": str(ROOT)}
    args = [sys.executable, "-c", script, json.dumps(kwargs, default=str)]
    res = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-3000:]
    return Results.model_validate_json(res.stdout.rsplit("RESULTS ", 1)[1])


def _same(a: float | None, b: float) -> bool:
    """A results.json number against its CSV cell (6 decimals; empty = NaN = null)."""
    if a is None:
        return math.isnan(b)
    return abs(a - b) <= 5e-7


def test_results_json_validates_and_holds_the_leaderboard_numbers(scored):
    raw = json.loads((scored["out"] / "results.json").read_text(encoding="utf-8"))
    results = Results.model_validate(raw)
    assert results.schema_version == RESULTS_SCHEMA_VERSION and results.release == "demo/0.1.0"
    n = len(pd.read_parquet(scored["release"] / "instances.parquet"))
    assert [(s.name, s.kind, s.generated, s.instances) for s in results.systems] == [
        (s, "builtin", n, n) for s in SYSTEMS
    ]
    assert [(m.name, m.direction, m.range) for m in results.metrics] == [("rouge_l", "higher", (0.0, 1.0))]
    board = pd.read_csv(scored["out"] / "leaderboard.csv")
    cells = {(c.system, c.scope, c.metric): c for c in results.cells}
    assert len(board) and len(board) == len([k for k in cells if k[2] == "rouge_l"])
    for r in board.to_dict("records"):
        c = cells[(r["system"], r["scope"], r["metric"])]
        assert c.n == r["n"] and c.own_n == r["own_n"]
        for k in ("mean", "ci_low", "ci_high", "own_mean"):
            assert _same(getattr(c, k), r[k]), (k, c, r)
    # the overall mean is the mean of the system's scores (an oracle apart from the leaderboard code)
    scores = pd.read_parquet(scored["out"] / "scores.parquet")
    overall = scores[scores.periods_skipped.fillna(0) == 0]
    for s in SYSTEMS:
        assert cells[(s, "overall", "rouge_l")].mean == pytest.approx(
            overall[overall.system == s].value.mean()
        )
    paired = pd.read_csv(scored["out"] / "paired_tests.csv")
    assert results.pairs == "all" and len(results.paired) == len(paired) == 1  # copy-sample vs extractive
    for p, r in zip(results.paired, paired.to_dict("records"), strict=True):
        assert (p.system, p.versus, p.n) == (r["system"], r["versus"], r["n"])
        assert all(
            _same(getattr(p, k), r[k]) for k in ("mean_diff", "ci_low", "ci_high", "p_value", "p_holm")
        )
    assert results.settings.seed == 0 and results.bootstrap["n_resamples"] == results.settings.bootstrap
    manifest = json.loads((scored["out"] / "manifest.json").read_text(encoding="utf-8"))
    assert results.versions.release_manifest_sha256 == manifest["release_manifest_sha256"]
    assert results.scored_at == manifest["scored_at"] and len(results.config_sha256) == 64


def test_evaluate_returns_the_results_of_the_same_run(scored, tmp_path):
    config = tmp_path / "eval.toml"
    config.write_text("".join(f'[systems.{s}]\nkind = "builtin"\n' for s in SYSTEMS), encoding="utf-8")
    got = _evaluate(
        tmp_path / "ph", release=scored["release"], metrics=["rouge_l"], config=config, out=tmp_path / "api",
        pairs="all",
    )  # fmt: skip
    assert got == Results.model_validate_json((tmp_path / "api" / "results.json").read_text(encoding="utf-8"))
    assert got.config_sha256 == hashlib.sha256(config.read_bytes()).hexdigest()
    cli = Results.model_validate_json((scored["out"] / "results.json").read_text(encoding="utf-8"))
    same = {"started_at", "scored_at", "config_sha256"}
    assert got.model_dump(exclude=same) == cli.model_dump(exclude=same)


def test_evaluate_takes_the_subset_of_the_cli(scored, tmp_path):
    """`limit` is `--limit`: the run scores that many instances, one per category while categories last,
    and says which in its manifest."""
    got = _evaluate(
        tmp_path / "ph", release=scored["release"], systems=["gold", "copy-sample"], metrics=["rouge_l"],
        limit=2, out=tmp_path / "run",
    )  # fmt: skip
    tmp_path = tmp_path / "run"
    assert {s.name: s.instances for s in got.systems} == {"gold": 2, "copy-sample": 2}
    scores = pd.read_parquet(tmp_path / "scores.parquet")
    manifest = json.loads((tmp_path / "manifest.json").read_text(encoding="utf-8"))
    assert sorted(set(scores["instance_id"])) == sorted(manifest["subset"]["instance_ids"])
    assert got.subset is not None and got.subset["instance_ids"] == manifest["subset"]["instance_ids"]
    instances = pd.read_parquet(Path(scored["release"]) / "instances.parquet").set_index("instance_id")
    chosen = instances.loc[sorted(set(scores["instance_id"])), "category"]
    assert len(chosen) == 2 and chosen.nunique() == 2  # the release has several categories
