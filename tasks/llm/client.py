"""JSON and plain-text calls to any OpenAI-compatible endpoint: validated, retried, cached, rate-limited.

`LLMClient.complete_json` sends one chat request for one role and returns the reply parsed and
validated against that role's pydantic schema; `complete_text` asks for plain text (a system under
test's Markdown report) without JSON mode and reads it with the caller's validator, through the same
machinery:

* cache first: a request already answered (same role, model, messages, parameters) is read
  from the response cache and costs no HTTP call;
* JSON mode (`response_format={"type": "json_object"}`); an endpoint that rejects it with HTTP
  400 is asked once more without it, and the client remembers not to send it again;
* transient failures (429, 408/409, 5xx, timeouts, connection errors) are retried with
  exponential backoff and full jitter (tenacity), honouring `Retry-After`; when retries run out
  the step fails with `LLMTransientError`;
* invalid replies (not JSON, schema violations, a failed extra `check`, no choices) get a
  corrective follow-up naming the problem, up to `invalid_retries` times; then the step fails
  with `LLMOutputError`;
* a reply cut at the role's output budget (finish_reason "length") is never answered by resending
  the prompt and asking for less: with `on_length="split"` the caller gets `LLMTruncatedError` at
  once and splits its input; otherwise the request is sent once more with the budget doubled (as far
  as the context allows), then it fails with `LLMTruncatedError` naming the setting to raise;
* only validated replies are cached, so rerunning a failed step asks the server again;
* a process-wide semaphore (per endpoint) bounds the number of concurrent HTTP requests.

The API key is read from the environment variable named by `settings.api_key_env`; it is never
written to the cache, logs or exception messages (any text that reaches those is scrubbed).
All errors raised here are one line naming role, domain and snapshot.
"""

from __future__ import annotations

import contextlib
import contextvars
import email.utils
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

# `openai` (~0.5 s of imports) is imported in the functions that use it: commands on the offline
# backend never load it.
from pydantic import BaseModel
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from schemas.config import LLMSettings
from tasks.errors import FrameInputError
from tasks.llm import redact
from tasks.llm.backend import StepContext
from tasks.llm.cache import CacheEntry, ResponseCache, embedding_hash, request_hash
from tasks.llm.replies import (
    InvalidOutput,
    corrective_message,
    echo_reply,
    one_line,
    parse_reply,
    parse_text,
)

log = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)

JSON_MODE = {"type": "json_object"}
EMBED_BATCH = 128


# ---------------------------------------------------------------------------------------- errors


class LLMError(Exception):
    """Base of the client's errors; the message is always one line."""


class LLMOutputError(LLMError):
    """The model kept returning unusable output (invalid JSON/schema, truncated, empty)."""


class LLMTruncatedError(LLMOutputError):
    """A reply reached the request's output budget (finish_reason "length"). Callers that can cut their
    input (unit and claim extraction) split it and ask for each part; the input is never resent as is."""

    def __init__(self, message: str, budget: int) -> None:
        super().__init__(message)
        self.budget = budget


class LLMTransientError(LLMError):
    """The endpoint kept failing with retryable errors (429, 5xx, timeouts) until retries ran out."""


class LLMRequestError(LLMError):
    """The endpoint refused the request for a non-retryable reason (400, 401, 403, 404, ...)."""


# ---------------------------------------------------------------------------------------- results


@dataclass(frozen=True)
class LLMResult(Generic[T]):
    value: T
    text: str  # the raw reply that validated
    prompt_tokens: int
    completion_tokens: int
    cached: bool
    request_hash: str
    model: str
    attempts: int  # model replies it took (1 + corrective retries); transient retries not counted


