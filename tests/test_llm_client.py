"""LLMClient over real HTTP against the local scripted server (tests/llm_server.py)."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

import pytest
from pydantic import BaseModel

import tests.llm_server as fake_llm
from schemas.config import LLMSettings
from tasks.errors import FrameInputError
from tasks.llm.backend import StepContext
from tasks.llm.cache import CacheEntry, ResponseCache, request_hash
from tasks.llm.client import (
    LLMClient,
    LLMOutputError,
    LLMRequestError,
    LLMTransientError,
    LLMTruncatedError,
)
from tasks.llm.replies import strip_fences
from tests.llm_server import (
    LLMTestServer,
    Recorded,
    Reply,
    at_budget,
    chat_reply,
    empty_choices,
    error,
    fast_settings,
    json_reply,
    malformed,
    rate_limited,
    reasoning_model,
    server_error,
    slow,
    truncated,
    with_reasoning_content,
)

llm_server = fake_llm.llm_server  # the pytest fixture (a started local server), used by name below

SECRET = "sk-test-SECRET-123"
KEY_ENV = "FRAME_TEST_LLM_KEY"
CTX = StepContext(
    domain="acme-10q", snapshot="2024-03-31", category="financial_quarterly", source_kind="edgar"
)
MESSAGES = [
    {"role": "system", "content": "Answer with a JSON object."},
    {"role": "user", "content": "Give a title and a score."},
]
GOOD = {"title": "Quarterly report", "score": 3}


class Answer(BaseModel):
    title: str
    score: int


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)


@pytest.fixture(autouse=True)
def fresh_endpoints():
    """What endpoints refused is remembered per process (tasks.llm.client._CAPS): a test's server port may
    be another earlier test's, so each test starts from nothing learnt."""
    import tasks.llm.client as client_module

    client_module._CAPS.clear()
    yield
    client_module._CAPS.clear()


def make_settings(server: LLMTestServer, **overrides) -> LLMSettings:
    return fast_settings(server, KEY_ENV, **{"transient_retries": 3, "concurrency": 4, **overrides})


def make_client(server: LLMTestServer, tmp_path: Path, **overrides) -> LLMClient:
    return LLMClient(make_settings(server, **overrides), tmp_path / "cache")


def cache_files(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "cache").rglob("*.json"))


# ---------------------------------------------------------------------------------------- basics


def test_valid_json(llm_server, tmp_path):
    llm_server.script(json_reply(GOOD, prompt_tokens=21, completion_tokens=9))
    client = make_client(llm_server, tmp_path)
    res = client.complete_json("answer", MESSAGES, Answer, CTX)
    assert res.value == Answer(**GOOD)
    assert (res.attempts, res.cached, res.prompt_tokens, res.completion_tokens) == (1, False, 21, 9)
    assert res.model == "test-model-2024"
    assert len(res.request_hash) == 64
    [req] = llm_server.chat_requests
    assert req.headers["authorization"] == f"Bearer {SECRET}"
    assert req.body["model"] == "test-model"
    assert req.body["response_format"] == {"type": "json_object"}
    assert req.body["max_tokens"] == 4096 and req.body["temperature"] == 0.0
    assert req.messages == MESSAGES
    assert client.stats.as_dict() == {
        "calls_made": 1,
        "cache_hits": 0,
        "prompt_tokens": 21,
        "completion_tokens": 9,
    }
    assert len(cache_files(tmp_path)) == 1


def test_fenced_json_is_accepted(llm_server, tmp_path):
    llm_server.script(chat_reply("Here you go:\n```json\n" + json.dumps(GOOD) + "\n```\n"))
    res = make_client(llm_server, tmp_path).complete_json("answer", MESSAGES, Answer, CTX)
    assert res.value.title == "Quarterly report"


# ------------------------------------------------------------------- replies as real endpoints send them

DRAFT = {"title": "draft title", "score": 0}


def reasoning_reply(content: str | None, reasoning: str) -> Reply:
    return with_reasoning_content(chat_reply(content), reasoning)


