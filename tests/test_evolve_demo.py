"""Offline `frame split` + `frame evolve` on the demo release with the `extractive` and `copy-sample` systems:
the offline optimizer and critic, the offline rubric; one round writes every artifact and a K*."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from schemas.evolve import Skill
from tasks.evolve.skill import parse_skill
from tests.conftest import frame_env

FRAME = str(Path(sys.executable).with_name("frame"))
CONFIG = """
[systems.extractive]
kind = "builtin"

[systems.copy-sample]
kind = "builtin"

[evolve]
rounds = 1
support = 1
"""


def test_offline_evolve_on_the_demo_writes_every_artifact(demo_release, tmp_path):
    env = frame_env(tmp_path / "ph")
    split = [FRAME, "split", "--release", str(demo_release), "--discovery", "2", "--validation", "2"]
    res = subprocess.run(split, capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "locked:" in res.stdout
    cfg = tmp_path / "eval.toml"
    cfg.write_text(CONFIG, encoding="utf-8")
    args = [FRAME, "evolve", "--release", str(demo_release), "--config", str(cfg)]
    res = subprocess.run(
        [*args, "--systems", "extractive,copy-sample", "--run", "offline"],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "round 1:" in res.stdout
    run = demo_release.parents[2] / "evolve" / "demo" / "0.1.0" / "offline"
    files = {p.name for p in (run / "round-1").iterdir()}
    assert files == {"candidate.md", "critique.md", "failures.json", "validation.json", "decision.json"}
    record = json.loads((run / "round-1" / "decision.json").read_text())
    assert record["failures"], "the demo's extractive reports share no failure?"
    assert all(set(f) >= {"title", "criterion", "fail_rate", "evidence"} for f in record["failures"])
    assert not any("g0_" in json.dumps(f) or "g2_" in json.dumps(f) for f in record["failures"])
    summary = json.loads((run / "summary.json").read_text())
    assert summary["optimizer"].startswith("offline") and len(summary["rounds"]) == 1
    skill = parse_skill((run / "skill.md").read_text(encoding="utf-8"))  # K*: parseable, possibly empty
    assert skill.sha256 == summary["best_skill_sha256"]
    if record["decision"]["accepted"]:  # the candidate less the rules its ablation dropped
        assert skill.rules == Skill.model_validate({"rules": record["accepted_rules"]}).rules
    # the locked split was not scored while tuning
    assert {p.name.rsplit("-", 1)[-1] for p in (run / "views" / "demo").iterdir()} == {
        "discovery",
        "validation",
    }
    # a bad skill file: one line naming it
    bad = tmp_path / "k.md"
    bad.write_text("## Write\n- be good\n", encoding="utf-8")
    res = subprocess.run([*args, "--systems", "extractive", "--evaluate", str(bad)], capture_output=True,
                         text=True, env=env, timeout=300)  # fmt: skip
    assert res.returncode == 2 and res.stderr.strip().count("\n") == 0 and "k.md" in res.stderr, res.stderr
