"""Issue 35 point 10: the Prefect UI at hand. `frame server start --no-ui` serves the API only, and
`frame ui` then says in one line how to get the UI (as it does when no server runs), exit 1. The default,
a server with its UI whose address `frame ui` prints and whose history names a score run like a build
run, is checked where tests/test_server.py starts its server."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request

from tests.conftest import ROOT, frame_env

FRAME = [sys.executable, "-m", "flows.cli"]
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1, never via a proxy


def _get(url: str, body: dict | None = None) -> tuple[int, str, str]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with DIRECT.open(req, timeout=30) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read().decode("utf-8", "replace")


def test_no_ui_serves_the_api_only_and_frame_ui_says_how_to_get_one(tmp_path):
    data = tmp_path / "data"
    env = frame_env(tmp_path / "ph", temporary_server=True)  # no PREFECT_API_URL: the folder decides

    def frame(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*FRAME, *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)

    def start(*flags: str) -> str:
        res = frame("server", "start", "--data", str(data), *flags)
        assert res.returncode == 0 and "started: http://127.0.0.1:" in res.stdout, res.stdout + res.stderr
        return res.stdout.split("started: ")[1].split()[0]

    none = frame("ui", "--data", str(data))
    assert none.returncode == 1 and none.stdout == ""
    assert none.stderr.strip() == (
        f"frame: error: no Prefect server runs for data folder {data}: "
        f"start one with `frame server start --data {data}`"
    )

    api = start("--no-ui")
    try:
        root = api.removesuffix("/api") + "/"
        code, kind, _ = _get(root)
        assert code == 404 and "html" not in kind  # the API only
        assert _get(f"{api}/health")[0] == 200
        off = frame("ui", "--data", str(data))
        assert off.returncode == 1 and len(off.stderr.strip().splitlines()) == 1
        assert "runs without its UI" in off.stderr and f"frame server start --data {data}" in off.stderr
    finally:
        stopped = frame("server", "stop", "--data", str(data))
    assert stopped.returncode == 0 and f"stopped: {api}" in stopped.stdout
    # with the UI (the default): tests/test_server.py, test_a_data_folders_server_is_used_by_its_commands