@pytest.mark.parametrize(
    "content",
    [
        # a <think> block holding a fenced JSON draft, then the answer
        "<think>First a draft:\n```json\n"
        + json.dumps(DRAFT)
        + "\n```\nNow the real one.</think>\n"
        + json.dumps(GOOD),
        # a <think> block holding a brace, and the answer in a fence
        "<think>The object needs {title, score}.</think>\n```json\n" + json.dumps(GOOD) + "\n```",
        # the server dropped the opening tag: everything up to the closing one is reasoning
        "I should answer with " + json.dumps(DRAFT) + "</think>" + json.dumps(GOOD),
        # raw newlines and a tab inside a string, as models write without JSON mode
        '{"title": "Quarterly\n\treport", "score": 3}',
        # text after the closing brace, braces included
        json.dumps(GOOD) + "\n\nNote: the score uses the {1..5} scale.",
    ],
    ids=["think-with-json-draft", "think-with-brace", "closing-tag-only", "raw-newline", "trailing-text"],
)
def test_real_endpoint_replies_parse_to_the_answer(llm_server, tmp_path, content):
    llm_server.script(chat_reply(content))
    client = make_client(llm_server, tmp_path)
    res = client.complete_json("answer", MESSAGES, Answer, CTX)
    assert res.attempts == 1 and res.value.score == 3 and res.value.title.startswith("Quarterly")
    # what was cached is the answer, not a draft
    again = client.complete_json("answer", MESSAGES, Answer, CTX)
    assert again.cached and again.value == res.value and len(llm_server.chat_requests) == 1


def test_reasoning_content_is_never_parsed(llm_server, tmp_path):
    llm_server.script(
        reasoning_reply(json.dumps(GOOD), "Draft: " + json.dumps(DRAFT)),
        reasoning_reply(None, json.dumps(DRAFT)),  # thoughts only, no answer: invalid, asked again
        json_reply(GOOD),
    )
    client = make_client(llm_server, tmp_path)
    assert client.complete_json("answer", MESSAGES, Answer, CTX).value == Answer(**GOOD)
    res = client.complete_json("other", MESSAGES, Answer, CTX)
    assert res.value == Answer(**GOOD) and res.attempts == 2
    assert "only reasoning" in llm_server.chat_requests[-1].messages[-1]["content"]


def test_a_reasoning_block_that_never_closed_is_no_answer(llm_server, tmp_path):
    llm_server.script(chat_reply("<think>Let me think about " + json.dumps(DRAFT)), json_reply(GOOD))
    res = make_client(llm_server, tmp_path).complete_json("answer", MESSAGES, Answer, CTX)
    assert res.value == Answer(**GOOD) and res.attempts == 2
    assert "only reasoning" in llm_server.chat_requests[-1].messages[-1]["content"]


def test_strip_fences_variants():
    assert strip_fences('```json\n{"a": 1}\n```') == '{"a": 1}'
    assert strip_fences('```\n{"a": 1}\n```') == '{"a": 1}'
    assert strip_fences('Sure! {"a": 1} Hope this helps.') == '{"a": 1}'
    assert strip_fences('  {"a": 1}  ') == '{"a": 1}'


def test_missing_key_is_an_input_error(monkeypatch, llm_server, tmp_path):
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(FrameInputError) as exc:
        make_client(llm_server, tmp_path)
    assert str(exc.value) == f"llm.api_key_env: environment variable {KEY_ENV} is not set"


# ------------------------------------------------------------------------------ invalid output


def test_malformed_twice_then_valid(llm_server, tmp_path):
    llm_server.script(malformed(), malformed('{"title": 1, "score": "x"}'), json_reply(GOOD))
    client = make_client(llm_server, tmp_path)
    res = client.complete_json("answer", MESSAGES, Answer, CTX)
    assert res.value == Answer(**GOOD)
    assert res.attempts == 3
    assert res.prompt_tokens == 33 and res.completion_tokens == 21  # all three replies count
    reqs = llm_server.chat_requests
    assert len(reqs) == 3
    second, third = reqs[1].messages, reqs[2].messages
    assert len(second) == 4 and len(third) == 6
    assert second[2] == {"role": "assistant", "content": '{"title": "half an object", '}
    assert second[3]["role"] == "user" and "not valid JSON" in second[3]["content"]
    assert third[4]["content"] == '{"title": 1, "score": "x"}'
    assert "title" in third[5]["content"] and "score" in third[5]["content"]
    # the cached request is the original one: a rerun is a cache hit
    again = client.complete_json("answer", MESSAGES, Answer, CTX)
    assert again.cached and again.attempts == 3 and len(llm_server.chat_requests) == 3