class LLMStats:
    """Thread-safe counters of what the client actually spent (cache hits cost nothing)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls_made = 0  # HTTP requests sent (including failed and retried ones)
        self.cache_hits = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def add(self, calls: int = 0, hits: int = 0, prompt: int = 0, completion: int = 0) -> None:
        with self._lock:
            self.calls_made += calls
            self.cache_hits += hits
            self.prompt_tokens += prompt
            self.completion_tokens += completion
        meter = STEP_METER.get()
        if meter is not None and meter is not self:
            meter.add(calls, hits, prompt, completion)

    def as_dict(self) -> dict[str, int]:
        with self._lock:
            return {
                "calls_made": self.calls_made,
                "cache_hits": self.cache_hits,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
            }

    def __repr__(self) -> str:
        return f"LLMStats({self.as_dict()})"


# What the step running in this context spent, whatever client it made (flows.observe sets it).
STEP_METER: contextvars.ContextVar[LLMStats | None] = contextvars.ContextVar("frame_step_meter", default=None)


@contextlib.contextmanager
def metering() -> Iterator[LLMStats]:
    """Count the LLM calls, cache hits and tokens of everything run inside the block."""
    meter = LLMStats()
    token = STEP_METER.set(meter)
    try:
        yield meter
    finally:
        STEP_METER.reset(token)


# ------------------------------------------------------------------------- process-wide semaphores

_SEMAPHORES: dict[tuple[str, int], threading.BoundedSemaphore] = {}
_SEMAPHORES_LOCK = threading.Lock()


def _semaphore(endpoint: str, limit: int) -> threading.BoundedSemaphore:
    """One semaphore per (endpoint, limit) for the whole process, shared by all clients."""
    with _SEMAPHORES_LOCK:
        key = (endpoint, limit)
        if key not in _SEMAPHORES:
            _SEMAPHORES[key] = threading.BoundedSemaphore(limit)
        return _SEMAPHORES[key]


# ----------------------------------------------------------------------------- transient handling


def is_transient(exc: BaseException) -> bool:
    import openai

    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True
    # A 200 whose body is not JSON (a proxy's HTML page, a cut connection) is the endpoint's hiccup.
    if isinstance(exc, json.JSONDecodeError | openai.APIResponseValidationError):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return False


def retry_after_seconds(exc: BaseException | None) -> float | None:
    """Seconds the server asked us to wait (Retry-After / retry-after-ms), if it said."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


class _Backoff:
    """tenacity wait: Retry-After when the server sent one (capped), else full-jitter exponential."""

    def __init__(self, initial: float, maximum: float) -> None:
        self.maximum = maximum
        self._jitter = wait_random_exponential(multiplier=initial, max=maximum)

    def __call__(self, state) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        asked = retry_after_seconds(exc)
        if asked is not None:
            return min(asked, self.maximum)
        return self._jitter(state)


# ------------------------------------------------------------------------------------------ client


# Model names whose requests take max_completion_tokens and the default temperature only (OpenAI's
# o-series and GPT-5); an endpoint that says otherwise in a 400 is believed (docs/endpoints.md)
_REASONING_MODEL = re.compile(r"^(?:o\d|gpt-5)", re.I)
# what an endpoint says in the 400 that names a parameter it does not take
_UNSUPPORTED = re.compile(
    r"unsupported (?:parameter|value)|not supported|unrecognized|unknown|extra_forbidden", re.I
)


@dataclass
class _Caps:
    """The request parameters one endpoint takes, as learnt from its 400s."""

    tokens: str = "max_tokens"
    dropped: set[str] = field(default_factory=set)

    @classmethod
    def guess(cls, s: LLMSettings) -> _Caps:
        name = s.model.rsplit("/", 1)[-1]
        if s.max_tokens_param != "auto":
            return cls(tokens=s.max_tokens_param)
        if _REASONING_MODEL.match(name):
            return cls(tokens="max_completion_tokens", dropped={"temperature", "top_p"})
        return cls()

    def adapt(self, error: str, sent: dict[str, Any]) -> str:
        """Learn from a 400: what changed ("" when the error names nothing this can leave out)."""
        low = error.lower()
        if not _UNSUPPORTED.search(low):
            return ""
        if self.tokens == "max_tokens" and "max_tokens" in low and "max_completion_tokens" in low:
            self.tokens = "max_completion_tokens"
            return "sending max_completion_tokens instead of max_tokens from now on"
        for name in ("temperature", "top_p", "reasoning_effort"):
            if name in sent and name in low and name not in self.dropped:
                self.dropped.add(name)
                return f"not sending {name} from now on"
        return ""


