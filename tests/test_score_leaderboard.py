"""Leaderboard with seeded bootstrap CIs and metric-vs-bucket plots (tasks/score/leaderboard.py, plots.py)."""

from __future__ import annotations

import hashlib
import io
import itertools
import re
import warnings

import numpy as np
import pandas as pd
import pytest

from schemas.config import CATEGORY_LABELS
from tasks.score.leaderboard import (
    BOARD_COLUMNS,
    PAIRED_COLUMNS,
    PRIMARY_COLUMNS,
    WIN_COLUMNS,
    bootstrap_ci,
    cell_seed,
    leaderboard,
    leaderboard_csv,
    leaderboard_files,
    leaderboard_markdown,
    paired_tests,
    paired_tests_csv,
    primary_metrics,
    primary_scores,
    ranking,
    self_judged_notes,
    win_matrices,
    win_matrix,
    win_matrix_csv,
)
from tasks.score.plots import bucketize, metric_figures, plot_metric_vs_buckets, quantile_edges

CATS = ("financial_quarterly", "financial_annual", "academic_simple", "academic_complex")
METRICS = ("structure", "coverage", "faithfulness")


def make_scores(n_inst=16, systems=("alpha", "beta", "gamma"), seed=1, offsets=None) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    offsets = offsets or {s: 0.1 * k for k, s in enumerate(systems)}
    rows = []
    for i in range(n_inst):
        for s in systems:
            for m in METRICS:
                v = float(np.clip(rng.uniform(0.1, 0.8) + offsets[s], 0, 1))
                rows.append(
                    {
                        "instance_id": f"inst{i:03d}",
                        "category": CATS[i % len(CATS)],
                        "system": s,
                        "metric": m,
                        "value": v,
                        "judge": "offline:embed" if m == "structure" else "openai:judge",
                    }
                )
    return pd.DataFrame(rows)


def make_features(n_inst=16, seed=2) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "instance_id": [f"inst{i:03d}" for i in range(n_inst)],
            "gold_tokens": rng.integers(1_500, 25_000, n_inst),
            "grounding_tokens": rng.integers(10_000, 90_000, n_inst),
            "gold_tables": rng.integers(0, 30, n_inst),
            "category": [CATS[i % len(CATS)] for i in range(n_inst)],
        }
    )


# ---------------------------------------------------------------- bootstrap_ci


def test_bootstrap_ci_properties():
    rng = np.random.default_rng(7)
    vals = rng.uniform(0, 1, 40)
    mean, low, high = bootstrap_ci(vals, seed=3)
    assert mean == pytest.approx(float(np.mean(vals)), abs=1e-15)
    assert low <= mean <= high
    assert 0 <= low and high <= 1
    # A 95% CI of the mean of 40 U(0,1) draws is about mean +- 1.96 * 0.289 / sqrt(40) = +- 0.09.
    assert 0.12 < high - low < 0.24
    assert bootstrap_ci(vals, seed=3) == (mean, low, high)
    assert bootstrap_ci(vals, seed=4) != (mean, low, high)
    assert (
        bootstrap_ci(vals, seed=3, confidence=0.5)[2] - bootstrap_ci(vals, seed=3, confidence=0.5)[1]
        < high - low
    )


def test_bootstrap_ci_narrows_with_n():
    rng = np.random.default_rng(11)
    widths = []
    for n in (10, 100, 1000):
        _, low, high = bootstrap_ci(rng.uniform(0, 1, n), seed=0, n_resamples=1000)
        widths.append(high - low)
    assert widths[0] > widths[1] > widths[2]


