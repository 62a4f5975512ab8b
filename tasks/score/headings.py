"""Whether two section headings name the same section: close in wording, or both a filing's Form item.

Filers title the same Form item differently ("Management's Discussion and Analysis" and "Management's
Discussion and Analysis of Financial Condition and Results of Operations"; "Quantitative and Qualitative
Disclosures About Market Risk" and "... Disclosure of Market Risks"): the item, not the wording, is the
section. The metric checklist's `heading_retitled` (docs/metrics/robustness.md) holds form metrics to it.
"""

from __future__ import annotations

import re
from functools import lru_cache

from rapidfuzz import fuzz

from tasks.ground.items import ITEMS_10K, ITEMS_10Q

__all__ = ["form_items_of", "same_heading"]

# "Part II, Item 7.", "ITEM 1A —", "Item 2:" before a title (the title is what names the item)
_ITEM_PREFIX = re.compile(
    r"^\s*(?:part\s+[ivx1-4]+\s*[.,:\-—–]*\s*)?items?\s*\d{1,2}\s*[a-c]?\s*[.:\-—–]*\s*", re.I
)


@lru_cache(maxsize=4096)
def form_items_of(title: str) -> frozenset[str]:
    """The Form items (their slugs, 10-K and 10-Q alike) whose title the heading's text starts with."""
    rest = _ITEM_PREFIX.sub("", title.strip())
    return frozenset(it.slug for it in (*ITEMS_10K, *ITEMS_10Q) if it.pattern.match(rest))


def same_heading(a: str, b: str, cutoff: float, normalise=lambda t: t) -> bool:
    """`a` and `b` are the same section: their normalised wording scores >= `cutoff` on rapidfuzz's
    token_sort_ratio, or both name the same Form item."""
    na, nb = normalise(a), normalise(b)
    if na and nb and fuzz.token_sort_ratio(na, nb) >= cutoff:
        return True
    return bool(form_items_of(a) & form_items_of(b))
