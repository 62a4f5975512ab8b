"""Blind annotation sheets for judge-human alignment (tasks/score/annotate.py, `frame annotate`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tasks.score.annotate import GUIDELINES, annotation_sheets

FRAME = str(Path(sys.executable).with_name("frame"))


def evidence() -> pd.DataFrame:
    rows = []
    for system, k in (("gold", 30), ("copy-sample", 30), ("extractive", 5)):
        for i in range(k):
            rows.append(
                {
                    "item_id": f"inst{i % 3}|{system}|coverage|{i}",
                    "instance_id": f"inst{i % 3}",
                    "system": system,
                    "metric": "coverage",
                    "index": i,
                    "kind": "statistic",
                    "text": f"unit {i} of {system}",
                    "source": f"sentence {i}",
                    "score": (i % 5) / 4,
                }
            )
    rows.append({**rows[0], "item_id": "x|gold|faithfulness|0", "metric": "faithfulness"})
    return pd.DataFrame(rows)


def test_sheets_are_blind_stratified_and_seeded():
    items, judge = annotation_sheets(evidence(), "coverage", n=20, seed=3)
    assert len(items) == 20 and list(judge.columns) == ["item_id", "score"]
    assert "score" not in items.columns and set(items["item_id"]) == set(judge["item_id"])
    counts = items["system"].value_counts().to_dict()
    assert (
        counts["extractive"] == 5 and counts["gold"] + counts["copy-sample"] == 15
    )  # round-robin, small pool
    assert abs(counts["gold"] - counts["copy-sample"]) <= 1
    ev = evidence().set_index("item_id")
    assert (judge.set_index("item_id")["score"] == ev.loc[judge["item_id"], "score"] * 100).all()
    again, _ = annotation_sheets(evidence(), "coverage", n=20, seed=3)
    other, _ = annotation_sheets(evidence(), "coverage", n=20, seed=4)
    assert again.equals(items) and not other.equals(items)
    only, _ = annotation_sheets(evidence(), "coverage", n=10, seed=3, systems=["copy-sample", "extractive"])
    assert set(only["system"]) == {"copy-sample", "extractive"}
    with pytest.raises(ValueError, match="nope"):
        annotation_sheets(evidence(), "coverage", systems=["nope"])
    with pytest.raises(ValueError, match="metric"):
        annotation_sheets(evidence(), "structure")


def test_cli_writes_sheets_then_align_reads_them(tmp_path):
    scores = tmp_path / "scores"
    scores.mkdir()
    evidence().to_parquet(scores / "evidence.parquet")
    out = tmp_path / "sheet"
    res = subprocess.run(
        [
            FRAME,
            "annotate",
            "--scores",
            str(scores),
            "--out",
            str(out),
            "--n",
            "12",
            "--systems",
            "copy-sample",
        ],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    items = pd.read_csv(out / "items.csv")
    assert len(items) == 12 and set(items["system"]) == {"copy-sample"}
    assert GUIDELINES["coverage"] in (out / "GUIDELINES.md").read_text()
    # a human file on the same items: frame align joins them on item_id
    judge = pd.read_csv(out / "judge.csv")
    judge.assign(score=100 - judge["score"]).to_csv(tmp_path / "human.csv", index=False)
    res = subprocess.run(
        [FRAME, "align", str(tmp_path / "human.csv"), str(out / "judge.csv"), "--json"],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0 and '"n": 12' in res.stdout
    bad = subprocess.run(
        [FRAME, "annotate", "--scores", str(tmp_path), "--out", str(out)], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "evidence.parquet" in bad.stderr and bad.stderr.count("\n") == 1
