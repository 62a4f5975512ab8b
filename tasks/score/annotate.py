"""Annotation sheets for judge-human alignment (paper 000 §4.4): a blind sample of graded items.

`annotation_sheets(evidence, metric, n, seed)` draws `n` items of one metric from a scoring run's
`evidence.parquet`, stratified over systems (round-robin, seeded), and returns two tables:

* `items`: what an annotator sees: item_id, instance_id, system, kind, text, source: *no judge score*
  (blind), plus the guideline's scale (0/25/50/75/100). The annotator adds a `score` column.
* `judge`: item_id, score (the judge's score x 100): the second input of `frame align HUMAN JUDGE`.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd

__all__ = ["GUIDELINES", "annotation_sheets"]

GUIDELINES = {
    "coverage": (
        "Read the generated report (reports/<instance>.md of the system). Score how well it conveys the "
        "information unit: 100 fully (same facts, same figures up to rounding), 75 mostly (a minor detail "
        "missing or slightly imprecise), 50 partly (the topic is there, key facts or figures missing or "
        "different), 25 barely (only loosely related content), 0 absent or contradicted."
    ),
    "faithfulness": (
        "Read the grounding documents of the instance. Score how well they support the claim: 100 stated "
        "or exactly derivable, 75 supported with a small ambiguity (e.g. period not named), 50 partly "
        "supported, 25 weakly related evidence only, 0 unsupported or contradicted."
    ),
}


def _seed(seed: int, *parts: str) -> int:
    return int(hashlib.sha256("|".join([str(seed), *parts]).encode()).hexdigest()[:8], 16)


def annotation_sheets(
    evidence: pd.DataFrame, metric: str, n: int = 40, seed: int = 0, systems: list[str] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(items, judge) for `n` items of `metric`, spread evenly over `systems` (all when None)."""
    if metric not in GUIDELINES:
        raise ValueError(f"metric must be one of {sorted(GUIDELINES)} (got {metric!r})")
    pool = evidence[evidence["metric"] == metric].sort_values("item_id")
    if systems:
        unknown = sorted(set(systems) - set(pool["system"]))
        if unknown:
            raise ValueError(f"no {metric} items of system(s) {', '.join(unknown)} in the evidence table")
        pool = pool[pool["system"].isin(systems)]
    if pool.empty:
        raise ValueError(f"no {metric} items in the evidence table")
    queues = []
    for system, group in sorted(pool.groupby("system"), key=lambda kv: str(kv[0])):
        order = np.random.default_rng(_seed(seed, metric, str(system))).permutation(len(group))
        queues.append(group.iloc[order])
    picked = []
    k = 0
    while len(picked) < min(n, len(pool)):
        q = queues[k % len(queues)]
        row = k // len(queues)
        if row < len(q):
            picked.append(q.iloc[row])
        elif all(k // len(queues) >= len(x) for x in queues):
            break
        k += 1
    chosen = pd.DataFrame(picked).sort_values("item_id").reset_index(drop=True)
    items = chosen[["item_id", "instance_id", "system", "kind", "text", "source"]].copy()
    items["scale"] = "0/25/50/75/100"
    judge = pd.DataFrame({"item_id": chosen["item_id"], "score": (chosen["score"] * 100).round(2)})
    return items, judge
