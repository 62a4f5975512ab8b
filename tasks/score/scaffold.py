"""Semantic Scaffold (paper 001 §4, App. B, E, G): facts, questions and entity attributes extracted once from
the gold report Y, then every generated report R' judged against that fixed reference.

In FRAME the "document" of the paper is the gold report Y and the "summary" is a generated report R'.
Reports are not summaries: FPS and QPS *penalise* supporting detail (paper App. E.1), so they are always
shown beside plain coverage (FC, QC, main and supporting coverage), never instead of it.

**Metrics** (:func:`scaffold_metrics`, exactly ``schemas.scoring.SCAFFOLD_METRICS``). With M_c, S_c the main
and supporting facts of the scaffold and M_s, S_s those inferable from R' (tier "other" never counts):

    fps                 = (M_s / M_c) * (1 - S_s / S_c)      penalty term 1 when S_c = 0; None when M_c = 0
    qps                 = (Q_s / Q_c) * (1 - R_s / R_c)      the same on main (Q) / supporting (R) questions
    eps                 = preserved attributes / attributes  (every tier; None without attributes)
    fact_coverage (FC)  = (M_s + S_s) / (M_c + S_c)          None when M_c + S_c = 0
    question_coverage   = (Q_s + R_s) / (Q_c + R_c)
    main_coverage       = M_s / M_c                          None when M_c = 0
    supporting_coverage = S_s / S_c                          None when S_c = 0
    fact_faithfulness F = supported R' sentences / graded R' sentences (a seeded sample of at most 100;
                          None when R' has no sentence)

An item the judgment does not mention counts as not inferable / answerable / preserved.

**OfflineScaffoldExtractor** (``name = "offline:scaffold-heuristic"``): a deterministic HEURISTIC, no model
decides what matters; it reads the layout of the report.

* Facts = the coverage units of Y (``OfflineCoverageJudge.extract_units``: sentences, list items and table
  rows, fragments and repeats left out), capped at ``MAX_FACTS`` by a seeded sample (never reached by the
  demo reports). Tiers, first rule that applies:
  1. ``other``: filing boilerplate ("forward-looking statements", "disclosure controls and procedures",
     "table of contents", ...) whatever its figures; or, without a strong number (the unit type is not
     "statistic"): 6 words or fewer, a pointer to another part ("The following table shows ...", "See
     Note 7", a "Figure 3:" caption), a metadata cue ("period ended ...") in at most 15 words, or fewer
     than 3 content words once dates, years and stop words are removed;
  2. ``main``: a unit of the *lead* of a top-level section - prose directly under the section heading before
     its first subsection or table (the content before the first section heading counts as a lead too) -
     or a table row of a top-level section whose label names an aggregate ("Total ...", "Net income",
     "Net sales", "Revenues", "Gross margin", "Operating income"); aggregates in the tables of deeper notes
     stay supporting;
  3. ``supporting``: everything else.
* Questions: one per section heading of Y that has a fact beneath it - "What does the report state about
  <heading path>?", expected answer = the section's first non-"other" fact, tier main for top-level
  sections and supporting for deeper ones - plus one per main table row with a strong figure: "What was
  <row label> (<context>) for <column header>?", expected answer = the first strong figure of the row.
* Entities: every table row (name = "<context label>: <row label>", attributes = its cells
  "<column header>: <value>", tier of the row) and, in prose, salient named terms - acronyms ("GPR"),
  CamelCase names ("BloombergGPT", "iPhone") and runs of two or more capitalised words that do not open
  the sentence ("Habitable Worlds Observatory") - mentioned by at least 2 non-"other" units (the
  ``MAX_PROSE_ENTITIES`` most mentioned), attributes = the first ``MAX_TERM_ATTRIBUTES`` unit sentences
  mentioning them. At most ``MAX_ATTRIBUTES`` attributes in all (seeded sample, ids renumbered).

*Limits*: tiers follow the layout, not the meaning - a key result stated deep in a subsection is
"supporting", a generic lead sentence is "main"; a section without lead prose (a 10-Q's "Management's
Discussion and Analysis" opens with a subsection) contributes no main fact; "Net income" under the context
label "Operating expenses" names its entity "Operating expenses: Net income". The LLM extractor is the
reference; this one is cheap, deterministic and fails in these documented ways.

**OfflineScaffoldJudge** (``name = "offline:scaffold+<embedder>"``) reuses the offline coverage grading
(number-aware + embedding cosine, ``tasks.score.coverage``): an item is a unit graded against R', ``ok``
when its score >= ``OK_THRESHOLD`` = 0.5.

* fact: the fact text; question: its expected answer (for a row question, the row graded on that figure
  only); attribute: a row attribute is the row graded on that cell's figure only, a prose attribute its
  sentence, and the entity's name must also be in R' (exact or rapidfuzz partial ratio >= 90 on the
  normalised text of R', for "context: label" names the label alone is enough);
* sentence ids: the best segment of R' (the grade's evidence) located among ``markdown_pieces(R')``;
* F: each R' piece of a seeded sample (``sample_items``, at most 100) graded as a unit against Y (the
  scaffold keeps Y in ``gold_markdown``); ``ok`` = supported.
All items are graded in one ``grade`` call against R' and one against Y, and every text is embedded at
most once per judge object (an in-memory memo in front of the embedder), so the cost per system is about
that of coverage: the pieces of Y and R'.

**LLM roles** (any OpenAI-compatible model through ``tasks.llm.client.LLMClient``, ``name =
"openai:<model>"``; prompts ``prompts/score_scaffold_*.md``, replies validated with pydantic, tier labels
normalised from "main point" / "supporting detail" / "other"):

* ``LLMScaffoldExtractor``: roles ``score_scaffold_facts``, ``score_scaffold_questions`` and
  ``score_scaffold_entities``, each asked once per *part* of Y. A long Y is split at top-level sections
  (then subsections, blocks) into parts that fit ``context_tokens - max_output_tokens - 2000`` tokens
  (the reserve is at most a tenth of the context) minus the prompt; each request is told its part number
  and which section it continues, and asked for a number of items proportional to the part's share of Y
  (20-100 facts and questions over the whole report, as in the paper, within what ``max_output_tokens``
  can hold). Ids are renumbered over all parts; entities of the same name are merged.
* ``LLMScaffoldJudge``: R' is shown sentence by sentence (``markdown_pieces`` order, ids from 1, under
  their headings). Role ``score_scaffold_align`` aligns facts and questions in batches of ``BATCH_ITEMS``
  (reply ``{"alignments": [{"id", "ok", "sentence_ids", "justification"}]}``; the ``check`` requires
  exactly the batch's ids, once each, and sentence ids that were shown: otherwise a corrective retry, then
  ``LLMOutputError``). Role ``score_scaffold_entity_check`` lists the preserved attribute ids per entity
  (batches of about ``BATCH_ATTRIBUTES`` attributes). Role ``score_scaffold_faithful`` says for each sampled
  R' sentence (batches of ``BATCH_ITEMS``) whether Y supports it, citing Y's numbered pieces. When the
  report shown (R', or Y for F) does not fit beside a batch, the request holds the sentences that share
  the most words with the batch, in report order with their original ids, and both the prompt and every
  rationale of the batch say it is an excerpt: nothing is cut silently.

Everything is deterministic for a given input (LLM parts up to the model's replies, which the client caches).
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
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
from schemas.scoring import SCAFFOLD_METRICS, InfoUnit, ItemScore, MetricResult
from tasks.errors import FrameInputError
from tasks.ground.tokens import count_tokens, count_tokens_many
from tasks.llm.prompts import load_prompt, render
from tasks.score.coverage import OfflineCoverageJudge, Piece, markdown_pieces
from tasks.score.coverage import _atoms as _coverage_atoms
from tasks.score.coverage import _cells as _table_cells
from tasks.score.coverage import _pack as _coverage_pack
from tasks.score.coverage import _size as _atoms_size
from tasks.score.judges import MAX_ITEMS, EmbedFn, sample_items
from tasks.score.numbers import numbers_in
from tasks.synthesize.retrieve import STOPWORDS, terms

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
RESERVE_TOKENS = 2000  # context kept free for message framing and token-count drift
SEED = 0
_MEMO_LIMIT = 50_000  # embeddings kept in memory per judge (384 floats each: ~75 MB at most)

T = TypeVar("T")

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
    """Tier rule 1 of the module docstring (boilerplate, metadata, short fragments)."""
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
    """Label, context and (header, value) cells of a table-row piece, read back from its text
    ("<context>: <label> | <header>: <value>; ...") with the raw row's cells as anchors."""
    raw = _table_cells(piece.source)
    if not raw:
        return None
    label, values = raw[0], [v for v in raw[1:] if v]
    head, sep, rest = piece.text.partition(" | ")
    if not sep:
        head, rest = ("", piece.text) if values else (piece.text, "")
    cells: list[tuple[str, str]] = []
    pos = 0
    for v in values:
        idx, start = -1, pos
        while True:
            k = rest.find(v, start)
            if k < 0:
                break
            end = k + len(v)
            if end == len(rest) or rest.startswith("; ", end):
                idx = k
                break
            start = k + 1
        if idx < 0:
            cells.append(("", v))
            continue
        part = rest[pos:idx]
        header = part[:-2] if part.endswith(": ") else part
        cells.append((header.strip(), v))
        pos = idx + len(v) + 2
    context = ""
    if label and head.endswith(label) and len(head) > len(label):
        context = head[: -len(label)].rstrip().rstrip(":").strip()
    return _Row(name=head or label, label=label or head, context=context, cells=tuple(cells))


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
    """Acronyms, CamelCase names and capitalised multi-word names of one sentence (module docstring)."""
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
    """The deterministic layout heuristic of the module docstring; `extract` needs no embedding."""

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
            elif p.kind == "row" and len(p.path) <= 1 and _is_aggregate(_table_cells(p.source)[0]):
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
        total = len(flat)
        keep = {id(a) for _, a in sample_items(flat, MAX_ATTRIBUTES, SEED)}
        out: list[ScaffoldEntity] = []
        next_id = 1
        for e in ordered:
            attrs = []
            for a in e.attributes:
                if id(a) in keep:
                    attrs.append(a.model_copy(update={"id": next_id}))
                    next_id += 1
            if attrs:
                out.append(e.model_copy(update={"attributes": attrs}))
        return out, total


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
    return fact.source.strip().startswith("|") and " | " in fact.text