_CAPS: dict[tuple[str, str, str], _Caps] = {}
_CAPS_LOCK = threading.Lock()


def _caps_of(s: LLMSettings) -> _Caps:
    """One endpoint's capabilities for the whole process: every client of one (base URL, model) learns
    from the first refusal any of them gets, as the concurrency limit is shared (`_semaphore`)."""
    key = (s.base_url or "(default endpoint)", s.model, s.max_tokens_param)
    with _CAPS_LOCK:
        return _CAPS.setdefault(key, _Caps.guess(s))


def endpoint_of(s: LLMSettings) -> str:
    """The endpoint a request goes to, as part of its cache key (no trailing slash)."""
    return (s.base_url or "(default endpoint)").rstrip("/")


@dataclass
class _Asking:
    """One complete_json call's state across its replies: the conversation so far (corrective
    follow-ups appended), the output budget, what the replies cost."""

    convo: list[dict[str, Any]]
    budget: int
    grown: bool  # the budget was raised once already (or may not be)
    model: str
    json_mode: bool = True  # a JSON reply is asked for (complete_json), else plain text
    epoch: int = 0  # which sample of the request (complete_text's epoch)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempt: int = 0  # corrective attempts so far (a larger budget is not one)
    replies: int = 0  # replies received, whatever came of them
    reason: str = "no reply"


