"""Semantic Scaffold (paper 001 §4): facts, questions and entity attributes extracted once from the gold
report Y, then every generated report R' judged against that fixed reference (FPS, QPS, EPS, F, Fact Focus
and plain coverage beside them). Offline heuristic and LLM extractors and judges; the family class comes last.

Specification (formulas, tiers, heuristics and thresholds, LLM roles, known limits): docs/metrics/scaffold.md.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
from pydantic import AliasChoices, BaseModel, Field, field_validator
from rapidfuzz import fuzz

from schemas.config import LLMSettings
from schemas.scaffold import (
    Alignment,
    Scaffold,
    ScaffoldAttribute,
    ScaffoldEntity,
    ScaffoldFact,
    ScaffoldJudgment,
    ScaffoldQuestion,
    Tier,
)
from schemas.scoring import InfoUnit, ItemScore, MetricResult
from tasks.errors import FrameInputError
from tasks.markdown.chunks import Atom, atoms, pack, section_of, size
from tasks.markdown.document import is_heading, is_table_row
from tasks.markdown.numbers import numbers_in
from tasks.markdown.pieces import Piece, cells, markdown_pieces, row_parts
from tasks.markdown.text import STOPWORDS, terms
from tasks.score.coverage import OfflineCoverageJudge
from tasks.score.judges import MAX_ITEMS, EmbedFn, sample_by_text, sample_items
from tasks.score.llm_judge import LLMJudge
from tasks.score.metric import Inputs, JudgeEnv, MetricFamily, MetricSpec, parquet_bytes
from tasks.tokens import count_tokens, count_tokens_many

__all__ = [
    "BATCH_ATTRIBUTES",
    "BATCH_ITEMS",
    "LLMScaffoldExtractor",
    "LLMScaffoldJudge",
    "OK_THRESHOLD",
    "OfflineScaffoldExtractor",
    "OfflineScaffoldJudge",
    "scaffold_metrics",
    "scaffold_scores",
]

OK_THRESHOLD = 0.5  # offline: a graded score at or above this counts as inferable / answerable / preserved
MAX_FACTS = 400  # offline facts cap (seeded sample); demo reports have at most ~230 units
MAX_ATTRIBUTES = 300  # offline attribute cap over all entities (seeded sample)
MAX_PROSE_ENTITIES = 40
MAX_TERM_ATTRIBUTES = 6  # unit sentences kept per prose entity
MIN_TERM_UNITS = 2  # a prose term is salient when this many units mention it
PRESENT_RATIO = 90  # rapidfuzz partial ratio for "the entity name is in R'"
BATCH_ITEMS = 30  # facts / questions / R' sentences per LLM request
BATCH_ATTRIBUTES = 60  # attributes per score_scaffold_entity_check request
SEED = 0
# paper 001 §4: one extraction from Y per instance, one judgment per system, all nine values from it.
# Main and supporting coverage are shown beside FPS, never replaced by it.
SCAFFOLD_METRICS: tuple[str, ...] = (
    "fps",
    "qps",
    "eps",
    "fact_faithfulness",  # F: share of R' sentences supported by Y
    "fact_focus",  # F. Focus (001 Table 7): share of R' sentences aligned to a main or supporting fact
    "fact_coverage",  # FC: share of scaffold facts (main + supporting) inferable from R'
    "question_coverage",  # QC: share of scaffold questions answerable from R'
    "main_coverage",  # M_s / M_c
    "supporting_coverage",  # S_s / S_c
)
_MEMO_LIMIT = 50_000  # embeddings kept in memory per judge (384 floats each: ~75 MB at most)

# ======================================================================== offline extractor

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


def _renumbered(
    entities: Iterable[ScaffoldEntity], keep: Callable[[ScaffoldAttribute], bool] = lambda a: True
) -> list[ScaffoldEntity]:
    """The entities with their kept attributes numbered 1, 2, ... across all of them; an entity left
    without attributes is dropped."""
    ids = itertools.count(1)
    out: list[ScaffoldEntity] = []
    for e in entities:
        attrs = [a.model_copy(update={"id": next(ids)}) for a in e.attributes if keep(a)]
        if attrs:
            out.append(e.model_copy(update={"attributes": attrs}))
    return out


# ======================================================================== offline judge


class _MemoEmbed:
    """`embed` with an in-memory memo: each distinct text reaches the inner embedder once."""

    def __init__(self, inner: EmbedFn, limit: int = _MEMO_LIMIT) -> None:
        self.inner = inner
        self.limit = limit
        self._vecs: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        local: dict[str, np.ndarray] = {}
        with self._lock:
            for t in dict.fromkeys(texts):
                v = self._vecs.get(t)
                if v is not None:
                    local[t] = v
                    self._vecs.move_to_end(t)
        missing = [t for t in dict.fromkeys(texts) if t not in local]
        if missing:
            arr = np.asarray(self.inner(missing), dtype=np.float32)
            if arr.shape[0] != len(missing):
                raise ValueError(f"embed returned {arr.shape[0]} vectors for {len(missing)} texts")
            with self._lock:
                for t, v in zip(missing, arr, strict=True):
                    local[t] = v
                    self._vecs[t] = v
                while len(self._vecs) > self.limit:
                    self._vecs.popitem(last=False)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([local[t] for t in texts])


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


def _present(name: str, haystack: str) -> bool:
    """Whether an entity name occurs in the normalised text of R' (exact, else fuzzy partial match)."""
    probes = [_norm(name)]
    if ": " in name:  # "context: label" rows: the label alone is enough
        probes.append(_norm(name.rsplit(": ", 1)[1]))
    for p in probes:
        if not p:
            continue
        if p in haystack:
            return True
        if len(p) >= 4 and fuzz.partial_ratio(p, haystack, score_cutoff=PRESENT_RATIO):
            return True
    return False


def _sentence_index(pieces: Sequence[Piece]) -> dict[str, int]:
    """Evidence text as the coverage grade reports it (row: its raw line; else its text) -> 1-based id."""
    out: dict[str, int] = {}
    for i, p in enumerate(pieces, 1):
        out.setdefault(p.source if p.kind == "row" else p.text, i)
    return out


def _is_offline_row(fact: ScaffoldFact) -> bool:
    """A fact the offline extractor made from a table row ("label | header: value; ...")."""
    return is_table_row(fact.source) and " | " in fact.text


