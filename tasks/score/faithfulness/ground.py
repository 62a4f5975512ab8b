"""Evidence retrieval: a grounding set built once (passages, BM25 index, number pool, evidence units),
a claim's candidate passages and units (`_Analysis`), and the judges' cache of built sets."""

from __future__ import annotations

import bisect
import hashlib
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from schemas.scoring import Claim, GroundingText
from tasks.ground.load import grounding_set_from_rows
from tasks.lru import BoundedLRU
from tasks.markdown.numbers import Num, NumberPool
from tasks.markdown.pieces import markdown_numbers, markdown_pieces, stated_scale
from tasks.markdown.text import terms
from tasks.score.faithfulness.claims import _claim_figs, _eff_sig, _norm, _strong_figures
from tasks.score.faithfulness.params import (
    BM25_K,
    COMMON_MIN,
    COMMON_SHARE,
    GROUND_CACHE,
    GROUND_CACHE_CHARS,
    NOTE_WORDS,
    NUM_K,
    NUMBER_RAMP,
    PROSE_RAMP,
    UNIT_K,
    VERBATIM_MIN_CHARS,
)
from tasks.synthesize.retrieve import RetrievalIndex


def _shares(credit: Sequence[float], weak: Sequence[bool]) -> float:
    """mean credit of the strong figures x mean credit of the weak ones (each 1 when there is none)."""
    strong = [float(c) for c, w in zip(credit, weak, strict=True) if not w]
    weak_c = [float(c) for c, w in zip(credit, weak, strict=True) if w]
    s = sum(strong) / len(strong) if strong else 1.0
    return s * (sum(weak_c) / len(weak_c) if weak_c else 1.0)


def _ramp(x: float, lo: float, hi: float) -> float:
    return float(min(1.0, max(0.0, (x - lo) / (hi - lo))))


def _query(text: str) -> dict[str, float]:
    return {t: float(min(c, 3)) for t, c in sorted(Counter(terms(text)).items())}


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
