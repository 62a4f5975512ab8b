"""Coverage (paper 000 §4.2): information-unit recall of a generated report R' against the gold report Y.

`coverage` samples Y's units and averages their grades; `OfflineCoverageJudge` (number-aware embedding
match, deterministic) and `LLMCoverageJudge` (the paper's extractor and grader) are the two judges.
Formulas, heuristics, thresholds and limits: docs/metrics/coverage.md.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, Field, field_validator

from schemas.config import LLMSettings
from schemas.scoring import UNIT_TYPES, InfoUnit, ItemScore, MetricResult
from tasks.errors import FrameInputError
from tasks.markdown.chunks import Atom, atoms, halve, pack, section_of, size
from tasks.markdown.direction import direction
from tasks.markdown.document import is_heading
from tasks.markdown.numbers import Num, NumberPool
from tasks.markdown.pieces import (
    DATE,
    Block,
    Piece,
    clean,
    markdown_pieces,
    md_blocks,
    numbers,
    row_figures_strong,
    strong_numbers,
)
from tasks.markdown.text import names, terms, words
from tasks.score.judges import MAX_ITEMS, CoverageJudge, EmbedFn, SampledFamily, sample_items
from tasks.score.llm_judge import LLMJudge, ids_check, split_on_length, stripped_text
from tasks.score.metric import Inputs, MetricSpec
from tasks.score.reply_size import extraction_measure
from tasks.tokens import count_tokens

__all__ = [
    "BATCH_UNITS",
    "LLMCoverageJudge",
    "OfflineCoverageJudge",
    "coverage",
]

_WORDS = re.compile(r"[A-Za-z][A-Za-z'’-]*")
MIN_WORDS = 4  # prose units shorter than this are fragments
PROSE_RAMP = (0.55, 0.85)  # cosine -> [0, 1] for units without a strong number
NUMBER_RAMP = (0.35, 0.65)  # ... for units with a strong number (the number must match as well)
BATCH_UNITS = 20  # units per score_coverage request
PLANS_KEPT = 256  # grading plans kept between embedding_texts and grade (per judge)

# ======================================================================== offline judge

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


def _ramp(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    return np.clip((x - lo) / (hi - lo), 0.0, 1.0)


class OfflineCoverageJudge:
    """Number-aware embedding judge (docs/metrics/coverage.md). `embed` returns L2-normalised rows."""

    def __init__(self, embed: EmbedFn, embedder_name: str) -> None:
        self.embed = embed
        self.embedder_name = embedder_name
        self.name = f"offline:number-aware+{embedder_name}"
        self._pieces: dict[int, Piece] = {}  # unit_id -> piece, of the last extract_units call
        # grading plans made ahead by embedding_texts, each used once by grade (bounded, oldest dropped)
        self._planned: OrderedDict[tuple, tuple[list[Piece], list[_Plan], list[str]]] = OrderedDict()
        self._planned_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OfflineCoverageJudge({self.embedder_name!r})"

    def extract_units(self, gold_markdown: str) -> list[InfoUnit]:
        units: list[InfoUnit] = []
        seen: set[str] = set()
        for p in markdown_pieces(gold_markdown):
            if not _is_unit(p):
                continue
            key = _key(p.text)
            if key in seen:
                continue
            seen.add(key)
            units.append(
                InfoUnit(
                    unit_id=len(units),
                    type=_unit_type(p),
                    content=p.text,
                    source_sentence=p.source,
                    section=p.section,
                )
            )
        return units

    @staticmethod
    def _grading(
        units: list[InfoUnit], generated_markdown: str
    ) -> tuple[list[Piece], list[_Plan], list[str]]:
        """R's segments, each unit's plan, and the texts whose cosines grading needs (in embed order)."""
        segs = markdown_pieces(generated_markdown)
        if not units or not segs:
            return segs, [], []
        plans = _plans(units, segs)
        # identical text with every number present scores 1 (its cosine is 1): no embedding needed
        need = [units[ui].content for ui, plan in enumerate(plans) if plan.same is None]
        return segs, plans, (need + [seg.text for seg in segs]) if need else []

    @staticmethod
    def _plan_key(units: list[InfoUnit], generated_markdown: str) -> tuple:
        return (generated_markdown, tuple((u.unit_id, u.content, u.source_sentence) for u in units))

    def embedding_texts(self, units: Sequence[InfoUnit], generated_markdown: str) -> list[str]:
        units = list(units)
        graded = self._grading(units, generated_markdown)
        with self._planned_lock:
            self._planned[self._plan_key(units, generated_markdown)] = graded
            while len(self._planned) > PLANS_KEPT:
                self._planned.popitem(last=False)
        return graded[2]

    def grade(self, units: Sequence[InfoUnit], generated_markdown: str) -> list[ItemScore]:
        units = list(units)
        if not units:
            return []
        with self._planned_lock:
            graded = self._planned.pop(self._plan_key(units, generated_markdown), None)
        segs, plans, texts = graded or self._grading(units, generated_markdown)
        if not segs:
            return [_unit_item(u, 0.0, rationale="the generated report has no content") for u in units]
        need = [ui for ui, plan in enumerate(plans) if plan.same is None]
        cos = np.zeros((len(units), len(segs)), dtype=np.float64)
        if need:
            vecs = np.asarray(self.embed(texts), dtype=np.float32)
            cos[need] = np.clip(vecs[: len(need)] @ vecs[len(need) :].T, -1.0, 1.0).astype(np.float64)
        return [
            _graded(u, plan, cos[ui], segs) for ui, (u, plan) in enumerate(zip(units, plans, strict=True))
        ]


@dataclass
class _Plan:
    """What grading one unit needs besides cosines."""

    nums: list[Num]  # the unit's numbers
    strong: bool  # one of them is strong
    weak: np.ndarray  # per number: a year, a date, math or a cross-reference
    hits: np.ndarray  # (numbers x segments): the number appears in the segment
    same: int | None  # the segment with the unit's text verbatim and all its numbers
    gate: np.ndarray  # (segments): 0 where the segment states the opposite direction, else the share of
    # the unit's names (tasks.markdown.text.names) it holds


def _plans(units: list[InfoUnit], segs: list[Piece]) -> list[_Plan]:
    pool_nums = [n for s in segs for n in s.context_numbers]
    owner = np.array([i for i, s in enumerate(segs) for _ in s.context_numbers], dtype=np.int64)
    pool = NumberPool(pool_nums)
    first_of: dict[str, int] = {}
    seg_keys = [_key(seg.text) for seg in segs]
    for i, k in enumerate(seg_keys):
        first_of.setdefault(k, i)
    figures = [_figures(u.content, u.source_sentence) for u in units]
    seg_dirs = np.array([direction(s.text) for s in segs], dtype=np.int8)
    seg_words = [words(s.text) for s in segs]
    # every unit's numbers looked up at once: (numbers of all units) x (segments holding a match)
    flat = [n for nums, _ in figures for n in nums]
    seg_hits = np.zeros((len(flat), len(segs)), dtype=bool)
    rows, cols = pool.match_pairs(flat)
    seg_hits[rows, owner[cols]] = True
    plans = []
    row = 0
    for u, (nums, weak) in zip(units, figures, strict=True):
        hits = seg_hits[row : row + len(nums)].copy()
        row += len(nums)
        key = _key(u.content)
        same = first_of.get(key)
        if same is None:  # the unit verbatim inside a longer segment (paragraphs merged, a run-on)
            same = _containing(key, seg_keys)
        if same is not None and not hits[:, same].all():
            same = None
        d = direction(u.content)
        gate = (seg_dirs != -d).astype(np.float64) if d else np.ones(len(segs))
        # a prose unit about named things is covered only as far as a segment names them too
        about = names(u.content) if not u.source_sentence.lstrip().startswith("|") else frozenset()
        if about:
            gate *= np.array([len(about & w) / len(about) for w in seg_words])
        plans.append(_Plan(nums, _strong(weak), np.array(weak, dtype=bool), hits, same, gate))
    return plans


def _containing(key: str, seg_keys: Sequence[str]) -> int | None:
    """The first segment holding `key` (a whole unit's text) as a run of whole words, or None."""
    for i, sk in enumerate(seg_keys):
        at = sk.find(key)
        while at >= 0:
            end = at + len(key)
            if (at == 0 or not sk[at - 1].isalnum()) and (end == len(sk) or not sk[end].isalnum()):
                return i
            at = sk.find(key, at + 1)
    return None


def _share(hits: np.ndarray, weak: np.ndarray) -> np.ndarray:
    """Per segment: share of the strong numbers it holds x share of the weak ones (each 1 when there is
    none): a right year does not make up for a wrong figure, nor a right figure for a wrong year."""
    out = np.ones(hits.shape[1])
    for rows in (~weak, weak):
        if rows.any():
            out *= hits[rows].mean(axis=0)
    return out


def _graded(u: InfoUnit, plan: _Plan, c: np.ndarray, segs: list[Piece]) -> ItemScore:
    """The unit's score on its best segment (`c`: its cosines with every segment) and the rationale."""
    nums, strong, hits, same = plan.nums, plan.strong, plan.hits, plan.same
    ramp = "number" if strong else "prose"
    if same is not None:
        best, value, cosine = same, 1.0, "identical text in R'"
    else:
        if nums:
            lo, hi = NUMBER_RAMP if strong else PROSE_RAMP
            score = _share(hits, plan.weak) * _ramp(c, lo, hi) * plan.gate
        else:
            score = _ramp(c, *PROSE_RAMP) * plan.gate
        # best segment: highest score, then highest cosine, then earliest
        best = int(np.lexsort((np.arange(len(segs)), -c, -score))[0])
        value = min(1.0, max(0.0, float(round(score[best], 6))))
        cosine = f"cosine {c[best]:.3f}"
        if not plan.gate[best]:
            cosine += ", opposite direction"
    if nums:
        found = [n.text for k, n in enumerate(nums) if hits[k, best]]
        missing = [n.text for k, n in enumerate(nums) if not hits[k, best]]
        rationale = (
            f"numbers matched {len(found)}/{len(nums)}"
            + (f" ({', '.join(found[:8])})" if found else "")
            + (f"; missing: {', '.join(missing[:8])}" if missing else "")
            + (f"; {cosine}" if same is not None else f"; {cosine} ({ramp} ramp)")
        )
    else:
        rationale = cosine if same is not None else f"{cosine} (prose ramp, no number)"
    seg = segs[best]
    return _unit_item(
        u,
        value,
        evidence=seg.source if seg.kind == "row" else seg.text,
        evidence_ref=seg.section,
        rationale=rationale,
    )


# ======================================================================== LLM judge


_UnitContent = stripped_text("content must not be blank")


class _UnitOut(BaseModel):
    type: str
    content: _UnitContent
    source_sentence: str = ""
    section: str = ""

    @field_validator("type")
    @classmethod
    def _known_type(cls, v: str) -> str:
        t = re.sub(r"[\s-]+", "_", v.strip().lower())
        if t not in UNIT_TYPES:
            raise ValueError(f"type must be one of {', '.join(UNIT_TYPES)} (got {v!r})")
        return t


class UnitsReply(BaseModel):
    """Reply of role score_units."""

    units: list[_UnitOut]


class _Judgment(BaseModel):
    unit_id: int
    score: float = Field(ge=0.0, le=1.0)
    evidence: str = ""
    rationale: str = ""


class CoverageReply(BaseModel):
    """Reply of role score_coverage."""

    judgments: list[_Judgment]


def _norm(text: str) -> str:
    return " ".join(clean(text).lower().split())


def _batch_check(ids: Sequence[int]) -> Callable[[CoverageReply], None]:
    want = list(ids)

    def explain(dupes: list, extra: list, missing: list) -> str:
        if dupes:
            return f"unit_id given more than once: {dupes}"
        return (
            "judgments must cover exactly the unit_ids "
            + ", ".join(map(str, want))
            + (f"; unknown unit_id: {extra}" if extra else "")
            + (f"; missing unit_id: {missing}" if missing else "")
        )

    return ids_check(want, lambda reply: [j.unit_id for j in reply.judgments], explain)


class LLMCoverageJudge(LLMJudge):
    """The paper's LLM extractor + judge (docs/metrics/coverage.md), over any OpenAI-compatible endpoint."""

    UNITS_ROLE = "score_units"
    COVERAGE_ROLE = "score_coverage"
    ROLES = (UNITS_ROLE, COVERAGE_ROLE)

    def __init__(self, client: Any, settings: LLMSettings, *, ctx: Any = None, batch_size: int = BATCH_UNITS):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1 (got {batch_size})")
        super().__init__(client, settings, ctx=ctx)
        self.batch_size = batch_size

    def _unit_chunk_budget(self) -> int:
        return self.room(
            self.UNITS_ROLE, 64, "the gold report", spare=200, report_part="", part_note="", unit_types=""
        )

    def unit_parts(self, gold_markdown: str) -> list[list[Atom]]:
        """The gold report cut into the parts sent to score_units: each part's prompt fits the input budget
        and the reply it asks for (every unit restates its sentence or row) is expected to fit the role's
        output budget (tasks.score.reply_size)."""
        budget = self._unit_chunk_budget()
        measure = extraction_measure(budget, self.output_budget(self.UNITS_ROLE))
        gold_atoms = atoms(gold_markdown, budget, measure)
        if not any(a.text.strip() for a in gold_atoms):
            return []
        parts: list[list[Atom]] = []
        for part in pack(gold_atoms, budget, (lambda a: a.top, lambda a: a.flat)):
            if parts and all(is_heading(a.text) for a in parts[-1]):
                part = parts.pop() + part  # headings alone hold no unit: they go with what follows them
            parts.append(part)
        return parts

    # -- units

    def extract_units(self, gold_markdown: str) -> list[InfoUnit]:
        if not gold_markdown.strip():
            return []
        chunks = self.unit_parts(gold_markdown)
        if not chunks:
            return []
        total = len(chunks)
        measure = extraction_measure(self._unit_chunk_budget(), self.output_budget(self.UNITS_ROLE))

        def ask_part(job: tuple[int, list[Atom]]) -> list[tuple[list[_UnitOut], list[Atom]]]:
            i, chunk = job
            return split_on_length(
                lambda part: ask((i, part)), chunk, lambda part: halve(part, measure), self.UNITS_ROLE
            )

        def ask(job: tuple[int, list[Atom]]) -> tuple[list[_UnitOut], list[Atom]]:
            i, chunk = job
            first = chunk[0]
            where = " > ".join(first.path) or "(report start)"
            starts_at_heading = is_heading(first.text.split("\n", 1)[0])
            note = f"This is part {i + 1} of {total} of the gold report."
            if not starts_at_heading and first.path:
                note += f" It continues the section {where}."
            result = self.ask(
                self.UNITS_ROLE,
                UnitsReply,
                report_part="\n\n".join(a.text for a in chunk),
                part_note=note,
                unit_types=", ".join(UNIT_TYPES),
                on_length="split",
            )
            return result.value.units, chunk

        replies = [r for rs in self.map(ask_part, list(enumerate(chunks))) for r in rs]
        found = [(u, chunk) for got, chunk in replies for u in got]
        units = [
            InfoUnit(
                unit_id=i,
                type=u.type,
                content=u.content,
                source_sentence=u.source_sentence.strip(),
                section=u.section.strip() or section_of(chunk, u.source_sentence),
            )
            for i, (u, chunk) in enumerate(found)
        ]
        self.last_calls = [{"role": self.UNITS_ROLE, "parts": total, "units": len(units)}]
        return units

    # -- grading

    def _report_view(self, r_atoms: list[Atom], batch: list[InfoUnit], room: int) -> tuple[str, list[str]]:
        """R' whole when it fits `room` tokens, else its sections most related to the batch (report order)
        and the names of the omitted ones."""
        full = "\n\n".join(a.text for a in r_atoms)
        if count_tokens(full) <= room:
            return full, []
        want = set(terms(" ".join(u.content for u in batch)))
        parts = pack(r_atoms, max(1, room // 2), (lambda a: a.flat,))
        scored = []
        for pi, part in enumerate(parts):
            have = set(terms(" ".join(a.text for a in part)))
            scored.append((-len(want & have), pi, size(part) + 8))
        chosen: set[int] = set()
        used = 0
        for _, pi, tokens in sorted(scored):
            if used + tokens <= room:
                chosen.add(pi)
                used += tokens

        def part_names(part: list[Atom]) -> list[str]:
            return list(dict.fromkeys(" > ".join(a.path) or "(report start)" for a in part))

        shown = {name for pi in chosen for name in part_names(parts[pi])}
        names: list[str] = []
        for pi, part in enumerate(parts):
            if pi not in chosen:
                for name in part_names(part):
                    label = f"{name} (in part)" if name in shown else name
                    if label not in names:
                        names.append(label)
        pieces = []
        for pi, part in enumerate(parts):
            if pi in chosen:
                pieces.append("\n\n".join(a.text for a in part))
            elif not pieces or pieces[-1] != "[... omitted ...]":
                pieces.append("[... omitted ...]")
        return "\n\n".join(pieces), names

    def grade(self, units: Sequence[InfoUnit], generated_markdown: str) -> list[ItemScore]:
        units = list(units)
        if not units:
            return []
        batches = [units[i : i + self.batch_size] for i in range(0, len(units), self.batch_size)]
        base = self.overhead(self.COVERAGE_ROLE, generated_report="", report_note="", units="", unit_ids="")
        blocks = md_blocks(generated_markdown)
        budget = self.input_budget()
        atom_limit = max(64, (budget - base) // 4)
        r_atoms = atoms(generated_markdown, atom_limit) if generated_markdown.strip() else []
        results = self.map(lambda batch: self._grade_batch(batch, r_atoms, blocks, budget - base), batches)
        self.last_calls = [{"role": self.COVERAGE_ROLE, "batches": len(batches)}]
        return [s for batch in results for s in batch]

    def _grade_batch(
        self, batch: list[InfoUnit], r_atoms: list[Atom], blocks: list[Block], left: int
    ) -> list[ItemScore]:
        """One score_coverage request: R' (or an excerpt fitting the `left` tokens) and the batch's units."""
        listing = "\n".join(
            json.dumps({"unit_id": u.unit_id, "type": u.type, "content": u.content}, ensure_ascii=False)
            for u in batch
        )
        ids = ", ".join(str(u.unit_id) for u in batch)
        room = left - count_tokens(listing) - count_tokens(ids) - 200
        if room < 64:
            raise FrameInputError(
                "llm.context_tokens",
                f"context_tokens {self.settings.context_tokens} leave no room for the generated report "
                f"next to a batch of {len(batch)} units in {self.COVERAGE_ROLE}",
            )
        if not r_atoms:
            view, omitted = "(the generated report is empty)", []
        else:
            view, omitted = self._report_view(r_atoms, batch, room)
        if omitted:
            note = (
                "The generated report is too long for this request: below is an EXCERPT holding its "
                "sections most related to these units. Omitted sections: " + "; ".join(omitted) + "."
            )
        else:
            note = "Below is the complete generated report."
        result = self.ask(
            self.COVERAGE_ROLE,
            CoverageReply,
            check=_batch_check([u.unit_id for u in batch]),
            generated_report=view,
            report_note=note,
            units=listing,
            unit_ids=ids,
        )
        by_id = {j.unit_id: j for j in result.value.judgments}
        suffix = ""
        if omitted:
            suffix = f" [R' excerpted to fit the context; omitted sections: {'; '.join(omitted)}]"
        return [
            _unit_item(
                u,
                float(by_id[u.unit_id].score),
                evidence=by_id[u.unit_id].evidence.strip(),
                evidence_ref=self._locate(blocks, by_id[u.unit_id].evidence),
                rationale=(by_id[u.unit_id].rationale.strip() + suffix).strip(),
            )
            for u in batch
        ]

    @staticmethod
    def _locate(blocks: list[Block], evidence: str) -> str:
        """Heading path of the block of R' that holds the quoted evidence ('' when not found)."""
        quote = _norm(evidence)
        if not quote:
            return ""
        probe = quote[:120]
        for b in blocks:
            if b.kind not in ("title", "heading") and probe in _norm(b.raw.replace("|", " ")):
                return " > ".join(b.path)
        for b in blocks:  # a table row quoted with its cell bars
            if b.kind == "table" and probe in _norm(b.raw):
                return " > ".join(b.path)
        return ""


# ======================================================================== driver


def coverage(
    gold_markdown: str,
    generated_markdown: str,
    judge: CoverageJudge,
    *,
    max_items: int = MAX_ITEMS,
    seed: int = 0,
) -> MetricResult:
    """IUR of `generated_markdown` against `gold_markdown` (docs/metrics/coverage.md)."""
    units = judge.extract_units(gold_markdown)
    if not units:
        why = "the gold report has no information unit"
        return MetricResult.undefined("coverage", judge.name, why, seed=seed)
    sample = sample_items(units, max_items, seed)
    items = judge.grade(sample, generated_markdown)
    if len(items) != len(sample) or [i.index for i in items] != [u.unit_id for u in sample]:
        raise ValueError(
            f"{judge.name}: grade returned {len(items)} scores for {len(sample)} units (or out of order)"
        )
    value = float(np.mean([i.score for i in items]))
    by_type: dict[str, list[float]] = {}
    for i in items:
        by_type.setdefault(i.kind, []).append(i.score)
    return MetricResult(
        metric="coverage",
        value=value if math.isfinite(value) else None,
        judge=judge.name,
        population=len(units),
        items=items,
        detail={
            "sampled": len(sample),
            "seed": seed,
            "max_items": max_items,
            "by_type": {k: {"n": len(v), "mean": float(np.mean(v))} for k, v in sorted(by_type.items())},
        },
    )


# ---------------------------------------------------------------- the family


# what the metric checklist does not hold a recall to (docs/metrics/robustness.md)
RECALL_UNCLAIMED = (("order", "a recall of Y's information units, wherever they stand in R'"),)


class CoverageFamily(
    SampledFamily,
    metric=MetricSpec("coverage", group="frame", evidence="recall", unclaimed=RECALL_UNCLAIMED),
    reads="gold",
    judges=(OfflineCoverageJudge, LLMCoverageJudge),
):
    """Information-unit recall: share of the gold report's sampled units that R' conveys."""

    def measure(self, inputs: Inputs, *, max_items: int, seed: int) -> MetricResult:
        return coverage(inputs.gold, inputs.generated, self.judge, max_items=max_items, seed=seed)

    def embeds_ahead(self) -> bool:
        return isinstance(self.judge, OfflineCoverageJudge)  # the LLM judge embeds nothing

    def embedding_texts(self, inputs: Inputs) -> list[str]:
        if not self.embeds_ahead():
            return []
        units = self.judge.extract_units(inputs.gold)
        sample = sample_items(units, self.env.settings.max_items, inputs.seed)
        return self.judge.embedding_texts(sample, inputs.generated)