class _Units:
    """The distinct units one offline judgment grades (several items may share one)."""

    def __init__(self) -> None:
        self.units: list[InfoUnit] = []
        self._index: dict[tuple[str, str], int] = {}

    def add(self, content: str, source: str, kind: str) -> int:
        key = (content, source)
        if key not in self._index:
            self._index[key] = len(self.units)
            self.units.append(
                InfoUnit(unit_id=len(self.units), type=kind, content=content, source_sentence=source)
            )
        return self._index[key]

    def fact(self, f: ScaffoldFact) -> int:
        return self.add(f.text, f.source if _is_offline_row(f) else "", "fact")

    def cell(self, f: ScaffoldFact, value: str, kind: str) -> int:
        # the row's text (for the cosine) with only this cell's figures (for the number match), read as a
        # value cell of the row: its label (a loss, shares), column header (period) and table unit with it
        raw = cells(f.source)
        return self.add(f.text, f"| {raw[0] if raw else ''} | {value} |", kind)


def _grading_plan(
    scaffold: Scaffold, haystack: str
) -> tuple[list[InfoUnit], list[tuple[str, int, int, str]]]:
    """The units to grade against R' and, per item, (kind, item id, unit index, note); note "absent" when
    an attribute's entity name is not in R' (`haystack`: its normalised text)."""
    facts = {f.id: f for f in scaffold.facts}
    units = _Units()
    plan: list[tuple[str, int, int, str]] = [("fact", f.id, units.fact(f), "") for f in scaffold.facts]
    for q in scaffold.questions:
        f = facts.get(q.fact_id) if q.fact_id is not None else None
        if f is not None and f.text == q.answer:
            ui = units.fact(f)
        elif f is not None and _is_offline_row(f):
            ui = units.cell(f, q.answer, "question")
        else:
            ui = units.add(q.answer, "", "question")
        plan.append(("question", q.id, ui, ""))
    for e in scaffold.entities:
        note = "" if _present(e.name, haystack) else "absent"
        for a in e.attributes:
            f = facts.get(a.fact_id) if a.fact_id is not None else None
            if f is not None and a.value and _is_offline_row(f):
                ui = units.cell(f, a.value, "attribute")
            elif f is not None and a.text == f.text:
                ui = units.fact(f)
            else:
                ui = units.add(f"{e.name}: {a.text}", "", "attribute")
            plan.append(("attribute", a.id, ui, note))
    return units.units, plan


class OfflineScaffoldJudge:
    """Offline judgment of R' against a scaffold with the coverage grading (docs/metrics/scaffold.md)."""

    def __init__(
        self, coverage_judge: OfflineCoverageJudge, *, max_sentences: int = MAX_ITEMS, seed: int = SEED
    ) -> None:
        if max_sentences < 1:
            raise ValueError(f"max_sentences must be >= 1 (got {max_sentences})")
        self.embedder_name = coverage_judge.embedder_name
        self.name = f"offline:scaffold+{coverage_judge.embedder_name}"
        self.max_sentences = max_sentences
        self.seed = seed
        self._grader = OfflineCoverageJudge(_MemoEmbed(coverage_judge.embed), coverage_judge.embedder_name)

    def __repr__(self) -> str:
        return f"OfflineScaffoldJudge({self.embedder_name!r})"

    def judge(self, scaffold: Scaffold, generated_markdown: str) -> ScaffoldJudgment:
        segs = markdown_pieces(generated_markdown)
        ids_of = _sentence_index(segs)
        haystack = _norm("\n".join(s.text for s in segs))
        units, plan = _grading_plan(scaffold, haystack)
        grades = self._grader.grade(units, generated_markdown) if units else []

        alignments: list[Alignment] = []
        for kind, item_id, ui, note in plan:
            g = grades[ui]
            score, rationale = g.score, g.rationale
            if note == "absent":
                rationale = f"entity name not found in R' (graded {g.score:.2f}: {g.rationale})"
                score = 0.0
            alignments.append(self._alignment(kind, item_id, score, g, rationale, ids_of))

        faithful, sampled = self._faithful(scaffold.gold_markdown, segs)
        return ScaffoldJudgment(
            judge=self.name,
            sentences=len(segs),
            alignments=alignments,
            faithful=faithful,
            focus=self._focus(scaffold, segs),
            detail={
                "threshold": OK_THRESHOLD,
                "graded_units": len(units),
                "sampled_sentences": sampled,
                "max_sentences": self.max_sentences,
                "seed": self.seed,
                **(
                    {"faithfulness": "the scaffold holds no gold report"}
                    if not scaffold.gold_markdown
                    else {}
                ),
            },
        )

    @staticmethod
    def _alignment(
        kind: str, item_id: int, score: float, g: ItemScore, rationale: str, ids_of: dict[str, int]
    ) -> Alignment:
        sid = ids_of.get(g.evidence) if g.score > 0 and g.evidence else None
        return Alignment(
            item_id=item_id,
            kind=kind,  # type: ignore[arg-type]
            ok=score >= OK_THRESHOLD,
            score=score,
            sentence_ids=[sid] if sid else [],
            evidence=g.evidence if g.score > 0 else "",
            evidence_ref=g.evidence_ref if g.score > 0 else "",
            rationale=rationale,
        )

    def _sampled_claims(self, segs: list[Piece]) -> tuple[list[int], list[InfoUnit]]:
        """The seeded sample of R' pieces F and Fact Focus grade (1-based ids), each as a sentence unit."""
        ids = list(range(1, len(segs) + 1))
        picked = sample_by_text(ids, lambda i: segs[i - 1].text, self.max_sentences, self.seed)
        claims = [
            InfoUnit(
                unit_id=i,
                type="sentence",
                content=segs[i - 1].text,
                source_sentence=segs[i - 1].source if segs[i - 1].kind == "row" else "",
            )
            for i in picked
        ]
        return picked, claims

    def _faithful(self, gold_markdown: str, segs: list[Piece]) -> tuple[list[Alignment], int]:
        if not segs or not gold_markdown.strip():
            return [], 0
        picked, claims = self._sampled_claims(segs)
        gold_ids = _sentence_index(markdown_pieces(gold_markdown))
        grades = self._grader.grade(claims, gold_markdown)
        out = []
        for g in grades:
            a = self._alignment("sentence", g.index, g.score, g, g.rationale, gold_ids)
            out.append(a.model_copy(update={"text": g.text}))
        return out, len(picked)

    def _focus(self, scaffold: Scaffold, segs: list[Piece]) -> list[Alignment]:
        """Fact Focus, built like F: the same sampled R' pieces, each graded as a unit, but against the
        scaffold's main and supporting facts (one list item each) instead of Y; `ok` = aligned to at least
        one fact, the evidence id is that fact's id."""
        facts = _focus_facts(scaffold)
        if not segs or not facts:
            return []
        items = {f.id: "- " + " ".join(f.text.split()) for f in facts}
        fact_of: dict[str, int] = {}  # the text of each piece of a fact's item -> the fact's id
        for fid, item in items.items():
            for p in markdown_pieces(item):
                fact_of.setdefault(p.text, fid)
        _, claims = self._sampled_claims(segs)
        out = []
        for g in self._grader.grade(claims, "\n".join(items.values())):
            a = self._alignment("sentence", g.index, g.score, g, g.rationale, fact_of)
            out.append(a.model_copy(update={"text": g.text, "evidence_ref": ""}))
        return out


