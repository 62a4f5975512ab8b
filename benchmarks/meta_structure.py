"""Benchmark: `frame meta structure`'s whole grid (paper 000 Tables 2-4, 16 distinct settings) on a release
against the named baseline "one structure pass": StructureFamily scoring every ranked report once at the
default setting, in-process, on the same inputs (gold, copy-sample, extractive on every instance, ranks
made up). Each side starts from a new JudgeEnv. Measured twice: with a cold embedding cache (each side its
own empty cache: what the first `frame score` of a release pays) and with a warm one (both read the
cache the cold runs filled; best of --repeat). Prints seconds, the ratio grid / pass and PASS when both
ratios are under 2 (acceptance of issue 15).

    .venv/bin/python benchmarks/meta_structure.py [--release data/releases/demo/0.1.0] [--repeat 3]
        [--warm-only]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from schemas.scoring import ScoreSettings  # noqa: E402
from tasks.meta import structure as ms  # noqa: E402
from tasks.score.metric import Inputs, JudgeEnv  # noqa: E402
from tasks.score.structural_similarity import StructureFamily  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SYSTEMS = ("gold", "extractive", "copy-sample")
TARGET_RATIO = 2.0


def rankings(release: Path) -> list[ms.Ranked]:
    """Every instance x SYSTEMS with a made-up rank that rotates per instance (so groups disagree)."""
    import pandas as pd

    ids = sorted(pd.read_parquet(release / "instances.parquet", columns=["instance_id"])["instance_id"])
    return [
        ms.Ranked(str(iid), system, float((k + j) % len(SYSTEMS) + 1), 0)
        for k, iid in enumerate(ids)
        for j, system in enumerate(SYSTEMS)
    ]


def one_pass(rows, gold, reports, cache: Path) -> float:
    """The baseline: StructureFamily.score for every ranked report (trees, embeddings, DP)."""
    family = StructureFamily(JudgeEnv(ScoreSettings(), None, cache))
    t0 = time.perf_counter()
    for r in rows:
        family.score(Inputs(r.group_id, reports[(r.group_id, r.system)], gold=gold[r.group_id]))
    return time.perf_counter() - t0


def grid(rows, gold, reports, cache: Path) -> tuple[float, float, int]:
    """(total seconds, seconds of the settings alone, distinct texts) of the whole grid."""
    env = JudgeEnv(ScoreSettings(), None, cache)
    family = StructureFamily(env)
    t0 = time.perf_counter()
    prepared = ms.prepare_pairs(rows, gold, reports, env.embed, family.tree)
    t1 = time.perf_counter()
    ms.evaluate_grid(prepared, ms.structure_grid())
    t2 = time.perf_counter()
    return t2 - t0, t2 - t1, prepared.texts


def measure(rows, gold, reports, base: Path, repeat: int, cold: bool) -> dict[str, tuple[float, ...]]:
    """{cache state: (pass seconds, grid seconds, of which settings, node texts)}; warm figures are the
    best of `repeat`, read from the cache the cold runs (or an untimed priming grid) filled."""
    out = {}
    warm_cache = base / "pass"
    if cold:
        cold_pass = one_pass(rows, gold, reports, warm_cache)
        out["cold"] = (cold_pass, *grid(rows, gold, reports, base / "grid"))
    else:
        grid(rows, gold, reports, warm_cache)
    warm_pass = min(one_pass(rows, gold, reports, warm_cache) for _ in range(repeat))
    out["warm"] = (warm_pass, *min(grid(rows, gold, reports, warm_cache) for _ in range(repeat)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--release", type=Path, default=ROOT / "data" / "releases" / "demo" / "0.1.0")
    ap.add_argument("--repeat", type=int, default=3, help="warm runs per side (best is kept)")
    ap.add_argument("--warm-only", action="store_true", help="skip the cold runs (minutes of embedding)")
    args = ap.parse_args()
    rows = rankings(args.release)
    gold, reports = ms.load_reports(args.release, rows)
    settings = len({r.setting.key() for r in ms.structure_grid()})
    with tempfile.TemporaryDirectory(prefix="meta-bench-") as tmp:
        base = Path(tmp)
        JudgeEnv(ScoreSettings(), None, base / "load").embed(["load the model"])  # neither side pays it
        figures = measure(rows, gold, reports, base, args.repeat, cold=not args.warm_only)
    groups, texts = len({r.group_id for r in rows}), int(figures["warm"][3])
    print(f"{args.release}: {groups} instances x {len(SYSTEMS)} systems = {len(rows)} reports, {texts} texts")
    print(
        f"{'embedding cache':<16}{'one structure pass':>20}{'grid':>10}{'of which settings':>20}{'ratio':>8}"
    )
    for label, (p, g, s, _) in figures.items():
        print(f"{label:<16}{p:>18.2f} s{g:>8.2f} s{s:>18.2f} s{g / p:>7.2f}x")
    per = figures["warm"][2] / settings
    print(f"{settings} settings: {per:.3f} s each ({per / figures['warm'][0]:.3f} of a warm pass)")
    worst = max(f[1] / f[0] for f in figures.values())
    verdict = "PASS" if worst < TARGET_RATIO else "FAIL"
    print(f"{verdict}: whole grid at most {worst:.2f}x one structure pass (target < {TARGET_RATIO:g}x)")


if __name__ == "__main__":
    main()
