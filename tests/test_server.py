"""`frame server start|stop|status`: one background Prefect server per data folder, which later commands on
that folder use instead of starting a temporary server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from flows.server import SERVER_DEFAULTS
from tests.conftest import frame_env
from tests.test_eval_ui import _get
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
        # it serves Prefect's UI (issue 35 point 10; --no-ui: tests/test_eval_ui.py), which `frame ui` names
        root = url.removesuffix("/api") + "/"
        assert f"UI: {root}" in started.stdout
        shown = frame("ui", "--data", str(data))
        assert shown.returncode == 0 and shown.stdout.strip() == root, shown.stderr
        code, kind, page = _get(root)
        assert code == 200 and kind.startswith("text/html") and "<html" in page.lower()
        assert json.loads(_get(f"{root}ui-settings")[2])["api_url"] == url  # not Prefect's default port
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
        # the folder's run history holds that run, named like a build run (flows.steps.score_run_name)
        code, _, body = _get(f"{url}/flow_runs/filter", {})
        assert code == 200 and [r["name"] for r in json.loads(body)] == ["score tiny 1.0.0: copy-sample"]
    finally:
        stopped = frame("server", "stop", "--data", str(data))
    assert stopped.returncode == 0 and f"stopped: {url}" in stopped.stdout
    assert frame("server", "status", "--data", str(data)).returncode == 1
    # (without a running server a command starts a temporary one: tests/test_dask_runner.py counts it)


def test_a_temporary_servers_output_goes_to_the_data_folders_log_not_the_terminal(tmp_path):
    """The temporary server a command starts writes to data/logs/prefect-temporary-server.log: its services
    log tracebacks when they are cancelled mid-write at shutdown, which are no error of the command's. A
    server that dies at start is reported in one line that quotes the log's last line."""
    rel = write_release(tmp_path)
    data = tmp_path / "data"
    log = data / "logs" / "prefect-temporary-server.log"
    score = [FRAME, "score", "--release", str(rel), "--systems", "copy-sample"]
    score += ["--metrics", "text_edit_distance"]
    env = frame_env(tmp_path / "ph", temporary_server=True)
    ok = subprocess.run(score, capture_output=True, text=True, env=env, timeout=300)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert "Starting temporary server" in ok.stdout + ok.stderr  # it did start one
    assert "Traceback" not in ok.stderr
    first = log.read_text(encoding="utf-8")
    assert first.startswith("--- ") and first.count("\n--- ") == 0, first[:500]

    # A database the server cannot open: it exits before it answers.
    bad = {
        **env,
        "PREFECT_SERVER_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{tmp_path}/no/such/dir/p.db",
    }
    res = subprocess.run(score, capture_output=True, text=True, env=bad, timeout=300)
    assert res.returncode != 0
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("frame: error:")]
    assert len(errors) == 1, res.stderr[-3000:]
    assert "temporary server exited with code" in errors[0]
    assert "logs/prefect-temporary-server.log: " in errors[0]
    after = log.read_text(encoding="utf-8")
    assert after.startswith(first) and after.count("\n--- ") == 1  # appended, one header per start
    said = errors[0].split("logs/prefect-temporary-server.log: ", 1)[1].rstrip(")")
    assert said in after and "unable to open database file" in said  # the cause, not uvicorn's last words
