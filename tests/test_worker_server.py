"""The deployment path end to end, without Docker: a real `prefect server start` (SQLite), the
worker entry script run locally (work pool, `prefect deploy --all`, `prefect worker start`), then the
`frame-build` deployment triggered with parameters and executed by that worker (pull step ->
flows/deploy.py:build_release_flow -> release), which must verify."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import CORPUS, ROOT, SMALL_CONFIG

pytestmark = pytest.mark.skipif(not (CORPUS / "arxiv").is_dir(), reason="shared corpus not found")

BIN = Path(sys.executable).parent
ENTRYPOINT = ROOT / "docker" / "worker-entrypoint.sh"
CONFIG = SMALL_CONFIG


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, timeout: float = 5) -> tuple[int, object]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, None


def wait_until(what: str, check, timeout_s: float, procs: dict, logs: dict) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for name, proc in procs.items():
            if proc.poll() is not None:
                pytest.fail(
                    f"{name} exited ({proc.returncode}) while waiting for {what}:\n{tail(logs[name])}"
                )
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(1)
    pytest.fail(
        f"timed out after {timeout_s:.0f}s waiting for {what}:\n" + "\n".join(map(tail, logs.values()))
    )


def tail(path: Path, n: int = 4000) -> str:
    return f"--- {path.name}\n" + (path.read_text(errors="replace")[-n:] if path.exists() else "")


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM the process group, then SIGKILL what is left after a grace period."""
    for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, 10)):  # nothing to finish gracefully
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            os.killpg(proc.pid, signal.SIGKILL)  # children the leader left behind
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("stack")
    api_port, worker_port = free_port(), free_port()
    api = f"http://127.0.0.1:{api_port}/api"
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "FRAME_"))}
    base.update(
        PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        HF_HUB_OFFLINE="1",
        SOURCE_DATE_EPOCH="1767225600",
    )
    server_env = {**base, "PREFECT_HOME": str(tmp / "server-home")}
    worker_env = {
        **base,
        "PREFECT_HOME": str(tmp / "worker-home"),
        "PREFECT_API_URL": api,
        "FRAME_HOME": str(ROOT),
        "FRAME_CONFIG": str(tmp / "small.toml"),
        "FRAME_RELEASE": "small",
        "FRAME_CACHE_DIR": str(tmp / "cache"),
        "PREFECT_LOCAL_STORAGE_PATH": str(tmp / "cache" / "prefect-results"),
        "PREFECT_WORKER_WEBSERVER_PORT": str(worker_port),
        "PREFECT_WORKER_QUERY_SECONDS": "2",
        "FRAME_API_WAIT_S": "120",
    }
    (tmp / "small.toml").write_text(CONFIG.format(data=tmp / "data", corpus=CORPUS), encoding="utf-8")
    logs = {"server": tmp / "server.log", "worker": tmp / "worker.log"}
    procs: dict[str, subprocess.Popen] = {}
    try:
        with logs["server"].open("wb") as out:
            procs["server"] = subprocess.Popen(
                [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(api_port)],
                env=server_env,
                cwd=tmp,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        t0 = time.monotonic()
        wait_until("the API", lambda: get(f"{api}/health")[0] == 200, 120, procs, logs)
        t_server = time.monotonic() - t0
        # The entry script exactly as the container runs it; started before the API answered would
        # also work (it waits), but then the timing below would mix the two.
        with logs["worker"].open("wb") as out:
            procs["worker"] = subprocess.Popen(
                ["bash", str(ENTRYPOINT)],
                env=worker_env,
                cwd=tmp,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        t0 = time.monotonic()
        health = f"http://127.0.0.1:{worker_port}/health"
        wait_until("the worker's health endpoint", lambda: get(health)[0] == 200, 180, procs, logs)
        yield {
            "tmp": tmp,
            "api": api,
            "env": worker_env,
            "logs": logs,
            "procs": procs,
            "times": {"server_start": t_server, "worker_ready": time.monotonic() - t0},
        }
    finally:
        for name in ("worker", "server"):
            if name in procs:
                stop(procs[name])


def test_entrypoint_created_the_pool_and_registered_the_deployments(stack):
    from flows.deploy import schedules

    api = stack["api"]
    status, pool = get(f"{api}/work_pools/frame")
    assert status == 200 and pool["type"] == "process"
    for s in schedules():
        status, dep = get(f"{api}/deployments/name/refresh-release/{s['name']}")
        assert status == 200, s["name"]
        (sched,) = dep["schedules"]
        assert sched["active"]
        assert (sched["schedule"]["cron"], sched["schedule"]["timezone"]) == (s["cron"], s["timezone"])
        assert dep["parameters"] == {
            "config": stack["env"]["FRAME_CONFIG"],
            "release": "small",
            **s["parameters"],
        }
        assert dep["work_pool_name"] == "frame"
    status, build = get(f"{api}/deployments/name/build-release/frame-build")
    assert status == 200 and build["schedules"] == []
    # The pull step was templated with this machine's project folder.
    assert build["pull_steps"] == [
        {"prefect.deployments.steps.set_working_directory": {"directory": str(ROOT)}}
    ]
    times = stack["times"]
    print(f"server up in {times['server_start']:.1f}s, worker ready in {times['worker_ready']:.1f}s")


def run_deployment(stack: dict, name: str, *args: str) -> dict:
    """`prefect deployment run NAME ARGS` against the test server, then wait for a terminal state;
    returns the flow run as the API reports it."""
    api, env, tmp = stack["api"], stack["env"], stack["tmp"]
    res = subprocess.run(
        [str(BIN / "prefect"), "deployment", "run", name, *args],
        env=env,
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    m = re.search(r"UUID: ([0-9a-f-]{36})", res.stdout)
    assert m, res.stdout
    box: dict = {}

    def finished() -> bool:
        status, run = get(f"{api}/flow_runs/{m.group(1)}")
        box["run"] = run
        return status == 200 and run["state"]["type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED")

    wait_until(f"the {name} run to finish", finished, 360, stack["procs"], stack["logs"])
    return box["run"]


def test_frame_build_deployment_runs_on_the_worker(stack):
    env, tmp = stack["env"], stack["tmp"]
    t0 = time.monotonic()
    run = run_deployment(
        stack, "build-release/frame-build", "--param", "version=1.0.0", "--param", 'domains=["gw"]'
    )
    elapsed = time.monotonic() - t0
    assert run["state"]["type"] == "COMPLETED", tail(stack["logs"]["worker"])
    assert run["work_pool_name"] == "frame"
    assert run["parameters"] == {
        "config": env["FRAME_CONFIG"],
        "release": "small",
        "version": "1.0.0",
        "domains": ["gw"],
    }
    release = tmp / "data" / "releases" / "small" / "1.0.0"
    assert (release / "manifest.json").is_file()
    assert f"release: {release}" in stack["logs"]["worker"].read_text(errors="replace")
    # Only the domain asked for was built.
    assert sorted(p.name for p in (tmp / "data" / "reports").iterdir()) == ["gw"]
    # Task results went where the worker's environment said.
    assert any((tmp / "cache" / "prefect-results").iterdir())
    verify = subprocess.run(
        [str(BIN / "frame"), "release", "verify", str(release)],
        env={**env, "PREFECT_HOME": str(tmp / "verify-home")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert verify.returncode == 0, verify.stderr
    print(f"frame-build run: {elapsed:.1f}s from trigger to COMPLETED")


def test_refresh_arxiv_deployment_runs_on_the_worker(stack):
    """The monthly schedule's deployment, triggered by hand (as `prefect deployment run` does)."""
    run = run_deployment(stack, "refresh-release/frame-refresh-arxiv")
    assert run["state"]["type"] == "COMPLETED", tail(stack["logs"]["worker"])
    assert run["parameters"]["kinds"] == ["arxiv"]
    log = stack["logs"]["worker"].read_text(errors="replace")
    assert re.search(r"refresh small: (built|up-to-date)", log), log[-3000:]
