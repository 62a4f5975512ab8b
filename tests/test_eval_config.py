"""Evaluation configs (schemas/evaluation.py): named systems, roles, one-line errors, system identities."""

from __future__ import annotations

from pathlib import Path

import pytest

from schemas.config import LLMSettings
from schemas.evaluation import (
    DEFAULT_PROMPT,
    BuiltinSystem,
    CommandSystem,
    OpenAISystem,
    SubmissionSystem,
)
from tasks.config import load_eval_config
from tasks.errors import ConfigError
from tasks.generate.identity import system_identity

ROOT = Path(__file__).resolve().parents[1]

OPENAI = """
[systems.m]
kind = "openai"
base_url = "http://127.0.0.1:9/v1"
model = "model-a"
"""


def write(tmp_path: Path, text: str, name: str = "eval.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def error_of(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_eval_config(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}: ")
    return message.removeprefix(f"{path}: ")


# ---------------------------------------------------------------- the demo config and defaults


def test_demo_eval_config_loads():
    cfg = load_eval_config(ROOT / "configs" / "eval-demo.toml")
    assert list(cfg.systems)[:3] == ["gold", "copy-sample", "extractive"]
    assert [cfg.systems[n].builtin for n in ("gold", "copy-sample", "extractive")] == [
        "gold",
        "copy-sample",
        "extractive",
    ]
    kinds = {type(s) for s in cfg.systems.values()}
    assert {BuiltinSystem, CommandSystem, SubmissionSystem} <= kinds
    sub = next(s for s in cfg.systems.values() if isinstance(s, SubmissionSystem))
    assert sub.path.is_absolute() and sub.path.is_relative_to(ROOT)  # resolved against configs/
    settings = cfg.score_settings()
    assert (settings.judge, settings.embedder, settings.max_items) == ("offline", "minilm", 100)
    assert cfg.score.metrics == ["structure", "coverage", "faithfulness"]
    assert cfg.prices["gpt-4o-mini"].input_per_mtok == 0.15


def test_roles_and_score_section(tmp_path):
    cfg = load_eval_config(
        write(
            tmp_path,
            """
[judge]
base_url = "http://judge:8000/v1"
model = "judge-model"
api_key_env = "JUDGE_KEY"
[embedder]
kind = "openai"
model = "text-embedding-3-small"
base_url = "http://embed:8000/v1"
[score]
max_items = 7
seed = 3
bootstrap = 500
tree = "llm"
[build]
data_dir = "data"
""",
        )
    )
    judge = cfg.judge_settings()
    assert type(judge) is LLMSettings
    assert (judge.backend, judge.base_url, judge.model, judge.api_key_env) == (
        "openai",
        "http://judge:8000/v1",
        "judge-model",
        "JUDGE_KEY",
    )
    assert cfg.embedder_name() == "openai:text-embedding-3-small"
    assert cfg.embedder_settings().base_url == "http://embed:8000/v1"
    s = cfg.score_settings(max_items=9, seed=None)
    assert (s.judge, s.embedder, s.max_items, s.seed, s.bootstrap, s.tree) == (
        "openai",
        "openai:text-embedding-3-small",
        9,  # an override wins
        3,  # None overrides nothing
        500,
        "llm",
    )
    assert cfg.build.data_dir == (tmp_path / "data").resolve()
    assert cfg.systems == {}
    # no roles: the offline defaults
    bare = load_eval_config(write(tmp_path, OPENAI, "bare.toml"))
    assert bare.judge_settings() is None and bare.embedder_name() == "minilm"
    assert bare.score_settings().judge == "offline"


def test_openai_system_fields(tmp_path):
    cfg = load_eval_config(
        write(tmp_path, OPENAI + "temperature = 0.7\nconcurrency = 9\ncontext_tokens = 32000\n")
    )
    system = cfg.systems["m"]
    assert isinstance(system, OpenAISystem) and system.strategy == "one-shot"
    assert system.prompt_file() == DEFAULT_PROMPT
    llm = system.llm_settings()
    assert (llm.backend, llm.model, llm.temperature, llm.concurrency, llm.context_tokens) == (
        "openai",
        "model-a",
        0.7,
        9,
        32000,
    )


