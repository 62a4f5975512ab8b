"""Benchmark: `frame ground` on the largest 10-K of the corpus, by the code of a baseline commit and by this
checkout, in one run: wall time (best of `--runs`, each a fresh process: imports and start-up included,
as a user pays them) and peak RSS. Target: <= 0.8x of the baseline's time, RSS no higher.

    .venv/bin/python benchmarks/ground_largest.py [--runs 3] [--baseline COMMIT]
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("FRAME_CORPUS", ROOT.parent / "shared" / "corpus"))


def largest_10k() -> Path:
    with open(CORPUS / "edgar" / "MANIFEST.csv", newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r.get("form") == "10-K"]
    paths = [CORPUS / "edgar" / r["path"] for r in rows if (CORPUS / "edgar" / r["path"]).is_file()]
    if not paths:
        paths = list((CORPUS / "edgar").glob("*/10-K/*.htm"))
    return max(paths, key=lambda p: p.stat().st_size)


def ground(code: Path, filing: Path, out: Path) -> tuple[float, float]:
    """(seconds, peak RSS MiB) of one `frame ground` process running the code in `code`."""
    # Bytecode is written (the warm-up run caches .pyc files), as an installed package has it: a shell that
    # sets PYTHONDONTWRITEBYTECODE would otherwise time compiling every module of both codes on each run.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(code), HF_HUB_OFFLINE="1")
    args = [sys.executable, "-m", "flows.cli", "ground", str(filing), "--out", str(out), "--kind", "edgar"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, cwd=code, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(
            f"frame ground ({code}) failed: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}"
        )
    return elapsed, usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--baseline", default=None, help="commit of the baseline code (default: baselines.json)")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from benchmarks.baseline_code import checkout, recorded

    ref = recorded("ground_largest")
    commit = args.baseline or ref["commit"]
    filing = largest_10k()
    with tempfile.TemporaryDirectory(prefix="frame-bench-ground-") as tmp:
        out = Path(tmp)
        with checkout(commit) as tree:
            base = None
            if tree is not None:
                ground(tree, filing, out / "warm")  # page cache and .pyc files of both, not timed
                base_runs = [ground(tree, filing, out / f"base-{i}") for i in range(args.runs)]
                base = (min(t for t, _ in base_runs), max(r for _, r in base_runs))
        ground(ROOT, filing, out / "warm-new")
        runs = [ground(ROOT, filing, out / f"new-{i}") for i in range(args.runs)]
        new = (min(t for t, _ in runs), max(r for _, r in runs))
    size = filing.stat().st_size / 1e6
    print(f"frame ground {filing.relative_to(CORPUS)} ({size:.1f} MB), best of {args.runs}")
    if base is not None:
        print(f"  baseline {commit[:10]} ({ref['name']}): {base[0]:5.2f} s  peak RSS {base[1]:5.0f} MiB")
        b = base
    else:
        print(f"  baseline (recorded, {ref['name']}): {ref['value']:5.2f} s  ({ref['measured']})")
        b = (ref["value"], float("nan"))
    ok = "PASS" if new[0] <= 0.8 * b[0] and not new[1] > b[1] * 1.02 else "FAIL"
    print(f"  this checkout: {new[0]:5.2f} s  peak RSS {new[1]:5.0f} MiB")
    print(f"  ratio {new[0] / b[0]:.2f}x (target <= 0.8x), RSS {new[1] / b[1]:.2f}x (target <= 1.0x) {ok}")


if __name__ == "__main__":
    main()
