"""Dry-run estimates (`--dry-run`) against what the local OpenAI-compatible test server really receives.

Build: two domains of the demo config (NVDA-10-Q, gravitational-wave-astrophysics W1-W2) estimated with
the demo release as reference, first with nothing grounded (every figure from the reference's same
snapshot), then built through the test server, then estimated again over the grounded data folder (G
counted). The server answers like the reference's model did (its structures and questions), so the build
sends what the estimate modelled; per role, the request count and the input tokens it received (o200k
counts of the recorded messages) must be within 15% of both estimates. Output tokens follow the scripted
replies, so they are not compared (docs/cost.md).

Score: the demo release (one instance per category) scored for holistic and pairwise by an openai judge,
with a one-shot system on the same server (its report: Y plus a sentence, the size the estimate assumes),
compared the same way.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from schemas.config import LLMSettings
from schemas.estimate import COUNTED, usd
from schemas.release_rows import structure_from_row
from schemas.scoring import ScoreSettings
from schemas.structure import CONTAINERS
from tasks.config import load_config
from tasks.score.estimate import estimate_score
from tasks.synthesize.estimate import estimate_build, message_tokens
from tests.conftest import CORPUS, frame_env
from tests.llm_server import LLMTestServer, Recorded, Reply, chat_reply, error
from tests.test_build_openai import KEY_ENV, OPENINGS, run_frame
from tests.test_score_openai_flow import role_of

pytestmark = pytest.mark.skipif(
    not ((CORPUS / "edgar").is_dir() and (CORPUS / "arxiv").is_dir()), reason="shared corpus not found"
)

FRAME = str(Path(sys.executable).with_name("frame"))
MODEL = "frame-estimate-model"
SECRET = "sk-test-estimate-41c2"  # the score run's key (the build's is test_build_openai's)
BUILD_ROLES = ("structure_free", "structure_restricted", "questions", "fill")
TOLERANCE = 0.15
CONFIG = """
[build]
data_dir = "{data}"
[llm]
backend = "openai"
base_url = "{base_url}"
model = "{model}"
api_key_env = "{key_env}"
context_tokens = {context}   # below gw W1's G (w1_context): that window goes as digests
timeout_s = 60
transient_retries = 2
backoff_initial_s = 0.05
backoff_max_s = 0.2
[prices."{model}"]
input_per_mtok = 0.15
output_per_mtok = 0.60
[source]
mode = "mirror"
mirror = "{corpus}"
[[domains]]
kind = "edgar"
name = "NVDA-10-Q"
category = "financial_quarterly"
ticker = "NVDA"
cik = "0001045810"
form = "10-Q"
periods = ["2023-07-30", "2025-07-27"]
[[domains]]
kind = "arxiv"
name = "gravitational-wave-astrophysics"
category = "academic_simple"
topic = "gravitational-wave-astrophysics"
query = 'cat:astro-ph.HE AND abs:"gravitational wave" AND abs:population'
papers_per_window = 3
windows = [
  {{ label = "W1", start = "2021-11-01", end = "2022-06-30" }},
  {{ label = "W2", start = "2022-07-01", end = "2023-02-28" }},
]
"""


def w1_context(release: Path) -> int:
    """The context of the build: 64k, or less when gw W1's G (read from the reference release built from
    the same windows) is not well over it, so the W1 requests are always sent as digests."""
    docs = pq.read_table(release / "grounding_documents.parquet", columns=["domain", "snapshot", "tokens"])
    w1 = sum(
        r["tokens"]
        for r in docs.to_pylist()
        if (r["domain"], r["snapshot"]) == ("gravitational-wave-astrophysics", "W1")
    )
    return min(64000, int(0.8 * w1))


def within(estimated: float, actual: float, what: str) -> None:
    assert actual > 0, what
    assert abs(estimated - actual) <= TOLERANCE * actual, f"{what}: estimated {estimated}, actual {actual}"


# ------------------------------------------------------------------------------------------ build


def build_role(rec: Recorded) -> str:
    system = rec.messages[0]["content"]
    roles = [r for r, opening in OPENINGS.items() if system.startswith(opening)]
    assert len(roles) == 1, system[:80]
    return roles[0]


class ReferenceResponder:
    """Answers every synthesis request as the reference release's model did for that snapshot: its
    structure (without questions), its questions, and a short text per element."""

    def __init__(self, release: Path) -> None:
        rows = pq.read_table(release / "structures.parquet").to_pylist()
        self.structures = {r["report_id"]: structure_from_row(r) for r in rows}
        self.errors: list[str] = []

    def reply(self, role: str, user: str) -> dict:
        if role == "fill":
            node = re.search(r"^Element to write: (\S+) \(", user, re.M).group(1)
            return {"content": f"The period's figures for element {node}, stated briefly."}
        domain = re.search(r"^Domain: (\S+) \(", user, re.M).group(1)
        snapshot = re.search(r"^(?:New snapshot|Snapshot): (\S+)$", user, re.M).group(1)
        s = self.structures[f"{domain}/{snapshot}"]
        if role == "questions":
            nodes = [n for n in s.walk() if n.type in CONTAINERS and n.questions]
            return {"sections": [{"id": n.id, "questions": n.questions} for n in nodes]}
        data = s.model_dump(mode="json", exclude={"provenance", "form_restricted"})
        return {"title": data["title"], "sections": _no_questions(data["nodes"])}

    def __call__(self, rec: Recorded) -> Reply:
        try:
            body = self.reply(build_role(rec), rec.messages[1]["content"])
            return chat_reply(json.dumps(body), model=rec.body["model"])
        except Exception as exc:  # loud: a request the responder does not understand
            self.errors.append(f"{type(exc).__name__}: {exc}")
            return error(400, f"test responder cannot answer: {exc}")


def _no_questions(nodes: list[dict]) -> list[dict]:
    return [
        {**{k: v for k, v in n.items() if k != "questions"}, "children": _no_questions(n["children"])}
        for n in nodes
    ]


def actual_by_role(requests: list[Recorded], role_of_request) -> dict[str, tuple[int, int]]:
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for rec in requests:
        r = out[role_of_request(rec)]
        r[0] += 1
        r[1] += message_tokens(rec.messages)
    return {k: (v[0], v[1]) for k, v in out.items()}


def files_under(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")) if folder.exists() else []


@pytest.fixture(scope="module")
def built(demo_release, tmp_path_factory):
    """Estimate (nothing grounded), build through the test server, estimate again (grounded)."""
    tmp = tmp_path_factory.mktemp("estimate-build")
    responder = ReferenceResponder(demo_release)
    with LLMTestServer() as server:
        server.default_chat = responder
        path = tmp / "build.toml"
        path.write_text(
            CONFIG.format(
                data=tmp / "data",
                base_url=server.base_url,
                model=MODEL,
                key_env=KEY_ENV,
                corpus=CORPUS,
                context=w1_context(demo_release),
            )
        )
        cfg = load_config(path)
        before = estimate_build(cfg, data_dir=cfg.build.data_dir, reference_release=demo_release)
        sent_by_estimate, written_by_estimate = len(server.requests), files_under(tmp / "data")
        res = run_frame(
            ["build", "--config", str(path), "--release", "est", "--version", "1.0.0"], tmp / "ph"
        )
        requests, files = list(server.chat_requests), files_under(tmp / "data")
        after = estimate_build(cfg, data_dir=cfg.build.data_dir, reference_release=demo_release)
        yield SimpleNamespace(
            cfg=cfg,
            before=before,
            after=after,
            run=res,
            requests=requests,
            responder=responder,
            sent_by_estimate=sent_by_estimate,
            written_by_estimate=written_by_estimate,
            sent_after=len(server.requests) - len(requests),
            written_after=files_under(tmp / "data") != files,
        )


def test_build_dry_run_is_within_15_percent_of_the_real_build_per_role(built):
    assert built.run.returncode == 0, built.run.stderr[-3000:]
    assert built.responder.errors == []
    actual = actual_by_role(built.requests, build_role)
    assert set(actual) == set(BUILD_ROLES)
    assert actual["structure_free"][0] == 2 and actual["structure_restricted"][0] == 2
    for label, est in (("before", built.before), ("after", built.after)):
        got = est.by_role()
        assert set(got) == set(BUILD_ROLES), (label, got)
        for role in BUILD_ROLES:
            n, tokens = actual[role]
            within(got[role].requests, n, f"{label} {role} requests")
            within(got[role].input_tokens, tokens, f"{label} {role} input tokens")
            assert got[role].output_tokens > 0


def test_build_dry_run_sends_and_writes_nothing_and_says_what_is_counted(built):
    assert built.sent_by_estimate == 0 and built.written_by_estimate == []
    assert built.sent_after == 0 and not built.written_after  # nor did the one over the grounded folder
    before = {r.role: r.basis for r in built.before.rows}
    assert before == dict.fromkeys(BUILD_ROLES, "estimated from demo/0.1.0 (same snapshot)")
    after = {(r.role, r.basis) for r in built.after.rows}
    assert after == {("structure_free", COUNTED)} | {
        (role, "counted G; replies estimated from demo/0.1.0") for role in BUILD_ROLES[1:]
    }
    assert (
        "4 snapshot(s): 0 grounded (their G counted), 4 replayed from the same snapshot"
        in built.before.notes[0]
    )
    assert "4 snapshot(s): 4 grounded" in built.after.notes[0]
    prices = built.cfg.prices
    for r in built.after.rows:
        assert r.usd == usd(MODEL, r.input_tokens, r.output_tokens, prices) and r.usd > 0
    # the digests the build sent for gw W1 (G over the context, w1_context) are in the estimate's figures
    digest = [m for m in built.requests if 'shown="digest"' in m.messages[1]["content"]]
    w1 = [m for m in digest if re.search(r"^(?:New snapshot|Snapshot): W1$", m.messages[1]["content"], re.M)]
    assert {build_role(m) for m in w1} == {"structure_free", "questions"}
    assert "| total |" in built.after.render_markdown()


def test_category_means_of_a_one_domain_category_reproduce_that_domain(demo_release, tmp_path):
    """A domain the reference does not hold is estimated from its category's per-snapshot means; with the
    only domain of a category of the reference renamed, the means are that domain's own figures."""
    demo = load_config(Path(__file__).resolve().parents[1] / "configs" / "demo.toml")
    per_category = Counter(d.category for d in demo.domains)
    alone = [d for d in demo.domains if per_category[d.category] == 1]
    if not alone:
        pytest.skip("every category of configs/demo.toml has several domains: no one-domain category")
    one = alone[0]
    same = demo.with_domains([one])
    renamed = demo.with_domains([one.model_copy(update={"name": f"{one.name}-renamed"})])
    a = estimate_build(same, data_dir=tmp_path, reference_release=demo_release)
    b = estimate_build(renamed, data_dir=tmp_path, reference_release=demo_release)
    assert {r.basis for r in b.rows} == {"estimated from demo/0.1.0 (per-category means)"}
    assert [(r.role, r.requests, r.input_tokens, r.output_tokens) for r in a.rows] == [
        (r.role, r.requests, r.input_tokens, r.output_tokens) for r in b.rows
    ]
    assert "offline" in a.notes[0] and a.totals.usd is None  # demo.toml: offline backend, no [prices]


