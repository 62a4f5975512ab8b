"""Rubric scoring: the items, paper 003's equation 1 over item decisions (rubric_total) and the four
rubric metrics of one report (score_rubric)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

from schemas.rubric import RubricDecision, RubricItem, load_rubric
from schemas.scoring import ItemScore, MetricResult
from tasks.score.rubric.judges import RubricJudge
from tasks.score.rubric.reading import CHECKS, RubricContext


def rubric_items(path: Any = None) -> list[RubricItem]:
    """The rubric (default ``schemas/rubric.toml``); every item must name a check of :data:`CHECKS`."""
    return load_rubric(path, checks=CHECKS)


def rubric_total(decisions: Iterable[RubricDecision], items: Sequence[RubricItem]) -> dict[str, Any]:
    """Layer points and the total S of paper 003 eq. 1 (docs/metrics/rubric.md) from item decisions.

    Items without a decision count as na. Returns g0_pass, g1, d1, g2, d2, s1, s2, S, not_applicable
    (ids), failed (ids: decided "fail", gates included), partial (ids)."""
    by_id = {it.id: it for it in items}
    g = {"G1": 0.0, "G2": 0.0}
    d = {"G1": 0.0, "G2": 0.0}
    g0_pass = True
    na: list[str] = []
    failed: list[str] = []
    partial: list[str] = []
    decided = set()
    for dec in decisions:
        item = by_id.get(dec.item_id)
        if item is None:
            raise ValueError(f"decision for unknown rubric item {dec.item_id!r}")
        if dec.layer != item.layer:
            raise ValueError(f"decision for {dec.item_id!r} says layer {dec.layer}, the item is {item.layer}")
        decided.add(dec.item_id)
        if dec.decision == "na":
            na.append(dec.item_id)
            continue
        if dec.decision == "fail":
            failed.append(dec.item_id)
        elif dec.decision == "partial":
            partial.append(dec.item_id)
        if item.layer == "G0":
            g0_pass = g0_pass and dec.decision != "fail"
            continue
        assert dec.credit is not None
        g[item.layer] += item.weight * dec.credit
        d[item.layer] += item.weight
    na.extend(it.id for it in items if it.id not in decided)
    g1, d1, g2, d2 = g["G1"], d["G1"], g["G2"], d["G2"]
    s1 = 100.0 * g1 / d1 if d1 else 100.0
    s2 = 100.0 * g2 / d2 if d2 else 100.0
    if not g0_pass:
        total = 0.0
    elif d1 + d2 == 0:
        total = 100.0
    else:
        total = 100.0 * (g1 + (s1 / 100.0) * g2) / (d1 + d2)
    return {
        "g0_pass": g0_pass,
        "g1": g1,
        "d1": d1,
        "g2": g2,
        "d2": d2,
        "s1": s1,
        "s2": s2,
        "S": total,
        "not_applicable": na,
        "failed": failed,
        "partial": partial,
    }


def _items_hash(items: Sequence[RubricItem]) -> str:
    blob = json.dumps([it.model_dump() for it in items], sort_keys=True).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:16]


def score_rubric(
    report_markdown: str,
    ctx: RubricContext,
    judge: RubricJudge,
    items: Sequence[RubricItem] | None = None,
) -> list[MetricResult]:
    """The four rubric metrics of one report: ``rubric`` (S), ``rubric_g0``, ``rubric_g1``, ``rubric_g2``."""
    items = list(items) if items is not None else rubric_items()
    decisions = _all_decisions(report_markdown, ctx, judge, items)
    tot = rubric_total(decisions, items)
    layer_of = {it.id: it.layer for it in items}

    def layer(name: str) -> tuple[dict[str, str], int]:
        """The layer's decisions by item id, and how many are not na."""
        got = {d.item_id: d.decision for d in decisions if layer_of[d.item_id] == name}
        return got, sum(1 for v in got.values() if v != "na")

    g0, n0 = layer("G0")
    total = None if tot["d1"] + tot["d2"] == 0 and tot["g0_pass"] else tot["S"]
    detail = {k: tot[k] for k in ("g1", "d1", "g2", "d2", "s1", "s2", "g0_pass", "not_applicable", "failed")}
    detail.update(partial=tot["partial"], rubric_hash=_items_hash(items), category=ctx.category)
    scores = _item_scores(items, decisions)
    name = judge.name
    failed_gates = [i for i in tot["failed"] if layer_of[i] == "G0"]
    out = [
        MetricResult(
            metric="rubric", value=total, judge=name, population=len(scores), items=scores, detail=detail
        ),
        MetricResult(
            metric="rubric_g0",
            value=1.0 if tot["g0_pass"] else 0.0,
            judge=name,
            population=n0,
            detail={"gates": g0, "failed": failed_gates},
        ),
    ]
    for k in (1, 2):  # rubric_g1, rubric_g2: S1 / S2, None when no item of the layer applies
        got, n = layer(f"G{k}")
        d = tot[f"d{k}"]
        out.append(
            MetricResult(
                metric=f"rubric_g{k}",
                value=tot[f"s{k}"] if d else None,
                judge=name,
                population=n,
                detail={f"g{k}": tot[f"g{k}"], f"d{k}": d, "decisions": got},
            )
        )
    return out


def _all_decisions(
    report: str, ctx: RubricContext, judge: RubricJudge, items: list[RubricItem]
) -> list[RubricDecision]:
    """One decision per item in `items` order: the judge's for the applicable ones, na for the others."""
    applicable = [it for it in items if it.applies(ctx.category)]
    decided = judge.decide(report, ctx, applicable)
    if [d.item_id for d in decided] != [it.id for it in applicable]:
        raise ValueError(f"{judge.name}: decisions do not match the applicable rubric items (ids or order)")
    skipped = [
        RubricDecision(
            item_id=it.id,
            layer=it.layer,
            decision="na",
            rationale=f"applies to {', '.join(it.applies_to)} reports, not {ctx.family}",
            judge=judge.name,
        )
        for it in items
        if not it.applies(ctx.category)
    ]
    by_id = {d.item_id: d for d in [*decided, *skipped]}
    return [by_id[it.id] for it in items]


def _item_scores(items: list[RubricItem], decisions: list[RubricDecision]) -> list[ItemScore]:
    """The evidence items: one per decided (not na) item, its rationale led by the decision."""
    scores: list[ItemScore] = []
    for pos, (it, d) in enumerate(zip(items, decisions, strict=True)):
        if d.decision == "na":
            continue
        rationale = d.rationale.strip()
        if not rationale.lower().startswith(f"{d.decision}:"):
            rationale = f"{d.decision}: {rationale}" if rationale else d.decision
        assert d.credit is not None
        scores.append(
            ItemScore(
                index=pos,
                kind=f"{it.layer}:{it.id}",
                text=it.title,
                score=d.credit,
                evidence=d.evidence,
                evidence_ref=d.evidence_ref,
                rationale=rationale,
            )
        )
    return scores
