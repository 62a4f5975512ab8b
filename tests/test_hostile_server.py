"""Issue 32 (points 1, 2): `frame server` against a hostile or stale data/run/prefect-server.json, and two
`frame server start` at once. A record is trusted only when its process is provably the folder's Prefect
server (command line, PREFECT_HOME, the URL's listening socket, /health); anything else is reported stale,
removed, and nothing is signalled. Every command runs as a user would run it: a `frame` subprocess (in a
session of its own, so that a regression that signals "its own process group" could not take pytest down).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import frame_env

FRAME = str(Path(sys.executable).with_name("frame"))
pytestmark = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")


def frame(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = frame_env(tmp_path / "ph", temporary_server=True)  # no session server: these tests start their own
    return subprocess.run(
        [FRAME, *args], capture_output=True, text=True, env=env, timeout=300, start_new_session=True
    )


def write_record(data: Path, pid, url: str = "http://127.0.0.1:9/api") -> Path:
    path = data / "run" / "prefect-server.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({"pid": pid, "url": url, "started_at": "2026-01-01T00:00:00Z"}), encoding="utf-8"
    )
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def alive(proc: subprocess.Popen) -> bool:
    return proc.poll() is None


@pytest.fixture
def started():
    """Processes a test starts; each is killed at teardown if it is still running."""
    procs: list[subprocess.Popen] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=10)


def fake_server(started: list, port: int, home: Path) -> subprocess.Popen:
    """A python process that only sleeps, with a command line that reads like `prefect server start` on
    `port` and PREFECT_HOME=`home`, leading a process group of its own (as the folder's server does)."""
    code = "import time; time.sleep(300)"
    argv = [
        sys.executable,
        "-c",
        code,
        "prefect",
        "server",
        "start",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    env = {**os.environ, "PREFECT_HOME": str(home)}
    proc = subprocess.Popen(argv, env=env, start_new_session=True)
    started.append(proc)
    deadline = time.monotonic() + 10
    while b"prefect" not in Path(f"/proc/{proc.pid}/cmdline").read_bytes() and time.monotonic() < deadline:
        time.sleep(0.05)  # until exec has happened (the command line is the fake's)
    return proc


def folder_servers(data: Path, fakes: list[subprocess.Popen] = ()) -> list[int]:
    """Pids of the Prefect servers running with this data folder's PREFECT_HOME (found in /proc), but for
    the test's own look-alikes (`fakes`)."""
    skip = {p.pid for p in fakes}
    home = str((data / "run" / "prefect-server").resolve())
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in skip:
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            env = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"prefect" in argv and b"server" in argv and f"PREFECT_HOME={home}".encode() in env:
            pids.append(int(entry))
    return pids


def test_a_record_naming_an_unrelated_process_is_stale_and_the_process_lives(tmp_path, started):
    data = tmp_path / "data"
    sleeper = subprocess.Popen(["sleep", "300"], start_new_session=True)  # leads its own group
    started.append(sleeper)
    record = write_record(data, sleeper.pid)
    res = frame(tmp_path, "server", "stop", "--data", str(data))
    assert res.returncode == 0, res.stderr
    assert "stale server record removed" in res.stdout and "not a Prefect server" in res.stdout, res.stdout
    assert "nothing signalled" in res.stdout and "stopped" not in res.stdout
    assert not record.exists()
    time.sleep(0.5)
    assert alive(sleeper)
    # a later status, and every other command, sees no server (the record is gone)
    status = frame(tmp_path, "server", "status", "--data", str(data))
    assert status.returncode == 1 and "no server running" in status.stdout


@pytest.mark.parametrize("pid", [0, 1, -1])
def test_pid_0_and_1_are_never_a_server(tmp_path, pid, monkeypatch):
    data = tmp_path / "data"
    # Safety net first, in this process with signals intercepted: a `frame` that did signal the record's
    # "process group" 1 would send kill(-1): SIGTERM to every process the user (root: the machine) owns.
    from flows import server

    sent: list[tuple] = []
    monkeypatch.setattr(os, "killpg", lambda *a: sent.append(("killpg", *a)))
    monkeypatch.setattr(os, "kill", lambda *a: sent.append(("kill", *a)))
    record = write_record(data, pid)
    gone = server.stop_server(data)
    monkeypatch.undo()
    assert sent == [] and gone is not None and gone["stale"].startswith(f"pid {pid} is never a server"), sent
    assert not record.exists()

    write_record(data, pid)
    res = frame(tmp_path, "server", "stop", "--data", str(data))
    # frame's own process group (pid 0) was not signalled: the command ended normally
    assert res.returncode == 0, (res.returncode, res.stderr)
    assert f"stale server record removed: pid {pid} is never a server" in res.stdout, res.stdout
    assert not record.exists()
    write_record(data, pid)
    status = frame(tmp_path, "server", "status", "--data", str(data))
    assert status.returncode == 1 and "stale server record removed" in status.stdout
    assert not record.exists()


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{not json", "not JSON"),
        ("[1234]", "not a JSON object"),
        ('{"pid": "1234", "url": "http://127.0.0.1:9/api"}', "pid '1234' is not a process id"),
    ],
)
def test_a_malformed_record_is_stale(tmp_path, text, why):
    data = tmp_path / "data"
    record = write_record(data, 0)
    record.write_text(text, encoding="utf-8")
    res = frame(tmp_path, "server", "status", "--data", str(data))
    assert res.returncode == 1 and f"stale server record removed: {why}; nothing signalled" in res.stdout
    assert not record.exists()


def test_a_look_alike_prefect_server_is_not_signalled(tmp_path, started):
    """A live process whose command line reads `prefect server start --port P`: refused when its PREFECT_HOME
    is another folder's, and when it is this folder's but nothing of it answers on the record's URL."""
    data = tmp_path / "data"
    port = free_port()
    other = fake_server(started, port, tmp_path / "elsewhere" / "run" / "prefect-server")
    record = write_record(data, other.pid, f"http://127.0.0.1:{port}/api")
    res = frame(tmp_path, "server", "stop", "--data", str(data))
    assert res.returncode == 0, res.stderr
    assert "stale server record removed" in res.stdout and "PREFECT_HOME is not this folder's" in res.stdout
    assert not record.exists()

    same_home = fake_server(started, port, data / "run" / "prefect-server")
    write_record(data, same_home.pid, f"http://127.0.0.1:{port}/api")
    res = frame(tmp_path, "server", "stop", "--data", str(data))
    assert res.returncode == 0, res.stderr
    assert (
        "stale server record removed" in res.stdout and f"does not listen on 127.0.0.1:{port}" in res.stdout
    )
    assert not record.exists()
    # a record pointing elsewhere than a local server's URL is refused before anything else
    write_record(data, same_home.pid, "http://203.0.113.9:4200/api")
    res = frame(tmp_path, "server", "stop", "--data", str(data))
    assert "is not a local server's" in res.stdout and not record.exists()
    time.sleep(0.5)
    assert alive(other) and alive(same_home)


def test_two_starts_at_once_leave_one_server_and_only_it_is_trusted(tmp_path, started):
    data = tmp_path / "data"
    results: list[subprocess.CompletedProcess] = []
    try:
        threads = [
            threading.Thread(
                target=lambda: results.append(frame(tmp_path, "server", "start", "--data", str(data)))
            )
            for _ in range(2)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [r.returncode for r in results] == [0, 0], [r.stderr for r in results]
        outs = sorted(r.stdout.strip() for r in results)  # "already running: ..." < "started: ..."
        assert outs[1].startswith("started: http://127.0.0.1:"), outs
        url = outs[1].split()[1]
        assert outs[0].startswith(f"already running: {url} "), outs  # the second reports the first's URL
        servers = folder_servers(data, started)
        assert len(servers) == 1, servers
        record = data / "run" / "prefect-server.json"
        good = record.read_text(encoding="utf-8")
        assert json.loads(good)["pid"] == servers[0]

        # a look-alike with this folder's PREFECT_HOME and the real server's port, whose URL answers /health
        # (the real server does): it holds no listening socket of that port, so it is refused
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        fake = fake_server(started, port, data / "run" / "prefect-server")
        write_record(data, fake.pid, url)
        res = frame(tmp_path, "server", "stop", "--data", str(data))
        assert res.returncode == 0 and f"does not listen on 127.0.0.1:{port}" in res.stdout, res.stdout
        time.sleep(0.5)
        assert alive(fake) and folder_servers(data, started) == servers

        record.write_text(good, encoding="utf-8")  # the real record again: trusted, and stopped
        status = frame(tmp_path, "server", "status", "--data", str(data))
        assert status.returncode == 0 and f"running: {url}" in status.stdout, status.stdout
        stop = frame(tmp_path, "server", "stop", "--data", str(data))
        assert stop.returncode == 0 and f"stopped: {url}" in stop.stdout, stop.stdout
        assert not record.exists()
        deadline = time.monotonic() + 20
        while folder_servers(data, started) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert folder_servers(data, started) == []
        assert alive(fake)
    finally:
        for pid in folder_servers(data, started):  # only servers of this test's own data folder
            os.killpg(pid, signal.SIGKILL)
