"""Accepting a candidate skill on the validation split, and the paired comparison of the locked evaluation.

`decide(current, candidate, targets, ...)` compares two scorings of the same validation reports'
instances (one per skill) with paper 003's rule (section 5, "External Validation and Freezing": accepted
"only when targeted items improve without reducing deliverability, report identity, institutional
completeness, or materially regressing non-target items"): the targeted rubric items' mean credit rises by
more than `min_gain`; no layer mean (G0, G1, G2) falls at all; no non-target item's pass rate falls by more
than `item_tolerance`; no G0 gate that passed with K_t fails with the candidate; and no other metric drops by
more than `max_metric_drop` (default 0: none may fall). `what_is_worse` is the ablation's test (what is
worse with a skill without one rule). `paired_differences` gives, per system and metric, the mean of (with
skill - without) over instances with a paired bootstrap 95% CI; `item_changes` the pass-rate change of every
rubric item. docs/evolve.md has the details."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tasks.evolve.failures import rubric_rows
from tasks.score import registry
from tasks.score.leaderboard import bootstrap_ci

__all__ = [
    "Decision",
    "ScoredSplit",
    "decide",
    "item_changes",
    "item_rates",
    "layer_means",
    "what_is_worse",
    "objective",
    "paired_differences",
]


@dataclass(frozen=True)
class ScoredSplit:
    """A scoring run's two tables (tasks.score.outputs): scores.parquet and evidence.parquet."""

    scores: pd.DataFrame
    evidence: pd.DataFrame


# A float epsilon only: the same reports give the same means, so "does not fall" needs no other slack.
EPS = 1e-9
# score metric -> what it is (the rubric's layers and its total), and rubric layer -> its metric
LAYERS = {"rubric_g0": "G0", "rubric_g1": "G1", "rubric_g2": "G2", "rubric": "rubric total"}
LAYER_METRICS = {layer: metric for metric, layer in LAYERS.items() if metric != "rubric"}


@dataclass
class Decision:
    accepted: bool
    reasons: list[str] = field(default_factory=list)
    target_gain: float = 0.0
    g0_regressions: int = 0
    metric_changes: dict[str, float] = field(default_factory=dict)
    layers: dict[str, dict[str, float]] = field(default_factory=dict)  # layer -> before / after / change
    items: list[dict] = field(default_factory=list)  # per rubric item: before / after / delta / target / ok
    item_tolerance: float = 0.0

    def as_dict(self) -> dict:
        return {
            "accepted": self.accepted,
            "reasons": self.reasons,
            "target_gain": round(self.target_gain, 6),
            "g0_regressions": self.g0_regressions,
            "metric_changes": {k: round(v, 6) for k, v in sorted(self.metric_changes.items())},
            "layers": self.layers,
            "items": self.items,
            "item_tolerance": self.item_tolerance,
        }


def objective(run: ScoredSplit) -> float:
    """What "best skill" means: the mean rubric total S over every (system, instance) of the split."""
    s = run.scores
    return float(s[s.metric == "rubric"].value.mean())


def _item_means(run: ScoredSplit, items: set[str]) -> float:
    r = rubric_rows(run.evidence)
    r = r[r.item.isin(items)]
    return float(r.score.mean()) if len(r) else float("nan")


def _g0_regressions(current: ScoredSplit, candidate: ScoredSplit) -> int:
    keys = ["system", "instance_id", "item"]
    a = rubric_rows(current.evidence)
    b = rubric_rows(candidate.evidence)
    a, b = a[a.layer == "G0"][[*keys, "score"]], b[b.layer == "G0"][[*keys, "score"]]
    both = a.merge(b, on=keys, suffixes=("_k", "_c"))
    return int(((both.score_k >= 1.0) & (both.score_c < 1.0)).sum())


def _paired_scores(current: ScoredSplit, candidate: ScoredSplit) -> pd.DataFrame:
    """Score rows of each (system, instance, metric) in both runs: value_x current, value_y candidate."""
    keys = ["system", "instance_id", "metric"]
    return current.scores[[*keys, "value"]].merge(candidate.scores[[*keys, "value"]], on=keys)


def _metric_changes(current: ScoredSplit, candidate: ScoredSplit) -> dict[str, float]:
    """Per metric: mean change over (system, instance) pairs present in both, as a share of the metric's
    range (so rubric's 0-100 and coverage's 0-1 compare), signed so + is better."""
    out = {}
    for metric, rows in _paired_scores(current, candidate).groupby("metric"):
        diff = (rows.value_y - rows.value_x).dropna()
        if len(diff):
            spec = registry.spec(str(metric))
            sign = 1.0 if spec.higher_is_better else -1.0
            width = (spec.high - spec.low) if spec.high > spec.low else 1.0
            out[str(metric)] = sign * float(diff.mean()) / width
    return out


def layer_means(current: ScoredSplit, candidate: ScoredSplit) -> dict[str, dict[str, float]]:
    """Per rubric layer: its mean score over the (system, instance) pairs scored in both runs."""
    both = _paired_scores(current, candidate).dropna(subset=["value_x", "value_y"])
    out = {}
    for layer, metric in LAYER_METRICS.items():
        rows = both[both.metric == metric]
        if len(rows):
            before, after = float(rows.value_x.mean()), float(rows.value_y.mean())
            out[layer] = {"before": before, "after": after, "change": after - before}
    return out


