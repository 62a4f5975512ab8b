"""Benchmark: offline scoring of a whole release (all systems, all metrics) with `frame score`.

Runs `frame score` twice on the same release in one fresh data area (cold Prefect result store, cold
embedding cache): the first run computes every instance x system x metric task, the second must
recompute nothing (every score task "Cached"). Prints wall-clock seconds of both runs, tasks per second,
the per-system leaderboard means, and the ratio second/first against the named baseline "cold run".

    .venv/bin/python benchmarks/scoring.py [--release data/releases/demo/0.1.0] [--systems a,b,c]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FRAME = str(Path(sys.executable).with_name("frame"))


def run(release: Path, systems: str, out: Path, home: Path, cache: Path) -> tuple[float, str]:
    env = {
        **os.environ,
        "PREFECT_HOME": str(home),
        "PREFECT_LOCAL_STORAGE_PATH": str(cache / "prefect-results"),
        "FRAME_CACHE_DIR": str(cache),
        "HF_HUB_OFFLINE": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    }
    env.pop("PREFECT_API_URL", None)
    t0 = time.perf_counter()
    res = subprocess.run(
        [FRAME, "score", "--release", str(release), "--systems", systems, "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    elapsed = time.perf_counter() - t0
    if res.returncode != 0:
        sys.exit(f"frame score failed ({res.returncode}): {res.stderr[-2000:]}")
    return elapsed, res.stdout


def task_states(log: str) -> dict[str, int]:
    states: dict[str, int] = {}
    for m in re.finditer(r"Task run 'score-[^']*' - Finished in state (\w+)", log):
        states[m.group(1)] = states.get(m.group(1), 0) + 1
    return states


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--release", type=Path, default=ROOT / "data" / "releases" / "demo" / "0.1.0")
    ap.add_argument("--systems", default="gold,copy-sample,extractive")
    args = ap.parse_args()
    if not (args.release / "instances.parquet").is_file():
        sys.exit(f"{args.release}: no release there (run `make demo` first)")
    with tempfile.TemporaryDirectory(prefix="frame-bench-score-") as tmp:
        t = Path(tmp)
        out, home, cache = t / "scores", t / "prefect", t / "cache"
        cold, log1 = run(args.release, args.systems, out, home, cache)
        warm, log2 = run(args.release, args.systems, out, home, cache)
        s1, s2 = task_states(log1), task_states(log2)
        board = (out / "leaderboard.md").read_text(encoding="utf-8")
    n = sum(s1.values())
    print(f"release {args.release} systems {args.systems}")
    print(f"cold run (baseline): {cold:7.1f} s  score tasks {s1}  ({n / cold:.2f} tasks/s incl. start-up)")
    print(f"rerun              : {warm:7.1f} s  score tasks {s2}  ratio rerun/cold {warm / cold:.2f}x")
    recomputed = sum(v for k, v in s2.items() if k != "Cached")
    print(f"rerun recomputed {recomputed} task(s): {'PASS' if recomputed == 0 else 'FAIL'} (target: 0)")
    print(board)


if __name__ == "__main__":
    main()
