"""Recurrent failures: rubric items that several systems fail on a share of their discovery reports.

`recurrent_failures(evidence, ...)` reads a scoring run's rubric evidence rows (one per report x item)
and keeps the items with cross-system support. What an optimizer is shown of a failure
(`Failure.brief`) is item semantics (title, criterion), aggregate outcomes and anonymised evidence:
never the item id, its weight, a judge prompt or an instance's text or name."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd

from schemas.rubric import RubricItem, load_rubric

__all__ = ["Failure", "anonymise", "item_pass_rates", "recurrent_failures"]


@dataclass(frozen=True)
class Failure:
    item: str  # rubric item id (frame's own bookkeeping; never shown to the optimizer)
    layer: str
    title: str
    criterion: str
    fail_rate: float  # over all reports of all systems where the item applies
    systems: int  # systems whose own fail rate reaches the threshold
    reports: int
    examples: tuple[str, ...] = field(default=())

    def brief(self) -> dict[str, object]:
        """What the optimizer sees of this failure."""
        return {
            "layer": self.layer,
            "title": self.title,
            "criterion": self.criterion,
            "fail_rate": round(self.fail_rate, 3),
            "systems_failing": self.systems,
            "reports_judged": self.reports,
            "evidence": list(self.examples),
        }


_NUMBER = re.compile(r"\d[\d,.]*")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


def anonymise(text: str, names: set[str]) -> str:
    """A judge's note without what could identify an instance: quoted text, figures, line numbers, names."""
    text = _QUOTED.sub("'...'", text)
    for name in sorted(names, key=len, reverse=True):
        if len(name) >= 3:
            text = re.sub(re.escape(name), "<entity>", text, flags=re.I)
    return _NUMBER.sub("#", text)[:200]


def rubric_rows(evidence: pd.DataFrame) -> pd.DataFrame:
    """The rubric decisions of a scoring run with the item id split out (na items have no row)."""
    r = evidence[evidence.metric == "rubric"].copy()
    r["item"] = r.kind.str.split(":", n=1).str[1]
    r["layer"] = r.kind.str.split(":", n=1).str[0]
    return r


def item_pass_rates(evidence: pd.DataFrame) -> dict[str, float]:
    """Mean credit (pass 1, partial 0.5, fail 0) per rubric item over every report in `evidence`."""
    r = rubric_rows(evidence)
    return {str(k): float(v) for k, v in r.groupby("item").score.mean().items()}


def recurrent_failures(
    evidence: pd.DataFrame,
    *,
    support: int,
    min_fail_rate: float,
    names: set[str] = frozenset(),  # type: ignore[assignment]
    rubric: list[RubricItem] | None = None,
    examples: int = 3,
) -> list[Failure]:
    """Items failed (credit < 1) on at least `min_fail_rate` of the reports of at least
    min(`support`, number of systems) systems, most failed first."""
    r = rubric_rows(evidence)
    if r.empty:
        return []
    items = {i.id: i for i in (rubric or load_rubric())}
    r["failed"] = r.score < 1.0
    n_systems = r.system.nunique()
    need = min(support, n_systems)
    out = []
    for item, rows in r.groupby("item"):
        per_system = rows.groupby("system").failed.mean()
        backing = int((per_system >= min_fail_rate).sum())
        if backing < need or str(item) not in items:
            continue
        spec = items[str(item)]
        notes = rows[rows.failed].rationale.astype(str).map(lambda t: anonymise(t, names))
        out.append(
            Failure(
                item=str(item),
                layer=spec.layer,
                title=spec.title,
                criterion=spec.criterion,
                fail_rate=float(rows.failed.mean()),
                systems=backing,
                reports=len(rows),
                examples=tuple(dict.fromkeys(notes))[:examples],
            )
        )
    return sorted(out, key=lambda f: (-f.fail_rate, f.layer, f.item))