def test_schema_error_names_first_three_fields(llm_server, tmp_path):
    class Wide(BaseModel):
        a: int
        b: int
        c: int
        d: int

    llm_server.script(json_reply({}), json_reply({"a": 1, "b": 2, "c": 3, "d": 4}))
    res = make_client(llm_server, tmp_path).complete_json("wide", MESSAGES, Wide, CTX)
    assert res.attempts == 2
    correction = llm_server.chat_requests[1].messages[-1]["content"]
    assert "a: Field required" in correction and "c: Field required" in correction
    assert "d: Field required" not in correction and "(+1 more)" in correction


def test_always_malformed_fails_with_one_line(llm_server, tmp_path):
    llm_server.script(malformed(), malformed(), malformed(), json_reply(GOOD))
    client = make_client(llm_server, tmp_path)
    with pytest.raises(LLMOutputError) as exc:
        client.complete_json("answer", MESSAGES, Answer, CTX)
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith(
        "role answer, domain acme-10q, snapshot 2024-03-31: invalid output after 3 attempts: "
    )
    assert "not valid JSON" in msg
    assert len(llm_server.chat_requests) == 3
    assert cache_files(tmp_path) == []  # failures are not cached ...
    res = client.complete_json("answer", MESSAGES, Answer, CTX)  # ... so a rerun asks again
    assert res.value == Answer(**GOOD) and not res.cached
    assert len(llm_server.chat_requests) == 4


def test_check_callback_failure_is_invalid(llm_server, tmp_path):
    def positive(a: Answer) -> None:
        if a.score <= 0:
            raise ValueError("score must be positive")

    llm_server.script(json_reply({"title": "t", "score": -1}), json_reply(GOOD))
    res = make_client(llm_server, tmp_path).complete_json("answer", MESSAGES, Answer, CTX, check=positive)
    assert res.attempts == 2
    assert "score must be positive" in llm_server.chat_requests[1].messages[-1]["content"]


def test_a_truncated_reply_is_asked_again_with_twice_the_budget(llm_server, tmp_path):
    # issue 42 point 2: never the same prompt plus "write less"; the same prompt with room for the answer
    llm_server.script(truncated(), json_reply(GOOD))
    res = make_client(llm_server, tmp_path).complete_json("answer", MESSAGES, Answer, CTX)
    assert res.value == Answer(**GOOD) and res.attempts == 2
    first, second = llm_server.chat_requests
    assert second.messages == first.messages == MESSAGES  # no echo, no correction
    assert (first.body["max_tokens"], second.body["max_tokens"]) == (4096, 8192)


def test_a_reply_truncated_at_the_larger_budget_fails_naming_the_setting(llm_server, tmp_path):
    llm_server.script(truncated(), truncated(), json_reply(GOOD))
    client = make_client(llm_server, tmp_path, invalid_retries=2)
    with pytest.raises(
        LLMTruncatedError, match=r"output budget of 8192 tokens.*max_output_tokens_by_role\.answer"
    ):
        client.complete_json("answer", MESSAGES, Answer, CTX)
    assert len(llm_server.chat_requests) == 2  # the corrective retries are not spent on it
    assert client.cache.get(request_hash("answer", "test-model", MESSAGES, client._params("answer"))) is None


def test_split_mode_hands_a_truncated_reply_back_at_once(llm_server, tmp_path):
    llm_server.script(truncated(), json_reply(GOOD))
    client = make_client(llm_server, tmp_path)
    with pytest.raises(LLMTruncatedError) as err:
        client.complete_json("answer", MESSAGES, Answer, CTX, on_length="split")
    assert err.value.budget == 4096 and len(llm_server.chat_requests) == 1


