"""Benchmark: a fully cached `make demo` (frame build of configs/demo.toml) by the code of the baseline commit
(benchmarks/baselines.json "ground_largest": before issue 17) with Prefect's temporary server, and by this
checkout with the temporary server and with a background server started by `frame server start`.

Each code builds in a data folder of its own (a copy of the config whose paths point at the same corpus),
once to fill every cache (not timed), then `--repeat` cached builds each way; the best of each counts.
Targets (issue 17): background server <= 0.5x of the baseline's cached build; temporary server no slower
than the baseline's. The builds write a release of their own, `server-bench`.

    .venv/bin/python benchmarks/server.py [--config configs/demo.toml] [--repeat 2] [--baseline COMMIT]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable


def build(code: Path, config: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    args = [PYTHON, "-m", "flows.cli", "build", "--config", str(config)]
    args += ["--release", "server-bench", "--version", "0.1.0"]
    res = subprocess.run(args, capture_output=True, text=True, env={**env, "PYTHONPATH": str(code)}, cwd=code)
    if res.returncode != 0:
        sys.exit(f"frame build ({code}) failed: {res.stderr[-2000:]}")
    return time.perf_counter() - t0


def own_config(config: Path, data: Path, into: Path) -> Path:
    """`config` with its data folder at `data` and its corpus mirror as an absolute path (the same corpus
    for every code that builds it)."""
    text = config.read_text(encoding="utf-8")
    cfg = tomllib.loads(text)
    mirror = (config.parent / cfg["source"]["mirror"]).resolve()
    out = []
    for line in text.splitlines():
        key = line.split("=", 1)[0].strip()
        if key == "data_dir":
            line = f'data_dir = "{data.as_posix()}"'
        elif key == "mirror":
            line = f'mirror = "{mirror.as_posix()}"'
        out.append(line)
    into.write_text("\n".join(out) + "\n", encoding="utf-8")
    return into


def frame(code: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-m", "flows.cli", *args],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(code)},
        cwd=code,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, default=ROOT / "configs" / "demo.toml")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--baseline", default=None, help="commit of the baseline code (default: baselines.json)")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from benchmarks.baseline_code import checkout, recorded

    ref = recorded("ground_largest")
    commit = args.baseline or ref["commit"]
    n = max(1, args.repeat)
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "FRAME_CACHE_DIR")}
    env.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory(prefix="frame-bench-server-") as tmp:
        t = Path(tmp)
        env["PREFECT_HOME"] = str(t / "prefect-home")  # one Prefect database for every build (it exists
        # after the first one, as in a user's project)
        base = None
        with checkout(commit) as tree:
            if tree is not None:
                cfg = own_config(args.config.resolve(), t / "data-baseline", t / "baseline.toml")
                build(tree, cfg, env)  # fill every cache
                base = min(build(tree, cfg, env) for _ in range(n))
        data = t / "data"
        cfg = own_config(args.config.resolve(), data, t / "this.toml")
        build(ROOT, cfg, env)
        temporary = min(build(ROOT, cfg, env) for _ in range(n))
        started = frame(ROOT, env, "server", "start", "--data", str(data))
        if started.returncode != 0:
            sys.exit(f"frame server start failed: {started.stderr[-2000:]}")
        try:
            build(ROOT, cfg, env)  # the server's first flow run registers the flow and tasks
            server = min(build(ROOT, cfg, env) for _ in range(n))
        finally:
            frame(ROOT, env, "server", "stop", "--data", str(data))
    print(f"cached `frame build` of {args.config.name} (best of {n})")
    if base is not None:
        print(f"  baseline {commit[:10]} ({ref['name']}), temporary server: {base:5.1f} s")
    b = base if base is not None else temporary
    what = "baseline" if base is not None else "this checkout's temporary server (no baseline code)"
    ok_t = "PASS" if temporary <= b else "FAIL"
    ok_s = "PASS" if server <= 0.5 * b else "FAIL"
    print(f"  this checkout, temporary server:  {temporary:5.1f} s  {temporary / b:.2f}x (<= 1x) {ok_t}")
    print(f"  this checkout, background server: {server:5.1f} s  {server / b:.2f}x (<= 0.5x) {ok_s}")
    print(f"  (ratios against the {what})")


if __name__ == "__main__":
    main()
