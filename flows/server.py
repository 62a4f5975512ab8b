"""One local Prefect server per data folder, run in the background (`frame server start|stop|status`).

Without it every `frame` command that runs a flow starts Prefect's temporary server (~7 s on 2 cores).
`start_server(data_dir)` launches `prefect server start` on a free port of 127.0.0.1 with its own database
(data/run/prefect-server/) and records {pid, url} in data/run/prefect-server.json; `configure_prefect`
points every command on that folder at it. The record is trusted only when its process is provably this
folder's server (`check_server`); anything else is stale: ignored, removed by `frame server`, never
signalled. `start` and `stop` hold one lock per folder. The rules: docs/security.md, "Background
Prefect server"."""

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
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from tasks.atomic import atomic_write_text
from tasks.locks import hold
from tasks.manifest import pid_alive

__all__ = [
    "SERVER_DEFAULTS",
    "check_server",
    "refresh_prefect_settings",
    "record_path",
    "running_server",
    "server_status",
    "start_server",
    "start_temporary_server",
    "stop_server",
    "temporary_server_ready",
    "temporary_server_url",
    "ui_url",
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


# a server of this machine is asked directly, never through a proxy of the environment (http_proxy)
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _healthy(url: str, timeout: float = 2.0) -> bool:
    try:
        with _DIRECT.open(f"{url}/health", timeout=timeout) as resp:
            return resp.status == 200
    except OSError:
        return False


# ---------------------------------------------------------------- is the record's process the server?

_URL = re.compile(r"http://127\.0\.0\.1:(\d{1,5})/api")


def _server_home(data_dir: Path) -> Path:
    return Path(data_dir).resolve() / "run" / "prefect-server"


def _proc_read(pid: int, name: str) -> bytes | None:
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes()
    except OSError:  # gone, not Linux, or another user's process (environ, fd): not provable
        return None


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22): with the pid, it names
    one process, so a pid reused between the check and a signal is noticed."""
    stat = _proc_read(pid, "stat")
    if not stat:
        return None
    fields = stat.rsplit(b")", 1)[-1].split()  # the command name in parentheses may hold spaces
    return fields[19].decode() if len(fields) > 19 else None


def _is_prefect_server(argv: list[str], port: int) -> bool:
    """`... prefect server start ... --port PORT` (python -m prefect, or the prefect script)."""
    starts = any(
        Path(a).name == "prefect" and argv[i + 1 : i + 3] == ["server", "start"] for i, a in enumerate(argv)
    )
    ports = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--port"]
    ports += [a.split("=", 1)[1] for a in argv if a.startswith("--port=")]
    return starts and ports == [str(port)]


def _listening_inodes(port: int) -> set[str]:
    """Socket inodes listening on 127.0.0.1:PORT (or every IPv4 address) in /proc/net/tcp."""
    try:
        lines = Path("/proc/net/tcp").read_text(encoding="ascii").splitlines()[1:]
    except OSError:
        return set()
    local = {f"0100007F:{port:04X}", f"00000000:{port:04X}"}
    return {f[9] for f in (ln.split() for ln in lines) if len(f) > 9 and f[1] in local and f[3] == "0A"}


def _holds_socket(pid: int, inodes: set[str]) -> bool:
    """Whether `pid` or a process of its group holds one of the socket `inodes` (Prefect serves from the
    process it starts; a worker it might spawn is in the same group)."""
    wanted = {f"socket:[{i}]" for i in inodes}

    def holds(p: int) -> bool:
        try:
            return any(os.readlink(f"/proc/{p}/fd/{fd}") in wanted for fd in os.listdir(f"/proc/{p}/fd"))
        except OSError:
            return False

    if not wanted:
        return False
    if holds(pid):
        return True
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != pid:
            try:
                if os.getpgid(int(entry)) == pid and holds(int(entry)):
                    return True
            except OSError:
                continue
    return False


def _not_the_server(data_dir: Path, pid: int, port: int) -> str | None:
    """Why process `pid` is not provably `data_dir`'s server on `port` (None: it is, health aside)."""
    if pid <= 1:
        return f"pid {pid} is never a server (pid <= 1)"
    if pid == os.getpid():
        return f"pid {pid} is this command"
    try:
        group = os.getpgid(pid)
    except ProcessLookupError:
        return f"pid {pid} is not running"
    except OSError:
        return f"pid {pid} cannot be inspected"
    if group == os.getpgrp():
        return f"pid {pid} is in this command's own process group"
    if group != pid:
        return f"pid {pid} does not lead its process group (the folder's server does)"
    cmdline = _proc_read(pid, "cmdline")
    if not cmdline:
        return f"pid {pid}'s command line cannot be read"
    argv = [a.decode("utf-8", "replace") for a in cmdline.rstrip(b"\0").split(b"\0")]
    if not _is_prefect_server(argv, port):
        return f"pid {pid} is not a Prefect server on port {port} ({' '.join(argv)[:120]})"
    environ = _proc_read(pid, "environ")
    if environ is None:
        return f"pid {pid}'s environment cannot be read"
    env = dict(kv.split("=", 1) for kv in environ.decode("utf-8", "replace").split("\0") if "=" in kv)
    home = env.get("PREFECT_HOME")
    if not home or Path(home).resolve() != _server_home(data_dir):
        return f"pid {pid}'s PREFECT_HOME is not this folder's ({home or 'unset'})"
    if not _holds_socket(pid, _listening_inodes(port)):
        return f"pid {pid} does not listen on 127.0.0.1:{port}"
    return None


