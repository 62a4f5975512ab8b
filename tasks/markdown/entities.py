"""The named entities of a short text (a guiding question, a section title) and whether a set of
documents names them: what tells a question about the new snapshot from one carried over from the old
(docs/releases.md, "Checking the gold side", has the full definition).

Entities: `quoted` spans (a paper title), `period`s (full dates, years), `name`s by their spelling (two
capitals in a row, a capital after a lower-case letter or with a digit: BERT, BloombergGPT, V3; not Q3,
FY2024, 10-K, roman numerals) and `title` runs of two or more capitalised words not starting a sentence
(lower-case joiners inside; months and period-header words aside; none in a heading, whose capitals are
its style). Lower-case words never are. Documents name an entity when its words, normalised (lower case,
non-alphanumerics as one space), occur as a whole-word phrase in theirs; a title run joined by "and"/"or"
also when each part does. `without_references` drops reference lists from a paper's text first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from tasks.markdown.document import heading_of

__all__ = [
    "Entity",
    "Haystack",
    "absent_entities",
    "documents_haystack",
    "named_entities",
    "without_references",
]

Kind = Literal["quoted", "period", "name", "title"]

_QUOTED = re.compile(
    r"“(?P<a>[^”\n]{2,200})”|\"(?P<b>[^\"\n]{2,200})\"|‘(?P<c>[^’\n]{2,200})’"
    r"|(?:(?<=^)|(?<=[\s(\[]))'(?P<d>[^'\n]{2,200})'(?=$|[\s)\].,;:?!])"
)
_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sept?(?:ember)?|"
    r"Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_PERIOD = re.compile(rf"\b{_MONTH}\.?\s+\d{{1,2}},?\s+(?:19|20)\d\d\b|(?<![\d.,$-])(?:19|20)\d\d(?![\d.,]\d)")
_WORD = re.compile(r"[A-Za-z0-9]+(?:[-'’&][A-Za-z0-9]+)*")
_NOT_NAME = re.compile(
    r"(?:Q[1-4]|H[12]|FY(?:\d{2}|\d{4})?|\d+-[KQ]|[IVXLC]+|[A-Z]'?S|(?:19|20)\d\d)(?:'s|’s)?", re.IGNORECASE
)
_JOINERS = frozenset("of and for the in on to a an with at by from & or vs".split())
_CALENDAR = frozenset(
    "january february march april may june july august september october november december three six nine "
    "twelve months month weeks week ended ending year years quarter quarters fiscal".split()
)
_CONJUNCTION = re.compile(r"\s+(?:and|or|&|vs)\s+")
_SENTENCE_START = re.compile(r"(?:^|[.?!:;]\s+|[(\[]\s*)$")


@dataclass(frozen=True)
class Entity:
    text: str  # as written in the text
    kind: Kind


def _is_name(word: str) -> bool:
    if _NOT_NAME.fullmatch(word):
        return False
    return bool(
        re.search(r"[A-Z]{2}|[a-z][A-Z]", word) or (re.search(r"[A-Z]", word) and re.search(r"\d", word))
    )


def _capitalised(word: str) -> bool:
    return word[:1].isupper() and word.lower() not in _CALENDAR


def _titles(text: str, taken: list[tuple[int, int]]) -> list[tuple[int, Entity]]:
    out: list[tuple[int, Entity]] = []
    run: list[re.Match[str]] = []

    def close() -> None:
        while run and not _capitalised(run[-1].group(0)):  # a run never ends on a joiner
            run.pop()
        if sum(1 for m in run if _capitalised(m.group(0))) >= 2:
            out.append((run[0].start(), Entity(text[run[0].start() : run[-1].end()], "title")))
        run.clear()

    for m in _WORD.finditer(text):
        w = m.group(0)
        free = not any(a < m.end() and m.start() < b for a, b in taken)
        gap = text[run[-1].end() : m.start()] if run else ""
        if run and not re.fullmatch(r"[ \t]+", gap):
            close()
        first = _SENTENCE_START.search(text[: m.start()]) is not None
        if free and not first and _capitalised(w):
            run.append(m)
        elif free and run and w.lower() in _JOINERS:
            run.append(m)
        else:
            close()
    close()
    return out


def named_entities(text: str, heading: bool = False) -> list[Entity]:
    """The entities of `text` in order (module docstring); `heading`: no title runs."""
    found: list[tuple[int, Entity]] = []
    taken: list[tuple[int, int]] = []
    for m in _QUOTED.finditer(text):
        inner = next(g for g in m.groups() if g is not None)
        if re.search(r"[A-Za-z]", inner):
            found.append((m.start(), Entity(inner.strip(), "quoted")))
            taken.append(m.span())
    for m in _PERIOD.finditer(text):
        if not any(a < m.end() and m.start() < b for a, b in taken):
            found.append((m.start(), Entity(m.group(0), "period")))
            taken.append(m.span())
    titles = [] if heading else _titles(text, taken)
    for m in _WORD.finditer(text):
        if not any(a < m.end() and m.start() < b for a, b in taken) and _is_name(m.group(0)):
            found.append((m.start(), Entity(m.group(0), "name")))
    # a name inside a title run is read as part of the title ("DeepSeek-V3 Technical Report")
    spans = [(s, s + len(e.text)) for s, e in titles]
    found = [(s, e) for s, e in found if e.kind != "name" or not any(a <= s < b for a, b in spans)]
    return [e for _, e in sorted(found + titles, key=lambda x: x[0])]


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[\W_]+", " ", text.lower().replace("’", "'").replace("'", "")).split())


class Haystack:
    """The normalised text of a set of documents, asked whether it names an entity."""

    def __init__(self, texts: Iterable[str]):
        self._text = " " + " ".join(_norm(t) for t in texts) + " "
        self._seen: dict[str, bool] = {}

    def _has(self, text: str) -> bool:
        key = _norm(text)
        if key not in self._seen:
            self._seen[key] = not key or f" {key} " in self._text
        return self._seen[key]

    def names(self, entity: Entity) -> bool:
        if self._has(entity.text):
            return True
        # a title run joined by "and"/"or" may list names: "BloombergGPT and DeepSeek-V3 Technical Report"
        parts = _CONJUNCTION.split(entity.text) if entity.kind == "title" else []
        return len(parts) > 1 and all(self._has(p) for p in parts)


def absent_entities(text: str, hay: Haystack, heading: bool = False) -> list[Entity]:
    """The entities of `text` that the documents of `hay` do not name."""
    return [e for e in named_entities(text, heading) if not hay.names(e)]


_REFERENCES = re.compile(r"(?:\d+\.?\s+)?(?:references|bibliography|works cited|literature cited)\W*", re.I)


def without_references(markdown: str) -> str:
    """`markdown` without its reference sections: from a heading "References" (or "Bibliography" ...) to
    the next heading of the same or a higher level."""
    out: list[str] = []
    skip_level = 0
    for line in markdown.splitlines():
        h = heading_of(line, "none")
        if h and skip_level and h.level <= skip_level:
            skip_level = 0
        if h and not skip_level and _REFERENCES.fullmatch(h.title.strip()):
            skip_level = h.level
        if not skip_level:
            out.append(line)
    return "\n".join(out)


def documents_haystack(documents: Iterable[tuple[str, str]]) -> Haystack:
    """What a snapshot's documents, as (title, markdown), name: titles and bodies, reference lists dropped
    (a paper's bibliography names the earlier papers it cites, which the snapshot is not about)."""
    texts: list[str] = []
    for title, markdown in documents:
        texts += [title, without_references(markdown)]
    return Haystack(texts)
