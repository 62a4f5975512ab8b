"""SIGKILL a real `frame build` at seeded random points of its progress, resume it on the same data folder
each time, and check that what was finished is kept and the final release is byte-identical to an
uninterrupted build's (tests/reliability/conftest.py `gw_reference`).

Kill points are chosen by progress, not by time: when the number of persisted task results (files
named by cache key under `<data>/cache/prefect-results`) reaches a seeded random threshold, plus a
seeded random delay of up to 150 ms, so each kill lands mid-build (between or inside steps). The last
kill comes once every step is persisted, after up to 300 ms: while the release is written or the run
shuts down. `start_new_session`
puts the build and its ephemeral Prefect server in one process group; `os.killpg` kills both.

After every kill: no persisted result is torn (each reads back; Prefect's writes are atomic,
`flows/results.py`), no release folder or only a complete one is visible. On the rerun: every result
persisted before the kill is reused, not rewritten (same inode and mtime; one "Cached" task state
per such result, or a single cached `build-domain` once the domain had finished). At the end: the same
set size of persisted results as the reference, no temp leftovers in grounding/reports/releases (the
build sweeps what killed runs left, `flows.results.sweep_interrupted`), identical release files.

Before the final run, two kills land at fixed points (a hook around `frame`'s entry, KILL_HOOK): inside
the rewrite of a tampered grounding folder (the new folder exchanged into place, the old one not yet
removed) and inside the release write (tables and card staged, manifest.json not yet).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from flows.results import interrupted_leftovers, sweep_interrupted, unreadable_reason
from tasks.manifest import check_folder
from tests.reliability.conftest import (
    RUN_TIMEOUT_S,
    build_cmd,
    file_ids,
    keyed_results,
    release_dir,
    run_env,
    task_lines,
    tree_hashes,
    write_config,
)

SEED = 20260105
KILLS = 5
POLL_S = 0.005
ROOT = Path(__file__).resolve().parents[2]

# `frame` with a kill point: the build SIGKILLs its own process group (with the Prefect server) there.
KILL_HOOK = """
import os, signal, sys
from pathlib import Path
import tasks.manifest as m
import tasks.release.write as w

def die():
    os.killpg(os.getpgid(0), signal.SIGKILL)

if os.environ["FRAME_TEST_KILL_AT"] == "grounding":  # gw/W2's new folder in place, the old one not yet gone
    exchange = m.exchange
    def hooked(a, b):
        done = exchange(a, b)
        if Path(b).parent.parent.name == "grounding" and Path(b).name == "W2":
            die()
        return done
    m.exchange = hooked
else:  # release: parquet files and card in the staging folder, manifest.json not yet
    write = w._write_bytes
    def hooked_write(path, data):
        if path.name == "manifest.json":
            die()
        write(path, data)
    w._write_bytes = hooked_write
import flows.cli
sys.argv[0] = "frame"
getattr(flows.cli, "main", flows.cli.app)()
"""


def _release_temps(data: Path) -> set[str]:
    parent = release_dir(data).parent
    return {p.name for p in parent.iterdir() if p.name.startswith(".tmp-")} if parent.is_dir() else set()


def _temp_entries(data: Path) -> list[Path]:
    """Anything temp-looking in the folders a reader sees (grounding, reports, releases)."""
    out = []
    for top in ("grounding", "reports", "releases"):
        root = data / top
        if root.is_dir():
            out += [p for p in root.rglob("*") if ".tmp" in p.name or ".old-" in p.name]
    return out


def _run_until(
    cfg: Path, home: Path, log: Path, reached, delay_s: float, kill_at: str | None = None
) -> tuple[int, str]:
    """Start `frame build`; once `reached()` holds, wait `delay_s` and SIGKILL its process group.
    Returns (return code, stdout). If the build ends first, its own return code is returned.
    `kill_at` ("release" or "grounding"): the build kills itself at that point of KILL_HOOK."""
    cmd = build_cmd(cfg) if kill_at is None else [sys.executable, "-c", KILL_HOOK, *build_cmd(cfg)[1:]]
    env = run_env(home) if kill_at is None else {**run_env(home), "FRAME_TEST_KILL_AT": kill_at}
    with log.open("w", encoding="utf-8") as out:
        proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=ROOT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + RUN_TIMEOUT_S
            while proc.poll() is None and not reached():
                assert time.monotonic() < deadline, f"no progress before the kill point: {log}"
                time.sleep(POLL_S)
            if proc.poll() is None:
                time.sleep(delay_s)
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
            rc = proc.wait(timeout=60)
            _assert_group_gone(proc.pid)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=60)
    return rc, log.read_text(encoding="utf-8", errors="replace")


def _assert_group_gone(pgid: int) -> None:
    """No live process is left in the build's group (the ephemeral Prefect server died with it)."""
    import psutil

    deadline = time.monotonic() + 20
    while True:
        alive = []
        for p in psutil.process_iter(["pid", "status", "cmdline"]):
            try:
                if os.getpgid(p.pid) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                    alive.append(" ".join(p.info["cmdline"] or [])[:120])
            except (ProcessLookupError, psutil.Error):
                continue
        if not alive:
            return
        assert time.monotonic() < deadline, f"processes outlived the killed build: {alive}"
        time.sleep(0.1)


