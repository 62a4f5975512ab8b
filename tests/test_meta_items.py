"""`tasks.meta.items` (paper 003 Fig. 8) on evidence rows of the real rubric family: reports written here,
decided by the offline rubric checks, written as `frame score` writes evidence.parquet."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from schemas.scoring import EVIDENCE_SCHEMA
from tasks.atomic import atomic_write_bytes
from tasks.errors import FrameInputError
from tasks.meta.items import (
    cooccurrence,
    item_table,
    items_json,
    items_plot,
    load_decisions,
    rubric_decisions,
    system_table,
)
from tasks.score.metric import parquet_bytes
from tasks.score.outputs import score_rows
from tasks.score.rubric import OfflineRubricJudge, RubricContext, rubric_items, score_rubric

SAMPLE = """# Acme Corp. 10-Q report for the period ended March 31, 2025

## Financial Highlights

(In millions)

|  | March 31, 2025 | March 31, 2024 |
|---|---|---|
| Widget revenue | 1,100 | 1,000 |

## Management's Discussion and Analysis

Widget revenue was $1.1 billion in the quarter, driven by demand from Europe and Asia.

## Risk Factors

Acme's results depend on Widget demand in Europe, on supplier pricing and on foreign exchange.
"""

GOOD = """# Acme Corp. 10-Q report for the period ended June 30, 2025

## Financial Highlights

(In millions)

|  | June 30, 2025 | June 30, 2024 |
|---|---|---|
| Widget revenue | 1,200 | 1,050 |

## Management's Discussion and Analysis

Widget revenue was $1.2 billion in the quarter, up from the prior year on demand in Europe and Asia.
Gadget sales in North America added $300 million and services grew in every region.

## Risk Factors

