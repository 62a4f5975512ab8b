"""Report systems (tasks/generate/systems.py, command.py, submission.py): builtins, an OpenAI-compatible
model over real HTTP, a program run per instance, and submissions with every kind of defect."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tests.llm_server as fake_llm
from schemas.config import LLMSettings
from schemas.evaluation import CommandSystem, EvalConfig, OpenAISystem, SubmissionSystem, reports_sha256
from tasks.errors import ConfigError, FrameInputError
from tasks.generate.baselines import generate_report, grounding_rows_for
from tasks.generate.command import run_command
from tasks.generate.submission import load_submission, report_file_name
from tasks.generate.systems import (
    Generation,
    ReportSystem,
    builtin_systems,
    make_system,
    select_systems,
    without_target,
)

llm_server = fake_llm.llm_server

TARGET_MARK = "TARGET-ONLY-7f3a"  # a string only the target report Y holds
SAMPLE = (
    "# Acme quarterly report (Q1)\n\n## Results\n\nRevenue was $1,200 million.\n\n## Outlook\n\nSteady.\n"
)
G_ROWS = [
    {
        "grounding_set_id": "acme/Q2",
        "doc_id": "mdna/part 1",
        "title": "MD&A",
        "source_kind": "edgar",
        "markdown": "# MD&A\n\n## Results\n\nRevenue was $1,350 million for the quarter.\n",
    },
    {
        "grounding_set_id": "acme/Q2",
        "doc_id": "risk",
        "title": "Risk Factors",
        "source_kind": "edgar",
        "markdown": "# Risk Factors\n\nSupply may be constrained.\n",
    },
]
INSTANCE = {
    "instance_id": "financial_quarterly/acme/Q1->Q2",
    "category": "financial_quarterly",
    "domain": "acme",
    "t_target": "Q2",
    "grounding_set_id": "acme/Q2",
    "grounding_doc_ids": ["mdna/part 1", "risk"],
    "sample_markdown": SAMPLE,
    "target_markdown": f"# Acme quarterly report (Q2)\n\n## Results\n\n{TARGET_MARK} $1,350 million.\n",
}


def test_generation_holds_a_report_or_an_error():
    assert Generation("i", "# R\n", {}, None).ok
    assert not Generation("i", None, {}, "failed").ok
    with pytest.raises(ValueError):
        Generation("i", "# R\n", {}, "failed")
    with pytest.raises(ValueError):
        Generation("i", None, {}, None)
    assert "target_markdown" not in without_target(INSTANCE)
    assert without_target(INSTANCE)["sample_markdown"] == SAMPLE


# ---------------------------------------------------------------- builtins


def test_builtins_small_instance(tmp_path):
    systems = {n: make_system(n, c, cache_dir=tmp_path) for n, c in builtin_systems().items()}
    assert list(systems) == ["gold", "copy-sample", "extractive"]
    for s in systems.values():
        assert isinstance(s, ReportSystem) and s.kind == "builtin"
    assert systems["gold"].generate(INSTANCE, G_ROWS).markdown == INSTANCE["target_markdown"]
    assert systems["copy-sample"].generate(INSTANCE, G_ROWS).markdown == SAMPLE
    out = systems["extractive"].generate(INSTANCE, G_ROWS)
    assert (
        out.markdown == generate_report("extractive", INSTANCE, G_ROWS) and "$1,350 million" in out.markdown
    )
    assert systems["extractive"].identity() == {"kind": "builtin", "builtin": "extractive"}
    no_target = {k: v for k, v in INSTANCE.items() if k != "target_markdown"}
    assert systems["gold"].generate(no_target, G_ROWS).error == "the instance has no target_markdown"


def test_builtins_equal_the_baselines_on_the_demo(demo_release, tmp_path):
    instances = pq.read_table(demo_release / "instances.parquet").to_pylist()
    grounding = pq.read_table(demo_release / "grounding_documents.parquet").to_pylist()
    systems = {n: make_system(n, c, cache_dir=tmp_path) for n, c in builtin_systems().items()}
    # one filing and one paper instance (tests/test_generate.py runs extractive over all of them)
    instances = list({inst["category"].split("_")[0]: inst for inst in instances}.values())
    assert len(instances) == 2
    for inst in instances:
        rows = grounding_rows_for(inst, grounding)
        got = {n: s.generate(inst, rows) for n, s in systems.items()}
        assert got["gold"].markdown == inst["target_markdown"]
        for name in ("copy-sample", "extractive"):
            assert got[name].markdown == generate_report(name, inst, rows), (name, inst["instance_id"])
            assert got[name].instance_id == inst["instance_id"] and got[name].metadata == {}


def test_select_systems(tmp_path):
    cfg = EvalConfig.model_validate(
        {
            "systems": {
                "mine": {"kind": "command", "command": "cat sample.md"},
                "extractive": {"kind": "builtin"},
            }
        }
    )
    assert list(select_systems(None, cfg)) == ["mine", "extractive"]
    chosen = select_systems(["gold", "mine"], cfg)
    assert chosen["gold"].builtin == "gold" and isinstance(chosen["mine"], CommandSystem)
    assert list(select_systems(["gold", "copy-sample", "extractive"])) == [
        "gold",
        "copy-sample",
        "extractive",
    ]
    with pytest.raises(FrameInputError, match="unknown system 'nope'"):
        select_systems(["nope"], cfg)
    with pytest.raises(FrameInputError, match="named twice"):
        select_systems(["gold", "gold"])
    with pytest.raises(FrameInputError, match="no systems"):
        select_systems(None)
    llm = LLMSettings(backend="openai", base_url="http://h/v1", model="m", temperature=0.2)
    legacy = select_systems(["one-shot"], None, llm=llm)["one-shot"]
    assert (legacy.kind, legacy.base_url, legacy.model, legacy.temperature) == (
        "openai",
        "http://h/v1",
        "m",
        0.2,
    )
    with pytest.raises(FrameInputError, match="one-shot needs an OpenAI-compatible endpoint"):
        select_systems(["one-shot"], None, llm=LLMSettings())


# ---------------------------------------------------------------- openai systems over real HTTP

KEY_ENV = "FRAME_TEST_SYSTEMS_KEY"
REPORT = "# Acme quarterly report (Q2)\n\n## Results\n\nRevenue was $1,350 million.\n"


def openai_config(server, **overrides) -> OpenAISystem:
    values = dict(
        kind="openai",
        base_url=server.base_url,
        model="test-model",
        api_key_env=KEY_ENV,
        timeout_s=5,
        transient_retries=0,
        invalid_retries=0,
    )
    return OpenAISystem(**{**values, **overrides})


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-systems")


def test_openai_one_shot_over_http(llm_server, api_key, tmp_path):
    llm_server.script(
        fake_llm.json_reply({"report_markdown": REPORT}, prompt_tokens=900, completion_tokens=40)
    )
    system = make_system("model-a", openai_config(llm_server, temperature=0.3), cache_dir=tmp_path / "cache")
    assert system.kind == "openai" and system.identity()["temperature"] == 0.3
    out = system.generate(INSTANCE, G_ROWS)
    assert out.ok and out.markdown == REPORT and out.instance_id == INSTANCE["instance_id"]
    assert out.metadata["system"] == "model-a" and out.metadata["strategy"] == "one-shot"
    assert (out.metadata["prompt_tokens"], out.metadata["completion_tokens"]) == (900, 40)
    (req,) = llm_server.chat_requests
    assert req.body["model"] == "test-model" and req.body["temperature"] == 0.3
    assert SAMPLE.strip() in req.messages[-1]["content"]
    assert TARGET_MARK not in json.dumps(req.body)  # Y never reaches a system
    # the same system again: from the response cache, no request
    again = make_system("model-a", openai_config(llm_server, temperature=0.3), cache_dir=tmp_path / "cache")
    assert again.generate(INSTANCE, G_ROWS).metadata["cached"] and len(llm_server.chat_requests) == 1
    # another temperature is another system: it asks the endpoint
    llm_server.script(fake_llm.json_reply({"report_markdown": REPORT}))
    warmer = make_system("model-a", openai_config(llm_server, temperature=0.9), cache_dir=tmp_path / "cache")
    assert warmer.identity() != system.identity()
    assert not warmer.generate(INSTANCE, G_ROWS).metadata["cached"] and len(llm_server.chat_requests) == 2


def test_openai_failure_is_one_instance_error(llm_server, api_key, tmp_path):
    llm_server.script(fake_llm.json_reply({"report_markdown": "   "}))
    system = make_system("m", openai_config(llm_server), cache_dir=tmp_path)
    out = system.generate(INSTANCE, G_ROWS)
    assert out.markdown is None and "invalid output" in out.error and "\n" not in out.error
    tiny = make_system(
        "m", openai_config(llm_server, context_tokens=1024, max_output_tokens=900), cache_dir=tmp_path
    )
    assert "context_tokens" in tiny.generate(INSTANCE, G_ROWS).error
    assert len(llm_server.chat_requests) == 1


def test_openai_missing_key_is_a_config_error(llm_server, monkeypatch, tmp_path):
    monkeypatch.delenv(KEY_ENV, raising=False)
    system = make_system("m", openai_config(llm_server), cache_dir=tmp_path)
    with pytest.raises(
        ConfigError, match=f"systems.m.api_key_env: environment variable {KEY_ENV} is not set"
    ):
        system.generate(INSTANCE, G_ROWS)
    assert llm_server.chat_requests == []


def test_openai_custom_prompt(llm_server, api_key, tmp_path):
    template = tmp_path / "mine.md"
    template.write_text(
        "---system---\nWrite the CUSTOM-TEMPLATE report.\n---user---\n{{sample_report}}\n{{documents}}\n",
        encoding="utf-8",
    )
    bad = tmp_path / "bad.md"
    bad.write_text("---system---\nS\n---user---\n{{sample_report}} {{mood}}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"systems.m.prompt: placeholder \{\{mood\}\} has no value"):
        make_system("m", openai_config(llm_server, prompt=bad), cache_dir=tmp_path)
    llm_server.script(fake_llm.json_reply({"report_markdown": REPORT}))
    out = make_system("m", openai_config(llm_server, prompt=template), cache_dir=tmp_path).generate(
        INSTANCE, G_ROWS
    )
    assert out.markdown == REPORT
    assert "CUSTOM-TEMPLATE" in llm_server.chat_requests[0].messages[0]["content"]
    assert out.metadata["prompt"] == "mine"


def test_openai_top_p_and_seed_are_sent_and_key_the_cache(llm_server, api_key, tmp_path):
    llm_server.default_chat = lambda req: fake_llm.json_reply({"report_markdown": REPORT})
    plain = make_system("m", openai_config(llm_server), cache_dir=tmp_path).generate(INSTANCE, G_ROWS)
    tuned = make_system("m", openai_config(llm_server, top_p=0.5, seed=7), cache_dir=tmp_path)
    assert plain.ok and tuned.generate(INSTANCE, G_ROWS).ok
    first, second = (r.body for r in llm_server.chat_requests)
    assert "top_p" not in first and "seed" not in first
    assert second["top_p"] == 0.5 and second["seed"] == 7  # a new request, not the cached reply


def test_openai_section_by_section(llm_server, api_key, tmp_path):
    def answer(req):
        user = req.messages[-1]["content"]
        return fake_llm.json_reply({"section_markdown": f"Written from G ({len(user)} chars of prompt)."})

    llm_server.default_chat = answer
    cfg = openai_config(llm_server, strategy="section-by-section")
    out = make_system("sections", cfg, cache_dir=tmp_path).generate(INSTANCE, G_ROWS)
    assert out.ok, out.error
    headings = [ln for ln in out.markdown.splitlines() if ln.startswith("#")]
    assert headings == [ln for ln in SAMPLE.splitlines() if ln.startswith("#")]  # S's outline
    assert out.metadata["strategy"] == "section-by-section" and out.metadata["system"] == "sections"
    assert len(llm_server.chat_requests) == 2  # Results and Outlook have text of their own in S
    assert all(TARGET_MARK not in json.dumps(r.body) for r in llm_server.chat_requests)
    bad = tmp_path / "bad.md"
    bad.write_text("---system---\nS\n---user---\n{{outline}} {{sample_report}}\n", encoding="utf-8")
    with pytest.raises(
        ConfigError, match=r"placeholder \{\{sample_report\}\} has no value \(section-by-section"
    ):
        make_system(
            "sections",
            openai_config(llm_server, strategy="section-by-section", prompt=bad),
            cache_dir=tmp_path,
        )


# ---------------------------------------------------------------- command systems

AGENT = r"""
import json, os, subprocess, sys, time