def test_the_role_budget_is_sent_and_a_role_setting_wins(llm_server, tmp_path):
    llm_server.default_chat = json_reply(GOOD)
    make_client(llm_server, tmp_path).complete_json("structure_free", MESSAGES, Answer, CTX)
    make_client(llm_server, tmp_path, max_output_tokens=1000).complete_json(
        "structure_free", MESSAGES, Answer, CTX
    )
    make_client(
        llm_server, tmp_path, max_output_tokens=1000, max_output_tokens_by_role={"structure_free": 3000}
    ).complete_json("structure_free", MESSAGES, Answer, CTX)
    make_client(llm_server, tmp_path, context_tokens=4096).complete_json(
        "structure_free", MESSAGES, Answer, CTX
    )
    sent = [r.body["max_tokens"] for r in llm_server.chat_requests]
    # the role's default (a 10-K plan), one budget for all roles, the role's own, half a small context
    assert sent == [8192, 1000, 3000, 2048]


def test_an_endpoint_cutting_at_the_budget_is_met_with_a_larger_one(llm_server, tmp_path):
    # the server cuts any reply past max_tokens, as real endpoints do; 40 tokens are too few for GOOD
    long_good = {"title": "Quarterly report " + "with many words " * 20, "score": 3}
    llm_server.default_chat = at_budget(json_reply(long_good))
    res = make_client(llm_server, tmp_path, max_output_tokens=40).complete_json(
        "answer", MESSAGES, Answer, CTX
    )
    assert res.value.title == long_good["title"]
    assert [r.body["max_tokens"] for r in llm_server.chat_requests] == [40, 80]


def test_empty_choices_is_invalid(llm_server, tmp_path):
    llm_server.script(empty_choices(), json_reply(GOOD))
    res = make_client(llm_server, tmp_path).complete_json("answer", MESSAGES, Answer, CTX)
    assert res.attempts == 2
    llm_server.script(empty_choices(), empty_choices(), empty_choices())
    with pytest.raises(LLMOutputError, match="no choices"):
        make_client(llm_server, tmp_path).complete_json("other", MESSAGES, Answer, CTX)


# --------------------------------------------------------------------------- transient failures


def test_rate_limited_then_success(llm_server, tmp_path):
    llm_server.script(rate_limited("0"), json_reply(GOOD))
    client = make_client(llm_server, tmp_path)
    res = client.complete_json("answer", MESSAGES, Answer, CTX)
    assert res.value == Answer(**GOOD) and res.attempts == 1
    assert len(llm_server.chat_requests) == 2
    assert client.stats.calls_made == 2


def test_retry_after_is_honoured_and_capped(llm_server, tmp_path):
    llm_server.script(rate_limited("0.4"), json_reply(GOOD))
    client = make_client(llm_server, tmp_path, backoff_max_s=2.0)
    t0 = time.monotonic()
    client.complete_json("answer", MESSAGES, Answer, CTX)
    assert time.monotonic() - t0 >= 0.35
    gap = llm_server.chat_requests[1].at - llm_server.chat_requests[0].at
    assert gap >= 0.35
    # a huge Retry-After is capped by backoff_max_s
    llm_server.script(rate_limited("3600"), json_reply(GOOD))
    t0 = time.monotonic()
    make_client(llm_server, tmp_path, backoff_max_s=0.05).complete_json("other", MESSAGES, Answer, CTX)
    assert time.monotonic() - t0 < 2.0


def test_server_errors_exhaust_retries(llm_server, tmp_path):
    llm_server.script(*[server_error(500)] * 3, server_error(503))
    client = make_client(llm_server, tmp_path, transient_retries=3)
    with pytest.raises(LLMTransientError) as exc:
        client.complete_json("answer", MESSAGES, Answer, CTX)
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith(
        "role answer, domain acme-10q, snapshot 2024-03-31: endpoint still failing after 4 tries"
    )
    assert "HTTP 503" in msg
    assert len(llm_server.chat_requests) == 4
    assert cache_files(tmp_path) == []


def test_server_error_then_success(llm_server, tmp_path):
    llm_server.script(server_error(502), server_error(500), json_reply(GOOD))
    res = make_client(llm_server, tmp_path).complete_json("answer", MESSAGES, Answer, CTX)
    assert res.value == Answer(**GOOD) and len(llm_server.chat_requests) == 3


def test_timeout_is_retried(llm_server, tmp_path):
    llm_server.script(slow(json_reply(GOOD), 1.5), json_reply({"title": "second", "score": 2}))
    client = make_client(llm_server, tmp_path, timeout_s=0.3)
    res = client.complete_json("answer", MESSAGES, Answer, CTX)
    assert res.value.title == "second"
    assert len(llm_server.chat_requests) == 2


