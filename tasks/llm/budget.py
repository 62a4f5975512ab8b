"""Token budgets of LLM requests: how much output a role may use and how much input fits beside it.

Prompts are counted with o200k_base (tasks.tokens). Another model's tokenizer may count the same text as
more tokens, so `LLMSettings.token_margin` of the input room is kept free; a corrective turn (the echoed
reply and the correction) needs room too (`reserve`, at most a tenth of the context).
"""

from __future__ import annotations

from collections.abc import Iterable

from schemas.config import LLMSettings

__all__ = ["input_budget", "output_budget", "tokenizer_note"]


def output_budget(settings: LLMSettings, roles: str | Iterable[str]) -> int:
    """The largest output budget of `roles` (a request's reply and its input share one context)."""
    names = [roles] if isinstance(roles, str) else list(roles)
    return max((settings.output_budget(r) for r in names), default=settings.output_budget(""))


def input_budget(settings: LLMSettings, roles: str | Iterable[str], reserve: int) -> int:
    """Tokens (o200k_base) a prompt of `roles` may hold: the context minus the output budget and the
    corrective-turn reserve, less the tokenizer margin. May be <= 0 (the caller names the settings)."""
    reserve = min(reserve, settings.context_tokens // 10)
    room = settings.context_tokens - output_budget(settings, roles) - reserve
    return int(room * (1.0 - settings.token_margin)) if room > 0 else room


def tokenizer_note(settings: LLMSettings) -> str:
    """What the figures assume of the tokenizer (printed by the dry runs)."""
    return (
        f"Token counts are o200k_base (GPT-4o's tokenizer); {settings.token_margin:.0%} of each prompt's "
        "input room is kept free for tokenizers that count more (llm.token_margin)."
    )
