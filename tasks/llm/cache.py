"""On-disk cache of LLM responses, keyed by a hash of the request.

Layout: ``<cache_dir>/llm/<first two hex digits>/<sha256>.json``. The hash covers everything that
decides the answer (endpoint URL, role, model, messages, sampling parameters, response format) and
nothing else; in particular never the API key or headers. The endpoint is part of it: two servers
naming the same model ("llama3" quantised locally and hosted) are two systems. Each entry stores the
raw completion text (or an embedding vector), token usage, the model name the server reported and
when it was written.

Entries are written atomically (temporary file in the same folder, then ``os.replace``), so a
crash or a concurrent writer never leaves a half-written entry. An entry that cannot be read
back (bad JSON, wrong shape) is logged and treated as a miss; the next successful call
overwrites it. Only validated results are stored: the client calls ``put`` after validation.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tasks.atomic import atomic_write_text

log = logging.getLogger(__name__)

CACHE_FORMAT = 1
_HEX = frozenset("0123456789abcdef")


def canonical_json(data: Any) -> str:
    """Deterministic JSON: sorted keys, no whitespace, UTF-8 kept as is."""
    return json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def request_hash(role: str, model: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of one chat request (role name, model, messages, parameters)."""
    payload = {"kind": "chat", "role": role, "model": model, "messages": messages, "params": params}
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


def embedding_hash(model: str, text: str, endpoint: str = "") -> str:
    """sha256 of one text's embedding request (per text, so batches can be cached piecewise)."""
    payload = {"kind": "embedding", "model": model, "text": text}
    if endpoint:
        payload["endpoint"] = endpoint
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


@dataclass
class CacheEntry:
    """One cached response. `text` for chat completions, `embedding` for embeddings."""

    kind: str  # "chat" | "embedding"
    model: str
    role: str = ""
    text: str | None = None
    embedding: list[float] | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = 1
    created: float = field(default_factory=time.time)
    format: int = CACHE_FORMAT

    @classmethod
    def from_json(cls, data: Any) -> CacheEntry:
        if not isinstance(data, dict):
            raise ValueError("entry is not a JSON object")
        if data.get("format") != CACHE_FORMAT:
            raise ValueError(f"unknown cache format {data.get('format')!r}")
        kind = data.get("kind")
        if kind == "chat" and not isinstance(data.get("text"), str):
            raise ValueError("chat entry without text")
        if kind == "embedding":
            vec = data.get("embedding")
            if not isinstance(vec, list) or not all(isinstance(x, int | float) for x in vec):
                raise ValueError("embedding entry without a vector")
        if kind not in ("chat", "embedding"):
            raise ValueError(f"unknown entry kind {kind!r}")
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        entry = cls(**known)
        for name in ("prompt_tokens", "completion_tokens", "attempts"):
            if not isinstance(getattr(entry, name), int):
                raise ValueError(f"{name} is not an integer")
        return entry


class ResponseCache:
    """File-per-entry cache under ``<cache_dir>/llm``. Safe to share between threads and processes."""

    def __init__(self, cache_dir: str | Path) -> None:
        self.root = Path(cache_dir) / "llm"

    def path(self, key: str) -> Path:
        if len(key) != 64 or not set(key) <= _HEX:
            raise ValueError(f"not a sha256 hex digest: {key!r}")
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> CacheEntry | None:
        """The entry for `key`, or None on a miss or an unreadable entry (logged)."""
        path = self.path(key)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("LLM cache entry %s unreadable (%s); treating as a miss", path, exc.strerror)
            return None
        try:
            # Decoding is part of the check: garbage bytes (not UTF-8) are a corrupt entry, not a crash.
            return CacheEntry.from_json(json.loads(raw.decode("utf-8")))
        except (ValueError, TypeError) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            log.warning("LLM cache entry %s is corrupt (%s); treating as a miss", path, reason)
            return None

    def put(self, key: str, entry: CacheEntry) -> Path:
        """Write `entry` atomically; returns its path."""
        path = self.path(key)
        atomic_write_text(path, json.dumps(asdict(entry), ensure_ascii=False, sort_keys=True, indent=1))
        return path

    def discard(self, key: str) -> None:
        self.path(key).unlink(missing_ok=True)