def item_rates(
    current: ScoredSplit, candidate: ScoredSplit, targets: set[str], tolerance: float
) -> list[dict]:
    """Per rubric item, over the (system, instance) reports it applies to in both runs: pass rate (mean
    credit) before and after, the change, and whether it is a target or within `tolerance`."""
    keys = ["system", "instance_id", "item"]
    a, b = rubric_rows(current.evidence), rubric_rows(candidate.evidence)
    both = a[[*keys, "layer", "score"]].merge(b[[*keys, "score"]], on=keys, suffixes=("_k", "_c"))
    out = []
    for (layer, item), rows in both.groupby(["layer", "item"], sort=True):
        before, after = float(rows.score_k.mean()), float(rows.score_c.mean())
        target = str(item) in targets
        out.append(
            {
                "item": str(item),
                "layer": str(layer),
                "target": target,
                "reports": len(rows),
                "before": round(before, 6),
                "after": round(after, 6),
                "delta": round(after - before, 6),
                "within_tolerance": target or after - before >= -tolerance - EPS,
            }
        )
    return out


def decide(
    current: ScoredSplit,
    candidate: ScoredSplit,
    targets: set[str],
    *,
    min_gain: float,
    item_tolerance: float,
    max_metric_drop: float = 0.0,
) -> Decision:
    """Accept `candidate` over `current` on the validation split (see the module docstring)."""
    gain = _item_means(candidate, targets) - _item_means(current, targets)
    regress = _g0_regressions(current, candidate)
    changes = _metric_changes(current, candidate)
    layers = layer_means(current, candidate)
    items = item_rates(current, candidate, targets, item_tolerance)
    reasons = []
    if not targets:
        reasons.append("no targeted item: no recurrent failure to fix")
    elif not gain > min_gain:
        reasons.append(f"targeted items' pass rate changed by {gain:+.3f} (needs > {min_gain:+.3f})")
    for layer, m in layers.items():
        if m["change"] < -EPS:
            reasons.append(f"{layer} mean fell from {m['before']:.4f} to {m['after']:.4f}")
    for it in items:
        if not it["within_tolerance"]:
            reasons.append(
                f"non-target item {it['item']} pass rate fell by {-it['delta']:.3f} "
                f"({it['before']:.3f} -> {it['after']:.3f}; tolerance {item_tolerance:.3f})"
            )
    if regress:
        reasons.append(f"{regress} G0 gate(s) that passed with the current skill fail with the candidate")
    others = {m: d for m, d in changes.items() if m not in LAYER_METRICS.values()}
    for m, d in sorted(others.items()):
        if d < -max_metric_drop - EPS:
            reasons.append(f"{m} dropped by {-d:.3f} (allowed {max_metric_drop:.3f})")
    accepted = not reasons
    if accepted:
        reasons.append(
            f"targeted items' pass rate rose by {gain:+.3f}; no layer mean fell; no G0 regression; "
            f"no non-target item fell by more than {item_tolerance:.3f}"
        )
    layers = {k: {n: round(v, 6) for n, v in m.items()} for k, m in layers.items()}
    gain = 0.0 if np.isnan(gain) else gain
    return Decision(accepted, reasons, gain, regress, changes, layers, items, item_tolerance)


def what_is_worse(base: ScoredSplit, variant: ScoredSplit) -> list[str]:
    """What is worse with `variant` than with `base` on the same split (empty: nothing): a metric mean, a
    rubric item's pass rate or a G0 gate. The ablation drops a rule when its skill without it is no worse."""
    worse = [
        f"{m} fell by {-d:.4f} of its range" for m, d in _metric_changes(base, variant).items() if d < -EPS
    ]
    worse += [
        f"{it['item']} fell by {-it['delta']:.3f}"
        for it in item_rates(base, variant, set(), 0.0)
        if it["delta"] < -EPS
    ]
    regress = _g0_regressions(base, variant)
    if regress:
        worse.append(f"{regress} G0 gate(s) fail")
    return worse


def paired_differences(
    without: ScoredSplit, with_skill: ScoredSplit, *, n_resamples: int = 2000, seed: int = 0
) -> pd.DataFrame:
    """Per system x metric: n instances, mean without / with, mean paired difference and its 95% CI."""
    both = _paired_scores(without, with_skill).dropna(subset=["value_x", "value_y"])
    both = both.sort_values(["system", "instance_id", "metric"])
    rows = []
    for (system, metric), g in both.groupby(["system", "metric"], sort=True):
        diff = (g.value_y - g.value_x).to_numpy()
        mean, lo, hi = bootstrap_ci(diff, n_resamples=n_resamples, seed=seed)
        rows.append(
            {
                "system": system,
                "metric": metric,
                "layer": LAYERS.get(str(metric), ""),
                "family": registry.group_of(str(metric)),
                "n": len(g),
                "without": float(g.value_x.mean()),
                "with_skill": float(g.value_y.mean()),
                "diff": mean,
                "ci_low": lo,
                "ci_high": hi,
            }
        )
    return pd.DataFrame(rows)


def item_changes(without: ScoredSplit, with_skill: ScoredSplit) -> pd.DataFrame:
    """Per system x rubric item: pass rate (mean credit) without and with the skill, and the change."""
    a = rubric_rows(without.evidence).groupby(["system", "layer", "item", "text"]).score.mean()
    b = rubric_rows(with_skill.evidence).groupby(["system", "layer", "item", "text"]).score.mean()
    out = pd.concat([a.rename("without"), b.rename("with_skill")], axis=1).reset_index()
    out["change"] = out["with_skill"] - out["without"]
    return out.sort_values(["system", "layer", "item"]).reset_index(drop=True)
