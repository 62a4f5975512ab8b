"""Every secret this process knows (the API keys of the LLM roles), and their removal from text.

A key is registered when a client reads it from the environment (`LLMClient`) and, up front, for every
role a command will use (`register_env`), so that a reply, error body, log line or record that carries a
key another role knows is scrubbed too. The names of those variables travel in FRAME_SECRET_ENVS, so that
worker processes (Dask) scrub the same keys. Only whole values are replaced: a key is a token, so "x" as
a key leaves "Expecting value" alone (docs/security.md).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable

__all__ = [
    "ENV_NAMES",
    "REDACTED",
    "key_envs",
    "known",
    "register",
    "register_env",
    "scrub",
    "scrub_data",
]

REDACTED = "[redacted]"
_KEY_CHARS = "A-Za-z0-9"  # a secret is a whole value: not part of a longer run of these characters
_lock = threading.Lock()
_secrets: set[str] = set()
_pattern: re.Pattern[str] | None = None


def register(value: str | None) -> None:
    """Remember `value` (stripped) as a secret of this process."""
    global _pattern
    value = (value or "").strip()
    if not value:
        return
    with _lock:
        if value in _secrets:
            return
        _secrets.add(value)
        alternatives = "|".join(re.escape(s) for s in sorted(_secrets, key=len, reverse=True))
        _pattern = re.compile(rf"(?<![{_KEY_CHARS}])(?:{alternatives})(?![{_KEY_CHARS}])")


ENV_NAMES = "FRAME_SECRET_ENVS"  # comma-separated names of the variables holding keys (never values)


def register_env(names: Iterable[str]) -> None:
    """Register the values of the environment variables `names` (unset ones are skipped), and add the
    names to FRAME_SECRET_ENVS for the processes this one starts."""
    names = [n for n in names if n]
    listed = [n for n in os.environ.get(ENV_NAMES, "").split(",") if n]
    os.environ[ENV_NAMES] = ",".join(dict.fromkeys([*listed, *names]))
    for name in names:
        register(os.environ.get(name))


def key_envs(config: object) -> list[str]:
    """Every `api_key_env` value in a config's data (nested dicts and lists: every role and system),
    whether or not this command uses that role: a key is a secret wherever it turns up."""
    found: list[str] = []
    if isinstance(config, dict):
        for k, v in config.items():
            if k == "api_key_env" and isinstance(v, str):
                found.append(v)
            else:
                found += key_envs(v)
    elif isinstance(config, list | tuple):
        for v in config:
            found += key_envs(v)
    return list(dict.fromkeys(found))


def _from_env() -> None:
    for name in os.environ.get(ENV_NAMES, "").split(","):
        if name:
            register(os.environ.get(name))


def known() -> int:
    """How many secrets are registered (tests, diagnostics)."""
    with _lock:
        return len(_secrets)


def scrub(text: str) -> str:
    """`text` with every registered secret, as a whole value, replaced by [redacted]."""
    text = str(text)
    _from_env()
    pattern = _pattern
    return pattern.sub(REDACTED, text) if pattern is not None and text else text


def scrub_data(value: object) -> object:
    """`value` (JSON-like: dicts, lists, strings) with every string scrubbed."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {k: scrub_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_data(v) for v in value]
    return value
