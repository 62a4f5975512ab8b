"""What a scoring run writes (tasks/score/outputs.py), from a small run the test builds itself: the
leaderboard titled with the release and ordered by score, the baselines found from the systems'
identities, the time of scoring in the manifest, and the report built on top of it."""

from __future__ import annotations

import base64
import datetime as dt
import json
from pathlib import Path

import numpy as np
import pandas as pd
from bs4 import BeautifulSoup

from schemas.scoring import MetricResult, ScoreSettings
from tasks.score.diagnostic import render_system_reports
from tasks.score.outputs import ScoreRun, baselines, values_text, write_outputs

CATS = ("financial_annual", "academic_simple")
# system -> quality offset: ranked by score the order is zeta, my-copy, alpha (alphabetically the reverse)
QUALITY = {"gold": 1.0, "zeta": 0.7, "my-copy": 0.5, "alpha": 0.3}
IDENTITIES = {
    "gold": {"kind": "builtin", "builtin": "gold"},
    "zeta": {"kind": "openai", "model": "m-zeta"},
    "my-copy": {"kind": "builtin", "builtin": "copy-sample"},  # a baseline under a name of its own
    "alpha": {"kind": "command", "argv": ["alpha"]},
}


def _release(root: Path) -> tuple[Path, pd.DataFrame]:
    rel = root / "releases" / "toy" / "0.1.0"
    rel.mkdir(parents=True)
    (rel / "manifest.json").write_text(json.dumps({"name": "toy", "version": "0.1.0"}), encoding="utf-8")
    pd.DataFrame(
        {"grounding_set_id": [f"g{i}" for i in range(8)], "tokens": [1000 * (i + 1) for i in range(8)]}
    ).to_parquet(rel / "grounding_documents.parquet", index=False)
    instances = pd.DataFrame(
        {
            "instance_id": [f"inst{i}" for i in range(8)],
            "category": [CATS[i % 2] for i in range(8)],
            "target_markdown": ["# Report\n\n" + "Words here. " * (20 * (i + 1)) for i in range(8)],
            "grounding_set_id": [f"g{i}" for i in range(8)],
        }
    )
    return rel, instances


def _run(root: Path, bootstrap: int = 100) -> ScoreRun:
    rel, instances = _release(root)
    rng = np.random.default_rng(0)
    results = []
    for inst in instances.to_dict("records"):
        for system, q in QUALITY.items():
            for metric in ("structure", "coverage", "faithfulness"):
                v = q if system == "gold" else float(np.clip(q + rng.normal(0, 0.05), 0, 1))
                results.append((inst, system, MetricResult(metric=metric, value=v, judge="offline:test")))
    systems = ["alpha", "my-copy", "gold", "zeta"]  # the order asked for: neither by name nor by score
    run = ScoreRun(
        release=rel,
        instances=instances,
        results=results,
        systems=systems,
        selection=["structure", "coverage", "faithfulness"],
        settings=ScoreSettings(bootstrap=bootstrap),
        generations_sha256={},
        scoring_code={},
        llm={},
    )
    run.extra["system_identities"] = IDENTITIES
    return run


def test_outputs_title_order_baselines_and_time(tmp_path: Path) -> None:
    out = tmp_path / "scores" / "toy" / "0.1.0"
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    write_outputs(out, _run(tmp_path / "data"))
    after = dt.datetime.now(dt.UTC)

    board = (out / "leaderboard.md").read_text(encoding="utf-8")
    assert board.splitlines()[0] == "# Leaderboard: toy/0.1.0"
    scored = "Scored: 4 system(s) (3 ranked; ceiling: gold; baselines: my-copy)"
    assert board.splitlines()[2].startswith(scored)
    header = next(ln for ln in board.splitlines() if ln.startswith("| Metric"))
    cols = [c.strip() for c in header.strip("|").split("|")][2:]
    # gold (the ceiling) first, then by FRAME score: not in the order asked for, not by name
    assert cols == ["gold _(ceiling)_", "zeta", "my-copy _(baseline)_", "alpha"]

    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["release"] == "toy/0.1.0"
    scored = dt.datetime.fromisoformat(manifest["scored_at"].replace("Z", "+00:00"))
    assert before <= scored <= after
    assert manifest["plots"] == [f"{m}_vs_buckets.png" for m in ("structure", "coverage", "faithfulness")]

    # the report on top of it: the time of scoring, the plots embedded
    render_system_reports(out)
    index = (out / "report" / "index.md").read_text(encoding="utf-8")
    assert f"- Scores computed: {manifest['scored_at']}\n" in index
    soup = BeautifulSoup((out / "report" / "index.html").read_text(encoding="utf-8"), "lxml")
    imgs = soup.find_all("img")
    assert [i.find_parent("a")["href"] for i in imgs] == [f"../plots/{n}" for n in manifest["plots"]]
    assert (
        base64.b64decode(imgs[0]["src"].split(",", 1)[1])
        == (out / "plots" / manifest["plots"][0]).read_bytes()
    )


def test_plots_are_redrawn_when_their_ci_settings_change(tmp_path: Path) -> None:
    out = tmp_path / "scores"
    png = out / "plots" / "coverage_vs_buckets.png"
    write_outputs(out, _run(tmp_path / "a", bootstrap=100))
    assert png.read_bytes().startswith(b"\x89PNG")
    png.write_bytes(b"marker")  # a reused plot keeps it, a redrawn one does not
    write_outputs(out, _run(tmp_path / "b", bootstrap=100))  # same scores, same settings: reused
    assert png.read_bytes() == b"marker"
    write_outputs(out, _run(tmp_path / "c", bootstrap=200))  # other resamples, other bands: redrawn
    assert png.read_bytes().startswith(b"\x89PNG")


def test_baselines_from_identities() -> None:
    assert baselines(IDENTITIES, list(QUALITY)) == ["my-copy"]
    assert baselines(None, ["copy-sample"]) is None  # nothing recorded: the leaderboard's defaults
    assert baselines({"x": {"kind": "builtin", "builtin": "extractive"}, "y": "odd"}, ["x", "y", "z"]) == [
        "x"
    ]


def test_values_text_rounds_for_the_log() -> None:
    results = [
        MetricResult(metric="coverage", value=0.061946190000000005, judge="j"),
        MetricResult.undefined("faithfulness", "j", "no claim"),
        MetricResult(metric="rubric", value=73.5, judge="j"),
        MetricResult(metric="structure", value=1.0, judge="j"),
    ]
    assert values_text(results) == "coverage=0.06195, faithfulness=n/a, rubric=73.5, structure=1"