# ======================================================================== metrics


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def _focus_facts(scaffold: Scaffold) -> list[ScaffoldFact]:
    """The facts Fact Focus aligns R' sentences to: main and supporting ("other" never counts, 001 G.1)."""
    return [f for f in scaffold.facts if f.tier != "other"]


def _preservation(main_s: int, main_c: int, sup_s: int, sup_c: int) -> float | None:
    """(main_s / main_c) * (1 - sup_s / sup_c); penalty 1 when sup_c = 0; None when main_c = 0."""
    if main_c == 0:
        return None
    penalty = 1.0 - sup_s / sup_c if sup_c else 1.0
    return (main_s / main_c) * penalty


def _ref(ids: Sequence[int], what: str = "sentence") -> str:
    if not ids:
        return ""
    return f"{what}{'s' if len(ids) > 1 else ''} " + ",".join(map(str, ids))


def _item(
    index: int, kind: str, text: str, source: str, a: Alignment | None, what: str = "sentence"
) -> ItemScore:
    """One ItemScore; evidence_ref = "sentences 3,5 (<heading path>)" (``what`` names whose sentences)."""
    if a is None:
        return ItemScore(index=index, kind=kind, text=text, source=source, score=0.0, rationale="not judged")
    ref = _ref(a.sentence_ids, what)
    if ref and a.evidence_ref:
        ref = f"{ref} ({a.evidence_ref})"
    return ItemScore(
        index=index,
        kind=kind,
        text=text,
        source=source,
        score=a.score,
        evidence=a.evidence,
        evidence_ref=ref or a.evidence_ref,
        rationale=a.rationale,
    )


@dataclass(frozen=True)
class _Tally:
    """Items of one kind per tier: c = in the scaffold, s = judged ok in R'."""

    main_c: int
    main_s: int
    sup_c: int
    sup_s: int
    other_c: int
    unjudged: int

    @classmethod
    def of(cls, kind: str, items: Sequence[Any], by: Mapping[tuple[str, int], Alignment]) -> _Tally:
        c = Counter(it.tier for it in items)
        s = Counter(it.tier for it in items if _ok(by, kind, it.id))
        unjudged = sum((kind, it.id) not in by for it in items)
        return cls(c["main"], s["main"], c["supporting"], s["supporting"], c["other"], unjudged)

    def detail(self, main: str, sup: str) -> dict[str, int]:
        """{"M_s", "M_c", "S_s", "S_c", "other", "unjudged"} with `main` / `sup` as the letters."""
        return {
            f"{main}_s": self.main_s,
            f"{main}_c": self.main_c,
            f"{sup}_s": self.sup_s,
            f"{sup}_c": self.sup_c,
            "other": self.other_c,
            "unjudged": self.unjudged,
        }

    @property
    def preservation(self) -> float | None:
        return _preservation(self.main_s, self.main_c, self.sup_s, self.sup_c)

    @property
    def coverage(self) -> float | None:
        return _ratio(self.main_s + self.sup_s, self.main_c + self.sup_c)


def _ok(by: Mapping[tuple[str, int], Alignment], kind: str, item_id: int) -> bool:
    a = by.get((kind, item_id))
    return bool(a and a.ok)


def _eps_detail(scaffold: Scaffold, by: Mapping[tuple[str, int], Alignment]) -> dict[str, Any]:
    attrs = scaffold.attributes()
    by_tier = {t: [a for a in attrs if a.tier == t] for t in ("main", "supporting", "other")}
    return {
        "preserved": sum(_ok(by, "attribute", a.id) for a in attrs),
        "attributes": len(attrs),
        "entities": len(scaffold.entities),
        "by_tier": {
            t: {"n": len(v), "preserved": sum(_ok(by, "attribute", a.id) for a in v)}
            for t, v in by_tier.items()
        },
    }


def _item_lists(
    scaffold: Scaffold, judgment: ScaffoldJudgment, by: Mapping[tuple[str, int], Alignment]
) -> dict[str, list[ItemScore]]:
    """The evidence items of EPS, F, Fact Focus, FC and QC."""
    entity_of = scaffold.entity_of()
    return {
        "eps": [
            _item(
                a.id,
                f"attribute:{a.tier}",
                f"{entity_of[a.id].name}: {a.text}",
                a.source,
                by.get(("attribute", a.id)),
            )
            for a in scaffold.attributes()
        ],
        "fact_faithfulness": [
            _item(a.item_id, "sentence", a.text, a.text, a, "gold sentence") for a in judgment.faithful
        ],
        "fact_focus": [_item(a.item_id, "sentence", a.text, a.text, a, "fact") for a in judgment.focus],
        "fact_coverage": [
            _item(f.id, f"fact:{f.tier}", f.text, f.source, by.get(("fact", f.id))) for f in scaffold.facts
        ],
        "question_coverage": [
            _item(
                q.id,
                f"question:{q.tier}",
                f"{q.question} -> {q.answer}",
                q.source,
                by.get(("question", q.id)),
            )
            for q in scaffold.questions
        ],
    }


