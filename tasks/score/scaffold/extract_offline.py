"""The offline scaffold extractor: facts, tiers, questions and entities of Y by the deterministic layout
heuristic of docs/metrics/scaffold.md (tier rules, table rows, salient prose terms)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from schemas.scaffold import Scaffold, ScaffoldAttribute, ScaffoldEntity, ScaffoldFact, ScaffoldQuestion, Tier
from schemas.scoring import InfoUnit
from tasks.markdown.numbers import numbers_in
from tasks.markdown.pieces import Piece, cells, markdown_pieces, row_parts
from tasks.markdown.text import STOPWORDS, terms
from tasks.score.coverage import OfflineCoverageJudge
from tasks.score.judges import sample_items
from tasks.score.scaffold.common import (
    MAX_ATTRIBUTES,
    MAX_FACTS,
    MAX_PROSE_ENTITIES,
    MAX_TERM_ATTRIBUTES,
    MIN_TERM_UNITS,
    SEED,
    _renumbered,
)

_WORDS = re.compile(r"[A-Za-z][A-Za-z'’-]*")
_MONTH_NAMES = frozenset(
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
_METADATA = re.compile(  # metadata, in a short unit
    r"\b(?:(?:fiscal )?(?:period|quarter|year) ended|prepared by|generated (?:on|by)|report date|"
    r"filed (?:on|with)|page \d+|unaudited)\b",
    re.I,
)
_BOILERPLATE = re.compile(  # required boilerplate of filings, whatever figures (rule numbers) it holds
    r"\b(?:forward[- ]looking statements?|table of contents|incorporated (?:herein )?by reference|"
    r"see accompanying notes|disclosure controls and procedures|internal control over financial reporting)\b",
    re.I,
)
_NAVIGATION = re.compile(  # pointers to other parts of the report
    r"\b(?:(?:see|refer to) note \d+|for further details)\b|"
    r"^(?:the )?(?:following|below) tables?\b|^(?:the )?tables? below\b|"
    r"^(?:table|figure|fig\.)\s*\d+[a-z]?\s*[:.]",
    re.I,
)
_AGGREGATE = re.compile(
    r"^(?:total\b|net (?:income|sales|revenues?|earnings|loss|income \(loss\))\b|revenues?\b|"
    r"gross (?:margin|profit)\b|operating income\b|income from operations\b)",
    re.I,
)
_FOOTNOTE = re.compile(r"\(\d{1,2}\)|\*+$")


def _word_count(text: str) -> int:
    return len(_WORDS.findall(text))


def _is_other(unit: InfoUnit) -> bool:
    """Tier rule 1 (docs/metrics/scaffold.md): boilerplate, metadata, pointers, short fragments."""
    if _BOILERPLATE.search(unit.content):
        return True
    if unit.type == "statistic":
        return False
    n = _word_count(unit.content)
    if n <= 6 or (n <= 15 and _METADATA.search(unit.content)) or _NAVIGATION.search(unit.content):
        return True
    content = [t for t in terms(unit.content) if not t[0].isdigit() and t not in _MONTH_NAMES]
    return len(content) < 3


@dataclass(frozen=True)
class _Row:
    name: str  # "<context>: <label>" (as in the row's unit text) or the label
    label: str
    context: str
    cells: tuple[tuple[str, str], ...]  # (column header, value) of the non-empty value cells


def _row_parts(piece: Piece) -> _Row | None:
    """Label, context and (header, value) cells of a table-row piece (`tasks.markdown.pieces.row_parts`),
    named by the text before its first " | " ("<context>: <label>")."""
    if not cells(piece.source):
        return None
    label, context, found, _ = row_parts(piece.text, piece.source)
    head, sep, _ = piece.text.partition(" | ")
    if not sep:
        head = "" if found else piece.text
    return _Row(name=head or label, label=label or head, context=context, cells=tuple(found))


def _is_aggregate(label: str) -> bool:
    return bool(_AGGREGATE.match(_FOOTNOTE.sub("", label).strip()))


def _strong_value(value: str) -> bool:
    return any(not n.yearlike for n in numbers_in(value))


# -- prose terms

_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9&’'.\-]*[A-Za-z0-9]|[A-Za-z]")
_ACRONYM = re.compile(r"[A-Z][A-Z0-9&]*[A-Z0-9](?:-[A-Z0-9]+)*")
_CAMEL = re.compile(r"[A-Za-z]*[a-z][A-Z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*")
_ROMAN = re.compile(r"[IVXLC]+")
_CONNECTORS = frozenset({"of", "for", "the", "de", "&", "on"})  # not "and": "GPT-4 and BLOOM" are two
_CALENDAR = _MONTH_NAMES | {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}


def _bare(token: str) -> str:
    """A token without a possessive or closing punctuation ("Company’s" -> "Company")."""
    token = re.sub(r"[’']s?$", "", token)
    return token.rstrip(".-")


def _named_terms(sentence: str) -> list[str]:
    """Acronyms, CamelCase names and capitalised multi-word names of one sentence (the salient prose terms
    of docs/metrics/scaffold.md)."""
    matches = list(_TOKEN.finditer(sentence))
    toks = [_bare(m.group(0)) for m in matches]
    out: list[str] = []
    for t in toks:
        if not t:
            continue
        plural = re.fullmatch(r"([A-Z][A-Z0-9&]+)s", t)
        cand = plural.group(1) if plural else t
        if _ACRONYM.fullmatch(cand) and sum(c.isupper() for c in cand) >= 2 and not _ROMAN.fullmatch(cand):
            out.append(cand)
        elif _CAMEL.fullmatch(t):
            out.append(t)
    run: list[tuple[int, str]] = []

    def flush() -> None:
        while run and run[-1][1].lower() in _CONNECTORS:
            run.pop()
        words = list(run)
        if words and words[0][0] == 0:  # opens the sentence: "The Company", "Google Services revenues"
            words = words[1:]
        while words and (words[0][1].lower() in _CONNECTORS or words[0][1].lower() in STOPWORDS):
            words = words[1:]  # "For Rayleigh", "In Europe"
        caps = [w for _, w in words if w[:1].isupper()]
        if len(caps) >= 2 and not all(w.lower() in _CALENDAR for w in caps):
            out.append(" ".join(w for _, w in words))
        run.clear()

    for i, t in enumerate(toks):
        # a name runs over spaces only: "Worlds Observatory (HWO)" ends at the parenthesis
        gap = sentence[matches[i - 1].end() : matches[i].start()] if i else ""
        if run and gap.strip():
            flush()
        if t[:1].isupper():
            run.append((i, t))
        elif run and t.lower() in _CONNECTORS:
            run.append((i, t))
        else:
            flush()
    flush()
    return list(dict.fromkeys(out))


def _mentions(term: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![A-Za-z0-9]){re.escape(term)}(?![A-Za-z0-9])")


class OfflineScaffoldExtractor:
    """The deterministic layout heuristic (docs/metrics/scaffold.md); `extract` needs no embedding."""

    name = "offline:scaffold-heuristic"

    def __init__(self, coverage_judge: OfflineCoverageJudge) -> None:
        self.coverage_judge = coverage_judge

    def __repr__(self) -> str:
        return f"OfflineScaffoldExtractor({self.coverage_judge!r})"

    @staticmethod
    def _with_pieces(units: list[InfoUnit], pieces: list[Piece]) -> list[tuple[InfoUnit, Piece]]:
        """Each unit with the piece it was made from (units are a subsequence of the pieces)."""
        out: list[tuple[InfoUnit, Piece]] = []
        j = 0
        for u in units:
            k = j
            while k < len(pieces) and (pieces[k].text != u.content or pieces[k].source != u.source_sentence):
                k += 1
            if k < len(pieces):
                out.append((u, pieces[k]))
                j = k + 1
            else:  # not found (another unit extractor): a prose piece under the unit's section
                path = tuple(u.section.split(" > ")) if u.section else ()
                out.append((u, Piece("sentence", u.content, u.source_sentence, path)))
        return out

    def extract(self, gold_markdown: str) -> Scaffold:
        units = self.coverage_judge.extract_units(gold_markdown)
        pairs = self._with_pieces(units, markdown_pieces(gold_markdown))
        capped = len(pairs) > MAX_FACTS
        if capped:
            pairs = sample_items(pairs, MAX_FACTS, SEED)

        # tiers: leads close at a section's first subsection or table row
        lead_open: dict[tuple[str, ...], bool] = {}
        tiers: list[Tier] = []
        for u, p in pairs:
            key = p.path[:1]
            if len(p.path) > 1 or p.kind == "row":
                lead_open[key] = False
                in_lead = False
            else:
                in_lead = lead_open.setdefault(key, True)
            if _is_other(u):
                tiers.append("other")
            elif in_lead:
                tiers.append("main")
            elif p.kind == "row" and len(p.path) <= 1 and _is_aggregate(cells(p.source)[0]):
                tiers.append("main")
            else:
                tiers.append("supporting")
        facts = [
            ScaffoldFact(id=i + 1, text=u.content, tier=tier, source=u.source_sentence, section=u.section)
            for i, ((u, _), tier) in enumerate(zip(pairs, tiers, strict=True))
        ]
        rows = {f.id: _row_parts(p) for f, (_, p) in zip(facts, pairs, strict=True) if p.kind == "row"}
        questions = self._questions(facts, [p for _, p in pairs], rows)
        entities, attr_total = self._entities(facts, [p for _, p in pairs], rows)
        return Scaffold(
            extractor=self.name,
            facts=facts,
            questions=questions,
            entities=entities,
            gold_markdown=gold_markdown,
            detail={
                "units": len(units),
                "facts_capped": capped,
                "attributes_before_cap": attr_total,
                "attributes_capped": attr_total > MAX_ATTRIBUTES,
            },
        )

    @staticmethod
    def _questions(
        facts: list[ScaffoldFact], pieces: list[Piece], rows: dict[int, _Row | None]
    ) -> list[ScaffoldQuestion]:
        paths: dict[tuple[str, ...], None] = {}
        for p in pieces:
            for k in range(1, len(p.path) + 1):
                paths.setdefault(p.path[:k], None)
        out: list[ScaffoldQuestion] = []
        seen: set[str] = set()

        def add(question: str, answer: str, tier: Tier, fact: ScaffoldFact, section: str) -> None:
            key = question.casefold()
            if key in seen or not answer.strip():
                return
            seen.add(key)
            out.append(
                ScaffoldQuestion(
                    id=len(out) + 1,
                    question=question,
                    answer=answer,
                    tier=tier,
                    source=fact.source,
                    section=section,
                    fact_id=fact.id,
                )
            )

        for path in paths:
            first = next(
                (
                    f
                    for f, p in zip(facts, pieces, strict=True)
                    if f.tier != "other" and p.path[: len(path)] == path
                ),
                None,
            )
            if first is not None:
                heading = " > ".join(path)
                q = f"What does the report state about {heading}?"
                add(q, first.text, "main" if len(path) == 1 else "supporting", first, heading)
        for f in facts:
            row = rows.get(f.id)
            if f.tier != "main" or row is None:
                continue
            cell = next(((h, v) for h, v in row.cells if _strong_value(v)), None)
            if cell is None:
                continue
            header, value = cell
            subject = row.label + (f" ({row.context})" if row.context else "")
            q = f"What was {subject}" + (f" for {header}" if header else "") + "?"
            add(q, value, "main", f, f.section)
        return out

    @staticmethod
    def _entities(
        facts: list[ScaffoldFact], pieces: list[Piece], rows: dict[int, _Row | None]
    ) -> tuple[list[ScaffoldEntity], int]:
        found: dict[str, tuple[int, ScaffoldEntity]] = {}  # key -> (first fact position, entity)

        def entity(name: str, type_: str, pos: int) -> ScaffoldEntity:
            key = " ".join(name.casefold().split())
            if key not in found:
                found[key] = (pos, ScaffoldEntity(name=name, type=type_, attributes=[]))
            return found[key][1]

        for pos, f in enumerate(facts):
            row = rows.get(f.id)
            if row is None or not row.name or not row.cells:
                continue
            e = entity(row.name, "table row", pos)
            have = {a.text for a in e.attributes}
            for header, value in row.cells:
                text = f"{header}: {value}" if header else value
                if text not in have:
                    have.add(text)
                    e.attributes.append(
                        ScaffoldAttribute(
                            id=1, text=text, tier=f.tier, source=f.source, value=value, fact_id=f.id
                        )
                    )
        prose = [(pos, f) for pos, (f, p) in enumerate(zip(facts, pieces, strict=True)) if p.kind != "row"]
        usable = [(pos, f) for pos, f in prose if f.tier != "other"]
        spelled: dict[str, str] = {}
        for _, f in usable:
            for t in _named_terms(f.text):
                spelled.setdefault(t.casefold(), t)
        candidates = []
        for term in spelled.values():
            rx = _mentions(term)
            hits = [(pos, f) for pos, f in usable if rx.search(f.text)]
            if len(hits) >= MIN_TERM_UNITS:
                candidates.append((-len(hits), hits[0][0], term, hits))
        candidates.sort(key=lambda c: (c[0], c[1], c[2]))
        for _, first, term, hits in candidates[:MAX_PROSE_ENTITIES]:
            kind = "acronym" if _ACRONYM.fullmatch(term) else "name"
            e = entity(term, kind, first)
            for _, f in hits[:MAX_TERM_ATTRIBUTES]:
                e.attributes.append(
                    ScaffoldAttribute(id=1, text=f.text, tier=f.tier, source=f.source, fact_id=f.id)
                )
        ordered = [e for _, e in sorted(found.values(), key=lambda pe: pe[0])]
        flat = [(ei, a) for ei, e in enumerate(ordered) for a in e.attributes]
        keep = {id(a) for _, a in sample_items(flat, MAX_ATTRIBUTES, SEED)}
        return _renumbered(ordered, lambda a: id(a) in keep), len(flat)