def test_bootstrap_ci_excludes_nan_and_edge_cases():
    vals = [0.2, None, 0.4, float("nan"), 0.9, 0.5]
    mean, low, high = bootstrap_ci(vals, seed=0)
    assert mean == pytest.approx(0.5)
    assert bootstrap_ci([0.2, 0.4, 0.9, 0.5], seed=0) == (mean, low, high)
    assert all(np.isnan(bootstrap_ci([], seed=0)))
    assert all(np.isnan(bootstrap_ci([None, float("nan")], seed=0)))
    assert bootstrap_ci([0.3], seed=0) == (0.3, 0.3, 0.3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert bootstrap_ci([0.7] * 12, seed=0) == (0.7, 0.7, 0.7)
    with pytest.raises(ValueError):
        bootstrap_ci([0.1, 0.2], confidence=1.5)


def test_cell_seed_is_stable_and_distinct():
    assert cell_seed(0, "a", "overall", "coverage") == cell_seed(0, "a", "overall", "coverage")
    assert len({cell_seed(0, "a", "overall", m) for m in METRICS}) == 3
    assert cell_seed(0, "a", "overall", "coverage") != cell_seed(1, "a", "overall", "coverage")


# ---------------------------------------------------------------- leaderboard


def test_leaderboard_long_form():
    scores = make_scores()
    board = leaderboard(scores, n_resamples=500)
    assert list(board.columns) == list(BOARD_COLUMNS)
    assert len(board) == 3 * 5 * 3  # systems x (overall + 4 categories) x metrics
    assert list(board["scope"].unique()) == ["overall", *CATS]
    assert list(board["metric"].unique()) == list(METRICS)
    assert list(board["system"].unique()) == ["alpha", "beta", "gamma"]
    ov = board[board["scope"] == "overall"]
    assert (ov["n"] == 16).all() and (board[board["scope"] != "overall"]["n"] == 4).all()
    assert ((board["ci_low"] <= board["mean"]) & (board["mean"] <= board["ci_high"])).all()
    # means are the plain means of the score table
    exp = scores.groupby(["system", "metric"])["value"].mean()
    for r in ov.itertuples():
        assert r.mean == pytest.approx(exp[(r.system, r.metric)])
    assert set(board.loc[board["metric"] == "structure", "judges"]) == {"offline:embed"}
    assert board.attrs["bootstrap"]["n_resamples"] == 500


def test_leaderboard_order_independent_and_cell_independent():
    scores = make_scores()
    board = leaderboard(scores, seed=5, n_resamples=300)
    shuffled = leaderboard(scores.sample(frac=1.0, random_state=9), seed=5, n_resamples=300)
    pd.testing.assert_frame_equal(board, shuffled)
    # dropping another system leaves every cell of "alpha" unchanged
    alone = leaderboard(scores[scores["system"] == "alpha"], seed=5, n_resamples=300)
    pd.testing.assert_frame_equal(alone, board[board["system"] == "alpha"].reset_index(drop=True))
    other = leaderboard(scores, seed=6, n_resamples=300)
    assert not np.allclose(other["ci_low"], board["ci_low"])
    assert np.allclose(other["mean"], board["mean"])


def test_leaderboard_counts_undefined_values():
    scores = make_scores(n_inst=8)
    mask = (
        (scores["system"] == "beta")
        & (scores["metric"] == "faithfulness")
        & scores["instance_id"].isin(["inst000", "inst004"])
    )
    scores.loc[mask, "value"] = None
    scores.loc[(scores["system"] == "gamma") & (scores["metric"] == "coverage"), "value"] = np.nan
    board = leaderboard(scores, n_resamples=200).set_index(["system", "scope", "metric"])
    cell = board.loc[("beta", "overall", "faithfulness")]
    assert (cell["n"], cell["n_undefined"]) == (6, 2)
    defined = scores[(scores["system"] == "beta") & (scores["metric"] == "faithfulness")]["value"].dropna()
    assert cell["mean"] == pytest.approx(defined.mean())
    assert board.loc[("beta", "financial_quarterly", "faithfulness"), "n"] == 0  # inst000, inst004
    assert np.isnan(board.loc[("beta", "financial_quarterly", "faithfulness"), "mean"])
    gamma = board.loc[("gamma", "overall", "coverage")]
    assert gamma["n"] == 0 and gamma["n_undefined"] == 8 and np.isnan(gamma["ci_low"])
    md = leaderboard_markdown(board.reset_index())
    assert "(n=6)" in md and "n/a (n=0)" in md and "undefined" in md
    # a system with no defined value is not ranked: no paired test, no win-matrix row
    paired = paired_tests(scores, n_resamples=200)
    assert list(paired.loc[paired["metric"] == "coverage", "system"]) == ["beta"]
    assert list(win_matrix(scores, "coverage").index) == ["beta", "alpha"]
    beta = paired[
        (paired["metric"] == "faithfulness") & ((paired["system"] == "beta") | (paired["versus"] == "beta"))
    ]
    assert set(beta["n"]) == {6}  # only instances both systems have defined


def test_leaderboard_rejects_duplicates_and_out_of_range():
    scores = make_scores(n_inst=4)
    with pytest.raises(ValueError, match="duplicate"):
        leaderboard(pd.concat([scores, scores.iloc[:1].assign(judge="other")]))
    bad = scores.copy()
    bad.loc[0, "value"] = 80.0
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        leaderboard(bad)


def test_leaderboard_empty_and_unknown_category():
    empty = leaderboard(make_scores().iloc[0:0])
    assert list(empty.columns) == list(BOARD_COLUMNS) and empty.empty
    assert "No scores" in leaderboard_markdown(empty)
    scores = make_scores(n_inst=4, systems=("solo",))
    scores.loc[scores["instance_id"] == "inst003", "category"] = "clinical"
    scores.loc[scores["instance_id"] == "inst002", "category"] = None
    board = leaderboard(scores, n_resamples=200)
    assert list(board["scope"].unique()) == ["overall", "financial_quarterly", "financial_annual", "clinical"]
    assert (board.loc[board["scope"] == "overall", "n"] == 4).all()


# ---------------------------------------------------------------- markdown / csv


def _table(md: str, metric: str) -> list[list[str]]:
    block = md.split(f"### {metric}")[1].split("###")[0]
    lines = [ln for ln in block.splitlines() if ln.startswith("|")]
    return [[c.strip() for c in ln.strip("|").split(" | ")] for ln in lines]


def _wide_table(md: str) -> list[list[str]]:
    """The Table-6 board of a leaderboard.md: header, then the body rows (the alignment row dropped)."""
    block = md.split("### ")[0]
    lines = [ln for ln in block.splitlines() if ln.startswith("|")]
    rows = [[c.strip() for c in ln.strip("|").split(" | ")] for ln in lines]
    return [rows[0], *rows[2:]]


def test_markdown_bold_best_per_row():
    scores = make_scores(systems=("alpha", "beta", "gamma|x"))
    board = leaderboard(scores, n_resamples=300, seed=2)
    md = leaderboard_markdown(board)
    assert "percentile bootstrap" in md and "300 resamples" in md and "seed 2" in md
    # the category labels are the release card's (schemas.config.CATEGORY_LABELS)
    assert "Overall 16" in md and f"{CATEGORY_LABELS['financial_quarterly']} 4" in md
    header, *body = _wide_table(md)
    # columns by FRAME score, best first (gamma|x has the largest offset), not alphabetically
    primary = board.attrs["primary"]["rows"]
    overall = {r["system"]: r["mean"] for r in primary if r["scope"] == "overall"}
    best_first = sorted(overall, key=lambda s: -overall[s])
    assert best_first[0] == "gamma|x"
    assert header == ["Metric", "Data", *[s.replace("|", "\\|") for s in best_first]]
    assert [r[1] for r in body[:5]] == ["Overall", *[CATEGORY_LABELS[c] for c in CATS]]
    names = ["**FRAME score**", *METRICS]
    assert [r[0] for r in body] == [x for m in names for x in (m, "", "", "", "")]
    scopes = ["overall", *CATS]
    cells = pd.DataFrame(primary).assign(metric="frame_score")
    for k, r in enumerate(body):
        metric, scope = ["frame_score", *METRICS][k // 5], scopes[k % 5]
        table = cells if metric == "frame_score" else board
        sub = table[(table["metric"] == metric) & (table["scope"] == scope)].set_index("system")
        bold = [name for name, cell in zip(header[2:], r[2:], strict=True) if cell.startswith("**")]
        assert bold == [str(sub["mean"].idxmax()).replace("|", "\\|")]
        for cell in r[2:]:
            assert re.fullmatch(r"\**\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]\**", cell)
    # the requested column order is honoured, the others follow by score
    md2 = leaderboard_markdown(board, systems=["alpha"])
    assert _wide_table(md2)[0][2:] == ["alpha", *[s.replace("|", "\\|") for s in best_first if s != "alpha"]]
    assert "in the order asked for" in md2 and "in the order asked for" not in md


def test_markdown_ties_bold_all():
    scores = make_scores(n_inst=4, systems=("a", "b"))
    scores.loc[scores["system"] == "b", "value"] = scores.loc[scores["system"] == "a", "value"].to_numpy()
    md = leaderboard_markdown(leaderboard(scores, n_resamples=100))
    body = _wide_table(md)[1:]
    assert body and all(r[2].startswith("**") and r[3].startswith("**") for r in body)


def test_csv_deterministic_and_roundtrips():
    board = leaderboard(make_scores(n_inst=8), n_resamples=200)
    text = leaderboard_csv(board)
    assert text == leaderboard_csv(leaderboard(make_scores(n_inst=8), n_resamples=200))
    assert text.splitlines()[0] == ",".join(BOARD_COLUMNS)
    assert "\r" not in text
    back = pd.read_csv(io.StringIO(text))
    assert len(back) == len(board)
    assert np.allclose(back["mean"], board["mean"], atol=1e-6)
    assert re.search(r",0\.\d{6},", text)


# ---------------------------------------------------------------- several systems: Table 6, tests, wins

FOUR_METRICS = ("structure", "coverage", "text_edit_distance")  # text_edit_distance: lower is better
TWO_CATS = ("financial_annual", "academic_simple")
# beta's per-instance offset from alpha: +-0.02, summing to zero over all 12 instances and within each
# category (instance i is in category i % 2), so the true mean difference alpha - beta is exactly 0.2
NOISE = np.array([1, 1, -1, -1] * 3) * 0.02


def make_four(seed=3) -> pd.DataFrame:
    """4 systems + gold x 12 instances x 3 metrics x 2 categories, with known gaps.

    Quality q per (metric, instance): alpha = base + 0.3, beta = base + 0.1 + NOISE, gamma = delta =
    base, gold = 1; text_edit_distance (lower is better) = 1 - q. On coverage only: beta is undefined on
    inst00 and falls below gamma/delta on inst07 (base - 0.05); gamma beats delta on inst05 (+0.05).
    """
    rng = np.random.default_rng(seed)
    rows = []
    for metric in FOUR_METRICS:
        base = rng.uniform(0.3, 0.5, 12)
        for i in range(12):
            q = {
                "alpha": base[i] + 0.3,
                "beta": base[i] + 0.1 + NOISE[i],
                "gamma": base[i],
                "delta": base[i],
                "gold": 1.0,
            }
            if metric == "coverage":
                q["beta"] = {0: np.nan, 7: base[i] - 0.05}.get(i, q["beta"])
                q["gamma"] += 0.05 if i == 5 else 0.0
            for system, v in q.items():
                rows.append(
                    {
                        "instance_id": f"inst{i:02d}",
                        "category": TWO_CATS[i % 2],
                        "system": system,
                        "metric": metric,
                        "value": 1.0 - v if metric == "text_edit_distance" else v,
                        "judge": "deterministic" if metric == "text_edit_distance" else "openai:judge-model",
                    }
                )
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def four():
    scores = make_four()
    files = leaderboard_files(scores, seed=4, n_resamples=400, notes={"beta": "self-judged"})
    return {"scores": scores, "files": files, "paired": paired_tests(scores, seed=4)}


def test_table6_layout_systems_as_columns_by_score(four):
    md = four["files"]["leaderboard.md"]
    header, *body = _wide_table(md)
    # gold (the ceiling) first, then by FRAME score: gamma beats delta on one coverage instance
    assert header == [
        "Metric",
        "Data",
        "gold _(ceiling)_",
        "alpha",
        "beta _(self-judged)_",
        "gamma",
        "delta",
    ]
    labels = ["**FRAME score**", "structure", "coverage", "text_edit_distance (lower is better)"]
    assert [r[0] for r in body] == [x for m in labels for x in (m, "", "")]
    cats = [CATEGORY_LABELS[c] for c in TWO_CATS]
    assert [r[1] for r in body] == ["Overall", *cats] * 4
    board = leaderboard(four["scores"], seed=4, n_resamples=400).set_index(["system", "scope", "metric"])
    cell = board.loc[("gamma", "academic_simple", "structure")]
    assert body[5][5] == f"{cell['mean']:.3f} [{cell['ci_low']:.3f}, {cell['ci_high']:.3f}]"
    assert body[3][2] == "1.000 [1.000, 1.000]"  # gold: the ceiling, not bold
    assert body[0][2] == "1.000 [1.000, 1.000]" and body[0][3].startswith("**")
    # beta lacks inst00 on coverage: its cells show their own n
    assert body[6][4].endswith("(n=11)") and body[7][4].endswith("(n=5)") and "(n=" not in body[8][4]
    # gold stays first even when asked last; the requested order of the others is kept
    md2 = leaderboard_markdown(
        leaderboard(four["scores"], n_resamples=100), systems=["gamma", "alpha", "gold"]
    )
    assert _wide_table(md2)[0][2:] == ["gold _(ceiling)_", "gamma", "alpha", "beta", "delta"]
    assert "Judges: structure: openai:judge-model; coverage: openai:judge-model" in md
    assert "never ranked or bold" in md


def test_title_order_and_reference_rows():
    """The title names the release and what is scored; systems are ordered by the FRAME score (not by
    name); the ceiling and the baselines are flagged and explained in a footnote."""
    scores = make_four()
    names = {"alpha": "zeta", "beta": "copy-sample", "gamma": "mid", "delta": "aardvark"}
    scores["system"] = scores["system"].replace(names)
    files = leaderboard_files(scores, seed=4, n_resamples=200, release="toy/0.1.0")
    md = files["leaderboard.md"]
    lines = md.splitlines()
    assert lines[0] == "# Leaderboard: toy/0.1.0"
    assert lines[2] == (
        "Scored: 5 system(s) (4 ranked; ceiling: gold; baselines: copy-sample) on 12 instance(s) in 2 "
        "categories, by 3 metric(s): structure, coverage, text_edit_distance."
    )
    header = _wide_table(md)[0]
    assert header[2:] == ["gold _(ceiling)_", "zeta", "copy-sample _(baseline)_", "mid", "aardvark"]
    caption = next(ln for ln in lines if ln.startswith("_Order:"))
    assert "FRAME score" in caption and "mean of the system's structure and coverage means" in caption
    assert "_ceiling: `gold` is the gold report scored against itself" in md
    assert "_baseline: a builtin non-LLM reference system" in md
    # the baselines a caller names (e.g. a builtin under another name) replace the defaults
    md2 = leaderboard_files(scores, seed=4, n_resamples=200, baselines=["aardvark"])["leaderboard.md"]
    assert _wide_table(md2)[0][2:] == [
        "gold _(ceiling)_",
        "zeta",
        "copy-sample",
        "mid",
        "aardvark _(baseline)_",
    ]
    assert md2.splitlines()[0] == "# Leaderboard"
    # only a lower-is-better metric scored: it orders the systems itself, lowest first, no composite row
    ted = scores[scores["metric"] == "text_edit_distance"]
    md3 = leaderboard_markdown(leaderboard(ted, n_resamples=100))
    assert _wide_table(md3)[0][2:] == [
        "gold _(ceiling)_",
        "zeta",
        "copy-sample _(baseline)_",
        "aardvark",
        "mid",
    ]
    assert (
        "**FRAME score**" not in md3 and "by their Overall text_edit_distance (lower is better) mean" in md3
    )
    # a board read back from leaderboard.csv has no per-instance values: same order, no CI for the score
    back = leaderboard_markdown(pd.read_csv(io.StringIO(files["leaderboard.csv"])))
    assert _wide_table(back)[0] == header and "no CI (this board holds no per-instance values)" in back
    assert _wide_table(back)[1][3] == _wide_table(md)[1][3].split(" [")[0] + "**"


def test_primary_scores_mean_of_three_with_joint_ci():
    scores = make_scores(n_inst=12)
    ps = primary_scores(scores, seed=3, n_resamples=500)
    assert list(ps.columns) == list(PRIMARY_COLUMNS)
    assert ps.attrs["primary"]["metrics"] == list(METRICS) and ps.attrs["primary"]["label"] == "FRAME score"
    means = scores.groupby(["system", "metric"])["value"].mean().groupby("system").mean()
    ov = ps[ps["scope"] == "overall"].set_index("system")
    assert np.allclose(ov["mean"], means[ov.index])
    assert (ov["ci_low"] < ov["mean"]).all() and (ov["mean"] < ov["ci_high"]).all()
    assert (ov["n"] == 12).all() and len(ps) == 3 * 5
    # a system's score is its own: seeded per (system, scope), whatever else is scored
    alone = primary_scores(scores[scores["system"] == "beta"], seed=3, n_resamples=500)
    pd.testing.assert_frame_equal(alone, ps[ps["system"] == "beta"].reset_index(drop=True), check_like=True)
    assert not np.allclose(primary_scores(scores, seed=4, n_resamples=500)["ci_low"], ps["ci_low"])
    # the joint CI of a mean of three is narrower than the CI of any one of the three (noise averages)
    board = leaderboard(scores, seed=3, n_resamples=500).set_index(["system", "scope", "metric"])
    width = ov.loc["beta", "ci_high"] - ov.loc["beta", "ci_low"]
    assert all(
        width < board.loc[("beta", "overall", m), "ci_high"] - board.loc[("beta", "overall", m), "ci_low"]
        for m in METRICS
    )
    # a metric with no defined value: no score, ordered last
    scores.loc[(scores["system"] == "gamma") & (scores["metric"] == "coverage"), "value"] = np.nan
    ps2 = primary_scores(scores, seed=3, n_resamples=100)
    assert np.isnan(ps2.set_index(["system", "scope"]).loc[("gamma", "overall"), "mean"])
    assert _wide_table(leaderboard_markdown(leaderboard(scores, n_resamples=100)))[0][-1] == "gamma"


def test_table6_bold_respects_direction(four):
    header, *body = _wide_table(four["files"]["leaderboard.md"])
    for r in body:
        bold = [name for name, cell in zip(header[2:], r[2:], strict=True) if cell.startswith("**")]
        # alpha is best everywhere: highest quality, so the lowest text_edit_distance; gold (1.0 / 0.0)
        # is better still but is the ceiling, never bold
        assert bold == ["alpha"], r
    # the bold follows the values, not the system: with text_edit_distance flipped (v -> 1 - v) alpha
    # has the highest distance and the tied delta and gamma the lowest, so both are bold
    flipped = four["scores"].copy()
    ted = flipped["metric"] == "text_edit_distance"
    flipped.loc[ted, "value"] = 1.0 - flipped.loc[ted, "value"]
    header2, *body2 = _wide_table(leaderboard_markdown(leaderboard(flipped, n_resamples=100)))
    assert body2[9][0] == "text_edit_distance (lower is better)"
    for r in body2[9:]:
        bold = [name for name, cell in zip(header2[2:], r[2:], strict=True) if cell.startswith("**")]
        assert bold == ["gamma", "delta"], r


def test_paired_tests_next_best(four):
    paired = four["paired"]
    assert list(paired.columns) == list(PAIRED_COLUMNS)
    assert list(paired["metric"]) == [m for m in FOUR_METRICS for _ in range(3)]
    assert list(paired["rank"]) == [1, 2, 3] * 3
    pairs = {(r.metric, r.system): r for r in paired.itertuples()}
    assert [(r.system, r.versus) for r in paired.itertuples() if r.metric == "structure"] == [
        ("alpha", "beta"),
        ("beta", "delta"),  # gamma and delta tie: ranked by name
        ("delta", "gamma"),
    ]
    assert [(r.system, r.versus) for r in paired.itertuples() if r.metric == "coverage"] == [
        ("alpha", "beta"),
        ("beta", "gamma"),
        ("gamma", "delta"),
    ]
    top = pairs[("structure", "alpha")]
    # all 12 differences positive: the exact sign-flip test (2**12 <= 9999) gives p = 2 / 2**12
    assert top.n == 12 and top.p_value == pytest.approx(2 / 4096)
    # the CI contains the true mean difference (0.2 by construction) and is narrow (noise +-0.02)
    assert top.mean_diff == pytest.approx(0.2)
    assert top.ci_low < 0.2 < top.ci_high and top.ci_high - top.ci_low < 0.03
    ted = pairs[("text_edit_distance", "alpha")]
    assert ted.mean_diff == pytest.approx(-0.2) and ted.ci_low < -0.2 < ted.ci_high and ted.p_value < 0.001
    # identical systems: difference 0, p = 1
    same = pairs[("structure", "delta")]
    assert (same.versus, same.mean_diff, same.ci_low, same.ci_high, same.p_value) == ("gamma", 0, 0, 0, 1.0)
    # gamma beats delta on one coverage instance of 12, ties on the rest: no evidence of a difference
    assert pairs[("coverage", "gamma")].p_value == pytest.approx(1.0)
    assert pairs[("coverage", "alpha")].n == 11  # beta undefined on inst00
    assert "gold" not in set(paired["system"]) | set(paired["versus"])
    assert ranking(four["scores"], "text_edit_distance") == ["alpha", "beta", "delta", "gamma"]


def test_paired_p_value_matches_enumeration():
    """The p-value is the two-sided sign-flip permutation p, checked against a full enumeration."""
    rng = np.random.default_rng(8)
    a = rng.uniform(0.2, 0.8, 9)
    b = np.clip(a + rng.normal(-0.03, 0.1, 9), 0, 1)
    rows = [
        {"instance_id": f"i{i}", "category": "academic_simple", "system": s, "metric": "coverage", "value": v}
        for i in range(9)
        for s, v in (("a", a[i]), ("b", b[i]))
    ]
    paired = paired_tests(pd.DataFrame(rows), seed=1)
    r = paired.iloc[0]
    first, second = ("a", "b") if a.mean() >= b.mean() else ("b", "a")
    assert (r["system"], r["versus"]) == (first, second)
    d = (a - b) if first == "a" else (b - a)
    flips = np.array(list(itertools.product([1.0, -1.0], repeat=9)))
    null = (flips * d).mean(axis=1)
    t = d.mean()
    expected = min(1.0, 2 * min((null >= t - 1e-12).mean(), (null <= t + 1e-12).mean()))
    assert r["p_value"] == pytest.approx(expected)
    assert 0.01 < expected < 1.0  # a real, non-degenerate p-value
    # seeded: the same seed gives the same frame, another seed another bootstrap CI
    pd.testing.assert_frame_equal(paired, paired_tests(pd.DataFrame(rows), seed=1))
    assert paired_tests(pd.DataFrame(rows), seed=2).iloc[0]["ci_low"] != r["ci_low"]


def test_win_matrix_counts_by_hand(four):
    cov = win_matrix(four["scores"], "coverage")
    assert list(cov.index) == ["alpha", "beta", "gamma", "delta"] == list(cov.columns)
    ties, n = cov.attrs["ties"], cov.attrs["n"]
    assert cov.loc["alpha", "beta"] == 11 and n["alpha"]["beta"] == 11  # beta undefined on inst00
    assert (cov.loc["beta", "gamma"], cov.loc["gamma", "beta"], ties["beta"]["gamma"]) == (10, 1, 0)  # inst07
    assert (cov.loc["gamma", "delta"], cov.loc["delta", "gamma"], ties["gamma"]["delta"]) == (1, 0, 11)
    assert (np.diag(cov.to_numpy()) == 0).all()
    # lower is better: alpha's lower text_edit_distance wins every instance
    ted = win_matrix(four["scores"], "text_edit_distance")
    assert list(ted.loc["alpha"]) == [0, 12, 12, 12] and list(ted["alpha"]) == [0, 0, 0, 0]
    assert ted.attrs["ties"]["delta"]["gamma"] == 12 and ted.loc["delta", "gamma"] == 0
    # default: FRAME's primary metrics present (text_edit_distance is not one)
    assert list(win_matrices(four["scores"])) == ["structure", "coverage"]
    only_ted = four["scores"][four["scores"]["metric"] == "text_edit_distance"]
    assert list(win_matrices(only_ted)) == ["text_edit_distance"]
    assert primary_metrics(["teds", "faithfulness", "structure"]) == ["structure", "faithfulness"]
    assert win_matrix_csv(win_matrices(four["scores"])) == four["files"]["win_matrix.csv"]
    csv = pd.read_csv(io.StringIO(four["files"]["win_matrix.csv"]))
    assert list(csv.columns) == list(WIN_COLUMNS)
    row = csv[(csv.metric == "coverage") & (csv.system == "beta") & (csv.versus == "gamma")].iloc[0]
    assert (row.n, row.wins, row.losses, row.ties) == (11, 10, 1, 0)
    assert len(csv) == 2 * 4 * 3


def test_markdown_sections_and_notes(four):
    md = four["files"]["leaderboard.md"]
    assert (
        md.index("| Metric | Data |") < md.index("### Paired tests") < md.index("### Win matrix: structure")
    )
    assert md.index("### Win matrix: structure") < md.index("### Win matrix: coverage")
    assert "### Win matrix: text_edit_distance" not in md
    paired_rows = [
        ln for ln in md.split("### Paired tests")[1].split("###")[0].splitlines() if ln.startswith("| ")
    ]
    top = paired_tests(four["scores"], seed=4, n_resamples=400).iloc[0]
    assert paired_rows[1] == (
        "| structure | 1 | alpha | beta _(self-judged)_ | 12 | "
        f"+0.200 [{top.ci_low:.3f}, {top.ci_high:.3f}] | {top.p_value:.3f} |"
    )
    assert "| structure | 3 | delta | gamma | 12 | +0.000 [0.000, 0.000] | 1.000 |" in md
    assert "-0.200 [" in md  # text_edit_distance: the better system's difference is negative
    cov = md.split("### Win matrix: coverage")[1]
    assert "| gamma | 0 | 1 | – | 1 (+11 ties) |" in cov
    assert "| beta _(self-judged)_ | 0 | – | 10 | 10 |" in cov  # inst07 to gamma and delta, inst00 undefined
    assert "self-judged: the judge model is the system's own model" in md
    assert md.count("beta _(self-judged)_") == 1 + 6 + 4  # header, 6 paired rows, 2 matrices x 2
    # notes from the models of the systems and the judge
    assert self_judged_notes("m-judge", {"beta": "m-judge", "alpha": "m-a", "gold": None}) == {
        "beta": "self-judged"
    }
    assert self_judged_notes(None, {"beta": "m"}) == {}
    # old call sites: the board alone, no extra sections, no flags
    plain = leaderboard_markdown(leaderboard(four["scores"], seed=4, n_resamples=400))
    assert "### Paired tests" not in plain and "### Win matrix" not in plain and "self-judged" not in plain
    assert _wide_table(plain)[1:] == _wide_table(md)[1:]


def test_outputs_reorder_invariant(four):
    shuffled = four["scores"].sample(frac=1.0, random_state=11).reset_index(drop=True)
    again = leaderboard_files(shuffled, seed=4, n_resamples=400, notes={"beta": "self-judged"})
    assert again == four["files"]
    assert set(again) == {"leaderboard.md", "leaderboard.csv", "paired_tests.csv", "win_matrix.csv"}
    paired = pd.read_csv(io.StringIO(again["paired_tests.csv"]))
    assert list(paired.columns) == list(PAIRED_COLUMNS) and len(paired) == 9
    assert paired_tests_csv(four["paired"]).count("\n") == 10 and "\r" not in again["paired_tests.csv"]
    # one row per (system, scope, metric), scope "overall" included
    board = pd.read_csv(io.StringIO(again["leaderboard.csv"]))
    assert len(board) == 5 * 3 * 3 and not board.duplicated(["system", "scope", "metric"]).any()
    assert set(board["scope"]) == {"overall", *TWO_CATS}


def test_single_system_keeps_per_metric_tables():
    scores = make_four()
    solo = scores[scores["system"].isin(["alpha", "gold"])]
    files = leaderboard_files(solo, n_resamples=100, notes={"alpha": "self-judged"})
    md = files["leaderboard.md"]
    for metric in FOUR_METRICS:
        rows = _table(md, metric)
        assert rows[0] == ["System", "Overall", *[CATEGORY_LABELS[c] for c in TWO_CATS]]
        assert [r[0] for r in rows[2:]] == ["gold _(ceiling)_", "alpha _(self-judged)_"]
        assert not any("**" in c for r in rows for c in r)  # nothing to rank against
    assert "### text_edit_distance (lower is better) (judge: deterministic)" in md
    assert "### Paired tests" not in md and "### Win matrix" not in md
    assert files["paired_tests.csv"] == ",".join(PAIRED_COLUMNS) + "\n"
    assert files["win_matrix.csv"] == ",".join(WIN_COLUMNS) + "\n"


# ---------------------------------------------------------------- buckets / plots


def test_quantile_edges_nonempty_and_rounded():
    vals = [3564, 5002, 7951, 8432, 10938, 13017, 13392, 13852, 19566, 19949, 20157, 22608, 22900]
    edges = quantile_edges(vals, max_buckets=5)
    bk = bucketize(vals, edges, kind="tokens")
    assert all(c > 0 for c in bk.counts) and sum(bk.counts) == len(vals)
    assert all(float(f"{e:.2g}") == e for e in edges)
    assert bk.labels[0].startswith("<") and bk.labels[-1].endswith("+")
    assert len(bk.labels) == len(edges) + 1
    # integers: inclusive labels, equal values share a bucket
    tb = bucketize(
        [0, 1, 1, 1, 2, 7, 7, 7], quantile_edges([0, 1, 1, 1, 2, 7, 7, 7], integer=True), kind="count"
    )
    assert sum(tb.counts) == 8 and all(c > 0 for c in tb.counts)
    assert len(set(tb.codes[1:4])) == 1 and len(set(tb.codes[5:])) == 1
    # all equal / single value / NaN
    one = bucketize([4200.0], quantile_edges([4200.0]), kind="tokens")
    assert one.labels == ("4.2k",) and one.counts == (1,)
    nan = bucketize([np.nan, 3.0], quantile_edges([np.nan, 3.0], integer=True), kind="count")
    assert list(nan.codes) == [-1, 0] and nan.labels == ("3",)
    # paper edges: empty buckets are left off
    pb = bucketize([1000, 2000, 30000], [5000, 10000, 15000, 20000], kind="tokens")
    assert pb.labels == ("<5k", "20k+") and pb.counts == (2, 1)


def _png_shape(path) -> tuple[int, ...]:
    import matplotlib.image as mpimg

    return mpimg.imread(path).shape


def _digest(paths) -> list[str]:
    return [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths]


def test_plots_written_valid_and_identical_on_rerun(tmp_path):
    scores, feats = make_scores(), make_features()
    paths = plot_metric_vs_buckets(scores, feats, tmp_path / "a", dpi=50)
    assert [p.name for p in paths] == [f"{m}_vs_buckets.png" for m in METRICS]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        h, w, _ = _png_shape(p)
        assert (w, h) == (750, 260)  # figsize (15, 5.2) at dpi 50
    again = plot_metric_vs_buckets(scores, feats, tmp_path / "a", dpi=50)
    assert _digest(paths) == _digest(again)
    other_dir = plot_metric_vs_buckets(scores.sample(frac=1.0, random_state=1), feats, tmp_path / "b", dpi=50)
    assert _digest(paths) == _digest(other_dir)
    assert not list((tmp_path / "a").glob(".*.tmp"))
    paper = plot_metric_vs_buckets(
        scores, feats, tmp_path / "p", dpi=50, bucketing="paper", metrics=["coverage"]
    )
    assert [p.name for p in paper] == ["coverage_vs_buckets.png"]
    assert _digest(paper) != _digest(paths[1:2])


def test_plots_degenerate_inputs(tmp_path):
    feats = make_features()
    # one system, one instance
    one = make_scores(n_inst=1, systems=("solo",))
    paths = plot_metric_vs_buckets(one, feats, tmp_path / "one", dpi=40)
    assert len(paths) == 3 and all(_png_shape(p)[0] > 0 for p in paths)
    # a metric all-NaN, an instance with no features, an extra metric
    scores = make_scores(n_inst=6, systems=("a", "b"))
    scores.loc[scores["metric"] == "faithfulness", "value"] = np.nan
    extra = scores[scores["metric"] == "structure"].assign(metric="teds/table")
    scores = pd.concat([scores, extra, scores.iloc[:1].assign(instance_id="nofeat")], ignore_index=True)
    paths = plot_metric_vs_buckets(scores, feats, tmp_path / "nan", dpi=40)
    assert [p.name for p in paths] == [
        "structure_vs_buckets.png",
        "coverage_vs_buckets.png",
        "faithfulness_vs_buckets.png",
        "teds_table_vs_buckets.png",
    ]
    assert all(_png_shape(p)[:2] == (208, 600) for p in paths)
    with pytest.raises(ValueError, match="features lacks"):
        plot_metric_vs_buckets(scores, feats.drop(columns=["gold_tables"]), tmp_path / "x")


def test_plot_title_on_top_and_ci_bands():
    """Each figure has its title above the panels and, per system, a band of the bootstrap CI of each
    bucket's mean (the leaderboard's bootstrap_ci, seeded per system, feature bucket and metric)."""
    from matplotlib.collections import PolyCollection

    scores, feats = make_scores(systems=("alpha", "gold")), make_features()
    figs = metric_figures(scores, feats, metrics=["coverage"], seed=3, n_resamples=300)
    fig = figs["coverage"]
    fig.canvas.draw()
    title = fig._suptitle
    assert title.get_text().startswith("coverage: mean per system") and "95% bootstrap CI" in title.get_text()
    top = max(ax.get_position().y1 for ax in fig.axes)
    assert title.get_window_extent().y0 > top * fig.bbox.height  # above every panel
    ax = fig.axes[0]
    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    lines = [ln for ln in ax.get_lines() if ln.get_label() in ("alpha", "gold")]
    assert len(bands) == 2 and [ln.get_label() for ln in lines] == ["alpha", "gold"]
    # the first gold-length bucket of alpha: mean on the line, CI as the band's edges at x = 0
    edges = quantile_edges(feats["gold_tokens"], max_buckets=5)
    codes = bucketize(feats["gold_tokens"], edges).codes
    ids = set(feats.loc[codes == 0, "instance_id"])
    alpha = scores[(scores.system == "alpha") & (scores.metric == "coverage") & scores.instance_id.isin(ids)]
    vals = alpha.sort_values("instance_id")["value"].to_numpy()
    mean, low, high = bootstrap_ci(
        vals, n_resamples=300, seed=cell_seed(3, "alpha", "gold_tokens#0", "coverage")
    )
    assert low < mean < high
    assert lines[0].get_ydata()[0] == pytest.approx(mean)
    ys_at_0 = [y for x, y in bands[0].get_paths()[0].vertices if abs(x) < 1e-9]
    assert min(ys_at_0) == pytest.approx(low) and max(ys_at_0) == pytest.approx(high)
