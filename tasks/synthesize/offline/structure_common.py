"""What the offline structure builders for every source kind share (see `structure.py`).

Reading a grounding document (its `## ` parts, headings, lead sentence, numeric cells), comparing
titles, and building the plain-dict nodes and ids a `ReportStructure` is validated from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rapidfuzz import fuzz

from schemas.structure import CONTAINERS, Provenance
from tasks.markdown.document import is_table_row
from tasks.markdown.text import split_sentences
from tasks.synthesize.retrieve import Block, parse_blocks

ALGORITHM_VERSION = "v1"
LEAD_MAX_WORDS = 40
TYPE_PREFIX = {"text": "t", "table": "tb", "figure": "f", "list": "l"}

_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
_NOTE_PREFIX = re.compile(r"^\s*note\s+\d+[a-z]?\s*[-–—:.]\s*", re.IGNORECASE)
_SMALL_WORDS = {"of", "and", "the", "in", "for", "to", "on", "a", "an", "or", "by", "at", "with", "from"}


def provenance(role: str) -> Provenance:
    return Provenance(backend="offline", model=f"frame-offline-{role}-{ALGORITHM_VERSION}", role=role)


# ---------------------------------------------------------------- reading the documents


@dataclass
class Part:
    """The blocks under one `## ` heading of a document (heading None = text before the first one)."""

    heading: str | None
    blocks: list[Block] = field(default_factory=list)

    def prose(self) -> list[Block]:
        return [b for b in self.blocks if b.kind in ("text", "list") and not b.code]

    def prose_words(self) -> int:
        return sum(len(b.text.split()) for b in self.prose())

    def tables(self) -> list[Block]:
        return [b for b in self.blocks if b.kind == "table"]


def doc_parts(markdown: str, level: int = 2) -> list[Part]:
    """Split a document at its headings of `level` (deeper headings stay inside a part)."""
    parts = [Part(None)]
    for b in parse_blocks(markdown):
        if b.kind == "heading" and b.level == level and not b.pseudo:
            parts.append(Part(b.title))
        elif b.kind != "heading":
            parts[-1].blocks.append(b)
    return parts


def headings_of(markdown: str) -> list[str]:
    return [b.title for b in parse_blocks(markdown) if b.kind == "heading"]


def norm(text: str) -> str:
    t = text.replace("’", "'").replace("‘", "'").replace("–", "-").replace("—", "-").lower()
    return re.sub(r"\s+", " ", re.sub(r"[^a-z0-9' ]+", " ", t)).strip()


def titles_match(a: str, b: str, threshold: int = 90) -> bool:
    na, nb = norm(a), norm(b)
    if not na or not nb:
        return False
    return na == nb or fuzz.token_set_ratio(na, nb) >= threshold and fuzz.ratio(na, nb) >= 60


def nice_title(text: str) -> str:
    """Upper-case filing headings -> title case; '(Unaudited)' and note numbers dropped."""
    t = re.sub(r"\s*\((?:unaudited)\)\s*", " ", text, flags=re.IGNORECASE).strip()
    t = _NOTE_PREFIX.sub("", t)
    if t.isupper():
        words = t.lower().split()
        t = " ".join(w if (i and w in _SMALL_WORDS) else w[:1].upper() + w[1:] for i, w in enumerate(words))
    return t.strip(" .:")


def lead_sentence(blocks: list[Block], max_words: int = LEAD_MAX_WORDS) -> str:
    """First sentence of the first prose block, if short enough to quote in an objective."""
    for b in blocks:
        if b.kind != "text" or b.code:
            continue
        sents = split_sentences(b.text.replace("\n", " "))
        if not sents:
            continue
        s = sents[0]
        if len(s.split()) <= max_words and len(s.split()) >= 4:
            return s if s[-1] in ".!?" else s + "."
        return ""
    return ""


def numeric_cells(text: str) -> int:
    return sum(
        1
        for line in text.splitlines()
        if is_table_row(line)
        for cell in line.split("|")
        if _NUMBER.search(cell)
    )


# ---------------------------------------------------------------- building nodes


class _Ids:
    """Deterministic ids: sections s1.., subsections <parent>.N, leaves <parent>.<prefix>N."""

    @staticmethod
    def assign(sections: list[dict]) -> list[dict]:
        for i, s in enumerate(sections, start=1):
            s["id"] = f"s{i}"
            _Ids.children(s)
        return sections

    @staticmethod
    def children(parent: dict) -> None:
        counts: dict[str, int] = {}
        for c in parent["children"]:
            key = "sub" if c["type"] in CONTAINERS else TYPE_PREFIX[c["type"]]
            counts[key] = counts.get(key, 0) + 1
            c["id"] = (
                f"{parent['id']}.{counts[key]}" if key == "sub" else f"{parent['id']}.{key}{counts[key]}"
            )
            if c["type"] in CONTAINERS:
                _Ids.children(c)


def _leaf(kind: str, title: str, objective: str, sources: list[str]) -> dict:
    return {
        "type": kind,
        "title": title,
        "objective": objective,
        "sources": list(dict.fromkeys(sources)),
        "children": [],
    }


def _container(kind: str, title: str, objective: str, children: list[dict], sources: list[str] | None = None):
    srcs = sources if sources is not None else [s for c in children for s in c.get("sources", [])]
    return {
        "type": kind,
        "title": title,
        "objective": objective,
        "sources": list(dict.fromkeys(srcs)),
        "children": children,
    }
