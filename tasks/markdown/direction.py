"""The direction a statement gives a quantity: up (increase, rose, grew, higher, gain, up) or down
(decrease, fell, declined, lower, loss, down). The offline coverage and faithfulness judges compare it:
a statement of the opposite direction to its support is not support.

Specification: docs/metrics/numbers.md ("Direction").
"""

from __future__ import annotations

import re

__all__ = ["DOWN", "UP", "direction", "opposite"]

UP, DOWN = 1, -1

_UP_WORDS = (
    r"increas(?:e|es|ed|ing)|ris(?:e|es|ing|en)|rose|gr(?:ow|ows|owing|own|ew)|growth|higher|"
    r"gain(?:s|ed|ing)?|climb(?:s|ed|ing)?|jump(?:s|ed|ing)?|surg(?:e|es|ed|ing)|soar(?:s|ed|ing)?|"
    r"rall(?:y|ies|ied)|expand(?:s|ed|ing)?|expansion|improv(?:e|es|ed|ing|ement)|accelerat(?:e|es|ed|ing)"
)
_DOWN_WORDS = (
    r"decreas(?:e|es|ed|ing)|declin(?:e|es|ed|ing)|f(?:all|alls|alling|allen|ell)|lower|"
    r"loss(?:es)?|los(?:e|es|ing)|lost|drop(?:s|ped|ping)?|dipp?(?:s|ed|ing)?|plung(?:e|es|ed|ing)|"
    r"slump(?:s|ed|ing)?|shr(?:ink|inks|inking|ank|unk)|contract(?:ed|ing)|contraction|reduc(?:e|es|ed|ing)|"
    r"reduction|slid|slipp?(?:s|ed|ing)?|deteriorat(?:e|es|ed|ing|ion)|weaken(?:s|ed|ing)?"
)
_WORD = re.compile(rf"\b(?:(?P<up>{_UP_WORDS})|(?P<down>{_DOWN_WORDS}))\b", re.I)
# "up" / "down" only where they state a change: "up 12%", "was down", "down from"; never "set up", "up to"
_ADVERB = re.compile(
    r"(?:\b(?:was|were|is|are|been|being|came|ended|closed|trended)\s+|,\s*)(?P<adv>up|down)\b"
    r"|\b(?P<adv2>up|down)\s+(?=[$€£¥(\-−]?\d|from\b|by\b|(?:year|quarter|period)[- ]over\b|sharply|slightly"
    r"|significantly|modestly)",
    re.I,
)
_NEGATION = re.compile(r"\b(?:not|no|never|neither|nor|without)\s+(?:\w+\s+)?$|n[’']t\s+(?:\w+\s+)?$", re.I)
_NOT_A_CHANGE = re.compile(r"^\s+of\s+(?:cost|the)\b|^\s+(?:bound|case|level|court|tier)\b", re.I)


def direction(text: str) -> int:
    """UP, DOWN, or 0 when `text` states no change or changes both ways ("revenue grew while costs
    fell"): only a single-direction statement has a direction. A negated word ("did not increase") is no
    direction; "lower of cost or market" and "up to $500 million" are not changes."""
    seen: set[int] = set()
    for m in _WORD.finditer(text):
        if _NEGATION.search(text[max(0, m.start() - 30) : m.start()]):
            continue
        if m.group(0).lower() in ("lower", "higher") and _NOT_A_CHANGE.match(text[m.end() : m.end() + 20]):
            continue
        seen.add(UP if m.group("up") else DOWN)
    for m in _ADVERB.finditer(text):
        word = (m.group("adv") or m.group("adv2")).lower()
        at = m.start("adv") if m.group("adv") else m.start("adv2")
        if _NEGATION.search(text[max(0, at - 30) : at]):
            continue
        seen.add(UP if word == "up" else DOWN)
    return seen.pop() if len(seen) == 1 else 0


def opposite(a: str, b: str) -> bool:
    """Whether `a` and `b` state opposite directions (each a single one)."""
    da = direction(a)
    return da != 0 and da == -direction(b)
