"""A metric family defined here, registered without touching flows/: scored, cached, on the leaderboard
and on the diagnostic page (docs/extending.md walks through the same class)."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from schemas.scoring import ItemScore, MetricResult, ScoreSettings
from tasks.score import registry
from tasks.score.metric import Inputs, MetricFamily, MetricSpec

SETTINGS = ScoreSettings(bootstrap=200)
CALLS: list[tuple[str, int]] = []  # (instance_id, len(generated)) of every toy judgment made


class FigureRecall(MetricFamily):
    """Share of the gold report's distinct figures that R' states too (exact digits)."""

    name = "figure_recall"
    metrics = (MetricSpec("figure_recall", evidence="recall"),)
    reads = frozenset({"gold"})
    summary = "share of Y's figures found verbatim in R'"

    def score(self, inputs: Inputs) -> list[MetricResult]:
        CALLS.append((inputs.instance_id, len(inputs.generated)))
        wanted = list(dict.fromkeys(FIGURE.findall(inputs.gold)))
        have = set(FIGURE.findall(inputs.generated))
        items = [
            ItemScore(index=i, kind="figure", text=f, score=float(f in have)) for i, f in enumerate(wanted)
        ]
        value = sum(it.score for it in items) / len(items) if items else None
        return [MetricResult(metric=self.name, value=value, judge="toy", population=len(items), items=items)]


FIGURE = re.compile(r"\d[\d,]*\.\d+|\d{1,3}(?:,\d{3})+")  # figures with a decimal point or thousands


@pytest.fixture
def toy_family():
    registry.register(FigureRecall)
    yield FigureRecall
    registry.unregister(FigureRecall.name)


def test_registry_rejects_clashing_metric_names():
    class Clash(MetricFamily):
        name = "clash"
        metrics = (MetricSpec("coverage"),)

    with pytest.raises(ValueError, match="clash"):
        registry.register(Clash)
    assert "clash" not in registry.families()


def test_derived_tables_follow_the_registry(toy_family):
    assert "figure_recall" in registry.selectable()
    assert registry.families_for(["figure_recall", "teds_s"]) == ["figure_recall", "tables"]
    assert registry.metric_order()[-1] == "figure_recall"
    assert registry.lower_is_better() == {"text_edit_distance"}
    assert registry.spec("rubric").range == (0.0, 100.0)
    # the cache-key digest covers this file (the family's module) and what it imports
    files = {p.name for p in registry._code_files(FigureRecall.__module__)}
    assert {"test_metric_registry.py", "metric.py"} <= files
    assert "rubric.py" not in files  # editing another family leaves this one's scores cached


def test_toy_family_is_scored_cached_ranked_and_diagnosed(
    toy_family, demo_release, prefect_harness, tmp_path, monkeypatch
):
    from flows.score import score_release
    from tasks.score.diagnostic import render_system_reports

    monkeypatch.setenv("FRAME_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "scores"
    systems = ["gold", "copy-sample"]
    CALLS.clear()
    score_release(str(demo_release), systems, SETTINGS, None, str(out), ["figure_recall"])
    instances = pd.read_parquet(demo_release / "instances.parquet")
    assert len(CALLS) == len(instances) * len(systems)

    scores = pd.read_parquet(out / "scores.parquet")
    assert set(scores["metric"]) == {"figure_recall"}
    assert len(scores) == len(instances) * len(systems)
    gold = scores[scores["system"] == "gold"]
    assert gold["value"].dropna().eq(1.0).all()  # Y has all of its own figures
    # copy-sample restates S's (older) figures: a real gap to the ceiling
    assert scores[scores["system"] == "copy-sample"]["value"].min() < 1.0
    evidence = pd.read_parquet(out / "evidence.parquet")
    assert set(evidence["kind"]) == {"figure"} and len(evidence) == scores["sampled"].sum()
    assert "figure_recall" in (out / "leaderboard.md").read_text(encoding="utf-8")
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["scoring_code"] == {"figure_recall": registry.code_digest("figure_recall")}

    # rerun: every task comes from the cache, the outputs are the same
    before = (out / "scores.parquet").read_bytes()
    score_release(str(demo_release), systems, SETTINGS, None, str(out), ["figure_recall"])
    assert len(CALLS) == len(instances) * len(systems)
    assert (out / "scores.parquet").read_bytes() == before

    # the diagnostic page of a system shows the family beside the others
    pages = render_system_reports(out, tmp_path / "report", seed=0, n_resamples=200)
    page = next(p for p in pages if p.name == "copy-sample.md").read_text(encoding="utf-8")
    assert "figure_recall" in page