# ---------------------------------------------------------------- one-line errors naming the field


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the unknown key is said first, though `model` is missing too
        (
            '[systems.m]\nkind = "openai"\nbase_url = "http://x/v1"\nmodle = "a"\n',
            "field systems.m: unknown key 'modle' (did you mean 'model'?) (+1 more)",
        ),
        ("[sytems.m]\nkind = 'builtin'\n", "unknown key 'sytems' (did you mean 'systems'?)"),
        ("[judge]\nbase_url = 'http://x/v1'\ntemprature = 0.5\n", "field judge: unknown key 'temprature'"),
        ("[score]\nzzz = 1\n", "field score: unknown key 'zzz'"),
        ('[systems.m]\nkind = "openai"\nbase_url = "http://x/v1"\n', "field systems.m.model: required"),
        (
            OPENAI + "temperature = 3\n",
            "field systems.m.temperature: Input should be less than or equal to 2",
        ),
        (
            OPENAI.replace("http://127.0.0.1:9/v1", "ftp://x"),
            "field systems.m.base_url: must be an http(s) URL",
        ),
        (OPENAI + 'strategy = "agentic"\n', "field systems.m.strategy: Input should be 'one-shot'"),
        ("[systems.m]\nmodel = 'a'\n", "field systems.m: kind is missing (one of builtin, openai, command"),
        ("[systems.m]\nkind = 'agent'\n", "field systems.m: kind 'agent' is not one of builtin, openai"),
        (
            "[systems.mine]\nkind = 'builtin'\n",
            "field systems.mine: the system name is not a builtin: set builtin",
        ),
        (
            "[systems.b]\nkind = 'builtin'\nbuiltin = 'oracle'\n",
            "field systems.b.builtin: Input should be 'gold'",
        ),
        (OPENAI.replace("systems.m", "systems.gold"), "field systems: the system name 'gold' is reserved"),
        (
            "[systems.ref]\nkind = 'builtin'\nbuiltin = 'gold'\n",
            "field systems: system 'ref': the builtin gold must",
        ),
        (
            '[systems."a b"]\nkind = "builtin"\nbuiltin = "extractive"\n',
            "field systems: system name 'a b' must be",
        ),
        (f'[systems.{"x" * 65}]\nkind = "builtin"\nbuiltin = "extractive"\n', "must be 1-64 letters"),
        (OPENAI + 'prompt = "nope.md"\n', "field systems.m.prompt: prompt template not found: "),
        (
            '[systems.c]\nkind = "command"\ncommand = []\n',
            "field systems.c.command: List should have at least 1",
        ),
        ('[systems.c]\nkind = "command"\ncommand = "a \'b"\n', "field systems.c.command: cannot split"),
        (
            '[systems.c]\nkind = "command"\ncommand = "./missing.sh"\n',
            "field systems.c.command: program not found",
        ),
        (
            '[systems.c]\nkind = "command"\ncommand = "cat"\noutput = "../r.md"\n',
            "field systems.c.output: must be",
        ),
        (
            '[systems.c]\nkind = "command"\ncommand = "cat"\nenv = { "A-B" = "1" }\n',
            "'A-B' is not an environment",
        ),
        ('[systems.s]\nkind = "submission"\n', "field systems.s.path: required"),
        ("[judge]\nmodel = 'j'\n", "field judge: an openai judge needs base_url"),
        ("[embedder]\nkind = 'minilm'\nmodel = 'x'\n", "field embedder: kind 'minilm' is the local"),
        (
            "[embedder]\nkind = 'openai'\nmodel = 'e'\n",
            "field embedder: kind 'openai' needs model and base_url",
        ),
        (
            "[prices.m]\ninput_per_mtok = 1\noutput_per_mtk = 2\n",
            "field prices.m: unknown key 'output_per_mtk'",
        ),
        ("[run]\ntask_runner = 'ray'\n", "field run.task_runner: Input should be 'thread' or 'dask'"),
        ("[score]\nbootstrap = 10\n", "field score.bootstrap: Input should be greater than or equal to 100"),
        ("[systems\n", "not valid TOML"),
    ],
)
def test_one_line_errors(tmp_path, text, expected):
    assert expected in error_of(tmp_path, text)


def test_unknown_key_suggests_only_close_matches(tmp_path):
    assert error_of(tmp_path, OPENAI + "colour = 1\n") == "field systems.m: unknown key 'colour'"
    assert "did you mean 'temperature'" in error_of(tmp_path, OPENAI + "temperatur = 1\n")
    assert "did you mean 'command'" in error_of(tmp_path, "[systems.c]\nkind = 'command'\ncomand = 'cat'\n")


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_eval_config(tmp_path / "none.toml")


# ---------------------------------------------------------------- paths resolve against the config


