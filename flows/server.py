"""One local Prefect server per data folder, run in the background (`frame server start|stop|status`).

Without it every `frame` command that runs a flow starts Prefect's temporary server (~7 s on 2 cores) and
stops it again. `start_server(data_dir)` launches `prefect server start` on a free port of 127.0.0.1 with
its own database (data/run/prefect-server/), waits until its API answers and records
{pid, url} in data/run/prefect-server.json. `configure_prefect` then points every command on that data
folder at it (unless PREFECT_API_URL is already set); a record whose server has died is ignored. The
one-build-per-data-folder lock (tasks.locks) does not depend on the server."""

from __future__ import annotations

import atexit
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tasks.atomic import atomic_write_text
from tasks.manifest import pid_alive

__all__ = [
    "SERVER_DEFAULTS",
    "record_path",
    "running_server",
    "start_server",
    "start_temporary_server",
    "stop_server",
    "temporary_server_ready",
    "temporary_server_url",
]


# Prefect's task-run recorder writes every task-run event in a transaction of its own (batch size 1): a
# cached `frame score` of the demo (~440 task runs) cost the server 18 s of CPU beside the command's own
# 19 s, on the same 2 cores. In batches of up to 100, flushed every second, the server spent 6-7 s; a task
# run shows up in the API and UI up to a second later. Both servers frame starts use this; an explicit
# setting in the environment wins.
SERVER_DEFAULTS = {
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_BATCH_SIZE": "100",
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_FLUSH_INTERVAL": "1",
}


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


