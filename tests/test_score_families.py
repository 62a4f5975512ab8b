"""Every metric family through `frame score` on the demo release (the session's `demo_scored` run):
gold, copy-sample and extractive scored by all families; gold vs itself gets TEDS 1, text edit distance 0
and passes the rubric's G0 gates; one scaffold per instance reused by every system; pairwise votes in both
display orders and a Bradley-Terry table; `frame report` renders a page per system."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from schemas.scaffold import Scaffold
from tasks.score.registry import families, families_for
from tasks.score.scaffold import SCAFFOLD_METRICS
from tests.conftest import SCORED_METRICS, SCORED_SYSTEMS, frame_env

FRAME = str(Path(sys.executable).with_name("frame"))
SYSTEMS = SCORED_SYSTEMS.split(",")


@pytest.fixture(scope="module")
def scored(demo_scored):
    out = demo_scored["out"]
    return {
        **demo_scored,
        "scores": pd.read_parquet(out / "scores.parquet"),
        "evidence": pd.read_parquet(out / "evidence.parquet"),
        "instances": pd.read_parquet(demo_scored["release"] / "instances.parquet"),
    }


def test_every_system_scored_by_every_family(scored):
    scores, n = scored["scores"], len(scored["instances"])
    expected = {m for f in families_for(SCORED_METRICS.split(",")) for m in families()[f].metric_names()}
    assert {"scaffold", "rubric", "holistic", "tables"} <= set(families_for(SCORED_METRICS.split(",")))
    counts = scores.groupby(["system", "metric"]).size().unstack()
    assert set(counts.index) == set(SYSTEMS) and set(counts.columns) == expected
    assert (counts == n).all().all()  # one row per instance for every (system, metric)
    # the rubric and holistic values live on their own scales
    rub = scores[scores.metric == "rubric"]["value"].dropna()
    assert rub.between(0, 100).all() and rub.max() > 1
    hol = scores[scores.metric.str.startswith("holistic_")]["value"]
    assert hol.between(1, 10).all()


def test_gold_vs_itself(scored):
    scores = scored["scores"]
    gold = scores[scores.system == "gold"].pivot(index="instance_id", columns="metric", values="value")
    has_tables = gold["teds"].notna()
    assert has_tables.any()
    assert (gold.loc[has_tables, "teds"] == 1.0).all() and (gold.loc[has_tables, "teds_s"] == 1.0).all()
    assert (gold["text_edit_distance"] == 0.0).all()
    assert (gold["rubric_g0"] == 1.0).all()  # every gold report passes the deliverability gates
    assert (gold["rubric"] > 0).all()
    # a report covers its own scaffold: every fact / main fact / question is inferable from itself
    for m in ("fact_coverage", "main_coverage", "question_coverage", "fact_faithfulness"):
        assert gold[m].min() >= 0.95, (m, gold[m].min())


def test_scaffold_extracted_once_and_reused(scored):
    out, instances, ev = scored["out"], scored["instances"], scored["evidence"]
    table = pd.read_parquet(out / "scaffolds.parquet")
    assert sorted(table["instance_id"]) == sorted(instances["instance_id"])
    for row in table.itertuples():
        sc = Scaffold.model_validate(json.loads(row.scaffold_json))
        assert len(sc.facts) == row.facts > 0
        tiers = {f.tier for f in sc.facts}
        assert {"main", "supporting"} <= tiers, (row.instance_id, tiers)
    # every system of an instance is judged on the same scaffold facts
    facts = ev[ev.metric == "fact_coverage"].groupby(["instance_id", "system"])["text"].apply(tuple).unstack()
    assert (facts["gold"] == facts["copy-sample"]).all() and (facts["gold"] == facts["extractive"]).all()
    # FPS reads beside plain coverage: main and supporting coverage are both reported
    m = scored["scores"].groupby(["system", "metric"])["value"].mean().unstack()
    assert set(SCAFFOLD_METRICS) <= set(m.columns)
    assert m.loc["extractive", "fact_coverage"] > m.loc["copy-sample", "fact_coverage"]
    # Fact Focus reaches the leaderboard like every scaffold metric; the previous period's report states
    # other figures than Y's key facts, so fewer of its sentences stay on them than Y's own
    board = pd.read_csv(out / "leaderboard.csv")
    overall = board[board.scope == "overall"].set_index(["system", "metric"])["mean"]
    for m_name in SCAFFOLD_METRICS:
        assert {(s, m_name) for s in SYSTEMS} <= set(overall.index), m_name
    assert overall[("gold", "fact_focus")] > overall[("copy-sample", "fact_focus")]


def test_rubric_decisions_keep_evidence(scored):
    ev = scored["evidence"]
    rub = ev[ev.metric == "rubric"]
    assert len(rub) > 0
    assert rub["kind"].str.match(r"^G[012]:g[012]_").all()
    failed = rub[rub.score < 1]
    assert len(failed) > 0
    assert (failed["evidence"].str.len() + failed["evidence_ref"].str.len() > 0).mean() > 0.9
    assert failed["rationale"].str.match(r"^(fail|partial)").all()


def test_pairwise_votes_and_bradley_terry(scored):
    out, n = scored["out"], len(scored["instances"])
    votes = pd.read_parquet(out / "pairwise.parquet")
    contenders = [s for s in SYSTEMS if s != "gold"]
    pairs = len(contenders) * (len(contenders) - 1) // 2
    assert len(votes) == n * pairs * 2  # every pair, both display orders
    assert set(votes["order"]) == {"ab", "ba"} and set(votes["vote"]) <= {"A", "B", "tie"}
    assert "gold" not in set(votes["system_a"]) | set(votes["system_b"])
    bt = pd.read_csv(out / "bradley_terry.csv")
    assert sorted(bt["system"]) == sorted(contenders)
    assert (bt["ci_low"] <= bt["score"]).all() and (bt["score"] <= bt["ci_high"]).all()
    assert bt["games"].sum() == 2 * len(votes)  # each vote is one game for each side
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["pairwise"]["votes"] == len(votes) and manifest["scaffolds"] == n


def test_frame_report_renders_each_system(scored, tmp_path):
    res = subprocess.run(
        [FRAME, "report", "--scores", str(scored["out"]), "--out", str(tmp_path / "report")],
        capture_output=True,
        text=True,
        env=frame_env(tmp_path / "ph"),
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    for system in SYSTEMS:
        md = (tmp_path / "report" / f"{system}.md").read_text()
        html = (tmp_path / "report" / f"{system}.html").read_text()
        assert "<table>" in html
        for family in ("frame", "fidelity", "scaffold", "rubric", "holistic"):
            assert family in md
        assert "Bradley" in md or system == "gold"
    bad = subprocess.run(
        [FRAME, "report", "--scores", str(tmp_path / "nowhere")],
        capture_output=True,
        text=True,
        env=frame_env(tmp_path / "ph"),
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "scores.parquet" in bad.stderr
