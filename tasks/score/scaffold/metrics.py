"""The FPS / QPS / EPS aggregation: the nine SCAFFOLD_METRICS (with their per-item evidence) of one
judgment of R' against a scaffold."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from schemas.scaffold import Alignment, Scaffold, ScaffoldJudgment
from schemas.scoring import ItemScore, MetricResult
from tasks.score.scaffold.common import SCAFFOLD_METRICS, _focus_facts


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
