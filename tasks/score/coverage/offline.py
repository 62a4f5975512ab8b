"""The offline coverage judge (docs/metrics/coverage.md): a number-aware embedding match of each unit of
Y against R's best segment, deterministic; its grading plans and the per-unit grade."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from schemas.scoring import InfoUnit, ItemScore
from tasks.markdown.direction import direction
from tasks.markdown.numbers import Num, NumberPool
from tasks.markdown.pieces import Piece, markdown_pieces
from tasks.markdown.text import names, words
from tasks.score.coverage.units import _figures, _is_unit, _key, _strong, _unit_item, _unit_type
from tasks.score.judges import EmbedFn

PROSE_RAMP = (0.55, 0.85)  # cosine -> [0, 1] for units without a strong number
NUMBER_RAMP = (0.35, 0.65)  # ... for units with a strong number (the number must match as well)
PLANS_KEPT = 256  # grading plans kept between embedding_texts and grade (per judge)


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
