"""Judge-human alignment metrics (tasks/score/align.py) against independent computations."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from tasks.errors import FrameInputError
from tasks.score import align

sklearn_metrics = pytest.importorskip("sklearn.metrics")
stats = pytest.importorskip("scipy.stats")

LEVELS = np.array([0.0, 25.0, 50.0, 75.0, 100.0])


# ------------------------------------------------------------------------------------------ helpers


def write_scores(path: Path, scores: dict[str, float], header: str = "item_id,score") -> Path:
    lines = [header] + [f"{k},{v!r}" for k, v in scores.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def make_pair(seed: int, n: int) -> tuple[dict[str, float], dict[str, float]]:
    """Human scores on the grid; judge = human + noise, partly exact (ties), partly off-grid."""
    rng = np.random.default_rng(seed)
    human = rng.choice(LEVELS, size=n)
    judge = human + rng.normal(0.0, 18.0, size=n)
    exact = rng.random(n) < 0.3
    judge[exact] = human[exact]  # exact agreement on some items
    regrid = rng.random(n) < 0.2
    judge[regrid] = rng.choice(LEVELS, size=int(regrid.sum()))  # on-grid disagreements too
    judge = np.clip(judge, 0.0, 100.0)
    return (
        {f"it{i:03d}": float(h) for i, h in enumerate(human)},
        {f"it{i:03d}": float(j) for i, j in enumerate(judge)},
    )


def bin_half_up(x: np.ndarray) -> np.ndarray:
    """Nearest of 0/25/50/75/100 (halves up), as level values, computed from the levels directly."""
    x = np.asarray(x, dtype=float)
    dist = np.abs(x[:, None] - LEVELS[None, :])
    # ties: choose the higher level -> argmin over reversed levels
    idx = 4 - np.argmin(dist[:, ::-1], axis=1)
    return LEVELS[idx]


def icc_reference(h: np.ndarray, j: np.ndarray) -> tuple[float, float]:
    """ICC(3,1) and ICC(A,1) from the two-way ANOVA mean squares written out directly."""
    y = np.column_stack([h, j]).astype(float)
    n, k = y.shape
    gm = y.mean()
    row_means = y.mean(axis=1)
    col_means = y.mean(axis=0)
    msr = k * np.sum((row_means - gm) ** 2) / (n - 1)
    msc = n * np.sum((col_means - gm) ** 2) / (k - 1)
    resid = y - row_means[:, None] - col_means[None, :] + gm
    mse = np.sum(resid**2) / ((n - 1) * (k - 1))
    icc3 = (msr - mse) / (msr + (k - 1) * mse)
    icca = (msr - mse) / (msr + (k - 1) * mse + k * (msc - mse) / n)
    return float(icc3), float(icca)


# ------------------------------------------------------------------------------ randomised vs references


@pytest.mark.parametrize("seed,n", [(0, 40), (1, 200), (7, 13), (42, 500)])
def test_alignment_matches_independent_computations(tmp_path: Path, seed: int, n: int) -> None:
    human, judge = make_pair(seed, n)
    # a few judge-only and human-only items: the join must drop them
    judge["only_judge"] = 50.0
    human["only_human"] = 0.0
    hp = write_scores(tmp_path / "human.csv", human)
    jp = write_scores(tmp_path / "judge.csv", judge)
    got = align.alignment(align.load_scores(hp), align.load_scores(jp))
    assert set(got) == {"pa@0", "pa@25", "qwk", "icc3_1", "icc_a1", "n"}

    ids = sorted(set(human) & set(judge))
    h = np.array([human[i] for i in ids])
    j = np.array([judge[i] for i in ids])
    assert got["n"] == n == len(ids)
    assert got["pa@0"] == pytest.approx(float(np.mean(np.abs(h - j) <= 0)))
    assert got["pa@25"] == pytest.approx(float(np.mean(np.abs(h - j) <= 25)))
    assert 0 < got["pa@0"] < got["pa@25"] < 1  # the fixture really has ties and misses

    hb, jb = bin_half_up(h).astype(int), bin_half_up(j).astype(int)
    ref_qwk = sklearn_metrics.cohen_kappa_score(hb, jb, weights="quadratic", labels=[0, 25, 50, 75, 100])
    assert got["qwk"] == pytest.approx(ref_qwk, abs=1e-12)

    ref3, refa = icc_reference(h, j)
    assert got["icc3_1"] == pytest.approx(ref3, abs=1e-12)
    assert got["icc_a1"] == pytest.approx(refa, abs=1e-12)


def test_icc_matches_pingouin() -> None:
    pg = pytest.importorskip("pingouin")
    pd = pytest.importorskip("pandas")
    human, judge = make_pair(3, 60)
    ids = sorted(human)
    got = align.alignment(human, judge)
    long = pd.DataFrame(
        [{"item": i, "rater": "human", "score": human[i]} for i in ids]
        + [{"item": i, "rater": "judge", "score": judge[i]} for i in ids]
    )
    table = pg.intraclass_corr(data=long, targets="item", raters="rater", ratings="score").set_index("Type")
    # pingouin >= 0.7 uses McGraw-Wong names (ICC(C,1) = Shrout-Fleiss ICC(3,1)); older ones ICC3/ICC2,
    # where ICC2 (two-way random, absolute agreement, single) has the ICC(A,1) formula.
    consistency = "ICC(C,1)" if "ICC(C,1)" in table.index else "ICC3"
    absolute = "ICC(A,1)" if "ICC(A,1)" in table.index else "ICC2"
    assert got["icc3_1"] == pytest.approx(table.loc[consistency, "ICC"], abs=1e-9)
    assert got["icc_a1"] == pytest.approx(table.loc[absolute, "ICC"], abs=1e-9)


def test_qwk_uses_fixed_grid_even_when_levels_absent() -> None:
    # only levels 0, 25 and 100 occur: weights must still follow the 0..4 grid (sklearn with labels)
    human = {"a": 0.0, "b": 25.0, "c": 100.0, "d": 100.0, "e": 0.0}
    judge = {"a": 0.0, "b": 100.0, "c": 100.0, "d": 25.0, "e": 25.0}
    ids = sorted(human)
    ref = sklearn_metrics.cohen_kappa_score(
        [int(human[i]) for i in ids],
        [int(judge[i]) for i in ids],
        weights="quadratic",
        labels=[0, 25, 50, 75, 100],
    )
    assert align.alignment(human, judge)["qwk"] == pytest.approx(ref, abs=1e-12)


@pytest.mark.parametrize("seed", [0, 5, 11])
def test_ranking_agreement_matches_scipy(tmp_path: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    lines = ["group_id,system,human_rank,score"]
    expected_r, expected_tau, total = [], [], 0
    for g in range(12):
        m = int(rng.integers(3, 9))
        quality = rng.normal(size=m)
        ranks = stats.rankdata(-quality, method="min")  # 1 = best, ties share the top rank
        if g % 4 == 0:
            ranks[-1] = ranks[0]  # force a tie in the human ranking
        score = np.round(quality + rng.normal(0, 0.7, size=m), 1)  # rounding makes score ties likely
        if g % 3 == 0:
            score[1] = score[0]
        for s in range(m):
            lines.append(f"q{g},sys{s},{int(ranks[s])},{float(score[s])!r}")
        rho = stats.spearmanr(-ranks, score).statistic
        tau = stats.kendalltau(-ranks, score, variant="b").statistic
        expected_r.append(rho)
        expected_tau.append(tau)
        total += m
    path = tmp_path / "rank.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    got = align.ranking_agreement(path)
    assert set(got) == {"spearman_r", "kendall_tau", "groups", "n"}
    assert got["groups"] == 12 and got["n"] == total
    assert got["spearman_r"] == pytest.approx(float(np.mean(expected_r)), abs=1e-12)
    assert got["kendall_tau"] == pytest.approx(float(np.mean(expected_tau)), abs=1e-12)


# ------------------------------------------------------------------------------------ hand-computed cases


def test_tiny_hand_case() -> None:
    # human 0,50,100 ; judge 10,50,60
    human = {"a": 0.0, "b": 50.0, "c": 100.0}
    judge = {"a": 10.0, "b": 50.0, "c": 60.0}
    got = align.alignment(human, judge)
    assert got["n"] == 3
    assert got["pa@0"] == pytest.approx(1 / 3)
    assert got["pa@25"] == pytest.approx(2 / 3)
    # binned judge: 10 -> 0, 50 -> 50, 60 -> 50 ; levels h=(0,2,4) j=(0,2,2)
    # observed weighted disagreement: (4-2)^2/16 = 0.25 ; expected: marginals h {0,2,4}, j {0:1, 2:2}
    # E = sum_{i,j} w_ij r_i c_j / n = (1/3)*[(0,0)*1 + (0,2)*2 + (2,0)*1 + (2,2)*2 + (4,0)*1 + (4,2)*2]/16
    e = (0 + 2 * 4 + 4 + 0 + 16 + 2 * 4) / 16 / 3
    assert got["qwk"] == pytest.approx(1 - 0.25 / e)
    # ICC by hand: rows means 5, 50, 80 ; grand mean 45 ; col means 50, 40
    msr = 2 * ((5 - 45) ** 2 + (50 - 45) ** 2 + (80 - 45) ** 2) / 2  # = 2850
    msc = 3 * ((50 - 45) ** 2 + (40 - 45) ** 2) / 1  # = 150
    sst = sum((v - 45) ** 2 for v in (0, 50, 100, 10, 50, 60))  # = 6550
    mse = (sst - 2 * msr - msc) / 2  # SSR = 2 * MSR (df 2), SSC = MSC (df 1), df_E = 2 -> 350
    assert (msr, msc, mse) == (2850, 150, 350)
    assert got["icc3_1"] == pytest.approx((2850 - 350) / (2850 + 350))
    assert got["icc_a1"] == pytest.approx((2850 - 350) / (2850 + 350 + 2 / 3 * (150 - 350)))


def test_perfect_agreement() -> None:
    human = {"a": 0.0, "b": 25.0, "c": 75.0, "d": 100.0}
    got = align.alignment(human, dict(human))
    assert got == {"pa@0": 1.0, "pa@25": 1.0, "qwk": 1.0, "icc3_1": 1.0, "icc_a1": 1.0, "n": 4}


def test_constant_shift_consistency_vs_agreement() -> None:
    human = {"a": 0.0, "b": 25.0, "c": 50.0, "d": 75.0}
    judge = {k: v + 20.0 for k, v in human.items()}
    got = align.alignment(human, judge)
    assert got["icc3_1"] == pytest.approx(1.0)  # consistency ignores the shift
    assert got["icc_a1"] < 1.0  # absolute agreement does not
    assert got["pa@0"] == 0.0 and got["pa@25"] == 1.0


def test_binning_rounds_half_up() -> None:
    assert align.bin_score(np.array([0, 12.4, 12.5, 37.5, 62.5, 87.5, 99.9, 100])).tolist() == [
        0,
        0,
        1,
        2,
        3,
        4,
        4,
        4,
    ]


# ------------------------------------------------------------------------------------------- degenerate


def test_degenerate_identical_constant() -> None:
    got = align.alignment({"a": 50.0, "b": 50.0}, {"a": 50.0, "b": 50.0})
    assert got["qwk"] == 1.0
    assert got["icc3_1"] is None and got["icc_a1"] is None
    assert got["pa@0"] == 1.0


def test_degenerate_different_constants() -> None:
    got = align.alignment({"a": 50.0, "b": 50.0, "c": 50.0}, {"a": 75.0, "b": 75.0, "c": 75.0})
    assert got["qwk"] == 0.0
    assert got["icc3_1"] is None  # 0 / 0
    assert got["icc_a1"] == 0.0  # 0 / (k/n * MSC): defined, no agreement beyond the rater offset


def test_degenerate_one_rater_constant() -> None:
    got = align.alignment({"a": 50.0, "b": 50.0, "c": 50.0}, {"a": 0.0, "b": 50.0, "c": 100.0})
    assert got["qwk"] == pytest.approx(0.0)
    assert got["icc3_1"] == pytest.approx(0.0)
    assert all(v is None or math.isfinite(v) for v in got.values())


def test_degenerate_single_item() -> None:
    got = align.alignment({"a": 25.0}, {"a": 30.0})
    assert got["n"] == 1 and got["icc3_1"] is None and got["icc_a1"] is None
    assert got["qwk"] is None  # one item: no agreement to measure (it used to be a confident 1.0)


def test_ranking_perfect_reversed_and_degenerate_groups(tmp_path: Path) -> None:
    path = tmp_path / "rank.csv"
    path.write_text(
        "group_id,system,human_rank,score\n"
        "g1,a,1,0.9\ng1,b,2,0.5\ng1,c,3,0.1\n"  # perfect: +1
        "g2,a,1,0.1\ng2,b,2,0.5\ng2,c,3,0.9\n"  # reversed: -1
        "g3,a,1,0.3\n"  # single system: skipped
        "g4,a,1,0.3\ng4,b,2,0.3\n",  # constant score: skipped
        encoding="utf-8",
    )
    got = align.ranking_agreement(path)
    assert got == {"spearman_r": 0.0, "kendall_tau": 0.0, "groups": 2, "n": 6}
    path.write_text("group_id,system,human_rank,score\ng1,a,1,0.9\ng1,b,2,0.5\n", encoding="utf-8")
    assert align.ranking_agreement(path) == {"spearman_r": 1.0, "kendall_tau": 1.0, "groups": 1, "n": 2}
    path.write_text("group_id,system,human_rank,score\ng1,a,1,0.9\n", encoding="utf-8")
    assert align.ranking_agreement(path) == {"spearman_r": None, "kendall_tau": None, "groups": 0, "n": 0}


# ---------------------------------------------------------------------------------------------- JSON


def test_main_json_and_rankings_json(tmp_path: Path) -> None:
    hp = write_scores(tmp_path / "h.csv", {"a": 0.0, "b": 50.0, "c": 100.0})
    jp = write_scores(tmp_path / "j.csv", {"a": 10.0, "b": 50.0, "c": 60.0})
    text = align.main_json(hp, jp)
    data = json.loads(text)
    assert list(data) == sorted(data)
    assert data["pa@0"] == round(1 / 3, 6) and data["n"] == 3
    assert data["icc3_1"] == round((2850 - 350) / (2850 + 350), 6)
    const = write_scores(tmp_path / "c.csv", {"a": 50.0, "b": 50.0})
    assert json.loads(align.main_json(const, const))["icc3_1"] is None
    rp = tmp_path / "r.csv"
    rp.write_text("group_id,system,human_rank,score\ng,a,1,3\ng,b,2,1\ng,c,3,2\n", encoding="utf-8")
    rdata = json.loads(align.rankings_json(rp))
    assert list(rdata) == sorted(rdata)
    assert rdata == {"groups": 1, "kendall_tau": round(1 / 3, 6), "n": 3, "spearman_r": 0.5}


# --------------------------------------------------------------------------------------------- errors


def _error(fn, *args) -> str:
    with pytest.raises(FrameInputError) as info:
        fn(*args)
    msg = str(info.value)
    assert "\n" not in msg
    return msg


def test_load_scores_errors(tmp_path: Path) -> None:
    missing = tmp_path / "nope.csv"
    assert "not found" in _error(align.load_scores, missing) and "nope.csv" in _error(
        align.load_scores, missing
    )

    p = tmp_path / "s.csv"
    p.write_text("id,score\na,1\n", encoding="utf-8")
    assert "missing column(s) item_id" in _error(align.load_scores, p)

    p.write_text("item_id,score\na,10\nb,high\n", encoding="utf-8")
    msg = _error(align.load_scores, p)
    assert "line 3" in msg and "'high'" in msg

    p.write_text("item_id,score\na,10\nb,nan\n", encoding="utf-8")
    assert "line 3" in _error(align.load_scores, p)

    p.write_text("item_id,score\na,10\nb,100.5\n", encoding="utf-8")
    msg = _error(align.load_scores, p)
    assert "line 3" in msg and "item_id=b" in msg and "outside 0-100" in msg

    p.write_text("item_id,score\na,-1\n", encoding="utf-8")
    assert "outside 0-100" in _error(align.load_scores, p)

    p.write_text("item_id,score\na,10\nb,20\na,30\n", encoding="utf-8")
    msg = _error(align.load_scores, p)
    assert "duplicate item_id 'a'" in msg and "line 4" in msg and "line 2" in msg

    p.write_text("item_id,score\n,10\n", encoding="utf-8")
    assert "empty item_id" in _error(align.load_scores, p)

    p.write_text("", encoding="utf-8")
    assert "empty file" in _error(align.load_scores, p)

    p.write_text("item_id,score\n", encoding="utf-8")
    assert "no data rows" in _error(align.load_scores, p)

    p.write_text("item_id,score\na,1,2\n", encoding="utf-8")
    assert "3 fields" in _error(align.load_scores, p)


def test_load_scores_ok_with_bom_extra_columns_blank_lines(tmp_path: Path) -> None:
    p = tmp_path / "s.csv"
    p.write_text("\ufeffnote,item_id,score\nx, a ,25\n\ny,b,100\n", encoding="utf-8")
    assert align.load_scores(p) == {"a": 25.0, "b": 100.0}


def test_empty_join_errors(tmp_path: Path) -> None:
    assert "no item_id in common" in _error(align.alignment, {"a": 1.0}, {"b": 1.0})
    hp = write_scores(tmp_path / "h.csv", {"a": 0.0})
    jp = write_scores(tmp_path / "j.csv", {"b": 0.0})
    msg = _error(align.main_json, hp, jp)
    assert "j.csv" in msg and "h.csv" in msg and "no item_id in common" in msg


def test_ranking_errors(tmp_path: Path) -> None:
    p = tmp_path / "r.csv"
    assert "not found" in _error(align.ranking_agreement, tmp_path / "none.csv")
    p.write_text("group_id,system,score\ng,a,1\n", encoding="utf-8")
    assert "missing column(s) human_rank" in _error(align.ranking_agreement, p)
    p.write_text("group_id,system,human_rank,score\ng,a,first,1\n", encoding="utf-8")
    msg = _error(align.ranking_agreement, p)
    assert "line 2" in msg and "human_rank" in msg
    p.write_text("group_id,system,human_rank,score\ng,a,1,1\ng,a,2,3\n", encoding="utf-8")
    msg = _error(align.ranking_agreement, p)
    assert "duplicate system 'a' in group 'g'" in msg and "line 3" in msg
