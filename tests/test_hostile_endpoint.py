"""Hostile OpenAI-compatible endpoints, met through the CLI as a user meets them (issue 32, points 6, 7,
11, 13): a real `frame generate` subprocess against real local HTTP servers.

- an endpoint that echoes the API key back (in its reply, an error body, a header): the key is in no file
  frame writes and in nothing it prints;
- an endpoint that drips one byte a second: `timeout_s` bounds the whole request;
- two endpoints serving the same model name: neither answers for the other (the endpoint is in the key);
- a one-letter key: error text is not mangled by redaction (whole values only).
"""

from __future__ import annotations

import http.server
import json
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.conftest import CORPUS, frame_env
from tests.llm_server import LLMTestServer, Recorded, Reply, chat_reply, error

pytestmark = pytest.mark.skipif(not (CORPUS / "edgar").is_dir(), reason="shared corpus not found")

FRAME = str(Path(sys.executable).with_name("frame"))
KEY_ENV = "FRAME_HOSTILE_KEY"
SECRET = "sk-hostile-8d1f0c77e2"


def small_release(demo_release: Path, tmp: Path, n: int = 1) -> Path:
    """A copy of the demo release holding its first `n` instances (generations land beside it)."""
    release = tmp / "data" / "releases" / "demo" / "0.1.0"
    shutil.copytree(demo_release, release)
    table = pq.read_table(release / "instances.parquet")
    keep = sorted(table.column("instance_id").to_pylist())[:n]
    pq.write_table(
        table.filter(pc.is_in(table["instance_id"], pa.array(keep))), release / "instances.parquet"
    )
    return release


def eval_config(tmp: Path, systems: dict[str, str], **extra: object) -> Path:
    lines = []
    for name, base_url in systems.items():
        lines += [f"[systems.{name}]", 'kind = "openai"', f'base_url = "{base_url}"', 'model = "same-model"']
        lines += [f'api_key_env = "{KEY_ENV}"', "transient_retries = 0", "invalid_retries = 0"]
        lines += [f"{k} = {json.dumps(v)}" for k, v in extra.items()]
    path = tmp / "eval.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def generate(
    release: Path, system: str, config: Path, tmp: Path, key: str = SECRET, timeout: float = 300, *extra: str
):
    env = {**frame_env(tmp / "ph"), KEY_ENV: key}
    args = [FRAME, "generate", "--release", str(release), "--system", system, "--config", str(config), *extra]
    t0 = time.monotonic()
    res = subprocess.run(args, capture_output=True, text=True, env=env, cwd=tmp, timeout=timeout)
    return res, time.monotonic() - t0


def files_holding(folder: Path, needle: str) -> list[str]:
    hits = []
    for p in folder.rglob("*"):
        if p.is_file() and not p.is_symlink():
            try:
                if needle.encode() in p.read_bytes():
                    hits.append(p.relative_to(folder).as_posix())
            except OSError:
                pass
    return hits


def report_reply(text: str, **kw) -> Reply:
    return chat_reply(json.dumps({"report_markdown": f"# Report\n\n{text}\n"}), **kw)


def test_an_endpoint_echoing_the_key_gets_it_into_nothing_frame_writes_or_prints(demo_release, tmp_path):
    release = small_release(demo_release, tmp_path, n=2)
    calls = {"n": 0}

    def echo(req: Recorded) -> Reply:
        calls["n"] += 1
        heard = req.headers.get("authorization", "").removeprefix("Bearer ")
        if calls["n"] == 1:  # an error body holding the key (a 400 naming the request it refused)
            return error(400, f"bad request from key {heard}")
        reply = report_reply(f"Revenue grew. Your key is {heard}, and {heard}.")
        reply.headers["X-Echo-Key"] = heard
        return reply

    with LLMTestServer() as server:
        server.default_chat = echo
        cfg = eval_config(tmp_path, {"echo": server.base_url})
        res, _ = generate(release, "echo", cfg, tmp_path)
        assert all(SECRET in r.headers.get("authorization", "") for r in server.chat_requests)  # it was sent
    assert SECRET not in res.stdout + res.stderr
    assert files_holding(tmp_path, SECRET) == []
    out = tmp_path / "data" / "generations" / "demo" / "0.1.0" / "echo" / "generations.parquet"
    texts = pq.read_table(out).column("markdown").to_pylist()
    assert any("Your key is [redacted], and [redacted]." in t for t in texts if t)


