"""`tasks.meta.judge` (paper 000 Table 5): the shipped demo coverage annotations and faithfulness items of a
real `frame score` run, re-judged by the offline judge and by the LLM judge over the local test server;
agreement tables against the human scores and between the judges; bad inputs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

import tests.llm_server as fake_llm
from schemas.scoring import ScoreSettings
from tasks.errors import FrameInputError
from tasks.meta.judge import (
    TABLE_COLUMNS,
    ReleaseSource,
    judge_items,
    judge_json,
    judge_table,
    load_annotations,
    make_judges,
)
from tasks.score.align import alignment, load_scores
from tasks.score.annotate import annotation_sheets
from tasks.score.metric import JudgeEnv
from tests.llm_server import fast_settings, json_reply

llm_server = fake_llm.llm_server

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "data" / "annotations" / "demo-0.1.0" / "coverage"
KEY_ENV = "FRAME_TEST_META_JUDGE_KEY"
FAITHFULNESS_ITEMS = 8


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def demo(demo_scored, tmp_path_factory):
    """The scored demo run, a judge cache whose embeddings are that run's (so nothing is embedded again),
    and an annotation folder holding the shipped coverage sheet plus a faithfulness sheet of that run
    whose "human" scores are the judge's scores rounded to the 0/25/50/75/100 grid."""
    tmp = tmp_path_factory.mktemp("meta-judge")
    cache = tmp / "cache"
    cache.mkdir()
    (cache / "embeddings").symlink_to(demo_scored["cache"] / "embeddings", target_is_directory=True)
    evidence = pd.read_parquet(demo_scored["out"] / "evidence.parquet")
    items, judge = annotation_sheets(
        evidence, "faithfulness", FAITHFULNESS_ITEMS, seed=1, systems=["copy-sample", "extractive"]
    )
    human = judge.assign(score=(judge["score"] / 25).round() * 25)
    sheet = pd.concat(
        [pd.read_csv(SHIPPED / "items.csv", dtype=str, keep_default_na=False), items.astype(str)]
    )
    folder = tmp / "annotations"
    folder.mkdir()
    sheet.to_csv(folder / "items.csv", index=False)
    pd.concat([pd.read_csv(SHIPPED / "human.csv"), human]).to_csv(folder / "human.csv", index=False)
    scored = evidence.set_index("item_id")["score"] * 100
    return {"release": demo_scored["release"], "cache": cache, "folder": folder, "scored": scored}


def _env(cache: Path, llm=None) -> JudgeEnv:
    return JudgeEnv(ScoreSettings(), llm, cache)


@pytest.fixture(scope="module")
def offline(demo):
    """One offline judge for the module: its grounding sets are built once."""
    return make_judges(_env(demo["cache"]))


# ---------------------------------------------------------------- the offline judge on real items


def test_offline_judge_reproduces_the_shipped_coverage_judge(demo, offline):
    ann = load_annotations(SHIPPED / "human.csv")
    assert len(ann) == 40 and set(ann["metric"]) == {"coverage"}
    source = ReleaseSource(demo["release"])
    judged = judge_items(ann, offline, source)
    assert list(judged.columns) == ["item_id", "metric", "judge", "judge_name", "score", "rationale"]
    assert judged["judge_name"].unique().tolist() == ["offline:number-aware+all-MiniLM-L6-v2@128"]
    shipped = load_scores(SHIPPED / "judge.csv")  # the judge's scores when the sheet was exported (x100)
    got = dict(zip(judged["item_id"], judged["score"], strict=True))
    assert got.keys() == shipped.keys()
    assert max(abs(got[k] - shipped[k]) for k in got) <= 0.01
    table = judge_table(ann, judged)
    assert list(table.columns) == list(TABLE_COLUMNS) and len(table) == 1
    row = table.iloc[0]
    want = alignment(load_scores(SHIPPED / "human.csv"), shipped)
    assert (row["metric"], row["judge"], row["against"], row["n"]) == ("coverage", "offline", "human", 40)
    for col, key in (("pa0", "pa@0"), ("pa25", "pa@25"), ("qwk", "qwk"), ("icc", "icc3_1")):
        assert row[col] == pytest.approx(want[key], abs=1e-3)


def test_offline_judge_reproduces_the_faithfulness_items_of_the_run(demo, offline):
    ann = load_annotations(demo["folder"] / "human.csv")
    faith = ann[ann["metric"] == "faithfulness"]
    assert len(faith) == FAITHFULNESS_ITEMS and set(faith["system"]) == {"copy-sample", "extractive"}
    judged = judge_items(faith, offline, ReleaseSource(demo["release"]))
    for item_id, score in zip(judged["item_id"], judged["score"], strict=True):
        assert score == pytest.approx(demo["scored"][item_id], abs=1e-4), item_id  # both stages, as scored
    row = judge_table(faith, judged).iloc[0]
    assert row["metric"] == "faithfulness" and row["n"] == FAITHFULNESS_ITEMS
    assert row["pa25"] == 1.0 and row["qwk"] == 1.0  # the "human" is the judge rounded to the grid


