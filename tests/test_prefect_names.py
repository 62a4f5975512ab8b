"""Issue 18: what the Prefect UI shows of a build. Against a real Prefect server (`prefect server start`,
flows/server.py), a small build (NVDA 10-Q, 2 snapshots, plus a domain whose filing is not in the
mirror) is read back through the API: every task run is named "step · domain · snapshot", the flow run
"build <release> <version>", and the `frame-build` artifact has one row per domain plus the failures.
A second build of the same domain under another version stays one cached task; PROGRESS counts the
snapshots whose gold report is done."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from flows.steps import all_steps, run_name, run_name_template, snapshot_span
from tests.conftest import CORPUS, MIRROR_HEAD, ROOT, SMALL_DOMAINS, frame_env, shared_api_url

D, T1, T2 = "NVDA-10-Q", "2023-07-30", "2025-07-27"
BAD, BAD_T = "NVDA-10-K", "1999-01-31"  # no such filing in the mirror: its fetch fails
CONFIG = (
    MIRROR_HEAD
    + "[[domains]]"
    + SMALL_DOMAINS.split("[[domains]]")[1]
    + f"""[[domains]]
kind = "edgar"
name = "{BAD}"
category = "financial_annual"
ticker = "NVDA"
form = "10-K"
periods = ["{BAD_T}"]
"""
)

# One build in its own process, as the CLI runs it (settings first); prints PROGRESS as it changed.
SCRIPT = """
import json, sys, threading, time
from pathlib import Path
from flows.settings import configure_prefect
cfg_path, domains, release, version = sys.argv[1], sys.argv[2].split(","), sys.argv[3], sys.argv[4]
from tasks.config import load_config
cfg = load_config(cfg_path)
configure_prefect(cfg.build.data_dir)
import flows.build as b
seen, stop = [], threading.Event()
def watch():
    while not stop.is_set():
        now = (b.PROGRESS["done"], b.PROGRESS["total"])
        if not seen or seen[-1] != now:
            seen.append(now)
        time.sleep(0.02)
