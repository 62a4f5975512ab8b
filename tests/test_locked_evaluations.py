"""Locked evaluations are recorded and not repeated by accident (issue 34 point 8; paper 003 section 5: one
locked evaluation). Every `frame evolve --evaluate` appends a record beside the release's splits; the same
skill on the same locked split for the same system is refused (one line: when, and `--again`) unless
`--again` is passed; drawing new splits keeps the record."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from schemas.evolve import Skill
from tasks.errors import FrameInputError
from tasks.evolve.locked import (
    locked_entry,
    locked_records_path,
    read_locked_records,
    record_locked,
    refuse_repeat,
)
from tasks.evolve.skill import TEMPLATES
from tasks.evolve.splits import assign_splits, splits_path, write_splits
from tests.conftest import frame_env
from tests.test_evolve_flow import write_release

FRAME = str(Path(sys.executable).with_name("frame"))
CONFIG = """
[systems.extractive]
kind = "builtin"

[evolve]
bootstrap = 100
"""


def tiny_instances() -> pd.DataFrame:
    doms = [f"T{k}-10-Q" for k in range(6)]
    rows = [{"instance_id": f"financial_quarterly/{d}/t1->t2", "domain": d, "category": "financial_quarterly"}
            for d in doms]  # fmt: skip
    return pd.DataFrame(rows)


def test_a_repeat_is_refused_unless_again_and_the_record_survives_new_splits(tmp_path):
    rel = tmp_path / "releases" / "tiny" / "1.0.0"
    splits = assign_splits(tiny_instances(), rel, 2, 2, seed=0)
    write_splits(rel, splits)
    skill = Skill(rules=[TEMPLATES["complete-ending"]])
    entry = locked_entry(splits, skill.sha256, {"a": {"model": "m1"}}, ["rubric"], tmp_path / "out")
    refuse_repeat(rel, entry, again=False)  # nothing recorded yet
    record_locked(rel, entry, again=False)
    with pytest.raises(
        FrameInputError, match=r"already evaluated on this locked split for a at 20\d\d-.*--again"
    ):
        refuse_repeat(rel, entry, again=False)
    refuse_repeat(rel, entry, again=True)
    record_locked(rel, entry, again=True)
    # another skill, or another model under the same name, is another evaluation
    other = locked_entry(splits, Skill().sha256, {"a": {"model": "m1"}}, ["rubric"], tmp_path / "o2")
    refuse_repeat(rel, other, again=False)
    other = locked_entry(splits, skill.sha256, {"a": {"model": "m2"}}, ["rubric"], tmp_path / "o3")
    refuse_repeat(rel, other, again=False)
    records = read_locked_records(rel)
    assert [r["again"] for r in records] == [False, True]
    assert records[0]["locked_instances"] == 2 and records[0]["metrics"] == ["rubric"]
    assert records[0]["result"] == str(tmp_path / "out") and records[0]["skill_sha256"] == skill.sha256
    # new splits (another seed) rewrite splits.json, never the record
    before = locked_records_path(rel).read_bytes()
    write_splits(rel, assign_splits(tiny_instances(), rel, 2, 2, seed=1))
    assert locked_records_path(rel).read_bytes() == before
    assert locked_records_path(rel).parent == splits_path(rel).parent
    # a torn record is named, not ignored
    locked_records_path(rel).write_text(before.decode() + "{not json\n", encoding="utf-8")
    with pytest.raises(FrameInputError, match=r"locked_evaluations\.jsonl:3"):
        read_locked_records(rel)


def run(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=900)


def test_frame_evolve_evaluate_records_refuses_a_second_time_and_again_records_it(tmp_path):
    env = frame_env(tmp_path / "ph")
    rel = write_release(tmp_path, set())
    split = [FRAME, "split", "--release", str(rel), "--discovery", "2", "--validation", "1"]
    assert run(split, env).returncode == 0
    cfg = tmp_path / "eval.toml"
    cfg.write_text(CONFIG, encoding="utf-8")
    skill = tmp_path / "k.md"
    skill.write_text(Skill(rules=[TEMPLATES["complete-ending"]]).render(), encoding="utf-8")
    args = [FRAME, "evolve", "--release", str(rel), "--config", str(cfg), "--systems", "extractive"]
    args += ["--run", "r", "--evaluate", str(skill)]
    first = run(args, env)
    assert first.returncode == 0, first.stderr[-3000:]
    records = read_locked_records(rel)
    assert (
        len(records) == 1 and records[0]["again"] is False and list(records[0]["systems"]) == ["extractive"]
    )
    assert (Path(records[0]["result"]) / "report.md").is_file()

    second = run(args, env)
    assert second.returncode == 2 and second.stderr.strip().count("\n") == 0, second.stderr
    assert records[0]["at"] in second.stderr and "--again" in second.stderr
    assert len(read_locked_records(rel)) == 1

    assert run(split[:-4] + ["--discovery", "2", "--validation", "1", "--seed", "1"], env).returncode == 0
    assert read_locked_records(rel) == records  # new splits keep the record
    assert run(split, env).returncode == 0  # back to seed 0: the same locked split, still refused
    assert run(args, env).returncode == 2

    third = run([*args, "--again"], env)
    assert third.returncode == 0, third.stderr[-3000:]
    records = read_locked_records(rel)
    assert [r["again"] for r in records] == [False, True]
    assert records[0]["locked_sha256"] == records[1]["locked_sha256"]
    assert records[1]["result"] != records[0]["result"]  # the first result is not overwritten
    assert (Path(records[0]["result"]) / "report.md").is_file() and (
        Path(records[1]["result"]) / "report.md"
    ).is_file()
    assert json.loads(splits_path(rel).read_text())["seed"] == 0
