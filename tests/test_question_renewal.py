"""Issue 34 point 2: the guiding questions of a form-restricted snapshot t+1 are about the documents of
t+1 (offline and OpenAI backends), and `frame qa gold` counts questions naming entities absent from the
snapshot's G (tasks/markdown/entities.py, tasks/release/qa_questions.py)."""

from __future__ import annotations

import csv
import html
import json
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tests.llm_server as fake_llm
from schemas.release import RELEASE_SCHEMA_VERSION
from schemas.structure import ReportStructure
from tasks.llm.backend import StepContext
from tasks.markdown.entities import Haystack, absent_entities, named_entities
from tasks.release.qa_questions import absent_in_structures, check_questions
from tests.conftest import CORPUS, frame_env
from tests.llm_server import json_reply
from tests.test_openai_backend import KEY_ENV, SECRET, gset, make_backend

llm_server = fake_llm.llm_server  # the pytest fixture (a started local server), used by name below

FRAME = str(Path(sys.executable).with_name("frame"))
TOPIC = "large-language-models"
WINDOWS = {
    "W1": ("2017-01-01", "2018-12-31"),
    "W2": ("2023-01-01", "2024-12-31"),
    "W3": ("2025-01-01", "2025-12-31"),
}
FILING = ("GOOGL", "10-Q", ["2023-06-30", "2023-09-30", "2024-03-31"])


# ---------------------------------------------------------------- the entity extractor


@pytest.mark.parametrize(
    "text",
    [
        "What are the main findings reported under overview?",
        "What are the main points the filing makes about liquidity?",
        "How did net sales change compared with the prior period?",
        "Which methods are discussed under research themes?",
    ],
)
def test_generic_questions_name_no_entity(text):
    assert named_entities(text) == []


def test_headings_are_read_without_their_capitals():
    assert named_entities("Segment Information and Selected Notes", heading=True) == []
    assert [e.text for e in named_entities("BERT: Pre-training of Deep Transformers", heading=True)] == [
        "BERT"
    ]


def test_entities_of_a_question_and_whether_documents_name_them():
    q = "How did 'Attention Is All You Need' and BloombergGPT compare on Q3 2024 and June 30, 2022?"
    assert [(e.kind, e.text) for e in named_entities(q)] == [
        ("quoted", "Attention Is All You Need"),
        ("name", "BloombergGPT"),
        ("period", "2024"),
        ("period", "June 30, 2022"),
    ]
    hay = Haystack(["BloombergGPT was trained in 2024 (three months ended June 30, 2022)."])
    assert [e.text for e in absent_entities(q, hay)] == ["Attention Is All You Need"]


# ---------------------------------------------------------------- the check on hand-built tables


def _structure(report_id: str, snapshot: str, questions: list[str], title: str = "Overview") -> dict:
    node = {"id": "s1", "type": "section", "title": title, "questions": questions, "children": []}
    return {"report_id": report_id, "domain": TOPIC, "snapshot": snapshot, "nodes": [node]}


G_W2 = [
    {
        "domain": TOPIC,
        "snapshot": "W2",
        "title": "BloombergGPT: A Large Language Model for Finance",
        "markdown": "# BloombergGPT\n\nWe train BloombergGPT.\n\n## References\n\n"
        "Vaswani et al. Attention Is All You Need. 2017.\n",
    },
]


def test_the_check_counts_a_question_naming_a_title_absent_from_g():
    """The demo release shipped before this fix: W2 questions about W1's "Attention Is All You Need",
    which W2's papers cite only in their reference lists."""
    old = _structure(
        "llm/W2",
        "W2",
        ["What problem does “Attention Is All You Need” address?", "What problem does BloombergGPT address?"],
        title="Attention Is All You Need",  # a node titled by a W1 paper is read as a heading: no run
    )
    (found,) = absent_in_structures([old], G_W2)
    assert (found.questions, found.titles, found.entities) == (1, 0, ("Attention Is All You Need",))
    new = _structure("llm/W2", "W2", ["What problem does BloombergGPT address?", "What data does it use?"])
    assert absent_in_structures([new], G_W2) == []
    titled = _structure("llm/W2", "W2", [], title="BERT: Pre-training of Deep Bidirectional Transformers")
    (found,) = absent_in_structures([titled], G_W2)
    assert (found.questions, found.titles, found.entities) == (0, 1, ("BERT",))