def test_timeouts_exhaust_retries(llm_server, tmp_path):
    llm_server.script(*[slow(json_reply(GOOD), 1.0)] * 2)
    client = make_client(llm_server, tmp_path, timeout_s=0.2, transient_retries=1)
    with pytest.raises(LLMTransientError, match="timed out"):
        client.complete_json("answer", MESSAGES, Answer, CTX)


def test_client_errors_are_not_retried(llm_server, tmp_path):
    llm_server.script(error(401, "bad key"), json_reply(GOOD))
    client = make_client(llm_server, tmp_path)
    with pytest.raises(LLMRequestError, match=r"role answer, domain acme-10q, .*HTTP 401"):
        client.complete_json("answer", MESSAGES, Answer, CTX)
    assert len(llm_server.chat_requests) == 1


def test_response_format_rejected_falls_back(llm_server, tmp_path):
    def picky(req: Recorded) -> Reply:
        if "response_format" in req.body:
            return error(400, "response_format is not supported by this model")
        return json_reply(GOOD)

    llm_server.default_chat = picky
    client = make_client(llm_server, tmp_path)
    res = client.complete_json("answer", MESSAGES, Answer, CTX)
    assert res.value == Answer(**GOOD)
    reqs = llm_server.chat_requests
    assert len(reqs) == 2 and "response_format" in reqs[0].body and "response_format" not in reqs[1].body
    client.complete_json("other", MESSAGES, Answer, CTX)  # remembered: no second rejected attempt
    assert len(llm_server.chat_requests) == 3


# ------------------------------------------------------------------- reasoning models (o-series, GPT-5)

reasoning_endpoint = reasoning_model(json_reply(GOOD))  # refuses max_tokens and temperature as OpenAI does


def test_a_reasoning_model_adapts_once_and_remembers(llm_server, tmp_path, caplog):
    llm_server.default_chat = reasoning_endpoint
    client = make_client(llm_server, tmp_path, model="my-azure-deployment", reasoning_effort="low")
    with caplog.at_level(logging.WARNING):
        assert client.complete_json("answer", MESSAGES, Answer, CTX).value == Answer(**GOOD)
    first = llm_server.chat_requests
    assert [("max_tokens" in r.body, "temperature" in r.body) for r in first] == [
        (True, True),
        (False, True),
        (False, False),
    ]
    assert first[-1].body["max_completion_tokens"] == 4096 and first[-1].body["reasoning_effort"] == "low"
    assert all(r.body["response_format"] == {"type": "json_object"} for r in first)  # JSON mode kept
    assert "max_completion_tokens instead of max_tokens" in caplog.text
    client.complete_json("other", MESSAGES, Answer, CTX)  # remembered: one request, never resent unchanged
    assert len(llm_server.chat_requests) == 4
    # and by every client of this endpoint in the process (a build makes one per step)
    make_client(llm_server, tmp_path, model="my-azure-deployment").complete_json(
        "third", MESSAGES, Answer, CTX
    )
    assert len(llm_server.chat_requests) == 5


def test_a_reasoning_model_name_is_sent_its_parameters_first(llm_server, tmp_path):
    llm_server.default_chat = reasoning_endpoint
    client = make_client(
        llm_server,
        tmp_path,
        model="o4-mini",
        reasoning_effort="high",
        reasoning_effort_by_role={"fill": "low"},
    )
    client.complete_json("structure", MESSAGES, Answer, CTX)
    client.complete_json("fill", MESSAGES, Answer, CTX)
    a, b = llm_server.chat_requests
    assert "temperature" not in a.body and a.body["max_completion_tokens"] == 4096
    assert (a.body["reasoning_effort"], b.body["reasoning_effort"]) == ("high", "low")


def test_a_400_about_something_else_is_not_taken_for_a_parameter(llm_server, tmp_path):
    llm_server.default_chat = lambda req: error(400, "This model's maximum context length is 8192 tokens.")
    client = make_client(llm_server, tmp_path)
    with pytest.raises(LLMRequestError):
        client.complete_json("answer", MESSAGES, Answer, CTX)
    # once as asked, once without response_format: never a third time, never another parameter dropped
    reqs = llm_server.chat_requests
    assert len(reqs) == 2 and all("max_tokens" in r.body and "temperature" in r.body for r in reqs)