def _check_after_kill(data: Path, reference: dict[str, str]) -> None:
    for name, path in keyed_results(data).items():
        assert unreadable_reason(path) is None, f"torn persisted result {name}: {unreadable_reason(path)}"
    release = release_dir(data)
    if release.exists():  # written whole or not at all: a visible release is complete and verifies
        manifest = json.loads((release / "manifest.json").read_text(encoding="utf-8"))
        hashes = tree_hashes(release)
        assert {k: v for k, v in hashes.items() if k != "manifest.json"} == manifest["files"]
        assert hashes == reference


def _check_reuse(
    before: dict[str, tuple[int, int]], data: Path, stdout: str, total: int, partial: bool = False
) -> int:
    """The results persisted before this run were reused: never rewritten, each one a Cached task.
    `partial`: the run was killed while still serving cached steps (not all of them are in its log)."""
    now = file_ids(keyed_results(data))
    rewritten = [k for k, v in before.items() if now.get(k) != v]
    assert not rewritten, f"persisted results rewritten by the rerun: {rewritten}"
    lines = task_lines(stdout)
    cached = [ln for ln in lines if "Cached(" in ln]
    if len(before) == total:  # the domain had finished: its one cache entry serves it whole
        assert len(lines) == 1 and "build-domain" in cached[0], lines
    elif partial:
        assert cached and len(cached) == len(lines) <= len(before), (len(before), lines)
    else:
        assert len(cached) == len(before), (len(before), cached)
    return len(cached)


def _kill_inside_writes(cfg: Path, home: Path, tmp_path: Path, reference: dict[str, str]) -> list[str]:
    """Two kills at fixed points. A tampered grounding folder (gw/W2) is warned about and rewritten: the
    build dies right after the new folder is exchanged into place (the folder there is whole and matches
    its manifest, the old copy lies beside it). Then a build dies inside the release write (tables and
    card staged, manifest.json not yet): no release appears that was not there. Returns history lines."""
    data = tmp_path / "data"
    w2 = data / "grounding" / "gw" / "W2"
    doc = sorted(w2.glob("*.md"))[0]
    doc.write_text(doc.read_text(encoding="utf-8") + "\ntampered\n", encoding="utf-8")
    had_release = release_dir(data).exists()
    rc, stdout = _run_until(cfg, home, tmp_path / "kill-grounding.log", lambda: False, 0.0, "grounding")
    assert rc == -signal.SIGKILL, stdout[-3000:]
    warned = [ln for ln in stdout.splitlines() if ln.startswith("frame: warning:")]
    assert warned == [
        f"frame: warning: data/grounding/gw/W2: {doc.name} changed since it was written; recomputing"
    ]
    assert check_folder(w2) == [] and "tampered" not in doc.read_text(encoding="utf-8")
    assert [p for p in w2.parent.iterdir() if p.name.startswith(".W2.tmp-")]  # the old copy, beside it
    _check_after_kill(data, reference)

    seen = set(_release_temps(data))
    rc, stdout = _run_until(cfg, home, tmp_path / "kill-release.log", lambda: False, 0.0, "release")
    assert rc == -signal.SIGKILL, stdout[-3000:]
    assert _release_temps(data) - seen and release_dir(data).exists() == had_release  # staged only
    _check_after_kill(data, reference)
    return ["tampered W2, killed after its grounding exchange", "killed while staging the release"]


