"""LLM backends: the offline default and any OpenAI-compatible endpoint."""

from __future__ import annotations

from pathlib import Path

from schemas.config import LLMSettings
from tasks.llm.backend import Backend


def make_backend(settings: LLMSettings, cache_dir: Path) -> Backend:
    s = settings.resolved()
    if s.backend == "offline":
        from tasks.llm.offline import OfflineBackend

        return OfflineBackend()
    from tasks.llm.openai_backend import OpenAIBackend

    return OpenAIBackend(s, cache_dir)
