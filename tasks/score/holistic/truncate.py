"""Fitting texts into a judge's context window, shared by the holistic and the pairwise LLM judges: the
room a request leaves for its texts, cuts at line boundaries, and fair shares of the room between texts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from tasks.score.llm_judge import LLMJudge
from tasks.tokens import count_tokens, count_tokens_many, get_encoder

NOTE_ALLOWANCE = 200  # tokens kept for the truncation note, rendered after the cuts
MIN_TEXT_TOKENS = 64  # below this a report excerpt is useless: refuse instead of judging nothing


def prompt_room(judge: LLMJudge, texts: int, **blank: str) -> int:
    """Tokens left for the `texts` texts of one request of the judge's first role: its room
    (`LLMJudge.room`, the prompt rendered with empty `blank` variables) less the truncation note's
    allowance; at least MIN_TEXT_TOKENS per text, else the one-line input error naming the settings."""
    role = judge.ROLES[0]
    return judge.room(role, texts * MIN_TEXT_TOKENS, "the reports", spare=NOTE_ALLOWANCE, **blank)


def cut_to_tokens(text: str, max_tokens: int) -> tuple[str, bool]:
    """The longest prefix of `text` ending at a line boundary within `max_tokens` tokens, and whether it
    was cut. A cut text ends with a marker line saying how many lines are shown; if even the first line
    does not fit it is cut at a word boundary (never mid-word)."""
    if count_tokens(text) <= max_tokens:
        return text, False
    lines = text.split("\n")
    marker_room = 24  # the marker line itself
    room = max(0, max_tokens - marker_room)
    sizes = count_tokens_many(lines)
    used, kept = 0, 0
    for size in sizes:
        if used + size + 1 > room:  # +1: the newline joining lines
            break
        used += size + 1
        kept += 1
    if kept:
        head = "\n".join(lines[:kept]).rstrip()
    else:
        enc = get_encoder()
        head = enc.decode(enc.encode_ordinary(lines[0])[:room])
        head = head[: head.rfind(" ")] if " " in head else ""
    marker = f"[... cut here: {kept} of {len(lines)} lines shown ...]"
    return (f"{head}\n{marker}" if head else marker), True


def proportional_caps(sizes: Sequence[int], room: int) -> list[int]:
    """Token caps for texts of `sizes` sharing `room`: everything when it fits, else each text the same
    fraction of its size (so relative lengths stay visible)."""
    total = sum(sizes)
    if total <= room:
        return list(sizes)
    return [int(room * s / total) if total else 0 for s in sizes]


def water_fill(sizes: Sequence[int], room: int) -> list[int]:
    """Caps for `sizes` sharing `room` fairly: texts below the running equal share are kept whole, the
    rest get an equal share of what remains (max-min fairness)."""
    caps = [0] * len(sizes)
    left = room
    pending = sorted(range(len(sizes)), key=lambda i: sizes[i])
    while pending:
        share = left // len(pending)
        i = pending[0]
        if sizes[i] <= share:
            caps[i] = sizes[i]
            left -= sizes[i]
            pending.pop(0)
            continue
        for j in pending:
            caps[j] = share
        break
    return caps


class TextsJudge(LLMJudge):
    """An LLM judge whose one request (role ROLES[0]) carries `TEXTS` whole texts, cut to fit when needed
    (the holistic and the pairwise judge)."""

    TEXTS: ClassVar[int] = 1

    def _room(self) -> int:
        """Tokens for the texts: `prompt_room` with every variable of the prompt blank."""
        blank = dict.fromkeys(self.prompts[self.ROLES[0]].placeholders, "")
        return prompt_room(self, self.TEXTS, **blank)
