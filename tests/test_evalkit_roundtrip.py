"""The blind evaluation kit round-trips: export it from the demo release, answer it with the copy-sample
reports as an outside submission, score the submission -> the same scores as the builtin copy-sample on
every instance of the kit (the scores of `demo_scored`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

from tests.conftest import frame_env

FRAME = str(Path(sys.executable).with_name("frame"))
METRICS = "structure,coverage,faithfulness"


def test_kit_answered_with_copy_sample_scores_like_copy_sample(demo_scored, tmp_path):
    release = demo_scored["release"]
    kit = tmp_path / "kit"
    res = subprocess.run(
        [FRAME, "export-eval", "--release", str(release), "--out", str(kit)],
        capture_output=True,
        text=True,
        env=frame_env(demo_scored["home"]),
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    rows = [json.loads(line) for line in (kit / "instances.jsonl").read_text(encoding="utf-8").splitlines()]
    assert rows and all("target_markdown" not in r for r in rows)
    # a participant answers every instance of the kit with its sample report S, as the kit gives it
    answers = tmp_path / "answers"
    answers.mkdir()
    for r in rows:
        sample = (kit / r["sample_file"]).read_text(encoding="utf-8")
        (answers / r["report_file"]).parent.mkdir(parents=True, exist_ok=True)
        (answers / r["report_file"]).write_text(sample, encoding="utf-8")
    config = tmp_path / "eval.toml"
    config.write_text(
        f'[systems.outside]\nkind = "submission"\npath = "{(answers / "reports").as_posix()}"\n',
        encoding="utf-8",
    )
    out = tmp_path / "scores"
    args = [FRAME, "score", "--release", str(release), "--config", str(config), "--metrics", METRICS]
    strict = subprocess.run(
        [*args, "--out", str(out)],
        capture_output=True,
        text=True,
        env=frame_env(demo_scored["home"]),
        timeout=900,
    )
    withheld = len(pd.read_parquet(release / "instances.parquet")) - len(rows)
    # the kit leaves out chained instances: the submission lacks them, and needs no --allow-missing for that
    assert withheld and strict.returncode == 0, strict.stderr[-3000:]
    scored = subprocess.run(
        [*args, "--out", str(out), "--allow-missing"],
        capture_output=True,
        text=True,
        env=frame_env(demo_scored["home"]),
        timeout=900,
    )
    assert scored.returncode == 0, scored.stderr[-3000:]
    mine = pd.read_parquet(out / "scores.parquet").set_index(["instance_id", "metric"])["value"]
    theirs = pd.read_parquet(demo_scored["out"] / "scores.parquet")
    theirs = theirs[(theirs.system == "copy-sample") & theirs.metric.isin(METRICS.split(","))]
    theirs = theirs.set_index(["instance_id", "metric"])["value"]
    assert set(mine.index.get_level_values(0)) == {r["instance_id"] for r in rows}
    pd.testing.assert_series_equal(mine.sort_index(), theirs.loc[mine.index].sort_index(), check_names=False)
