"""`frame score` on the OpenAI path end to end, every LLM-judged family in one pair of runs, all over
HTTP to the local OpenAI-compatible test server: one-shot generation, LLM structure trees, LLM coverage
and faithfulness judges and OpenAI-compatible embeddings (FRAME's three); the semantic scaffold
(extracted once per instance, not per system), the rubric and holistic judges for every system, and the
blind pairwise judge in both display orders with a Bradley-Terry ranking. A rerun makes no request and
every task is Cached; the API key never lands in outputs or caches.

Other tests may import `write_release`, `S`, `Y`, `G` and `answer` from here."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

import tests.llm_server as fake_llm
from schemas.release import TABLE_SCHEMAS
from tasks.score.holistic import HOLISTIC_METRICS
from tasks.score.registry import DEFAULT as METRICS
from tasks.score.rubric import RUBRIC_METRICS
from tasks.score.scaffold import SCAFFOLD_METRICS
from tests.conftest import frame_env

llm_server = fake_llm.llm_server
FRAME = str(Path(sys.executable).with_name("frame"))
SECRET = "sk-test-score-openai-9f3c"
MODEL = "judge-model"

S = """# Acme Corp quarterly report (Q1 2025)

## Results of Operations

Revenue was $1,200 million, up 10% from a year earlier.

## Liquidity