mode = sys.argv[1]
here = os.environ["FRAME_INSTANCE_DIR"]
assert os.path.realpath(os.getcwd()) == os.path.realpath(here)
inst = json.load(open("instance.json", encoding="utf-8"))
docs = [json.loads(line) for line in open("grounding.jsonl", encoding="utf-8")]
seen = ""
for root, _, files in os.walk("."):
    for f in files:
        seen += open(os.path.join(root, f), encoding="utf-8").read()
report = "\n".join([
    "# Report for " + inst["instance_id"],
    "## Seen",
    "sample: " + open(inst["sample"], encoding="utf-8").read().splitlines()[0],
    "docs: " + ", ".join(
        d["doc_id"] + "=" + open(d["path"], encoding="utf-8").readline().strip() for d in docs
    ),
    "target visible: " + str("TARGET-ONLY" in seen or "target_markdown" in inst),
    "mode: " + os.environ.get("AGENT_MODE", "-"),
]) + "\n"
if mode == "stdout":
    sys.stdout.write(report)
elif mode == "file":
    os.makedirs("out", exist_ok=True)
    open("out/report.md", "w", encoding="utf-8").write(report)
    print("progress chatter on stdout is ignored")
elif mode == "sleep":
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # holds the pipes too
    time.sleep(60)
