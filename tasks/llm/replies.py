"""Reading one chat reply: reasoning set aside, JSON found and parsed leniently, the schema and the
step's check applied (or, for a plain reply, its Markdown read: `parse_text`, `plain_markdown`)
(tasks.llm.client sends the requests; this module only reads what came back).

Reasoning blocks (`<think>` and the like) are never parsed; code fences, raw newlines in strings and
text around the object are tolerated, as models write them without JSON mode (docs/endpoints.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from tasks.markdown.document import hash_line

T = TypeVar("T", bound=BaseModel)

ECHO_CHARS = 8000  # longest invalid reply echoed back verbatim in a corrective turn
_REASON_CHARS = 240


class InvalidOutput(Exception):
    """A reply that cannot be used; `text` is the raw reply (None when there was none)."""

    def __init__(self, reason: str, text: str | None = None, truncated: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.text = text
        self.truncated = truncated


_FENCED = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\r?\n(.*?)```", re.S)
# What reasoning models write before their answer, in the reply text itself (DeepSeek-R1, Qwen3 and others
# served without a reasoning parser): never the answer, and often a JSON draft of it.
_REASONING = re.compile(r"<(think|thinking|reasoning)>.*?</\1\s*>", re.S | re.I)
_REASONING_OPEN = re.compile(r"\s*<(?:think|thinking|reasoning)>", re.I)
_REASONING_CLOSE = re.compile(r"</(?:think|thinking|reasoning)\s*>", re.I)


def drop_reasoning(text: str) -> str:
    """The reply without its reasoning blocks (`<think>...</think>` and the like); "" when the reply is
    a reasoning block that never closed (the answer was never written). A closing tag whose opening tag
    the server already removed ends the reasoning too."""
    t = _REASONING.sub("", text)
    if _REASONING_OPEN.match(t):
        return ""
    closes = list(_REASONING_CLOSE.finditer(t))
    return t[closes[-1].end() :] if closes else t


def strip_fences(text: str) -> str:
    """The JSON inside a reply: drops ```json fences and any chatter around one object."""
    t = text.strip()
    m = _FENCED.search(t)
    if m:
        t = m.group(1).strip()
    elif t.startswith("```"):  # an opening fence whose closing fence was never written
        t = t.split("\n", 1)[1].strip() if "\n" in t else ""
    if t and t[0] not in "{[":
        start, end = t.find("{"), t.rfind("}")
        if start != -1 and end > start:
            t = t[start : end + 1]
    return t


def summarise_validation(exc: ValidationError, limit: int = 3) -> str:
    """The first `limit` errors as 'field.path: message'."""
    errors = exc.errors(include_url=False)
    parts = []
    for err in errors[:limit]:
        where = ".".join(str(p) for p in err.get("loc", ())) or "(top level)"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    more = f" (+{len(errors) - limit} more)" if len(errors) > limit else ""
    return "; ".join(parts) + more


def one_line(text: str, limit: int = _REASON_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# strict=False: raw newlines and tabs inside strings, as models write them without JSON mode
_LENIENT = json.JSONDecoder(strict=False)


def _decode(body: str) -> Any:
    """The JSON value of `body`; else the first object in it, text after its closing brace ignored."""
    try:
        return _LENIENT.decode(body)
    except json.JSONDecodeError as first:
        start = body.find("{")
        if start == -1:
            raise
        try:
            return _LENIENT.raw_decode(body, start)[0]
        except json.JSONDecodeError:
            raise first from None


def parse_reply(text: str, schema: type[T], check: Callable[[T], Any] | None = None) -> T:
    """Parse and validate one reply; raises InvalidOutput with a short reason. Reasoning blocks are set
    aside first and never parsed; code fences, raw newlines in strings and text around the object are
    tolerated."""
    answer = drop_reasoning(text)
    if not answer.strip() and text.strip():
        raise InvalidOutput("the reply holds only reasoning, no answer after it", text)
    body = strip_fences(answer)
    if not body:
        raise InvalidOutput("the reply was empty", text)
    try:
        data = _decode(body)
    except json.JSONDecodeError as exc:
        raise InvalidOutput(
            f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})", text
        ) from None
    if not isinstance(data, dict):
        raise InvalidOutput(f"expected one JSON object, got a JSON {type(data).__name__}", text)
    try:
        value = schema.model_validate(data)
    except ValidationError as exc:
        raise InvalidOutput(f"does not match the required shape: {summarise_validation(exc)}", text) from None
    if check is not None:
        try:
            check(value)
        except ValidationError as exc:
            raise InvalidOutput(summarise_validation(exc), text) from None
        except ValueError as exc:
            raise InvalidOutput(one_line(str(exc) or type(exc).__name__), text) from None
    return value


