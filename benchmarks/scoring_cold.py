"""Benchmark: cold `frame score` of a release (FRAME's three families, gold + copy-sample + extractive) by the
code of a baseline commit and by this checkout, in one run, with MiniLM in fp32 and in bf16.

Each run is a fresh `frame score` process with an empty embedding cache, an empty Prefect result store and
its own Prefect home (temporary server), so each pays everything a first scoring pays: imports, server start,
model load, every embedding. `--prefect-db` picks that home: `new` (empty: the server creates its database,
~6 s of migrations, as on a user's very first command), `existing` (a copy of a home whose database a
server has created, as every later command finds `.prefect/`), or `both` (default).
The baseline runs from a `git worktree` of `--baseline` (default: the commit
named in baselines.json "scoring_cold_frame3") with this venv; it is skipped when that commit is not in the
repository. Prints the wall-clock seconds, peak RSS of each run, the ratios to the baseline (target: fp32
<= 0.5x) and the largest |score difference| bf16 vs fp32 over every (instance, system, metric) (target
<= 0.002, tasks.score.embed.BF16_TOLERANCE).

    .venv/bin/python benchmarks/scoring_cold.py [--release data/releases/demo/0.1.0] [--baseline COMMIT]
        [--server]   # also time fp32 against a running background Prefect server (`frame server start`)
        [--repeat N] # N cold runs per configuration, the fastest counts (timeit's rule: noise only adds);
                     # the baseline and this checkout alternate run by run
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
SYSTEMS = "gold,copy-sample,extractive"
FAMILIES = "structure,coverage,faithfulness"


def used_prefect_home(into: Path) -> Path:
    """A Prefect home whose database exists (migrated, blocks registered), as every command after a
    user's first one finds it: a local server is started on it once and stopped."""
    from flows.server import start_server, stop_server

    start_server(into)
    stop_server(into)
    return into / "run" / "prefect-server"


