"""LLM endpoint faults, through the real `openai` client over HTTP against tests/llm_server.py.

Each fault is checked for: the exact number of HTTP requests the server saw, the error class and its
one-line message naming role, domain and snapshot, that nothing but validated replies lands in the
response cache (`<cache>/llm/`), and that a later good run succeeds (nothing poisoned).

Already covered in tests/test_llm_client.py and not repeated here: one 429 then success
(`test_rate_limited_then_success`), Retry-After handling, 5xx exhausting retries
(`test_server_errors_exhaust_retries`), one timeout then success and timeouts exhausting retries
(message only), malformed JSON always (`test_always_malformed_fails_with_one_line`), one truncated
reply then success, one empty `choices` then success, corrupted cache entries.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from pydantic import BaseModel

import tests.llm_server as fake_llm
from tasks.llm.backend import StepContext
from tasks.llm.cache import CacheEntry
from tasks.llm.client import LLMClient, LLMOutputError, LLMTransientError, LLMTruncatedError
from tests.llm_server import (
    LLMTestServer,
    empty_choices,
    fast_settings,
    json_reply,
    malformed,
    no_message,
    not_json_body,
    odd_choices,
    odd_content,
    rate_limited,
    server_error,
    slow,
    storm,
    truncated,
)

llm_server = fake_llm.llm_server  # the pytest fixture (a started local server), used by name below

KEY_ENV = "FRAME_TEST_LLM_FAULTS_KEY"
CTX = StepContext(
    domain="NVDA-10-Q", snapshot="2025-07-27", category="financial_quarterly", source_kind="edgar"
)
WHERE = "role structure, domain NVDA-10-Q, snapshot 2025-07-27"
MESSAGES = [
    {"role": "system", "content": "Answer with a JSON object."},
    {"role": "user", "content": "Propose a title and a section count."},
]
GOOD = {"title": "Quarterly report", "sections": 4}


class Outline(BaseModel):
    title: str
    sections: int


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-faults")


def client(server: LLMTestServer, tmp_path: Path, **overrides) -> LLMClient:
    values = {"transient_retries": 3, "invalid_retries": 2, "concurrency": 2, **overrides}
    return LLMClient(fast_settings(server, KEY_ENV, **values), tmp_path / "cache")


def cache_entries(tmp_path: Path) -> list[CacheEntry]:
    """Every file of the response cache, each of which must be a valid entry holding a valid reply."""
    root = tmp_path / "cache" / "llm"
    files = sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []
    entries = []
    for p in files:
        assert p.suffix == ".json", f"stray file in the cache: {p}"
        entry = CacheEntry.from_json(json.loads(p.read_text(encoding="utf-8")))
        assert entry.kind == "chat" and entry.text is not None
        Outline.model_validate_json(entry.text)  # only validated replies are cached
        assert p.stem == p.name.removesuffix(".json") and p.parent.name == p.stem[:2]
        entries.append(entry)
    return entries


def assert_one_line(msg: str) -> None:
    assert msg and len(msg.splitlines()) == 1, repr(msg)


def good_run_after(server: LLMTestServer, tmp_path: Path, seen: int) -> None:
    """After a failure, the same request succeeds, is cached, and the next call costs nothing."""
    server.default_chat = None
    server.script(json_reply(GOOD))
    c = client(server, tmp_path)
    res = c.complete_json("structure", MESSAGES, Outline, CTX)
    assert res.value == Outline(**GOOD) and not res.cached and res.attempts == 1
    assert len(server.chat_requests) == seen + 1
    again = client(server, tmp_path).complete_json("structure", MESSAGES, Outline, CTX)
    assert again.cached and again.value == res.value
    assert len(server.chat_requests) == seen + 1
    [entry] = cache_entries(tmp_path)
    assert json.loads(entry.text) == GOOD


# ------------------------------------------------------------------------------- 429 storms


def test_429_storm_longer_than_the_retry_budget_fails_clearly(llm_server, tmp_path):
    llm_server.default_chat = rate_limited("0")  # every request, for as long as it is asked
    c = client(llm_server, tmp_path, transient_retries=4)
    t0 = time.monotonic()
    with pytest.raises(LLMTransientError) as exc:
        c.complete_json("structure", MESSAGES, Outline, CTX)
    assert time.monotonic() - t0 < 5.0  # tiny backoff, bounded number of tries
    msg = str(exc.value)
    assert_one_line(msg)
    assert msg.startswith(f"{WHERE}: endpoint still failing after 5 tries: HTTP 429"), msg
    assert len(llm_server.chat_requests) == 5  # 1 + transient_retries, then it stops
    assert c.stats.calls_made == 5
    assert cache_entries(tmp_path) == []
    good_run_after(llm_server, tmp_path, seen=5)


def test_429_storm_within_the_budget_succeeds(llm_server, tmp_path):
    llm_server.script(*storm(4, json_reply(GOOD)))
    c = client(llm_server, tmp_path, transient_retries=4)
    res = c.complete_json("structure", MESSAGES, Outline, CTX)
    assert res.value == Outline(**GOOD)
    assert res.attempts == 1  # transient retries are not model attempts
    assert len(llm_server.chat_requests) == 5 and c.stats.calls_made == 5
    # every retry sent the very same request (no corrective turns for a 429)
    assert all(r.messages == MESSAGES for r in llm_server.chat_requests)
    [entry] = cache_entries(tmp_path)
    assert json.loads(entry.text) == GOOD
    assert client(llm_server, tmp_path).complete_json("structure", MESSAGES, Outline, CTX).cached
    assert len(llm_server.chat_requests) == 5


def test_429_storm_without_retry_after_uses_capped_backoff(llm_server, tmp_path):
    llm_server.script(*storm(3, json_reply(GOOD), retry_after=None))
    c = client(llm_server, tmp_path, backoff_initial_s=0.01, backoff_max_s=0.05)
    t0 = time.monotonic()
    c.complete_json("structure", MESSAGES, Outline, CTX)
    assert time.monotonic() - t0 < 3.0
    reqs = llm_server.chat_requests
    assert len(reqs) == 4
    gaps = [b.at - a.at for a, b in zip(reqs, reqs[1:], strict=False)]
    assert max(gaps) < 1.0  # never more than backoff_max_s plus request overhead


def test_transient_and_invalid_faults_interleaved(llm_server, tmp_path):
    """A 429 and a 500 around a malformed reply: each model attempt has its own transient budget."""
    llm_server.script(rate_limited("0"), malformed(), server_error(503), json_reply(GOOD))
    res = client(llm_server, tmp_path, transient_retries=1).complete_json("structure", MESSAGES, Outline, CTX)
    assert res.value == Outline(**GOOD) and res.attempts == 2
    reqs = llm_server.chat_requests
    assert len(reqs) == 4
    assert reqs[0].messages == reqs[1].messages == MESSAGES
    assert len(reqs[2].messages) == 4 and reqs[2].messages == reqs[3].messages  # corrective turn
    [entry] = cache_entries(tmp_path)
    assert entry.attempts == 2


# ------------------------------------------------------------------------------- timeouts


def test_every_request_times_out(llm_server, tmp_path):
    llm_server.default_chat = slow(json_reply(GOOD), 0.6)
    c = client(llm_server, tmp_path, timeout_s=0.15, transient_retries=2)
    with pytest.raises(LLMTransientError) as exc:
        c.complete_json("structure", MESSAGES, Outline, CTX)
    msg = str(exc.value)
    assert_one_line(msg)
    assert msg == f"{WHERE}: endpoint still failing after 3 tries: request timed out after 0.15 s"
    assert len(llm_server.chat_requests) == 3
    assert cache_entries(tmp_path) == []  # the late replies the server still wrote are not cached
    time.sleep(0.6)  # let the slow handlers finish before the good run
    good_run_after(llm_server, tmp_path, seen=3)


# ------------------------------------------------------------------------------- invalid output


FAULTS = {
    "malformed": (malformed, "not valid JSON"),
    "schema-invalid": (lambda: json_reply({"title": 7, "sections": "many"}), "does not match the required"),
    "wrong-top-level": (lambda: json_reply([GOOD]), "expected one JSON object, got a JSON list"),
    "empty-choices": (empty_choices, "the response had no choices"),
    "null-choices": (lambda: odd_choices(None), "the response had no choices"),
    "missing-content": (lambda: odd_content(None), "the reply was empty"),
    "blank-content": (lambda: odd_content("  \n "), "the reply was empty"),
    "missing-message": (no_message, "the reply was empty"),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_persistent_invalid_output_fails_after_corrective_retries(llm_server, tmp_path, fault):
    make, reason = FAULTS[fault]
    llm_server.default_chat = make()
    c = client(llm_server, tmp_path, invalid_retries=2)
    with pytest.raises(LLMOutputError) as exc:
        c.complete_json("structure", MESSAGES, Outline, CTX)
    msg = str(exc.value)
    assert_one_line(msg)
    assert msg.startswith(f"{WHERE}: invalid output after 3 attempts: {reason}"), msg
    reqs = llm_server.chat_requests
    assert len(reqs) == 3  # 1 + invalid_retries, no transient retries for a 200
    # each retry carries a corrective turn naming the problem
    for before, after in zip(reqs, reqs[1:], strict=False):
        assert len(after.messages) > len(before.messages)
        assert after.messages[-1]["role"] == "user"
        assert after.messages[: len(MESSAGES)] == MESSAGES
    assert cache_entries(tmp_path) == []
    good_run_after(llm_server, tmp_path, seen=3)


def test_persistent_truncation_is_asked_once_with_more_room_then_fails(llm_server, tmp_path):
    llm_server.default_chat = truncated()
    c = client(llm_server, tmp_path, invalid_retries=2)
    with pytest.raises(LLMTruncatedError) as exc:
        c.complete_json("structure", MESSAGES, Outline, CTX)
    msg = str(exc.value)
    assert_one_line(msg)
    assert msg.startswith(f"{WHERE}: the reply reached the output budget of 8192 tokens"), msg
    first, second = llm_server.chat_requests  # not 1 + invalid_retries: the prompt is never resent for less
    assert first.messages == second.messages == MESSAGES
    assert (first.body["max_tokens"], second.body["max_tokens"]) == (4096, 8192)
    assert cache_entries(tmp_path) == []
    good_run_after(llm_server, tmp_path, seen=2)


def test_schema_invalid_then_valid_caches_under_the_original_request(llm_server, tmp_path):
    llm_server.script(json_reply({"title": "x"}), truncated(), json_reply(GOOD))
    res = client(llm_server, tmp_path).complete_json("structure", MESSAGES, Outline, CTX)
    assert res.attempts == 3 and len(llm_server.chat_requests) == 3
    second, third = (r.messages for r in llm_server.chat_requests[1:])
    assert "sections: Field required" in second[3]["content"]  # the schema problem is named
    # the truncated reply is asked again as it was sent, with twice the room (no echo, no correction)
    assert third == second and len(third) == 4
    assert [r.body["max_tokens"] for r in llm_server.chat_requests] == [4096, 4096, 8192]
    [entry] = cache_entries(tmp_path)
    assert entry.attempts == 3
    # a new client with the original messages hits that entry
    assert client(llm_server, tmp_path).complete_json("structure", MESSAGES, Outline, CTX).cached
    assert len(llm_server.chat_requests) == 3


def test_invalid_cached_entry_is_not_served(llm_server, tmp_path):
    """A cache entry whose text no longer validates (schema changed) is asked again, then replaced."""
    llm_server.script(json_reply({"title": "old"}))

    class Loose(BaseModel):
        title: str

    c = client(llm_server, tmp_path)
    c.complete_json("structure", MESSAGES, Loose, CTX)
    llm_server.script(json_reply(GOOD))
    res = c.complete_json("structure", MESSAGES, Outline, CTX)
    assert not res.cached and res.value == Outline(**GOOD)
    assert len(llm_server.chat_requests) == 2
    [entry] = cache_entries(tmp_path)
    assert json.loads(entry.text) == GOOD


# ------------------------------------------------------------------------------- holes found


ODD_BODIES = {
    # 200 responses whose body or shape the openai client does not reject itself
    "html-body": (not_json_body, "the body is not JSON"),
    "empty-body": (lambda: not_json_body(""), "empty body"),
    "content-parts-list": (
        lambda: odd_content([{"type": "text", "text": json.dumps(GOOD)}]),
        "content is a list of parts",
    ),
    "content-number": (lambda: odd_content(5), "content is a number"),
    "choice-not-object": (lambda: odd_choices(["oops"]), "choice is a string"),
}


@pytest.mark.parametrize("fault", sorted(ODD_BODIES))
def test_malformed_response_bodies_become_llm_errors(llm_server, tmp_path, fault):
    make, _why = ODD_BODIES[fault]
    llm_server.default_chat = make()
    c = client(llm_server, tmp_path, invalid_retries=1, transient_retries=1)
    with pytest.raises((LLMOutputError, LLMTransientError)) as exc:
        c.complete_json("structure", MESSAGES, Outline, CTX)
    msg = str(exc.value)
    assert_one_line(msg)
    assert msg.startswith(f"{WHERE}: ")
    assert len(llm_server.chat_requests) == 2
    assert cache_entries(tmp_path) == []
    good_run_after(llm_server, tmp_path, seen=2)
