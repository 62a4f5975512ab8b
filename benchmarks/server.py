"""Benchmark: a fully cached `make demo` (frame build of configs/demo.toml) with Prefect's temporary server
(the baseline, "temporary server") and with a background server started by `frame server start`.

Builds once to fill the caches (not timed), then times `--repeat` cached builds each way in one data folder
and prints the best of each and the ratio server/temporary (target <= 0.5x). The builds write a release of
their own, `server-bench` (the demo's own version stays as `make demo` wrote it).

    .venv/bin/python benchmarks/server.py [--config configs/demo.toml] [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FRAME = str(Path(sys.executable).with_name("frame"))


def build(config: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    args = [FRAME, "build", "--config", str(config), "--release", "server-bench", "--version", "0.1.0"]
    res = subprocess.run(args, capture_output=True, text=True, env=env, cwd=ROOT)
    if res.returncode != 0:
        sys.exit(f"frame build failed: {res.stderr[-2000:]}")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, default=ROOT / "configs" / "demo.toml")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from schemas.config import load_config

    data = Path(load_config(args.config).build.data_dir)
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.setdefault("PREFECT_HOME", str(ROOT / ".prefect"))
    env.setdefault("HF_HUB_OFFLINE", "1")
    subprocess.run([FRAME, "server", "stop", "--data", str(data)], capture_output=True, env=env)
    build(args.config, env)  # fill every cache
    temporary = min(build(args.config, env) for _ in range(args.repeat))
    started = subprocess.run([FRAME, "server", "start", "--data", str(data)], capture_output=True, env=env)
    if started.returncode != 0:
        sys.exit(f"frame server start failed: {started.stderr[-2000:]}")
    try:
        build(args.config, env)  # the server's first flow run registers the flow and tasks
        server = min(build(args.config, env) for _ in range(args.repeat))
    finally:
        subprocess.run([FRAME, "server", "stop", "--data", str(data)], capture_output=True, env=env)
    print(f"cached build, temporary server (baseline): {temporary:.1f} s")
    print(f"cached build, background server:           {server:.1f} s")
    print(f"ratio server/temporary: {server / temporary:.2f}x (target <= 0.5x)")


if __name__ == "__main__":
    main()