class LLMClient:
    """See the module docstring. One instance may be shared by many threads."""

    def __init__(
        self,
        settings: LLMSettings,
        cache_dir,
        *,
        cache: ResponseCache | None = None,
        sampling: dict[str, Any] | None = None,
    ) -> None:
        import openai

        from tasks.llm import deadline

        self.settings = settings
        # extra sampling parameters of a system under test (top_p, seed): sent and hashed only when set,
        # so requests without them keep their cache keys
        self.sampling = {k: v for k, v in (sampling or {}).items() if v is not None}
        secret = os.environ.get(settings.api_key_env, "").strip()
        if not secret:
            raise FrameInputError(
                "llm.api_key_env", f"environment variable {settings.api_key_env} is not set"
            )
        self._secret = secret
        redact.register(secret)
        self._openai = openai.OpenAI(
            base_url=settings.base_url,
            api_key=secret,
            timeout=settings.timeout_s,
            max_retries=0,  # retries are ours (tenacity), so they are counted and logged
            http_client=deadline.http_client(),  # timeout_s bounds the whole request, not each read
        )
        self.cache = cache or ResponseCache(cache_dir)
        self.stats = LLMStats()
        self._sem = _semaphore(settings.base_url or "(default endpoint)", settings.concurrency)
        self._json_mode = True  # cleared when the endpoint rejects response_format
        # what this endpoint takes (adapted once on a 400 naming the parameter, then remembered)
        self._caps = _caps_of(settings)

    def __repr__(self) -> str:
        return f"LLMClient(base_url={self.settings.base_url!r}, model={self.settings.model!r})"

    # -- helpers

    def scrub(self, text: str) -> str:
        """Remove every key this process knows (whole values) from any text that may end up in a reply,
        log, error or file (tasks.llm.redact)."""
        return redact.scrub(text)

    @staticmethod
    def where(role: str, ctx: StepContext | None) -> str:
        if ctx is None:
            return f"role {role}"
        return f"role {role}, domain {ctx.domain}, snapshot {ctx.snapshot}"

    def describe(self, exc: BaseException) -> str:
        """Short, key-free, one-line description of an API error."""
        import openai

        if isinstance(exc, openai.APITimeoutError):
            text = f"request timed out after {self.settings.timeout_s:g} s"
        elif isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__
            text = f"connection failed ({type(cause).__name__ if cause else 'no response'})"
        elif isinstance(exc, openai.APIStatusError):
            body = exc.body
            detail = ""
            if isinstance(body, dict):
                detail = str(body.get("message") or body.get("error") or "")
            elif isinstance(body, str):
                detail = body
            text = f"HTTP {exc.status_code}" + (f" ({detail})" if detail else "")
        else:
            text = f"{type(exc).__name__}: {exc}"
        return one_line(self.scrub(text))

    def _with_retries(self, fn: Callable[[], Any], role: str, ctx: StepContext | None) -> Any:
        """Run one HTTP call, retrying transient failures; map errors to one-line LLM errors."""
        import openai

        s = self.settings
        tries = s.transient_retries + 1

        def before_sleep(state) -> None:
            exc = state.outcome.exception()
            log.warning(
                "%s: transient error (%s), retry %d of %d in %.2f s",
                self.where(role, ctx),
                self.describe(exc),
                state.attempt_number,
                s.transient_retries,
                state.next_action.sleep if state.next_action else 0.0,
            )

        retrying = Retrying(
            stop=stop_after_attempt(tries),
            wait=_Backoff(s.backoff_initial_s, s.backoff_max_s),
            retry=retry_if_exception(is_transient),
            before_sleep=before_sleep,
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    return fn()
        except openai.APIError as exc:
            where, why = self.where(role, ctx), self.describe(exc)
            if is_transient(exc):
                raise LLMTransientError(
                    f"{where}: endpoint still failing after {tries} tries: {why}"
                ) from None
            raise LLMRequestError(f"{where}: endpoint refused the request: {why}") from None
        except openai.OpenAIError as exc:
            raise LLMRequestError(f"{self.where(role, ctx)}: {self.describe(exc)}") from None
        except json.JSONDecodeError as exc:
            raise LLMTransientError(
                f"{self.where(role, ctx)}: endpoint still answering with a body that is not JSON after "
                f"{tries} tries ({one_line(str(exc))})"
            ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    # -- chat

    def _effort(self, role: str) -> str | None:
        s = self.settings
        return s.reasoning_effort_by_role.get(role, s.reasoning_effort)

    def _params(self, role: str = "", json_mode: bool = True, epoch: int = 0) -> dict[str, Any]:
        """What a request asks for, as hashed for the cache: the settings, not their wire names (the
        endpoint's adaptations change how a request is sent, not what it asks). A text request has no
        response_format; an epoch > 0 is another sample (epoch 0 keeps the keys of before epochs)."""
        s = self.settings
        out = {
            "endpoint": endpoint_of(s),  # a local quantised "llama3" never answers for a hosted "llama3"
            "temperature": s.temperature,
            "max_tokens": s.output_budget(role),
            **({"response_format": JSON_MODE} if json_mode else {}),
            **self.sampling,
            **({"epoch": epoch} if epoch else {}),
        }
        effort = self._effort(role)
        return {**out, "reasoning_effort": effort} if effort else out

    def _wire(self, messages: list[dict[str, Any]], role: str, budget: int, epoch: int = 0) -> dict[str, Any]:
        """The request as this endpoint takes it (a set seed shifted by the epoch: another sample)."""
        s, caps = self.settings, self._caps
        kwargs: dict[str, Any] = {"model": s.model, "messages": messages, caps.tokens: budget}
        sampling = {**self.sampling}
        if epoch and "seed" in sampling:
            sampling["seed"] = int(sampling["seed"]) + epoch
        kwargs.update({k: v for k, v in sampling.items() if k not in caps.dropped})
        if "temperature" not in caps.dropped:
            kwargs["temperature"] = s.temperature
        effort = self._effort(role)
        if effort and "reasoning_effort" not in caps.dropped:
            kwargs["reasoning_effort"] = effort
        return kwargs

    def _create(
        self,
        messages: list[dict[str, Any]],
        role: str = "",
        budget: int | None = None,
        ask: _Asking | None = None,
    ) -> Any:
        """One chat completion. A 400 that names a parameter this endpoint does not take adapts the
        request once and is remembered (max_tokens -> max_completion_tokens, temperature / top_p /
        reasoning_effort left out); any other 400 is retried once without response_format."""
        import openai

        from tasks.llm import deadline

        plain = ask is not None and not ask.json_mode  # this request goes without response_format
        epoch = ask.epoch if ask is not None else 0
        with self._sem:
            while True:
                kwargs = self._wire(messages, role, budget or self.settings.output_budget(role), epoch)
                json_mode = self._json_mode and not plain
                self.stats.add(calls=1)
                try:
                    with deadline.deadline(self.settings.timeout_s):
                        completion = self._openai.chat.completions.create(
                            **kwargs, **({"response_format": JSON_MODE} if json_mode else {})
                        )
                except openai.BadRequestError as exc:
                    change = self._caps.adapt(self.describe(exc), kwargs)
                    if change:
                        log.warning("endpoint rejected a parameter (%s): %s", self.describe(exc), change)
                        continue
                    if json_mode:
                        log.warning(
                            "endpoint rejected a request with response_format=json_object (%s); retrying "
                            "once without it",
                            self.describe(exc),
                        )
                        plain = True
                        continue
                    raise  # about something else: keep JSON mode for later requests
                if plain and self._json_mode and (ask is None or ask.json_mode):
                    log.warning("endpoint accepts requests without response_format: not sending it again")
                    self._json_mode = False
                return completion

    @staticmethod
    def _reply_text(completion: Any) -> str:
        choices = getattr(completion, "choices", None) or []
        if not choices:
            raise InvalidOutput("the response had no choices")
        choice = choices[0]
        if not hasattr(choice, "message"):
            raise InvalidOutput("the first choice is not an object")
        content = getattr(choice.message, "content", None) if choice.message is not None else None
        if content is not None and not isinstance(content, str):
            raise InvalidOutput("the reply content was not text")
        if getattr(choice, "finish_reason", None) == "length":
            raise InvalidOutput(
                "output truncated at the token limit (finish_reason=length)", content, truncated=True
            )
        if not content or not content.strip():
            # a reasoning model's thoughts (reasoning_content, vLLM / DeepSeek) are never the answer
            if getattr(choice.message, "reasoning_content", None):
                raise InvalidOutput("the reply holds only reasoning (reasoning_content), no answer")
            raise InvalidOutput("the reply was empty")
        return content

    def complete_json(
        self,
        role: str,
        messages: Sequence[dict[str, Any]],
        schema: type[T],
        ctx: StepContext | None,
        *,
        check: Callable[[T], Any] | None = None,
        on_length: str = "grow",
    ) -> LLMResult[T]:
        """Ask for one JSON object and return it validated against `schema`.

        `check` may apply further rules to the validated value: raising ValueError (pydantic's
        ValidationError included) makes the reply invalid, like a schema violation. `on_length` says
        what a reply cut at the output budget leads to: "split" raises LLMTruncatedError at once (the
        caller splits its input), "grow" asks once more with the budget doubled, then raises it.
        """
        return self._complete(role, messages, lambda t: parse_reply(t, schema, check), ctx, on_length, True)

    def complete_text(
        self,
        role: str,
        messages: Sequence[dict[str, Any]],
        read: Callable[[str], T],
        ctx: StepContext | None,
        *,
        epoch: int = 0,
    ) -> LLMResult[T]:
        """Ask for a plain-text (Markdown) reply, without JSON mode, and return `read(reply)`: `read`
        raising ValueError (pydantic's ValidationError included) makes the reply invalid, answered by a
        corrective turn like a JSON reply's. Cached, retried, scrubbed and counted as `complete_json`.
        `epoch` > 0 asks for another sample of the same request: it keys the cache (and shifts a seed
        the system sets), so K epochs are K replies, not one reply read K times."""
        return self._complete(role, messages, lambda t: parse_text(t, read), ctx, "grow", False, epoch)

    def _complete(
        self,
        role: str,
        messages: Sequence[dict[str, Any]],
        parse: Callable[[str], T],
        ctx: StepContext | None,
        on_length: str,
        json_mode: bool,
        epoch: int = 0,
    ) -> LLMResult[T]:
        """One validated reply (complete_json / complete_text): cache, replies, corrective turns."""
        s = self.settings
        messages = [dict(m) for m in messages]
        key = request_hash(role, s.model, messages, self._params(role, json_mode, epoch))
        cached = self._cached_reply(key, role, parse, ctx)
        if cached is not None:
            return cached

        # one larger budget at most, and only when asked for
        ask = _Asking(list(messages), s.output_budget(role), on_length != "grow", s.model, json_mode, epoch)
        max_attempts = s.invalid_retries + 1
        while ask.attempt < max_attempts:
            ask.attempt += 1
            ask.replies += 1
            completion = self._with_retries(lambda a=ask: self._create(a.convo, role, a.budget, a), role, ctx)
            p = self._count_usage(completion, ask)
            try:
                # an endpoint that echoes a key back never gets it into a reply, a cache entry or a report
                text = self.scrub(self._reply_text(completion))
                value = parse(text)
            except InvalidOutput as problem:
                if problem.truncated:
                    self._grow_budget(ask, p, role, ctx)  # raises LLMTruncatedError when it cannot
                    continue
                self._correct(ask, problem, role, ctx, max_attempts)
                continue
            return self._answered(key, role, text, value, ask)
        raise LLMOutputError(
            f"{self.where(role, ctx)}: invalid output after {max_attempts} attempts: {one_line(ask.reason)}"
        )

    def _cached_reply(
        self, key: str, role: str, parse: Callable[[str], T], ctx: StepContext | None
    ) -> LLMResult[T] | None:
        """The cached reply to this request, if there is one and it still validates."""
        entry = self.cache.get(key)
        if entry is None or entry.kind != "chat" or entry.text is None:
            return None
        try:
            value = parse(entry.text)
        except InvalidOutput as exc:
            log.warning(
                "%s: cached reply %s no longer validates (%s); asking again",
                self.where(role, ctx),
                key[:12],
                exc.reason,
            )
            return None
        self.stats.add(hits=1)
        log.debug("%s: cache hit %s", self.where(role, ctx), key[:12])
        return LLMResult(
            value=value,
            text=entry.text,
            prompt_tokens=entry.prompt_tokens,
            completion_tokens=entry.completion_tokens,
            cached=True,
            request_hash=key,
            model=entry.model,
            attempts=entry.attempts,
        )

    def _count_usage(self, completion: Any, ask: _Asking) -> int:
        """Add a reply's token usage to the call's and the process' counts; the reply's prompt tokens."""
        usage = getattr(completion, "usage", None)
        p = int(getattr(usage, "prompt_tokens", 0) or 0)
        c = int(getattr(usage, "completion_tokens", 0) or 0)
        ask.prompt_tokens += p
        ask.completion_tokens += c
        self.stats.add(prompt=p, completion=c)
        ask.model = getattr(completion, "model", None) or ask.model
        return p

    def _grow_budget(self, ask: _Asking, p: int, role: str, ctx: StepContext | None) -> None:
        """After a reply cut at the output budget: a larger budget for the same prompt, once, when
        the call may grow and the context has room; LLMTruncatedError otherwise."""
        budget = ask.budget
        room = self.settings.context_tokens - (p or 0) - 64  # what the context leaves beside this prompt
        if not ask.grown and min(2 * budget, room) > budget:
            ask.grown, ask.attempt = True, ask.attempt - 1  # not a corrective retry: same prompt, more room
            log.warning(
                "%s: the reply reached the output budget of %d tokens; asking once more with %d",
                self.where(role, ctx),
                budget,
                min(2 * budget, room),
            )
            ask.budget = min(2 * budget, room)
            return
        setting = f"llm.max_output_tokens_by_role.{role}" if role else "llm.max_output_tokens"
        raise LLMTruncatedError(
            f"{self.where(role, ctx)}: the reply reached the output budget of {budget} tokens "
            f"(finish_reason=length); raise {setting} or use a model with a larger output",
            budget,
        ) from None

    def _correct(
        self, ask: _Asking, problem: InvalidOutput, role: str, ctx: StepContext | None, max_attempts: int
    ) -> None:
        """After an invalid reply: the reply and a message naming its problem join the conversation."""
        ask.reason = self.scrub(problem.reason)
        log.warning(
            "%s: invalid output on attempt %d of %d: %s",
            self.where(role, ctx),
            ask.attempt,
            max_attempts,
            one_line(ask.reason),
            # a retry that succeeds needs no word on a quiet terminal, and a last failure is the step's,
            # which the command says in its own line: the log keeps this (flows.settings.SAID_BY_FRAME)
            extra={"frame_said": True},
        )
        if problem.text:
            ask.convo = [*ask.convo, {"role": "assistant", "content": echo_reply(self.scrub(problem.text))}]
        ask.convo = [*ask.convo, {"role": "user", "content": corrective_message(problem, ask.json_mode)}]

    def _answered(self, key: str, role: str, text: str, value: T, ask: _Asking) -> LLMResult[T]:
        """A validated reply: cached, then returned."""
        self.cache.put(
            key,
            CacheEntry(
                kind="chat",
                model=ask.model,
                role=role,
                text=text,
                prompt_tokens=ask.prompt_tokens,
                completion_tokens=ask.completion_tokens,
                attempts=ask.replies,
            ),
        )
        return LLMResult(
            value=value,
            text=text,
            prompt_tokens=ask.prompt_tokens,
            completion_tokens=ask.completion_tokens,
            cached=False,
            request_hash=key,
            model=ask.model,
            attempts=ask.replies,
        )

    # -- embeddings

    def embed(
        self, texts: Sequence[str], model: str, *, ctx: StepContext | None = None, role: str = "embed"
    ) -> list[list[float]]:
        """Embedding vectors for `texts` (order kept), cached per (endpoint, model, text)."""
        from tasks.llm import deadline

        texts = list(texts)
        keys = [embedding_hash(model, t, endpoint_of(self.settings)) for t in texts]
        found: dict[str, list[float]] = {}
        missing: dict[str, str] = {}  # key -> text, first occurrence wins (duplicates asked once)
        hits = 0
        for key, text in zip(keys, texts, strict=True):
            if key in found or key in missing:
                continue
            entry = self.cache.get(key)
            if entry is not None and entry.kind == "embedding" and entry.embedding is not None:
                found[key] = [float(x) for x in entry.embedding]
                hits += 1
            else:
                missing[key] = text
        self.stats.add(hits=hits)
        pending = list(missing.items())
        for start in range(0, len(pending), EMBED_BATCH):
            batch = pending[start : start + EMBED_BATCH]
            inputs = [t for _, t in batch]

            def call(inputs=inputs) -> Any:
                with self._sem, deadline.deadline(self.settings.timeout_s):
                    self.stats.add(calls=1)
                    return self._openai.embeddings.create(input=inputs, model=model, encoding_format="float")

            response = self._with_retries(call, role, ctx)
            data = sorted(getattr(response, "data", None) or [], key=lambda d: d.index)
            if len(data) != len(batch) or [d.index for d in data] != list(range(len(batch))):
                raise LLMOutputError(
                    f"{self.where(role, ctx)}: invalid embeddings response: asked for {len(batch)} "
                    f"embeddings, got {len(data)}"
                )
            usage = getattr(response, "usage", None)
            self.stats.add(prompt=int(getattr(usage, "prompt_tokens", 0) or 0))
            for (key, _), item in zip(batch, data, strict=True):
                vector = item.embedding
                if not isinstance(vector, list) or not vector:
                    raise LLMOutputError(
                        f"{self.where(role, ctx)}: invalid embeddings response: embedding "
                        f"{item.index} is not a list of floats (is encoding_format=float supported?)"
                    )
                vector = [float(x) for x in vector]
                found[key] = vector
                self.cache.put(
                    key,
                    CacheEntry(
                        kind="embedding", model=getattr(response, "model", None) or model, embedding=vector
                    ),
                )
        return [found[k] for k in keys]