def score(
    code: Path,
    release: Path,
    work: Path,
    precision: str | None,
    api_url: str | None = None,
    home: Path | None = None,
) -> tuple[float, float, Path]:
    """One cold `frame score` with the code of `code`; (seconds, peak RSS MiB of the process tree, scores).
    `home`: a Prefect home to start from (copied), else an empty one (its database created by the run)."""
    out = work / "scores"
    work.mkdir(parents=True, exist_ok=True)
    if home is not None:
        shutil.copytree(home, work / "prefect")
    # bytecode as an installed package has it (compiled up front by `compiled`), whatever the calling
    # shell's PYTHONDONTWRITEBYTECODE says: else each run times compiling every module of its code
    env = {
        **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
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
    t0 = time.perf_counter()
    # through a wrapper process, so that the peak RSS is this run's (ru_maxrss of children only grows)
    res = subprocess.run([PYTHON, "-c", _MEASURED, *args], capture_output=True, text=True, env=env, cwd=code)
    elapsed = time.perf_counter() - t0
    if res.returncode != 0:
        sys.exit(f"frame score ({code.name}, {precision}) failed: {res.stderr[-2000:]}")
    rss = int(res.stderr.strip().splitlines()[-1].removeprefix("maxrss=")) / 1024
    return elapsed, rss, out


# runs argv[1:], then prints the largest peak RSS (KiB) of its process tree on stderr
_MEASURED = (
    "import resource, subprocess, sys; code = subprocess.run(sys.argv[1:]).returncode; "
    "print(f'maxrss={resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}', file=sys.stderr); "
    "sys.exit(code)"
)


def compiled(code: Path) -> None:
    """Write the bytecode of `code`'s modules (as `pip install` leaves a package)."""
    for part in ("flows", "tasks", "schemas"):
        subprocess.run([PYTHON, "-m", "compileall", "-q", str(code / part)], check=True)


def fastest(runs: list[tuple[float, float, Path]]) -> tuple[float, float, Path]:
    """The fastest of several cold runs (each in its own folder: nothing carries over), with its RSS."""
    return min(runs, key=lambda r: r[0])


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
    ap.add_argument("--repeat", type=int, default=1, help="cold runs per configuration; the fastest counts")
    ap.add_argument(
        "--prefect-db",
        choices=("both", "new", "existing"),
        default="both",
        help="Prefect's database: created by the run (a first command), existing (every later one), or both",
    )
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

    modes = ("new", "existing") if args.prefect_db == "both" else (args.prefect_db,)
    n = max(1, args.repeat)
    with tempfile.TemporaryDirectory(prefix="frame-bench-cold-") as tmp:
        t = Path(tmp)
        homes = {"new": None, "existing": used_prefect_home(t / "used") if "existing" in modes else None}
        base_runs: dict[str, list] = {m: [] for m in modes}
        fp32_runs: dict[str, list] = {m: [] for m in modes}
        bf16_runs: list = []
        last = modes[-1]
        compiled(ROOT)
        with checkout(commit) as tree:
            if tree:
                compiled(tree)
            # baseline and this checkout alternate, run after run: this machine's speed drifts by 10-30%
            # over minutes (shared host), which would otherwise land on one side of the ratio
            for i in range(n):
                for m in modes:
                    if tree:
                        base_runs[m].append(
                            score(tree, release, t / f"base-{m}" / f"run{i}", None, home=homes[m])
                        )
                    fp32_runs[m].append(
                        score(ROOT, release, t / f"fp32-{m}" / f"run{i}", "fp32", home=homes[m])
                    )
                if native_bf16():
                    bf16_runs.append(score(ROOT, release, t / "bf16" / f"run{i}", "bf16", home=homes[last]))
        base = {m: fastest(base_runs[m]) if base_runs[m] else None for m in modes}
        fp32 = {m: fastest(fp32_runs[m]) for m in modes}
        bf16 = fastest(bf16_runs) if bf16_runs else None
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
            a, b = values(fp32[last][2]), values(bf16[2])
            diff = max((abs(a[k] - b[k]) for k in a.keys() & b.keys()), default=0.0)

    print(f"cold frame score of {release.name} ({FAMILIES}; {SYSTEMS}): empty caches and result store")
    label = {"new": "Prefect database created by the run", "existing": "Prefect database exists"}
    for m in modes:
        print(f"  {label[m]} (temporary server):")
        if base[m] is not None:
            bm = base[m]
            print(f"    baseline {commit[:10]} ({ref['name']}): {bm[0]:6.1f} s  peak RSS {bm[1]:6.0f} MiB")
        else:
            print(f"    baseline (recorded, {ref['name']}): {ref['value']:6.1f} s  ({ref['measured']})")
        b = base[m][0] if base[m] is not None else ref["value"]
        f = fp32[m]
        ok = "PASS" if f[0] / b <= 0.5 else "FAIL"
        print(f"    fp32: {f[0]:6.1f} s  peak RSS {f[1]:6.0f} MiB  {f[0] / b:.2f}x (target <= 0.5x) {ok}")
        if m == last and bf16 is not None:
            print(f"    bf16: {bf16[0]:6.1f} s  peak RSS {bf16[1]:6.0f} MiB  {bf16[0] / b:.2f}x")
    b = base[last][0] if base[last] is not None else ref["value"]
    if served is not None:
        print(f"  fp32, background server (`frame server start`): {served[0]:6.1f} s  {served[0] / b:.2f}x")
    if bf16 is not None:
        ok = "PASS" if diff is not None and diff <= BF16_TOLERANCE else "FAIL"
        print(f"  bf16 vs fp32: max |score difference| {diff:.6f} (tolerance {BF16_TOLERANCE}) {ok}")
    else:
        print("  bf16: skipped (this CPU has no bf16 instructions; `auto` uses fp32 here)")


if __name__ == "__main__":
    main()
