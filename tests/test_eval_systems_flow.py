"""`frame score --config eval.toml` with every kind of named system at once, all LLM traffic over HTTP to the
local OpenAI-compatible test server: the three builtins, three `openai` systems (three models with
deterministically different replies), a `command` system (a script), a `submission` folder, and a judge
role served as a fourth model, every metric family selected. Then: a rerun makes no request and computes
nothing; a new temperature for one system regenerates and rescores that system only."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pandas as pd

import tests.llm_server as fake_llm
from tasks.release.evalkit import report_file_name
from tasks.score.registry import plan
from tests.conftest import frame_env
from tests.test_score_openai_flow import FRAME, S, answer, role_of, write_release

llm_server = fake_llm.llm_server
SECRET = "sk-test-eval-systems-4d1e"
JUDGE = "judge-model"
MODELS = {"alpha": "model-a", "beta": "model-b", "gamma": JUDGE}  # gamma is judged by its own model
ALL = "structure,coverage,faithfulness,teds,teds_s,text_edit_distance,scaffold,rubric,holistic,pairwise"
SCRIPT = """import pathlib
print(pathlib.Path("sample.md").read_text(encoding="utf-8") + "\\nWritten by a command system.")
"""


def reply(req: fake_llm.Recorded) -> fake_llm.Reply:
    """Generation: each model (and temperature) writes its own report; every judge role: `answer`."""
    if role_of(req) == "generate_one_shot":
        body = req.body
        note = f"Written by {body['model']} at temperature {body['temperature']}."
        report = S.replace("1,200", "1,350") + f"\n{note}\n"
        return fake_llm.json_reply({"report_markdown": report})
    return answer(req)


def eval_config(folder: Path, server: str, beta_temperature: float = 0.0) -> Path:
    systems = "\n".join(
        f'[systems.{name}]\nkind = "openai"\nbase_url = "{server}"\nmodel = "{model}"\n'
        f'api_key_env = "EVAL_KEY"\ntemperature = {beta_temperature if name == "beta" else 0.0}\n'
        for name, model in MODELS.items()
    )
    text = f"""
[systems.gold]
kind = "builtin"

[systems.copy-sample]
kind = "builtin"

[systems.extractive]
kind = "builtin"

{systems}
[systems.agent]
kind = "command"
command = ["{Path(sys.executable).as_posix()}", "agent.py"]
timeout_s = 60

[systems.outside]
kind = "submission"
path = "submission"

[judge]
base_url = "{server}"
model = "{JUDGE}"
api_key_env = "EVAL_KEY"