class OfflineScaffoldJudge:
    """Offline judgment of R' against a scaffold (module docstring)."""

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
        facts = {f.id: f for f in scaffold.facts}
        units: list[InfoUnit] = []
        index: dict[tuple[str, str], int] = {}

        def unit(content: str, source: str, kind: str) -> int:
            key = (content, source)
            if key not in index:
                index[key] = len(units)
                units.append(InfoUnit(unit_id=len(units), type=kind, content=content, source_sentence=source))
            return index[key]

        def fact_unit(f: ScaffoldFact) -> int:
            return unit(f.text, f.source if _is_offline_row(f) else "", "fact")

        def cell_unit(f: ScaffoldFact, value: str, kind: str) -> int:
            # the row's text (for the cosine) with only this cell's figures (for the number match)
            return unit(f.text, f"| {value} |", kind)

        plan: list[tuple[str, int, int, str]] = []  # (kind, item id, unit index, note)
        for f in scaffold.facts:
            plan.append(("fact", f.id, fact_unit(f), ""))
        for q in scaffold.questions:
            f = facts.get(q.fact_id) if q.fact_id is not None else None
            if f is not None and f.text == q.answer:
                ui = fact_unit(f)
            elif f is not None and _is_offline_row(f):
                ui = cell_unit(f, q.answer, "question")
            else:
                ui = unit(q.answer, "", "question")
            plan.append(("question", q.id, ui, ""))
        for e in scaffold.entities:
            note = "" if _present(e.name, haystack) else "absent"
            for a in e.attributes:
                f = facts.get(a.fact_id) if a.fact_id is not None else None
                if f is not None and a.value and _is_offline_row(f):
                    ui = cell_unit(f, a.value, "attribute")
                elif f is not None and a.text == f.text:
                    ui = fact_unit(f)
                else:
                    ui = unit(f"{e.name}: {a.text}", "", "attribute")
                plan.append(("attribute", a.id, ui, note))
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

    def _faithful(self, gold_markdown: str, segs: list[Piece]) -> tuple[list[Alignment], int]:
        if not segs or not gold_markdown.strip():
            return [], 0
        picked = sample_items(list(range(1, len(segs) + 1)), self.max_sentences, self.seed)
        claims = [
            InfoUnit(
                unit_id=i,
                type="sentence",
                content=segs[i - 1].text,
                source_sentence=segs[i - 1].source if segs[i - 1].kind == "row" else "",
            )
            for i in picked
        ]
        gold_ids = _sentence_index(markdown_pieces(gold_markdown))
        grades = self._grader.grade(claims, gold_markdown)
        out = []
        for g in grades:
            a = self._alignment("sentence", g.index, g.score, g, g.rationale, gold_ids)
            out.append(a.model_copy(update={"text": g.text}))
        return out, len(picked)


