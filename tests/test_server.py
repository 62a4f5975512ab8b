"""`frame server start|stop|status`: one background Prefect server per data folder, which later commands on
that folder use instead of starting a temporary server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from flows.server import SERVER_DEFAULTS
from tests.conftest import frame_env
from tests.test_score_openai_flow import write_release

FRAME = str(Path(sys.executable).with_name("frame"))


def test_a_data_folders_server_is_used_by_its_commands(tmp_path):
    rel = write_release(tmp_path)  # tmp/data/releases/tiny/1.0.0
    data = tmp_path / "data"
    env = frame_env(tmp_path / "ph", temporary_server=True)  # no PREFECT_API_URL: the folder decides

    def frame(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([FRAME, *args], capture_output=True, text=True, env=env, timeout=300)

    assert frame("server", "status", "--data", str(data)).returncode == 1
    started = frame("server", "start", "--data", str(data))
    try:
        assert started.returncode == 0 and "started: http://127.0.0.1:" in started.stdout, started.stderr
        url = started.stdout.split("started: ")[1].split()[0]
        again = frame("server", "start", "--data", str(data))
        assert f"already running: {url}" in again.stdout
        # the server records task-run events in batches (flows/server.py SERVER_DEFAULTS)
        pid = json.loads((data / "run" / "prefect-server.json").read_text(encoding="utf-8"))["pid"]
        server_env = dict(
            kv.split("=", 1) for kv in Path(f"/proc/{pid}/environ").read_text().split("\0") if "=" in kv
        )
        assert {k: server_env.get(k) for k in SERVER_DEFAULTS} == SERVER_DEFAULTS
        assert url in frame("server", "status", "--data", str(data)).stdout
        score = ["score", "--release", str(rel), "--systems", "copy-sample"]
        score += ["--metrics", "text_edit_distance"]
        used = frame(*score)
        assert used.returncode == 0, used.stderr[-2000:]
        assert "temporary server" not in used.stdout + used.stderr  # it reported to the folder's server
    finally:
        stopped = frame("server", "stop", "--data", str(data))
    assert stopped.returncode == 0 and f"stopped: {url}" in stopped.stdout
    assert frame("server", "status", "--data", str(data)).returncode == 1
    # (without a running server a command starts a temporary one: tests/test_dask_runner.py counts it)
