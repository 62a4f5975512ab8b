"""A local OpenAI-compatible HTTP server for tests, scripted per test.

`LLMTestServer` listens on 127.0.0.1 (random port) with the standard library's
ThreadingHTTPServer and answers POST /v1/chat/completions and POST /v1/embeddings. Each test
queues behaviours with `script(...)` (chat) or `script_embeddings(...)`; a behaviour is a `Reply`
or a callable taking the recorded request and returning a `Reply`. When the queue is empty the
`default_chat` / `default_embeddings` behaviour answers (embeddings default to deterministic
vectors; chat has no default and answers 500 so an unexpected call is loud).

Every request is recorded (path, lower-cased headers, parsed JSON body) and the server tracks the
highest number of requests in flight at once.

Use from a test module (no conftest needed): bind the fixture to a module-level name, which
pytest collects and ruff does not flag when test functions take it as an argument:

    import tests.llm_server as fake_llm
    llm_server = fake_llm.llm_server
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

CHAT_PATH = "/v1/chat/completions"
EMBED_PATH = "/v1/embeddings"


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes
    at: float = field(default_factory=time.monotonic)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list((self.body or {}).get("messages", []))


@dataclass
class Reply:
    status: int = 200
    json: Any = None
    text: str | None = None  # raw body (overrides json)
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


Behaviour = Reply | Callable[[Recorded], Reply]


# ------------------------------------------------------------------------------ reply builders


def chat_reply(
    content: str | None,
    finish_reason: str = "stop",
    *,
    model: str = "test-model-2024",
    prompt_tokens: int = 11,
    completion_tokens: int = 7,
) -> Reply:
    return Reply(
        json={
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
    )


def json_reply(obj: Any, **kw: Any) -> Reply:
    return chat_reply(json.dumps(obj), **kw)


def malformed(text: str = '{"title": "half an object", ') -> Reply:
    return chat_reply(text)


def truncated(text: str = '{"title": "a long report that never') -> Reply:
    return chat_reply(text, finish_reason="length")


def empty_choices() -> Reply:
    reply = chat_reply("unused")
    reply.json["choices"] = []
    return reply


def no_message() -> Reply:
    """A choice without any `message` object."""
    reply = chat_reply("unused")
    del reply.json["choices"][0]["message"]
    return reply


def odd_content(value: Any) -> Reply:
    """A choice whose `message.content` is `value` as given (None, a list of parts, a number, ...)."""
    reply = chat_reply("unused")
    reply.json["choices"][0]["message"]["content"] = value
    return reply


def odd_choices(value: Any) -> Reply:
    """A completion whose `choices` is `value` as given (None, a list of strings, ...)."""
    reply = chat_reply("unused")
    reply.json["choices"] = value
    return reply


def not_json_body(text: str = "<html><body>502 Bad Gateway</body></html>", status: int = 200) -> Reply:
    """A body that is not JSON at all (what a misconfigured proxy sends), with a JSON content type."""
    return Reply(status=status, text=text)


def error(status: int, message: str = "scripted failure", headers: dict[str, str] | None = None) -> Reply:
    return Reply(
        status=status,
        json={"error": {"message": message, "type": "test_error", "code": status}},
        headers=headers or {},
    )


def rate_limited(retry_after: str | None = "0") -> Reply:
    return error(429, "rate limited", {"Retry-After": retry_after} if retry_after is not None else {})


def server_error(status: int = 500) -> Reply:
    return error(status, "internal error")


def storm(count: int, then: Reply | None = None, retry_after: str | None = "0") -> list[Reply]:
    """`count` 429 replies, then `then` (if given): script(*storm(5, json_reply(x)))."""
    replies = [rate_limited(retry_after) for _ in range(count)]
    return replies + ([then] if then is not None else [])


def slow(reply: Reply, delay: float) -> Reply:
    return Reply(status=reply.status, json=reply.json, text=reply.text, headers=reply.headers, delay=delay)


# ----------------------------------------------------------- behaving as real endpoints do (issue 42)

# OpenAI's own 400 texts when a reasoning model (o-series, GPT-5) is sent chat parameters it does not take
NO_MAX_TOKENS = (
    "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' "
    "instead."
)
NO_TEMPERATURE = (
    "Unsupported value: 'temperature' does not support 0.0 with this model. Only the default (1) value "
    "is supported."
)


def reasoning_model(inner: Behaviour, refused: dict[str, int] | None = None) -> Callable[[Recorded], Reply]:
    """A reasoning model's endpoint: a 400 with OpenAI's text for `max_tokens` and for `temperature`
    (counted in `refused`), else `inner`'s answer."""
    lock = threading.Lock()

    def answer(req: Recorded) -> Reply:
        for name, text in (("max_tokens", NO_MAX_TOKENS), ("temperature", NO_TEMPERATURE)):
            if name in (req.body or {}):
                if refused is not None:
                    with lock:
                        refused[name] = refused.get(name, 0) + 1
                return error(400, text)
        return inner(req) if callable(inner) else inner

    return answer


def thinking(reply: Reply, draft: str) -> Reply:
    """The reply of a reasoning model served without a reasoning parser (vLLM, Ollama: DeepSeek-R1,
    Qwen3): its thoughts, holding a fenced JSON `draft`, in a <think> block before the answer, and the
    answer's escaped newlines written raw, as models write without JSON mode."""
    message = reply.json["choices"][0]["message"]
    answer = message["content"].replace("\\n", "\n")
    message["content"] = f"<think>A first draft:\n```json\n{draft}\n```\nNow the answer.</think>\n{answer}"
    return reply