# ======================================================================== metrics


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


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


def scaffold_metrics(scaffold: Scaffold, judgment: ScaffoldJudgment) -> list[MetricResult]:
    """The eight SCAFFOLD_METRICS of one judgment (module docstring), in that order."""
    by: dict[tuple[str, int], Alignment] = {(a.kind, a.item_id): a for a in judgment.alignments}

    def ok(kind: str, item_id: int) -> bool:
        a = by.get((kind, item_id))
        return bool(a and a.ok)

    def tally(kind: str, items: Sequence[Any]) -> dict[str, int]:
        out = {"main_c": 0, "main_s": 0, "supporting_c": 0, "supporting_s": 0, "other_c": 0, "other_s": 0}
        for it in items:
            out[f"{it.tier}_c"] += 1
            out[f"{it.tier}_s"] += ok(kind, it.id)
        out["unjudged"] = sum((kind, it.id) not in by for it in items)
        return out

    ft = tally("fact", scaffold.facts)
    qt = tally("question", scaffold.questions)
    m_c, m_s, s_c, s_s = ft["main_c"], ft["main_s"], ft["supporting_c"], ft["supporting_s"]
    q_c, q_s, r_c, r_s = qt["main_c"], qt["main_s"], qt["supporting_c"], qt["supporting_s"]
    fact_detail = {
        "M_s": m_s,
        "M_c": m_c,
        "S_s": s_s,
        "S_c": s_c,
        "other": ft["other_c"],
        "unjudged": ft["unjudged"],
    }
    q_detail = {
        "Q_s": q_s,
        "Q_c": q_c,
        "R_s": r_s,
        "R_c": r_c,
        "other": qt["other_c"],
        "unjudged": qt["unjudged"],
    }

    attrs = scaffold.attributes()
    entity_of = scaffold.entity_of()
    preserved = sum(ok("attribute", a.id) for a in attrs)
    by_tier = {t: [a for a in attrs if a.tier == t] for t in ("main", "supporting", "other")}
    eps_detail = {
        "preserved": preserved,
        "attributes": len(attrs),
        "entities": len(scaffold.entities),
        "by_tier": {
            t: {"n": len(v), "preserved": sum(ok("attribute", a.id) for a in v)} for t, v in by_tier.items()
        },
    }
    graded = judgment.faithful
    supported = sum(a.ok for a in graded)
    judge = judgment.judge
    common = {"extractor": scaffold.extractor}

    results = {
        "fps": MetricResult(
            metric="fps",
            value=_preservation(m_s, m_c, s_s, s_c),
            judge=judge,
            population=m_c + s_c,
            detail={**fact_detail, **common},
        ),
        "qps": MetricResult(
            metric="qps",
            value=_preservation(q_s, q_c, r_s, r_c),
            judge=judge,
            population=q_c + r_c,
            detail={**q_detail, **common},
        ),
        "eps": MetricResult(
            metric="eps",
            value=_ratio(preserved, len(attrs)),
            judge=judge,
            population=len(attrs),
            items=[
                _item(
                    a.id,
                    f"attribute:{a.tier}",
                    f"{entity_of[a.id].name}: {a.text}",
                    a.source,
                    by.get(("attribute", a.id)),
                )
                for a in attrs
            ],
            detail={**eps_detail, **common},
        ),
        "fact_faithfulness": MetricResult(
            metric="fact_faithfulness",
            value=_ratio(supported, len(graded)),
            judge=judge,
            population=judgment.sentences,
            items=[_item(a.item_id, "sentence", a.text, a.text, a, "gold sentence") for a in graded],
            detail={"supported": supported, "graded": len(graded), "sentences": judgment.sentences, **common},
        ),
        "fact_coverage": MetricResult(
            metric="fact_coverage",
            value=_ratio(m_s + s_s, m_c + s_c),
            judge=judge,
            population=len(scaffold.facts),
            items=[
                _item(f.id, f"fact:{f.tier}", f.text, f.source, by.get(("fact", f.id)))
                for f in scaffold.facts
            ],
            detail={**fact_detail, "counted": m_c + s_c, **common},
        ),
        "question_coverage": MetricResult(
            metric="question_coverage",
            value=_ratio(q_s + r_s, q_c + r_c),
            judge=judge,
            population=len(scaffold.questions),
            items=[
                _item(
                    q.id,
                    f"question:{q.tier}",
                    f"{q.question} -> {q.answer}",
                    q.source,
                    by.get(("question", q.id)),
                )
                for q in scaffold.questions
            ],
            detail={**q_detail, "counted": q_c + r_c, **common},
        ),
        "main_coverage": MetricResult(
            metric="main_coverage",
            value=_ratio(m_s, m_c),
            judge=judge,
            population=m_c,
            detail={**fact_detail, **common},
        ),
        "supporting_coverage": MetricResult(
            metric="supporting_coverage",
            value=_ratio(s_s, s_c),
            judge=judge,
            population=s_c,
            detail={**fact_detail, **common},
        ),
    }
    return [results[m] for m in SCAFFOLD_METRICS]


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


