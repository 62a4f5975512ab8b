"""The offline scaffold judge: every fact, question and attribute of a scaffold checked against R' with the
coverage grading (entity names looked up in R' first), and F and Fact Focus over a seeded sample of R'."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
from rapidfuzz import fuzz

from schemas.scaffold import Alignment, Scaffold, ScaffoldFact, ScaffoldJudgment
from schemas.scoring import InfoUnit, ItemScore
from tasks.markdown.document import is_table_row
from tasks.markdown.pieces import Piece, cells, markdown_pieces
from tasks.score.coverage import OfflineCoverageJudge
from tasks.score.judges import MAX_ITEMS, EmbedFn, sample_by_text
from tasks.score.scaffold.common import OK_THRESHOLD, PRESENT_RATIO, SEED, _focus_facts, _norm

_MEMO_LIMIT = 50_000  # embeddings kept in memory per judge (384 floats each: ~75 MB at most)


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
