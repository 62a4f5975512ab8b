"""Benchmark: offline scoring of a whole release (all systems, all metric families) with `frame score`.

Runs `frame score` twice on the same release in one fresh data area (cold Prefect result store, cold
embedding cache): the first run computes every instance x system x metric task, the second must
recompute nothing (every score task "Cached"). Prints wall-clock seconds of both runs, tasks per second,
the per-system leaderboard means, and the ratio second/first against the named baseline "cold run".

Then the cost of each metric family per instance (all systems of the instance), measured in-process
without Prefect, each family with its own empty embedding cache (so each figure is that family's
standalone cold cost), against the named baseline "coverage" (FRAME's own recall metric).

    .venv/bin/python benchmarks/scoring.py [--release data/releases/demo/0.1.0] [--systems a,b,c]
        [--metrics structure,coverage,...] [--families-only]
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FRAME = str(Path(sys.executable).with_name("frame"))


ALL = "structure,coverage,faithfulness,teds,teds_s,text_edit_distance,scaffold,rubric,holistic,pairwise"


def run(release: Path, systems: str, out: Path, home: Path, cache: Path, metrics: str) -> tuple[float, str]:
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
        [
            FRAME,
            "score",
            "--release",
            str(release),
            "--systems",
            systems,
            "--out",
            str(out),
            "--metrics",
            metrics,
        ],
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
    for m in re.finditer(r"Task run 'score · [^']*' - Finished in state (\w+)", log):
        states[m.group(1)] = states.get(m.group(1), 0) + 1
    return states


def family_costs(release: Path, systems: list[str], families: list[str]) -> dict[str, float]:
    """Seconds per instance (all systems) of each family, in-process, each with a cold embedding cache."""
    sys.path.insert(0, str(ROOT))
    import pandas as pd

    from flows.generate import generate_reports
    from schemas.scoring import ScoreSettings
    from tasks.generate.systems import builtin_systems, make_system
    from tasks.score import registry
    from tasks.score.inputs import grounding_of
    from tasks.score.metric import JudgeEnv, instance_seed

    inst = pd.read_parquet(release / "instances.parquet").to_dict("records")
    settings = ScoreSettings()
    with tempfile.TemporaryDirectory(prefix="frame-bench-family-") as tmp:
        builtins = builtin_systems()
        reports = {
            s: {
                g.instance_id: g.markdown
                for g in generate_reports(release, make_system(s, builtins[s], cache_dir=Path(tmp)))
            }
            for s in systems
            if s != "gold"
        }
        reports["gold"] = {r["instance_id"]: r["target_markdown"] for r in inst}
        costs: dict[str, float] = {}
        for fam in families:
            family = registry.build(fam, JudgeEnv(settings, None, Path(tmp) / f"cache-{fam}"))
            t0 = time.perf_counter()
            for r in inst:
                iid = r["instance_id"]
                available = {
                    "gold": r["target_markdown"],
                    "sample": r["sample_markdown"],
                    "grounding": grounding_of(release, str(r["grounding_set_id"])),
                    "context": {"category": r["category"], "domain": r["domain"]},
                    "prepared": family.prepare(r["target_markdown"]) if family.prepares else None,
                }
                for s in systems:
                    family.score(family.inputs(iid, reports[s][iid], instance_seed(0, iid), **available))
            costs[fam] = (time.perf_counter() - t0) / len(inst)
    return costs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--release", type=Path, default=ROOT / "data" / "releases" / "demo" / "0.1.0")
    ap.add_argument("--systems", default="gold,copy-sample,extractive")
    ap.add_argument("--metrics", default=ALL, help="families for the flow run (default: all + pairwise)")
    ap.add_argument("--families-only", action="store_true", help="only the per-family cost table")
    args = ap.parse_args()
    if not (args.release / "instances.parquet").is_file():
        sys.exit(f"{args.release}: no release there (run `make demo` first)")
    systems = [x for x in args.systems.split(",") if x]
    sys.path.insert(0, str(ROOT))
    from tasks.score.registry import families_for

    fams = families_for([m for m in args.metrics.split(",") if m])
    costs = family_costs(args.release, systems, fams)
    base = costs.get("coverage")
    print(f"cost per instance ({len(systems)} systems each), cold embedding cache per family:")
    for fam, sec in costs.items():
        ratio = f"{sec / base:5.2f}x coverage" if base else ""
        print(f"  {fam:20s} {sec:7.2f} s/instance  {ratio}")
    if args.families_only:
        return
    with tempfile.TemporaryDirectory(prefix="frame-bench-score-") as tmp:
        t = Path(tmp)
        out, home, cache = t / "scores", t / "prefect", t / "cache"
        cold, log1 = run(args.release, args.systems, out, home, cache, args.metrics)
        warm, log2 = run(args.release, args.systems, out, home, cache, args.metrics)
        s1, s2 = task_states(log1), task_states(log2)
        board = (out / "leaderboard.md").read_text(encoding="utf-8")
    n = sum(s1.values())
    print(f"release {args.release} systems {args.systems}")
    print(f"cold run (baseline): {cold:7.1f} s  score tasks {s1}  ({n / cold:.2f} tasks/s incl. start-up)")
    print(f"rerun              : {warm:7.1f} s  score tasks {s2}  ratio rerun/cold {warm / cold:.2f}x")
    if args.metrics == ALL and args.systems == "gold,copy-sample,extractive":
        ref = json.loads((ROOT / "benchmarks" / "baselines.json").read_text(encoding="utf-8"))["scoring_cold"]
        print(
            f"named baseline     : {ref['value']:7.1f} s  [{ref['name']}; {ref['measured']}]  "
            f"ratio cold/baseline {cold / ref['value']:.2f}x (target <= 1.05)"
        )
    recomputed = sum(v for k, v in s2.items() if k != "Cached")
    print(f"rerun recomputed {recomputed} task(s): {'PASS' if recomputed == 0 else 'FAIL'} (target: 0)")
    print(board)


if __name__ == "__main__":
    main()