def check_server(data_dir: Path, patience_s: float = 2.0) -> tuple[dict | None, str | None]:
    """The data folder's server record, checked: (record, None) when its process is provably the folder's
    server and its URL answers /health (within `patience_s`), (None, None) when there is no record, and
    (None, why) for a stale record (malformed, or not the folder's server). Reads and signals nothing else."""
    path = record_path(data_dir)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"unreadable ({exc.strerror or exc})"
    try:
        rec = json.loads(text)
    except ValueError:
        return None, "not JSON"
    if not isinstance(rec, dict):
        return None, "not a JSON object"
    pid, url = rec.get("pid"), rec.get("url")
    if type(pid) is not int:
        return None, f"pid {pid!r} is not a process id"
    match = _URL.fullmatch(url) if isinstance(url, str) else None
    if match is None or not 0 < int(match[1]) < 65536:
        return None, f"url {str(url)[:80]!r} is not a local server's (http://127.0.0.1:PORT/api)"
    started = _start_time(pid) if pid > 1 else None
    why = _not_the_server(data_dir, pid, int(match[1]))
    if why is not None:
        return None, why
    deadline = time.monotonic() + patience_s
    while not _healthy(url, timeout=min(2.0, max(patience_s, 0.5))):
        if time.monotonic() >= deadline:
            return None, f"{url} does not answer /health"
        time.sleep(0.5)
    if started is None or _start_time(pid) != started:
        return None, f"pid {pid} changed while it was checked"
    return {**rec, "pid": pid, "url": url, "start_time": started}, None


def ui_url(rec: dict) -> str | None:
    """The address of the Prefect UI a server record's server serves (its root), or None when it was
    started without it (`--no-ui`, or by a frame before the UI was served)."""
    return rec["url"].removesuffix("/api") + "/" if rec.get("ui") else None


def running_server(data_dir: Path) -> dict | None:
    """The data folder's background server ({pid, url, started_at}) when the record is provably its
    (`check_server`), else None. A stale record is ignored here (`frame server` commands remove it)."""
    return check_server(data_dir)[0]


@contextmanager
def _server_lock(data_dir: Path, timeout_s: float, required: bool = True) -> Iterator[None]:
    """The data folder's server lock (data/.locks/server.lock). Not `required` (status, stop): a folder that
    does not exist is not created for it, and one that cannot be written is checked without it."""
    with ExitStack() as stack:
        if required or Path(data_dir).is_dir():
            try:
                what = f"the server of data folder {data_dir}"
                stack.enter_context(hold(Path(data_dir) / ".locks" / "server.lock", timeout_s, what))
            except OSError:
                if required:
                    raise
        yield


