"""Benchmark: the metric checklist (tasks/meta/checklist.py) on a release's gold reports.

Every gold report Y is perturbed in each way of the checklist; each per-report metric family (offline
judges, the default score settings) scores Y against itself (the reference score) and every perturbed
report against Y, and the checklist asks whether the score moved the right way: down by at least 5% of the
metric's range for a meaning-changing perturbation, within 2% for a meaning-preserving one. It prints, per
metric and perturbation, the share of applicable instances where it did (n/a: the perturbation did not apply
to any instance). A metric names the aspects it is not held to, with the reason
(`MetricSpec.unclaimed`: a meaning it does not look at, or a form it grades); those cells print as "not
claimed" and are not held to the bar. A meaning-changing perturbation counts only where it changes >= 10%
of the report's sentences and table rows (directions: of its prose, the reference then being Y without
tables). The bar: every other cell >= 0.95. The named baseline is the unperturbed report's
own score.

    .venv/bin/python benchmarks/metric_checklist.py [--release data/releases/demo/0.1.0] [--families a,b]
        [--instances N] [--perturbations a,b] [--json out.json] [--markdown docs/metrics/robustness-table.md]

Heading titles for `heading_retitled` come from the edgar-wide corpus (other filers' titles for the same
Form item, tasks/meta/checklist.py `filer_titles`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.progress import Progress  # noqa: E402

from schemas.scoring import ScoreSettings  # noqa: E402
from tasks.meta import checklist  # noqa: E402
from tasks.score import registry  # noqa: E402
from tasks.score.inputs import available_inputs  # noqa: E402
from tasks.score.metric import JudgeEnv, instance_seed  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BAR = 0.95


def item_titles() -> list[tuple[str, str]]:
    """(Form item, title) of the edgar-wide filings, as the structure calibration reads them
    (benchmarks/calibrate_structure.py: grounded by frame, item confirmed by the peer parser's sections)."""
    from benchmarks.calibrate_structure import load_units
    from tasks.score.calibration import heading_words

    units = load_units()[0]
    return [(u.label, heading_words(u.heading)) for u in units if u.source == "items"]


def score_all(family, inputs: dict, iid: str, report: str, seed: int) -> dict[str, float | None]:
    fam_inputs = type(family).inputs(iid, report, seed, **inputs)
    return {r.metric: r.value for r in family.score(fam_inputs)}


def run(
    release: Path, names: list[str], limit: int | None, cache: Path, only: list[str] | None = None
) -> dict:
    import pandas as pd

    rows = pd.read_parquet(release / "instances.parquet").to_dict("records")[: limit or None]
    titles = checklist.filer_titles(item_titles())
    env = JudgeEnv(ScoreSettings(), None, cache)
    fams = {n: registry.build(n, env) for n in names}
    specs = registry.specs()
    perts = [p for p in checklist.PERTURBATIONS if not only or p.name in only]
    # cells[(metric, perturbation)] = [moved right?] over applicable instances
    cells: dict[tuple[str, str], list[bool]] = {}
    deltas: dict[tuple[str, str], list[float]] = {}
    with Progress() as progress:
        bar = progress.add_task("checklist", total=len(rows) * len(fams))
        for row in rows:
            iid, gold = str(row["instance_id"]), str(row["target_markdown"])
            # per reference (Y, or the part of Y a perturbation is tested on): its perturbed reports
            by_ref: dict[str, dict[str, str]] = {}
            for p in perts:
                ref_text = checklist.reference_of(p.name, gold)
                text = checklist.perturb(p.name, ref_text, titles)
                # too small a change to hold any metric to the bar
                if text is None or (
                    p.changes_meaning and checklist.changed_share(ref_text, text) < checklist.MIN_CHANGED
                ):
                    continue
                by_ref.setdefault(ref_text, {})[p.name] = text
            for name, fam in fams.items():
                progress.update(bar, description=f"{name} {iid[:48]}")
                seed = instance_seed(0, iid)
                for ref_text, perturbed in by_ref.items():
                    prepared = fam.prepare(ref_text) if fam.prepares else None
                    avail = available_inputs(release, {**row, "target_markdown": ref_text}, prepared)
                    ref = score_all(fam, avail, iid, ref_text, seed)
                    for pname, text in perturbed.items():
                        got = score_all(fam, avail, iid, text, seed)
                        for metric, before in ref.items():
                            after = got.get(metric)
                            if before is None or after is None:
                                continue
                            s = specs.get(metric) or registry.spec(metric)
                            ok = checklist.moved_right(
                                pname, before, after, s.low, s.high, s.higher_is_better
                            )
                            cells.setdefault((metric, pname), []).append(ok)
                            span = (s.high - s.low) or 1.0
                            deltas.setdefault((metric, pname), []).append((after - before) / span)
                progress.advance(bar)
    family_of = {m.name: f for f, cls in registry.families().items() for m in cls.metrics}
    out = {
        "release": release.name,
        "instances": len(rows),
        "perturbations": [p.name for p in perts],
        "cells": [],
    }
    for (metric, pname), oks in sorted(cells.items()):
        unclaimed = dict(registry.spec(metric).unclaimed)
        what = next(p.what for p in checklist.PERTURBATIONS if p.name == pname)
        d = deltas[(metric, pname)]
        out["cells"].append(
            {
                "family": family_of.get(metric, "?"),
                "metric": metric,
                "perturbation": pname,
                "changes_meaning": pname in checklist.CHANGING,
                "n": len(oks),
                "share_right": sum(oks) / len(oks),
                "mean_delta": sum(d) / len(d),
                "unclaimed": unclaimed.get(what, ""),
            }
        )
    return out


def table(result: dict) -> str:
    """The Markdown table (metric x perturbation) of shares moved right."""
    perts = result["perturbations"]
    metrics = list(dict.fromkeys(c["metric"] for c in result["cells"]))
    by = {(c["metric"], c["perturbation"]): c for c in result["cells"]}
    head = "| metric | " + " | ".join(perts) + " |"
    lines = [head, "|" + "---|" * (len(perts) + 1)]
    for m in metrics:
        row = []
        for p in perts:
            c = by.get((m, p))
            if c is None:
                row.append("n/a")
            elif c["unclaimed"]:
                row.append(f"not claimed ({c['share_right']:.2f})")
            else:
                mark = "" if c["share_right"] >= BAR else " ✗"
                row.append(f"{c['share_right']:.2f}{mark}")
        lines.append(f"| {m} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--release", type=Path, default=ROOT / "data/releases/demo/0.1.0")
    ap.add_argument("--families", default="", help="comma-separated family names (default: all)")
    ap.add_argument("--instances", type=int, default=None, help="only the first N instances")
    ap.add_argument("--perturbations", default="", help="comma-separated perturbation names (default: all)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--markdown", type=Path, default=None)
    args = ap.parse_args()
    names = [n for n in args.families.split(",") if n] or list(registry.families())
    cache = Path(os.environ.get("FRAME_CACHE_DIR") or ROOT / "data/cache")
    t0 = time.perf_counter()
    only = [p for p in args.perturbations.split(",") if p] or None
    result = run(args.release, names, args.instances, cache, only)
    result["seconds"] = round(time.perf_counter() - t0, 1)
    print(f"metric checklist: {result['instances']} instances of {result['release']}, {result['seconds']} s")
    print(table(result))
    failing = [c for c in result["cells"] if not c["unclaimed"] and c["share_right"] < BAR]
    print(f"cells below {BAR}: {len(failing)} of {sum(1 for c in result['cells'] if not c['unclaimed'])}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    if args.markdown:
        args.markdown.write_text(table(result) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