def scaffold_metrics(scaffold: Scaffold, judgment: ScaffoldJudgment) -> list[MetricResult]:
    """The nine SCAFFOLD_METRICS of one judgment (docs/metrics/scaffold.md), in that order."""
    by = {(a.kind, a.item_id): a for a in judgment.alignments}
    ft, qt = _Tally.of("fact", scaffold.facts, by), _Tally.of("question", scaffold.questions, by)
    fd, qd, eps = ft.detail("M", "S"), qt.detail("Q", "R"), _eps_detail(scaffold, by)
    supported, graded = sum(a.ok for a in judgment.faithful), len(judgment.faithful)
    aligned, focused = sum(a.ok for a in judgment.focus), len(judgment.focus)
    counted_f, counted_q = ft.main_c + ft.sup_c, qt.main_c + qt.sup_c
    # metric: (value, population, detail)
    rows: dict[str, tuple[float | None, int, dict[str, Any]]] = {
        "fps": (ft.preservation, counted_f, fd),
        "qps": (qt.preservation, counted_q, qd),
        "eps": (_ratio(eps["preserved"], eps["attributes"]), eps["attributes"], eps),
        "fact_faithfulness": (
            _ratio(supported, graded),
            judgment.sentences,
            {"supported": supported, "graded": graded, "sentences": judgment.sentences},
        ),
        "fact_focus": (
            _ratio(aligned, focused),
            judgment.sentences,
            {
                "aligned": aligned,
                "graded": focused,
                "sentences": judgment.sentences,
                "facts": len(_focus_facts(scaffold)),
            },
        ),
        "fact_coverage": (ft.coverage, len(scaffold.facts), {**fd, "counted": counted_f}),
        "question_coverage": (qt.coverage, len(scaffold.questions), {**qd, "counted": counted_q}),
        "main_coverage": (_ratio(ft.main_s, ft.main_c), ft.main_c, fd),
        "supporting_coverage": (_ratio(ft.sup_s, ft.sup_c), ft.sup_c, fd),
    }
    items = _item_lists(scaffold, judgment, by)
    out = []
    for m in SCAFFOLD_METRICS:
        value, population, detail = rows[m]
        out.append(
            MetricResult(
                metric=m,
                value=value,
                judge=judgment.judge,
                population=population,
                items=items.get(m, []),
                detail={**detail, "extractor": scaffold.extractor},
            )
        )
    return out


def scaffold_scores(
    gold_markdown: str, generated_markdown: str, extractor: Any, judge: Any
) -> list[MetricResult]:
    """Extract the scaffold of `gold_markdown` and score `generated_markdown` against it (one system).

    The flow should extract once per instance and call ``judge.judge`` per system instead."""
    scaffold = extractor.extract(gold_markdown)
    return scaffold_metrics(scaffold, judge.judge(scaffold, generated_markdown))


# ======================================================================== LLM replies


def _tier_label(value: Any) -> str:
    """ "main point" / "Main" / "supporting_detail" / "Other" -> main | supporting | other."""
    s = re.sub(r"[\s_-]+", " ", str(value).strip().lower())
    if s.startswith("main"):
        return "main"
    if s.startswith("support"):
        return "supporting"
    if s in ("other", "metadata", "boilerplate"):
        return "other"
    raise ValueError(f'tier must be "main point", "supporting detail" or "other" (got {value!r})')


def _stripped(v: str) -> str:
    if not v.strip():
        raise ValueError("must not be blank")
    return v.strip()


class _FactOut(BaseModel):
    fact: str = Field(min_length=1, validation_alias=AliasChoices("fact", "text"))
    tier: Tier = Field(validation_alias=AliasChoices("tier", "type"))
    source: str = ""
    section: str = ""

    _tier = field_validator("tier", mode="before")(_tier_label)
    _text = field_validator("fact")(_stripped)


class FactsReply(BaseModel):
    """Reply of role score_scaffold_facts."""

    facts: list[_FactOut]


class _QuestionOut(BaseModel):
    question: str = Field(min_length=1)
    answer: str = Field(min_length=1, validation_alias=AliasChoices("answer", "expected_answer"))
    tier: Tier = Field(validation_alias=AliasChoices("tier", "type"))
    source: str = ""
    section: str = ""

    _tier = field_validator("tier", mode="before")(_tier_label)
    _text = field_validator("question", "answer")(_stripped)


class QuestionsReply(BaseModel):
    """Reply of role score_scaffold_questions."""

    questions: list[_QuestionOut]


class _AttributeOut(BaseModel):
    attribute: str = Field(min_length=1, validation_alias=AliasChoices("attribute", "text"))
    tier: Tier = Field(validation_alias=AliasChoices("tier", "type"))
    source: str = ""

    _tier = field_validator("tier", mode="before")(_tier_label)
    _text = field_validator("attribute")(_stripped)


class _EntityOut(BaseModel):
    name: str = Field(min_length=1, validation_alias=AliasChoices("name", "entity_name", "entity"))
    type: str = Field(default="other", validation_alias=AliasChoices("type", "entity_type"))
    attributes: list[_AttributeOut] = Field(default_factory=list)

    _text = field_validator("name")(_stripped)


class EntitiesReply(BaseModel):
    """Reply of role score_scaffold_entities."""

    entities: list[_EntityOut]


class _Verdict(BaseModel):
    """The judge's verdict on one listed id, with its reasons."""

    id: int
    justification: str = ""


class _AlignOut(_Verdict):
    ok: bool
    sentence_ids: list[int] = Field(default_factory=list)


class AlignReply(BaseModel):
    """Reply of role score_scaffold_align (facts or questions)."""

    alignments: list[_AlignOut]


class _EntityCheckOut(BaseModel):
    name: str = ""
    preserved_ids: list[int] = Field(default_factory=list)
    sentence_ids: list[int] = Field(default_factory=list)


class EntityCheckReply(BaseModel):
    """Reply of role score_scaffold_entity_check: only entities found in R' are listed."""

    entities: list[_EntityCheckOut]


class _FaithfulOut(_Verdict):
    supported: bool
    evidence_ids: list[int] = Field(default_factory=list)


class FaithfulReply(BaseModel):
    """Reply of role score_scaffold_faithful."""

    sentences: list[_FaithfulOut]


class _FocusOut(_Verdict):
    aligned: bool
    fact_ids: list[int] = Field(default_factory=list)


class FocusReply(BaseModel):
    """Reply of role score_scaffold_focus."""

    sentences: list[_FocusOut]


def _exact_ids(label: str, want: Sequence[int], got: Sequence[int]) -> None:
    """Raise ValueError unless `got` names every id of `want` once and nothing else."""
    counts = Counter(got)
    dupes = sorted(i for i, n in counts.items() if n > 1)
    if dupes:
        raise ValueError(f"{label} given more than once: {dupes}")
    extra = sorted(set(counts) - set(want))
    missing = [i for i in want if i not in counts]
    if extra or missing:
        raise ValueError(
            f"the reply must give exactly the {label}s "
            + ", ".join(map(str, want))
            + (f"; unknown {label}: {extra}" if extra else "")
            + (f"; missing {label}: {missing}" if missing else "")
        )


