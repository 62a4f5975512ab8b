"""Plain-text helpers every reader of Markdown prose shares: sentence splitting and content terms."""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["STOPWORDS", "names", "split_sentences", "terms", "words"]

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


_SENT_END = re.compile(
    r"(?<=[.!?])(?P<close>[\"”’)\]]*)\s+(?=[\"“‘(\[$]?[A-Z0-9])"
    # a lower-case start after a full word ("... $2.4 billion. third-party fees ..."): a list item or
    # paragraph of the source broken off from its lead-in is a sentence of its own
    r"|(?<=[a-z]{3}[.!?])(?P<close2>)\s+(?=[a-z])"
)
# an initial stands alone ("J. Smith"): the "K." of "Form 10-K." or the "E." of "OI&E." ends a sentence
_ABBREV = re.compile(
    r"(?:\b(?:e\.g|i\.e|et al|etc|vs|cf|approx|Fig|Figs|Eq|Eqs|Sec|Secs|Ref|Refs|Tab|No|Nos|Inc|Co|Corp|Ltd|"
    r"Dr|Mr|Ms|Mrs|St|Jr|Sr|resp|viz|ca|al|incl|excl|est|avg|max|min|vol|pp|eds?|"
    r"Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\.|"
    r"(?:^|(?<=[\s(]))[A-Z]\.|\b(?:[A-Za-z]\.){2,})$"
)


# Inline TeX math as pandoc's tex_math_dollars reads it: the opening $ has a non-space on its right, the
# closing $ a non-space on its left and no digit after it, so "$153 million, $247 million" is currency.
_INLINE_MATH = re.compile(r"(?<![\\$])\$(?=[^\s$])(?:[^$\\\n]|\\.)*?(?<=[^\s\\])\$(?![\d$])")


def _in_math(text: str) -> Callable[[int], bool]:
    spans = [m.span() for m in _INLINE_MATH.finditer(text)] if "$" in text else []
    return lambda i: any(a < i < b for a, b in spans)


def split_sentences(text: str) -> list[str]:
    """Sentences of a paragraph, each a verbatim stripped substring (abbreviations, initials and decimals
    do not end a sentence; nothing is split inside `$...$` math)."""
    text = text.strip()
    if not text:
        return []
    cuts = []
    in_math = _in_math(text)
    for m in _SENT_END.finditer(text):
        head = text[: m.start()].rstrip('"”’)]')
        if _ABBREV.search(head):
            continue
        if in_math(m.start()):
            continue
        cuts.append((m.end("close") if m.group("close") is not None else m.end("close2"), m.end()))
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


# ---------------------------------------------------------------- names


_NAME = re.compile(r"(?<![\w&’'-])[A-Z][\w&’'-]*")
_TOKEN = re.compile(r"[\w&’'-]+")
_POSSESSIVE = re.compile(r"[’']s?$")
_MONTHS = frozenset(
    "january february march april may june july august september october november december".split()
)


def _bare(word: str) -> str:
    return _POSSESSIVE.sub("", word.lower())


def names(text: str) -> frozenset[str]:
    """The capitalised words of `text` (lower-cased, possessive dropped), stop words and months aside: what
    a statement is about ("Americas", "Services", "iPhone" is not one, "NVIDIA", "TESS"). Two sentences
    alike but for these ("Americas net sales rose" / "Europe net sales rose") say different things."""
    out = {_bare(m.group(0)) for m in _NAME.finditer(text)}
    return frozenset(w for w in out if w and w not in STOPWORDS and w not in _MONTHS)


def words(text: str) -> frozenset[str]:
    """Every word of `text`, lower-cased, possessive dropped (what `names` are looked up in)."""
    return frozenset(_bare(w) for w in _TOKEN.findall(text))