def _drip_server(stop: threading.Event) -> tuple[socket.socket, int]:
    """A server that answers every request one byte a second, forever (until `stop`)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)

    def serve(conn: socket.socket) -> None:
        body = (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
            + b" " * 99999
        )
        try:
            conn.recv(65536)
            for byte in body:
                if stop.is_set():
                    break
                conn.sendall(bytes([byte]))
                time.sleep(1.0)
        except OSError:
            pass
        finally:
            conn.close()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return srv, srv.getsockname()[1]


def test_timeout_s_bounds_the_whole_request_against_a_dripping_endpoint(demo_release, tmp_path):
    release = small_release(demo_release, tmp_path)
    stop = threading.Event()
    srv, port = _drip_server(stop)
    try:
        cfg = eval_config(tmp_path, {"drip": f"http://127.0.0.1:{port}/v1"}, timeout_s=3)
        checked, _ = generate(release, "drip", cfg, tmp_path, SECRET, 240)
        res, took = generate(release, "drip", cfg, tmp_path, SECRET, 240, "--no-preflight")
    finally:
        stop.set()
        srv.close()
    # the preflight request is bounded the same way: one line, before any step
    assert checked.returncode == 2 and "does not answer (ReadTimeout)" in checked.stderr, checked.stderr[
        -2000:
    ]
    assert res.returncode != 0
    assert "timed out after 3 s" in res.stderr, res.stderr[-2000:]
    # one request of at most 3 s (no transient retry configured), plus the command's own start-up
    assert took < 90, took


def test_two_endpoints_serving_the_same_model_never_answer_for_each_other(demo_release, tmp_path):
    release = small_release(demo_release, tmp_path)
    with LLMTestServer() as a, LLMTestServer() as b:
        a.default_chat = report_reply("Written by the hosted model.")
        b.default_chat = report_reply("Written by the local quantised model.")
        cfg = eval_config(tmp_path, {"hosted": a.base_url, "local": b.base_url})
        for system in ("hosted", "local"):
            res, _ = generate(release, system, cfg, tmp_path)
            assert res.returncode == 0, res.stderr[-2000:]
        assert len(a.chat_requests) == 1 and len(b.chat_requests) == 1  # the second was not a cache hit
    gen = tmp_path / "data" / "generations" / "demo" / "0.1.0"
    hosted = pq.read_table(gen / "hosted" / "generations.parquet").column("markdown").to_pylist()
    local = pq.read_table(gen / "local" / "generations.parquet").column("markdown").to_pylist()
    assert "hosted model" in hosted[0] and "local quantised model" in local[0]


def test_a_one_letter_key_does_not_mangle_error_text(demo_release, tmp_path):
    release = small_release(demo_release, tmp_path)
    with LLMTestServer() as server:
        server.default_chat = error(400, "Expecting value: line 1 column 1 (char 0) for x")
        cfg = eval_config(tmp_path, {"tiny": server.base_url})
        res, _ = generate(release, "tiny", cfg, tmp_path, key="x")
    assert res.returncode != 0
    assert "Expecting value: line 1 column 1" in res.stderr, res.stderr[-2000:]
    assert "for [redacted]" in res.stderr  # the key as a whole word is still removed


def test_a_missing_key_is_one_line_before_any_step(demo_release, tmp_path):
    release = small_release(demo_release, tmp_path)
    with LLMTestServer() as server:
        server.default_chat = report_reply("never asked")
        cfg = eval_config(tmp_path, {"nokey": server.base_url})
        env = {k: v for k, v in frame_env(tmp_path / "ph").items() if k != KEY_ENV}
        args = [FRAME, "generate", "--release", str(release), "--system", "nokey", "--config", str(cfg)]
        res = subprocess.run(args, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
        assert server.chat_requests == []
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        f"frame: error: systems.nokey.api_key_env: environment variable {KEY_ENV} is not set"
    ]
    assert not (tmp_path / "data" / "generations").exists()


class RefusingModels(http.server.BaseHTTPRequestHandler):
    """An endpoint that refuses the key on its model list (GET /v1/models -> 401)."""

    def do_GET(self) -> None:  # noqa: N802 (http.server naming)
        body = b'{"error": {"message": "invalid api key"}}'
        self.send_response(401)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_an_unreachable_or_refusing_endpoint_is_one_line_before_any_step(demo_release, tmp_path):
    release = small_release(demo_release, tmp_path)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    cfg = eval_config(tmp_path, {"gone": f"http://127.0.0.1:{port}/v1"})
    res, took = generate(release, "gone", cfg, tmp_path)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr[-2000:]
    assert "systems.gone.base_url" in res.stderr and "does not answer" in res.stderr

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RefusingModels)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        cfg = eval_config(tmp_path, {"refused": f"http://127.0.0.1:{srv.server_address[1]}/v1"})
        res, _ = generate(release, "refused", cfg, tmp_path)
    finally:
        srv.shutdown()
        srv.server_close()
    assert res.returncode == 2 and "refused the key in FRAME_HOSTILE_KEY (HTTP 401)" in res.stderr
    assert SECRET not in res.stderr