w = threading.Thread(target=watch, daemon=True)
w.start()
results = b.run_build(cfg, domains, release=release, version=version)
time.sleep(0.1)
stop.set(); w.join()
print("RESULT " + json.dumps({"status": [r.status for r in results], "progress": seen}))
"""


def test_run_names_are_literal_and_templates_name_parameters():
    assert run_name("fill", "aapl-10q", "2024-06-29") == "fill · aapl-10q · 2024-06-29"
    assert run_name("convert", "gw", "W1", "") == "convert · gw · W1"  # empty parts left out
    # Prefect formats a string run name with the task's parameters: a literal one survives that.
    assert run_name("fill", "odd{x}", "t").format(x="no") == "fill · odd{x} · t"
    tpl = run_name_template("score", "family", "instance_id")
    assert tpl.format(family="coverage", instance_id="a/b") == "score · coverage · a/b"
    assert snapshot_span(["W1"]) == "W1" and snapshot_span(["W1", "W2", "W3"]) == "W1..W3"


def test_run_names_are_set_outside_the_keyed_task_source():
    """A task's source, decorator included, is part of its cache key (flows.caching.task_source): a
    run name set in the decorator would recompute every cached step once. They are set with
    `with_options` instead."""
    import importlib

    from prefect import Task

    from flows.caching import task_source

    tasks = {}
    for module in ("flows.build", "flows.ground", "flows.generate", "flows.score"):
        mod = importlib.import_module(module)
        tasks |= {f"{module}.{k}": v for k, v in vars(mod).items() if isinstance(v, Task)}
    assert len(tasks) >= 12
    assert [k for k, t in tasks.items() if "task_run_name" in task_source(t.fn)] == []
    from flows.generate import generate_task

    assert generate_task.task_run_name.format(system="extractive", instance_id="c/d/t1->t2") == (
        "generate · extractive · c/d/t1->t2"
    )


def test_a_run_name_is_not_part_of_the_cache_key(prefect_harness):
    """The same step under two run names is one cache entry (the key is the task's name, source and
    inputs: flows.caching)."""
    from prefect import flow, task

    from flows.caching import STABLE

    @task(name="double", cache_policy=STABLE, persist_result=True)
    def double(x: int, salt: str) -> int:
        return 2 * x

    salt = uuid.uuid4().hex  # a fresh key for this session

    @flow
    def f() -> list[str]:
        states = [
            double.with_options(task_run_name=run_name("double", dom, "t1"))(21, salt, return_state=True)
            for dom in ("a", "b")
        ]
        return [s.name for s in states]

    assert f() == ["Completed", "Cached"]


@pytest.fixture(scope="module")
def api_url():
    """The session's shared Prefect server (flows/server.py), or one of this module's own."""
    url = shared_api_url()
    if url:
        yield url
        return
    from flows.server import start_server, stop_server

    folder = Path(tempfile.mkdtemp(prefix="frame-names-server-"))
    try:
        yield start_server(folder)["url"]
    finally:
        stop_server(folder)
        shutil.rmtree(folder, ignore_errors=True)


def _api(coro_fn):
    async def go():
        from prefect.client.orchestration import get_client

        async with get_client() as client:
            return await coro_fn(client)

    return asyncio.run(go())


def _read_back(url: str, release: str, version: str, n_tasks: int) -> dict:
    """The build's flow run (by its name), its task runs (once the server has all `n_tasks`: task runs
    arrive as events) and its `frame-build` artifact, read through the API at `url`."""
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        ArtifactFilterKey,
        FlowFilter,
        FlowFilterName,
        FlowRunFilter,
        FlowRunFilterId,
        FlowRunFilterName,
    )
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: url}):
        (run,) = _api(
            lambda c: c.read_flow_runs(
                flow_filter=FlowFilter(name=FlowFilterName(any_=["build"])),
                flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=[f"build {release} {version}"])),
            )
        )
        deadline = time.monotonic() + 60
        while True:
            tasks = _api(
                lambda c: c.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run.id])))
            )
            final = [t for t in tasks if t.state and t.state.is_final()]
            if len(final) >= n_tasks or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        (art,) = _api(
            lambda c: c.read_artifacts(
                artifact_filter=ArtifactFilter(
                    key=ArtifactFilterKey(any_=["frame-build"]),
                    flow_run_id=ArtifactFilterFlowRunId(any_=[run.id]),
                )
            )
        )
    return {"run": run, "tasks": tasks, "artifact": art.data}


def _code_version() -> str:
    """What every cache key of the build holds (flows.ground.code_version), read afresh."""
    from flows.ground import code_version

    return code_version.__wrapped__("tasks", "schemas", "prompts")


def _build(cfg: Path, domains: list[str], release: str, version: str, url: str, home: Path) -> dict:
    env = {**frame_env(home), "PREFECT_API_URL": url}
    res = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(cfg), ",".join(domains), release, version],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=900,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    (line,) = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")]
    return {**json.loads(line.removeprefix("RESULT ")), "log": res.stdout + res.stderr}


@pytest.mark.skipif(not (CORPUS / "edgar").is_dir(), reason="shared corpus not found")
def test_build_runs_are_named_and_its_artifact_has_one_row_per_domain(api_url, tmp_path):
    release = f"names-{uuid.uuid4().hex[:8]}"  # the server may be shared: this build's runs only
    cfg = tmp_path / "names.toml"
    cfg.write_text(CONFIG.format(data=tmp_path / "data", corpus=CORPUS), encoding="utf-8")

    code = _code_version()
    first = _build(cfg, [D, BAD], release, "1.0.0", api_url, tmp_path / "ph")
    assert first["status"] == ["ok", "failed"]
    # PROGRESS: total = every snapshot; counted one at a time; the failed domain's snapshot never done.
    assert first["progress"][-1] == [2, 3], first["progress"]
    assert [1, 3] in first["progress"], first["progress"]

    got = _read_back(api_url, release, "1.0.0", n_tasks=9 * 2 + 1 + 2)
    assert got["run"].name == f"build {release} 1.0.0"
    names = sorted(t.name for t in got["tasks"])
    expected = [run_name(step, D, t) for t in (T1, T2) for step in all_steps()]
    expected += [run_name("build-domain", D, snapshot_span([T1, T2])), run_name("build-domain", BAD, BAD_T)]
    expected += [run_name("fetch", BAD, BAD_T)]
    assert names == sorted(expected), names
    assert f"Task run '{run_name('fill', D, T2)}' - Finished in state Completed()" in first["log"]

    md = got["artifact"]
    assert md.startswith(f"# frame build {release} 1.0.0: failed\n"), md
    assert "- backend: offline\n" in md and "(offline)" not in md
    rows = [ln for ln in md.splitlines() if ln.startswith("| ") and not ln.startswith("| domain")]
    assert [r.split(" | ")[0:2] for r in rows] == [["| " + D, "built"], ["| " + BAD, "failed"]], rows
    assert rows[0].split(" | ")[2:4] == ["2", "18 / 0 / 0"], rows[0]  # 2 snapshots, 9 steps each
    assert rows[0].split(" | ")[5] == "0"  # offline: no cost
    (failure,) = md.split("## Failures (1)\n\n")[1].strip().splitlines()
    assert failure.startswith(f"- {BAD} {BAD_T} fetch: ") and "no filing" in failure, failure

    # The same domain again, for another version: its cache entry still hits (no run name, release or
    # version is part of a key) and the artifact says it was cached.
    again = _build(cfg, [D], release, "1.0.1", api_url, tmp_path / "ph")
    assert _code_version() == code, "tasks/, schemas/ or prompts/ changed while the test ran: keys changed"
    assert again["status"] == ["ok"] and again["progress"][-1] == [2, 2], again["progress"]
    got = _read_back(api_url, release, "1.0.1", n_tasks=1)
    assert [(t.name, t.state.name) for t in got["tasks"]] == [
        (run_name("build-domain", D, snapshot_span([T1, T2])), "Cached")
    ]
    md = got["artifact"]
    assert "- steps: all 18 steps cached (nothing computed)\n" in md, md
    (row,) = [ln for ln in md.splitlines() if ln.startswith(f"| {D} ")]
    assert row.split(" | ")[1:5] == ["cached", "2", "0 / 18 / 0", "-"], row
    assert "Failures" not in md and "cached 0.00" not in md
