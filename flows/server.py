"""One local Prefect server per data folder, run in the background (`frame server start|stop|status`).

Without it every `frame` command that runs a flow starts Prefect's temporary server (~7 s on 2 cores) and
stops it again. `start_server(data_dir)` launches `prefect server start` on a free port of 127.0.0.1 with
its own database (data/run/prefect-server/), waits until its API answers and records
{pid, url} in data/run/prefect-server.json. `configure_prefect` then points every command on that data
folder at it (unless PREFECT_API_URL is already set); a record whose server has died is ignored. The
one-build-per-data-folder lock (tasks.locks) does not depend on the server."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tasks.atomic import atomic_write_text
from tasks.manifest import pid_alive

__all__ = ["record_path", "running_server", "start_server", "stop_server"]


def record_path(data_dir: Path) -> Path:
    return Path(data_dir) / "run" / "prefect-server.json"


def _alive(pid: int) -> bool:
    try:  # reap it first if it is our own child that has exited (else it lingers as a zombie)
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    return pid_alive(pid)


def _healthy(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout) as resp:  # noqa: S310 (local URL)
            return resp.status == 200
    except OSError:
        return False


def running_server(data_dir: Path) -> dict | None:
    """The data folder's background server ({pid, url, started_at}) if its process is alive, else None."""
    try:
        rec = json.loads(record_path(data_dir).read_text(encoding="utf-8"))
        pid, url = int(rec["pid"]), str(rec["url"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return {**rec, "pid": pid, "url": url} if _alive(pid) else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(data_dir: Path, timeout_s: float = 120.0) -> dict:
    """Start the background server of `data_dir` (or return the one already running)."""
    data_dir = Path(data_dir).resolve()
    found = running_server(data_dir)
    if found is not None:
        return {**found, "already": True}
    port = _free_port()
    url = f"http://127.0.0.1:{port}/api"
    home = data_dir / "run" / "prefect-server"
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false", PREFECT_UI_ENABLED="false")
    log = (data_dir / "logs").resolve()
    log.mkdir(parents=True, exist_ok=True)
    with open(log / "prefect-server.log", "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # outlives this command; `frame server stop` ends it
        )
    deadline = time.monotonic() + timeout_s
    while not _healthy(url):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"the Prefect server did not start (see {log / 'prefect-server.log'})")
        time.sleep(0.3)
    rec = {"pid": proc.pid, "url": url, "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    atomic_write_text(record_path(data_dir), json.dumps(rec, sort_keys=True) + "\n")
    return {**rec, "already": False}


def stop_server(data_dir: Path, timeout_s: float = 20.0) -> dict | None:
    """Stop the data folder's background server; returns its record, or None when none was running."""
    found = running_server(data_dir)
    record_path(data_dir).unlink(missing_ok=True)
    if found is None:
        return None
    try:
        os.killpg(found["pid"], signal.SIGTERM)
    except ProcessLookupError:
        return found
    deadline = time.monotonic() + timeout_s
    while _alive(found["pid"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _alive(found["pid"]):
        os.killpg(found["pid"], signal.SIGKILL)
    return found
