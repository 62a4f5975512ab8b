"""Faithfulness (paper 000 §4.3): how well the grounding documents G support the claims of a generated
report R'.

`faithfulness` samples R's claims, checks them for direct support (stage 1) and sends the weak ones to
entailment (stage 2); `OfflineFaithfulnessJudge` (figures and embeddings, deterministic) and
`LLMFaithfulnessJudge` are the two judges. Formulas, heuristics, thresholds and limits:
docs/metrics/faithfulness.md.
"""

from __future__ import annotations

import bisect
import hashlib
import math
import re
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from schemas.config import LLMSettings
from schemas.scoring import Claim, GroundingText, ItemScore, MetricResult
from tasks.errors import FrameInputError
from tasks.ground.load import grounding_set_from_rows
from tasks.llm.prompts import render
from tasks.lru import BoundedLRU
from tasks.markdown.direction import opposite
from tasks.markdown.document import code_mask, heading_of
from tasks.markdown.document import title as markdown_title
from tasks.markdown.numbers import (
    PERCENT,
    POINTS,
    Num,
    NumberPool,
    derivation,
    numbers_in,
    periods_agree,
    units_agree,
)
from tasks.markdown.pieces import (
    DATE,
    MATH,
    fix_dates,
    markdown_numbers,
    markdown_pieces,
    row_figures,
    stated_scale,
)
from tasks.markdown.text import names, split_sentences, terms, words
from tasks.score.evidence import Piece, cut, pick, relevance
from tasks.score.judges import (
    MAX_ITEMS,
    SUPPORT_THRESHOLD,
    EmbedFn,
    FaithfulnessJudge,
    SampledFamily,
    sample_by_text,
)
from tasks.score.llm_judge import LLMJudge, ids_check, split_on_length, stripped_text
from tasks.score.metric import Inputs, MetricSpec
from tasks.score.reply_size import extraction_measure
from tasks.synthesize.retrieve import RetrievalIndex
from tasks.tokens import count_tokens

__all__ = [
    "BATCH_CLAIMS",
    "LLMFaithfulnessJudge",
    "OfflineFaithfulnessJudge",
    "claim_figures",
    "claims_of",
    "faithfulness",
    "report_chunks",
]

# ---------------------------------------------------------------- parameters (docs/metrics/faithfulness.md)

MIN_WORDS = 4
BM25_K = 8
NUM_K = 4
UNIT_K = 3
COMMON_SHARE, COMMON_MIN = 0.05, 20  # a figure in more passages than both is too common to select on
PROSE_RAMP = (0.55, 0.85)  # cosine -> text support, claims without a strong figure (as coverage)
NUMBER_RAMP = (0.35, 0.70)  # ... claims with a strong figure, which must match as well (as coverage)
VERBATIM_MIN_CHARS = 20
EVIDENCE_CHARS = 800
SPECIFIC_DIGITS = 4  # significant digits that make a figure specific enough to count when stated elsewhere
WIDE_DIGITS = 3  # figures of this many significant digits may use the wide derivation pool, and ratios
DERIVE_POOL = 40  # at most this many distinct magnitudes in a derivation pool
# grounding sets kept built per judge (LRU), bounded by their text (~15 bytes of index per character):
# an embed-ahead pass walks every set of a run before the score tasks walk them again
GROUND_CACHE, GROUND_CACHE_CHARS = 64, 24_000_000
CLAIMS_KEPT = 512  # reports whose extracted claims a judge keeps (the embed task's, for the score tasks)
NOTE_WORDS = 80  # a passage of at most this many words stating a unit states it for the table after it

# the LLM judge (docs/metrics/faithfulness.md, "Evidence of the LLM judge")
BATCH_CLAIMS = 10
CLAIM_TOKENS = 300  # allowance per claim in a request: its text, sentence, section, verdict, excerpt ids
VERDICT_TOKENS = 150  # the first-pass verdict shown to stage 2 is cut to this
MIN_EVIDENCE = 1500  # tokens of excerpts per claim at least (stage 1), however small the window
REFS_SHOWN = 10  # excerpts a claim names as found for it (the request's other excerpts are shown too)
MORE_K = 40  # BM25 passages ranked after the offline candidates when G goes as excerpts

# ---------------------------------------------------------------- text helpers

_WORDS = re.compile(r"[A-Za-z][A-Za-z'’-]*")
_XREF = re.compile(
    r"(?:\b(?:tables?|figures?|figs?|sections?|secs?|eqs?|equations?|appendix|appendices|notes?|items?|"
    r"parts?|footnotes?|chapters?|exhibits?|schedules?|articles?|steps?|stages?|phases?|refs?|rules?)"
    r"\.?\s*|§\s*)$",
    re.IGNORECASE,
)
_CITATION = re.compile(r"\[\s*\d{1,3}(?:\s*[,–-]\s*\d{1,3})*\s*\]")
# not claims: placeholders, boilerplate notes, statements that the sources say nothing (no passage can
# support an absence)
_PLACEHOLDER, _BOILERPLATE, _NO_CONTENT = (
    re.compile(pattern, re.I)
    for pattern in (
        r"^(?:n/?a|tbd|tba|none|nil|not applicable|not available|to be (?:determined|added|confirmed)|"
        r"\.{2,}|…|[-–—]+|\[[^\]]*\]|placeholder|lorem ipsum.*)\.?$",
        r"^(?:\(.*\)|table of contents|\(?unaudited\)?|see accompanying notes.*)\.?$",
        r"\b(?:documents?|sources?|filings?|papers?) (?:of|for) (?:the|this) (?:period|window|quarter|year) "
        r"(?:do(?:es)? not|did not) (?:cover|mention|discuss|report|address)\b",
    )
)
_MARKUP = re.compile(r"\*\*|__|`+|\\")


def _norm(text: str) -> str:
    """Whitespace- and emphasis-normalised text for verbatim matching."""
    return " ".join(_MARKUP.sub("", text).split())


def _figures_of(text: str) -> list[tuple[Num, bool]]:
    """(number, weak) for the figures of `text`: cross-references and citation markers dropped; weak =
    a year, part of a date, or inside LaTeX math (an exponent is not a reported figure)."""
    text = fix_dates(text)
    cites = [m.span() for m in _CITATION.finditer(text)]
    weak_spans = [m.span() for m in DATE.finditer(text)] + [m.span() for m in MATH.finditer(text)]
    out: list[tuple[Num, bool]] = []
    for n in numbers_in(text):
        if _XREF.search(text[max(0, n.start - 16) : n.start]):
            continue
        if any(a <= n.start and n.end <= b for a, b in cites):
            continue
        weak = n.yearlike or any(a <= n.start and n.end <= b for a, b in weak_spans)
        out.append((n, weak))
    return out


def _row_figures_of(content: str, source: str) -> list[tuple[Num, bool]]:
    """(figure, weak) of a table-row claim: its cells read with the table (`pieces.row_figures`: stated
    unit, column periods), cross-references and citation markers left out as in `_figures_of`."""
    out: list[tuple[Num, bool]] = []
    seen: dict[str, dict[tuple[int, int], bool]] = {}
    for n, cell in row_figures(content, source):
        if cell not in seen:
            seen[cell] = {(m.start, m.end): w for m, w in _figures_of(cell)}
        weak = seen[cell].get((n.start, n.end))
        if weak is not None:
            out.append((n, weak))
    return out


def _claim_figs(content: str, source: str = "") -> tuple[list[Num], list[bool]]:
    """The distinct figures a claim asserts, each with its weak flag (weak only if every occurrence is)."""
    if source.strip().startswith("|"):
        found = _row_figures_of(content, source)
    else:
        found = _figures_of(content)
    index: dict[tuple, int] = {}
    out: list[Num] = []
    weak: list[bool] = []
    for n, w in found:
        key = n.key
        if key in index:
            weak[index[key]] = weak[index[key]] and w
            continue
        index[key] = len(out)
        out.append(n)
        weak.append(w)
    return out, weak


