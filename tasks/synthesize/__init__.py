"""Gold-report synthesis: structure, questions, outline and fill, from a backend (offline rules or an LLM)."""

from __future__ import annotations

from pathlib import Path

from schemas.config import LLMSettings
from tasks.llm.backend import Backend


def make_backend(settings: LLMSettings, cache_dir: Path) -> Backend:
    """The offline rule-based backend (no model) or an OpenAI-compatible endpoint, as `settings` say."""
    s = settings.resolved()
    if s.backend == "offline":
        from tasks.synthesize.offline import OfflineBackend

        return OfflineBackend()
    from tasks.llm.openai_backend import OpenAIBackend

    return OpenAIBackend(s, cache_dir)