# ------------------------------------------------------------------------------------------ score


def one_shot_requests(system, instance, rows, settings):
    from tasks.generate.llm import build_messages

    docs = [
        (str(r["doc_id"]), str(r.get("title") or r["doc_id"]), str(r.get("markdown") or "")) for r in rows
    ]
    return [build_messages(str(instance["sample_markdown"]), docs, settings)[0]]


SUFFIX = "\n\nNo other matters were reported for the period.\n"


@pytest.fixture(scope="module")
def scored(demo_release, tmp_path_factory):
    """estimate_score, then `frame score` (holistic + pairwise, openai judge, one-shot on the server)."""
    tmp = tmp_path_factory.mktemp("estimate-score")
    release = tmp / "data" / "releases" / "demo" / "0.1.0"
    shutil.copytree(demo_release, release)  # generations and scores land beside this copy
    table = pq.read_table(release / "instances.parquet")
    # the first instance of each category (the run stays short); G, Y and S are the demo's own
    keep = sorted({r["category"]: r["instance_id"] for r in reversed(table.to_pylist())}.values())
    table = table.filter(pc.is_in(table["instance_id"], pa.array(keep)))
    pq.write_table(table, release / "instances.parquet")
    instances = table.to_pylist()

    def answer(rec: Recorded) -> Reply:
        role, user = role_of(rec), rec.messages[1]["content"]
        if role == "generate_one_shot":
            [y] = [i["target_markdown"] for i in instances if i["sample_markdown"].strip() in user]
            return chat_reply(json.dumps({"report_markdown": y.rstrip() + SUFFIX}))
        if role == "score_holistic":
            axes = dict.fromkeys(("faithfulness", "completeness", "understandability", "hallucination"), 7)
            return chat_reply(json.dumps({**axes, "rationale": "rated"}))
        if role == "score_pairwise":
            return chat_reply(json.dumps({"winner": "tie", "rationale": "alike"}))
        return error(400, f"unexpected request ({role})")

    with LLMTestServer() as server:
        server.default_chat = answer
        llm = LLMSettings(
            backend="openai",
            base_url=server.base_url,
            model=MODEL,
            api_key_env=KEY_ENV,
            context_tokens=32000,
            max_output_tokens=4096,
        )
        cfg = tmp / "llm.toml"
        cfg.write_text(
            CONFIG.format(
                data=tmp / "data",
                base_url=server.base_url,
                model=MODEL,
                key_env=KEY_ENV,
                corpus=CORPUS,
                context=32000,
            ).replace("timeout_s = 60", "timeout_s = 60\nmax_output_tokens = 4096")
        )
        # a 32k model with a 4k output budget (the one-shot role's default, 16k, leaves too little input)
        one_shot = SimpleNamespace(
            kind="openai", model=MODEL, strategy="one-shot", max_output_tokens=4096, context_tokens=32000
        )
        systems = {"gold": None, "copy-sample": None, "one-shot": one_shot}
        est = estimate_score(
            release,
            systems,
            llm,
            ["holistic", "pairwise"],
            ScoreSettings(judge="openai"),
            prices=load_config(cfg).prices,
            generators={"one-shot": one_shot_requests},
        )
        sent_by_estimate = len(server.requests)
        env = {**frame_env(tmp / "ph"), KEY_ENV: SECRET, "FRAME_CACHE_DIR": str(tmp / "cache")}
        for k in [k for k in env if k.startswith(("FRAME_LLM_", "OPENAI_"))]:
            env.pop(k)
        args = [FRAME, "score", "--release", str(release), "--systems", ",".join(systems)]
        args += ["--metrics", "holistic,pairwise", "--judge", "openai", "--config", str(cfg)]
        args += ["--out", str(tmp / "scores"), "--bootstrap", "100"]
        res = subprocess.run(args, capture_output=True, text=True, env=env, cwd=tmp, timeout=900)
        yield SimpleNamespace(est=est, run=res, requests=list(server.chat_requests), sent=sent_by_estimate)