def claim_figures(content: str, source: str = "") -> list[Num]:
    """The figures a claim asserts (docs/metrics/faithfulness.md, "Figures"), distinct by what they say
    (signed value, precision, unit, period, scale)."""
    return _claim_figs(content, source)[0]


def _strong_figures(content: str, source: str = "") -> list[Num]:
    figs, weak = _claim_figs(content, source)
    return [n for n, w in zip(figs, weak, strict=True) if not w]


def _sig(n: Num) -> int:
    if n.magnitude <= 0:
        return 1
    return max(1, int(math.floor(math.log10(n.magnitude) - math.log10(n.step) + 1e-9)) + 1)


def _is_claim(kind: str, text: str) -> bool:
    t = text.strip()
    if not t or _PLACEHOLDER.match(t) or _BOILERPLATE.match(t) or _NO_CONTENT.search(t):
        return False
    if kind == "row":
        return True
    return len(_WORDS.findall(t)) >= MIN_WORDS


def _shares(credit: Sequence[float], weak: Sequence[bool]) -> float:
    """mean credit of the strong figures x mean credit of the weak ones (each 1 when there is none)."""
    strong = [float(c) for c, w in zip(credit, weak, strict=True) if not w]
    weak_c = [float(c) for c, w in zip(credit, weak, strict=True) if w]
    s = sum(strong) / len(strong) if strong else 1.0
    return s * (sum(weak_c) / len(weak_c) if weak_c else 1.0)


def _eff_sig(n: Num) -> int:
    """Significant digits a figure claims: trailing zeros of a whole number do not count ("1,350" -> 3,
    "1,200" -> 2), shown decimals do ("12.50" -> 4)."""
    digits = n.text_digits.lstrip("0")
    if "." not in n.text:
        digits = digits.rstrip("0")
    return max(1, len(digits))


def _ramp(x: float, lo: float, hi: float) -> float:
    return float(min(1.0, max(0.0, (x - lo) / (hi - lo))))


def _query(text: str) -> dict[str, float]:
    return {t: float(min(c, 3)) for t, c in sorted(Counter(terms(text)).items())}