def _drop_stale(data_dir: Path, patience_s: float = 10.0) -> tuple[dict | None, str | None]:
    """`check_server`, removing a stale record (call it holding the server lock)."""
    found, stale = check_server(data_dir, patience_s)
    if stale is not None:
        try:
            record_path(data_dir).unlink(missing_ok=True)
        except OSError as exc:
            stale += f" (the record could not be removed: {exc.strerror or exc})"
    return found, stale


def server_status(data_dir: Path) -> tuple[dict | None, str | None]:
    """`check_server` for `frame server status`, which also removes a stale record."""
    data_dir = Path(data_dir).resolve()
    with _server_lock(data_dir, 180.0, required=False):
        return _drop_stale(data_dir)


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


def start_server(data_dir: Path, timeout_s: float = 120.0, ui: bool = True) -> dict:
    """Start the background server of `data_dir` (or return the one already running: "already"), serving
    Prefect's UI unless not `ui`. Under the folder's server lock, so that two starts at once leave one
    server; a stale record is removed ("stale" says why)."""
    data_dir = Path(data_dir).resolve()
    with _server_lock(data_dir, timeout_s + 60.0):
        found, stale = _drop_stale(data_dir)
        if found is not None:
            return {**found, "already": True}
        rec = _launch(data_dir, timeout_s, ui)
    return {**rec, "already": False, **({"stale": stale} if stale else {})}


def _launch(data_dir: Path, timeout_s: float, ui: bool = True) -> dict:
    port = _free_port()
    url = f"http://127.0.0.1:{port}/api"
    home = _server_home(data_dir)
    home.mkdir(parents=True, exist_ok=True)
    env = {**SERVER_DEFAULTS, **{k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}}
    # the folder's own home: its database is the folder's run history, which the UI shows
    env.update(PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false")
    env["PREFECT_UI_ENABLED"] = "true" if ui else "false"
    # the UI asks its API here (Prefect's default is port 4200, not the free port chosen above)
    env.setdefault("PREFECT_UI_API_URL", url)
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
            proc.wait()
            raise RuntimeError(f"the Prefect server did not start (see {log / 'prefect-server.log'})")
        time.sleep(0.3)
    rec = {"pid": proc.pid, "url": url, "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    rec["ui"] = ui
    atomic_write_text(record_path(data_dir), json.dumps(rec, sort_keys=True) + "\n")
    return rec


def _signal_group(found: dict, sig: int) -> bool:
    """Signal the server's process group, only while its leader is still the process `check_server`
    proved (same pid, same start time); False when it is gone."""
    pid = found["pid"]
    if pid <= 1 or pid == os.getpgrp() or _start_time(pid) != found["start_time"]:
        return False  # never pid 0/1 (kill(-1) is every process) nor this command's own group
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        return False
    return True


def stop_server(data_dir: Path, timeout_s: float = 20.0) -> dict | None:
    """Stop the data folder's background server; returns its record, None when there was none, or
    {"stale": why, ...} for a record that was not provably the folder's server: removed, nothing signalled."""
    data_dir = Path(data_dir).resolve()
    with _server_lock(data_dir, 180.0, required=False):
        raw = _raw_record(data_dir)
        found, stale = _drop_stale(data_dir)
        if stale is not None:
            return {**raw, "stale": stale}
        record_path(data_dir).unlink(missing_ok=True)
        if found is None or not _signal_group(found, signal.SIGTERM):
            return found
        deadline = time.monotonic() + timeout_s
        while _alive(found["pid"]) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _alive(found["pid"]):
            _signal_group(found, signal.SIGKILL)
    return found


def _raw_record(data_dir: Path) -> dict:
    """The record as written, for a message about a stale one (pid and url when it has them)."""
    try:
        rec = json.loads(record_path(data_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: rec[k] for k in ("pid", "url") if k in rec} if isinstance(rec, dict) else {}


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


def refresh_prefect_settings() -> None:
    """Prefect reads its settings from the environment once, on import: when a command has imported it
    already (to plan its work), refresh them so that environment changes take effect."""
    import sys

    if "prefect.context" in sys.modules:
        sys.modules["prefect.context"].refresh_global_settings_context()


def _point_prefect_at(url: str) -> None:
    os.environ["PREFECT_API_URL"] = url
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