class _AlignOut(BaseModel):
    id: int
    ok: bool
    sentence_ids: list[int] = Field(default_factory=list)
    justification: str = ""


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


class _FaithfulOut(BaseModel):
    id: int
    supported: bool
    evidence_ids: list[int] = Field(default_factory=list)
    justification: str = ""


class FaithfulReply(BaseModel):
    """Reply of role score_scaffold_faithful."""

    sentences: list[_FaithfulOut]


def _exact_ids(label: str, want: Sequence[int], got: Sequence[int]) -> None:
    """Raise ValueError unless `got` names every id of `want` once and nothing else."""
    dupes = sorted({i for i in got if list(got).count(i) > 1})
    if dupes:
        raise ValueError(f"{label} given more than once: {dupes}")
    extra = sorted(set(got) - set(want))
    missing = [i for i in want if i not in set(got)]
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


# ======================================================================== LLM helpers


class _LLMBase:
    def __init__(self, client: Any, settings: LLMSettings, ctx: Any = None) -> None:
        self.client = client
        self.settings = settings
        self.ctx = ctx
        self.name = f"openai:{settings.model}"
        self.last_calls: list[dict[str, Any]] = []  # role, attempts, cached per request of the last call

    def _input_budget(self) -> int:
        s = self.settings
        return s.context_tokens - s.max_output_tokens - min(RESERVE_TOKENS, s.context_tokens // 10)

    @staticmethod
    def _overhead(prompt: Any, **variables: Any) -> int:
        return sum(count_tokens(m["content"]) for m in render(prompt, **variables))

    def _run(self, fn: Callable[[Any], T], jobs: list[Any]) -> list[T]:
        if len(jobs) <= 1 or self.settings.concurrency <= 1:
            return [fn(j) for j in jobs]
        with ThreadPoolExecutor(max_workers=min(self.settings.concurrency, len(jobs))) as pool:
            return list(pool.map(fn, jobs))

    def _ask(self, role: str, messages: list[dict[str, str]], schema: type[Any], check: Any = None) -> Any:
        result = self.client.complete_json(role, messages, schema, self.ctx, check=check)
        return result


# -- numbered reports


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


def _excerpt_note(what: str, shown: int, total: int, subject: str) -> str:
    if shown == total:
        return f"Below is the complete {what}, {total} numbered sentences (table rows count as sentences)."
    return (
        f"The {what} ({total} numbered sentences) is too long for this request: below is an EXCERPT of "
        f"{shown} sentences, those sharing the most words with the {subject}, in report order and with "
        f"their original ids; the other {total - shown} sentences are omitted. Use only the ids shown."
    )


# ======================================================================== LLM extractor


class LLMScaffoldExtractor(_LLMBase):
    """Facts, questions and entities of Y by three LLM roles (module docstring)."""

    FACTS_ROLE = "score_scaffold_facts"
    QUESTIONS_ROLE = "score_scaffold_questions"
    ENTITIES_ROLE = "score_scaffold_entities"

    def __init__(self, client: Any, settings: LLMSettings, ctx: Any = None) -> None:
        super().__init__(client, settings, ctx)
        self.prompts = {r: load_prompt(r) for r in (self.FACTS_ROLE, self.QUESTIONS_ROLE, self.ENTITIES_ROLE)}

    def __repr__(self) -> str:
        return f"LLMScaffoldExtractor(model={self.settings.model!r})"

    def _part_budget(self) -> int:
        overhead = max(
            self._overhead(p, report_part="", part_note="", min_items="", max_items="")
            for p in self.prompts.values()
        )
        budget = self._input_budget() - overhead - 200
        if budget < 64:
            raise FrameInputError(
                "llm.context_tokens",
                f"context_tokens {self.settings.context_tokens} / max_output_tokens "
                f"{self.settings.max_output_tokens} leave no room to send the gold report to the scaffold "
                "extraction roles",
            )
        return budget

    def _range(self, share: float, low: int, high: int) -> tuple[int, int]:
        """How many items to ask of a part holding `share` of Y (paper: low-high per document), within what
        one reply can hold (about 60 tokens per item)."""
        cap = max(5, self.settings.max_output_tokens // 60)
        hi = min(cap, max(5, math.ceil(high * share)))
        return min(hi, max(2, round(low * share))), hi

    def extract(self, gold_markdown: str) -> Scaffold:
        if not gold_markdown.strip():
            return Scaffold(extractor=self.name, gold_markdown=gold_markdown)
        budget = self._part_budget()
        atoms = _coverage_atoms(gold_markdown, budget)
        chunks = _coverage_pack(atoms, budget, (lambda a: a.top, lambda a: a.flat))
        total = max(1, sum(_atoms_size(c) for c in chunks))

        def note(i: int, chunk: list[Any]) -> str:
            out = f"This is part {i + 1} of {len(chunks)} of the gold report."
            first = chunk[0]
            if first.path and not first.text.lstrip().startswith("#"):
                out += f" It continues the section {' > '.join(first.path)}."
            return out

        schemas = {
            self.FACTS_ROLE: FactsReply,
            self.QUESTIONS_ROLE: QuestionsReply,
            self.ENTITIES_ROLE: EntitiesReply,
        }
        ranges = {self.FACTS_ROLE: (20, 100), self.QUESTIONS_ROLE: (20, 100), self.ENTITIES_ROLE: (20, 150)}

        def ask(job: tuple[str, int]) -> tuple[str, int, Any, int]:
            role, i = job
            chunk = chunks[i]
            lo, hi = self._range(_atoms_size(chunk) / total, *ranges[role])
            messages = render(
                self.prompts[role],
                report_part="\n\n".join(a.text for a in chunk),
                part_note=note(i, chunk),
                min_items=str(lo),
                max_items=str(hi),
            )
            result = self._ask(role, messages, schemas[role])
            return role, i, result.value, result.attempts

        jobs = [(role, i) for role in schemas for i in range(len(chunks))]
        replies = self._run(ask, jobs)
        self.last_calls = [{"role": r, "part": i + 1, "attempts": n} for r, i, _, n in replies]
        got = {(r, i): v for r, i, v, _ in replies}

        facts: list[ScaffoldFact] = []
        questions: list[ScaffoldQuestion] = []
        entities: dict[str, ScaffoldEntity] = {}
        for i, chunk in enumerate(chunks):
            for f in got[(self.FACTS_ROLE, i)].facts:
                facts.append(
                    ScaffoldFact(
                        id=len(facts) + 1,
                        text=f.fact,
                        tier=f.tier,
                        source=f.source.strip(),
                        section=f.section.strip() or _section_of(chunk, f.source),
                    )
                )
            for q in got[(self.QUESTIONS_ROLE, i)].questions:
                questions.append(
                    ScaffoldQuestion(
                        id=len(questions) + 1,
                        question=q.question,
                        answer=q.answer,
                        tier=q.tier,
                        source=q.source.strip(),
                        section=q.section.strip() or _section_of(chunk, q.source),
                    )
                )
            for e in got[(self.ENTITIES_ROLE, i)].entities:
                key = _norm(e.name)
                ent = entities.setdefault(key, ScaffoldEntity(name=e.name, type=e.type.strip() or "other"))
                have = {_norm(a.text) for a in ent.attributes}
                for a in e.attributes:
                    if _norm(a.attribute) not in have:
                        have.add(_norm(a.attribute))
                        ent.attributes.append(
                            ScaffoldAttribute(id=1, text=a.attribute, tier=a.tier, source=a.source.strip())
                        )
        next_id = 1
        out_entities = []
        for ent in entities.values():
            if not ent.attributes:
                continue
            attrs = []
            for a in ent.attributes:
                attrs.append(a.model_copy(update={"id": next_id}))
                next_id += 1
            out_entities.append(ent.model_copy(update={"attributes": attrs}))
        return Scaffold(
            extractor=self.name,
            facts=facts,
            questions=questions,
            entities=out_entities,
            gold_markdown=gold_markdown,
            detail={"parts": len(chunks), "requests": len(jobs)},
        )


def _section_of(chunk: list[Any], source: str) -> str:
    """Heading path of the atom of `chunk` holding `source` (else of its first atom under a heading)."""
    probe = _norm(source)[:120]
    if probe:
        for a in chunk:
            if probe in _norm(a.text.replace("|", " ")):
                return " > ".join(a.path)
    return next((" > ".join(a.path) for a in chunk if a.path), "")


# ======================================================================== LLM judge


class LLMScaffoldJudge(_LLMBase):
    """Alignment of R' with a scaffold, and fact faithfulness, by three LLM roles (module docstring)."""

    ALIGN_ROLE = "score_scaffold_align"
    ENTITY_ROLE = "score_scaffold_entity_check"
    FAITHFUL_ROLE = "score_scaffold_faithful"

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
        super().__init__(client, settings, ctx)
        self.batch_size = batch_size
        self.attribute_batch = attribute_batch
        self.max_sentences = max_sentences
        self.seed = seed
        self.prompts = {r: load_prompt(r) for r in (self.ALIGN_ROLE, self.ENTITY_ROLE, self.FAITHFUL_ROLE)}

    def __repr__(self) -> str:
        return f"LLMScaffoldJudge(model={self.settings.model!r})"

    def _room(self, prompt: Any, **variables: str) -> int:
        room = self._input_budget() - self._overhead(prompt, **variables) - 200
        if room < 64:
            raise FrameInputError(
                "llm.context_tokens",
                f"context_tokens {self.settings.context_tokens} leave no room for the report next to a batch "
                f"in {prompt.name}",
            )
        return room

    def judge(self, scaffold: Scaffold, generated_markdown: str) -> ScaffoldJudgment:
        report = _Numbered.of(generated_markdown)
        jobs: list[tuple[str, Any]] = []
        if len(report):
            facts, qs = scaffold.facts, scaffold.questions
            jobs += [("fact", facts[i : i + self.batch_size]) for i in range(0, len(facts), self.batch_size)]
            jobs += [("question", qs[i : i + self.batch_size]) for i in range(0, len(qs), self.batch_size)]
            jobs += [("entity", b) for b in self._entity_batches(scaffold)]
        sampled: list[int] = []
        gold = (
            _Numbered.of(scaffold.gold_markdown) if len(report) and scaffold.gold_markdown.strip() else None
        )
        if gold is not None and len(gold):
            sampled = sample_items(list(range(1, len(report) + 1)), self.max_sentences, self.seed)
            jobs += [
                ("sentence", sampled[i : i + self.batch_size])
                for i in range(0, len(sampled), self.batch_size)
            ]

        def run(job: tuple[str, Any]) -> tuple[list[Alignment], dict[str, Any]]:
            kind, batch = job
            if kind in ("fact", "question"):
                return self._align(kind, batch, report)
            if kind == "entity":
                return self._entities(batch, report)
            assert gold is not None
            return self._faithful(batch, report, gold)

        results = self._run(run, jobs)
        self.last_calls = [call for _, call in results]
        alignments = [a for al, _ in results for a in al if a.kind != "sentence"]
        faithful = [a for al, _ in results for a in al if a.kind == "sentence"]
        if not len(report):  # nothing to ask: every item absent
            alignments = [
                Alignment(
                    item_id=it.id, kind=k, ok=False, score=0.0, rationale="the generated report is empty"
                )
                for k, items in (("fact", scaffold.facts), ("question", scaffold.questions))
                for it in items
            ] + [
                Alignment(
                    item_id=a.id,
                    kind="attribute",
                    ok=False,
                    score=0.0,
                    rationale="the generated report is empty",
                )
                for a in scaffold.attributes()
            ]
        return ScaffoldJudgment(
            judge=self.name,
            sentences=len(report),
            alignments=alignments,
            faithful=faithful,
            detail={
                "requests": len(results),
                "retries": sum(c["attempts"] - 1 for c in self.last_calls),
                "excerpted_requests": sum(1 for c in self.last_calls if c["excerpt"]),
                "sampled_sentences": len(sampled),
                "max_sentences": self.max_sentences,
                "seed": self.seed,
                **(
                    {"faithfulness": "the scaffold holds no gold report"}
                    if gold is None and len(report)
                    else {}
                ),
            },
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

    def _align(
        self, kind: str, batch: list[Any], report: _Numbered
    ) -> tuple[list[Alignment], dict[str, Any]]:
        prompt = self.prompts[self.ALIGN_ROLE]
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
        variables = {
            "criterion": prompt.parts[kind],
            "item_label": "facts" if kind == "fact" else "questions",
            "items": listing,
            "item_ids": ", ".join(map(str, ids)),
        }
        room = self._room(prompt, report_note="", sentences="", **variables)
        text, shown = report.view(query, room)
        shown_set = set(shown)
        what = "facts" if kind == "fact" else "questions"
        note = _excerpt_note("generated report", len(shown), len(report), what)

        def check(reply: AlignReply) -> None:
            _exact_ids("id", ids, [a.id for a in reply.alignments])
            _known_ids(
                "sentence_ids", [s for a in reply.alignments for s in a.sentence_ids], shown_set, len(report)
            )

        messages = render(prompt, report_note=note, sentences=text, **variables)
        result = self._ask(self.ALIGN_ROLE, messages, AlignReply, check)
        suffix = self._suffix(len(shown), len(report), "R'")
        out = []
        for a in sorted(result.value.alignments, key=lambda a: ids.index(a.id)):
            sids = sorted(set(a.sentence_ids))
            out.append(
                Alignment(
                    item_id=a.id,
                    kind=kind,  # type: ignore[arg-type]
                    ok=a.ok,
                    score=1.0 if a.ok else 0.0,
                    sentence_ids=sids,
                    evidence=" ".join(report.pieces[s - 1].text for s in sids[:3]),
                    evidence_ref=" > ".join(report.pieces[sids[0] - 1].path) if sids else "",
                    rationale=(a.justification.strip() + suffix).strip(),
                )
            )
        return out, self._call(self.ALIGN_ROLE, kind, result, len(shown) < len(report))

    def _entities(
        self, batch: list[tuple[ScaffoldEntity, list[ScaffoldAttribute]]], report: _Numbered
    ) -> tuple[list[Alignment], dict[str, Any]]:
        prompt = self.prompts[self.ENTITY_ROLE]
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
        room = self._room(prompt, report_note="", sentences="", entities=listing)
        text, shown = report.view(query, room)
        shown_set = set(shown)

        def check(reply: EntityCheckReply) -> None:
            listed = [i for e in reply.entities for i in e.preserved_ids]
            unknown = sorted(set(listed) - set(ids))
            if unknown:
                raise ValueError(f"preserved_ids must be attribute ids of this request; unknown: {unknown}")
            _known_ids(
                "sentence_ids", [s for e in reply.entities for s in e.sentence_ids], shown_set, len(report)
            )

        note = _excerpt_note("generated report", len(shown), len(report), "entities")
        messages = render(prompt, report_note=note, sentences=text, entities=listing)
        result = self._ask(self.ENTITY_ROLE, messages, EntityCheckReply, check)
        kept: dict[int, list[int]] = {}
        for e in result.value.entities:
            for i in e.preserved_ids:
                kept.setdefault(i, sorted(set(e.sentence_ids)))
        suffix = self._suffix(len(shown), len(report), "R'")
        out = []
        for i in ids:
            sids = kept.get(i, [])
            out.append(
                Alignment(
                    item_id=i,
                    kind="attribute",
                    ok=i in kept,
                    score=1.0 if i in kept else 0.0,
                    sentence_ids=sids,
                    evidence=" ".join(report.pieces[s - 1].text for s in sids[:3]),
                    evidence_ref=" > ".join(report.pieces[sids[0] - 1].path) if sids else "",
                    rationale=(
                        ("listed as preserved by the judge" if i in kept else "not listed as preserved")
                        + suffix
                    ),
                )
            )
        return out, self._call(self.ENTITY_ROLE, "attribute", result, len(shown) < len(report))

    def _faithful(
        self, batch: list[int], report: _Numbered, gold: _Numbered
    ) -> tuple[list[Alignment], dict[str, Any]]:
        prompt = self.prompts[self.FAITHFUL_ROLE]
        listing = "\n".join(
            json.dumps({"id": i, "sentence": report.pieces[i - 1].text}, ensure_ascii=False) for i in batch
        )
        query = " ".join(report.pieces[i - 1].text for i in batch)
        room = self._room(
            prompt, document_note="", document="", sentences=listing, sentence_ids=", ".join(map(str, batch))
        )
        text, shown = gold.view(query, room)
        shown_set = set(shown)

        def check(reply: FaithfulReply) -> None:
            _exact_ids("id", batch, [s.id for s in reply.sentences])
            _known_ids(
                "evidence_ids", [e for s in reply.sentences for e in s.evidence_ids], shown_set, len(gold)
            )

        note = _excerpt_note("gold report", len(shown), len(gold), "sentences to check")
        messages = render(
            prompt,
            document_note=note,
            document=text,
            sentences=listing,
            sentence_ids=", ".join(map(str, batch)),
        )
        result = self._ask(self.FAITHFUL_ROLE, messages, FaithfulReply, check)
        by_id = {s.id: s for s in result.value.sentences}
        suffix = self._suffix(len(shown), len(gold), "Y")
        out = []
        for i in batch:
            s = by_id[i]
            eids = sorted(set(s.evidence_ids))
            out.append(
                Alignment(
                    item_id=i,
                    kind="sentence",
                    text=report.pieces[i - 1].text,
                    ok=s.supported,
                    score=1.0 if s.supported else 0.0,
                    sentence_ids=eids,
                    evidence=" ".join(gold.pieces[e - 1].text for e in eids[:3]),
                    evidence_ref=" > ".join(gold.pieces[eids[0] - 1].path) if eids else "",
                    rationale=(s.justification.strip() + suffix).strip(),
                )
            )
        return out, self._call(self.FAITHFUL_ROLE, "sentence", result, len(shown) < len(gold))

    @staticmethod
    def _suffix(shown: int, total: int, which: str) -> str:
        return (
            f" [{which} excerpted to fit the context: {shown} of {total} sentences shown]"
            if shown < total
            else ""
        )

    @staticmethod
    def _call(role: str, kind: str, result: Any, excerpt: bool) -> dict[str, Any]:
        return {
            "role": role,
            "kind": kind,
            "attempts": result.attempts,
            "cached": result.cached,
            "excerpt": excerpt,
        }
