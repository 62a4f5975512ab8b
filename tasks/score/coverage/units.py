"""What an information unit of the gold report is, offline (docs/metrics/coverage.md, "Units"): the
pieces that count as units, each unit's type and numbers, and the evidence item both judges return."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from schemas.scoring import InfoUnit, ItemScore
from tasks.markdown.numbers import Num
from tasks.markdown.pieces import DATE, Piece, numbers, row_figures_strong, strong_numbers

_WORDS = re.compile(r"[A-Za-z][A-Za-z'’-]*")
MIN_WORDS = 4  # prose units shorter than this are fragments

# not units: placeholders, statements that the sources say nothing, boilerplate notes; then the type cues
_PLACEHOLDER, _NO_CONTENT, _BOILERPLATE, _FINDING, _METHOD, _EVENT = (
    re.compile(pattern, re.I)
    for pattern in (
        r"^(?:n/?a|tbd|tba|none|nil|not applicable|not available|to be (?:determined|added|confirmed)|"
        r"\.{2,}|…|[-–—]+|\[[^\]]{0,40}\]|placeholder|lorem ipsum.*)\.?$",
        r"\b(?:documents?|sources?|filings?) (?:of|for) (?:the|this) period (?:do(?:es)? not|did not) "
        r"(?:cover|mention|discuss|report)\b",
        r"^(?:\([^\d]*\)|table of contents|\(?unaudited\)?|see accompanying notes.*)\.?$",
        r"\b(?:we find|we found|finds?|found that|shows?|showed|shown|suggests?|suggested|indicates?|"
        r"indicated|demonstrates?|demonstrated|reveals?|revealed|conclude[sd]?|confirms?|confirmed|observed?|results?)\b",
        r"\b(?:we (?:use|used|present|propose|develop|developed|introduce|apply|applied|employ|adopt|train)|"
        r"algorithms?|framework|pipeline|methods?|methodology)\b",
        r"\b(?:announced|acquired|acquisition of|launched|completed|issued|repurchased|declared|entered into|"
        r"released|signed|filed)\b",
    )
)


def _weak_flags(text: str) -> tuple[list[Num], list[bool]]:
    strong = {(n.start, n.end) for n in strong_numbers(text)}
    nums = list(numbers(text))
    return nums, [(n.start, n.end) not in strong for n in nums]


def _figures(content: str, source: str) -> tuple[list[Num], list[bool]]:
    """A unit's numbers, each with its weak flag (a year, a date, math or a cross-reference); a table row
    (its source is a pipe-table line): the numbers of its label and cells read with the table (its stated
    unit and column headers, which the row's text holds), not those of the column headers themselves."""
    if source.strip().startswith("|"):
        figs = row_figures_strong(content, source)
        return [n for n, _ in figs], [not strong for _, strong in figs]
    return _weak_flags(content)


def _strong(weak: Sequence[bool]) -> bool:
    return not all(weak)


def _unit_type(p: Piece) -> str:
    """The type rule of docs/metrics/coverage.md ("Units")."""
    if _strong(_figures(p.text, p.source)[1]):
        return "statistic"
    if p.kind == "row":
        return "entity"
    if _FINDING.search(p.text):
        return "finding"
    if _METHOD.search(p.text):
        return "method"
    if any(n.yearlike for n in p.numbers) or DATE.search(p.text) or _EVENT.search(p.text):
        return "event"
    if len(_WORDS.findall(p.text)) <= 6:
        return "entity"
    return "factual_claim"


def _is_unit(p: Piece) -> bool:
    text = p.text.strip()
    if not text or _PLACEHOLDER.match(text) or _BOILERPLATE.match(text) or _NO_CONTENT.search(text):
        return False
    if p.kind == "row":
        return True
    return len(_WORDS.findall(text)) >= MIN_WORDS


def _unit_item(u: InfoUnit, score: float, **more: Any) -> ItemScore:
    """The evidence item of a unit."""
    return ItemScore(
        index=u.unit_id, kind=u.type, text=u.content, source=u.source_sentence, score=score, **more
    )


def _key(text: str) -> str:
    return " ".join(text.lower().split())
