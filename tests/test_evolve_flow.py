"""`frame evolve` over the local OpenAI-compatible test server: two model systems whose reports depend on
the skill in their prompt, an LLM optimizer, the offline critic, the offline rubric.

Planted failure: without a rule about complete sentences both models end every report mid-sentence (the
G0 gate "not truncated" fails). Round 1's optimizer proposes a rule that makes the models write TODO
markers (a G0 regression: rejected); round 2's proposes the complete-sentence rule (accepted, frozen as
K*). The run is killed mid-round 1 and rerun (resumes: nothing generated twice, same outcome), rerun
again (zero requests), then K* is evaluated on the locked split (paired improvement with CIs)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

import tests.llm_server as fake_llm
from schemas.release import TABLE_SCHEMAS
from tests.conftest import frame_env

llm_server = fake_llm.llm_server
FRAME = str(Path(sys.executable).with_name("frame"))
SECRET = "sk-test-evolve-77a1"
SLOW_OPTIMIZER = True
LOCKED_MARK = "Zebraquant"  # only the locked domains' texts hold it
DOMAINS = [("ACME", "acme"), ("BOLT", "bolt"), ("CRUX", "crux"), ("DUNE", "dune"), ("ECHO", "echo")]
BAD_RULE = {"stage": "write", "when": "a section has no figures yet", "do": "write TODO where they belong",
            "check": "each gap is marked TODO"}  # fmt: skip
GOOD_RULE = {"stage": "review", "when": "finishing a section", "do": "end it with a complete sentence",
             "check": "the last line ends with a full stop"}  # fmt: skip
PARAGRAPH = (
    "{name} reported revenue of $1,350 million for the quarter, up 12.5% from a year earlier, driven by "
    "higher volumes in its main segment and steady pricing across regions. Operating costs rose more "
    "slowly than sales, so the operating margin widened to 18% of revenue in the period."
)


def sample(name: str) -> str:
    return (
        f"# {name} quarterly report (Q1 2025)\n\n## Results of Operations\n\n"
        + PARAGRAPH.format(name=name).replace("1,350", "1,200")
        + "\n\n## Liquidity\n\nCash and equivalents were $300 million at the end of the quarter.\n"
    )


def write_release(root: Path, locked: set[str]) -> Path:
    rel = root / "data" / "releases" / "tiny" / "1.0.0"
    rel.mkdir(parents=True)
    instances, docs = [], []
    for ticker, _ in DOMAINS:
        name = f"{ticker} {LOCKED_MARK}" if ticker in locked else ticker
        dom = f"{ticker}-10-Q"
        s = sample(name)
        y = s.replace("Q1", "Q2").replace("1,200", "1,350").replace("$300", "$320")
        instances.append(
            {
                "instance_id": f"financial_quarterly/{dom}/t1->t2",
                "category": "financial_quarterly",
                "domain": dom,
                "t_sample": "t1",
                "t_target": "t2",
                "sample_report_id": f"{dom}/t1",
                "target_report_id": f"{dom}/t2",
                "grounding_set_id": f"{dom}/t2",
                "grounding_doc_ids": ["mdna"],
                "sample_markdown": s,
                "target_markdown": y,
            }
        )
        docs.append(
            {
                "grounding_set_id": f"{dom}/t2",
                "domain": dom,
                "snapshot": "t2",
                "doc_id": "mdna",
                "title": "Management's Discussion and Analysis",
                "kind": "prose",
                "tokens": 60,
                "tables": 0,
                "images": 0,
                "source_sha256": "0" * 64,
                "source_kind": "edgar",
                "markdown": PARAGRAPH.format(name=name),
                "metadata_json": "{}",
            }
        )
    for table, rows in (("instances", instances), ("grounding_documents", docs)):
        schema = TABLE_SCHEMAS[table]
        rows = [{f.name: r.get(f.name) for f in schema} for r in rows]
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), rel / f"{table}.parquet")
    return rel


def between(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


def reply(req: fake_llm.Recorded) -> fake_llm.Reply:
    system, user = req.messages[0]["content"], req.messages[1]["content"]
    if "You improve a reusable skill" in system:  # the optimizer: the bad rule first, then the good one
        tried = between(
            user, "Rules tried before and rejected (they did not help or made things worse): ", "\n"
        )
        rules = [BAD_RULE] if tried == "none" else [GOOD_RULE]
        answer = fake_llm.json_reply({"rules": rules}, model="optimizer-model")
        answer.delay = 20.0 if SLOW_OPTIMIZER else 0.0  # the first run is killed while it waits
        return answer
    # a report system: S's headings, one paragraph each from G; what the skill asks changes the report
    s = between(user, "<<<SAMPLE\n", "\nSAMPLE>>>")
    doc = user.split("Source documents of the new period:", 1)[1]
    facts = next(ln for ln in doc.splitlines() if "revenue" in ln)
    lines = [ln for ln in s.splitlines() if ln.startswith("#")]
    title, sections = lines[0].replace("Q1", "Q2"), lines[1:]
    body = [title, ""]
    for h in sections:
        body += [h, "", f"{facts} ({req.body['model']})", ""]
    if "TODO" in system:
        body += ["TODO: add the segment figures.", ""]
    body.append("Management expects" + (" demand to stay firm." if "complete sentence" in system else ""))
    return fake_llm.json_reply({"report_markdown": "\n".join(body) + "\n"})


CONFIG = """
[systems.alpha]
kind = "openai"
base_url = "{url}"
model = "model-a"
api_key_env = "EVOLVE_KEY"

