"""The normalised edit distance of two reports' whole texts (paper 002; 0 = identical)."""

from __future__ import annotations

import re

from rapidfuzz.distance import Levenshtein

_WS = re.compile(r"\s+")


def normalise_text(markdown: str) -> str:
    return _WS.sub(" ", markdown.replace("$", "")).strip()


def text_edit_distance(gold_markdown: str, generated_markdown: str) -> float:
    """Levenshtein / max(len, 1) of the normalised whole-report texts (0 = identical)."""
    a, b = normalise_text(gold_markdown), normalise_text(generated_markdown)
    return Levenshtein.distance(a, b) / max(len(a), len(b), 1)