elif mode == "fail":
    print("loading the model", file=sys.stderr)
    print("ValueError: no such section", file=sys.stderr)
    sys.exit(3)
elif mode == "empty":
    print("   ")
elif mode == "latin1":
    sys.stdout.buffer.write(b"# caf\xe9\n")
"""


@pytest.fixture(scope="module")
def agent(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("agent") / "agent.py"
    path.write_text(AGENT, encoding="utf-8")
    return path


def run_agent(agent: Path, mode: str, root: Path, **kw) -> Generation:
    options = {"timeout_s": 30.0, "output": "stdout", "env": {"AGENT_MODE": mode}, **kw}
    return run_command([sys.executable, str(agent), mode], INSTANCE, G_ROWS, workdir_root=root, **options)


def test_command_stdout(agent, tmp_path):
    out = run_agent(agent, "stdout", tmp_path / "runs")
    assert out.ok, out.error
    assert out.markdown.startswith(f"# Report for {INSTANCE['instance_id']}\n")
    assert "sample: # Acme quarterly report (Q1)" in out.markdown
    assert "docs: mdna/part 1=# MD&A, risk=# Risk Factors" in out.markdown
    assert "target visible: False" in out.markdown and "mode: stdout" in out.markdown
    assert out.metadata == {"kind": "command", "exit_code": 0}
    assert list((tmp_path / "runs").iterdir()) == []  # the instance folder is gone


def test_command_output_file(agent, tmp_path):
    out = run_agent(agent, "file", tmp_path / "runs", output="out/report.md")
    assert out.ok and out.markdown.startswith("# Report for") and "chatter" not in out.markdown
    missing = run_agent(agent, "stdout", tmp_path / "runs", output="report.md")
    assert missing.error == "wrote no report.md in its folder"


def test_command_timeout_kills_the_process_group(agent, tmp_path):
    start = time.monotonic()
    out = run_agent(agent, "sleep", tmp_path / "runs", timeout_s=1)
    assert out.error == "timed out after 1 s" and out.markdown is None
    assert time.monotonic() - start < 15  # the grandchild holding the pipes was killed too
    assert list((tmp_path / "runs").iterdir()) == []


@pytest.mark.parametrize(
    ("mode", "error"),
    [
        ("fail", "exited with code 3: ValueError: no such section"),
        ("empty", "printed nothing"),
        ("latin1", "stdout is not UTF-8 (byte 5)"),
    ],
)
def test_command_failures(agent, tmp_path, mode, error):
    out = run_agent(agent, mode, tmp_path / "runs")
    assert out.error == error and out.markdown is None and out.instance_id == INSTANCE["instance_id"]
    assert list((tmp_path / "runs").iterdir()) == []


def test_command_system(agent, tmp_path):
    cfg = CommandSystem(
        kind="command", command=[sys.executable, str(agent), "stdout"], env={"AGENT_MODE": "cfg"}
    )
    system = make_system("agent", cfg, cache_dir=tmp_path)
    out = system.generate(INSTANCE, G_ROWS)
    assert system.kind == "command" and out.ok and "mode: cfg" in out.markdown
    assert "target visible: False" in out.markdown
    assert system.identity()["program_sha256"]
    with pytest.raises(ConfigError, match="systems.x.command: program 'no-such-program-here' not found"):
        make_system(
            "x", CommandSystem(kind="command", command="no-such-program-here --x"), cache_dir=tmp_path
        )


# ---------------------------------------------------------------- submissions

IDS = [f"financial_quarterly/co{i}/Q1->Q2" for i in range(6)]


def jsonl(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def line(iid: str, md: str) -> bytes:
    return json.dumps({"instance_id": iid, "markdown": md}).encode()


def test_generations_are_written_under_the_submission_file_names(tmp_path):
    # a folder that `frame generate` (tasks.generate.runs) writes is a valid submission folder
    from tasks.generate.runs import write_generations

    release = tmp_path / "data" / "releases" / "r" / "1.0.0"
    release.mkdir(parents=True)
    ids = [*IDS, "academic_simple/gw/W1->W2", "a b/c:d", "x->y->z"]
    out = write_generations(release, "mine", [Generation(i, f"# {i}\n", {}, None) for i in ids])
    names = sorted(p.name for p in (out / "reports").iterdir())
    assert names == sorted(f"{report_file_name(i)}.md" for i in ids)
    reports, problems = load_submission(out / "reports", ids)
    assert problems == [] and reports == {i: f"# {i}\n" for i in ids}


def test_jsonl_submission_problems(tmp_path):
    f = jsonl(
        tmp_path / "run.jsonl",
        [
            line(IDS[0], "# A\n"),
            b"{oops",
            line("nope/x", "# X\n"),
            line(IDS[1], "  \n"),
            line(IDS[2], "# C " + "x" * 100),
            b'{"instance_id": "' + IDS[3].encode() + b'", "markdown": "# D caf\xe9"}',
            line(IDS[0], "# A again\n"),
            b'{"markdown": "# no id"}',
            b"[1, 2]",
            json.dumps({"instance_id": IDS[5]}).encode(),
        ],
    )
    reports, problems = load_submission(f, IDS, max_chars=50)
    assert reports == {}  # IDS[0] is a duplicate: neither copy is used
    assert problems == [
        f"{f}: line 2: not JSON (Expecting property name enclosed in double quotes at column 2)",
        f"{f}: instance nope/x: unknown instance id (not in the release; line 3)",
        f"{f}: instance {IDS[1]}: empty report",
        f"{f}: instance {IDS[2]}: report of 104 characters (max_chars 50)",
        f"{f}: instance {IDS[3]}: not UTF-8 (byte 70 of the line)",
        f"{f}: instance {IDS[0]}: duplicate (line 1 and line 7)",
        f"{f}: line 8: missing field 'instance_id' (a non-empty string)",
        f"{f}: line 9: not a JSON object with instance_id and markdown",
        f"{f}: instance {IDS[5]}: missing field 'markdown' (line 10)",
        f"{f}: instance {IDS[4]}: missing (no report for this instance)",
    ]
    _, forgiving = load_submission(f, IDS, max_chars=50, allow_missing=True)
    assert forgiving == problems[:-1]


def test_good_submissions_in_every_layout(tmp_path):
    reports = {iid: f"# Report {n}\n\nText.\n" for n, iid in enumerate(IDS)}
    f = jsonl(tmp_path / "run.jsonl", [line(i, md) for i, md in reports.items()])
    assert load_submission(f, IDS) == (reports, [])
    p = tmp_path / "run.parquet"
    pq.write_table(pa.table({"instance_id": list(reports), "markdown": list(reports.values())}), p)
    assert load_submission(p, IDS) == (reports, [])
    folder = tmp_path / "reports"
    folder.mkdir()
    for iid, md in reports.items():
        (folder / f"{report_file_name(iid)}.md").write_text(md, encoding="utf-8")
    (folder / "README.txt").write_text("not a report", encoding="utf-8")
    assert load_submission(folder, IDS) == (reports, [])
    partial, problems = load_submission(f, [*IDS, "extra/id"], allow_missing=True)
    assert partial == reports and problems == []


def test_parquet_submission_problems(tmp_path):
    p = tmp_path / "run.parquet"
    pq.write_table(
        pa.table(
            {
                "instance_id": [IDS[0], IDS[1], None, "nope/x"],
                "markdown": pa.array([b"# A\n", b"# B caf\xe9\n", b"# C\n", b"# X\n"], pa.binary()),
            }
        ),
        p,
    )
    reports, problems = load_submission(p, IDS[:2])
    assert reports == {IDS[0]: "# A\n"}
    assert problems == [
        f"{p}: instance {IDS[1]}: not UTF-8 (row 1, byte 7)",
        f"{p}: row 2: missing field 'instance_id' (a non-empty string)",
        f"{p}: instance nope/x: unknown instance id (not in the release; row 3)",
    ]
    no_col = tmp_path / "cols.parquet"
    pq.write_table(pa.table({"instance_id": IDS, "report": IDS}), no_col)
    assert load_submission(no_col, IDS) == (
        {},
        [f"{no_col}: missing column 'markdown' (a submission has instance_id and markdown)"],
    )
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"not parquet at all")
    assert load_submission(junk, IDS)[1][0].startswith(f"{junk}: not a readable parquet file (")


def test_folder_submission_problems(tmp_path):
    folder = tmp_path / "reports"
    folder.mkdir()
    (folder / f"{report_file_name(IDS[0])}.md").write_text("# A\n", encoding="utf-8")
    (folder / f"{report_file_name(IDS[1])}.md").write_bytes(b"# B caf\xe9\n")
    (folder / f"{report_file_name(IDS[2])}.md").write_text("\n", encoding="utf-8")
    (folder / "stray.md").write_text("# ?\n", encoding="utf-8")
    reports, problems = load_submission(folder, IDS[:4])
    name = {i: folder / f"{report_file_name(i)}.md" for i in IDS}
    assert reports == {IDS[0]: "# A\n"}
    assert sorted(problems) == sorted(
        [
            f"{name[IDS[1]]}: instance {IDS[1]}: not UTF-8 (byte 7)",
            f"{name[IDS[2]]}: instance {IDS[2]}: empty report",
            f"{folder / 'stray.md'}: unknown instance id (the file name matches no instance of the release)",
            f"{folder}: instance {IDS[3]}: missing (no report for this instance)",
        ]
    )


def test_unusable_submission_paths(tmp_path):
    assert load_submission(tmp_path / "none.jsonl", IDS) == ({}, [f"{tmp_path / 'none.jsonl'}: not found"])
    csv = tmp_path / "run.csv"
    csv.write_text("instance_id,markdown\n", encoding="utf-8")
    assert "not a submission (a .jsonl or .parquet file" in load_submission(csv, IDS)[1][0]


def test_submission_system(tmp_path):
    f = jsonl(tmp_path / "run.jsonl", [line(INSTANCE["instance_id"], "# Mine\n")])
    system = make_system("team-x", SubmissionSystem(kind="submission", path=f), cache_dir=tmp_path)
    with pytest.raises(RuntimeError, match="call check"):
        system.generate(INSTANCE, G_ROWS)
    assert system.check([INSTANCE["instance_id"], "other/id"]) == [
        f"{f}: instance other/id: missing (no report for this instance)"
    ]
    assert system.check([INSTANCE["instance_id"], "other/id"], allow_missing=True) == []
    out = system.generate(INSTANCE, G_ROWS)
    assert out.markdown == "# Mine\n" and out.metadata == {"kind": "submission", "source": "run.jsonl"}
    missing = system.generate(dict(INSTANCE, instance_id="other/id"), G_ROWS).error
    assert missing == f"no usable report in the submission {f.name}"
    assert system.identity()["sha256"] == reports_sha256({INSTANCE["instance_id"]: "# Mine\n"})