[systems.beta]
kind = "openai"
base_url = "{url}"
model = "model-b"
api_key_env = "EVOLVE_KEY"

[evolve]
rounds = 3
patience = 2
support = 2
bootstrap = 200

[evolve.optimizer]
base_url = "{url}"
model = "optimizer-model"
api_key_env = "EVOLVE_KEY"
"""


def role(req: fake_llm.Recorded) -> str:
    return "optimizer" if "You improve a reusable skill" in req.messages[0]["content"] else "generate"


def test_evolve_accepts_the_fix_rejects_the_regression_resumes_and_tests_on_locked(llm_server, tmp_path):
    llm_server.default_chat = reply
    env = {**frame_env(tmp_path / "ph"), "EVOLVE_KEY": SECRET}
    cfg = tmp_path / "eval.toml"
    cfg.write_text(CONFIG.format(url=llm_server.base_url), encoding="utf-8")

    # splits: which domains end up locked depends on the seeded draw, so write the release twice
    rel = write_release(tmp_path / "probe", set())
    split = [FRAME, "split", "--release", str(rel), "--discovery", "2", "--validation", "1", "--seed", "3"]
    res = subprocess.run(split, capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    splits = json.loads((rel.parent / "1.0.0.splits.json").read_text())
    locked = {d.split("-")[0] for d in splits["domains"]["locked"]}
    assert len(locked) == 2 and not set(splits["domains"]["discovery"]) & set(splits["domains"]["validation"])
    rel = write_release(tmp_path, locked)
    assert subprocess.run([*split[:3], str(rel), *split[4:]], env=env, capture_output=True).returncode == 0

    args = [FRAME, "evolve", "--release", str(rel), "--config", str(cfg), "--systems", "alpha,beta"]
    args += ["--run", "r1"]
    # killed mid-round 1: as soon as the optimizer is asked (discovery scored, validation not yet)
    proc = subprocess.Popen(
        args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + 300
    while not any(role(r) == "optimizer" for r in llm_server.chat_requests):
        assert proc.poll() is None and time.monotonic() < deadline, "evolve ended before asking the optimizer"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    global SLOW_OPTIMIZER
    SLOW_OPTIMIZER = False
    generated_before_kill = len([r for r in llm_server.chat_requests if role(r) == "generate"])
    assert generated_before_kill == 2 * 2  # 2 systems x 2 discovery instances, empty skill

    res = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-2000:]
    run = rel.parents[2] / "evolve" / "tiny" / "1.0.0" / "r1"
    summary = json.loads((run / "summary.json").read_text())
    decisions = [(r["round"], r["accepted"]) for r in summary["rounds"]]
    assert decisions == [(1, False), (2, True), (3, False)], summary["rounds"]
    assert summary["rounds"][0]["g0_regressions"] > 0  # TODO markers: the placeholder gate now fails
    assert summary["rounds"][1]["target_gain"] > 0
    assert (
        "complete sentence" in (run / "skill.md").read_text() and "TODO" not in (run / "skill.md").read_text()
    )
    for k in (1, 2, 3):
        assert {p.name for p in (run / f"round-{k}").iterdir()} >= {
            "candidate.md",
            "critique.md",
            "failures.json",
            "validation.json",
            "decision.json",
        }
    # resumed: the discovery reports of the empty skill were not generated again
    gens = [r for r in llm_server.chat_requests if role(r) == "generate"]
    keys = [json.dumps(r.body["messages"], sort_keys=True) + r.body["model"] for r in gens]
    assert len(keys) == len(set(keys)), "a report was requested twice"
    # the optimizer saw no locked text and no rubric item id
    for r in llm_server.chat_requests:
        if role(r) == "optimizer":
            text = json.dumps(r.body)
            assert LOCKED_MARK not in text and not any(f'"g{n}_' in text or f" g{n}_" in text for n in "012")

    calls = len(llm_server.requests)
    again = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert len(llm_server.requests) == calls  # rerun: zero requests
    assert json.loads((run / "summary.json").read_text()) == summary

    locked_run = subprocess.run(
        [*args, "--evaluate", str(run / "skill.md")], capture_output=True, text=True, env=env, timeout=600
    )
    assert locked_run.returncode == 0, locked_run.stderr[-3000:]
    out = next(run.glob("locked-*"))
    paired = pd.read_parquet(out / "paired.parquet")
    total = paired[paired.metric == "rubric"].set_index("system")
    assert set(total.index) == {"alpha", "beta"} and (total.n == 2).all()
    assert (total["diff"] > 0).all() and (total.ci_low > 0).all()  # the fix holds on unseen domains
    g0 = paired[paired.metric == "rubric_g0"].set_index("system")
    assert (g0.with_skill > g0.without).all()
    report = (out / "report.md").read_text()
    assert "Not truncated" in report and "[95% CI]" in report