def _trim(text: str, anchor: str = "", limit: int = EVIDENCE_CHARS) -> str:
    """`text` whole when short, else a `limit`-character window around `anchor` (or the start), marked."""
    text = text.strip()
    if len(text) <= limit:
        return text
    pos = text.find(anchor.strip()) if anchor.strip() else -1
    if pos < 0:
        return text[:limit].rstrip() + " …"
    centre = pos + min(len(anchor.strip()), limit) // 2
    start = max(0, min(centre - limit // 2, len(text) - limit))
    end = start + limit
    return ("… " if start > 0 else "") + text[start:end].strip() + (" …" if end < len(text) else "")


def _item(claim: Claim, score: float, stage: int, **more: Any) -> ItemScore:
    """The evidence item of a claim."""
    return ItemScore(
        index=claim.claim_id,
        kind="claim",
        text=claim.content,
        source=claim.source_sentence,
        score=score,
        stage=stage,
        **more,
    )


def _paired(claims: Sequence[Claim], stage1: Sequence[ItemScore]) -> tuple[list[Claim], list[ItemScore]]:
    """The claims of stage 2 with their stage-1 items (as many of each)."""
    if len(claims) != len(stage1):
        raise ValueError(f"entail: {len(claims)} claims but {len(stage1)} stage-1 items")
    return list(claims), list(stage1)


def claims_of(markdown: str) -> list[Claim]:
    """The offline claims of a Markdown report (docs/metrics/faithfulness.md, "Claims")."""
    out: list[Claim] = []
    for p in markdown_pieces(markdown):
        if _is_claim(p.kind, p.text):
            out.append(Claim(claim_id=len(out), content=p.text, source_sentence=p.source, section=p.section))
    return out


# ---------------------------------------------------------------- grounding set, built once


@dataclass
class _Unit:
    passage: int
    pos: int  # position in its passage
    text: str
    source: str
    terms: frozenset[str]
    figs: tuple[Num, ...] = ()  # its strong figures, read with its table


@dataclass
class _Analysis:
    figs: list[Num]
    owners: list[frozenset[int]]  # passages holding each figure
    candidates: list[int]
    verbatim: int | None
    weak: list[bool] = field(default_factory=list)  # per figure: a year, a date part or inside math
    units: list[_Unit] = field(default_factory=list)
    gates: list[float] = field(default_factory=list)  # per unit: 0 when it states the opposite direction,
    # else the share of the claim's names (tasks.markdown.text.names) it holds
    opposed: list[bool] = field(default_factory=list)  # per unit: it states the opposite direction
    about: frozenset[str] = frozenset()  # the names of a prose claim
    cos: list[float] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    best: int = -1  # index into units
    support: dict[tuple, tuple[float, list[str]]] = field(default_factory=dict)  # by (scores, cos)

    def numbers_in_passage(self, p: int) -> float:
        """share(strong figures in p) x share(weak figures in p), each 1 when there is none."""
        return _shares([p in o for o in self.owners], self.weak)

    def text_support(self, cos: float) -> float:
        """ramp(cos) with the ramp of the claim's kind (docs/metrics/faithfulness.md)."""
        return _ramp(cos, *(NUMBER_RAMP if self.strong else PROSE_RAMP))

    def unit_texts(self) -> list[float]:
        """Each unit's text support (1 for the verbatim unit), 0 where it states the opposite direction."""
        if self.verbatim is not None:
            return [1.0] * len(self.cos)
        return [self.text_support(c) * g for c, g in zip(self.cos, self.gates, strict=True)]

    def combine(self, numbers: float, text: float) -> float:
        """The score formula (docs/metrics/faithfulness.md): figures gate, text modulates."""
        return numbers * text if self.figs else text

    @property
    def strong(self) -> bool:
        return not all(self.weak)

    def formula(self) -> str:
        lo, hi = NUMBER_RAMP if self.strong else PROSE_RAMP
        ramp = f"text = ramp(cos; {lo:.2f}, {hi:.2f})"
        return f"score = numbers x text, {ramp}" if self.figs else f"score = text, {ramp}"


class _Ground:
    """Passages, BM25 index, number pool and evidence units of one grounding set."""

    def __init__(self, docs: Sequence[GroundingText], key: str) -> None:
        self.key = key
        self.chars = sum(len(d.markdown) for d in docs)
        rows = [{"doc_id": d.doc_id, "title": d.title, "markdown": d.markdown} for d in docs]
        self.titles = {d.doc_id: d.title for d in docs}
        self.index = RetrievalIndex.shared(grounding_set_from_rows(rows))
        self.passages = self.index.passages
        norms = [_norm(p.text) for p in self.passages]
        self.flat = "\n".join(norms)
        self.starts: list[int] = []
        pos = 0
        for s in norms:
            self.starts.append(pos)
            pos += len(s) + 1
        # a table passage whose unit is stated by a short passage above it ("(In millions)" then
        # "(Unaudited)" then the table): that note, for reading its cells
        self.stated: list[str] = []
        note, doc = "", None
        for p in self.passages:
            if p.doc_id != doc:
                note, doc = "", p.doc_id
            self.stated.append(note if p.kind == "table" else "")
            if p.kind == "table":
                continue  # the note stays for a table that continues this one
            words = len(p.text.split())
            if p.kind == "text" and words <= NOTE_WORDS and stated_scale(p.text) is not None:
                note = p.text
            elif p.kind != "text" or words > 12:  # "(Unaudited)" between a note and its table keeps it
                note = ""
        nums: list[Num] = []
        owner: list[int] = []
        for i, p in enumerate(self.passages):
            found = markdown_numbers(p.text, self.stated[i], cache=False)
            nums.extend(found)
            owner.extend([i] * len(found))
        self.pool = NumberPool(nums)
        self._percent = np.array([n.percent for n in nums], dtype=bool)
        self.owner = np.array(owner, dtype=np.int64)
        self.common = max(COMMON_MIN, int(COMMON_SHARE * len(self.passages)))
        self._units: dict[int, list[_Unit]] = {}
        self._owners: dict[tuple, frozenset[int]] = {}
        self.memo: dict[tuple[str, str], _Analysis] = {}
        self.lock = threading.Lock()

    def units(self, i: int) -> list[_Unit]:
        got = self._units.get(i)
        if got is None:
            got = [
                _Unit(
                    i,
                    k,
                    pc.text,
                    pc.source,
                    frozenset(terms(pc.text)),
                    tuple(_strong_figures(pc.text, pc.source)),
                )
                for k, pc in enumerate(markdown_pieces(self.passages[i].text, self.stated[i]))
                if pc.text.strip()
            ]
            if not got:  # a passage the walk does not cut (e.g. a code block): one unit
                text = " ".join(self.passages[i].text.split())
                got = [_Unit(i, 0, text, text, frozenset(terms(text)))]
            self._units[i] = got
        return got

    def owners(self, n: Num, precise: bool = False) -> frozenset[int]:
        """Passages holding a number of G that states `n`: ``NumberPool`` matching, by a number shown with
        at least the significant digits `n` claims ("12" does not state 12.5%, "23.9" does not state
        23,867; "1,200" in a table stated in millions does state $1.2 billion); `precise` (elsewhere in G):
        the same percent mark too."""
        key = (n.key, precise)
        got = self._owners.get(key)
        if got is None:
            mask = self.pool.matches(n)
            if mask.any():
                mask &= self.pool.sig >= _eff_sig(n)
            if precise and mask.any():
                mask &= self._percent == n.percent
            got = frozenset(int(x) for x in np.unique(self.owner[mask])) if mask.any() else frozenset()
            self._owners[key] = got
        return got

    def verbatim(self, text: str) -> int | None:
        t = _norm(text)
        if len(t) < VERBATIM_MIN_CHARS:
            return None
        at = self.flat.find(t)
        if at < 0:
            return None
        return bisect.bisect_right(self.starts, at) - 1

    def candidates(
        self, claim: Claim, figs: list[Num], owners: list[frozenset[int]]
    ) -> tuple[list[int], int | None]:
        raw = self.index.bm25(_query(f"{claim.content}"))
        bm = sorted(raw, key=lambda i: (-raw[i], i))[:BM25_K]
        counts: Counter[int] = Counter()
        for o in owners:
            if 0 < len(o) <= self.common:
                counts.update(o)
        num = sorted(counts, key=lambda i: (-counts[i], -raw.get(i, 0.0), i))[:NUM_K]
        verb = self.verbatim(claim.source_sentence or claim.content)
        if verb is None and claim.source_sentence and claim.source_sentence != claim.content:
            verb = self.verbatim(claim.content)
        order = ([verb] if verb is not None else []) + num + bm
        return list(dict.fromkeys(order)), verb

    def analyse(self, claim: Claim) -> _Analysis:
        figs, weak = _claim_figs(claim.content, claim.source_sentence)
        owners = [self.owners(n) for n in figs]
        cands, verb = self.candidates(claim, figs, owners)
        return _Analysis(figs=figs, owners=owners, candidates=cands, verbatim=verb, weak=weak)

    def top_units(self, claim: Claim, a: _Analysis, k: int = UNIT_K) -> list[_Unit]:
        cterms = Counter(terms(claim.content))
        weight = {t: (2.0 if t[:1].isdigit() else 1.0) for t in cterms}
        total = sum(weight.values()) or 1.0
        ranked: list[tuple[float, int, int, _Unit]] = []
        for rank, p in enumerate(a.candidates):
            for u in self.units(p):
                overlap = sum(w for t, w in weight.items() if t in u.terms) / total
                ranked.append((-overlap, rank, u.pos, u))
        ranked.sort(key=lambda x: x[:3])
        return [r[3] for r in ranked[:k]]

    def doc_id(self, p: int) -> str:
        return self.passages[p].doc_id


def _ground_key(grounding: Sequence[GroundingText]) -> str:
    h = hashlib.sha256()
    for d in grounding:
        for part in (d.doc_id, d.title, d.markdown):
            b = str(part).encode("utf-8")
            h.update(len(b).to_bytes(8, "big"))
            h.update(b)
    return h.hexdigest()


class _GroundCache:
    """The grounding sets a judge has built, by their documents (tasks.lru.BoundedLRU)."""

    def __init__(self, size: int = GROUND_CACHE, chars: int = GROUND_CACHE_CHARS) -> None:
        self._lru: BoundedLRU[_Ground] = BoundedLRU(size, chars)

    def get(self, grounding: Sequence[GroundingText]) -> _Ground:
        key = _ground_key(grounding)
        return self._lru.get_or_make(key, lambda: _Ground(grounding, key), lambda g: g.chars)


def _derive(target: Num, pool: Sequence[Num]) -> str | None:
    """An arithmetic expression over two figures of `pool` giving `target` (``numbers.derivation``), with
    typed operands so that an expression means something:

    * a percentage: a share or percent change of two amounts (100 * a / b, 100 * (a - b) / b), or a
      sum / difference of two percentages;
    * percentage points (and basis points): a sum / difference of two percentages or of two such figures;
    * any other figure (two or more significant digits): a sum or difference of two amounts of its unit
      (a plain figure against any amount unit) and period, at their stated scale ("$95.4 billion" =
      68,714 + 26,645 in a table stated in millions; a figure of unstated scale also from the figures as
      written, never at another factor of 1000); a ratio a / b only for a figure of three or more
      significant digits (per-share amounts).

    A one-digit figure that is not a percentage is never derived: nearly any pool yields it.
    """
    amounts = [m for m in pool if m.unit not in (PERCENT, POINTS)]
    if target.percent or target.unit == POINTS:
        if target.percent:
            expr = derivation(target, amounts, limit=DERIVE_POOL)
            if expr is not None and expr.startswith("100 *"):
                return expr
        as_amount = Num(target.text, target.value, target.step, False, target.start, target.end)
        rates = [m for m in pool if m.unit in (PERCENT, target.unit)]
        expr = derivation(as_amount, rates, limit=DERIVE_POOL)
        return expr if expr is not None and ("+" in expr or "-" in expr) and "/" not in expr else None
    if _sig(target) < 2:
        return None
    allowed = ("{a} + {b}", "|{a} - {b}|") + (("{a} / {b}",) if _sig(target) >= WIDE_DIGITS else ())

    def kind(expr: str | None) -> bool:
        if expr is None or expr.startswith("100 *"):
            return False
        if "/" in expr:
            return "{a} / {b}" in allowed
        return True

    # operands of its unit and of its period (a sum of this year's figures, not of last year's)
    same_unit = [
        m for m in amounts if units_agree(target.unit, m.unit) and periods_agree(target.period, m.period)
    ]
    expr = derivation(target, same_unit, limit=DERIVE_POOL)
    if kind(expr):
        return expr
    if target.bare and any(m.implied != 1.0 for m in same_unit):
        expr = derivation(target, [m.written() for m in same_unit], limit=DERIVE_POOL)
        if kind(expr):
            return expr
    return None


# ---------------------------------------------------------------- offline judge


class OfflineFaithfulnessJudge:
    """Number-aware embedding judge (docs/metrics/faithfulness.md). `embed` returns L2-normalised rows."""

    def __init__(self, embed: EmbedFn, embedder_name: str) -> None:
        self.embed = embed
        self.embedder_name = embedder_name
        self.name = f"offline:number-aware+{embedder_name}"
        self._grounds = _GroundCache()
        self._claims: BoundedLRU[list[Claim]] = BoundedLRU(CLAIMS_KEPT)  # by report: the embed task's, reused

    def __repr__(self) -> str:
        return f"OfflineFaithfulnessJudge({self.embedder_name!r})"

    # -- claims

    def extract_claims(self, generated_markdown: str) -> list[Claim]:
        got = self._claims.get_or_make(generated_markdown, lambda: claims_of(generated_markdown))
        return [c.model_copy() for c in got]

    # -- helpers

    def _vectors(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        distinct = list(dict.fromkeys(texts))
        if not distinct:
            return {}
        arr = np.asarray(self.embed(distinct), dtype=np.float32)
        if arr.shape[0] != len(distinct):
            raise ValueError(f"{self.embedder_name}: embed returned {arr.shape[0]} rows for {len(distinct)}")
        return dict(zip(distinct, arr, strict=True))

    def _analysis(self, g: _Ground, claim: Claim) -> _Analysis:
        """Candidates and evidence units of a claim (no embedding), computed once per G and claim text."""
        key = (claim.content, claim.source_sentence)
        with g.lock:
            a = g.memo.get(key)
        if a is None:
            a = g.analyse(claim)
            if a.verbatim is not None:
                # the unit of the verbatim passage holding the claim stands for it
                text = _norm(claim.source_sentence or claim.content)
                sib = g.units(a.verbatim)
                a.units = [
                    next((u for u in sib if text in _norm(u.source) or _norm(u.source) in text), sib[0])
                ]
            else:
                a.units = g.top_units(claim, a)
            # a unit stating the opposite direction ("fell" for "rose") gives no text support
            # and a prose claim about named things ("Americas net sales ...") is supported only as far as
            # the unit names them too ("Europe net sales ..." says something else)
            a.opposed = [opposite(claim.content, u.text) for u in a.units]
            row = (claim.source_sentence or "").lstrip().startswith("|")
            a.about = frozenset() if row or a.verbatim is not None else names(claim.content)
            a.gates = [
                0.0 if opp else (len(a.about & words(u.text)) / len(a.about) if a.about else 1.0)
                for u, opp in zip(a.units, a.opposed, strict=True)
            ]
            with g.lock:
                a = g.memo.setdefault(key, a)
        return a

    @staticmethod
    def _empty(claims: Sequence[Claim], stage: int, why: str) -> list[ItemScore]:
        return [_item(c, 0.0, stage, rationale=why) for c in claims]

    # -- stage 1

    def verify(self, claims: Sequence[Claim], grounding: Sequence[GroundingText]) -> list[ItemScore]:
        claims = list(claims)
        if not claims:
            return []
        g = self._grounds.get(grounding)
        if not g.passages:
            return self._empty(claims, 1, "the grounding set has no passage")
        analyses = [self._analysis(g, c) for c in claims]
        vec = self._vectors(self._stage1_texts(claims, analyses))
        return [self._stage1(g, c, a, vec) for c, a in zip(claims, analyses, strict=True)]

    @staticmethod
    def _stage1_texts(claims: Sequence[Claim], analyses: Sequence[_Analysis]) -> list[str]:
        texts: list[str] = []
        for c, a in zip(claims, analyses, strict=True):
            if a.verbatim is None:
                texts.append(c.content)
                texts.extend(u.text for u in a.units)
        return texts

    def embedding_texts(self, claims: Sequence[Claim], grounding: Sequence[GroundingText]) -> list[str]:
        """The texts stage 1 of `verify(claims, grounding)` embeds (its analyses are memoised for it)."""
        g = self._grounds.get(grounding)
        if not claims or not g.passages:
            return []
        return self._stage1_texts(claims, [self._analysis(g, c) for c in claims])

    def _stage1(self, g: _Ground, claim: Claim, a: _Analysis, vec: dict[str, np.ndarray]) -> ItemScore:
        units = list(a.units)  # fixed by _analysis; only scores are (re)computed here
        if a.verbatim is not None:
            cos = [1.0]  # identical text: cosine 1, not embedded
        else:
            cv = vec[claim.content]
            cos = [float(np.clip(np.dot(cv, vec[u.text]), -1.0, 1.0)) for u in units]
        scores = []
        for u, c, gate in zip(units, cos, a.gates, strict=True):
            t = 1.0 if a.verbatim is not None else a.text_support(c) * gate
            scores.append(a.combine(a.numbers_in_passage(u.passage), t))
        a.cos, a.scores = cos, scores
        if not units:
            a.best = -1
            return self._empty([claim], 1, "no passage of G shares a term or a figure with the claim")[0]
        best = min(range(len(units)), key=lambda i: (-round(scores[i], 9), -cos[i], i))
        a.best = best
        u = units[best]
        score = float(round(scores[best], 6))
        return _item(
            claim,
            min(1.0, max(0.0, score)),
            1,
            evidence=_trim(g.passages[u.passage].text, u.source),
            evidence_ref=g.doc_id(u.passage),
            rationale=self._why1(a, u, cos[best], a.verbatim is not None, a.gates[best], a.opposed[best]),
        )

    @staticmethod
    def _why1(
        a: _Analysis, u: _Unit, cos: float, verbatim: bool, gate: float = 1.0, opposed: bool = False
    ) -> str:
        text = (
            "verbatim in the passage (text support 1)"
            if verbatim
            else (f"cosine {cos:.3f} -> text support {a.text_support(cos) * gate:.3f}")
        )
        if opposed:
            text += " (the passage states the opposite direction)"
        elif gate < 1.0 and a.about:
            held = sorted(a.about & words(u.text))
            text += f" (names of the claim in the passage: {len(held)}/{len(a.about)})"
        if not a.figs:
            return f"no figures; {text}"
        found = [n.text for n, o in zip(a.figs, a.owners, strict=True) if u.passage in o]
        missing = [n.text for n, o in zip(a.figs, a.owners, strict=True) if u.passage not in o]
        out = f"figures stated in the passage {len(found)}/{len(a.figs)}"
        if found:
            out += f" (found: {', '.join(found[:8])})"
        if missing:
            out += f" (missing: {', '.join(missing[:8])})"
        return f"{out}, numbers {a.numbers_in_passage(u.passage):.3f}; {text}; {a.formula()}"

    # -- stage 2

    def entail(
        self, claims: Sequence[Claim], stage1: Sequence[ItemScore], grounding: Sequence[GroundingText]
    ) -> list[ItemScore]:
        claims, stage1 = _paired(claims, stage1)
        if not claims:
            return []
        g = self._grounds.get(grounding)
        if not g.passages:
            return self._empty(claims, 2, "the grounding set has no passage")
        analyses, support, windows = self._stage2_plan(g, claims, stage1)
        vec = self._vectors(self._stage2_texts(claims, windows))
        return [
            self._stage2(g, c, it, a, w, vec, sup)
            for c, it, a, w, sup in zip(claims, stage1, analyses, windows, support, strict=True)
        ]

    def entail_texts(
        self, claims: Sequence[Claim], stage1: Sequence[ItemScore], grounding: Sequence[GroundingText]
    ) -> list[str]:
        """The texts `entail(claims, stage1, grounding)` embeds (the windows depend on stage 1's cosines, so
        these are known only once stage 1's texts are embedded)."""
        claims, stage1 = _paired(claims, stage1)
        g = self._grounds.get(grounding)
        if not claims or not g.passages:
            return []
        return self._stage2_texts(claims, self._stage2_plan(g, claims, stage1)[2])

    def _stage2_plan(
        self, g: _Ground, claims: Sequence[Claim], stage1: Sequence[ItemScore]
    ) -> tuple[list[_Analysis], list[tuple[float, list[str]]], list[list[str]]]:
        """Each claim's analysis (stage 1 redone when it ran in another judge object), number support and
        combined-evidence windows."""
        analyses = []
        for c in claims:
            a = self._analysis(g, c)
            if len(a.scores) != len(a.units):
                texts = [] if a.verbatim is not None else [c.content, *(u.text for u in a.units)]
                self._stage1(g, c, a, self._vectors(texts))
            analyses.append(a)
        support = [self._support(g, a) for a in analyses]
        windows: list[list[str]] = []
        for c, a, it, sup in zip(claims, analyses, stage1, support, strict=True):
            # the windows can only matter when full text support would lift the score above stage 1
            best_text = max(a.unit_texts(), default=0.0)
            ceiling = sup[0] if a.figs else 1.0
            windows.append(self._windows(g, a, c.content) if best_text < 1.0 and ceiling > it.score else [])
        return analyses, support, windows

    @staticmethod
    def _stage2_texts(claims: Sequence[Claim], windows: Sequence[list[str]]) -> list[str]:
        return [c.content for c, w in zip(claims, windows, strict=True) if w] + [
            t for w in windows for t in w
        ]

    def _support(self, g: _Ground, a: _Analysis) -> tuple[float, list[str]]:
        if not a.units or not a.figs:
            return 0.0, []
        # memoised per stage-1 outcome: the embed-ahead pass and the score task both need it
        key = (tuple(a.scores), tuple(a.cos))
        got = a.support.get(key)
        if got is None:
            order = self._ranked_units(a)
            top = [a.units[i] for i in order[:3]]
            got = self._number_support(g, a, top[0], top, list(dict.fromkeys(u.passage for u in top)))
            a.support[key] = got
        return got

    @staticmethod
    def _ranked_units(a: _Analysis) -> list[int]:
        return sorted(range(len(a.units)), key=lambda i: (-round(a.scores[i], 9), -a.cos[i], i))

    def _windows(self, g: _Ground, a: _Analysis, claim: str) -> list[str]:
        """The best unit joined with its partner (the next best unit, else its neighbour); none when either
        states the opposite direction to the claim: a window mixing "Americas net sales increased" with
        "Wearables net sales decreased" is no support for "Americas net sales decreased"."""
        if not a.units:
            return []
        order = self._ranked_units(a)
        best = a.units[order[0]]
        others = sorted(
            (i for i in order[1:] if (a.units[i].passage, a.units[i].pos) != (best.passage, best.pos)),
            key=lambda i: (-a.cos[i], i),
        )
        if others:
            partner = a.units[others[0]]
        else:
            sib = g.units(best.passage)
            if len(sib) < 2:
                return []
            partner = sib[best.pos + 1] if best.pos + 1 < len(sib) else sib[best.pos - 1]
        if opposite(claim, best.text) or opposite(claim, partner.text):
            return []
        if a.about and not a.about <= words(f"{best.text} {partner.text}"):
            return []  # the pair does not name what the claim is about
        pair = sorted([best, partner], key=lambda u: (u.passage, u.pos))
        return [f"{pair[0].text} {pair[1].text}"]

    @staticmethod
    def _number_support(
        g: _Ground, a: _Analysis, best: _Unit, top: list[_Unit], near: list[int]
    ) -> tuple[float, list[str]]:
        """Stage-2 number support in [0, 1] and one note per figure (docs/metrics/faithfulness.md,
        "Stage 2")."""
        where: list[int | None] = []  # passage stating the figure: best or near passage, else None
        for o, wk in zip(a.owners, a.weak, strict=True):
            if best.passage in o:
                where.append(best.passage)
            else:  # a year or date must be in the best passage itself
                where.append(None if wk else next((p for p in near if p in o), None))
        stated = [
            frozenset() if w else g.owners(n, precise=True) for n, w in zip(a.figs, a.weak, strict=True)
        ]
        # operands: G's strong figures of the best unit (resp. the three best units), plus the claim's
        # figures that G states (in the evidence passages, or elsewhere when specific); never figures that
        # are themselves only derived or only coincidentally present: no circular support
        grounded = [
            n
            for n, w, wk, st in zip(a.figs, where, a.weak, stated, strict=True)
            if not wk and (w is not None or (st and _sig(n) >= SPECIFIC_DIGITS))
        ]
        small = list(best.figs) + grounded
        wide = small + [n for u in top for n in u.figs]
        credits: list[float] = []
        notes: list[str] = []
        for n, w, wk, st in zip(a.figs, where, a.weak, stated, strict=True):
            if w is not None:
                credits.append(1.0)
                notes.append(
                    f"{n.text}: in the best passage" if w == best.passage else f"{n.text}: in {g.doc_id(w)}"
                )
                continue
            if wk:
                credits.append(0.0)
                notes.append(f"{n.text}: a year/date not in the best passage")
                continue
            same = (n.magnitude, n.step)
            expr = _derive(n, [m for m in small if (m.magnitude, m.step) != same])
            if expr is None and _sig(n) >= WIDE_DIGITS:
                expr = _derive(n, [m for m in wide if (m.magnitude, m.step) != same])
            if expr is not None:
                credits.append(1.0)
                notes.append(f"{n.text} = {expr}")
            elif st:
                c = 1.0 if _sig(n) >= SPECIFIC_DIGITS else 0.5
                credits.append(c)
                notes.append(f"{n.text}: elsewhere in G ({g.doc_id(min(st))}, credit {c:g})")
            else:
                credits.append(0.0)
                notes.append(f"{n.text}: not in G, not derivable")
        return _shares(credits, a.weak), notes

    def _stage2(
        self,
        g: _Ground,
        claim: Claim,
        item1: ItemScore,
        a: _Analysis,
        windows: list[str],
        vec: dict[str, np.ndarray],
        support: tuple[float, list[str]],
    ) -> ItemScore:
        if not a.units:
            return item1.model_copy(
                update={"stage": 2, "rationale": "no passage of G shares a term or a figure with the claim"}
            )
        best = a.units[self._ranked_units(a)[0]]
        # text support: stage-1 units and the combined-evidence windows
        text_scores = a.unit_texts()
        t2, how = max(text_scores), f"best unit cosine {max(a.cos):.3f}"
        if a.opposed and all(a.opposed):
            how += " (every unit states the opposite direction)"
        cv = vec.get(claim.content)
        for w in windows:
            if cv is None:
                break
            c = float(np.clip(np.dot(cv, vec[w]), -1.0, 1.0))
            if a.text_support(c) > t2 and not opposite(claim.content, w):
                t2, how = a.text_support(c), f"combined-evidence window cosine {c:.3f}"
        notes: list[str] = []
        if a.figs:
            nf, notes = support
            s2 = a.combine(nf, t2)
            formula = f"numbers {nf:.3f}, text {t2:.3f}: {a.formula()}"
        else:
            s2 = t2
            formula = f"text {t2:.3f}"
        score = float(round(max(item1.score, s2), 6))
        why = f"stage 2: {'; '.join(notes) + '; ' if notes else ''}{how}; {formula} = {s2:.3f}"
        if s2 < item1.score:
            why += f"; kept the stage-1 score {item1.score:.3f}"
        return _item(
            claim,
            min(1.0, max(0.0, score)),
            2,
            evidence=item1.evidence or _trim(g.passages[best.passage].text, best.source),
            evidence_ref=item1.evidence_ref or g.doc_id(best.passage),
            rationale=why,
        )


# ---------------------------------------------------------------- LLM judge


_ClaimContent = stripped_text("claim content is empty")


class ClaimOut(BaseModel):
    content: _ClaimContent
    source_sentence: str = ""
    section: str = ""


class ClaimsReply(BaseModel):
    claims: list[ClaimOut]


class Verdict(BaseModel):
    claim_id: int = Field(ge=0)
    score: float = Field(ge=0.0, le=1.0)
    evidence: str = ""
    doc_id: str = ""
    rationale: str = ""


class VerdictsReply(BaseModel):
    verdicts: list[Verdict]


def _check_ids(expected: Sequence[int]) -> Callable[[VerdictsReply], None]:
    want = sorted(expected)

    def explain(dup: list, extra: list, missing: list) -> str:
        parts = [f"missing claim_ids {missing}"] * bool(missing) + [f"unknown claim_ids {extra}"] * bool(
            extra
        )
        parts += [f"repeated claim_ids {dup}"] * bool(dup)
        return f"verdicts must cover exactly claim_ids {want}, one verdict each ({'; '.join(parts)})"

    return ids_check(want, lambda reply: [v.claim_id for v in reply.verdicts], explain)


def _sections(markdown: str) -> list[tuple[str, str]]:
    """(heading path, text) per section of a Markdown report, in order; the text includes its heading."""
    out: list[tuple[str, list[str]]] = []
    stack: list[tuple[int, str]] = []
    cur: list[str] = []
    path = ""
    lines = markdown.replace("\r\n", "\n").split("\n")
    for line, code in zip(lines, code_mask(lines, "lenient"), strict=True):
        head = None if code else heading_of(line)
        if head:
            if any(x.strip() for x in cur):
                out.append((path, cur))
            stack = [(lv, t) for lv, t in stack if lv < head.level] + [(head.level, head.title.strip())]
            path = " > ".join(t for _, t in stack)
            cur = [line]
        else:
            cur.append(line)
    if any(x.strip() for x in cur):
        out.append((path, cur))
    return [(p, "\n".join(lines).strip()) for p, lines in out]


def _split_text(text: str, budget: int, measure: Callable[[str], int] = count_tokens) -> list[str]:
    """Cut `text` (over budget) at blank-line blocks; a big table at rows (header repeated), a big
    paragraph at sentences. Pieces are whole; one sentence over budget stays one piece. Sizes are tokens,
    or `measure`."""
    blocks = [b for b in re.split(r"\n\s*\n", text) if b.strip()]
    pieces: list[str] = []
    for b in blocks:
        if measure(b) <= budget:
            pieces.append(b)
            continue
        lines = b.split("\n")
        table_at = next((i for i, ln in enumerate(lines) if ln.strip().startswith("|")), None)
        if (
            table_at is not None
            and len(lines) > table_at + 2
            and re.match(r"^\s*\|?\s*:?-", lines[table_at + 1])
        ):
            head = lines[: table_at + 2]
            rows = lines[table_at + 2 :]
            group: list[str] = []
            for r in rows:
                if group and measure("\n".join(head + group + [r])) > budget:
                    pieces.append("\n".join(head + group))
                    group = []
                group.append(r)
            if group:
                pieces.append("\n".join(head + group))
            continue
        sents = split_sentences(" ".join(b.split()))
        group = []
        for s in sents:
            if group and measure(" ".join(group + [s])) > budget:
                pieces.append(" ".join(group))
                group = []
            group.append(s)
        if group:
            pieces.append(" ".join(group))
    return pieces


def report_chunks(
    markdown: str, budget: int, measure: Callable[[str], int] = count_tokens
) -> list[tuple[str, str]]:
    """(heading path of the chunk's first section, text) chunks of R', each within `budget` (tokens, or
    `measure`) unless a single sentence is larger; consecutive sections are packed together, nothing is
    dropped."""
    chunks: list[tuple[str, str]] = []
    cur: list[str] = []
    cur_path = ""
    cur_tok = 0
    for path, text in _sections(markdown):
        t = measure(text)
        if t > budget:
            if cur:
                chunks.append((cur_path, "\n\n".join(cur)))
                cur, cur_tok = [], 0
            heading = f"(continued: {path})\n\n" if path else ""
            for i, piece in enumerate(_split_text(text, budget, measure)):
                chunks.append((path, piece if i == 0 else heading + piece))
            continue
        if cur and cur_tok + t > budget:
            chunks.append((cur_path, "\n\n".join(cur)))
            cur, cur_tok = [], 0
        if not cur:
            cur_path = path
        cur.append(text)
        cur_tok += t
    if cur:
        chunks.append((cur_path, "\n\n".join(cur)))
    return chunks


class LLMFaithfulnessJudge(LLMJudge):
    """Claims and verdicts from an OpenAI-compatible model (docs/metrics/faithfulness.md)."""

    ROLES = ("score_claims", "score_verify", "score_entail")

    def __init__(self, client: Any, settings: LLMSettings) -> None:
        super().__init__(client, settings)
        self._grounds = _GroundCache()
        self.models: set[str] = set()
        self._whole: BoundedLRU[tuple[str, int]] = BoundedLRU(GROUND_CACHE, GROUND_CACHE_CHARS)  # G rendered
        self._parts: BoundedLRU[list[tuple[str, int]]] = BoundedLRU(4096, GROUND_CACHE_CHARS)  # cut passages
        self._heads: BoundedLRU[int] = BoundedLRU(4096)  # excerpt header tokens by document

    def claims_chunk_budget(self) -> int:
        over = self.overhead("score_claims", report_title="", part="", report_part="")
        budget = self.input_budget() - over
        if budget < 100:
            raise FrameInputError(
                "llm.context_tokens",
                f"too small for claim extraction (input budget {self.input_budget()}, prompt {over} tokens)",
            )
        return budget

    def _claims_measure(self) -> Callable[[str], int]:
        return extraction_measure(self.claims_chunk_budget(), self.output_budget("score_claims"))

    def claim_parts(self, generated_markdown: str) -> list[tuple[str, str]]:
        """R' cut into the parts sent to score_claims: each prompt fits the input budget, and the reply it
        asks for (every claim restates its sentence or row) is expected to fit the role's output budget
        (tasks.score.reply_size)."""
        return report_chunks(generated_markdown, self.claims_chunk_budget(), self._claims_measure())

    # -- claims

    def extract_claims(self, generated_markdown: str) -> list[Claim]:
        if not generated_markdown.strip():
            return []
        title = markdown_title(generated_markdown)
        chunks = self.claim_parts(generated_markdown)
        n = len(chunks)
        measure = self._claims_measure()

        def ask(i: int, path: str, text: str) -> list[ClaimOut]:
            part = f"part {i + 1} of {n}" + (f" (starting at section: {path})" if path else "")
            res = self.ask(
                "score_claims",
                ClaimsReply,
                report_title=title or "(untitled)",
                part=part,
                report_part=text,
                on_length="split",
            )
            self.models.add(res.model)
            for c in res.value.claims:
                if not c.section:
                    c.section = path
            return res.value.claims

        def halve(text: str) -> list[str]:
            return _split_text(text, max(1, measure(text) // 2), measure)

        def job(chunk: tuple[int, tuple[str, str]]) -> list[ClaimOut]:
            i, (path, text) = chunk
            got = split_on_length(lambda t: ask(i, path, t), text, halve, "score_claims")
            return [c for claims in got for c in claims]

        found = [c for claims in self.map(job, list(enumerate(chunks))) for c in claims]
        fields = {"content", "source_sentence", "section"}
        return [Claim(claim_id=i, **c.model_dump(include=fields)) for i, c in enumerate(found)]

    # -- evidence (docs/metrics/faithfulness.md, "Evidence of the LLM judge")

    def _rooms(self) -> tuple[int, int]:
        """Tokens left beside each stage's prompt (input budget minus the prompt rendered empty)."""
        rooms = []
        for role in ("score_verify", "score_entail"):
            over = self.overhead(role, documents="", claims="")
            room = self.input_budget() - over
            if room < 200:
                raise FrameInputError("llm.context_tokens", f"too small for {role} (prompt {over} tokens)")
            rooms.append(room)
        return rooms[0], rooms[1]

    def _budgets(self) -> tuple[int, int, int]:
        """(evidence per claim at stage 1, at stage 2, largest piece): a BATCH_CLAIMS-th of the room per
        claim but at least MIN_EVIDENCE (a small window then holds fewer claims per request), twice that
        at stage 2, never more than the room beside one claim; a passage over half the stage-1 share is
        cut. Both stages derive them from the same room, so stage 2 can redo stage 1's choice."""
        room = min(self._rooms())
        alone = max(1, room - CLAIM_TOKENS)
        b1 = min(alone, max(MIN_EVIDENCE, (room - BATCH_CLAIMS * CLAIM_TOKENS) // BATCH_CLAIMS))
        return b1, min(alone, 2 * b1), max(1, b1 // 2)

    def _documents(self, grounding: Sequence[GroundingText]) -> tuple[str, int]:
        """G whole, as one request shows it, and its tokens (counted once per G)."""
        key = _ground_key(grounding)

        def make() -> tuple[str, int]:
            intro = f"The source documents, all {len(grounding)} of them, whole:"
            docs = [
                f"Document - doc_id: {d.doc_id} ({d.title})\n<<<\n{d.markdown.strip()}\n>>>"
                for d in grounding
            ]
            text = "\n\n".join([intro, *docs])
            return text, count_tokens(text)

        return self._whole.get_or_make(key, make, lambda v: len(v[0]))

    def _ranked(self, g: _Ground, claim: Claim, limit: int) -> list[Piece]:
        """The claim's pieces of G, most relevant first, each costing its tokens and its excerpt header:
        the offline candidates (word-for-word, figure and BM25 matches), then the next MORE_K BM25
        passages; a passage over `limit` tokens is cut (`evidence.cut`), its part most relevant to the
        claim at the passage's rank, its other parts after every passage."""
        a = g.analyse(claim)
        raw = g.index.bm25(_query(claim.content))
        more = sorted(raw, key=lambda i: (-raw[i], i))[: len(a.candidates) + MORE_K]
        first: list[Piece] = []
        later: list[Piece] = []
        for p in dict.fromkeys([*a.candidates, *more]):
            ps = g.passages[p]
            head = self._head_tokens(ps.doc_id, g.titles.get(ps.doc_id, ps.doc_id))
            if ps.tokens <= limit:
                first.append(Piece(p, 0, ps.doc_id, ps.text.strip(), ps.tokens + head))
                continue
            parts = self._parts.get_or_make(
                (g.key, p, limit),
                lambda ps=ps: [(t, count_tokens(t)) for t in cut(ps.text.strip(), ps.kind, limit)],
                lambda v: sum(len(t) for t, _ in v),
            )
            pieces = [Piece(p, k + 1, ps.doc_id, t, n + head) for k, (t, n) in enumerate(parts)]
            order = sorted(range(len(pieces)), key=lambda k: (-relevance(claim.content, pieces[k].text), k))
            first.append(pieces[order[0]])
            later.extend(pieces[k] for k in order[1:])
        return first + later

    def _head_tokens(self, doc_id: str, title: str) -> int:
        """Tokens an excerpt of this document costs besides its text (its name line and delimiters)."""
        line = f"Excerpt E000 - doc_id: {doc_id} ({title}), part 00 of a passage cut to fit\n<<<\n\n>>>\n\n"
        return self._heads.get_or_make((doc_id, title), lambda: count_tokens(line))

    def _excerpts(self, g: _Ground, claim: Claim, stage: int) -> list[Piece]:
        """The pieces a claim is shown with when G goes as excerpts: stage 1's within its share, stage 2's
        the same plus more within its larger share (never fewer than stage 1's)."""
        b1, b2, limit = self._budgets()
        ranked = self._ranked(g, claim, limit)
        first = pick(ranked, b1)
        return first if stage == 1 else pick(ranked, b2, base=first)

    @staticmethod
    def _claim_block(claim: Claim, prior: ItemScore | None, refs: list[str] | None) -> str:
        """A claim as a request shows it; `refs` (excerpt mode) names its excerpts, most relevant first."""
        lines = [f"### Claim {claim.claim_id}", f"Claim: {claim.content}"]
        if claim.source_sentence and claim.source_sentence != claim.content:
            lines.append(f"Sentence of the report it comes from: {claim.source_sentence}")
        if claim.section:
            lines.append(f"Section of the report: {claim.section}")
        if prior is not None:
            verdict = f"First-pass verdict: score {prior.score:.2f}; {prior.rationale or 'no rationale'}"
            while count_tokens(verdict) > VERDICT_TOKENS:
                verdict = verdict[: int(len(verdict) * 0.9)].rstrip() + " …"
            lines.append(verdict)
        if refs is not None:
            found = ", ".join(refs[:REFS_SHOWN])
            if len(refs) > REFS_SHOWN:
                found += f" and {len(refs) - REFS_SHOWN} more"
            found = found or "none (no passage shares a term or a figure with this claim)"
            lines.append(f"Excerpts found for it, most relevant first: {found}")
        return "\n".join(lines)

    @staticmethod
    def _excerpt_text(
        g: _Ground, grounding: Sequence[GroundingText], pieces: list[Piece]
    ) -> tuple[str, dict]:
        """The excerpts of one request, in document order, and their names by piece key."""
        ordered = sorted({p.key: p for p in pieces}.values(), key=lambda p: p.key)
        names = {p.key: f"E{k}" for k, p in enumerate(ordered, start=1)}
        intro = (
            f"Excerpts of the source documents ({len(grounding)} documents, too many tokens to send whole), "
            "found by a search for the claims below; the rest of the documents is not shown:"
        )
        out = [intro]
        for p in ordered:
            part = f", part {p.part} of a passage cut to fit" if p.part else ""
            title = g.titles.get(p.doc_id, p.doc_id)
            out.append(f"Excerpt {names[p.key]} - doc_id: {p.doc_id} ({title}){part}\n<<<\n{p.text}\n>>>")
        return "\n\n".join(out), names

    def _requests(
        self,
        role: str,
        g: _Ground,
        grounding: Sequence[GroundingText],
        claims: list[Claim],
        prior: list | None,
    ) -> list[tuple[list[Claim], str, str]]:
        """(claims, documents text, claims text) per request. G goes whole with a claim when it fits beside
        it in either stage's request (so stage 1 whole implies stage 2 whole); otherwise as the excerpts
        of the request's claims. A request never exceeds the input budget: batches are packed by an
        estimate and every request is counted exactly before it is sent (and halved when over)."""
        stage = 2 if role == "score_entail" else 1
        room = self.input_budget()
        over = self.overhead(role, documents="", claims="")
        docs_text, docs_tok = self._documents(grounding)
        margin = VERDICT_TOKENS + 50  # the verdict stage 2 adds, and token-count drift at the joins
        fits_whole = min(self._rooms()) - margin

        items = []
        for i, c in enumerate(claims):
            pr = prior[i] if prior else None
            bare = count_tokens(self._claim_block(c, None, None))
            ev = None if grounding and docs_tok + bare <= fits_whole else self._excerpts(g, c, stage)
            block = count_tokens(self._claim_block(c, pr, None if ev is None else ["E000"] * len(ev))) + 2
            items.append((c, pr, ev, block))

        def estimate(batch: list) -> int:
            return over + self._batch_docs_tokens(batch, docs_tok) + sum(it[3] for it in batch)

        out: list[tuple[list[Claim], str, str]] = []

        def flush(batch: list) -> None:
            docs, text, tokens = self._render_batch(role, g, grounding, docs_text, batch)
            if tokens <= room:
                out.append(([c for c, _, _, _ in batch], docs, text))
            elif len(batch) > 1:
                flush(batch[: len(batch) // 2])
                flush(batch[len(batch) // 2 :])
            elif batch[0][2] is None:  # G whole with this one claim after all: its excerpts instead
                c, pr, _, _ = batch[0]
                flush([(c, pr, self._excerpts(g, c, stage), 0)])
            elif batch[0][2]:  # a long claim: its last pieces go (stage 2's additions first)
                c, pr, ev, _ = batch[0]
                flush([(c, pr, ev[:-1], 0)])
            else:
                cid = batch[0][0].claim_id
                raise FrameInputError("llm.context_tokens", f"claim {cid} alone does not fit {role}")

        cur: list = []
        for it in items:
            if cur and (
                (cur[0][2] is None) != (it[2] is None)
                or len(cur) >= BATCH_CLAIMS
                or estimate([*cur, it]) > room
            ):
                flush(cur)
                cur = []
            cur.append(it)
        if cur:
            flush(cur)
        return out

    @staticmethod
    def _batch_docs_tokens(batch: list, docs_tok: int) -> int:
        """Estimated tokens of a batch's documents: G whole, or the distinct excerpts of its claims."""
        if batch[0][2] is None:
            return docs_tok
        distinct = {p.key: p for _, _, ev, _ in batch for p in ev}.values()
        return 60 + sum(p.tokens for p in distinct)

    def _render_batch(
        self, role: str, g: _Ground, grounding: Sequence[GroundingText], docs_text: str, batch: list
    ) -> tuple[str, str, int]:
        """(documents text, claims text, exact prompt tokens) of one batch of (claim, prior, excerpts, _)."""
        if batch[0][2] is None:
            docs, names = docs_text, {}
        else:
            docs, names = self._excerpt_text(g, grounding, [p for _, _, ev, _ in batch for p in ev])
        blocks = [
            self._claim_block(c, pr, None if ev is None else [names[p.key] for p in ev])
            for c, pr, ev, _ in batch
        ]
        text = "\n\n".join(blocks)
        messages = render(self.prompts[role], documents=docs, claims=text)
        return docs, text, sum(count_tokens(m["content"]) for m in messages)

    # -- verdicts

    def _ask_batch(
        self, role: str, request: tuple[list[Claim], str, str], doc_ids: set[str]
    ) -> list[ItemScore]:
        claims, docs, text = request
        ids = [c.claim_id for c in claims]
        res = self.ask(role, VerdictsReply, check=_check_ids(ids), documents=docs, claims=text)
        self.models.add(res.model)
        by_id = {v.claim_id: v for v in res.value.verdicts}
        out = []
        for c in claims:
            v = by_id[c.claim_id]
            ref = v.doc_id.strip() if v.doc_id.strip() in doc_ids else ""
            why = v.rationale.strip()
            if v.doc_id.strip() and not ref:
                why += f" [doc_id {v.doc_id.strip()!r} is not a document of G]"
            out.append(
                _item(
                    c,
                    float(v.score),
                    2 if role == "score_entail" else 1,
                    evidence=_trim(v.evidence),
                    evidence_ref=ref,
                    rationale=why,
                )
            )
        return out

    def _judge(
        self,
        role: str,
        claims: list[Claim],
        grounding: Sequence[GroundingText],
        prior: list[ItemScore] | None,
    ) -> list[ItemScore]:
        if not claims:
            return []
        g = self._grounds.get(grounding)
        requests = self._requests(role, g, grounding, claims, prior)
        doc_ids = {d.doc_id for d in grounding}
        results = self.map(lambda r: self._ask_batch(role, r, doc_ids), requests)
        return [it for r in results for it in r]

    def verify(self, claims: Sequence[Claim], grounding: Sequence[GroundingText]) -> list[ItemScore]:
        return self._judge("score_verify", list(claims), grounding, None)

    def entail(
        self, claims: Sequence[Claim], stage1: Sequence[ItemScore], grounding: Sequence[GroundingText]
    ) -> list[ItemScore]:
        claims, stage1 = _paired(claims, stage1)
        return self._judge("score_entail", claims, grounding, stage1)


# ---------------------------------------------------------------- driver


def _below(first: Sequence[ItemScore], threshold: float) -> list[int]:
    """Indices of the stage-1 items that go to stage 2."""
    return [i for i, it in enumerate(first) if it.score < threshold]


def _claim_text(c: Claim) -> str:
    return c.content


def faithfulness(
    generated_md: str,
    grounding: Sequence[GroundingText],
    judge: FaithfulnessJudge,
    *,
    threshold: float = SUPPORT_THRESHOLD,
    max_items: int = MAX_ITEMS,
    seed: int = 0,
) -> MetricResult:
    """Faithfulness of `generated_md` against `grounding` (docs/metrics/faithfulness.md)."""
    claims = judge.extract_claims(generated_md)
    base: dict[str, Any] = {"max_items": max_items, "seed": seed, "threshold": threshold}
    if not claims:
        why = "the generated report has no checkable claim (no sentence, list item or table row)"
        return MetricResult.undefined("faithfulness", judge.name, why, **base, stage2=0)
    sample = sample_by_text(claims, _claim_text, max_items, seed)
    first = judge.verify(sample, grounding)
    if [it.index for it in first] != [c.claim_id for c in sample]:
        raise ValueError(f"{judge.name}: verify returned items for other claims than the sample")
    low = _below(first, threshold)
    final = list(first)
    if low:
        second = judge.entail([sample[i] for i in low], [first[i] for i in low], grounding)
        if [it.index for it in second] != [sample[i].claim_id for i in low]:
            raise ValueError(
                f"{judge.name}: entail returned items for other claims than the ones below threshold"
            )
        for i, it in zip(low, second, strict=True):
            s1 = first[i]
            final[i] = it.model_copy(
                update={
                    "stage": 2,
                    "rationale": f"stage 1 score {s1.score:.3f} ({s1.rationale}); {it.rationale}".strip(),
                }
            )
    scores = [it.score for it in final]
    detail = {
        **base,
        "sampled": len(sample),
        "stage2": len(low),
        "stage1_mean": round(float(np.mean([it.score for it in first])), 6),
        "raised_in_stage2": sum(1 for i in low if final[i].score > first[i].score),
        # stage 2's score is kept when lower too (docs/metrics/faithfulness.md, "Which stage's score counts")
        "lowered_in_stage2": sum(1 for i in low if final[i].score < first[i].score),
        "supported": sum(1 for s in scores if s >= threshold),
    }
    for attr in ("prompt_sha256",):
        if hasattr(judge, attr):
            detail[attr] = dict(getattr(judge, attr))
    return MetricResult(
        metric="faithfulness",
        value=round(float(np.mean(scores)), 6),
        judge=judge.name,
        population=len(claims),
        items=final,
        detail=detail,
    )


# ---------------------------------------------------------------- the family


# what the metric checklist does not hold a precision to (docs/metrics/robustness.md)
PRECISION_UNCLAIMED = (
    ("content", "a precision of R's claims: a section left out states nothing false (that is coverage's)"),
    ("order", "each claim is checked on its own, wherever it stands"),
    ("tables", "a precision: a table left out states nothing false"),
)


class FaithfulnessFamily(
    SampledFamily,
    metric=MetricSpec("faithfulness", group="frame", evidence="support", unclaimed=PRECISION_UNCLAIMED),
    reads="grounding",  # G, not Y: a claim of R' is checked against the grounding documents
    judges=(OfflineFaithfulnessJudge, LLMFaithfulnessJudge),
):
    """Claim support: share of the sampled claims of R' that the grounding documents support."""

    def measure(self, inputs: Inputs, *, max_items: int, seed: int) -> MetricResult:
        return faithfulness(inputs.generated, inputs.grounding, self.judge, max_items=max_items, seed=seed)

    def embeds_ahead(self) -> bool:
        return isinstance(self.judge, OfflineFaithfulnessJudge)  # the LLM judge embeds nothing

    def embedding_texts(self, inputs: Inputs) -> list[str]:
        if not self.embeds_ahead():
            return []
        return self.judge.embedding_texts(self._sample(inputs), inputs.grounding)

    def embed_ahead(self, inputs: Sequence[Inputs]) -> int:
        """Stage 1's texts of every input in one batch, then stage 2's: its windows depend on stage 1's
        cosines, which the first batch makes cheap to compute (the analyses stay memoised for the score
        tasks)."""
        n = super().embed_ahead(inputs)
        if not n:
            return n
        texts: dict[str, None] = {}
        for x in reversed(list(inputs)):
            sample = self._sample(x)
            if not sample:
                continue
            first = self.judge.verify(sample, x.grounding)
            low = _below(first, SUPPORT_THRESHOLD)
            if low:
                later = self.judge.entail_texts(
                    [sample[i] for i in low], [first[i] for i in low], x.grounding
                )
                texts.update(dict.fromkeys(later))
        if texts:
            self.env.embed(list(texts))
        return n + len(texts)

    def _sample(self, inputs: Inputs) -> list[Claim]:
        """The claims `measure(inputs)` grades (the same extraction and seeded sample)."""
        claims = self.judge.extract_claims(inputs.generated)
        return sample_by_text(claims, _claim_text, self.env.settings.max_items, inputs.seed)
