"""Benchmark: cold `frame score` of a release (FRAME's three families, gold + copy-sample + extractive) by the
code of a baseline commit and by this checkout, in one run, with MiniLM in fp32 and in bf16.

Each run is a fresh `frame score` process with an empty embedding cache, an empty Prefect result store and
its own Prefect home (temporary server), so each pays everything a first scoring pays: imports, server start,
model load, every embedding. The baseline runs from a `git worktree` of `--baseline` (default: the commit
named in baselines.json "scoring_cold_frame3") with this venv; it is skipped when that commit is not in the
repository. Prints the wall-clock seconds, peak RSS of each run, the ratios to the baseline (target: fp32
<= 0.5x) and the largest |score difference| bf16 vs fp32 over every (instance, system, metric) (target
<= 0.002, tasks.score.embed.BF16_TOLERANCE).

    .venv/bin/python benchmarks/scoring_cold.py [--release data/releases/demo/0.1.0] [--baseline COMMIT]
        [--server]   # also time fp32 against a running background Prefect server (`frame server start`)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
SYSTEMS = "gold,copy-sample,extractive"
FAMILIES = "structure,coverage,faithfulness"


def score(
    code: Path, release: Path, work: Path, precision: str | None, api_url: str | None = None
) -> tuple[float, float, Path]:
    """One cold `frame score` with the code of `code`; (seconds, peak RSS MiB of the process tree, scores)."""
    out = work / "scores"
    work.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "PREFECT_HOME": str(work / "prefect"),
        "PREFECT_LOCAL_STORAGE_PATH": str(work / "cache" / "prefect-results"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
        "FRAME_CACHE_DIR": str(work / "cache"),
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": str(code),
    }
    env.pop("PREFECT_API_URL", None)
    env.pop("FRAME_EMBED_PRECISION", None)
    if api_url:
        env["PREFECT_API_URL"] = api_url
    if precision:
        env["FRAME_EMBED_PRECISION"] = precision
    args = [PYTHON, "-m", "flows.cli", "score", "--release", str(release), "--systems", SYSTEMS]
    args += ["--metrics", FAMILIES, "--out", str(out)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    res = subprocess.run(args, capture_output=True, text=True, env=env, cwd=code)
    elapsed = time.perf_counter() - t0
    if res.returncode != 0:
        sys.exit(f"frame score ({code.name}, {precision}) failed: {res.stderr[-2000:]}")
    rss = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    return elapsed, rss, out


def values(scores: Path) -> dict[tuple[str, str, str], float]:
    import pyarrow.parquet as pq

    rows = pq.read_table(scores / "scores.parquet", columns=["instance_id", "system", "metric", "value"])
    return {
        (r["instance_id"], r["system"], r["metric"]): r["value"]
        for r in rows.to_pylist()
        if r["value"] is not None
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--release", type=Path, default=ROOT / "data" / "releases" / "demo" / "0.1.0")
    ap.add_argument("--baseline", default=None, help="commit of the baseline code (default: baselines.json)")
    ap.add_argument("--server", action="store_true", help="also time fp32 with a background Prefect server")
    args = ap.parse_args()
    release = args.release.resolve()
    if not (release / "instances.parquet").is_file():
        sys.exit(f"{args.release}: no release there (run `make demo` first)")
    ref = json.loads((ROOT / "benchmarks" / "baselines.json").read_text(encoding="utf-8"))[
        "scoring_cold_frame3"
    ]
    commit = args.baseline or ref["commit"]
    sys.path.insert(0, str(ROOT))
    from benchmarks.baseline_code import checkout
    from tasks.score.embed import BF16_TOLERANCE, native_bf16

    with tempfile.TemporaryDirectory(prefix="frame-bench-cold-") as tmp:
        t = Path(tmp)
        with checkout(commit) as tree:
            base = score(tree, release, t / "base", None) if tree is not None else None
        fp32 = score(ROOT, release, t / "fp32", "fp32")
        bf16 = score(ROOT, release, t / "bf16", "bf16") if native_bf16() else None
        served = None
        if args.server:
            data = t / "served"
            started = subprocess.run(
                [PYTHON, "-m", "flows.cli", "server", "start", "--data", str(data)],
                capture_output=True,
                text=True,
                cwd=ROOT,
                env={**os.environ, "PREFECT_HOME": str(data / "prefect-home")},
            )
            url = next((w for w in started.stdout.split() if w.startswith("http")), None)
            try:
                if url:
                    served = score(ROOT, release, t / "served-run", "fp32", api_url=url.rstrip("/."))
            finally:
                subprocess.run(
                    [PYTHON, "-m", "flows.cli", "server", "stop", "--data", str(data)],
                    capture_output=True,
                    cwd=ROOT,
                    env={**os.environ, "PREFECT_HOME": str(data / "prefect-home")},
                )
        diff = None
        if bf16 is not None:
            a, b = values(fp32[2]), values(bf16[2])
            diff = max((abs(a[k] - b[k]) for k in a.keys() & b.keys()), default=0.0)

    print(f"cold frame score of {release.name} ({FAMILIES}; {SYSTEMS})")
    if base is not None:
        print(f"  baseline {commit[:10]} ({ref['name']}): {base[0]:6.1f} s  peak RSS {base[1]:6.0f} MiB")
    else:
        print(f"  baseline (recorded, {ref['name']}): {ref['value']:6.1f} s  ({ref['measured']})")
    b = base[0] if base is not None else ref["value"]
    rss = f"peak RSS {fp32[1]:6.0f} MiB"
    print(f"  fp32:                        {fp32[0]:6.1f} s  {rss}  {fp32[0] / b:.2f}x (target <= 0.5x)")
    if served is not None:
        print(f"  fp32, background server:     {served[0]:6.1f} s  {served[0] / b:.2f}x")
    if bf16 is not None:
        rss = f"peak RSS {bf16[1]:6.0f} MiB"
        print(f"  bf16:                        {bf16[0]:6.1f} s  {rss}  {bf16[0] / b:.2f}x")
        ok = "PASS" if diff is not None and diff <= BF16_TOLERANCE else "FAIL"
        print(f"  bf16 vs fp32: max |score difference| {diff:.6f} (tolerance {BF16_TOLERANCE}) {ok}")
    else:
        print("  bf16: skipped (this CPU has no bf16 instructions; `auto` uses fp32 here)")


if __name__ == "__main__":
    main()
