"""Issue 35 points 4 and 5 through `frame score` on the demo release: every system is on the board with
"generated k/n" (one that produced nothing too, with its first error), one summary line per failed system
and exit 1 past `--max-failures`; systems ranked on the instances they all have, each one's own full-n
mean beside; `--pairs all` with Holm-adjusted p; a blind kit's withheld instances are not missing from a
kit submission."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import frame_env

FRAME = str(Path(sys.executable).with_name("frame"))
PY = Path(sys.executable).as_posix()
# fails on one instance (read from the instance folder frame gives the program), else answers with S
FLAKY = """import json, os, pathlib, sys
d = pathlib.Path(os.environ["FRAME_INSTANCE_DIR"])
if json.loads((d / "instance.json").read_text())["instance_id"] == sys.argv[1]:
    sys.exit("flaky: refused this one")
print((d / "sample.md").read_text())
"""


@pytest.fixture(scope="module")
def release(demo_release, tmp_path_factory) -> Path:
    """A copy of the demo release in a data folder of its own (generations are written beside it)."""
    rel = tmp_path_factory.mktemp("board") / "data" / "releases" / "demo" / "0.1.0"
    shutil.copytree(demo_release, rel)
    return rel


def _score(release: Path, tmp: Path, config: str, *more: str) -> subprocess.CompletedProcess:
    cfg = tmp / "eval.toml"
    cfg.write_text(config, encoding="utf-8")
    args = [FRAME, "score", "--release", str(release), "--config", str(cfg), "--metrics", "rouge_l", *more]
    env = frame_env(tmp / "ph") | {"FRAME_VERBOSE": "0"}  # as a user's terminal shows it (not -v)
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)


def test_failed_systems_are_on_the_board_ranked_on_common_instances(release, tmp_path):
    ids = sorted(pd.read_parquet(release / "instances.parquet").instance_id)
    instances = pd.read_parquet(release / "instances.parquet").set_index("instance_id")
    # an instance of the Overall scope (its snapshots consecutive) for the flaky program to refuse
    victim = next(i for i in ids if not (instances.loc[i, "periods_skipped"] or 0))
    (tmp_path / "flaky.py").write_text(FLAKY, encoding="utf-8")
    config = (
        '[systems.gold]\nkind = "builtin"\n[systems.copy-sample]\nkind = "builtin"\n'
        '[systems.extractive]\nkind = "builtin"\n[systems.boom]\nkind = "command"\ncommand = "false"\n'
        f'[systems.flaky]\nkind = "command"\ncommand = ["{PY}", "flaky.py", "{victim}"]\n'
    )
    out = tmp_path / "out"
    res = _score(release, tmp_path, config, "--out", str(out), "--pairs", "all")
    n = len(ids)
    assert res.returncode == 1, res.stderr[-3000:]
    assert "Traceback" not in res.stderr  # frame's own lines (Prefect's task log is the ops point's)
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("frame: error:")]
    assert errors == [
        f"frame: error: boom: generated 0/{n}: {ids[0]}: exited with code 1: nothing on stderr",
        f"frame: error: flaky: generated {n - 1}/{n}: {victim}: exited with code 1: flaky: refused this one",
    ]
    # one line per failed instance on the whole terminal (stdout and stderr), never more, no traceback
    terminal = (res.stdout + res.stderr).splitlines()
    warned = [ln for ln in terminal if "generation failed:" in ln]
    assert len(warned) == n + 1 and "Traceback" not in res.stdout
    assert sum(victim in ln for ln in warned) == 2  # boom's and flaky's, one line each
    board = (out / "leaderboard.md").read_text(encoding="utf-8")
    header = next(ln for ln in board.splitlines() if ln.startswith("| Metric | Data |"))
    assert "boom" in header and "flaky" in header  # a system with no report keeps its column
    assert "Scored: 4 system(s) of 5 asked for (3 ranked; ceiling: gold; baselines: " in board  # not boom
    assert f"boom 0/{n}" in board and f"flaky {n - 1}/{n}" in board and f"copy-sample {n}/{n}" in board
    assert "exited with code 1" in board  # boom's first error
    # the ranking is over the instances every scored system has: all but the victim
    scores = pd.read_parquet(out / "scores.parquet")
    overall = scores[scores.periods_skipped.fillna(0) == 0]
    common = overall[overall.instance_id != victim]
    lb = pd.read_csv(out / "leaderboard.csv")
    cell = lb[(lb.scope == "overall") & (lb.metric == "rouge_l")].set_index("system")
    for system in ("gold", "copy-sample", "extractive", "flaky"):
        mine = common[common.system == system].value
        assert cell.loc[system, "n"] == len(mine) == len(set(overall.instance_id)) - 1
        assert cell.loc[system, "mean"] == pytest.approx(mine.mean(), abs=1e-6)
        own = overall[overall.system == system].value
        assert cell.loc[system, "own_n"] == len(own)
        assert cell.loc[system, "own_mean"] == pytest.approx(own.mean(), abs=1e-6)
    assert "boom" not in set(lb.system)
    assert f"(own {overall[overall.system == 'copy-sample'].value.mean():.3f}, n={len(ids) - 2})" in board
    # every pair of the ranked systems, Holm-adjusted p never below p
    paired = pd.read_csv(out / "paired_tests.csv")
    pairs = {frozenset(p) for p in zip(paired.system, paired.versus, strict=True)}
    assert pairs == {
        frozenset(p)
        for p in (("copy-sample", "extractive"), ("copy-sample", "flaky"), ("extractive", "flaky"))
    }
    assert (paired.n == len(ids) - 3).all()
    # Holm by hand: the k-th smallest of m p-values times (m - k + 1), capped at 1, never below the one before
    ps = sorted(paired.p_value)
    holm = [min(1.0, max((3 - j) * ps[j] for j in range(k + 1))) for k in range(3)]
    assert sorted(paired.p_holm) == pytest.approx(holm, abs=5e-6)  # p read at 6 decimals, times m
    # a failure share allowed by --max-failures: the same run (from cache) exits 0, failures still said
    again = _score(release, tmp_path, config, "--out", str(out), "--max-failures", "1")
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"frame: warning: boom: generated 0/{n}:" in again.stderr


def test_a_kit_submission_needs_no_allow_missing_for_withheld_instances(release, tmp_path):
    kit = tmp_path / "kit"
    res = subprocess.run(
        [FRAME, "export-eval", "--release", str(release), "--out", str(kit)],
        capture_output=True,
        text=True,
        env=frame_env(tmp_path / "ph"),
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    withheld = json.loads((kit / "MANIFEST.json").read_text(encoding="utf-8"))["withheld"]
    assert withheld  # the demo chains t1 -> t2 -> t3
    answers = tmp_path / "answers"
    for line in (kit / "instances.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        (answers / r["report_file"]).parent.mkdir(parents=True, exist_ok=True)
        (answers / r["report_file"]).write_text((kit / r["sample_file"]).read_text("utf-8"), "utf-8")
    config = (
        '[systems.gold]\nkind = "builtin"\n'
        f'[systems.outside]\nkind = "submission"\npath = "{(answers / "reports").as_posix()}"\n'
    )
    out = tmp_path / "out"
    res = _score(release, tmp_path, config, "--out", str(out))
    assert res.returncode == 0, res.stderr[-3000:]  # no --allow-missing, no failure
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["generation_failures"] == []  # nothing asked of the submission for withheld ids
    n = len(pd.read_parquet(release / "instances.parquet"))
    g = manifest["generation"]["outside"]
    assert (g["instances"], g["generated"], g["withheld"]) == (
        n - len(withheld),
        n - len(withheld),
        len(withheld),
    )
    lb = pd.read_csv(out / "leaderboard.csv").set_index(["system", "scope"])
    common = pd.read_parquet(out / "scores.parquet")
    common = common[~common.instance_id.isin(withheld) & (common.periods_skipped.fillna(0) == 0)]
    assert (
        lb.loc[("gold", "overall"), "n"]
        == common.instance_id.nunique()
        == lb.loc[("outside", "overall"), "n"]
    )
    # a smoke run of the same submission over one withheld and one kit instance: still nothing missing
    kept = sorted(set(pd.read_parquet(release / "instances.parquet").instance_id) - set(withheld))[0]
    few = tmp_path / "few"
    res = _score(release, tmp_path, config, "--out", str(few), "--instances", f"{withheld[0]},{kept}")
    assert res.returncode == 0, res.stderr[-3000:]
    g = json.loads((few / "manifest.json").read_text(encoding="utf-8"))["generation"]["outside"]
    assert (g["instances"], g["generated"], g["withheld"]) == (1, 1, 1)