# ---------------------------------------------------------------- two judge families


def _section(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


def _flat(text: str) -> str:
    return " ".join(text.split())


def fake_model(req) -> fake_llm.Reply:
    """A test model: a coverage unit scores 1 when its text is in the report it was sent, else 0; a claim
    scores 0.9 (even id) or 0.3 (odd id) in stage 1 and 0.6 in stage 2."""
    system, user = req.messages[0]["content"], req.messages[-1]["content"]
    if "conveys given pieces of information" in system:
        report = _flat(_section(user, "<<<GENERATED REPORT", "GENERATED REPORT>>>"))
        units = [json.loads(x) for x in _section(user, "to grade:\n", "\n\nGrade each").splitlines()]
        judgments = [
            {"unit_id": u["unit_id"], "score": float(_flat(u["content"]) in report), "rationale": "t"}
            for u in units
        ]
        return json_reply({"judgments": judgments})
    stage2 = "second, deeper look" in system
    ids = [int(i) for i in re.findall(r"^### Claim (\d+)$", user, re.M)]
    verdicts = [{"claim_id": i, "score": 0.6 if stage2 else (0.9 if i % 2 == 0 else 0.3)} for i in ids]
    return json_reply({"verdicts": verdicts})


def test_llm_and_offline_judges_against_humans_and_each_other(demo, offline, llm_server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "test-key")
    llm_server.default_chat = fake_model
    env = _env(demo["cache"], fast_settings(llm_server, KEY_ENV))
    ann = load_annotations(demo["folder"] / "human.csv")
    source = ReleaseSource(demo["release"])
    judges = {**offline, **make_judges(env, ["openai"])}
    judged = judge_items(ann, judges, source)
    assert len(judged) == 2 * len(ann) and list(dict.fromkeys(judged["judge"])) == ["offline", "openai"]
    llm = judged[judged["judge"] == "openai"].merge(ann, on=["item_id", "metric"])
    assert set(llm["judge_name"]) == {"openai:test-model"}
    for r in llm.itertuples():
        if r.metric == "coverage":  # the unit against the report of its own system
            want = 100.0 * (_flat(r.text) in _flat(source.report(r.instance_id, r.system)))
        else:  # stage 2 for the claims below 0.75 in stage 1
            want = 90.0 if r.index % 2 == 0 else 60.0
        assert r.score == pytest.approx(want), r.item_id
    assert {0.0, 100.0} <= set(llm.loc[llm["metric"] == "coverage", "score"])
    cov_requests = [r for r in llm_server.chat_requests if "GENERATED REPORT" in r.messages[-1]["content"]]
    reports = ann[ann["metric"] == "coverage"].groupby(["instance_id", "system"])
    assert len(cov_requests) == reports.ngroups  # one request per report: its units in one batch

    table = judge_table(ann, judged)
    keys = [tuple(x) for x in table[["metric", "judge", "against"]].to_numpy()]
    assert keys == [
        ("coverage", "offline", "human"),
        ("coverage", "openai", "human"),
        ("coverage", "openai", "offline"),
        ("faithfulness", "offline", "human"),
        ("faithfulness", "openai", "human"),
        ("faithfulness", "openai", "offline"),
    ]
    cov = judged[judged["metric"] == "coverage"]
    by = {j: dict(zip(g["item_id"], g["score"], strict=True)) for j, g in cov.groupby("judge")}
    want = alignment(by["offline"], by["openai"])
    row = table.iloc[2]
    assert (
        row["n"] == 40
        and row["pa25"] == pytest.approx(want["pa@25"])
        and row["qwk"] == pytest.approx(want["qwk"])
    )
    data = json.loads(judge_json(table, judged))
    assert data["judges"]["openai"] == {"coverage": "openai:test-model", "faithfulness": "openai:test-model"}
    assert len(data["table"]) == 6


# ---------------------------------------------------------------- pure parts and bad input


def test_judge_table_by_hand():
    ann = pd.DataFrame(
        {"item_id": list("abcd"), "metric": ["coverage"] * 4, "human": [0.0, 25.0, 75.0, 100.0]}
    )
    judged = pd.DataFrame(
        {
            "item_id": list("abcd") * 2,
            "metric": ["coverage"] * 8,
            "judge": ["x"] * 4 + ["y"] * 4,
            "score": [0.0, 25.0, 75.0, 100.0, 10.0, 50.0, 50.0, 90.0],
        }
    )
    table = judge_table(ann, judged).set_index(["judge", "against"])
    assert table.loc[("x", "human"), "pa0"] == 1.0 and table.loc[("x", "human"), "qwk"] == 1.0
    assert table.loc[("y", "human"), "pa0"] == 0.0 and table.loc[("y", "human"), "pa25"] == 1.0
    assert table.loc[("y", "x")].drop("metric").equals(table.loc[("y", "human")].drop("metric"))  # x == human
    assert list(table.index) == [("x", "human"), ("y", "human"), ("y", "x")]


def _sheet(folder: Path, rows: list[dict], scores: dict[str, float]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(folder / "items.csv", index=False)
    pd.DataFrame({"item_id": list(scores), "score": list(scores.values())}).to_csv(
        folder / "human.csv", index=False
    )
    return folder / "human.csv"


def _row(item_id: str, iid: str = "fq/ACME/Q1->Q2", system: str = "extractive") -> dict:
    return {
        "item_id": item_id,
        "instance_id": iid,
        "system": system,
        "kind": "claim",
        "text": "t",
        "source": "s",
    }


def test_annotations_bad_input(tmp_path):
    good = "fq/ACME/Q1->Q2|extractive|faithfulness|3"
    ann = load_annotations(_sheet(tmp_path / "ok", [_row(good), _row(good[:-1] + "4")], {good: 50}))
    assert ann[["metric", "index", "human"]].to_dict("records") == [
        {"metric": "faithfulness", "index": 3, "human": 50.0}
    ]  # the item without a human score is left out
    cases = [
        ([_row(good)], {"fq/ACME/Q1->Q2|extractive|faithfulness|9": 0}, "is not in the annotation sheet"),
        ([_row("fq/ACME/Q1->Q2|extractive|rubric|3")], {"fq/ACME/Q1->Q2|extractive|rubric|3": 0}, "rubric"),
        ([_row("x|extractive|coverage|3")], {"x|extractive|coverage|3": 0}, "is not <instance_id>"),
        ([_row(good)], {good: 120}, "outside 0-100"),
        ([_row(good), _row(good)], {good: 0}, "duplicate item_id"),
    ]
    for k, (rows, scores, needle) in enumerate(cases):
        with pytest.raises(FrameInputError, match=re.escape(needle)):
            load_annotations(_sheet(tmp_path / f"bad{k}", rows, scores))
    (tmp_path / "lonely").mkdir()
    pd.DataFrame({"item_id": [good], "score": [0]}).to_csv(tmp_path / "lonely" / "h.csv", index=False)
    with pytest.raises(FrameInputError, match="items.csv: missing: the annotation sheet"):
        load_annotations(tmp_path / "lonely" / "h.csv")


@pytest.fixture
def tiny_release(tmp_path) -> Path:
    release = tmp_path / "data" / "releases" / "tiny" / "1.0.0"
    release.mkdir(parents=True)
    pd.DataFrame(
        {
            "instance_id": ["fq/ACME/Q1->Q2"],
            "grounding_set_id": ["fq/ACME/Q2"],
            "grounding_doc_ids": [["d1"]],
            "sample_markdown": ["# Acme Q1\n\nRevenue was 10."],
            "target_markdown": ["# Acme Q2\n\nRevenue was 12."],
        }
    ).to_parquet(release / "instances.parquet")
    pd.DataFrame(
        {
            "grounding_set_id": ["fq/ACME/Q2"],
            "doc_id": ["d1"],
            "title": ["MD&A"],
            "markdown": ["Revenue was 12."],
        }
    ).to_parquet(release / "grounding_documents.parquet")
    return release


def test_release_source(tiny_release, tmp_path):
    src = ReleaseSource(tiny_release)
    iid = "fq/ACME/Q1->Q2"
    assert src.report(iid, "gold") == "# Acme Q2\n\nRevenue was 12."
    assert src.report(iid, "copy-sample") == "# Acme Q1\n\nRevenue was 10."  # builtin, regenerated
    assert [(d.doc_id, d.markdown) for d in src.grounding(iid)] == [("d1", "Revenue was 12.")]
    with pytest.raises(FrameInputError, match="no report of system 'mine' for fq/ACME/Q1->Q2"):
        src.report(iid, "mine")
    loose = tmp_path / "data" / "generations" / "tiny" / "1.0.0" / "mine" / "reports"
    loose.mkdir(parents=True)
    (loose / "fq_ACME_Q1__Q2.md").write_text("# Mine\n", encoding="utf-8")  # frame generate's file name
    assert ReleaseSource(tiny_release).report(iid, "mine") == "# Mine\n"
    with pytest.raises(FrameInputError, match="no instance 'nope'"):
        src.report("nope", "gold")
    gens = tmp_path / "gens" / "mine"
    gens.mkdir(parents=True)
    pd.DataFrame(
        {
            "instance_id": [iid],
            "system": ["mine"],
            "markdown": [""],
            "metadata_json": ["{}"],
            "error": ["boom"],
        }
    ).to_parquet(gens / "generations.parquet")
    with pytest.raises(FrameInputError, match="boom"):
        ReleaseSource(tiny_release, tmp_path / "gens").report(iid, "mine")


def test_make_judges_bad_input(tmp_path):
    with pytest.raises(FrameInputError, match="unknown judge 'gpt'"):
        make_judges(_env(tmp_path), ["gpt"])
    with pytest.raises(FrameInputError, match="FRAME_LLM_BACKEND=openai"):
        make_judges(_env(tmp_path), ["openai"])
