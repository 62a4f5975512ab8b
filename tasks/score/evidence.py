"""Evidence of G for an LLM verifier, within a token budget: passages whole, or cut (a table at rows with its
units line and header repeated), picked in a claim's retrieval order (docs/metrics/faithfulness.md,
"Evidence of the LLM judge").

Pure functions over passages (text, kind, tokens); the judge that ranks them lives in
`tasks.score.faithfulness`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tasks.markdown.text import split_sentences, terms
from tasks.tokens import count_tokens, count_tokens_many

__all__ = ["Piece", "cut", "pick", "relevance", "tokens_of"]

_SEPARATOR = re.compile(r"^\s*\|?\s*:?-+\s*:?\s*\|")


@dataclass(frozen=True)
class Piece:
    """A passage of G, or one part of a passage cut to fit (`part` > 0 numbers the parts from 1); `tokens`
    is what it costs in a request (its text and, as the judge counts it, its excerpt header)."""

    passage: int
    part: int
    doc_id: str
    text: str
    tokens: int

    @property
    def key(self) -> tuple[int, int]:
        return (self.passage, self.part)


def _table_parts(text: str, limit: int) -> list[str] | None:
    """A table passage as parts of at most `limit` tokens: each part holds the lines before the table (its
    units line), the header (with the separator and any leading rows of an empty first cell, the column
    periods of a filing's table) and a run of rows; the lines after the table (caption, footnotes) go with
    every part when they are short, else in a part of their own. None when `text` holds no pipe table."""
    lines = text.split("\n")
    first = next((i for i, ln in enumerate(lines) if ln.strip().startswith("|")), None)
    if first is None or first + 1 >= len(lines) or not _SEPARATOR.match(lines[first + 1]):
        return None
    last = first
    while last + 1 < len(lines) and lines[last + 1].strip().startswith("|"):
        last += 1
    body = first + 2
    while (
        body <= last and lines[body].strip().startswith("|") and not lines[body].strip("| \t").split("|")[0]
    ):
        body += 1  # "|  | June 28, 2025 | June 29, 2024 |": the header's second line
    head = "\n".join(lines[:body]).rstrip()
    tail = "\n".join(lines[last + 1 :]).strip()
    rows = lines[body : last + 1]
    if not rows:
        return None
    fixed = count_tokens(head) + 2
    keep_tail = bool(tail) and count_tokens(tail) + fixed <= limit // 4
    room = limit - fixed - (count_tokens(tail) + 2 if keep_tail else 0)
    parts: list[str] = []
    cur: list[str] = []
    cur_tok = 0
    for r in rows:
        t = count_tokens(r) + 1
        if cur and cur_tok + t > room:
            parts.append("\n".join([head, *cur]))
            cur, cur_tok = [], 0
        cur.append(r)
        cur_tok += t
    if cur:
        parts.append("\n".join([head, *cur]))
    if keep_tail:
        return [f"{p}\n\n{tail}" for p in parts]
    return parts + ([tail] if tail else [])


def _grouped(items: Sequence[str], limit: int, sep: str) -> list[str]:
    """`items` joined by `sep` into consecutive groups of at most `limit` tokens by the sum of their counts
    (each item counted once: a passage can be a whole paper's code listing); an item over `limit` alone."""
    groups: list[str] = []
    cur: list[str] = []
    cur_tok = 0
    for item, t in zip(items, count_tokens_many(list(items)), strict=True):
        if cur and cur_tok + t + 1 > limit:
            groups.append(sep.join(cur))
            cur, cur_tok = [], 0
        cur.append(item)
        cur_tok += t + 1
    if cur:
        groups.append(sep.join(cur))
    return groups


def _prose_parts(text: str, limit: int) -> list[str]:
    """Text at lines (a list at its items), a line over `limit` at sentences, a sentence at words."""
    out: list[str] = []
    for group in _grouped([ln for ln in text.split("\n") if ln.strip()] or [text], limit, "\n"):
        if count_tokens(group) <= limit:
            out.append(group)
            continue
        for part in _grouped(split_sentences(" ".join(group.split())) or [group], limit, " "):
            out.extend(_grouped(part.split(), limit, " ") if count_tokens(part) > limit else [part])
    return out


def cut(text: str, kind: str, limit: int) -> list[str]:
    """`text` whole when it has at most `limit` tokens; otherwise its parts, each within `limit` unless a
    single row or word is larger: a table at rows (`_table_parts`), other text at sentences (then words).
    Nothing is dropped."""
    if count_tokens(text) <= limit:
        return [text]
    parts = _table_parts(text, limit) if kind == "table" else None
    if not parts:
        return _prose_parts(text, limit)
    return [q for p in parts for q in (_prose_parts(p, limit) if count_tokens(p) > limit else [p])]


def relevance(claim: str, text: str) -> float:
    """Share of the claim's terms `text` holds, numeric terms counted twice (as the offline judge ranks
    its evidence units)."""
    want = set(terms(claim))
    if not want:
        return 0.0
    have = set(terms(text))
    weight = {t: 2.0 if t[:1].isdigit() else 1.0 for t in want}
    return sum(w for t, w in weight.items() if t in have) / sum(weight.values())


def pick(ranked: Iterable[Piece], budget: int, base: Sequence[Piece] = ()) -> list[Piece]:
    """`base`, then the pieces of `ranked` in order while they fit `budget` tokens together (a piece that
    does not fit is skipped, never cut; one already taken is not taken again)."""
    out = list(base)
    left = budget - tokens_of(out)
    seen = {p.key for p in out}
    for p in ranked:
        if p.key in seen or p.tokens > left:
            continue
        out.append(p)
        seen.add(p.key)
        left -= p.tokens
    return out


def tokens_of(pieces: Iterable[Piece]) -> int:
    return sum(p.tokens for p in pieces)