def _port_taken(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


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
    env = {**SERVER_DEFAULTS, **{k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}}
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


# ---------------------------------------------------------------- a command's temporary server
#
# Without an API URL, Prefect starts its temporary server lazily: when the first flow asks for its client,
# after the command has imported and planned everything. A command that is about to run a flow starts the
# same server (Prefect's own uvicorn command and settings) right away instead, so that its ~7-10 s start
# overlaps the command's imports and the flow's set-up (model load, generation plans).

_TEMPORARY: dict = {}
_LOG = logging.getLogger("prefect.frame")


# The temporary server's own output (its start-up errors, and the tracebacks its services log when they
# are cancelled mid-write at shutdown) goes to this file of the data folder, not to the user's terminal.
SERVER_LOG = "prefect-temporary-server.log"
_SERVER_LOG_MAX_BYTES = 4 * 1024 * 1024  # beyond this the file starts over (the previous one kept as .1)


def _open_server_log(log_file: Path | None):
    """The append handle the server writes to, or None (inherit this process's stderr) when there is no data
    folder or its logs folder cannot be written (a read-only folder fails later, in one line)."""
    if log_file is None:
        return None
    try:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        if log_file.exists() and log_file.stat().st_size > _SERVER_LOG_MAX_BYTES:
            os.replace(log_file, log_file.with_name(log_file.name + ".1"))
        out = open(log_file, "ab")  # noqa: SIM115 (held open for the server's life, closed at stop)
        out.write(f"--- {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} pid {os.getpid()}\n".encode())
        out.flush()
        return out
    except OSError:
        return None


def _last_line(out) -> str:
    """The last non-empty line the server wrote (for an error message), or ''."""
    if out is None:
        return ""
    try:
        with open(out.name, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - 4096))
            lines = [ln.strip() for ln in f.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    lines = lines[max((i for i, ln in enumerate(lines) if ln.startswith("--- ")), default=-1) + 1 :]
    # the exception that stopped it says more than uvicorn's closing "Application startup failed"
    raised = [ln for ln in lines if re.match(r"[A-Za-z_][\w.]*(Error|Exception)\b.*:", ln)]
    return (raised or lines or [""])[-1][:300]


def _uvicorn(port: int, settings_env: dict[str, str], out=None) -> subprocess.Popen:
    import prefect

    env = {**SERVER_DEFAULTS, **os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1"}
    env.update(PREFECT__SERVER_FINAL="1", **settings_env)
    env.pop("PREFECT_API_URL", None)
    args = [sys.executable, "-m", "uvicorn", "--app-dir", str(prefect.__module_path__.parent)]
    args += ["--factory", "prefect.server.api.server:create_app", "--host", "127.0.0.1"]
    args += ["--port", str(port), "--log-level", "error", "--lifespan", "on"]
    return subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out)


def _point_prefect_at(url: str) -> None:
    os.environ["PREFECT_API_URL"] = url
    from flows.settings import refresh_prefect_settings

    refresh_prefect_settings()


def start_temporary_server(data_dir: Path | None = None) -> str | None:
    """Start this command's temporary Prefect server now, without waiting for it, and point PREFECT_API_URL
    at it (`temporary_server_ready` waits; the server stops when the process exits). Returns its URL, or
    None when Prefect has an API already (PREFECT_API_URL, a data folder's background server, a test
    harness) or is not allowed to start a temporary one. The server's output goes to
    `data_dir`/logs/prefect-temporary-server.log (without a data folder: this process's stderr)."""
    from prefect.settings import get_current_settings

    if _TEMPORARY:
        return _TEMPORARY["url"]
    settings = get_current_settings()
    if settings.api.url or not settings.server.ephemeral.enabled:
        return None
    settings_env = {
        k: v
        for k, v in settings.to_environment_variables(exclude_unset=True).items()
        if k != "PREFECT_API_URL"
    }
    port = _free_port()
    out = _open_server_log(Path(data_dir) / "logs" / SERVER_LOG if data_dir is not None else None)
    proc = _uvicorn(port, settings_env, out)
    url = f"http://127.0.0.1:{port}/api"
    timeout = float(settings.server.ephemeral.startup_timeout_seconds)
    _TEMPORARY.update(proc=proc, url=url, port=port, env=settings_env, timeout=timeout, ready=False, out=out)
    atexit.register(_stop_temporary)
    _point_prefect_at(url)
    return url


def temporary_server_url() -> str | None:
    """The API URL of the temporary server this process started, if any."""
    return _TEMPORARY.get("url")


def temporary_server_ready() -> None:
    """Wait until the server `start_temporary_server` started answers (no-op without one); a RuntimeError
    when it exits or does not answer within Prefect's startup timeout. A port taken meanwhile (uvicorn
    exits 3) is retried on another one."""
    if not _TEMPORARY or _TEMPORARY["ready"]:
        return
    # said here, not at the start: a command starts the server before Prefect's logging is set up
    _LOG.info("Starting temporary server on http://127.0.0.1:%d", _TEMPORARY["port"])
    _TEMPORARY["announced"] = True
    deadline = time.monotonic() + _TEMPORARY["timeout"]
    while not _healthy(_TEMPORARY["url"], timeout=1.0):
        code = _TEMPORARY["proc"].poll()
        # uvicorn exits 3 on any start-up failure; only a port taken between choosing and binding it is
        # worth another try (a bad database or setting would fail the same way until the timeout)
        if code == 3 and _port_taken(_TEMPORARY["port"]) and _TEMPORARY.setdefault("retries", 0) < 3:
            _TEMPORARY["retries"] += 1
            port = _free_port()
            _TEMPORARY.update(proc=_uvicorn(port, _TEMPORARY["env"], _TEMPORARY["out"]), port=port)
            _TEMPORARY["url"] = f"http://127.0.0.1:{port}/api"
            _point_prefect_at(_TEMPORARY["url"])
            continue
        if code is not None:
            said = _last_line(_TEMPORARY["out"])
            where = f" (logs/{SERVER_LOG}: {said})" if said else ""
            raise RuntimeError(
                f"Prefect's temporary server exited with code {code} before it answered{where}"
            )
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"Prefect's temporary server did not answer within {_TEMPORARY['timeout']:g} s "
                "(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS)"
            )
        time.sleep(0.1)
    _TEMPORARY["ready"] = True


def _stop_temporary() -> None:
    proc = _TEMPORARY.get("proc")
    if proc is None or proc.poll() is not None:
        _close_server_log()
        return
    if _TEMPORARY.get("announced"):  # a command that stopped on bad input says one line, nothing more
        _LOG.info("Stopping temporary server on http://127.0.0.1:%d", _TEMPORARY["port"])
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    _close_server_log()


def _close_server_log() -> None:
    out = _TEMPORARY.pop("out", None)
    if out is not None:
        out.close()