# ------------------------------------------------------------------------------------------ cache


def test_second_identical_call_is_cached(llm_server, tmp_path):
    llm_server.script(json_reply(GOOD, prompt_tokens=40, completion_tokens=12))
    client = make_client(llm_server, tmp_path)
    first = client.complete_json("answer", MESSAGES, Answer, CTX)
    second = client.complete_json("answer", MESSAGES, Answer, CTX)
    assert len(llm_server.chat_requests) == 1
    assert second.cached and not first.cached
    assert second.value == first.value and second.request_hash == first.request_hash
    assert (second.prompt_tokens, second.completion_tokens, second.model) == (40, 12, "test-model-2024")
    assert client.stats.as_dict() == {
        "calls_made": 1,
        "cache_hits": 1,
        "prompt_tokens": 40,
        "completion_tokens": 12,
    }
    # a fresh client (new process) reads the same cache
    third = make_client(llm_server, tmp_path).complete_json("answer", MESSAGES, Answer, CTX)
    assert third.cached and len(llm_server.chat_requests) == 1
    [path] = cache_files(tmp_path)
    assert path.parent.name == first.request_hash[:2] and path.stem == first.request_hash
    assert path.parent.parent == tmp_path / "cache" / "llm"
    entry = json.loads(path.read_text())
    assert (
        entry["text"] == json.dumps(GOOD)
        and entry["prompt_tokens"] == 40
        and entry["model"] == "test-model-2024"
    )
    assert "created" in entry


def test_cache_key_covers_role_and_params(llm_server, tmp_path):
    llm_server.default_chat = json_reply(GOOD)
    make_client(llm_server, tmp_path).complete_json("answer", MESSAGES, Answer, CTX)
    make_client(llm_server, tmp_path).complete_json("other-role", MESSAGES, Answer, CTX)
    make_client(llm_server, tmp_path, temperature=0.5).complete_json("answer", MESSAGES, Answer, CTX)
    make_client(llm_server, tmp_path, max_output_tokens=100).complete_json("answer", MESSAGES, Answer, CTX)
    make_client(llm_server, tmp_path, model="other-model").complete_json("answer", MESSAGES, Answer, CTX)
    assert len(llm_server.chat_requests) == 5
    # timeouts, retries, concurrency and the URL do not change the answer: same key
    make_client(llm_server, tmp_path, timeout_s=9, invalid_retries=0, concurrency=1).complete_json(
        "answer", MESSAGES, Answer, CTX
    )
    assert len(llm_server.chat_requests) == 5