def test_score_dry_run_is_within_15_percent_of_the_real_run_per_role(scored):
    assert scored.run.returncode == 0, scored.run.stderr[-3000:] + scored.run.stdout[-2000:]
    assert scored.sent == 0
    actual = actual_by_role(scored.requests, role_of)
    assert set(actual) == {"generate_one_shot", "score_holistic", "score_pairwise"}
    got = scored.est.by_role()
    pairs = {
        "generate_one_shot": "one-shot",
        "score_holistic": "score_holistic",
        "score_pairwise": "score_pairwise",
    }
    for role, row in pairs.items():
        n, tokens = actual[role]
        within(got[row].requests, n, f"{role} requests")
        within(got[row].input_tokens, tokens, f"{role} input tokens")
    assert actual["score_holistic"][0] == 4 * 3 and actual["score_pairwise"][0] == 4 * 2


def test_score_dry_run_rows_say_what_is_estimated(scored):
    rows = {r.role: r for r in scored.est.rows}
    assert rows["gold"].requests == 0 and rows["copy-sample"].requests == 0
    assert rows["one-shot"].kind == "system" and rows["one-shot"].basis == COUNTED
    assert "the size of Y" in rows["one-shot"].note
    assert rows["score_holistic"].basis == "counted; R' estimated for one-shot (size of Y)"
    assert rows["score_pairwise"].basis == "counted; R' estimated for one-shot (size of Y)"
    assert scored.est.totals.usd == pytest.approx(sum(r.usd for r in scored.est.rows), abs=1e-5)
    assert Counter(r.kind for r in scored.est.rows) == {"system": 3, "role": 2}