Acme's results depend on Widget demand in Europe, on supplier pricing from Taiwan and on the US dollar.
"""

TITLE = "# Acme Corp. 10-Q report for the period ended June 30, 2025"
CHATTY = "Sure! Here is the report you asked for.\n\n" + GOOD.replace(TITLE, "# Quarterly update")
CUT = GOOD + "\nRevenue in the next quarter is expected to grow by"
PLACEHOLDER = GOOD.replace("## Risk Factors", "TODO: add the segment discussion.\n\n## Risk Factors")

CTX = RubricContext("financial_quarterly", "ACME-10-Q", SAMPLE)
INSTANCES = [f"financial_quarterly/ACME-10-Q/Q{k}" for k in range(1, 5)]
# system -> its report per instance: `good` leaves a placeholder in the last one
REPORTS = {
    "good": [GOOD, GOOD, GOOD, PLACEHOLDER],
    "chatty": [CHATTY] * 4,
    "cut": [CUT] * 4,
}


@pytest.fixture(scope="module")
def scored():
    """(evidence rows as `frame score` writes them, {(instance, system): failed item ids, partial ids})."""
    results, truth = [], {}
    for system, reports in REPORTS.items():
        for iid, md in zip(INSTANCES, reports, strict=True):
            res = score_rubric(md, CTX, OfflineRubricJudge())
            inst = {"instance_id": iid, "category": CTX.category}
            results += [(inst, system, r) for r in res]
            truth[(iid, system)] = (set(res[0].detail["failed"]), set(res[0].detail["partial"]))
    _, evidence = score_rows(results)
    return pd.DataFrame(evidence), truth


@pytest.fixture(scope="module")
def decisions(scored):
    return rubric_decisions(scored[0])


def test_decisions_are_the_rubric_evidence_rows(scored, decisions):
    evidence, truth = scored
    rubric = evidence[evidence["metric"] == "rubric"]
    assert len(decisions) == len(rubric) and list(decisions.columns) == [
        "instance_id",
        "system",
        "layer",
        "item",
        "title",
        "credit",
    ]
    titles = {it.id: it.title for it in rubric_items()}
    assert all(titles[i] == t for i, t in zip(decisions["item"], decisions["title"], strict=True))
    assert set(decisions["layer"]) == {"G0", "G1", "G2"}
    for (iid, system), (failed, _) in truth.items():
        d = decisions[(decisions["instance_id"] == iid) & (decisions["system"] == system)]
        assert set(d.loc[d["credit"] == 0.0, "item"]) == failed
    # the planted failures are there
    assert truth[(INSTANCES[0], "cut")][0] == {"g0_not_truncated"}
    assert {"g1_title_entity", "g1_report_register"} <= truth[(INSTANCES[0], "chatty")][0]
    assert truth[(INSTANCES[3], "good")][0] == {"g0_no_placeholder"}
    assert truth[(INSTANCES[0], "good")] == (set(), set())


def test_pass_rate_and_discrimination(decisions):
    items = item_table(decisions).set_index("item")
    rank = [it.id for it in rubric_items()]
    assert list(items.index) == sorted(items.index, key=rank.index)  # rubric order
    trunc = items.loc["g0_not_truncated"]
    assert trunc["reports"] == 12 and trunc["pass_rate"] == pytest.approx(8 / 12)
    assert trunc["failed"] == pytest.approx(4 / 12) and trunc["systems"] == 3
    # per system 1, 1, 0: population SD
    assert trunc["discrimination"] == pytest.approx(np.std([1.0, 1.0, 0.0]))
    place = items.loc["g0_no_placeholder"]
    assert place["pass_rate"] == pytest.approx(11 / 12)
    assert place["discrimination"] == pytest.approx(np.std([0.75, 1.0, 1.0]))
    assert items.loc["g0_nonempty", "pass_rate"] == 1.0 and items.loc["g0_nonempty", "discrimination"] == 0.0
    shares = items[["passed", "partial", "failed"]].sum(axis=1)
    assert np.allclose(shares, 1.0)
    by_system = system_table(decisions)
    got = by_system.set_index(["item", "system"])["pass_rate"]
    assert got[("g0_not_truncated", "cut")] == 0.0 and got[("g0_not_truncated", "good")] == 1.0
    assert got[("g0_no_placeholder", "good")] == 0.75
    assert list(dict.fromkeys(by_system["system"])) == ["chatty", "cut", "good"]


def test_cooccurrence_counts_failures_on_the_same_report(scored, decisions):
    _, truth = scored
    pairs = cooccurrence(decisions).set_index(["a", "b"])
    title = pairs.loc[("g1_title_entity", "g1_report_register")]
    assert title["both"] == 4 and title["p_b_given_a"] == 1.0 and title["phi"] == pytest.approx(1.0)
    cut = pairs.loc[("g0_not_truncated", "g1_title_entity")]
    # 12 reports, 4 fail each, never together: phi = (0 - 16) / sqrt(4 * 8 * 4 * 8)
    assert (cut["reports"], cut["fail_a"], cut["fail_b"], cut["both"]) == (12, 4, 4, 0)
    assert cut["phi"] == pytest.approx(-0.5) and cut["p_b_given_a"] == 0.0
    assert math.isnan(pairs.loc[("g0_nonempty", "g0_parseable"), "phi"])  # never fails: undefined
    assert math.isnan(pairs.loc[("g0_nonempty", "g0_not_truncated"), "p_b_given_a"])
    # every pair against the failed/partial lists of rubric_total (fail_below=1: partial counts as failing)
    decided = decisions.groupby(["instance_id", "system"])["item"].apply(set)
    for (a, b), row in itertools.islice(pairs.iterrows(), 0, None, 7):
        both_decided = [k for k, s in decided.items() if {a, b} <= s]
        fails = {k: truth[k][0] | truth[k][1] for k in both_decided}
        assert row["reports"] == len(both_decided)
        assert row["both"] == sum(1 for k in both_decided if {a, b} <= fails[k])
    strict = cooccurrence(decisions, fail_below=0.5).set_index(["a", "b"])
    assert strict.loc[("g1_title_entity", "g1_report_register"), "both"] == 4


def test_cooccurrence_by_layer(decisions):
    pairs = cooccurrence(decisions, by="layer").set_index(["a", "b"])
    assert set(pairs.index) == {(a, b) for a in ("G0", "G1", "G2") for b in ("G0", "G1", "G2") if a != b}
    g0g1 = pairs.loc[("G0", "G1")]
    # G0 fails on the 4 cut reports and the placeholder one; G1 at least on the 4 chatty ones
    assert g0g1["reports"] == 12 and g0g1["fail_a"] == 5 and g0g1["fail_b"] >= 4
    with pytest.raises(ValueError, match="by must be"):
        cooccurrence(decisions, by="system")  # type: ignore[arg-type]


def test_plot_and_json(decisions):
    items, pairs = item_table(decisions), cooccurrence(decisions)
    png = items_plot(items, pairs)
    assert png.startswith(b"\x89PNG") and png == items_plot(items, pairs)  # deterministic
    svg = items_plot(items, cooccurrence(decisions, by="layer"), fmt="svg", value="p_b_given_a").decode()
    assert "<svg" in svg and "P(fail b | fail a)" in svg and "g0_not_truncated" in svg
    with pytest.raises(ValueError):
        items_plot(items, pairs, fmt="gif")  # type: ignore[arg-type]
    data = json.loads(items_json(items, system_table(decisions), pairs))
    assert set(data) == {"items", "by_system", "cooccurrence"}
    nonempty = next(r for r in data["items"] if r["item"] == "g0_nonempty")
    assert nonempty["pass_rate"] == 1.0
    assert any(r["phi"] is None for r in data["cooccurrence"])  # NaN -> null


def _write_evidence(folder: Path, evidence: pd.DataFrame) -> Path:
    atomic_write_bytes(
        folder / "evidence.parquet", parquet_bytes(evidence.to_dict("records"), EVIDENCE_SCHEMA)
    )
    return folder


def test_load_decisions_reads_a_scores_folder(tmp_path, scored):
    evidence, _ = scored
    folder = _write_evidence(tmp_path / "scores", evidence)
    got = load_decisions(folder, systems=["good", "cut"])
    assert set(got["system"]) == {"good", "cut"} and len(got) == (evidence["system"] != "chatty").sum()
    with pytest.raises(FrameInputError, match="--systems: no rubric decisions of system.s. nope"):
        load_decisions(folder, systems=["nope"])
    with pytest.raises(FrameInputError, match="not a `frame score` output folder"):
        load_decisions(tmp_path / "missing")
    other = _write_evidence(tmp_path / "other", evidence.assign(metric="coverage"))
    with pytest.raises(FrameInputError, match="no rubric decisions in the evidence table"):
        load_decisions(other)
