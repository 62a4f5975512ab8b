"""Issue 35 point 11: first steps that work on a fresh clone. The README stays short and opens with
`make demo` / `make test`, then the three routes to evaluate a model; after what `make demo` runs (read
from the Makefile), configs/eval-demo.toml validates with every system usable, and the README's program
and folder routes run as written on the demo release (with `--metrics rouge_l` added, for time)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import tomllib

import pandas as pd
import pytest

import tests.llm_server as fake_llm
from tests.conftest import ROOT, frame_env

llm_server = fake_llm.llm_server
FRAME = [sys.executable, "-m", "flows.cli"]
RELEASE = "data/releases/demo/0.1.0"
FAST = ["--metrics", "rouge_l"]  # what the test adds to each README command: the cheapest metric


def _fast(env: dict[str, str]) -> list[str]:
    """FAST, and `--limit 2` where `frame score` has it (issue 35 point 2): two instances, not 22."""
    helps = subprocess.run([*FRAME, "score", "--help"], capture_output=True, text=True, env=env, timeout=60)
    return [*FAST, "--limit", "2"] if "--limit" in helps.stdout else FAST


def _section(title: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def _commands(block_text: str) -> list[list[str]]:
    """The commands of the first ```bash block of `block_text` (comments and blank lines left out)."""
    block = re.search(r"```bash\n(.*?)```", block_text, re.S)
    assert block, block_text[:300]
    lines = [ln.split(" #")[0].strip() for ln in block.group(1).splitlines()]
    return [shlex.split(ln) for ln in lines if ln and not ln.startswith("#")]


def test_the_readme_is_short_and_opens_with_make_demo_make_test_and_the_evaluation():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) < 300, len(lines)
    assert _commands(text) == [["make", "demo"], ["make", "test"]]  # the first block, exactly these
    assert lines.index("## Evaluate a model") < 30  # near the top
    # every page the README links to exists
    for link in re.findall(r"\]\(((?:docs/)[^)#]*)", text):
        assert (ROOT / link).exists(), link


def _demo_recipe() -> list[list[str]]:
    """The commands of the Makefile's `demo` target, with make's variables filled in."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^demo:.*\n((?:\t.*\n)+)", text, re.M)
    assert recipe, "no demo target"
    out = []
    for line in recipe.group(1).splitlines():
        line = line.strip().replace("$(BIN)/frame", "frame").replace("$(DEMO_VERSION)", "0.1.0")
        out.append(shlex.split(line.replace("$(VENV)", ".venv")))
    return out


def test_make_demo_ends_by_printing_the_next_command():
    *_, last = _demo_recipe()
    assert last[:2] == ["@echo", f"  frame score --release {RELEASE} --config configs/eval-demo.toml"]


@pytest.fixture(scope="module")
def after_make_demo(demo_release, tmp_path_factory):
    """A checkout's working folder after `make demo`: the demo release (the session's build, copied), the
    repo's configs/eval-demo.toml, and what the Makefile's demo target runs after its build."""
    work = tmp_path_factory.mktemp("fresh-clone")
    shutil.copytree(demo_release, work / RELEASE)
    (work / "configs").mkdir()
    shutil.copyfile(ROOT / "configs" / "eval-demo.toml", work / "configs" / "eval-demo.toml")
    env = frame_env(work / "prefect-home") | {"PYTHONPATH": str(ROOT)}
    build, *rest = [c for c in _demo_recipe() if c[0] == "frame"]
    assert build[:2] == ["frame", "build"]
    for cmd in rest:
        res = subprocess.run(
            [*FRAME, *cmd[1:]], capture_output=True, text=True, env=env, cwd=work, timeout=300
        )
        assert res.returncode == 0, f"{cmd}: {res.stderr[-2000:]}"
    return work, env


def test_eval_demo_config_is_valid_and_every_system_usable_after_make_demo(after_make_demo):
    from flows.generate import check_submissions, systems_for
    from tasks.config import load_eval_config

    work, _ = after_make_demo
    cfg = load_eval_config(work / "configs" / "eval-demo.toml")
    systems = systems_for(None, cfg, None, work / "cache")
    ids = pd.read_parquet(work / RELEASE / "instances.parquet")["instance_id"].tolist()
    assert check_submissions(systems, ids) == []
    assert {"cat-sample", "my-submission"} <= set(systems)


def _route(kind: str) -> list[str]:
    """The README command of the route for a system of `kind` in configs/eval-demo.toml."""
    systems = tomllib.loads((ROOT / "configs" / "eval-demo.toml").read_text(encoding="utf-8"))["systems"]
    found = [
        c
        for c in _commands(_section("Evaluate a model"))
        if "--systems" in c and systems.get(c[c.index("--systems") + 1], {}).get("kind") == kind
    ]
    assert len(found) == 1, f"one README route for a {kind} system: {found}"
    return found[0]


def test_the_program_and_folder_routes_run_as_written(after_make_demo):
    work, env = after_make_demo
    ids = pd.read_parquet(work / RELEASE / "instances.parquet")["instance_id"]
    fast = _fast(env)
    values = {}
    for kind in ("command", "submission"):
        cmd = _route(kind)
        assert cmd[:2] == ["frame", "score"] and cmd[cmd.index("--release") + 1] == RELEASE
        res = subprocess.run(
            [*FRAME, *cmd[1:], *fast], capture_output=True, text=True, env=env, cwd=work, timeout=300
        )
        assert res.returncode == 0, f"{cmd}: {res.stderr[-2000:]}"
        system = cmd[cmd.index("--systems") + 1]
        scores = pd.read_parquet(work / "data" / "scores" / "demo" / "0.1.0" / "scores.parquet")
        mine = scores[(scores.system == system) & (scores.metric == "rouge_l")]
        # every instance of the release (or the two --limit chose), none failed
        assert len(mine) == (2 if "--limit" in fast else len(ids)) and set(mine.instance_id) <= set(ids)
        assert mine.value.notna().all()
        values[kind] = mine.set_index("instance_id").value.sort_index()
    # both routes hand in S as the report (`cat sample.md`; copy-sample's folder): the same scores
    pd.testing.assert_series_equal(values["command"], values["submission"])


def test_the_model_route_runs_against_a_local_endpoint(after_make_demo, llm_server):
    work, env = after_make_demo
    helps = subprocess.run([*FRAME, "score", "--help"], capture_output=True, text=True, env=env, timeout=60)
    if "--model-base-url" not in helps.stdout:
        pytest.skip("frame score --model (issue 35 point 1) is not in this build yet")
    (cmd,) = [c for c in _commands(_section("Evaluate a model")) if "--model" in c]
    model = cmd[cmd.index("--model") + 1].split("/", 1)[1]
    cmd[cmd.index("--model-base-url") + 1] = llm_server.base_url
    llm_server.default_chat = fake_llm.chat_reply(
        "# Report\n\n## Results\n\nRevenue grew 12% to $4.1 billion.\n"
    )
    env = env | {"OPENAI_API_KEY": "sk-test-first-steps"}
    res = subprocess.run(
        [*FRAME, *cmd[1:], *_fast(env)], capture_output=True, text=True, env=env, cwd=work, timeout=300
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert llm_server.chat_requests and {r.body["model"] for r in llm_server.chat_requests} == {model}
    scores = pd.read_parquet(work / "data" / "scores" / "demo" / "0.1.0" / "scores.parquet")
    # the model is scored beside the reference systems that need no endpoint (gold and the baselines)
    assert set(scores.system) == {"gold", "copy-sample", "extractive", model} and scores.value.notna().all()
