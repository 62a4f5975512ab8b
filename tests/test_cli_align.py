"""`frame align` prints the alignment JSON; numbers checked against scikit-learn / scipy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sklearn_metrics = pytest.importorskip("sklearn.metrics")
stats = pytest.importorskip("scipy.stats")

FRAME = str(Path(sys.executable).with_name("frame"))


def test_frame_align_json_matches_independent_computation(tmp_path):
    rng = np.random.default_rng(7)
    human = rng.choice([0, 25, 50, 75, 100], size=40)
    judge = np.clip(human + rng.normal(0, 18, size=40), 0, 100).round(1)
    (tmp_path / "h.csv").write_text("item_id,score\n" + "".join(f"i{k},{v}\n" for k, v in enumerate(human)))
    (tmp_path / "j.csv").write_text("item_id,score\n" + "".join(f"i{k},{v}\n" for k, v in enumerate(judge)))
    res = subprocess.run(
        [FRAME, "align", str(tmp_path / "h.csv"), str(tmp_path / "j.csv"), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["n"] == 40
    binned = (np.floor(judge / 25 + 0.5) * 25).astype(int)
    qwk = sklearn_metrics.cohen_kappa_score(human, binned, weights="quadratic", labels=[0, 25, 50, 75, 100])
    assert out["qwk"] == pytest.approx(qwk, abs=1e-6)
    assert out["pa@25"] == pytest.approx(np.mean(np.abs(human - judge) <= 25), abs=1e-6)

    groups = tmp_path / "rank.csv"
    rows = ["group_id,system,human_rank,score"]
    for g in range(5):
        scores = rng.normal(size=4)
        ranks = (-scores).argsort().argsort() + 1
        rows += [f"g{g},s{k},{ranks[k]},{scores[k] + rng.normal(0, 0.5):.4f}" for k in range(4)]
    groups.write_text("\n".join(rows) + "\n")
    res = subprocess.run(
        [FRAME, "align", "--rankings", str(groups), "--json"], capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0, res.stderr
    ranked = json.loads(res.stdout)
    assert ranked["groups"] == 5 and -1.0 <= ranked["spearman_r"] <= 1.0


def test_frame_align_bad_input_is_one_line(tmp_path):
    bad = tmp_path / "h.csv"
    bad.write_text("item,score\na,1\n")
    res = subprocess.run(
        [FRAME, "align", str(bad), str(bad), "--json"], capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 2
    assert len(res.stderr.strip().splitlines()) == 1 and "h.csv" in res.stderr
