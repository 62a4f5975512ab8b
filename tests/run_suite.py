"""Run the test suite as two pytest processes side by side, one per core (what `make test` runs).

pytest-xdist is not on this project's package mirror, so this does the one thing needed from it: the
modules that share the expensive session fixtures (the demo release build and its scoring,
tests/conftest.py) run in one process, so those fixtures are built once; every other module runs in the
second, balanced by module durations: the last run's (`data/cache/test-durations.json`), else the
committed snapshot `tests/durations.json` (refresh it by copying the former after a full run). Each
process gets its own pytest basetemp and JUnit report (they share one Prefect server and one
compiled-MiniLM cache); the reports are merged into
`data/cache/test-suite.xml` (benchmarks/suite.py reads it). The output of each process is printed when it
ends; the exit code is the first failing process's.

    .venv/bin/python tests/run_suite.py [--shards 1|2] [pytest args...]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tasks.atomic import atomic_write_bytes, atomic_write_text  # noqa: E402  (run as a script)

TESTS = ROOT / "tests"
CACHE = ROOT / "data" / "cache"
REPORT = CACHE / "test-suite.xml"
DURATIONS = CACHE / "test-durations.json"
SNAPSHOT = TESTS / "durations.json"
SHARED_FIXTURES = ("demo_release", "demo_scored")  # session fixtures worth building once


def modules() -> list[str]:
    """Test modules as pytest arguments; tests/reliability is one unit (it shares session fixtures)."""
    out = sorted(str(p.relative_to(ROOT)) for p in TESTS.glob("test_*.py"))
    if (TESTS / "reliability").is_dir():
        out.append("tests/reliability")
    return out


def uses_shared(module: str) -> bool:
    path = ROOT / module
    files = [path] if path.is_file() else sorted(path.rglob("*.py"))
    return any(f in p.read_text(encoding="utf-8") for p in files for f in SHARED_FIXTURES)


def split(mods: list[str], durations: dict[str, float]) -> list[list[str]]:
    """Two shards: the shared-fixture modules, plus others (longest first) while that shard is the lighter."""
    first = [m for m in mods if uses_shared(m)]
    rest = sorted((m for m in mods if m not in first), key=lambda m: -durations.get(m, 30.0))
    load = [sum(durations.get(m, 30.0) for m in first), 0.0]
    second: list[str] = []
    for m in rest:
        target = 0 if load[0] < load[1] else 1
        (first if target == 0 else second).append(m)
        load[target] += durations.get(m, 30.0)
    return [s for s in (first, second) if s]


def run_shard(k: int, mods: list[str], extra: list[str], tmp: Path, results: dict) -> None:
    junit = tmp / f"junit-{k}.xml"
    log = CACHE / f"test-shard-{k}.log"
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={tmp / f'base-{k}'}"]
    args += [f"--junitxml={junit}", *extra, *mods]
    t0 = time.perf_counter()
    with open(log, "w", encoding="utf-8") as fh:
        rc = subprocess.call(args, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT)
    results[k] = (rc, time.perf_counter() - t0, junit, log)


def merge(junits: list[Path]) -> tuple[ET.ElementTree, dict[str, float]]:
    """One JUnit report of every shard, and the seconds of each module (for the next split)."""
    suites = ET.Element("testsuites")
    per_module: dict[str, float] = {}
    for junit in junits:
        if not junit.is_file():
            continue
        for suite in ET.parse(junit).getroot().iter("testsuite"):
            suites.append(suite)
            for case in suite.iter("testcase"):
                parts = (case.get("classname") or "").split(".")
                mod = "/".join(parts[:2]) if parts[:1] == ["tests"] else ""
                if mod.startswith("tests/reliability"):
                    mod = "tests/reliability"
                elif mod:
                    mod += ".py"
                per_module[mod] = per_module.get(mod, 0.0) + float(case.get("time") or 0.0)
    return ET.ElementTree(suites), per_module


def shared_server(folder: Path) -> Path | None:
    """Start one background Prefect server for both processes (FRAME_TEST_PREFECT_API): one start and
    one idle server instead of one per process. None: each process starts its own (or temporary ones)."""
    if os.environ.get("FRAME_TEST_TEMP_SERVERS") == "1" or os.environ.get("FRAME_TEST_PREFECT_API"):
        return None
    from flows.server import start_server

    try:
        os.environ["FRAME_TEST_PREFECT_API"] = start_server(folder)["url"]
    except RuntimeError as exc:
        print(f"run_suite: no shared Prefect server ({exc}); each process starts its own", file=sys.stderr)
        return None
    return folder


def precompile() -> None:
    """Byte-compile the project's packages once: the suite starts ~200 Python processes, and where
    PYTHONDONTWRITEBYTECODE is set (as in some CI images) each would otherwise compile every frame
    module it imports from source again (~0.4 s for all of them)."""
    import compileall

    for pkg in ("flows", "tasks", "schemas"):
        compileall.compile_dir(ROOT / pkg, quiet=1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--shards", type=int, choices=(1, 2), default=int(os.environ.get("FRAME_TEST_SHARDS", "2"))
    )
    args, extra = ap.parse_known_args()
    CACHE.mkdir(parents=True, exist_ok=True)
    # test paths given: run just those, in one process; any selection leaves the durations file alone
    given = [a for a in extra if not a.startswith("-") and (ROOT / a.split("::")[0]).exists()]
    extra = [a for a in extra if a not in given]
    mods = given or modules()
    durations: dict[str, float] = {}
    for source in (SNAPSHOT, DURATIONS):  # the last run's figures win over the snapshot
        try:
            durations |= json.loads(source.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            pass
    shards = split(mods, durations) if args.shards == 2 and not given else [mods]
    precompile()
    results: dict[int, tuple] = {}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="frame-suite-") as tmp:
        # both processes share one compiled-MiniLM cache and one Prefect server (tests/conftest.py)
        os.environ.setdefault("FRAME_MODEL_CACHE", str(Path(tmp) / "models"))
        # and one cache folder per run (FRAME_CACHE_DIR of the tests), never the checkout's data/cache
        os.environ["FRAME_TEST_CACHE_DIR"] = str(Path(tmp) / "cache")
        server = shared_server(Path(tmp) / "prefect-server") if len(shards) > 1 else None
        try:
            threads = [
                threading.Thread(target=run_shard, args=(k, s, extra, Path(tmp), results))
                for k, s in enumerate(shards, 1)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            if server is not None:
                from flows.server import stop_server

                stop_server(server)
        tree, per_module = merge([results[k][2] for k in sorted(results)])
        root = tree.getroot()  # the run as a whole, for benchmarks/suite.py: wall time, count, selection
        root.set("time", f"{time.perf_counter() - t0:.3f}")
        root.set("tests", str(sum(int(x.get("tests") or 0) for x in root.iter("testsuite"))))
        root.set("selection", "part" if given or extra else "whole")
        buf = io.BytesIO()
        tree.write(buf, encoding="utf-8", xml_declaration=True)
        atomic_write_bytes(REPORT, buf.getvalue())
    if per_module and not given and not extra:  # only a whole run's figures balance the next split
        atomic_write_text(DURATIONS, json.dumps(per_module, indent=1, sort_keys=True))
    failed = 0 if len(results) == len(shards) else 1  # a shard that did not even run fails the suite
    for k in sorted(results):
        rc, secs, _, log = results[k]
        rc = 0 if rc == 5 and len(shards) > 1 else rc  # 5: this shard's selection collected no test
        print(f"===== shard {k}/{len(shards)}: {len(shards[k - 1])} modules, exit {rc}, {secs:.0f} s =====")
        print(log.read_text(encoding="utf-8", errors="replace"))
        failed = failed or rc
    print(f"suite: {len(shards)} shard(s), {time.perf_counter() - t0:.0f} s wall, exit {failed}")
    return failed


if __name__ == "__main__":
    sys.exit(main())