Cash and equivalents were $300 million at quarter end.
"""
Y = S.replace("Q1", "Q2").replace("1,200", "1,350").replace("10%", "12.5%").replace("$300", "$320")
G = [
    ("mdna", "Management's Discussion and Analysis", "Revenue was $1,350 million in Q2 2025, up 12.5%."),
    ("balance", "Balance Sheet", "| Item | June 28, 2025 |\n|---|---|\n| Cash and equivalents | 320 |"),
]


def write_release(root: Path, sample: str = S, target: str = Y) -> Path:
    rel = root / "data" / "releases" / "tiny" / "1.0.0"
    rel.mkdir(parents=True)
    iid = "financial_quarterly/ACME-10-Q/t1->t2"
    instances = [
        {
            "instance_id": iid,
            "category": "financial_quarterly",
            "domain": "ACME-10-Q",
            "t_sample": "t1",
            "t_target": "t2",
            "sample_report_id": "ACME-10-Q/t1",
            "target_report_id": "ACME-10-Q/t2",
            "grounding_set_id": "ACME-10-Q/t2",
            "grounding_doc_ids": [d for d, _, _ in G],
            "sample_markdown": sample,
            "target_markdown": target,
        }
    ]
    docs = [
        {
            "grounding_set_id": "ACME-10-Q/t2",
            "domain": "ACME-10-Q",
            "snapshot": "t2",
            "doc_id": d,
            "title": t,
            "kind": "prose",
            "tokens": len(md.split()),
            "tables": md.count("|---"),
            "images": 0,
            "source_sha256": "0" * 64,
            "source_kind": "edgar",
            "markdown": md,
            "metadata_json": "{}",
        }
        for d, t, md in G
    ]
    for name, rows in (("instances", instances), ("grounding_documents", docs)):
        schema = TABLE_SCHEMAS[name]
        rows = [{f.name: r.get(f.name) for f in schema} for r in rows]
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), rel / f"{name}.parquet")
    return rel


# one-shot writes Y plus a sentence without figures: its report differs from gold's, so no judge request of
# one system is byte-identical to another's (the response cache would answer one of two racing copies)
ONE_SHOT = Y + "\nNo other matters were reported for the quarter.\n"
GOOD = "1,350"  # the figure of Y (and of one-shot and `extractive`); `copy-sample` repeats S's 1,200 instead
SYSTEMS = ("gold", "one-shot", "copy-sample", "extractive")
CONTENDERS = ("copy-sample", "extractive", "one-shot")  # pairwise: gold excluded, sorted
FAMILIES = "structure,coverage,faithfulness,scaffold,rubric,holistic,pairwise"

# each role is recognised by a phrase of its system prompt (prompts/*.md)
ROLE_OF = {
    # the metric families' roles (answered first, by role)
    "You build a fixed reference of the facts of a report": "score_scaffold_facts",
    "You write down the questions a report answers": "score_scaffold_questions",
    "You list the key entities of a report": "score_scaffold_entities",
    "You check a generated report against items taken from a reference report": "score_scaffold_align",
    "You check which properties of given entities": "score_scaffold_entity_check",
    "You check sentences of a generated report against a reference report": "score_scaffold_faithful",
    "You check whether the sentences of a generated report stay on the key facts": "score_scaffold_focus",
    "You are a reviewer who grades one generated report against a few rubric items": "score_rubric",
    "You are a rigorous, impartial judge of written reports": "score_holistic",
    "You compare two generated reports": "score_pairwise",
    # generation and FRAME's three (answered by what their request asks for)
    "You write periodic reports that must follow a prescribed form": "generate_one_shot",
    "You describe how a report is organised": "score_structure",
    "You break a reference report into information units": "score_units",
    "You check how well a generated report conveys given pieces of information": "score_coverage",
    "You prepare a generated report for fact-checking": "score_claims",
    "You check claims of a generated report against the source documents": "score_verify",
    "You take a second, deeper look at claims of a generated report": "score_entail",
}
EXTRACTION = ("score_scaffold_facts", "score_scaffold_questions", "score_scaffold_entities")

FACTS = [
    {"fact": "Acme's revenue was $1,350 million in Q2 2025.", "tier": "main point", "source": "Revenue was"},
    {
        "fact": "Acme's cash and equivalents were $320 million at the end of Q2 2025.",
        "tier": "supporting detail",
        "source": "Cash and equivalents",
    },
    {"fact": "The report is Acme Corp's quarterly report.", "tier": "other", "source": "Acme Corp"},
]
QUESTIONS = [
    {"question": "What was Acme's revenue in Q2 2025?", "answer": "$1,350 million.", "tier": "main point"},
    {"question": "How much cash did Acme hold?", "answer": "$320 million.", "tier": "supporting detail"},
]
ENTITIES = [
    {
        "name": "Acme Corp",
        "type": "org",
        "attributes": [
            {"attribute": "revenue of $1,350 million in Q2 2025", "tier": "main point", "source": "Revenue"},
            {
                "attribute": "cash and equivalents of $320 million",
                "tier": "supporting detail",
                "source": "Cash",
            },
        ],
    }
]


def role_of(req: fake_llm.Recorded) -> str:
    system = req.messages[0]["content"] if req.messages else ""
    return next((r for phrase, r in ROLE_OF.items() if phrase in system), "?")


def figures(text: str) -> list[str]:
    return re.findall(r"\d(?:[\d,.]*\d)?", text)


def numbered(block: str) -> dict[int, str]:
    """'[3] text' lines of a numbered report block -> {3: 'text'}."""
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"^\[(\d+)\] (.*)$", block, re.M)}


def between(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


def key_figure(text: str) -> str:
    """The decisive figure of an item: the first with a thousands separator or above 100."""
    return next((f for f in figures(text) if "," in f or float(f.replace(",", "")) >= 100), "")


def answer(req: fake_llm.Recorded) -> fake_llm.Reply:
    """Plays every role from what its prompt asks for (valid JSON of that role's shape).

    The families' roles go first, recognised by their system prompt: the rubric's request quotes the
    report between "<<<REPORT" markers as the structure request does, so the phrase checks of the FRAME
    roles below would take it for a structure request."""
    role = role_of(req)
    user = req.messages[1]["content"]  # the role's own request (a corrective turn would come after it)
    if role == "score_scaffold_facts":
        return fake_llm.json_reply({"facts": FACTS})
    if role == "score_scaffold_questions":
        return fake_llm.json_reply({"questions": QUESTIONS})
    if role == "score_scaffold_entities":
        return fake_llm.json_reply({"entities": ENTITIES})
    if role == "score_scaffold_align":  # ok when a sentence of R' states the item's key figure
        sentences = numbered(between(user, "<<<GENERATED REPORT\n", "GENERATED REPORT>>>"))
        ids = [int(i) for i in re.search(r"Decide for each of the ids ([\d, ]+)\.", user).group(1).split(",")]
        items = {json.loads(ln)["id"]: json.loads(ln) for ln in user.splitlines() if ln.startswith('{"id"')}
        out = []
        for i in ids:
            it = items[i]
            fig = key_figure(it.get("fact") or it.get("expected_answer", ""))
            sids = [s for s, t in sentences.items() if fig and fig in t]
            out.append({"id": i, "ok": bool(sids), "sentence_ids": sids, "justification": f"figure {fig}"})
        return fake_llm.json_reply({"alignments": out})
    if role == "score_scaffold_entity_check":
        sentences = numbered(between(user, "<<<GENERATED REPORT\n", "GENERATED REPORT>>>"))
        listing = between(user, "Entities and their attributes:\n", "\n\nWhich attributes")
        out = []
        for line in listing.splitlines():
            ent = json.loads(line)
            kept, sids = [], set()
            for a in ent["attributes"]:
                fig = key_figure(a["attribute"])
                hits = [s for s, t in sentences.items() if fig and fig in t]
                if hits:
                    kept.append(a["id"])
                    sids.update(hits)
            if kept:
                out.append({"name": ent["entity"], "preserved_ids": kept, "sentence_ids": sorted(sids)})
        return fake_llm.json_reply({"entities": out})
    if role == "score_scaffold_faithful":  # supported when every figure is in the reference
        reference = numbered(between(user, "<<<REFERENCE REPORT\n", "REFERENCE REPORT>>>"))
        ids = [int(i) for i in re.search(r"Decide for each of the ids ([\d, ]+)\.", user).group(1).split(",")]
        listed = {
            json.loads(ln)["id"]: json.loads(ln)["sentence"]
            for ln in user.splitlines()
            if ln.startswith('{"id"')
        }
        out = []
        for i in ids:
            figs = figures(listed[i])
            ok = all(any(f in t for t in reference.values()) for f in figs)
            ev = sorted({s for s, t in reference.items() for f in figs if f in t}) if ok else []
            out.append({"id": i, "supported": ok, "evidence_ids": ev, "justification": "figures checked"})
        return fake_llm.json_reply({"sentences": out})
    if role == "score_scaffold_focus":  # aligned to each listed fact whose key figure the sentence states
        facts = numbered(between(user, "<<<KEY FACTS\n", "KEY FACTS>>>"))
        out = []
        for ln in user.splitlines():
            if ln.startswith('{"id"'):
                it = json.loads(ln)
                ids = [f for f, t in facts.items() if key_figure(t) and key_figure(t) in it["sentence"]]
                out.append({"id": it["id"], "aligned": bool(ids), "fact_ids": ids, "justification": "figure"})
        return fake_llm.json_reply({"sentences": out})
    if role == "score_rubric":
        ids = re.search(r"Decide each of the items (.+?) for this report\.", user).group(1).split(", ")
        decisions = [
            {"item_id": i, "decision": "pass", "evidence": "", "rationale": "meets the criterion"}
            for i in ids
        ]
        return fake_llm.json_reply({"decisions": decisions})
    if role == "score_holistic":
        report = between(user, "=== REPORT TO EVALUATE ===", "=== END ===")
        v = 9 if GOOD in report else 4
        return fake_llm.json_reply(
            {
                "faithfulness": v,
                "completeness": v - 1,
                "understandability": 8,
                "hallucination": v,
                "rationale": "rated",
            }
        )
    if role == "score_pairwise":  # deterministic: the report stating 1,350 wins
        r1 = between(user, "=== REPORT 1 ===", "=== REPORT 2 ===")
        r2 = between(user, "=== REPORT 2 ===", "=== END ===")
        winner = "tie" if (GOOD in r1) == (GOOD in r2) else ("1" if GOOD in r1 else "2")
        return fake_llm.json_reply({"winner": winner, "rationale": f"report {winner} states {GOOD}"})
    # FRAME's roles and one-shot generation, by a phrase of the request (none occurs in another's)
    if "Sample report (earlier period" in user:
        return fake_llm.json_reply({"report_markdown": ONE_SHOT})
    if '{"units"' in user:
        return fake_llm.json_reply(
            {
                "units": [
                    {"type": "statistic", "content": "Revenue was $1,350 million.", "source_sentence": "x"}
                ]
            }
        )
    if '{"judgments"' in user:
        ids = re.search(r"Grade each of the units ([\d, ]+) against", user).group(1)
        return fake_llm.json_reply(
            {"judgments": [{"unit_id": int(i), "score": 1.0, "evidence": "Revenue"} for i in ids.split(",")]}
        )
    if '{"claims"' in user:
        return fake_llm.json_reply(
            {"claims": [{"content": "Revenue was $1,350 million."}, {"content": "Cash was $320 million."}]}
        )
    ids = [int(i) for i in re.findall(r"^### Claim (\d+)", user, re.M)]
    if "Score every claim above" in user:  # stage 1: claim 0 is left for stage 2
        verdicts = [{"claim_id": i, "score": 0.5 if i == 0 else 1.0, "doc_id": "mdna"} for i in ids]
        return fake_llm.json_reply({"verdicts": verdicts})
    if "Decide for every claim above" in user:
        return fake_llm.json_reply(
            {"verdicts": [{"claim_id": i, "score": 0.9, "doc_id": "mdna"} for i in ids]}
        )
    if "<<<REPORT\n" in user:
        titles = re.findall(r"^## (.+)$", user, re.M)
        sections = [
            {"type": "section", "title": t, "objective": f"About {t}", "children": []} for t in titles
        ]
        return fake_llm.json_reply({"title": "", "children": sections})
    return fake_llm.error(400, f"unexpected request ({role})")


def test_score_every_family_over_openai_compatible_endpoint(llm_server, tmp_path):
    rel = write_release(tmp_path)
    llm_server.default_chat = answer
    env = {
        **frame_env(tmp_path / "ph"),
        "FRAME_LLM_BACKEND": "openai",
        "FRAME_LLM_BASE_URL": llm_server.base_url,
        "FRAME_LLM_MODEL": MODEL,
        "OPENAI_API_KEY": SECRET,
    }
    args = [
        FRAME, "score", "--release", str(rel), "--systems", ",".join(SYSTEMS), "--metrics", FAMILIES,
        "--judge", "openai", "--tree", "llm", "--embedder", "openai:test-embed", "--bootstrap", "100",
    ]  # fmt: skip
    first = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:] + first.stdout[-3000:]
    calls = len(llm_server.requests)
    assert calls and all(r.headers["authorization"] == f"Bearer {SECRET}" for r in llm_server.requests)
    assert llm_server.embedding_requests  # node similarity through the endpoint's embeddings
    chats = llm_server.chat_requests
    roles = Counter(role_of(r) for r in chats)
    assert "?" not in roles, roles
    # every reply was valid at once: no corrective turn (system + user only)
    assert all(len(r.messages) == 2 for r in chats)

    out = tmp_path / "data" / "scores" / "tiny" / "1.0.0"
    judge = f"openai:{MODEL}"
    scores = pd.read_parquet(out / "scores.parquet")
    s = scores.set_index(["system", "metric"])
    evidence = pd.read_parquet(out / "evidence.parquet")

    # FRAME's three
    assert s.loc[("gold", "structure"), "value"] == 1.0
    assert s.loc[("one-shot", "coverage"), "value"] == 1.0
    # stage 1 left claim 0 at 0.5, stage 2 raised it to 0.9; claim 1 stayed at 1.0
    assert abs(s.loc[("one-shot", "faithfulness"), "value"] - 0.95) < 1e-9
    assert s.loc[("one-shot", "faithfulness"), "judge"] == judge
    assert s.loc[("one-shot", "structure"), "judge"].startswith(f"llm-tree:{MODEL}+test-embed")
    faith = evidence[(evidence.metric == "faithfulness") & (evidence.system == "one-shot")].set_index("index")
    assert faith.loc[0, "stage"] == 2 and faith.loc[1, "stage"] == 1
    # one generation (the other systems ask nothing); each report's claims and coverage asked once
    assert roles["generate_one_shot"] == 1
    assert roles["score_claims"] == len(SYSTEMS) and roles["score_coverage"] == len(SYSTEMS)

    # the scaffold: one row, extracted by the endpoint, each extraction role asked once per part
    scaffolds = pd.read_parquet(out / "scaffolds.parquet")
    assert len(scaffolds) == 1 and scaffolds.loc[0, "extractor"] == judge
    sc = json.loads(scaffolds.loc[0, "scaffold_json"])
    parts = sc["detail"]["parts"]
    assert parts == 1  # a tiny Y fits one request
    assert {r: roles[r] for r in EXTRACTION} == dict.fromkeys(EXTRACTION, parts)  # not once per system
    assert (scaffolds.loc[0, "facts"], scaffolds.loc[0, "questions"], scaffolds.loc[0, "attributes"]) == (
        len(FACTS),
        len(QUESTIONS),
        2,
    )
    # the judge roles: once per system (one batch each), the pairwise judge once per pair and display order
    assert roles["score_scaffold_align"] == 2 * len(SYSTEMS)  # facts and questions
    assert roles["score_scaffold_entity_check"] == len(SYSTEMS)
    assert roles["score_scaffold_faithful"] == len(SYSTEMS)
    assert roles["score_scaffold_focus"] == len(SYSTEMS)
    assert roles["score_rubric"] == len(SYSTEMS)
    assert roles["score_holistic"] == len(SYSTEMS)
    n_pairs = len(CONTENDERS) * (len(CONTENDERS) - 1) // 2
    assert roles["score_pairwise"] == 2 * n_pairs
    # the pairwise requests are blind: no system name is shown
    for r in chats:
        if role_of(r) == "score_pairwise":
            body = r.messages[1]["content"]
            assert not any(name in body for name in CONTENDERS)

    want = {
        (sys_, m)
        for sys_ in SYSTEMS
        for m in (*METRICS, *SCAFFOLD_METRICS, *RUBRIC_METRICS, *HOLISTIC_METRICS)
    }
    got = set(zip(scores.system, scores.metric, strict=True))
    assert got == want, sorted(want ^ got)
    for sys_ in SYSTEMS:
        for m in (*SCAFFOLD_METRICS, *HOLISTIC_METRICS, *RUBRIC_METRICS):
            assert s.loc[(sys_, m), "judge"] == judge, (sys_, m, s.loc[(sys_, m), "judge"])
    # the replies flow into the values: Y states both figures, extractive the revenue only, copy-sample none
    assert s.loc[("gold", "fact_coverage"), "value"] == 1.0
    assert s.loc[("extractive", "fact_coverage"), "value"] == 0.5
    assert s.loc[("copy-sample", "fact_coverage"), "value"] == 0.0
    assert s.loc[("extractive", "fps"), "value"] == 1.0  # main kept, supporting dropped: no penalty
    assert s.loc[("gold", "eps"), "value"] == 1.0 and s.loc[("copy-sample", "eps"), "value"] == 0.0
    assert s.loc[("gold", "fact_faithfulness"), "value"] == 1.0
    assert s.loc[("copy-sample", "fact_faithfulness"), "value"] < 1.0  # 1,200 and $300 are not in Y
    # Fact Focus: Y's two sentences state its two counted facts; one-shot adds a sentence that states none
    assert s.loc[("gold", "fact_focus"), "value"] == 1.0
    assert abs(s.loc[("one-shot", "fact_focus"), "value"] - 2 / 3) < 1e-9
    assert s.loc[("copy-sample", "fact_focus"), "value"] == 0.0
    assert s.loc[("gold", "holistic_faithfulness"), "value"] == 9.0
    assert s.loc[("extractive", "holistic_completeness"), "value"] == 8.0
    assert s.loc[("copy-sample", "holistic_hallucination"), "value"] == 4.0
    assert scores[scores.metric == "rubric_g0"].value.notna().all()
    rubric = evidence[evidence.metric == "rubric"]
    judged = rubric[rubric.rationale.str.contains("meets the criterion")]  # the LLM's decisions
    assert len(judged) == 3 * len(SYSTEMS)
    assert set(judged.kind) == {
        "G1:g1_report_register",
        "G2:g2_risks_limitations",
        "G2:g2_information_density",
    }

    # pairwise: 3 pairs x 2 orders, canonical votes agree with the judge (the report stating 1,350 wins:
    # extractive and one-shot both beat copy-sample and tie with each other)
    votes = (
        pd.read_parquet(out / "pairwise.parquet")
        .sort_values(["system_a", "system_b", "order"])
        .reset_index(drop=True)
    )
    assert len(votes) == 2 * n_pairs
    pairs = [("copy-sample", "extractive"), ("copy-sample", "one-shot"), ("extractive", "one-shot")]
    assert list(zip(votes.system_a, votes.system_b, votes.order, strict=True)) == [
        (a, b, o) for a, b in pairs for o in ("ab", "ba")
    ]
    # the winner shown second, then first; the tie is a tie in both orders
    assert list(votes.raw_vote) == ["2", "1", "2", "1", "tie", "tie"]
    assert list(votes.vote) == ["B", "B", "B", "B", "tie", "tie"] and set(votes.judge) == {judge}
    bt = pd.read_csv(out / "bradley_terry.csv")
    assert list(bt.system) == ["extractive", "one-shot", "copy-sample"]  # by rank, then name
    assert list(bt["rank"]) == [1, 1, 3]
    assert list(bt.wins) == [2, 2, 0] and list(bt.losses) == [0, 0, 4] and list(bt.ties) == [2, 2, 0]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["llm"]["model"] == MODEL
    assert manifest["pairwise"] == {"votes": 2 * n_pairs, "judges": [judge]} and manifest["scaffolds"] == 1
    assert SECRET not in json.dumps(manifest)

    second = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    assert len(llm_server.requests) == calls  # everything from cache: no request at all
    states = re.findall(
        r"Task run '((?:score|generate|prepare|compare)) · [^']*' - Finished in state (\w+)", second.stdout
    )
    assert {name for name, _ in states} == {"score", "generate", "prepare", "compare"}, states
    assert {state for _, state in states} == {"Cached"}
    # 3 generations (gold is Y itself), 1 scaffold preparation, 4 systems x 6 families, 1 pairwise comparison
    assert Counter(name for name, _ in states) == {"generate": 3, "prepare": 1, "score": 24, "compare": 1}
    pd.testing.assert_frame_equal(
        pd.read_parquet(out / "pairwise.parquet")
        .sort_values(["system_a", "system_b", "order"])
        .reset_index(drop=True),
        votes,
    )

    for path in (tmp_path / "data").rglob("*"):  # outputs, generations, LLM and Prefect result caches, logs
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
