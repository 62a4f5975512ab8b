"""Acceptance run: every kind of named system scored on a whole release with `frame score --config`.

Starts the local OpenAI-compatible test server (tests/llm_server.py) in this process and writes an
evaluation config with the three builtins, three `openai` systems (three models whose replies differ
deterministically), a `command` system (a Python script), a `submission` folder (the samples with a note),
and a judge role served as a fourth model; every metric family is selected. Then runs `frame score` three
times in one fresh data area:

1. cold: prints wall time, requests per role, the leaderboard's files;
2. the same command again: must make zero requests and leave every task Cached;
3. one system's temperature changed: must regenerate and rescore that system only.

    .venv/bin/python benchmarks/eval_systems.py [--release data/releases/demo/0.1.0]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402

import tests.llm_server as fake_llm  # noqa: E402
from tasks.release.evalkit import report_file_name  # noqa: E402
from tests.test_score_openai_flow import answer, role_of  # noqa: E402

FRAME = str(Path(sys.executable).with_name("frame"))
ALL = "structure,coverage,faithfulness,teds,teds_s,text_edit_distance,scaffold,rubric,holistic,pairwise"
MODELS = {"alpha": "model-a", "beta": "model-b", "gamma": "model-c"}
JUDGE = "judge-model"
AGENT = """import pathlib
print(pathlib.Path("sample.md").read_text(encoding="utf-8") + "\\nWritten by a command system.")
"""


def generated(req: fake_llm.Recorded) -> fake_llm.Reply:
    """A model's report: the sample's form, made different per model (and temperature) on purpose."""
    if role_of(req) != "generate_one_shot":
        return answer(req)
    user = req.messages[1]["content"]
    sample = user.split("<<<SAMPLE\n", 1)[1].split("\nSAMPLE>>>", 1)[0]
    model, temp = req.body["model"], req.body.get("temperature", 0.0)
    lines = sample.splitlines()
    if model == "model-b":  # drops the last section
        cut = max((i for i, ln in enumerate(lines) if ln.startswith("## ")), default=len(lines))
        lines = lines[:cut] if cut > 1 else lines
    elif model == "model-c":  # keeps only headings and the first sentence under each
        lines = [ln for i, ln in enumerate(lines) if ln.startswith("#") or (i and lines[i - 1][:1] == "#")]
    text = "\n".join(lines) + f"\n\nWritten by {model} at temperature {temp}.\n"
    return fake_llm.json_reply({"report_markdown": text})


def write_config(folder: Path, server: str, beta_temperature: float) -> Path:
    systems = "".join(
        f'[systems.{name}]\nkind = "openai"\nbase_url = "{server}"\nmodel = "{model}"\n'
        f'api_key_env = "EVAL_KEY"\ntemperature = {beta_temperature if name == "beta" else 0.0}\n\n'
        for name, model in MODELS.items()
    )
    builtins = "".join(f'[systems.{n}]\nkind = "builtin"\n\n' for n in ("gold", "copy-sample", "extractive"))
    metrics = ", ".join(f'"{m}"' for m in ALL.split(","))
    text = (
        builtins
        + systems
        + f'[systems.agent]\nkind = "command"\ncommand = ["{Path(sys.executable).as_posix()}", "agent.py"]\n'
        + 'timeout_s = 120\n\n[systems.outside]\nkind = "submission"\npath = "submission"\n\n'
        + f'[judge]\nbase_url = "{server}"\nmodel = "{JUDGE}"\napi_key_env = "EVAL_KEY"\n\n'
        + f'[score]\nmetrics = [{metrics}]\ntree = "llm"\n'
    )
    path = folder / "eval.toml"
    path.write_text(text, encoding="utf-8")
    return path


def states(stdout: str) -> Counter:
    found = re.findall(
        r"Task run '(score|generate|prepare|compare) · [^']*' - Finished in state (\w+)", stdout
    )
    return Counter(found)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--release", type=Path, default=ROOT / "data" / "releases" / "demo" / "0.1.0")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="frame-eval-"))
    data = work / "data"
    rel = data / "releases" / args.release.parent.name / args.release.name
    shutil.copytree(args.release, rel)
    instances = pd.read_parquet(rel / "instances.parquet")
    sub = work / "submission"
    sub.mkdir()
    for iid, sample in zip(instances.instance_id, instances.sample_markdown, strict=True):
        (sub / f"{report_file_name(iid)}.md").write_text(sample + "\nSubmitted from elsewhere.\n", "utf-8")
    (work / "agent.py").write_text(AGENT, encoding="utf-8")
    env = {
        **os.environ,
        "PREFECT_HOME": str(work / "prefect"),
        "PREFECT_LOCAL_STORAGE_PATH": str(data / "cache" / "prefect-results"),
        "FRAME_CACHE_DIR": str(data / "cache"),
        "HF_HUB_OFFLINE": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "EVAL_KEY": "sk-eval-acceptance",
    }
    env.pop("PREFECT_API_URL", None)
    print(f"release: {args.release.relative_to(ROOT) if args.release.is_relative_to(ROOT) else args.release}")
    kinds = "3 builtin, 3 openai, 1 command, 1 submission"
    print(f"instances: {len(instances)}; systems: {kinds}; judge {JUDGE}")
    with fake_llm.LLMTestServer() as server:
        server.default_chat = generated
        cmd = [FRAME, "score", "--release", str(rel), "--config", ""]
        seen = 0
        for label, temp in (("cold", 0.0), ("rerun", 0.0), ("beta temperature 0.7", 0.7)):
            cmd[-1] = str(write_config(work, server.base_url, temp))
            t0 = time.perf_counter()
            res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=work)
            took = time.perf_counter() - t0
            if res.returncode != 0:
                sys.exit(f"{label}: frame score failed ({res.returncode}): {res.stderr[-3000:]}")
            new = server.chat_requests[seen:]
            seen = len(server.chat_requests)
            roles = Counter(role_of(r) for r in new)
            gens = Counter(r.body["model"] for r in new if role_of(r) == "generate_one_shot")
            print(f"\n== {label}: {took:.0f} s, {len(new)} chat requests")
            counted = sorted(states(res.stdout).items())
            print("   task states: " + ", ".join(f"{k[0]} {k[1]} {v}" for k, v in counted))
            if roles:
                print("   requests by role: " + ", ".join(f"{k} {v}" for k, v in sorted(roles.items())))
            if gens:
                print("   generations by model: " + ", ".join(f"{k} {v}" for k, v in sorted(gens.items())))
            computed = sorted(set(re.findall(r"Task run 'score · [^']*' - \S+ (\S+) \w+: ", res.stdout)))
            if label != "cold":
                print(f"   systems rescored: {computed or 'none'}")
    out = data / "scores" / rel.parent.name / rel.name
    scores = pd.read_parquet(out / "scores.parquet")
    judged = scores[~scores.metric.isin(["teds", "teds_s", "text_edit_distance"])]
    print(f"\nscore rows: {len(scores)}; systems: {sorted(scores.system.unique())}")
    print(f"LLM-judged rows naming {JUDGE}: {judged.judge.str.contains(JUDGE).sum()} of {len(judged)}")
    print("outputs: " + ", ".join(sorted(p.name for p in out.iterdir())))
    board = (out / "leaderboard.md").read_text(encoding="utf-8")
    print("\n" + "\n".join(board.splitlines()[:14]))
    print(f"\n(work folder kept: {work})")


if __name__ == "__main__":
    main()
