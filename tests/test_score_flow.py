"""`frame score` end to end on the demo release (offline judges): outputs, the expected gradient between
systems (issue acceptance), and a rerun that recomputes nothing."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tasks.score.registry import families, families_for
from tests.conftest import SCORED_MAX_ITEMS, SCORED_METRICS, SCORED_SYSTEMS, frame_env

FRAME = str(Path(sys.executable).with_name("frame"))
SYSTEMS = SCORED_SYSTEMS


def score(release: Path, home: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [FRAME, "score", "--release", str(release), "--systems", SYSTEMS, *extra],
        capture_output=True,
        text=True,
        env=frame_env(home),
        timeout=1800,
    )


@pytest.fixture(scope="module")
def scored(demo_scored):
    return demo_scored


def means(scores: pd.DataFrame) -> pd.DataFrame:
    return scores.groupby(["system", "metric"])["value"].mean().unstack()


def test_outputs_and_tables(scored):
    out = scored["out"]
    scores = pd.read_parquet(out / "scores.parquet")
    instances = pd.read_parquet(scored["release"] / "instances.parquet")
    metrics = [m for f in families_for(SCORED_METRICS.split(",")) for m in families()[f].metric_names()]
    assert len(scores) == len(instances) * 3 * len(metrics)  # instance x system x metric
    assert set(scores["metric"]) == set(metrics)
    assert scores["judge"].str.contains("offline|deterministic", regex=True).all()
    assert "all-MiniLM-L6-v2" in " ".join(scores["judge"])
    evidence = pd.read_parquet(out / "evidence.parquet")
    assert evidence["item_id"].is_unique
    per_report = evidence.groupby(["instance_id", "system", "metric"]).size()
    sampled = per_report.loc[(slice(None), slice(None), ["coverage", "faithfulness"])]
    assert sampled.max() == SCORED_MAX_ITEMS  # at most --max-items sampled units / claims per report
    assert evidence["score"].between(0, 1).all()
    joined = scores.set_index(["instance_id", "system", "metric"])["sampled"]
    assert (per_report == joined.loc[per_report.index]).all()
    # every graded coverage unit of an instance is the same for all systems (one seeded sample of Y)
    cov = evidence[evidence.metric == "coverage"]
    units = cov.groupby(["instance_id", "system"])["text"].apply(tuple).unstack()
    assert (units["gold"] == units["extractive"]).all() and (units["gold"] == units["copy-sample"]).all()

    board = (out / "leaderboard.md").read_text()
    for system in SYSTEMS.split(","):
        assert system in board
    assert "95%" in board and "bootstrap" in board.lower()
    csv = pd.read_csv(out / "leaderboard.csv")
    overall = csv[(csv.scope == "overall") & (csv.metric == "coverage")].set_index("system")
    assert (overall["ci_low"] <= overall["mean"]).all() and (overall["mean"] <= overall["ci_high"]).all()
    pngs = sorted(p.name for p in (out / "plots").glob("*.png"))
    assert {f"{m}_vs_buckets.png" for m in metrics} == set(pngs)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["systems"] == SYSTEMS.split(",") and manifest["rows"]["scores"] == len(scores)


def test_expected_gradient(scored):
    scores = pd.read_parquet(scored["out"] / "scores.parquet")
    m = means(scores)
    gold = scores[scores.system == "gold"]
    # gold vs itself: structure exactly 1, coverage ~1
    assert (gold[gold.metric == "structure"]["value"] == 1.0).all()
    assert m.loc["gold", "coverage"] >= 0.95
    # extractive (G's passages in S's skeleton) beats copy-sample (S unchanged) on coverage and faithfulness
    assert m.loc["extractive", "coverage"] > m.loc["copy-sample", "coverage"]
    assert m.loc["extractive", "faithfulness"] > m.loc["copy-sample", "faithfulness"]
    # copy-sample keeps the form (high structure) but is not faithful to the new G: it is the best
    # non-gold system on structure, its structure is well above its faithfulness, and on filings (fixed
    # Item headings) its structure is high in absolute terms. (Academic surveys title a subsection per
    # paper, and objectives come from content, so S and Y trees differ there by construction.)
    assert m.loc["copy-sample", "structure"] > m.loc["extractive", "structure"]
    assert m.loc["copy-sample", "structure"] > m.loc["copy-sample", "faithfulness"] + 0.1
    assert m.loc["copy-sample", "faithfulness"] <= m.loc["extractive", "faithfulness"] - 0.3
    filings = scores[scores.category.str.startswith("financial") & (scores.system == "copy-sample")]
    assert filings[filings.metric == "structure"]["value"].mean() >= 0.6


def test_rerun_recomputes_nothing(scored):
    out = scored["second"].stdout
    states = re.findall(r"Task run '(score|generate|prepare) · [^']*' - Finished in state (\w+)", out)
    assert states, out[-2000:]
    assert {s for _, s in states} == {"Cached"}, [s for s in states if s[1] != "Cached"][:5]
    first = re.findall(r"Task run 'score · [^']*' - Finished in state (\w+)", scored["first"].stdout)
    assert len(first) == len([s for s in states if s[0] == "score"])


def test_bad_input_one_line(tmp_path, demo_release):
    res = score(tmp_path, tmp_path / "ph")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "instances.parquet" in res.stderr
    res = subprocess.run(
        [FRAME, "score", "--release", str(demo_release), "--systems", "gold,nope"],
        capture_output=True,
        text=True,
        env=frame_env(tmp_path / "ph"),
    )
    assert res.returncode == 2 and "nope" in res.stderr and "Traceback" not in res.stderr


def test_shipped_annotations_match_this_judge(scored):
    """data/annotations/demo-0.1.0/coverage: its items are still the gold units `frame score` samples with
    the default 100 units per report (same extraction, same seeded sample), and `frame align` reads it."""
    from flows.score import instance_seed
    from tasks.score.coverage import OfflineCoverageJudge
    from tasks.score.judges import sample_items

    folder = Path(__file__).resolve().parents[1] / "data" / "annotations" / "demo-0.1.0" / "coverage"
    items = pd.read_csv(folder / "items.csv")
    human = pd.read_csv(folder / "human.csv")
    judge = pd.read_csv(folder / "judge.csv")
    assert len(items) == 40 and set(items.item_id) == set(human.item_id) == set(judge.item_id)
    assert set(human.score) <= {0, 25, 50, 75, 100}
    gold = pd.read_parquet(scored["release"] / "instances.parquet").set_index("instance_id")[
        "target_markdown"
    ]
    extractor = OfflineCoverageJudge(lambda texts: None, "none")  # extraction needs no embedding
    for iid, group in items.groupby("instance_id"):
        units = {
            u.unit_id: u for u in sample_items(extractor.extract_units(gold[iid]), 100, instance_seed(0, iid))
        }
        for row in group.itertuples():
            index = int(row.item_id.rsplit("|", 1)[1])
            assert units[index].content == row.text, row.item_id
    res = subprocess.run(
        [FRAME, "align", str(folder / "human.csv"), str(folder / "judge.csv"), "--json"],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0 and json.loads(res.stdout)["n"] == 40
