"""Reports and fact lists as numbered lines for the LLM judge, excerpted to fit a request's context."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from schemas.scaffold import Alignment, ScaffoldFact
from tasks.markdown.pieces import Piece, markdown_pieces
from tasks.markdown.text import terms
from tasks.tokens import count_tokens, count_tokens_many


def _sentence(report: _Numbered, i: int, ok: bool, **more: Any) -> Alignment:
    """The alignment of sentence `i` of R' (F and Fact Focus grade sentences alike)."""
    return Alignment(
        item_id=i, kind="sentence", text=report.pieces[i - 1].text, ok=ok, score=1.0 if ok else 0.0, **more
    )


@dataclass
class _Numbered:
    """A report as numbered pieces (ids from 1) with what excerpting needs."""

    pieces: list[Piece]
    costs: list[int]  # tokens of each "[id] text" line
    words: list[set[str]]

    @classmethod
    def of(cls, markdown: str) -> _Numbered:
        pieces = markdown_pieces(markdown) if markdown.strip() else []
        costs = count_tokens_many([f"[{i}] {p.text}" for i, p in enumerate(pieces, 1)]) if pieces else []
        return cls(pieces, [c + 1 for c in costs], [set(terms(p.text)) for p in pieces])

    def __len__(self) -> int:
        return len(self.pieces)

    def render(self, ids: Sequence[int]) -> str:
        lines: list[str] = []
        last: tuple[str, ...] | None = None
        for i in ids:
            p = self.pieces[i - 1]
            if p.path != last:
                lines.append("## " + (" > ".join(p.path) or "(report start)"))
                last = p.path
            lines.append(f"[{i}] {p.text}")
        return "\n".join(lines)

    def cited(self, ids: list[int]) -> dict[str, Any]:
        """Alignment fields citing sentences `ids`: the ids, the text of the first three, the heading path
        of the first."""
        return {
            "sentence_ids": ids,
            "evidence": " ".join(self.pieces[i - 1].text for i in ids[:3]),
            "evidence_ref": " > ".join(self.pieces[ids[0] - 1].path) if ids else "",
        }

    def view(self, query: str, room: int) -> tuple[str, list[int]]:
        """The whole report when it fits `room` tokens, else the pieces sharing most words with `query`
        (added while they fit, shown in report order with their ids); returns (text, ids shown)."""
        every = list(range(1, len(self.pieces) + 1))
        text = self.render(every)
        if count_tokens(text) <= room:
            return text, every
        want = set(terms(query))
        ranked = sorted(every, key=lambda i: (-len(want & self.words[i - 1]), i))
        budget = int(room * 0.85)  # headings come on top of the lines
        chosen: list[int] = []
        used = 0
        for i in ranked:
            if used + self.costs[i - 1] <= budget:
                chosen.append(i)
                used += self.costs[i - 1]
        rank = {i: r for r, i in enumerate(ranked)}
        chosen.sort()
        text = self.render(chosen)
        while chosen and count_tokens(text) > room:  # headings overflowed: drop the least related
            chosen.remove(max(chosen, key=lambda i: rank[i]))
            text = self.render(chosen)
        return text, chosen


def _facts_view(facts: Sequence[ScaffoldFact], query: str, room: int) -> tuple[str, list[int]]:
    """The facts as "[id] fact" lines: all of them when they fit `room` tokens, else those sharing the most
    words with `query` (added while they fit, listed in scaffold order); returns (text, fact ids shown)."""
    lines = {f.id: f"[{f.id}] {' '.join(f.text.split())}" for f in facts}
    text = "\n".join(lines.values())
    if count_tokens(text) <= room:
        return text, list(lines)
    want = set(terms(query))
    cost = dict(zip(lines, count_tokens_many(list(lines.values())), strict=True))
    ranked = sorted(facts, key=lambda f: (-len(want & set(terms(f.text))), f.id))
    chosen: set[int] = set()
    used = 0
    for f in ranked:
        if used + cost[f.id] + 1 <= int(room * 0.95):  # a little slack: tokens of the joined lines drift
            chosen.add(f.id)
            used += cost[f.id] + 1
    shown = [i for i in lines if i in chosen]
    return "\n".join(lines[i] for i in shown), shown


def _facts_note(shown: int, total: int) -> str:
    if shown == total:
        return f"Below are the reference report's {total} key facts (its main points and supporting details)."
    return (
        f"The reference report has {total} key facts, too many for this request: below are the {shown} "
        f"sharing the most words with the sentences to check; the other {total - shown} are omitted. Use "
        "only the fact ids shown."
    )


def _excerpt_note(what: str, shown: int, total: int, subject: str) -> str:
    if shown == total:
        return f"Below is the complete {what}, {total} numbered sentences (table rows count as sentences)."
    return (
        f"The {what} ({total} numbered sentences) is too long for this request: below is an EXCERPT of "
        f"{shown} sentences, those sharing the most words with the {subject}, in report order and with "
        f"their original ids; the other {total - shown} sentences are omitted. Use only the ids shown."
    )