def test_corrupted_cache_entry_is_recomputed(llm_server, tmp_path, caplog):
    llm_server.default_chat = json_reply(GOOD)
    client = make_client(llm_server, tmp_path)
    first = client.complete_json("answer", MESSAGES, Answer, CTX)
    [path] = cache_files(tmp_path)
    path.write_text('{"kind": "chat", "text": ', encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        again = client.complete_json("answer", MESSAGES, Answer, CTX)
    assert not again.cached and again.value == first.value
    assert len(llm_server.chat_requests) == 2
    assert "corrupt" in caplog.text
    assert json.loads(path.read_text())["text"] == json.dumps(GOOD)  # overwritten with a good entry
    assert client.complete_json("answer", MESSAGES, Answer, CTX).cached


def test_cache_module_roundtrip(tmp_path):
    cache = ResponseCache(tmp_path)
    key = request_hash("r", "m", MESSAGES, {"temperature": 0})
    assert cache.get(key) is None
    cache.put(key, CacheEntry(kind="chat", model="m", role="r", text="{}", prompt_tokens=1))
    assert cache.get(key).text == "{}"
    cache.path(key).write_text("[1, 2]")
    assert cache.get(key) is None
    assert not list(tmp_path.rglob("*.tmp"))
    with pytest.raises(ValueError):
        cache.path("../escape")


# ---------------------------------------------------------------------------------------- secrets


def test_api_key_never_leaks(llm_server, tmp_path, caplog):
    def echo_key(req: Recorded) -> Reply:  # a hostile server that echoes the Authorization header
        return error(500, f"cannot serve {req.headers.get('authorization')}")

    def echo_key_400(req: Recorded) -> Reply:
        return error(403, f"forbidden for {req.headers.get('authorization')}")

    caplog.set_level(logging.DEBUG)
    client = make_client(llm_server, tmp_path, transient_retries=1, invalid_retries=1)
    llm_server.script(
        json_reply(GOOD), malformed(f"oops {SECRET}"), malformed(), echo_key, echo_key, echo_key_400
    )
    client.complete_json("answer", MESSAGES, Answer, CTX)
    errors = []
    for role in ("bad-output", "transient", "refused"):
        with pytest.raises((LLMOutputError, LLMTransientError, LLMRequestError)) as exc:
            client.complete_json(role, MESSAGES, Answer, CTX)
        errors.append(exc.value)
    assert [type(e) for e in errors] == [LLMOutputError, LLMTransientError, LLMRequestError]
    client.embed(["some text"], model="embed-model", ctx=CTX)
    assert all(r.headers["authorization"] == f"Bearer {SECRET}" for r in llm_server.requests)
    for e in errors:
        assert SECRET not in str(e) and SECRET not in repr(e)
        assert e.__cause__ is None
    assert "[redacted]" in str(errors[1])
    assert SECRET not in caplog.text
    assert all(SECRET not in r.getMessage() for r in caplog.records)
    files = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert files
    for p in files:
        assert SECRET.encode() not in p.read_bytes(), p
        assert b"authorization" not in p.read_bytes().lower()
    assert SECRET not in repr(client)


# ------------------------------------------------------------------------------------ concurrency


def test_concurrency_limit_is_respected(llm_server, tmp_path):
    llm_server.default_chat = slow(json_reply(GOOD), 0.2)
    clients = [make_client(llm_server, tmp_path, concurrency=2) for _ in range(2)]  # share the semaphore
    errors: list[BaseException] = []

    def work(i: int) -> None:
        msgs = [MESSAGES[0], {"role": "user", "content": f"request {i}"}]
        try:
            clients[i % 2].complete_json("answer", msgs, Answer, CTX)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert not errors
    assert len(llm_server.chat_requests) == 6
    assert llm_server.max_in_flight == 2
    assert sum(c.stats.calls_made for c in clients) == 6


# ------------------------------------------------------------------------------------- embeddings


def test_embeddings_are_batched_and_cached(llm_server, tmp_path):
    client = make_client(llm_server, tmp_path)
    vecs = client.embed(["alpha", "beta", "alpha"], model="embed-model", ctx=CTX)
    assert len(vecs) == 3 and vecs[0] == vecs[2] and vecs[0] != vecs[1]
    assert all(isinstance(x, float) for x in vecs[1])
    [req] = llm_server.embedding_requests
    assert req.body["input"] == ["alpha", "beta"] and req.body["encoding_format"] == "float"
    assert req.body["model"] == "embed-model"
    again = client.embed(["beta", "alpha", "gamma"], model="embed-model")
    assert again[0] == vecs[1] and again[1] == vecs[0]
    assert llm_server.embedding_requests[1].body["input"] == ["gamma"]
    client.embed(["alpha"], model="other-embed-model")
    assert len(llm_server.embedding_requests) == 3
    assert client.stats.cache_hits == 2


def test_embeddings_retry_transient(llm_server, tmp_path):
    llm_server.script_embeddings(rate_limited("0"))
    vecs = make_client(llm_server, tmp_path).embed(["alpha"], model="embed-model")
    assert len(vecs) == 1 and len(llm_server.embedding_requests) == 2


def test_bad_request_unrelated_to_json_mode_keeps_it(llm_server, tmp_path):
    llm_server.script(error(400, "context too long"), error(400, "context too long"), json_reply(GOOD))
    client = make_client(llm_server, tmp_path)
    with pytest.raises(LLMRequestError, match=r"HTTP 400 \(context too long\)"):
        client.complete_json("answer", MESSAGES, Answer, CTX)
    client.complete_json("answer", MESSAGES, Answer, CTX)
    assert "response_format" in llm_server.chat_requests[2].body
