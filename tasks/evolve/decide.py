"""Accepting a candidate skill on the validation split, and the paired comparison of the locked evaluation.

`decide(current, candidate, targets, ...)` compares two scorings of the same validation reports'
instances (one per skill): the candidate is accepted only if the targeted rubric items' mean credit rises
by more than `min_gain`, no G0 gate that passed with K_t fails with the candidate, and no metric drops
by more than `max_metric_drop` (in its better direction). `paired_differences` gives, per system and
metric, the mean of (with skill - without) over instances with a paired bootstrap 95% CI; `item_changes`
the pass-rate change of every rubric item. docs/evolve.md has the details."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tasks.evolve.failures import rubric_rows
from tasks.score import registry
from tasks.score.leaderboard import bootstrap_ci

__all__ = ["Decision", "ScoredSplit", "decide", "item_changes", "objective", "paired_differences"]


@dataclass(frozen=True)
class ScoredSplit:
    """A scoring run's two tables (tasks.score.outputs): scores.parquet and evidence.parquet."""

    scores: pd.DataFrame
    evidence: pd.DataFrame


@dataclass
class Decision:
    accepted: bool
    reasons: list[str] = field(default_factory=list)
    target_gain: float = 0.0
    g0_regressions: int = 0
    metric_changes: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "accepted": self.accepted,
            "reasons": self.reasons,
            "target_gain": round(self.target_gain, 6),
            "g0_regressions": self.g0_regressions,
            "metric_changes": {k: round(v, 6) for k, v in sorted(self.metric_changes.items())},
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


def _metric_changes(current: ScoredSplit, candidate: ScoredSplit) -> dict[str, float]:
    """Per metric: mean change over (system, instance) pairs present in both, as a share of the metric's
    range (so rubric's 0-100 and coverage's 0-1 compare), signed so + is better."""
    keys = ["system", "instance_id", "metric"]
    both = current.scores[[*keys, "value"]].merge(candidate.scores[[*keys, "value"]], on=keys)
    out = {}
    for metric, rows in both.groupby("metric"):
        diff = (rows.value_y - rows.value_x).dropna()
        if len(diff):
            spec = registry.spec(str(metric))
            sign = 1.0 if spec.higher_is_better else -1.0
            width = (spec.high - spec.low) if spec.high > spec.low else 1.0
            out[str(metric)] = sign * float(diff.mean()) / width
    return out


def decide(
    current: ScoredSplit,
    candidate: ScoredSplit,
    targets: set[str],
    *,
    min_gain: float,
    max_metric_drop: float,
) -> Decision:
    """Accept `candidate` over `current` on the validation split (see the module docstring)."""
    gain = _item_means(candidate, targets) - _item_means(current, targets)
    regress = _g0_regressions(current, candidate)
    changes = _metric_changes(current, candidate)
    reasons = []
    if not targets:
        reasons.append("no targeted item: no recurrent failure to fix")
    elif not gain > min_gain:
        reasons.append(f"targeted items' pass rate changed by {gain:+.3f} (needs > {min_gain:+.3f})")
    if regress:
        reasons.append(f"{regress} G0 gate(s) that passed with the current skill fail with the candidate")
    drops = {m: d for m, d in changes.items() if d < -max_metric_drop}
    for m, d in sorted(drops.items()):
        reasons.append(f"{m} dropped by {-d:.3f} (allowed {max_metric_drop:.3f})")
    accepted = not reasons
    if accepted:
        reasons.append(f"targeted items' pass rate rose by {gain:+.3f}; no G0 regression; no material drop")
    return Decision(accepted, reasons, 0.0 if np.isnan(gain) else gain, regress, changes)


LAYERS = {"rubric_g0": "G0", "rubric_g1": "G1", "rubric_g2": "G2", "rubric": "rubric total"}


def paired_differences(
    without: ScoredSplit, with_skill: ScoredSplit, *, n_resamples: int = 2000, seed: int = 0
) -> pd.DataFrame:
    """Per system x metric: n instances, mean without / with, mean paired difference and its 95% CI."""
    keys = ["system", "instance_id", "metric"]
    both = without.scores[[*keys, "value"]].merge(with_skill.scores[[*keys, "value"]], on=keys)
    both = both.dropna(subset=["value_x", "value_y"]).sort_values(keys)
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
