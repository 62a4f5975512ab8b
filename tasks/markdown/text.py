"""Plain-text helpers every reader of Markdown prose shares: sentence splitting and content terms."""

from __future__ import annotations

import re

__all__ = ["STOPWORDS", "split_sentences", "terms"]

_WORD = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)*")

STOPWORDS = frozenset(
    """a about above after again all also am an and any are as at be because been before being below
    between both but by can could did do does doing during each few for from further had has have having
    he her here hers how i if in into is it its itself just me more most my no nor not now of off on once
    only or other our ours out over own same she should so some such than that the their theirs them then
    there these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours per via s t
    """.split()
)


# ---------------------------------------------------------------- tokens and sentences


def terms(text: str) -> list[str]:
    """Index/query terms: lower-case words and numbers, stop words dropped, plural 's' stripped."""
    out = []
    for w in _WORD.findall(text.lower()):
        if w in STOPWORDS:
            continue
        if len(w) > 3 and w.endswith("s") and not w.endswith("ss") and not w[0].isdigit():
            w = w[:-1]
        out.append(w)
    return out


_SENT_END = re.compile(r"(?<=[.!?])(?P<close>[\"”’)\]]*)\s+(?=[\"“‘(\[$]?[A-Z0-9])")
_ABBREV = re.compile(
    r"(?:\b(?:e\.g|i\.e|et al|etc|vs|cf|approx|Fig|Figs|Eq|Eqs|Sec|Secs|Ref|Refs|Tab|No|Nos|Inc|Co|Corp|Ltd|"
    r"Dr|Mr|Ms|Mrs|St|Jr|Sr|resp|viz|ca|al|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\.|"
    r"\b[A-Z]\.|\b(?:[A-Za-z]\.){2,})$"
)


def split_sentences(text: str) -> list[str]:
    """Sentences of a paragraph, each a verbatim stripped substring (abbreviations, initials and decimals
    do not end a sentence; nothing is split inside `$...$` math)."""
    text = text.strip()
    if not text:
        return []
    cuts = []
    for m in _SENT_END.finditer(text):
        head = text[: m.start()].rstrip('"”’)]')
        if _ABBREV.search(head):
            continue
        if text.count("$", 0, m.start()) % 2:  # inside inline math
            continue
        cuts.append((m.end("close"), m.end()))
    out, start = [], 0
    for a, b in cuts:
        seg = text[start:a].strip()
        if seg:
            out.append(seg)
        start = b
    last = text[start:].strip()
    if last:
        out.append(last)
    return out


# ---------------------------------------------------------------- Markdown -> blocks