def test_relative_paths_resolve_against_the_config_folder(tmp_path, monkeypatch):
    conf = tmp_path / "conf"
    (conf / "prompts").mkdir(parents=True)
    (conf / "prompts" / "mine.md").write_text(
        "---system---\nS\n---user---\n{{sample_report}}\n", encoding="utf-8"
    )
    (conf / "agent.py").write_text("print('# R')\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # not the config's folder
    cfg = load_eval_config(
        write(
            conf,
            OPENAI
            + 'prompt = "prompts/mine.md"\n'
            + '[systems.c]\nkind = "command"\ncommand = "python3 agent.py --fast"\n'
            + '[systems.s]\nkind = "submission"\npath = "subs/run.jsonl"\n'
            + '[run]\nresult_storage = "results"\n',
        )
    )
    assert cfg.systems["m"].prompt == (conf / "prompts" / "mine.md").resolve()
    assert cfg.systems["c"].command == ["python3", str((conf / "agent.py").resolve()), "--fast"]
    assert cfg.systems["s"].path == (conf / "subs" / "run.jsonl").resolve()  # need not exist yet
    assert cfg.run.result_storage == (conf / "results").resolve()


# ---------------------------------------------------------------- identity


def test_identity_follows_outputs_not_client_knobs(tmp_path):
    base = dict(kind="openai", base_url="http://h/v1", model="m")
    ident = system_identity("m", OpenAISystem(**base))
    assert ident["kind"] == "openai" and ident["prompt_sha256"]
    assert system_identity("m", OpenAISystem(**base, temperature=0.5)) != ident
    assert system_identity("m", OpenAISystem(**base, top_p=0.9)) != ident
    assert system_identity("m", OpenAISystem(**base, seed=1)) != ident
    assert system_identity("m", OpenAISystem(**{**base, "model": "other"})) != ident
    assert system_identity("m", OpenAISystem(**base, context_tokens=8000)) != ident
    assert system_identity("m", OpenAISystem(**base, strategy="section-by-section")) != ident
    same = OpenAISystem(
        **base, concurrency=16, timeout_s=5, transient_retries=0, invalid_retries=0, api_key_env="OTHER_KEY"
    )
    assert system_identity("renamed", same) == ident  # the name is not part of it either
    prompt = tmp_path / "p.md"
    prompt.write_text("---system---\nA\n---user---\n{{sample_report}}\n", encoding="utf-8")
    custom = system_identity("m", OpenAISystem(**base, prompt=prompt))
    prompt.write_text("---system---\nB\n---user---\n{{sample_report}}\n", encoding="utf-8")
    assert system_identity("m", OpenAISystem(**base, prompt=prompt)) != custom != ident


def test_command_identity_hashes_program_and_env_names_only(tmp_path):
    script = tmp_path / "agent.py"
    script.write_text("print('# v1')\n", encoding="utf-8")
    cfg = load_eval_config(
        write(
            tmp_path,
            '[systems.c]\nkind = "command"\ncommand = ["python3", "agent.py"]\n'
            'env = { AGENT_TOKEN = "very-secret-value", MODE = "fast" }\n',
        )
    )
    ident = system_identity("c", cfg.systems["c"])
    assert ident["argv"] == ["python3", "agent.py"]  # no machine path
    assert ident["env"] == ["AGENT_TOKEN", "MODE"]
    assert "very-secret-value" not in repr(ident)
    assert ident["program_sha256"].keys() == {"1"}
    script.write_text("print('# v2')\n", encoding="utf-8")
    assert system_identity("c", cfg.systems["c"]) != ident
    changed = cfg.systems["c"].model_copy(update={"env": {"AGENT_TOKEN": "other", "MODE": "slow"}})
    assert system_identity("c", changed)["env"] == ident["env"]
    assert system_identity("c", cfg.systems["c"].model_copy(update={"timeout_s": 5.0})) != ident
    assert "pass_env" not in ident  # keys of command systems made before pass_env stay the same
    passing = cfg.systems["c"].model_copy(update={"pass_env": ["HF_*"]})
    assert system_identity("c", passing)["pass_env"] == ["HF_*"]


def _submission_identity(path: Path, check: list[str] | None = None) -> dict:
    from tasks.generate.systems import SubmissionReportSystem

    system = SubmissionReportSystem("s", SubmissionSystem(kind="submission", path=path))
    if check is not None:
        system.check(check)
    return system.identity()


def test_submission_identity_digests_content(tmp_path):
    f = tmp_path / "run.jsonl"
    f.write_text('{"instance_id": "a", "markdown": "# A"}\n', encoding="utf-8")
    file_id = _submission_identity(f)
    f.write_text('{"instance_id": "a", "markdown": "# B"}\n', encoding="utf-8")
    assert _submission_identity(f) != file_id
    folder = tmp_path / "reports"
    folder.mkdir()
    (folder / "a.md").write_text("# A", encoding="utf-8")
    one = _submission_identity(folder)
    assert one == file_id  # the same report of the same instance, whether a file or a folder holds it
    (folder / "a.md").rename(folder / "b.md")
    assert _submission_identity(folder) != one  # names count
    (folder / "notes.txt").write_text("ignored", encoding="utf-8")
    assert _submission_identity(folder) == _submission_identity(folder.parent / "reports")
    with pytest.raises(ConfigError, match="checked reports"):
        system_identity("s", SubmissionSystem(kind="submission", path=folder))


def test_submission_identity_is_of_what_the_check_read(tmp_path):
    """The cache key is the digest of the reports `check` read: rewriting a file afterwards (a swap
    between the check and the run) changes neither the reports used nor their key."""
    from tasks.generate.systems import SubmissionReportSystem

    folder = tmp_path / "reports"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n", encoding="utf-8")
    system = SubmissionReportSystem("s", SubmissionSystem(kind="submission", path=folder))
    assert system.check(["a"]) == []
    before = system.identity()
    (folder / "a.md").write_text("# swapped in after the check\n", encoding="utf-8")
    assert system.identity() == before and system.reports == {"a": "# A\n"}
    assert system.check(["a"]) == [] and system.identity() != before  # a new check reads anew


def test_builtin_identity(tmp_path):
    cfg = load_eval_config(write(tmp_path, "[systems.extractive]\nkind = 'builtin'\n"))
    assert system_identity("extractive", cfg.systems["extractive"]) == {
        "kind": "builtin",
        "builtin": "extractive",
    }
