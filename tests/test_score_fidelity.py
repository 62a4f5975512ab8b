"""Table and text fidelity (tasks/score/fidelity/, SPEC §5): hand-computed cases, the Hungarian
assignment, and `frame score --metrics teds,teds_s,text_edit_distance` on the demo release."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tasks.score.fidelity import (
    MATCH_THRESHOLD,
    candidate_scores,
    markdown_tables,
    table_fidelity,
    text_edit_distance,
)
from tests.conftest import frame_env

FRAME = str(Path(sys.executable).with_name("frame"))


def table(*rows: list[str]) -> str:
    head, *body = rows
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines) + "\n"


REVENUE = table(["Segment", "2025", "2024"], ["Cloud", "700", "650"], ["Devices", "300", "280"])
CASH = table(["Item", "June 2025"], ["Cash", "320"], ["Debt", "1,000"])


def test_markdown_tables_become_trees():
    (t,) = markdown_tables("# R\n\nText.\n\n" + REVENUE)
    grid = [[c.text for c in row] for row in t.rows]
    assert grid == [["Segment", "2025", "2024"], ["Cloud", "700", "650"], ["Devices", "300", "280"]]


def test_identical_reports_score_one_and_zero_distance():
    md = "# R\n\n## A\n\n" + REVENUE + "\n## B\n\n" + CASH
    fid = table_fidelity(md, md)
    assert fid.teds == 1.0 and fid.teds_s == 1.0 and len(fid.matches) == 2
    assert text_edit_distance(md, md) == 0.0


def test_hand_computed_teds_with_a_missing_table():
    gold = "# R\n\n" + REVENUE + "\n" + CASH
    changed = REVENUE.replace("650", "651")  # one cell: Levenshtein 1 / 3 characters
    gen = "# R\n\n" + changed
    fid = table_fidelity(gold, gen)
    # tree: 1 table + 3 rows + 9 cells = 13 nodes; one rename costing 1/3 -> TEDS = 1 - (1/3)/13
    (m,) = fid.matches
    assert (m.gold, m.generated) == (0, 0)
    assert m.teds == pytest.approx(1 - (1 / 3) / 13) and m.teds_s == 1.0
    # the unmatched gold table counts 0: mean over 2 (1 matched + 1 missing)
    assert fid.teds == pytest.approx(m.teds / 2) and fid.teds_s == pytest.approx(0.5)
    # a spurious generated table also costs
    fid2 = table_fidelity("# R\n\n" + REVENUE, "# R\n\n" + REVENUE + "\n" + CASH)
    assert fid2.teds == pytest.approx(0.5)
    # no gold table: no table score at all
    assert table_fidelity("# R\n\nText only.", gen).teds is None


def test_assignment_is_global_and_thresholded():
    unrelated = table(["Zeta", "Qux"], ["aaaa", "bbbb"], ["cccc", "dddd"], ["eeee", "ffff"], ["gggg", "hhhh"])
    fid = table_fidelity("# R\n\n" + REVENUE + "\n" + CASH, "# R\n\n" + CASH + "\n" + REVENUE)
    # swapped order: each table still finds its counterpart (content outweighs position)
    assert sorted((m.gold, m.generated) for m in fid.matches) == [(0, 1), (1, 0)]
    lone = table_fidelity("# R\n\n" + CASH, "# R\n\n" + unrelated)
    assert all(m.score >= MATCH_THRESHOLD for m in lone.matches)
    assert lone.teds == (lone.matches[0].teds / 1 if lone.matches else 0.0)


def test_a_table_cut_to_its_first_rows_scores_exactly_its_size_bound():
    """The generated table is the gold table's first two rows: TED = the nodes deleted, so TEDS = TEDS-S =
    n_min / n_max, the ceiling candidate_scores prunes with, and the pair sits just above the threshold."""
    rows = [["Item", "2025", "2024"]] + [[f"Line {k}", f"{k}00", f"{k}50"] for k in range(1, 13)]
    gold, cut = table(*rows), table(*rows[:2])
    fid = table_fidelity("# R\n\n" + gold, "# R\n\n" + cut)
    ratio = (1 + 2 + 6) / (1 + 13 + 39)  # table + rows + cells
    (m,) = fid.matches
    assert m.teds == pytest.approx(ratio) and m.teds_s == pytest.approx(ratio)
    assert m.score == pytest.approx(0.70 * ratio + 0.20 + 0.10) and m.score - MATCH_THRESHOLD < 0.02


def test_text_edit_distance_hand_computed():
    assert text_edit_distance("abc", "abd") == pytest.approx(1 / 3)
    assert text_edit_distance("Revenue  was\n$5", "Revenue was 5") == 0.0  # whitespace and $ delimiters
    assert text_edit_distance("", "") == 0.0
    assert text_edit_distance("abcd", "") == 1.0


def test_demo_release_gold_against_itself(demo_release):
    """Every demo gold report against itself: TEDS 1, TEDS-S 1, text edit distance 0; baselines in range."""
    instances = pd.read_parquet(demo_release / "instances.parquet")
    for inst in instances.itertuples():
        fid = table_fidelity(inst.target_markdown, inst.target_markdown)
        assert fid.n_gold > 0 and fid.teds == 1.0 and fid.teds_s == 1.0, inst.instance_id
        assert len(fid.matches) == fid.n_gold
        assert text_edit_distance(inst.target_markdown, inst.target_markdown) == 0.0
    inst = instances.iloc[0]  # a stale sample (copy-sample) is scored in range, below the ceiling
    stale = table_fidelity(inst.target_markdown, inst.sample_markdown)
    assert (
        0.0 <= stale.teds < 1.0
        and 0.0 < text_edit_distance(inst.target_markdown, inst.sample_markdown) <= 1.0
    )


def all_pairs_scores(g: list, p: list) -> np.ndarray:
    """The documented candidate score of every table pair computed plainly, 0 below the threshold."""
    from rapidfuzz import fuzz

    from tasks.markdown.teds import teds_trees

    pos = [np.arange(n) / (n - 1) if n > 1 else np.zeros(n) for n in (len(g), len(p))]
    text = [[" ".join(" ".join(c.text for c in row) for row in t.rows) for t in ts] for ts in (g, p)]
    score = np.zeros((len(g), len(p)))
    for i, a in enumerate(g):
        for j, b in enumerate(p):
            t, ts = teds_trees(a, b), teds_trees(a, b, structure_only=True)
            s_text = fuzz.partial_ratio(text[0][i], text[1][j]) / 100.0
            s_pos = 1.0 - abs(pos[0][i] - pos[1][j])
            score[i, j] = 0.45 * t + 0.25 * ts + 0.20 * s_text + 0.10 * s_pos
    return np.where(score >= MATCH_THRESHOLD, score, 0.0)


def test_pairs_that_cannot_reach_the_threshold_are_skipped_exactly(demo_release):
    """candidate_scores leaves out the costly parts of pairs whose score cannot reach the threshold (size
    bound, text-similarity cutoff): on the demo reports with the most tables (gold vs. the stale sample and
    back) every pair's score is exactly the plain all-pairs computation's."""
    instances = pd.read_parquet(demo_release / "instances.parquet")
    inst = instances.iloc[int(instances.target_markdown.str.count("\n\\|").argmax())]
    available = bounded = 0
    for gold, gen in (
        (inst.target_markdown, inst.sample_markdown),
        (inst.sample_markdown, inst.target_markdown),
    ):
        g, p = markdown_tables(gold), markdown_tables(gen)
        score, parts = candidate_scores(g, p)
        plain = all_pairs_scores(g, p)
        assert np.array_equal(score, plain), inst.instance_id
        assert set(parts) == set(zip(*np.nonzero(plain), strict=True))
        available += int((plain > 0).sum())
        # pairs the size bound alone rules out (whatever their position): the skip is exercised
        bounded += sum(
            0.70 * min(a.n_nodes, b.n_nodes) / max(a.n_nodes, b.n_nodes) + 0.30 < MATCH_THRESHOLD
            for a in g
            for b in p
        )
    assert available > 20 and bounded > 0


def test_fidelity_through_the_flow(demo_scored, tmp_path):
    """The fidelity family as `frame score` wrote it for the demo release (the session's scoring run):
    values, evidence rows per table, the leaderboard's lower-is-better marking; a bad --metrics name fails
    in one line before any work."""
    out = demo_scored["out"]
    scores = pd.read_parquet(out / "scores.parquet")
    fid = scores[scores.metric.isin(["teds", "teds_s", "text_edit_distance"])]
    m = fid.groupby(["system", "metric"])["value"].mean()
    assert m[("gold", "teds")] == 1.0 and m[("gold", "text_edit_distance")] == 0.0
    # a stale sample (copy-sample) keeps S's tables: matched, but below the ceiling; its text differs
    assert 0 < m[("copy-sample", "teds")] < 1 and 0 < m[("copy-sample", "text_edit_distance")] < 1
    board = (out / "leaderboard.md").read_text()
    assert "text_edit_distance (lower is better)" in board
    evidence = pd.read_parquet(out / "evidence.parquet")
    kinds = evidence[evidence.metric == "teds"].groupby("system")["kind"].apply(set)
    assert kinds["gold"] == {"table"} and kinds["copy-sample"] <= {"table", "spurious_table"}
    bad = subprocess.run(
        [FRAME, "score", "--release", str(demo_scored["release"]), "--metrics", "teds,nope"],
        capture_output=True,
        text=True,
        env=frame_env(tmp_path / "ph"),
    )
    assert bad.returncode == 2 and "--metrics" in bad.stderr and bad.stderr.count("\n") == 1
