"""Leaderboard with seeded bootstrap CIs and metric-vs-bucket plots (tasks/score/leaderboard.py, plots.py)."""

from __future__ import annotations

import hashlib
import io
import re
import warnings

import numpy as np
import pandas as pd
import pytest

from tasks.score.leaderboard import (
    BOARD_COLUMNS,
    bootstrap_ci,
    cell_seed,
    leaderboard,
    leaderboard_csv,
    leaderboard_markdown,
)
from tasks.score.plots import bucketize, plot_metric_vs_buckets, quantile_edges

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


def test_markdown_bold_best_per_column():
    scores = make_scores(systems=("alpha", "beta", "gamma|x"))
    board = leaderboard(scores, n_resamples=300, seed=2)
    md = leaderboard_markdown(board)
    assert "percentile bootstrap" in md and "300 resamples" in md and "seed 2" in md
    assert "Overall 16" in md and "Financial Qtr. 4" in md
    for metric in METRICS:
        rows = _table(md, metric)
        header, body = rows[0], rows[2:]
        assert header == [
            "System",
            "Overall",
            "Financial Qtr.",
            "Financial Ann.",
            "Academic Simp.",
            "Academic Comp.",
        ]
        assert [r[0] for r in body] == ["alpha", "beta", "gamma\\|x"]
        for j, scope in enumerate(["overall", *CATS], start=1):
            bold = [r[0] for r in body if r[j].startswith("**")]
            sub = board[(board["metric"] == metric) & (board["scope"] == scope)]
            best = sub.loc[sub["mean"].idxmax(), "system"]
            assert bold == [best.replace("|", "\\|")]
            for r in body:
                assert re.fullmatch(r"\**\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]\**", r[j])
    # the requested row order is honoured
    md2 = leaderboard_markdown(board, systems=["gamma|x", "alpha"])
    assert [r[0] for r in _table(md2, "coverage")[2:]] == ["gamma\\|x", "alpha", "beta"]


def test_markdown_ties_bold_all():
    scores = make_scores(n_inst=4, systems=("a", "b"))
    scores.loc[scores["system"] == "b", "value"] = scores.loc[scores["system"] == "a", "value"].to_numpy()
    md = leaderboard_markdown(leaderboard(scores, n_resamples=100))
    body = _table(md, "structure")[2:]
    assert all(r[1].startswith("**") for r in body)


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
        assert (w, h) == (750, 230)  # figsize (15, 4.6) at dpi 50
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
    assert all(_png_shape(p)[:2] == (184, 600) for p in paths)
    with pytest.raises(ValueError, match="features lacks"):
        plot_metric_vs_buckets(scores, feats.drop(columns=["gold_tables"]), tmp_path / "x")