def with_reasoning_content(reply: Reply, reasoning: str) -> Reply:
    """The reply of a reasoning model served with a reasoning parser (vLLM, DeepSeek's API): its thoughts
    in message.reasoning_content, beside the answer."""
    reply.json["choices"][0]["message"]["reasoning_content"] = reasoning
    return reply


def reply_budget(req: Recorded) -> int | None:
    """The output budget a request asked for (max_tokens or max_completion_tokens), None when it set none."""
    body = req.body or {}
    value = body.get("max_completion_tokens", body.get("max_tokens"))
    return int(value) if value is not None else None


def at_budget(inner: Behaviour) -> Callable[[Recorded], Reply]:
    """An endpoint that stops writing at the request's output budget, as every real one does: a reply of
    `inner` longer than max_tokens (or max_completion_tokens) is cut to that many tokens and ends with
    finish_reason "length". Tokens are counted as words and punctuation marks (o200k_base never counts
    fewer)."""
    import re

    def answer(req: Recorded) -> Reply:
        reply = inner(req) if callable(inner) else inner
        budget = reply_budget(req)
        message = reply.json["choices"][0].get("message") if isinstance(reply.json, dict) else None
        content = (message or {}).get("content")
        if budget is None or not isinstance(content, str):
            return reply
        spans = [m.span() for m in re.finditer(r"\w+|[^\w\s]", content)]
        if len(spans) <= budget:
            return reply
        return chat_reply(content[: spans[budget - 1][1]], finish_reason="length", completion_tokens=budget)

    return answer


def fake_vector(text: str, dims: int = 8) -> list[float]:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return [round(b / 255.0, 6) for b in digest[:dims]]


def embeddings_reply(req: Recorded) -> Reply:
    inputs = req.body.get("input", [])
    if isinstance(inputs, str):
        inputs = [inputs]
    return Reply(
        json={
            "object": "list",
            "model": req.body.get("model", "embed-model"),
            "data": [
                {"object": "embedding", "index": i, "embedding": fake_vector(t)} for i, t in enumerate(inputs)
            ],
            "usage": {"prompt_tokens": 3 * len(inputs), "total_tokens": 3 * len(inputs)},
        }
    )


# ---------------------------------------------------------------------------------------- server


class LLMTestServer:
    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.chat_queue: deque[Behaviour] = deque()
        self.embed_queue: deque[Behaviour] = deque()
        self.default_chat: Behaviour | None = None
        self.default_embeddings: Behaviour | None = embeddings_reply
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting

    def script(self, *behaviours: Behaviour) -> LLMTestServer:
        with self._lock:
            self.chat_queue.extend(behaviours)
        return self

    def script_embeddings(self, *behaviours: Behaviour) -> LLMTestServer:
        with self._lock:
            self.embed_queue.extend(behaviours)
        return self

    @property
    def chat_requests(self) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.path == CHAT_PATH]

    @property
    def embedding_requests(self) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.path == EMBED_PATH]

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    # -- lifecycle

    def start(self) -> LLMTestServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server naming)
                server._handle(self)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="llm-test-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> LLMTestServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- request handling

    def _next(self, path: str) -> Behaviour | None:
        with self._lock:
            if path == CHAT_PATH:
                return self.chat_queue.popleft() if self.chat_queue else self.default_chat
            if path == EMBED_PATH:
                return self.embed_queue.popleft() if self.embed_queue else self.default_embeddings
            return None

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        path = h.path.split("?", 1)[0]
        rec = Recorded(path=path, headers={k.lower(): v for k, v in h.headers.items()}, body=body, raw=raw)
        with self._lock:
            self.requests.append(rec)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        counted = True
        try:
            behaviour = self._next(path)
            if behaviour is None:
                reply = error(
                    404 if path not in (CHAT_PATH, EMBED_PATH) else 500, f"nothing scripted for {path}"
                )
            elif callable(behaviour):
                reply = behaviour(rec)
            else:
                reply = behaviour
            if reply.delay:
                time.sleep(reply.delay)
            payload = reply.text.encode() if reply.text is not None else json.dumps(reply.json).encode()
            # the request is done before its reply is written: a client that reads the reply and sends
            # its next request at once must not find this one still counted
            with self._lock:
                self.in_flight -= 1
                counted = False
            try:
                h.send_response(reply.status)
                h.send_header("Content-Type", "application/json")
                h.send_header("Content-Length", str(len(payload)))
                for k, v in reply.headers.items():
                    h.send_header(k, v)
                h.end_headers()
                h.wfile.write(payload)
                h.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout test)
        finally:
            if counted:  # the behaviour raised: no reply was written
                with self._lock:
                    self.in_flight -= 1


@pytest.fixture
def llm_server():
    """A started LLMTestServer, stopped after the test."""
    with LLMTestServer() as server:
        yield server


def fast_settings(server: LLMTestServer, api_key_env: str, **overrides: Any):
    """LLMSettings pointing at `server`, with short timeouts and backoff (any field can be overridden)."""
    from schemas.config import LLMSettings

    values: dict[str, Any] = dict(
        backend="openai",
        base_url=server.base_url,
        model="test-model",
        api_key_env=api_key_env,
        timeout_s=5.0,
        transient_retries=2,
        invalid_retries=2,
        backoff_initial_s=0.01,
        backoff_max_s=0.05,
    )
    values.update(overrides)
    return LLMSettings(**values)
