"""Before the first step: every LLM role a command will use has its key, and its endpoint answers.

A missing `api_key_env` variable used to surface after every instance had failed; an endpoint that does
not answer, after the first step's retries. `preflight` checks each role once, up front, and raises one
`FrameInputError` naming the role and what is wrong. The endpoint check is one cheap request (GET
<base_url>/models, a few seconds at most): any HTTP answer but 401/403 counts as reachable (servers
without a model list answer 404 or 501); `--no-preflight` skips it (the key check stays).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from schemas.config import LLMSettings
from tasks.errors import FrameInputError
from tasks.llm import redact

__all__ = ["PREFLIGHT_TIMEOUT_S", "preflight"]

PREFLIGHT_TIMEOUT_S = 10.0


def _reach(where: str, s: LLMSettings, key: str) -> None:
    from tasks.llm.deadline import deadline, http_client, http_errors

    url = (s.base_url or "https://api.openai.com/v1").rstrip("/") + "/models"
    limit = min(PREFLIGHT_TIMEOUT_S, s.timeout_s)
    client = http_client(timeout=limit)
    try:  # the whole request within `limit`, even from a server that drips its answer
        with client, deadline(limit):
            res = client.get(url, headers={"Authorization": f"Bearer {key}"})
    except http_errors(client) as exc:
        raise FrameInputError(
            where, f"endpoint {s.base_url} does not answer ({type(exc).__name__}); check base_url"
        ) from None
    if res.status_code in (401, 403):
        raise FrameInputError(
            where, f"endpoint {s.base_url} refused the key in {s.api_key_env} (HTTP {res.status_code})"
        )


def preflight(roles: Mapping[str, LLMSettings], *, reach: bool = True) -> None:
    """Check every role (name -> its settings; offline ones are skipped): the key's variable is set, and
    (`reach`) the endpoint answers. Every key found is registered as a secret first."""
    online = {name: s for name, s in roles.items() if s.backend == "openai"}
    redact.register_env(s.api_key_env for s in online.values())
    for name, s in online.items():
        if not os.environ.get(s.api_key_env, "").strip():
            raise FrameInputError(f"{name}.api_key_env", f"environment variable {s.api_key_env} is not set")
    if not reach:
        return
    seen: set[tuple[str, str]] = set()
    for name, s in online.items():
        key = (s.base_url or "", s.api_key_env)
        if key not in seen:
            seen.add(key)
            _reach(f"{name}.base_url", s, os.environ[s.api_key_env].strip())