[score]
metrics = {ALL.split(",")!r}
bootstrap = 200
tree = "llm"
"""
    (folder / "agent.py").write_text(SCRIPT, encoding="utf-8")
    path = folder / "eval.toml"
    path.write_text(text.replace("'", '"'), encoding="utf-8")
    return path


def states(stdout: str) -> Counter:
    found = re.findall(
        r"Task run '(score|generate|prepare|compare) · [^']*' - Finished in state (\w+)", stdout
    )
    return Counter(found)


def test_every_kind_of_system_in_one_scored_run(llm_server, tmp_path):
    rel = write_release(tmp_path)
    iid = "financial_quarterly/ACME-10-Q/t1->t2"
    sub = tmp_path / "submission"
    sub.mkdir()
    (sub / f"{report_file_name(iid)}.md").write_text(S + "\nSubmitted from elsewhere.\n", encoding="utf-8")
    llm_server.default_chat = reply
    env = {**frame_env(tmp_path / "ph"), "EVAL_KEY": SECRET}
    config = eval_config(tmp_path, llm_server.base_url)
    args = [FRAME, "score", "--release", str(rel), "--config", str(config)]
    first = subprocess.run(args, capture_output=True, text=True, env=env, timeout=900)
    assert first.returncode == 0, first.stderr[-3000:] + first.stdout[-3000:]
    calls = len(llm_server.requests)
    gens = [r for r in llm_server.chat_requests if role_of(r) == "generate_one_shot"]
    assert sorted(r.body["model"] for r in gens) == sorted(MODELS.values())

    out = tmp_path / "data" / "scores" / "tiny" / "1.0.0"
    scores = pd.read_parquet(out / "scores.parquet")
    names = ["gold", "copy-sample", "extractive", *MODELS, "agent", "outside"]
    assert set(scores.system) == set(names)
    # the judge role is a model of its own: every LLM-judged row names it; computed metrics say offline
    llm_rows = scores[~scores.metric.isin(["teds", "teds_s", "text_edit_distance"])]
    assert llm_rows.judge.str.contains(JUDGE).all(), llm_rows[~llm_rows.judge.str.contains(JUDGE)]
    assert not scores.judge.str.contains("model-a|model-b").any()
    # each system's own report was scored: the command's and the submission's texts reached the judges
    judged = "\n".join(
        r.messages[-1]["content"] for r in llm_server.chat_requests if role_of(r) != "generate_one_shot"
    )
    assert "Written by a command system." in judged and "Submitted from elsewhere." in judged
    board = (out / "leaderboard.md").read_text(encoding="utf-8")
    header = next(line for line in board.splitlines() if line.startswith("| Metric"))
    assert all(n in header for n in names)  # systems as columns (paper 000 Table 6)
    assert "Paired tests" in board and "Win matrix" in board
    assert re.search(r"gamma[^|]*self-judged", header) and not re.search(r"alpha[^|]*self-judged", header)
    assert (out / "paired_tests.csv").is_file() and (out / "win_matrix.csv").is_file()
    gen_dir = tmp_path / "data" / "generations" / "tiny" / "1.0.0"
    assert {p.name for p in gen_dir.iterdir()} == set(names) - {"gold"}

    second = subprocess.run(args, capture_output=True, text=True, env=env, timeout=900)
    assert second.returncode == 0, second.stderr[-3000:]
    assert len(llm_server.requests) == calls  # no request at all
    assert {state for _, state in states(second.stdout)} == {"Cached"}

    eval_config(tmp_path, llm_server.base_url, beta_temperature=0.7)
    third = subprocess.run(args, capture_output=True, text=True, env=env, timeout=900)
    assert third.returncode == 0, third.stderr[-3000:]
    ran = {k: v for k, v in states(third.stdout).items() if k[1] != "Cached"}
    _, families, _ = plan(ALL.split(","), len(names) - 1)  # teds + teds_s: one family; pairwise compares
    n_families = len(families)
    assert ran == {
        ("generate", "Completed"): 1,
        ("score", "Completed"): n_families,
        ("compare", "Completed"): 1,
    }
    new = llm_server.chat_requests[calls:]
    assert [r.body["model"] for r in new if role_of(r) == "generate_one_shot"] == [MODELS["beta"]]
    computed = re.findall(r"Task run 'score · [^']*' - \S+ (\S+) \w+: ", third.stdout)
    assert set(computed) == {"beta"}, computed


def test_failing_command_and_bad_submission(tmp_path):
    """A command that fails is a recorded failed generation and the others are scored; a bad submission
    stops everything before any scoring, one line per problem."""
    rel = write_release(tmp_path)
    env = frame_env(tmp_path / "ph")
    (tmp_path / "boom.py").write_text("import sys\nsys.exit(3)\n", encoding="utf-8")
    (tmp_path / "quiet.py").write_text("pass\n", encoding="utf-8")
    py = Path(sys.executable).as_posix()
    config = tmp_path / "eval.toml"
    config.write_text(
        f'[systems.copy-sample]\nkind = "builtin"\n\n'
        f'[systems.boom]\nkind = "command"\ncommand = ["{py}", "boom.py"]\n'
        f'\n[systems.quiet]\nkind = "command"\ncommand = ["{py}", "quiet.py"]\n',
        encoding="utf-8",
    )
    args = [FRAME, "score", "--release", str(rel), "--config", str(config), "--metrics", "structure"]
    res = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    # two requested systems produced nothing: scored what there is, said so, exit 1 (docs/security.md)
    assert res.returncode == 1, res.stderr[-3000:]
    warnings = [ln for ln in res.stderr.splitlines() if ln.startswith("frame: warning:")]
    assert len(warnings) == 2
    assert "boom" in warnings[0] and "exited with code 3" in warnings[0]
    assert "quiet" in warnings[1] and "printed nothing" in warnings[1]
    # then one summary line per system that produced nothing
    boom, quiet = res.stderr.strip().splitlines()[-2:]
    assert boom.startswith("frame: error: boom: generated 0/") and "exited with code 3" in boom
    assert quiet.startswith("frame: error: quiet: generated 0/") and "printed nothing" in quiet
    scores = pd.read_parquet(tmp_path / "data" / "scores" / "tiny" / "1.0.0" / "scores.parquet")
    assert set(scores.system) == {"copy-sample"}

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"instance_id": "nope", "markdown": "# x"}\n{"instance_id": 1}\n', encoding="utf-8")
    config.write_text(
        f'[systems.outside]\nkind = "submission"\npath = "{bad.as_posix()}"\n', encoding="utf-8"
    )
    res = subprocess.run([*args, "--out", str(tmp_path / "never")], capture_output=True, text=True, env=env)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) >= 3 and all(ln.startswith("frame: error: ") and "bad.jsonl" in ln for ln in lines)
    assert any("nope" in ln for ln in lines) and any("missing" in ln for ln in lines)
    assert not (tmp_path / "never").exists()