def test_sigkill_at_random_points_then_resume_gives_identical_release(
    gw_reference, reliability_home, tmp_path
):
    t0 = time.monotonic()
    reference = gw_reference["hashes"]
    total = gw_reference["keys"]  # 19: 2 fetch, 6 convert, 2 x 5 synthesis steps, build-domain
    assert total >= KILLS + 4
    rng = random.Random(SEED)
    thresholds = sorted(rng.sample(range(1, total - 2), KILLS - 1))
    data = tmp_path / "data"
    cfg = write_config(tmp_path)

    def results_at_least(n: int):
        return lambda: len(keyed_results(data)) >= n

    def served_from_cache(log: Path):
        return lambda: log.is_file() and bool(task_lines(log.read_text(encoding="utf-8", errors="replace")))

    # The last kill comes once every step is persisted: during the release write or the shutdown.
    points = [(t, rng.uniform(0.0, 0.15)) for t in thresholds] + [(total, rng.uniform(0.0, 0.3))]
    kills, history = 0, []
    for i, (threshold, delay) in enumerate(points):
        before = file_ids(keyed_results(data))
        # at least one new result per run (an earlier kill may have overshot this threshold)
        n = threshold if threshold == total else min(max(threshold, len(before) + 1), total - 1)
        seen = set(_release_temps(data))
        log = tmp_path / f"run{i}.log"
        # An earlier kill may have overshot so far that n results are already there: then kill once
        # this run has served a step from its cache (else it would die before doing anything).
        partial = n <= len(before)
        reached = served_from_cache(log) if partial else results_at_least(n)
        rc, stdout = _run_until(cfg, reliability_home, log, reached, delay)
        label = f"{n} results + {delay * 1000:.0f} ms"
        if threshold == total:
            if _release_temps(data) - seen:
                label += " (killed while writing the release)"
            else:
                label += f" (killed {'after' if release_dir(data).exists() else 'before'} the release write)"
        cached = _check_reuse(before, data, stdout, total, partial)
        after = len(keyed_results(data))
        history.append(f"{label}: rc {rc}, {len(before)} -> {after} results, {cached} cached")
        assert rc == -signal.SIGKILL, (history, stdout[-3000:])  # killed mid-build, not finished
        kills += 1
        assert threshold == total or not release_dir(data).exists()
        _check_after_kill(data, reference)
    assert kills >= KILLS, history
    history += _kill_inside_writes(cfg, reliability_home, tmp_path, reference)

    left = _temp_entries(data)
    before = file_ids(keyed_results(data))
    rc, stdout = _run_until(cfg, reliability_home, tmp_path / "final.log", lambda: False, 0.0)
    assert rc == 0, stdout[-3000:]
    _check_reuse(before, data, stdout, total)
    history.append(f"final: rc {rc}, {len(before)} -> {len(keyed_results(data))} results")
    if left:  # what the killed runs left behind is swept, and the sweep says so
        assert "leftover(s) of an interrupted build" in stdout, left
    assert not _temp_entries(data), _temp_entries(data)
    assert not interrupted_leftovers(data)
    assert len(keyed_results(data)) == total, "a step was persisted twice under different keys"
    assert tree_hashes(release_dir(data)) == reference
    print(f"{kills} kills in {time.monotonic() - t0:.1f} s; leftovers swept: {len(left)}")
    print("\n".join(history))


def test_sweep_removes_only_what_killed_builds_leave(tmp_path):
    """The sweep `frame build` runs under the data folder's lock: temp entries of grounding sets,
    report files and releases go; old temp files in the shared caches go; young ones (another command
    may be writing them right now), locks and real outputs stay."""
    data = tmp_path / "data"
    gone = [
        data / "grounding" / "gw" / ".W1.tmp-k2j4h5g6",
        data / "grounding" / "gw" / ".W2.old-4242",
        data / "reports" / "gw" / "W1" / ".report.md.a1b2c3d4.tmp",
        data / "releases" / "small" / ".tmp-1.0.0-4242-0123456789ab",
        data / "cache" / "prefect-results" / f".{'a' * 64}.x1y2z3w4.tmp",
    ]
    kept = [
        data / "grounding" / "gw" / "W1" / "documents.json",
        data / "reports" / "gw" / "W1" / "report.md",
        data / "releases" / "small" / ".1.0.0.lock",
        data / "releases" / "small" / "1.0.0" / "manifest.json",
        data / "cache" / "llm" / "ab" / f".{'b' * 64}.json.q9w8e7r6.tmp",  # young: maybe in use
    ]
    for p in gone + kept:
        if p.name.startswith((".W", ".tmp-")):
            p.mkdir(parents=True)
            (p / "part.md").write_text("half")
        else:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text("x")
    old = time.time() - 2 * 3600
    os.utime(gone[-1], (old, old))
    assert sorted(interrupted_leftovers(data)) == sorted(gone)
    storage = data / "cache" / "prefect-results"
    assert sorted(sweep_interrupted(data, storage)) == sorted(gone)
    assert not any(p.exists() for p in gone) and all(p.exists() for p in kept)
    assert sweep_interrupted(data, storage) == []