def _hand_release(folder: Path, questions: list[str]) -> None:
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps({"schema_version": RELEASE_SCHEMA_VERSION}))
    instance = {
        "instance_id": f"academic_simple/{TOPIC}/W1->W2",
        "category": "academic_simple",
        "domain": TOPIC,
        "t_sample": "W1",
        "t_target": "W2",
        "target_report_id": f"{TOPIC}/W2",
    }
    tables = {
        "instances": [instance],
        "reports": [
            {"report_id": f"{TOPIC}/W2", "markdown": "# Literature survey\n\n## Overview\n\nText.\n"}
        ],
        "structures": [_structure(f"{TOPIC}/W2", "W2", questions)],
        "grounding_documents": G_W2,
    }
    for name, rows in tables.items():
        pq.write_table(pa.Table.from_pylist(rows), folder / f"{name}.parquet")


def test_frame_qa_gold_fails_on_questions_naming_absent_entities(tmp_path):
    stale = ["What problem does “Attention Is All You Need” address?"]
    _hand_release(tmp_path / "old", stale)
    res = subprocess.run(
        [FRAME, "qa", "gold", "--release", str(tmp_path / "old"), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 1, res.stderr
    (entry,) = json.loads(res.stdout)
    assert entry["check"] == "absent_entities" and entry["report_id"] == f"{TOPIC}/W2"
    assert entry["questions"] == 1 and entry["entities"] == ["Attention Is All You Need"]
    plain = subprocess.run(
        [FRAME, "qa", "gold", "--release", str(tmp_path / "old")], capture_output=True, text=True, timeout=120
    )
    assert plain.returncode == 1 and "1 question(s)/title(s) naming entities absent from G" in plain.stdout

    _hand_release(tmp_path / "new", ["What problem does BloombergGPT address?"])
    res = subprocess.run(
        [FRAME, "qa", "gold", "--release", str(tmp_path / "new"), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0 and json.loads(res.stdout) == [], res.stdout + res.stderr


# ---------------------------------------------------------------- a release built offline


def _config(tmp: Path) -> Path:
    ticker, form, periods = FILING
    windows = ", ".join(f'{{ label = "{k}", start = "{a}", end = "{b}" }}' for k, (a, b) in WINDOWS.items())
    text = f"""
[build]
data_dir = "{tmp / "data"}"

[source]
mode = "mirror"
mirror = "{CORPUS}"

[[domains]]
kind = "edgar"
name = "{ticker}-{form}"
category = "financial_quarterly"
ticker = "{ticker}"
cik = "0001652044"
form = "{form}"
periods = {json.dumps(periods)}

[[domains]]
kind = "arxiv"
name = "{TOPIC}"
category = "academic_simple"
topic = "{TOPIC}"
query = 'cat:cs.CL AND abs:"language model"'
papers_per_window = 2
windows = [{windows}]
"""
    cfg = tmp / "small.toml"
    cfg.write_text(text, encoding="utf-8")
    return cfg


@pytest.fixture(scope="module")
def small_release(tmp_path_factory) -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"shared corpus not found at {CORPUS}")
    tmp = tmp_path_factory.mktemp("renewal")
    res = subprocess.run(
        [FRAME, "build", "--config", str(_config(tmp)), "--release", "small", "--version", "0.1.0"],
        capture_output=True,
        text=True,
        env=frame_env(tmp / "prefect"),
        timeout=1200,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return tmp / "data" / "releases" / "small" / "0.1.0"


def _manifest(name: str) -> list[dict]:
    with (CORPUS / name / "MANIFEST.csv").open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _short(title: str) -> str:
    return title.split(":")[0].strip()


def _texts(nodes: list[dict]) -> list[str]:
    out = []
    for n in nodes:
        out += [n["title"], *n["questions"], *_texts(n.get("children") or [])]
    return out


def test_renewed_questions_name_only_papers_of_their_window(small_release):
    """Oracle: the corpus MANIFEST's paper titles per window (first version date in the window)."""
    titles = {k: set() for k in WINDOWS}
    for row in _manifest("arxiv"):
        for k, (a, b) in WINDOWS.items():
            if row["topic"] == TOPIC and a <= row["first_version_date"] <= b:
                titles[k].add(row["title"])
    rows = pq.read_table(small_release / "structures.parquet").to_pylist()
    by_snapshot = {r["snapshot"]: _texts(r["nodes"]) for r in rows if r["domain"] == TOPIC}
    w1_only = {_short(t) for t in titles["W1"]} - {_short(t) for k in ("W2", "W3") for t in titles[k]}
    assert w1_only >= {"Attention Is All You Need", "BERT"}
    for snap in ("W2", "W3"):
        for text in by_snapshot[snap]:
            assert not any(re.search(rf"\b{re.escape(t)}\b", text) for t in w1_only), (snap, text)
        built = {
            g["title"]
            for g in pq.read_table(small_release / "grounding_documents.parquet").to_pylist()
            if g["domain"] == TOPIC and g["snapshot"] == snap
        }
        assert built <= titles[snap]
        for t in built:  # every paper of the window is asked about by its short title
            short = _short(t) if len(_short(t).split()) <= 8 else " ".join(t.split()[:8])
            assert any(short in text for text in by_snapshot[snap]), (snap, short)


def _filing_text(period: str) -> str:
    ticker, form, _ = FILING
    row = next(
        r for r in _manifest("edgar") if (r["ticker"], r["form"], r["period_end"]) == (ticker, form, period)
    )
    raw = (CORPUS / "edgar" / row["path"]).read_text(encoding="utf-8", errors="replace")
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", raw)).replace("\xa0", " ").split())


def test_renewed_filing_questions_name_only_dates_of_their_filing(small_release):
    """Oracle: the dates ("June 30, 2023") of a quarter's questions are dates its 10-Q's HTML shows.
    The demo shipped before this fix asked 37 questions of the 2024-03-31 edition about 2022/2023 dates."""
    ticker, form, periods = FILING
    rows = pq.read_table(small_release / "structures.parquet").to_pylist()
    date = re.compile(r"\b[A-Z][a-z]+ \d{1,2}, (?:19|20)\d\d\b")
    for r in rows:
        if r["domain"] != f"{ticker}-{form}" or r["snapshot"] == periods[0]:
            continue
        filing = _filing_text(r["snapshot"])
        for text in _texts(r["nodes"]):
            for d in date.findall(text):
                assert d in filing, (r["snapshot"], text)


def test_frame_qa_gold_counts_nothing_on_the_built_release(small_release):
    # the demo shipped before this fix: 134 (large-language-models W2 17, W3 15; GOOGL-10-Q 2024-03-31 37)
    assert check_questions(small_release) == []
    res = subprocess.run(
        [FRAME, "qa", "gold", "--release", str(small_release), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert [e for e in json.loads(res.stdout) if e.get("check") == "absent_entities"] == []


# ---------------------------------------------------------------- the OpenAI backend


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)


W2_PAPERS = {
    "paper-2303.17564": (
        "BloombergGPT: A Large Language Model for Finance",
        "# BloombergGPT: A Large Language Model for Finance\n\nWe train BloombergGPT on financial text.\n\n"
        "## References\n\nVaswani et al. Attention Is All You Need. 2017.\n",
    ),
    "paper-2412.19437": (
        "DeepSeek-V3 Technical Report",
        "# DeepSeek-V3 Technical Report\n\nDeepSeek-V3 is a mixture-of-experts model.\n",
    ),
}
W2 = StepContext(domain=TOPIC, snapshot="W2", category="academic_simple", source_kind="arxiv")


def _plan() -> ReportStructure:
    leaf = {"id": "s1.t1", "type": "text", "title": "Overview of the papers", "sources": list(W2_PAPERS)}
    node = {"id": "s1", "type": "section", "title": "Overview", "children": [leaf]}
    return ReportStructure.model_validate({"title": "Survey", "form_restricted": True, "nodes": [node]})


def _reply(first: str) -> dict:
    qs = [
        first,
        "What does BloombergGPT train on?",
        "What is DeepSeek-V3?",
        "How large is DeepSeek-V3?",
        "Which results does BloombergGPT report?",
    ]
    return {"sections": [{"id": "s1", "questions": qs}, {"id": "s1.t1", "questions": qs[1:3]}]}


def test_openai_questions_for_t_plus_1_are_about_its_documents(llm_server, tmp_path, api_key):
    """The prompt carries the W2 papers and the rule; a reply naming the W1 paper is sent back with the
    reason (never cached) and the corrected reply is the structure's."""
    prev = _plan()
    for n in prev.walk():
        n.questions = ["What problem does “Attention Is All You Need” address?"]
    stale = _reply("What problem does “Attention Is All You Need” address?")
    good = _reply("What problem does BloombergGPT address?")
    llm_server.script(json_reply(stale), json_reply(good))
    g = gset(tmp_path, W2_PAPERS)
    out = make_backend(llm_server, tmp_path).add_questions(_plan(), g, prev, W2)
    assert out.find("s1").questions == good["sections"][0]["questions"]
    first, second = llm_server.chat_requests
    prompt = first.messages[0]["content"] + first.messages[1]["content"]
    assert "DeepSeek-V3 is a mixture-of-experts model." in prompt and "We train BloombergGPT" in prompt
    assert "never carry over a paper, name" in prompt
    correction = second.messages[-1]["content"]
    assert "do not: s1 " in correction and "(Attention Is All You Need)" in correction
    make_backend(llm_server, tmp_path).add_questions(_plan(), g, prev, W2)  # from the cache: the good reply
    assert len(llm_server.chat_requests) == 2
