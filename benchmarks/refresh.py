"""Benchmark: what a quarterly refresh costs next to the full build it extends.

In one fresh temporary data area: `frame build` of the demo config without the last snapshot of one
domain (default AAPL-10-Q: its 2025-06-28 10-Q), then `frame refresh` with the whole demo config, which
must build only that snapshot and its instance. Prints wall time of both (the named baseline is the
full build, cold), the steps that ran or came from cache (`frame status`), the instances added
(`frame release diff`) and the LLM requests of each phase.

`--llm offline` (default) uses the offline backend: no LLM request at all. `--llm test-server` runs
both phases through the `openai` backend against the local OpenAI-compatible test server of the test
suite (tests/llm_server.py, answered by tests/test_build_openai.SmartResponder), counting its requests.

    .venv/bin/python benchmarks/refresh.py [--domain AAPL-10-Q] [--llm offline|test-server]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
FRAME = str(Path(sys.executable).with_name("frame"))
CORPUS = Path(os.environ.get("FRAME_CORPUS", ROOT.parent / "shared" / "corpus"))
LLM = """
[llm]
backend = "openai"
base_url = "{base_url}"
model = "frame-bench-model"
api_key_env = "FRAME_BENCH_KEY"
transient_retries = 2
backoff_initial_s = 0.05
backoff_max_s = 0.2
[prices."frame-bench-model"]
input_per_mtok = 0.15
output_per_mtok = 0.60
"""


def demo_config(tmp: Path, drop: tuple[str, str] | None, llm: str) -> Path:
    text = (ROOT / "configs" / "demo.toml").read_text(encoding="utf-8")
    text = text.replace('data_dir = "../data"', f'data_dir = "{tmp / "data"}"')
    text = text.replace('mirror = "../../shared/corpus"', f'mirror = "{CORPUS}"')
    if drop:
        domain, snapshot = drop
        block = text[text.index(f'name = "{domain}"') :]
        line = re.search(r"periods = \[[^\]]*\]", block).group(0)
        text = text.replace(line, line.replace(f', "{snapshot}"', "").replace(f'"{snapshot}", ', ""), 1)
    if llm:
        text = text.replace("[source]", llm + "[source]", 1)
    path = tmp / ("without.toml" if drop else "demo.toml")
    path.write_text(text, encoding="utf-8")
    return path


def frame(args: list[str], tmp: Path) -> tuple[float, subprocess.CompletedProcess]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "FRAME_LLM_"))}
    env.update(
        {
            "PREFECT_HOME": str(tmp / "prefect"),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
            "HF_HUB_OFFLINE": "1",
            "SOURCE_DATE_EPOCH": "1767225600",
            "FRAME_BENCH_KEY": "sk-bench-not-a-secret",
            "NO_PROXY": "127.0.0.1,localhost",
        }
    )
    t0 = time.monotonic()
    res = subprocess.run([FRAME, *args], capture_output=True, text=True, env=env, timeout=3600)
    if res.returncode != 0:
        sys.exit(f"frame {' '.join(args[:1])} failed: {res.stderr[-2000:]}")
    return time.monotonic() - t0, res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--domain", default="AAPL-10-Q", help="the domain whose last snapshot the refresh adds")
    ap.add_argument("--llm", choices=("offline", "test-server"), default="offline")
    args = ap.parse_args()
    if not CORPUS.is_dir():
        sys.exit(f"corpus not found at {CORPUS}")
    import tomllib

    demo = tomllib.loads((ROOT / "configs" / "demo.toml").read_text(encoding="utf-8"))
    dom = next(d for d in demo["domains"] if d["name"] == args.domain)
    last = str((dom.get("periods") or [w["label"] for w in dom.get("windows", [])])[-1])

    server = None
    if args.llm == "test-server":
        from tests.llm_server import LLMTestServer
        from tests.test_build_openai import SmartResponder

        server = LLMTestServer().__enter__()
        server.default_chat = SmartResponder()
    try:
        with tempfile.TemporaryDirectory(prefix="frame-bench-refresh-") as td:
            tmp = Path(td)
            llm = LLM.format(base_url=server.base_url) if server else ""
            before = demo_config(tmp, (args.domain, last), llm)
            full = demo_config(tmp, None, llm)
            n0 = len(server.requests) if server else 0
            t_build, _ = frame(
                ["build", "--config", str(before), "--release", "bench", "--version", "0.1.0"], tmp
            )
            n1 = len(server.requests) if server else 0
            t_refresh, res = frame(["refresh", "--config", str(full), "--release", "bench", "--json"], tmp)
            n2 = len(server.requests) if server else 0
            summary = json.JSONDecoder().raw_decode(res.stdout, res.stdout.index("{\n"))[0]
            _, st = frame(["status", "--config", str(full), "--json"], tmp)
            run = json.loads(st.stdout)
            rel = tmp / "data" / "releases" / "bench"
            _, df = frame(["release", "diff", str(rel / "0.1.0"), str(rel / "0.2.0"), "--json"], tmp)
            diff = json.loads(df.stdout)
    finally:
        if server:
            server.__exit__(None, None, None)

    states = Counter(s["status"] for s in run["steps"])
    ran = sorted({(s["domain"], s["snapshot"]) for s in run["steps"] if s["status"] == "ran"})
    inst = diff["tables"]["instances"]
    print(f"refresh benchmark: demo config, refresh adds {args.domain} {last} (backend {args.llm})")
    print(f"  full build (baseline, cold): {t_build:7.1f} s   LLM requests {n1 - n0}")
    ratio = t_refresh / t_build
    print(f"  refresh:                     {t_refresh:7.1f} s   LLM requests {n2 - n1}   ratio {ratio:.2f}x")
    print(f"  refresh flow wall (no server start): {run['wall_s']:.1f} s; steps {dict(states)}")
    print(f"  snapshots that ran: {ran}")
    print(f"  instances added {inst['added']}, removed {len(inst['removed'])}, changed {inst['changed']}")
    print(f"  planned: {summary['new_snapshots']}; version {summary['previous']} -> {summary['version']}")
    if server:
        t = run["totals"]
        print(
            f"  refresh tokens in/out {t['prompt_tokens']}/{t['completion_tokens']}, "
            f"estimated cost ${t['cost_usd']:.6f} (test-server token counts)"
        )
    ok = (
        ran == [(args.domain, last)]
        and len(inst["added"]) == 1
        and not inst["removed"]
        and not inst["changed"]
    )
    print(
        "PASS: only the new snapshot and its instance were built"
        if ok
        else "FAIL: more than the new snapshot ran"
    )


if __name__ == "__main__":
    main()