def echo_reply(text: str) -> str:
    """The invalid reply as sent back to the model (very long replies shortened, and marked so)."""
    if len(text) <= ECHO_CHARS:
        return text
    return (
        text[: ECHO_CHARS // 2]
        + f"\n[... {len(text) - ECHO_CHARS} characters omitted ...]\n"
        + text[-ECHO_CHARS // 2 :]
    )


def parse_text(text: str, read: Callable[[str], T]) -> T:
    """Read one plain-text reply: reasoning blocks set aside, then `read(answer)`; a ValueError from it
    (pydantic's ValidationError included) is an InvalidOutput with a short reason."""
    answer = drop_reasoning(text)
    if not answer.strip():
        reason = (
            "the reply holds only reasoning, no answer after it" if text.strip() else "the reply was empty"
        )
        raise InvalidOutput(reason, text)
    try:
        return read(answer)
    except ValidationError as exc:
        raise InvalidOutput(summarise_validation(exc), text) from None
    except ValueError as exc:
        raise InvalidOutput(one_line(str(exc) or type(exc).__name__), text) from None


_OUTER_FENCE = re.compile(
    r"\A```[ \t]*(?:markdown|md|MARKDOWN|Markdown)?[ \t]*\r?\n(.*?)\r?\n?```[ \t]*\Z", re.S
)


_MARKDOWN_BLOCK = re.compile(r"^```[ \t]*(?:markdown|md)[ \t]*\r?\n(.*?)\r?\n```[ \t]*$", re.S | re.M | re.I)


def _chatter_around_one_block(t: str) -> str | None:
    """The content of the reply's one ```markdown block when the rest is chatter ("Here is the report:")
    with no heading of its own; None otherwise (the reply is then taken as it is)."""
    blocks = list(_MARKDOWN_BLOCK.finditer(t))
    if len(blocks) != 1:
        return None
    outside = t[: blocks[0].start()] + t[blocks[0].end() :]
    if any(hash_line(line) for line in outside.splitlines()):
        return None
    return blocks[0].group(1).strip()


def plain_markdown(text: str, key: str) -> str:
    """The Markdown of a plain reply: the reply itself, with one outer ```markdown (or bare) fence around
    the whole of it removed, or the one ```markdown block of a reply that only chats around it; a reply
    that is exactly one JSON object holding `key` as a string (the wrapper frame once asked for) gives
    that string."""
    t = text.strip()
    m = _OUTER_FENCE.match(t)
    if m:
        t = m.group(1).strip()
    else:
        t = _chatter_around_one_block(t) or t
    if t.startswith("{") and t.endswith("}"):
        try:
            data = _LENIENT.decode(t)
        except json.JSONDecodeError:
            return t
        if isinstance(data, dict) and isinstance(data.get(key), str):
            return data[key]
    return t


def plain_value(schema: type[T], key: str, reply: str) -> T:
    """`schema` holding the Markdown of a plain reply under `key` (plain_markdown); a ValueError saying
    what is wrong with the reply, never naming `key`, a field the model was never asked for."""
    try:
        return schema.model_validate({key: plain_markdown(reply, key)})
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        raise ValueError(str((err.get("ctx") or {}).get("error") or err.get("msg"))) from None


def corrective_message(problem: InvalidOutput, json_mode: bool = True) -> str:
    if not json_mode:
        return (
            f"Your previous reply could not be used: {problem.reason}. Answer again with the Markdown only "
            "(no JSON, no code fence around it), and nothing before or after it."
        )
    return (
        f"Your previous reply could not be used: {problem.reason}. Answer again with exactly one JSON "
        "object that has the required shape, and nothing before or after it."
    )