def _known_ids(label: str, ids: Sequence[int], shown: set[int], total: int) -> None:
    bad = sorted({i for i in ids if i not in shown})
    if bad:
        where = f"1..{total}" if len(shown) == total else "the ids shown in the excerpt"
        raise ValueError(f"{label} must be {where}; not in the report: {bad}")


# ======================================================================== numbered reports (LLM judge)


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


# ======================================================================== LLM extractor


class LLMScaffoldExtractor(LLMJudge):
    """Facts, questions and entities of Y by three LLM roles, each asked once per part of Y."""

    FACTS_ROLE = "score_scaffold_facts"
    QUESTIONS_ROLE = "score_scaffold_questions"
    ENTITIES_ROLE = "score_scaffold_entities"
    ROLES = (FACTS_ROLE, QUESTIONS_ROLE, ENTITIES_ROLE)
    # role -> reply model and how many items to ask over the whole report. Facts and questions: the paper's
    # 20-100 per document (001 App. G.1, G.2). Entity attributes: 20-150 is frame's bound, not the paper's
    # (App. G.3 asks for all key entities, with no number): it keeps each reply within the output budget and
    # the per-system entity checks bounded in cost.
    ASKS: ClassVar[dict[str, tuple[type[BaseModel], int, int]]] = {
        FACTS_ROLE: (FactsReply, 20, 100),
        QUESTIONS_ROLE: (QuestionsReply, 20, 100),
        ENTITIES_ROLE: (EntitiesReply, 20, 150),
    }

    def _part_budget(self) -> int:
        overhead = max(
            self.overhead(r, report_part="", part_note="", min_items="", max_items="") for r in self.ROLES
        )
        budget = self.input_budget() - overhead - 200
        if budget < 64:
            raise FrameInputError(
                "llm.context_tokens",
                f"context_tokens {self.settings.context_tokens} / output budget "
                f"{max(self.output_budget(r) for r in self.ROLES)} (llm.max_output_tokens) leave no room to "
                "send the gold report to the scaffold extraction roles",
            )
        return budget

    def _range(self, share: float, low: int, high: int) -> tuple[int, int]:
        """How many items to ask of a part holding `share` of Y (paper: low-high per document), within what
        one reply can hold (about 60 tokens per item)."""
        cap = max(5, min(self.output_budget(r) for r in self.ROLES) // 60)
        hi = min(cap, max(5, math.ceil(high * share)))
        return min(hi, max(2, round(low * share))), hi

    def extract(self, gold_markdown: str) -> Scaffold:
        if not gold_markdown.strip():
            return Scaffold(extractor=self.name, gold_markdown=gold_markdown)
        budget = self._part_budget()
        chunks = pack(atoms(gold_markdown, budget), budget, (lambda a: a.top, lambda a: a.flat))
        total = max(1, sum(size(c) for c in chunks))

        def ask_part(job: tuple[str, int]) -> tuple[str, int, Any, int]:
            role, i = job
            schema, low, high = self.ASKS[role]
            lo, hi = self._range(size(chunks[i]) / total, low, high)
            result = self.ask(
                role,
                schema,
                report_part="\n\n".join(a.text for a in chunks[i]),
                part_note=_part_note(chunks, i),
                min_items=str(lo),
                max_items=str(hi),
            )
            return role, i, result.value, result.attempts

        jobs = [(role, i) for role in self.ROLES for i in range(len(chunks))]
        replies = self.map(ask_part, jobs)
        self.last_calls = [{"role": r, "part": i + 1, "attempts": n} for r, i, _, n in replies]
        items = self._merged(chunks, {(r, i): v for r, i, v, _ in replies})
        detail = {"parts": len(chunks), "requests": len(jobs)}
        return Scaffold(extractor=self.name, gold_markdown=gold_markdown, detail=detail, **items)

    def _merged(self, chunks: list[list[Atom]], got: dict[tuple[str, int], Any]) -> dict[str, Any]:
        """The facts, questions and entities of every part's replies: ids run on over the parts, entities
        of the same (normalised) name are merged."""
        facts: list[ScaffoldFact] = []
        questions: list[ScaffoldQuestion] = []
        entities: dict[str, ScaffoldEntity] = {}
        for i, chunk in enumerate(chunks):
            for f in got[(self.FACTS_ROLE, i)].facts:
                where = _placed(chunk, f.source, f.section)
                facts.append(ScaffoldFact(id=len(facts) + 1, text=f.fact, tier=f.tier, **where))
            for q in got[(self.QUESTIONS_ROLE, i)].questions:
                where = _placed(chunk, q.source, q.section)
                questions.append(
                    ScaffoldQuestion(
                        id=len(questions) + 1, question=q.question, answer=q.answer, tier=q.tier, **where
                    )
                )
            _merge_entities(entities, got[(self.ENTITIES_ROLE, i)].entities)
        return {"facts": facts, "questions": questions, "entities": _renumbered(entities.values())}


def _part_note(chunks: list[list[Atom]], i: int) -> str:
    """What a request is told about its part: its number, and the section it continues (when the part
    does not open with a heading)."""
    out = f"This is part {i + 1} of {len(chunks)} of the gold report."
    first = chunks[i][0]
    if first.path and not is_heading(first.text.split("\n", 1)[0]):
        out += f" It continues the section {' > '.join(first.path)}."
    return out


def _placed(chunk: list[Atom], source: str, section: str) -> dict[str, str]:
    """Source and section of an extracted item; the section found in its part when the reply gives none."""
    return {"source": source.strip(), "section": section.strip() or section_of(chunk, source)}


def _merge_entities(entities: dict[str, ScaffoldEntity], replies: Sequence[_EntityOut]) -> None:
    """Add the entities of one reply to `entities` (by normalised name), skipping repeated attributes."""
    for e in replies:
        ent = entities.setdefault(_norm(e.name), ScaffoldEntity(name=e.name, type=e.type.strip() or "other"))
        have = {_norm(a.text) for a in ent.attributes}
        for a in e.attributes:
            if _norm(a.attribute) not in have:
                have.add(_norm(a.attribute))
                ent.attributes.append(
                    ScaffoldAttribute(id=1, text=a.attribute, tier=a.tier, source=a.source.strip())
                )


# ======================================================================== LLM judge

_Job = tuple[str, Any]  # (kind: fact | question | entity | sentence, the batch)


class LLMScaffoldJudge(LLMJudge):
    """Alignment of R' with a scaffold, fact faithfulness and Fact Focus, by four LLM roles."""

    ALIGN_ROLE = "score_scaffold_align"
    ENTITY_ROLE = "score_scaffold_entity_check"
    FAITHFUL_ROLE = "score_scaffold_faithful"
    FOCUS_ROLE = "score_scaffold_focus"
    ROLES = (ALIGN_ROLE, ENTITY_ROLE, FAITHFUL_ROLE, FOCUS_ROLE)

    def __init__(
        self,
        client: Any,
        settings: LLMSettings,
        ctx: Any = None,
        *,
        batch_size: int = BATCH_ITEMS,
        attribute_batch: int = BATCH_ATTRIBUTES,
        max_sentences: int = MAX_ITEMS,
        seed: int = SEED,
    ) -> None:
        if batch_size < 1 or attribute_batch < 1 or max_sentences < 1:
            raise ValueError("batch_size, attribute_batch and max_sentences must be >= 1")
        super().__init__(client, settings, ctx=ctx)
        self.batch_size = batch_size
        self.attribute_batch = attribute_batch
        self.max_sentences = max_sentences
        self.seed = seed

    def _room(self, role: str, **blank: str) -> int:
        room = self.input_budget() - self.overhead(role, **blank) - 200
        if room < 64:
            raise FrameInputError(
                "llm.context_tokens",
                f"context_tokens {self.settings.context_tokens} leave no room for the report next to a batch "
                f"in {role}",
            )
        return room

    def judge(self, scaffold: Scaffold, generated_markdown: str) -> ScaffoldJudgment:
        report = _Numbered.of(generated_markdown)
        has_gold = bool(len(report) and scaffold.gold_markdown.strip())
        gold = _Numbered.of(scaffold.gold_markdown) if has_gold else None
        facts = _focus_facts(scaffold)
        # F and Fact Focus grade the same seeded sample of R' sentences
        ids = list(range(1, len(report) + 1))
        picked = sample_by_text(ids, lambda i: report.pieces[i - 1].text, self.max_sentences, self.seed)
        sampled = picked if gold is not None and len(gold) else []
        focused = picked if facts else []

        def run(job: _Job) -> tuple[list[Alignment], dict[str, Any]]:
            kind, batch = job
            if kind in ("fact", "question"):
                return self._align(kind, batch, report)
            if kind == "entity":
                return self._entities(batch, report)
            if kind == "focus":
                return self._focus(batch, report, facts)
            assert gold is not None
            return self._faithful(batch, report, gold)

        jobs = self._jobs(scaffold, sampled, focused) if len(report) else []
        results = self.map(run, jobs)
        self.last_calls = [call for _, call in results]
        by_kind: dict[str, list[Alignment]] = {"item": [], "sentence": [], "focus": []}
        for (kind, _), (al, _) in zip(jobs, results, strict=True):
            by_kind[kind if kind in ("sentence", "focus") else "item"].extend(al)
        alignments, faithful = by_kind["item"], by_kind["sentence"]
        if not len(report):  # nothing to ask: every item absent
            alignments = _all_absent(scaffold)
        detail = {
            "requests": len(results),
            "retries": sum(c["attempts"] - 1 for c in self.last_calls),
            "excerpted_requests": sum(1 for c in self.last_calls if c["excerpt"]),
            "sampled_sentences": len(sampled),
            "focus_sentences": len(focused),
            "max_sentences": self.max_sentences,
            "seed": self.seed,
        }
        if gold is None and len(report):
            detail["faithfulness"] = "the scaffold holds no gold report"
        return ScaffoldJudgment(
            judge=self.name,
            sentences=len(report),
            alignments=alignments,
            faithful=faithful,
            focus=by_kind["focus"],
            detail=detail,
        )

    def _jobs(self, scaffold: Scaffold, sampled: list[int], focused: Sequence[int] = ()) -> list[_Job]:
        """Facts, questions, entities, sampled R' sentences for F and for Fact Focus, in batches, in that
        order."""
        n = self.batch_size

        def batches(items: Sequence[Any]) -> list[Any]:
            return [items[i : i + n] for i in range(0, len(items), n)]

        return (
            [("fact", b) for b in batches(scaffold.facts)]
            + [("question", b) for b in batches(scaffold.questions)]
            + [("entity", b) for b in self._entity_batches(scaffold)]
            + [("sentence", b) for b in batches(sampled)]
            + [("focus", b) for b in batches(list(focused))]
        )

    def _entity_batches(
        self, scaffold: Scaffold
    ) -> list[list[tuple[ScaffoldEntity, list[ScaffoldAttribute]]]]:
        """Entities packed while their attributes fit `attribute_batch`; a larger entity is split."""
        batches: list[list[tuple[ScaffoldEntity, list[ScaffoldAttribute]]]] = []
        cur: list[tuple[ScaffoldEntity, list[ScaffoldAttribute]]] = []
        n = 0
        for e in scaffold.entities:
            for k in range(0, len(e.attributes), self.attribute_batch):
                part = e.attributes[k : k + self.attribute_batch]
                if cur and n + len(part) > self.attribute_batch:
                    batches.append(cur)
                    cur, n = [], 0
                cur.append((e, part))
                n += len(part)
        if cur:
            batches.append(cur)
        return batches

    def _ask_about(
        self,
        role: str,
        schema: type[Any],
        doc: _Numbered,
        query: str,
        what: str,
        subject: str,
        check: Callable[[Any, set[int]], None],
        slots: tuple[str, str] = ("report_note", "sentences"),
        **variables: str,
    ) -> tuple[Any, int]:
        """One `role` request showing `doc` (whole, or the excerpt sharing most words with `query`) in the
        prompt variables `slots` (its note, its text); `check(reply, ids shown)`. Returns the reply and how
        many of doc's sentences were shown."""
        note_slot, text_slot = slots
        room = self._room(role, **{note_slot: "", text_slot: ""}, **variables)
        text, shown = doc.view(query, room)
        shown_set = set(shown)
        note = _excerpt_note(what, len(shown), len(doc), subject)
        result = self.ask(
            role,
            schema,
            check=lambda reply: check(reply, shown_set),
            **{note_slot: note, text_slot: text},
            **variables,
        )
        return result, len(shown)

    def _align(
        self, kind: str, batch: list[Any], report: _Numbered
    ) -> tuple[list[Alignment], dict[str, Any]]:
        if kind == "fact":
            listing = "\n".join(json.dumps({"id": f.id, "fact": f.text}, ensure_ascii=False) for f in batch)
            query = " ".join(f.text for f in batch)
        else:
            listing = "\n".join(
                json.dumps(
                    {"id": q.id, "question": q.question, "expected_answer": q.answer}, ensure_ascii=False
                )
                for q in batch
            )
            query = " ".join(f"{q.question} {q.answer}" for q in batch)
        ids = [it.id for it in batch]

        def check(reply: AlignReply, shown: set[int]) -> None:
            _exact_ids("id", ids, [a.id for a in reply.alignments])
            _known_ids(
                "sentence_ids", [s for a in reply.alignments for s in a.sentence_ids], shown, len(report)
            )

        what = "facts" if kind == "fact" else "questions"
        result, shown = self._ask_about(
            self.ALIGN_ROLE,
            AlignReply,
            report,
            query,
            "generated report",
            what,
            check,
            criterion=self.prompts[self.ALIGN_ROLE].parts[kind],
            item_label=what,
            items=listing,
            item_ids=", ".join(map(str, ids)),
        )
        suffix = _suffix(shown, len(report), "R'")
        out = []
        for a in sorted(result.value.alignments, key=lambda a: ids.index(a.id)):
            out.append(
                Alignment(
                    item_id=a.id,
                    kind=kind,  # type: ignore[arg-type]
                    ok=a.ok,
                    score=1.0 if a.ok else 0.0,
                    **report.cited(sorted(set(a.sentence_ids))),
                    rationale=(a.justification.strip() + suffix).strip(),
                )
            )
        return out, _call(self.ALIGN_ROLE, kind, result, shown < len(report))

    def _entities(
        self, batch: list[tuple[ScaffoldEntity, list[ScaffoldAttribute]]], report: _Numbered
    ) -> tuple[list[Alignment], dict[str, Any]]:
        listing = "\n".join(
            json.dumps(
                {
                    "entity": e.name,
                    "type": e.type,
                    "attributes": [{"id": a.id, "attribute": a.text} for a in attrs],
                },
                ensure_ascii=False,
            )
            for e, attrs in batch
        )
        ids = [a.id for _, attrs in batch for a in attrs]
        query = " ".join(f"{e.name} " + " ".join(a.text for a in attrs) for e, attrs in batch)

        def check(reply: EntityCheckReply, shown: set[int]) -> None:
            listed = [i for e in reply.entities for i in e.preserved_ids]
            unknown = sorted(set(listed) - set(ids))
            if unknown:
                raise ValueError(f"preserved_ids must be attribute ids of this request; unknown: {unknown}")
            _known_ids(
                "sentence_ids", [s for e in reply.entities for s in e.sentence_ids], shown, len(report)
            )

        result, shown = self._ask_about(
            self.ENTITY_ROLE,
            EntityCheckReply,
            report,
            query,
            "generated report",
            "entities",
            check,
            entities=listing,
        )
        kept: dict[int, list[int]] = {}
        for e in result.value.entities:
            for i in e.preserved_ids:
                kept.setdefault(i, sorted(set(e.sentence_ids)))
        suffix = _suffix(shown, len(report), "R'")
        out = [
            Alignment(
                item_id=i,
                kind="attribute",
                ok=i in kept,
                score=1.0 if i in kept else 0.0,
                **report.cited(kept.get(i, [])),
                rationale=("listed as preserved by the judge" if i in kept else "not listed as preserved")
                + suffix,
            )
            for i in ids
        ]
        return out, _call(self.ENTITY_ROLE, "attribute", result, shown < len(report))

    def _faithful(
        self, batch: list[int], report: _Numbered, gold: _Numbered
    ) -> tuple[list[Alignment], dict[str, Any]]:
        listing = "\n".join(
            json.dumps({"id": i, "sentence": report.pieces[i - 1].text}, ensure_ascii=False) for i in batch
        )
        query = " ".join(report.pieces[i - 1].text for i in batch)

        def check(reply: FaithfulReply, shown: set[int]) -> None:
            _exact_ids("id", batch, [s.id for s in reply.sentences])
            _known_ids("evidence_ids", [e for s in reply.sentences for e in s.evidence_ids], shown, len(gold))

        result, shown = self._ask_about(
            self.FAITHFUL_ROLE,
            FaithfulReply,
            gold,
            query,
            "gold report",
            "sentences to check",
            check,
            ("document_note", "document"),
            sentences=listing,
            sentence_ids=", ".join(map(str, batch)),
        )
        by_id = {s.id: s for s in result.value.sentences}
        suffix = _suffix(shown, len(gold), "Y")
        out = []
        for i in batch:
            s = by_id[i]
            out.append(
                _sentence(
                    report,
                    i,
                    s.supported,
                    **gold.cited(sorted(set(s.evidence_ids))),
                    rationale=(s.justification.strip() + suffix).strip(),
                )
            )
        return out, _call(self.FAITHFUL_ROLE, "sentence", result, shown < len(gold))

    def _focus(
        self, batch: list[int], report: _Numbered, facts: list[ScaffoldFact]
    ) -> tuple[list[Alignment], dict[str, Any]]:
        """Fact Focus (001 Table 7) asked from the sentence side: does each sampled R' sentence state at
        least one main or supporting fact (shown whole, or the facts sharing most words with the batch)?"""
        listing = "\n".join(
            json.dumps({"id": i, "sentence": report.pieces[i - 1].text}, ensure_ascii=False) for i in batch
        )
        ids = ", ".join(map(str, batch))
        room = self._room(self.FOCUS_ROLE, facts_note="", facts="", sentences=listing, sentence_ids=ids)
        text, shown = _facts_view(facts, " ".join(report.pieces[i - 1].text for i in batch), room)
        listed = set(shown)

        def check(reply: FocusReply) -> None:
            _exact_ids("id", batch, [s.id for s in reply.sentences])
            bad = sorted({f for s in reply.sentences for f in s.fact_ids if f not in listed})
            if bad:
                raise ValueError(f"fact_ids must be ids of the listed facts; not listed: {bad}")
            bare = [s.id for s in reply.sentences if s.aligned and not s.fact_ids]
            if bare:
                raise ValueError(f"an aligned sentence must give the fact_ids it states; none for: {bare}")

        result = self.ask(
            self.FOCUS_ROLE,
            FocusReply,
            check=check,
            facts_note=_facts_note(len(shown), len(facts)),
            facts=text,
            sentences=listing,
            sentence_ids=ids,
        )
        by_id = {s.id: s for s in result.value.sentences}
        fact = {f.id: f for f in facts}
        suffix = (
            f" [facts excerpted to fit the context: {len(shown)} of {len(facts)} shown]"
            if len(shown) < len(facts)
            else ""
        )
        out = []
        for i in batch:
            s = by_id[i]
            fids = sorted(set(s.fact_ids)) if s.aligned else []
            out.append(
                _sentence(
                    report,
                    i,
                    s.aligned,
                    sentence_ids=fids,
                    evidence=" ".join(fact[f].text for f in fids[:3]),
                    evidence_ref=fact[fids[0]].section if fids else "",
                    rationale=(s.justification.strip() + suffix).strip(),
                )
            )
        return out, _call(self.FOCUS_ROLE, "focus", result, len(shown) < len(facts))


def _all_absent(scaffold: Scaffold) -> list[Alignment]:
    """Every fact, question and attribute judged absent (an empty R': nothing to ask)."""
    items = (
        [("fact", f.id) for f in scaffold.facts]
        + [("question", q.id) for q in scaffold.questions]
        + [("attribute", a.id) for a in scaffold.attributes()]
    )
    return [
        Alignment(item_id=i, kind=k, ok=False, score=0.0, rationale="the generated report is empty")  # type: ignore[arg-type]
        for k, i in items
    ]


def _suffix(shown: int, total: int, which: str) -> str:
    """Added to every rationale of an excerpted request."""
    return (
        f" [{which} excerpted to fit the context: {shown} of {total} sentences shown]"
        if shown < total
        else ""
    )


def _call(role: str, kind: str, result: Any, excerpt: bool) -> dict[str, Any]:
    """One request's line of `last_calls`."""
    return {
        "role": role,
        "kind": kind,
        "attempts": result.attempts,
        "cached": result.cached,
        "excerpt": excerpt,
    }


# ======================================================================== the family

_EVIDENCE = {
    "eps": "recall",
    "fact_coverage": "recall",
    "question_coverage": "recall",
    "fact_faithfulness": "support",
    "fact_focus": "support",
}
SCAFFOLDS_SCHEMA = pa.schema(
    [
        pa.field("instance_id", pa.string(), nullable=False),
        pa.field("extractor", pa.string()),
        pa.field("facts", pa.int64()),
        pa.field("questions", pa.int64()),
        pa.field("attributes", pa.int64()),
        pa.field("scaffold_json", pa.string()),  # schemas.scaffold.Scaffold
    ]
)


# What the metric checklist does not hold each metric to (docs/metrics/robustness.md).
_RECALL = (("order", "a recall of Y's scaffold, wherever its facts stand in R'"),)
_PRECISION = (
    ("content", "a precision of R's sentences: a section left out states nothing false"),
    ("order", "each sentence is graded on its own, wherever it stands"),
    ("tables", "a precision: a table left out states nothing false"),
)
_FLOOR = (
    "paper 001's preservation score rewards keeping main items while dropping supporting ones: Y against "
    "itself scores 0, its floor, so no change can lower it"
)
_MAIN_ONLY = (
    "counts main facts only: the lead prose of top-level sections and the aggregate rows of their tables"
    " (tiers follow the layout, docs/metrics/scaffold.md); what the checklist changes mostly lies"
    " elsewhere (the largest section of a 10-Q or a survey opens with a subsection, so it has no lead),"
    " and fact_coverage and supporting_coverage hold the claim for the whole report"
)
_QUESTIONS = (
    "one question per section, answered by its first fact, and one per main aggregate row: a change to the"
    " rest of a section (its tables, its later figures and directions) leaves every question answered"
)
_UNCLAIMED = {
    "fps": tuple((a, _FLOOR) for a in ("figures", "directions", "periods", "content", "order", "tables")),
    "main_coverage": (*_RECALL, *((a, _MAIN_ONLY) for a in ("figures", "directions", "content", "tables"))),
    "question_coverage": (*_RECALL, *((a, _QUESTIONS) for a in ("figures", "directions", "tables"))),
    "fact_faithfulness": _PRECISION,
    "fact_focus": _PRECISION,
}
_UNCLAIMED["qps"] = _UNCLAIMED["fps"]


class ScaffoldFamily(MetricFamily):
    """Semantic scaffold metrics (paper 001): facts, questions and entities of Y, checked in R'."""

    name = "scaffold"
    metrics = tuple(
        MetricSpec(m, evidence=_EVIDENCE.get(m, ""), unclaimed=_UNCLAIMED.get(m, _RECALL))
        for m in SCAFFOLD_METRICS
    )
    reads = frozenset({"gold", "prepared"})
    prepares = True
    summary = "semantic scaffold of the gold report (facts, questions, entities) checked in R'"

    def __init__(self, env: JudgeEnv) -> None:
        super().__init__(env)
        s = env.settings
        if env.offline:
            units = OfflineCoverageJudge(env.embed, env.embedder)
            self.extractor: Any = OfflineScaffoldExtractor(units)
            self.judge: Any = OfflineScaffoldJudge(units, max_sentences=s.max_items, seed=s.seed)
        else:
            self.extractor = LLMScaffoldExtractor(env.client, env.llm)
            self.judge = LLMScaffoldJudge(env.client, env.llm, max_sentences=s.max_items, seed=s.seed)

    def prepare(self, gold: str) -> dict[str, Any]:
        return self.extractor.extract(gold).model_dump(mode="json")

    def score(self, inputs: Inputs) -> list[MetricResult]:
        if inputs.prepared is None:
            raise ValueError("the scaffold family needs the instance's scaffold")
        sc = Scaffold.model_validate(inputs.prepared)
        return scaffold_metrics(sc, self.judge.judge(sc, inputs.generated))

    def prepared_outputs(
        self, prepared: Mapping[str, dict[str, Any]]
    ) -> tuple[dict[str, bytes], dict[str, Any]]:
        rows = [
            {
                "instance_id": iid,
                "extractor": sc.get("extractor", ""),
                "facts": len(sc.get("facts", [])),
                "questions": len(sc.get("questions", [])),
                "attributes": sum(len(e.get("attributes", [])) for e in sc.get("entities", [])),
                "scaffold_json": json.dumps(sc, sort_keys=True),
            }
            for iid, sc in sorted(prepared.items())
        ]
        return {"scaffolds.parquet": parquet_bytes(rows, SCAFFOLDS_SCHEMA)}, {"scaffolds": len(rows)}
