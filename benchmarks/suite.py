"""Benchmark: how long the test suite took, from the JUnit report that `make test` writes.

Prints the suite's wall time, test count, the slowest test files and setups, and the ratio to the named
baseline recorded in `benchmarks/baselines.json` (`suite`). It reads the last `make test` run rather than
running the ~15-minute suite again.

    .venv/bin/python benchmarks/suite.py [--report data/cache/test-suite.xml]
"""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "data" / "cache" / "test-suite.xml"


def baseline(name: str) -> dict:
    """A named baseline figure of benchmarks/baselines.json: value, what it was measured on, when."""
    return json.loads((ROOT / "benchmarks" / "baselines.json").read_text(encoding="utf-8"))[name]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", type=Path, default=REPORT)
    args = ap.parse_args()
    if not args.report.is_file():
        print(f"suite: no report at {args.report.name}: run `make test` first (it writes the JUnit report)")
        return
    root = ET.parse(args.report).getroot()
    # tests/run_suite.py writes <testsuites> (one <testsuite> per process) with the run's wall time, test
    # count and whether it ran the whole suite; a plain pytest report is one <testsuite>
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    if not suites:
        sys.exit(f"{args.report}: not a JUnit report (no <testsuite>)")
    seconds = float(root.get("time") or max(float(x.get("time") or 0) for x in suites))
    tests = int(root.get("tests") or sum(int(x.get("tests") or 0) for x in suites))
    per_file: dict[str, float] = defaultdict(float)
    for case in root.iter("testcase"):
        module = case.get("classname") or "?"  # tests.test_x, or tests.test_x.TestClass
        if module.rsplit(".", 1)[-1][:1].isupper():
            module = module.rsplit(".", 1)[0]
        per_file[module] += float(case.get("time", 0))
    base = baseline("suite")
    stamp = max((x.get("timestamp") or "?") for x in suites)
    print(f"test suite: {seconds:7.1f} s wall, {tests} tests, {len(suites)} process(es)  (report {stamp})")
    if root.get("selection") == "part":
        print("  a run of selected tests, not the whole suite: no ratio (run `make test` for one)")
    else:
        print(
            f"baseline  : {base['value']:7.1f} s  [{base['name']}; {base['measured']}]  "
            f"ratio {seconds / base['value']:.2f}x (target <= 1.00)"
        )
    print("slowest test modules (setup + call; a shared fixture counts where it is first used):")
    for name, sec in sorted(per_file.items(), key=lambda kv: -kv[1])[:10]:
        print(f"  {sec:7.1f} s  {name}")


if __name__ == "__main__":
    main()
