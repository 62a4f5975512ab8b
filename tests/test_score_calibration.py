"""The structure projection calibrated for the embedder in use (issue 41, item 3; docs/metrics/structure.md,
Calibration): reworded headings substitute under MiniLM's δ, the committed δ is what the fit produces, and
the settings of every score run say which δ and w were used and where they came from."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from schemas.projection import PAPER_DELTA, PROJECTION_PATH, projection_for
from schemas.scoring import ScoreSettings
from tasks.config import load_eval_config
from tasks.score.calibration import (
    DELTA_GRID,
    Unit,
    fit_delta,
    heading_words,
    labelled_pairs,
    paper_kind,
    roc_auc,
)
from tasks.score.metric import JudgeEnv
from tasks.score.structural_similarity import make_node_similarity, structural_similarity
from tasks.score.tree import report_tree
from tests.conftest import CORPUS, frame_env

FRAME = str(Path(sys.executable).with_name("frame"))
ENTRY = tomllib.loads(PROJECTION_PATH.read_text(encoding="utf-8"))["embedders"]["minilm"]

# The reworded headings (projected 0.003 and 0.169 under the paper's δ with MiniLM).
REWORDED = [
    ("Results of Operations", "Operating Results"),
    ("Business Model and Segment Performance", "Business Context and Segment Performance"),
]
OTHERS = ["Liquidity and Capital Resources", "Risk Factors", "Controls and Procedures"]


@pytest.fixture(scope="module")
def embed(tmp_path_factory):
    """MiniLM as `frame score` embeds with it (fp32: conftest), with its own cache."""
    return JudgeEnv(ScoreSettings(), None, tmp_path_factory.mktemp("calibration-cache")).embed


def report(first: str) -> str:
    return "# Report\n\n" + "".join(f"## {h}\n\n" for h in (first, *OTHERS))


# ------------------------------------------------------------------ the instrument: reworded headings


@pytest.mark.parametrize(("gold", "reworded"), REWORDED)
def test_a_reworded_heading_costs_less_than_one_edit_under_minilm_s_delta(embed, gold, reworded):
    s = ScoreSettings()  # MiniLM: its calibrated values
    assert (s.delta_source, s.type_weight_source) == ("calibrated for minilm", "paper")
    a, b = report_tree(report(gold)), report_tree(report(reworded))
    n = 2 * (1 + 1 + len(OTHERS))  # both trees' sizes: the root, the reworded section, the others
    one_edit = 1 - 1 / n  # the score when the reworded section costs exactly one deletion

    def score(delta: float, first: str = reworded) -> float:
        sim = make_node_similarity(embed, w=s.type_weight, proj="rbf", delta=delta)
        return structural_similarity(a, report_tree(report(first)), sim)

    # under the calibrated δ the reworded section is a substitution cheaper than one deletion ...
    assert score(s.delta) > one_edit
    # ... while another section in its place still costs more than one (the control) ...
    assert score(s.delta, "Executive Compensation") < one_edit
    # ... and under the paper's δ the reworded one cost more than a deletion, as an unrelated one (the issue)
    assert score(PAPER_DELTA) < one_edit
    # the node similarity itself: projected objective similarity above one half
    sim = make_node_similarity(embed, w=s.type_weight, proj="rbf", delta=s.delta)
    na, nb = a["children"][0], b["children"][0]
    assert (sim(na, nb) - s.type_weight) / (1 - s.type_weight) > 0.5


# ------------------------------------------------------------------ the committed values


@pytest.fixture(scope="module")
def papers_fit(embed):
    """The calibration of benchmarks/calibrate_structure.py on the papers source alone (grounding the 34
    papers is fast; the filings take a minute: the full run is the script)."""
    if not (CORPUS / "arxiv" / "MANIFEST.csv").is_file():
        pytest.skip(f"shared corpus not found at {CORPUS}")
    from benchmarks.calibrate_structure import calibrate
    from tasks.score.calibration import paper_units
    from tasks.sources import ground_source

    units = []
    with (CORPUS / "arxiv" / "MANIFEST.csv").open(newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            grounded = ground_source((CORPUS / "arxiv" / row["path"]).read_bytes(), Path(row["path"]).name)
            units += paper_units(row["arxiv_id"], "\n".join(grounded.markdown.values()))
    return calibrate(units, embed, ENTRY["nodes"], ENTRY["type_weight"])


def test_committed_values_are_what_the_fit_produces(papers_fit):
    fit, per, _ = papers_fit
    papers = per["papers"]
    recorded = ENTRY["sources"]["papers"]
    assert (papers["positive_pairs"], papers["negative_pairs"]) == (
        recorded["positive_pairs"],
        recorded["negative_pairs"],
    )
    assert round(papers["auc_cosine"], 4) == recorded["auc_cosine"]
    assert fit.best("papers") == recorded["best_delta"]
    # the chosen δ maximises the mean of unimodal per-source curves: it lies between their maxima
    bests = [src["best_delta"] for src in ENTRY["sources"].values()]
    assert min(bests) <= ENTRY["delta"] <= max(bests)
    assert projection_for("minilm").delta == ENTRY["delta"] != PAPER_DELTA
    # a projection is monotone in the cosine: it moves the scale, never the ranking (AUC unchanged)
    assert papers["auc_projected"] == pytest.approx(papers["auc_cosine"], abs=1e-12)
    assert ENTRY["auc_projected"] == ENTRY["auc_cosine"] and ENTRY["auc_cosine"] > 0.9


def test_calibrated_delta_separates_better_than_the_paper_s_for_minilm(papers_fit):
    fit, per, _ = papers_fit
    assert (
        fit.gaps["papers"][DELTA_GRID.index(ENTRY["delta"])]
        > fit.gaps["papers"][DELTA_GRID.index(0.10)] + 0.1
    )
    assert per["papers"]["pos_half"] > per["papers"]["pos_half_paper"]


# ------------------------------------------------------------------ the fit's parts


def test_roc_auc_is_sklearn_s_with_ties():
    rng = np.random.default_rng(41)
    for _ in range(20):
        pos = rng.integers(0, 8, rng.integers(1, 40)) / 8  # many ties
        neg = rng.integers(0, 8, rng.integers(1, 40)) / 8
        labels = np.r_[np.ones(len(pos)), np.zeros(len(neg))]
        assert roc_auc(pos, neg) == pytest.approx(roc_auc_score(labels, np.r_[pos, neg]), abs=1e-12)


@pytest.mark.parametrize(("cos_pos", "cos_neg"), [(0.66, 0.1), (0.9, 0.5), (0.8, 0.2)])
def test_fit_delta_finds_the_analytic_optimum(cos_pos, cos_neg):
    # one positive cosine and one negative: exp(-a^2 u) - exp(-b^2 u), u = 1 / (2 δ^2), is largest at
    # u = ln(b^2 / a^2) / (b^2 - a^2)
    a, b = 1 - cos_pos, 1 - cos_neg
    u = np.log(b**2 / a**2) / (b**2 - a**2)
    best = float(np.sqrt(1 / (2 * u)))
    fit = fit_delta({"one": ([cos_pos] * 3, [cos_neg] * 5)})
    assert abs(fit.delta - best) <= 0.005 + 1e-9
    # two sources: the mean of their curves, so the optimum lies between theirs
    two = fit_delta({"one": ([cos_pos], [cos_neg]), "two": ([0.95], [0.7])})
    assert min(two.best("one"), two.best("two")) <= two.delta <= max(two.best("one"), two.best("two"))


def test_heading_words_drop_the_document_s_numbering_only():
    cases = {
        "Item 1A.Risk Factors": "Risk Factors",
        "ITEM 9A. CONTROLS AND PROCEDURES*": "CONTROLS AND PROCEDURES",
        "Item 6. - Exhibits": "Exhibits",
        "NOTE 14. DEBT": "DEBT",
        "H. DEBT": "DEBT",
        "Note 7—Debt": "Debt",
        "2.NET SALES": "NET SALES",
        "1 Introduction": "Introduction",
        "II Band Deformation": "Band Deformation",
        "Appendix B Reproducibility": "Reproducibility",
        # not numbering: a year, a leading article, a plain title
        "2023 Strategic Objectives": "2023 Strategic Objectives",
        "A Spectral-Temporal Gaussian Process": "A Spectral-Temporal Gaussian Process",
        "Income Taxes": "Income Taxes",
    }
    assert {t: heading_words(t) for t in cases} == cases


def test_paper_kinds():
    assert paper_kind("5 Conclusions") == paper_kind("7 Concluding Remarks") == "conclusions"
    assert paper_kind("2 Related Work") == paper_kind("2 Background") == "related-work"
    assert paper_kind("2 Method") != paper_kind("4 Experiments")
    assert paper_kind("4 Discussion and Conclusions") is None  # two kinds: no label
    assert paper_kind("3 The Lyot Coronagraph") is None


def test_pairs_follow_the_labels():
    units = [
        Unit("notes", "us-gaap:DebtDisclosureTextBlock", "A", "Debt"),
        Unit("notes", "us-gaap:DebtDisclosureTextBlock", "B", "Borrowings"),
        Unit("notes", "us-gaap:DebtDisclosureTextBlock", "B", "Long-Term Debt"),
        Unit("notes", "us-gaap:DebtDisclosureTextBlock", "C", "Debt"),  # identical to A's: says nothing
        Unit("notes", "us-gaap:IncomeTaxDisclosureTextBlock", "A", "Income Taxes"),
        Unit("notes", "us-gaap:CommitmentsAndContingenciesDisclosureTextBlock", "A", "Commitments"),
        Unit("notes", "us-gaap:LegalMattersAndContingenciesTextBlock", "B", "Legal Matters"),
        Unit("notes", "xyz:OtherTextBlock", "C", "income taxes"),  # one heading under two labels
        Unit("papers", "conclusions", "p1", "Conclusions"),
        Unit("papers", "conclusions", "p2", "Concluding Remarks"),
    ]
    got = {p.source: p for p in labelled_pairs(units)}
    notes = got["notes"]

    def titles(pairs):
        return {frozenset((notes.nodes[i]["title"], notes.nodes[j]["title"])) for i, j in pairs}

    # positives: one label, two documents (B's two debt notes are not a pair of each other)
    assert titles(notes.positive) == {
        frozenset(p) for p in (("Debt", "Borrowings"), ("Debt", "Long-Term Debt"))
    }
    neg = titles(notes.negative)
    assert frozenset(("Debt", "Income Taxes")) in neg
    assert frozenset(("Commitments", "Legal Matters")) not in neg  # both "Contingencies" concepts
    assert frozenset(("Income Taxes", "income taxes")) not in neg
    assert [len(got["papers"].positive), len(got["papers"].negative)] == [1, 0]
    # the nodes are report_tree's section nodes
    assert notes.nodes[0] == report_tree("# R\n\n## Debt\n")["children"][0]


# ------------------------------------------------------------------ the settings


def test_settings_record_delta_w_and_their_source(tmp_path):
    rows = {
        "minilm": ScoreSettings(),
        "3-small": ScoreSettings(embedder="openai:text-embedding-3-small"),
        "other": ScoreSettings(embedder="openai:text-embedding-3-large"),
        "user": ScoreSettings(delta=0.2),
        "user-w": ScoreSettings(embedder="openai:text-embedding-3-large", type_weight=0.5),
    }
    got = {k: (s.delta, s.delta_source, s.type_weight, s.type_weight_source) for k, s in rows.items()}
    fallback = "paper (no calibration for openai:text-embedding-3-large)"
    assert got == {
        "minilm": (ENTRY["delta"], "calibrated for minilm", 0.2, "paper"),
        "3-small": (0.10, "paper", 0.2, "paper"),
        "other": (0.10, fallback, 0.2, fallback),
        "user": (0.2, "user", 0.2, "paper"),
        "user-w": (0.10, fallback, 0.5, "user"),
    }
    for s in rows.values():  # read back from a score file: the same values and sources
        assert ScoreSettings(**json.loads(json.dumps(s.model_dump(mode="json")))) == s
    cfg = tmp_path / "eval.toml"
    cfg.write_text("[score]\ndelta = 0.25\n", encoding="utf-8")
    s = load_eval_config(cfg).score_settings()
    assert (s.delta, s.delta_source, s.type_weight_source) == (0.25, "user", "paper")


def test_a_projection_file_with_a_bad_value_is_one_line_error(tmp_path):
    from tasks.errors import FrameInputError

    bad = tmp_path / "projection.toml"
    bad.write_text(
        '[embedders.minilm]\ndelta = 0\ntype_weight = 0.2\ndelta_source = "calibrated"\n', encoding="utf-8"
    )
    with pytest.raises(FrameInputError, match="embedders.minilm field delta"):
        projection_for("minilm", bad)


def test_score_files_record_the_projection_and_an_explicit_delta_wins(demo_scored, tmp_path):
    keys = ("delta", "delta_source", "type_weight", "type_weight_source")
    # the suite's demo scoring run (MiniLM, nothing given): the calibrated values, recorded
    manifest = json.loads((demo_scored["out"] / "manifest.json").read_text(encoding="utf-8"))
    assert tuple(manifest["settings"][k] for k in keys) == (
        ENTRY["delta"],
        "calibrated for minilm",
        0.2,
        "paper",
    )
    calibrated = pd.read_parquet(demo_scored["out"] / "scores.parquet")
    calibrated = calibrated[(calibrated["metric"] == "structure") & (calibrated["system"] == "copy-sample")]
    # the same reports with --delta and --type-weight given: those win, and say so
    out = tmp_path / "user"
    args = [FRAME, "score", "--release", str(demo_scored["release"]), "--systems", "copy-sample"]
    args += ["--metrics", "structure", "--delta", "0.2", "--type-weight", "0.3", "--out", str(out)]
    res = subprocess.run(
        args, capture_output=True, text=True, env=frame_env(tmp_path / "prefect"), timeout=900
    )
    assert res.returncode == 0, res.stderr[-3000:]
    user = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert tuple(user["settings"][k] for k in keys) == (0.2, "user", 0.3, "user")
    given = pd.read_parquet(out / "scores.parquet")
    for scores, settings in ((calibrated, manifest["settings"]), (given, user["settings"])):
        details = [json.loads(d) for d in scores["detail_json"]]
        assert {tuple(d[k] for k in keys) for d in details} == {tuple(settings[k] for k in keys)}
    # the settings are used: the same reports score differently
    both = calibrated.merge(given, on="instance_id", suffixes=("_c", "_u"))
    assert len(both) == len(calibrated) > 0
    assert not np.allclose(both["value_c"], both["value_u"])


def test_write_entry_replaces_one_embedder_s_table_and_keeps_the_rest(tmp_path):
    from benchmarks.calibrate_structure import PAPER_EMBEDDER, Result, write_entry

    path = tmp_path / "projection.toml"
    path.write_text(PROJECTION_PATH.read_text(encoding="utf-8"), encoding="utf-8")
    before = tomllib.loads(path.read_text(encoding="utf-8"))["embedders"]
    figures = {"positive_pairs": 3, "negative_pairs": 7, "auc_cosine": 0.75, "best_delta": 0.4}
    r = Result("minilm", "all-MiniLM-L6-v2@128", "headings", 0.2, 0.41, 1, 1, [])
    r.per_source = {"papers": figures}
    r.pooled = {"positive_pairs": 3, "negative_pairs": 7, "auc_cosine": 0.75, "auc_projected": 0.75}
    for _ in range(2):  # a rerun replaces, never appends
        write_entry(path, r)
        after = tomllib.loads(path.read_text(encoding="utf-8"))["embedders"]
        assert after[PAPER_EMBEDDER] == before[PAPER_EMBEDDER]
        assert after["minilm"]["delta"] == 0.41 and list(after["minilm"]["sources"]) == ["papers"]
        assert projection_for("minilm", path).delta_source == "calibrated for minilm"
    with pytest.raises(SystemExit, match="keeps the paper"):
        write_entry(path, Result(PAPER_EMBEDDER, "", "headings", 0.2, 0.3, 0, 0, []))
