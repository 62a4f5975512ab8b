"""Pairwise A/B/tie votes between the systems of each instance, asked in both display orders, and a
Bradley-Terry ranking with instance-bootstrap intervals (paper 002 §4.2). Votes come from an LLM judge
(blind) or offline from the other families' metric values. Specification: docs/metrics/pairwise.md.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, NamedTuple, Protocol

import choix
import numpy as np
import pandas as pd
import pyarrow as pa
from pydantic import BaseModel, field_validator

from tasks.score.holistic import TextsJudge, cut_to_tokens, proportional_caps
from tasks.score.metric import ComparisonFamily, JudgeEnv, parquet_bytes
from tasks.tokens import count_tokens

__all__ = [
    "BT_ALPHA",
    "BT_COLUMNS",
    "VOTE_COLUMNS",
    "LLMPairwiseJudge",
    "OfflinePairwiseJudge",
    "PairwiseJudge",
    "PairwiseReply",
    "bradley_terry",
    "bt_markdown",
    "compare_both_orders",
    "offline_vote",
    "pairwise_instance",
]

BT_ALPHA = 0.01  # LSR pseudo-count per pair (docs/metrics/pairwise.md)
ELO_SCALE = 400.0 / math.log(10.0)
VOTES = ("A", "B", "tie")
Values = Mapping[str, Mapping[str, float | None]]  # metric values by system, then metric
VOTE_COLUMNS: tuple[str, ...] = (
    "instance_id",
    "system_a",
    "system_b",
    "order",
    "raw_vote",
    "vote",
    "judge",
    "rationale",
)
BT_COLUMNS: tuple[str, ...] = (
    "system",
    "score",
    "elo",
    "ci_low",
    "ci_high",
    "rank",
    "rank_low",
    "rank_high",
    "wins",
    "losses",
    "ties",
    "games",
)


# ======================================================================== offline vote


def _value(x: float | None) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


def offline_vote(
    a: Mapping[str, float | None],
    b: Mapping[str, float | None],
    lower_is_better: frozenset[str] | set[str] | None = None,
    tol: float = 0.01,
    ranges: Mapping[str, tuple[float, float]] | None = None,
) -> tuple[str, str]:
    """("A"|"B"|"tie", rationale): the majority vote of the metrics both systems have
    (docs/metrics/pairwise.md). Ranges and directions default to the registered metrics' specs."""
    from tasks.score import registry  # late: the registry lists this module's family

    if lower_is_better is None:
        lower_is_better = registry.lower_is_better()
    metric_range = registry.metric_range
    n_a = n_b = n_abstain = 0
    parts: list[str] = []
    for metric in sorted(set(a) & set(b)):
        va, vb = _value(a[metric]), _value(b[metric])
        if va is None or vb is None:
            continue
        lo, hi = (ranges or {}).get(metric) or metric_range(metric)
        margin = tol * (hi - lo)
        diff = (vb - va) if metric in lower_is_better else (va - vb)
        if abs(diff) <= margin:
            n_abstain += 1
            parts.append(f"{metric}: abstain ({va:.4g} vs {vb:.4g}, |diff| <= {margin:.4g})")
            continue
        side = "A" if diff > 0 else "B"
        if side == "A":
            n_a += 1
        else:
            n_b += 1
        arrow = ", lower is better" if metric in lower_is_better else ""
        parts.append(f"{metric}: {side} ({va:.4g} vs {vb:.4g}{arrow})")
    verdict = "A" if n_a > n_b else "B" if n_b > n_a else "tie"
    summary = f"A {n_a}, B {n_b}, abstain {n_abstain} -> {verdict}"
    if not parts:
        summary = "no metric with a value for both systems -> tie"
    return verdict, "; ".join([*parts, summary])


# ======================================================================== judges


class PairwiseJudge(Protocol):
    name: str

    def compare(
        self, gold_markdown: str, report_1: str, report_2: str, *, systems: tuple[str, str] | None = None
    ) -> tuple[str, str]:
        """("1"|"2"|"tie", rationale): which displayed report is better; `systems` names them in display
        order (an LLM judge must not show them)."""


class OfflinePairwiseJudge:
    """The offline pairwise judge: :func:`offline_vote` over one instance's metric values per system."""

    name = "offline:metric-vote"

    def __init__(
        self,
        values_by_system: Mapping[str, Mapping[str, float | None]],
        *,
        tol: float = 0.01,
        lower_is_better: frozenset[str] | set[str] | None = None,
        ranges: Mapping[str, tuple[float, float]] | None = None,
    ) -> None:
        self.values = {s: dict(v) for s, v in values_by_system.items()}
        self.tol = tol
        self.lower_is_better = lower_is_better
        self.ranges = ranges

    @classmethod
    def from_scores(
        cls, scores: pd.DataFrame, instance_id: str, metrics: Sequence[str] | None = None, **kw: Any
    ) -> OfflinePairwiseJudge:
        """From the long score table (instance_id, system, metric, value), one instance's rows, optionally
        only `metrics`."""
        rows = scores[scores["instance_id"] == instance_id]
        if metrics is not None:
            rows = rows[rows["metric"].isin(list(metrics))]
        values: dict[str, dict[str, float | None]] = {}
        for system, metric, value in zip(rows["system"], rows["metric"], rows["value"], strict=True):
            values.setdefault(str(system), {})[str(metric)] = _value(value)
        return cls(values, **kw)

    def compare(
        self, gold_markdown: str, report_1: str, report_2: str, *, systems: tuple[str, str] | None = None
    ) -> tuple[str, str]:
        if systems is None:
            raise ValueError(f"{self.name} votes from metric values: compare() needs systems=(s1, s2)")
        missing = [s for s in systems if s not in self.values]
        if missing:
            raise KeyError(f"{self.name}: no metric values for system(s) {missing}")
        vote, why = offline_vote(
            self.values[systems[0]],
            self.values[systems[1]],
            lower_is_better=self.lower_is_better,
            tol=self.tol,
            ranges=self.ranges,
        )
        return {"A": "1", "B": "2", "tie": "tie"}[vote], why


class PairwiseReply(BaseModel):
    """The reply of role score_pairwise."""

    winner: Literal["1", "2", "tie"]
    rationale: str = ""

    @field_validator("winner", mode="before")
    @classmethod
    def _normalise(cls, v: Any) -> Any:
        # tolerate 1 / "Report 1" / "TIE"; anything else fails validation (-> corrective retry)
        if isinstance(v, bool):
            return v
        if isinstance(v, int):
            return str(v)
        if isinstance(v, str):
            s = v.strip().lower().removeprefix("report").strip()
            return s
        return v


class LLMPairwiseJudge(TextsJudge):
    """Blind pairwise judge over an OpenAI-compatible endpoint (docs/metrics/pairwise.md)."""

    ROLE = "score_pairwise"
    TEXTS = 3  # the gold report and both reports
    ROLES = (ROLE,)

    def compare(
        self, gold_markdown: str, report_1: str, report_2: str, *, systems: tuple[str, str] | None = None
    ) -> tuple[str, str]:
        # `systems` is deliberately unused: the judgment is blind
        empty_1, empty_2 = not report_1.strip(), not report_2.strip()
        if empty_1 and empty_2:
            return "tie", "both reports are empty (no request made)"
        if empty_1:
            return "2", "report 1 is empty (no request made)"
        if empty_2:
            return "1", "report 2 is empty (no request made)"
        texts = [gold_markdown, report_1, report_2]
        labels = ["the gold report", "report 1", "report 2"]
        sizes = [count_tokens(t) for t in texts]
        caps = proportional_caps(sizes, self._room())
        shown: list[str] = []
        notes: list[str] = []
        for text, size, cap, label in zip(texts, sizes, caps, labels, strict=True):
            cut, was_cut = cut_to_tokens(text, cap)
            shown.append(cut)
            if was_cut:
                notes.append(f"{label} is cut after about {cap} of its {size} tokens")
        if notes:
            note = (
                "NOTE: the texts were too long for the context window; each was cut to the same fraction "
                "of its length at a line boundary: "
                + "; ".join(notes)
                + ". Each cut is marked where it happens. Judge what is shown; do not count a cut "
                "against a report."
            )
        else:
            note = "All texts are shown in full."
        reply: PairwiseReply = self.ask(
            self.ROLE,
            PairwiseReply,
            gold_report=shown[0].strip() or "(empty)",
            report_1=shown[1].strip(),
            report_2=shown[2].strip(),
            input_note=note,
        ).value
        rationale = reply.rationale.strip()
        if notes:
            rationale = f"{rationale} [texts cut: {'; '.join(notes)}]".strip()
        return reply.winner, rationale


# ======================================================================== votes of an instance

_CANON = {("ab", "1"): "A", ("ab", "2"): "B", ("ba", "1"): "B", ("ba", "2"): "A"}


def compare_both_orders(
    instance_id: str,
    system_a: str,
    system_b: str,
    gold: str,
    report_a: str,
    report_b: str,
    judge: PairwiseJudge,
) -> list[dict[str, str]]:
    """Two vote rows for one pair (display orders "ab" then "ba"), canonical names and votes
    (docs/metrics/pairwise.md). The arguments may come in either order: they are sorted by system name
    first."""
    if system_a == system_b:
        raise ValueError(f"a system cannot be compared with itself: {system_a!r}")
    if system_b < system_a:
        system_a, system_b, report_a, report_b = system_b, system_a, report_b, report_a
    rows = []
    for order, first, second, names in (
        ("ab", report_a, report_b, (system_a, system_b)),
        ("ba", report_b, report_a, (system_b, system_a)),
    ):
        raw, rationale = judge.compare(gold, first, second, systems=names)
        if raw not in ("1", "2", "tie"):
            raise ValueError(f"{judge.name}: vote {raw!r} is not '1', '2' or 'tie'")
        rows.append(
            {
                "instance_id": instance_id,
                "system_a": system_a,
                "system_b": system_b,
                "order": order,
                "raw_vote": raw,
                "vote": "tie" if raw == "tie" else _CANON[(order, raw)],
                "judge": judge.name,
                "rationale": rationale,
            }
        )
    return rows


def pairwise_instance(
    instance_id: str,
    systems: Sequence[str],
    gold: str,
    reports: Mapping[str, str],
    judge: PairwiseJudge,
    *,
    workers: int = 1,
) -> list[dict[str, str]]:
    """All vote rows of one instance: both display orders of every unordered pair of `systems` (sorted
    pairs, deterministic row order). `reports` maps every system to its report (the offline judge ignores
    the texts: "" is fine). `workers` > 1 asks the pairs concurrently (LLM judges)."""
    names = sorted(set(systems))
    missing = [s for s in names if s not in reports]
    if missing:
        raise ValueError(f"{instance_id}: no report for system(s) {missing}")
    pairs = list(itertools.combinations(names, 2))

    def one(pair: tuple[str, str]) -> list[dict[str, str]]:
        a, b = pair
        return compare_both_orders(instance_id, a, b, gold, reports[a], reports[b], judge)

    if workers > 1 and len(pairs) > 1:
        with ThreadPoolExecutor(max_workers=min(workers, len(pairs))) as pool:
            chunks = list(pool.map(one, pairs))
    else:
        chunks = [one(p) for p in pairs]
    return [row for chunk in chunks for row in chunk]


# ======================================================================== Bradley-Terry


def _fit(wins: np.ndarray, alpha: float, start: np.ndarray | None = None) -> np.ndarray:
    """Centred log-strengths from a win matrix (wins[i, j] = wins of i over j, ties as halves).

    `start` warm-starts ILSR (bootstrap refits start from the full-data fit: same optimum, ~3x faster)."""
    if wins.shape[0] == 1:
        return np.zeros(1)
    params = choix.ilsr_pairwise_dense(wins, alpha=alpha, initial_params=start, max_iter=1000, tol=1e-10)
    return params - params.mean()


def _ranks(scores: np.ndarray) -> np.ndarray:
    """Rank 1 = best; equal scores share the best rank (1 + number of strictly higher scores)."""
    s = np.round(scores, 9)  # float noise must not split a true tie
    return 1 + (s[..., None, :] > s[..., :, None]).sum(axis=-1)


def bradley_terry(
    votes: pd.DataFrame,
    systems: Sequence[str] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    *,
    alpha: float = BT_ALPHA,
) -> pd.DataFrame:
    """Bradley-Terry ranking of the systems with instance-bootstrap 95% CIs (docs/metrics/pairwise.md).

    `votes` has at least the columns instance_id, system_a, system_b, vote ("A"|"B"|"tie"). `systems`
    fixes the systems reported (a listed system without games gets score ~0 and wide intervals); by
    default those in the votes. Returns one row per system (``BT_COLUMNS``) sorted by rank, then name;
    ``df.attrs`` records n_instances, n_boot, seed, alpha and the method."""
    names = _bt_systems(votes, systems, n_boot, alpha)
    games = _games(votes, names)
    score = _fit(games.per_instance.sum(axis=0), alpha)
    ci_low, ci_high, rank_low, rank_high = _bootstrap(games.per_instance, score, n_boot, seed, alpha)
    df = pd.DataFrame(
        {
            "system": names,
            "score": score,
            "elo": 1000.0 + ELO_SCALE * score,
            "ci_low": ci_low,
            "ci_high": ci_high,
            "rank": _ranks(score).astype(int),
            "rank_low": rank_low,
            "rank_high": rank_high,
            "wins": games.wins,
            "losses": games.losses,
            "ties": games.ties,
            "games": games.wins + games.losses + games.ties,
        }
    )
    if n_boot:
        df["rank_low"] = df["rank_low"].astype(int)
        df["rank_high"] = df["rank_high"].astype(int)
    df = df.sort_values(["rank", "system"], kind="stable").reset_index(drop=True)
    df.attrs.update(
        {
            "n_instances": games.per_instance.shape[0],
            "n_votes": len(votes),
            "n_boot": n_boot,
            "seed": seed,
            "alpha": alpha,
            "method": "Bradley-Terry (choix.ilsr_pairwise_dense), ties = half wins; "
            "percentile bootstrap over instances",
        }
    )
    return df


def _bt_systems(votes: pd.DataFrame, systems: Sequence[str] | None, n_boot: int, alpha: float) -> list[str]:
    """The systems of the fit, in order, after checking the votes and the parameters."""
    need = ("instance_id", "system_a", "system_b", "vote")
    absent = [c for c in need if c not in votes.columns]
    if absent:
        raise ValueError(f"votes lack column(s) {absent}")
    if votes.empty:
        raise ValueError("no pairwise vote to fit")
    bad = sorted({str(v) for v in votes["vote"] if v not in VOTES})
    if bad:
        raise ValueError(f"unknown vote value(s) {bad}: expected 'A', 'B' or 'tie'")
    if n_boot < 0:
        raise ValueError(f"n_boot must be >= 0, got {n_boot}")
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0 (it keeps disconnected or separated data fittable), got {alpha}")
    same = votes["system_a"] == votes["system_b"]
    if same.any():
        raise ValueError(f"a system is compared with itself: {sorted(set(votes.loc[same, 'system_a']))}")
    seen = sorted(set(votes["system_a"]) | set(votes["system_b"]))
    if systems is None:
        return seen
    names = list(dict.fromkeys(systems))
    unknown = sorted(set(seen) - set(names))
    if unknown:
        raise ValueError(f"votes name system(s) not in `systems`: {unknown}")
    return names


class _Games(NamedTuple):
    per_instance: np.ndarray  # [instance, i, j]: wins of i over j in that instance, ties as halves
    wins: np.ndarray  # per system
    losses: np.ndarray
    ties: np.ndarray


def _games(votes: pd.DataFrame, names: list[str]) -> _Games:
    """One win matrix per instance, instances in sorted order (so the fit ignores the row order)."""
    index = {s: i for i, s in enumerate(names)}
    k = len(names)
    instances = sorted(set(votes["instance_id"]), key=str)
    inst_pos = {iid: n for n, iid in enumerate(instances)}
    per_inst = np.zeros((len(instances), k, k))
    wins = np.zeros(k, dtype=int)
    losses = np.zeros(k, dtype=int)
    ties = np.zeros(k, dtype=int)
    for iid, sa, sb, v in zip(
        votes["instance_id"], votes["system_a"], votes["system_b"], votes["vote"], strict=True
    ):
        n, i, j = inst_pos[iid], index[sa], index[sb]
        if v == "A":
            per_inst[n, i, j] += 1.0
            wins[i] += 1
            losses[j] += 1
        elif v == "B":
            per_inst[n, j, i] += 1.0
            wins[j] += 1
            losses[i] += 1
        else:
            per_inst[n, i, j] += 0.5
            per_inst[n, j, i] += 0.5
            ties[i] += 1
            ties[j] += 1
    return _Games(per_inst, wins, losses, ties)


def _bootstrap(
    per_inst: np.ndarray, score: np.ndarray, n_boot: int, seed: int, alpha: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(ci_low, ci_high, rank_low, rank_high): percentiles over `n_boot` refits on instances resampled
    with replacement from one seeded generator (NaN without resamples)."""
    n_inst, k = per_inst.shape[0], per_inst.shape[1]
    if not (n_boot and n_inst > 0):
        nan = np.full(k, np.nan)
        return nan, nan, nan, nan
    rng = np.random.default_rng(seed)
    boot = np.empty((n_boot, k))
    for r in range(n_boot):
        picks = rng.integers(0, n_inst, size=n_inst)
        weights = np.bincount(picks, minlength=n_inst).astype(float)
        boot[r] = _fit(np.tensordot(weights, per_inst, axes=1), alpha, score)
    ci_low, ci_high = np.percentile(boot, [2.5, 97.5], axis=0)
    boot_ranks = _ranks(boot)
    rank_low = np.quantile(boot_ranks, 0.025, axis=0, method="lower")
    rank_high = np.quantile(boot_ranks, 0.975, axis=0, method="higher")
    return ci_low, ci_high, rank_low, rank_high


def bt_markdown(df: pd.DataFrame) -> str:
    """The Bradley-Terry board as a Markdown table (score and 95% CI, Elo, rank range, record)."""
    lines = [
        "| Rank | System | BT score [95% CI] | Elo | Rank range | W-L-T | Games |",
        "|---:|---|---|---:|---|---|---:|",
    ]

    def num(x: float) -> str:
        return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:+.2f}"

    for row in df.itertuples(index=False):
        ci = "" if math.isnan(float(row.ci_low)) else f" [{num(row.ci_low)}, {num(row.ci_high)}]"
        if isinstance(row.rank_low, float) and math.isnan(row.rank_low):
            rank_range = "n/a"
        elif int(row.rank_low) == int(row.rank_high):
            rank_range = f"{int(row.rank_low)}"
        else:
            rank_range = f"{int(row.rank_low)}-{int(row.rank_high)}"
        lines.append(
            f"| {int(row.rank)} | {row.system} | {num(row.score)}{ci} | {row.elo:.0f} | {rank_range} | "
            f"{int(row.wins)}-{int(row.losses)}-{int(row.ties)} | {int(row.games)} |"
        )
    return "\n".join(lines) + "\n"


# ======================================================================== the family

PAIRWISE_SCHEMA = pa.schema(
    [
        pa.field("instance_id", pa.string(), nullable=False),
        pa.field("system_a", pa.string(), nullable=False),  # canonical order: sorted names
        pa.field("system_b", pa.string(), nullable=False),
        pa.field("order", pa.string(), nullable=False),  # "ab": A shown first, "ba": B shown first
        pa.field("raw_vote", pa.string()),  # as displayed: "1" | "2" | "tie"
        pa.field("vote", pa.string(), nullable=False),  # canonical: "A" | "B" | "tie"
        pa.field("judge", pa.string()),
        pa.field("rationale", pa.string()),
    ]
)


class PairwiseFamily(ComparisonFamily):
    """A/B/tie votes between the systems of each instance (both display orders) and a Bradley-Terry fit.

    Offline the vote is the majority of the other families' metric values (no judge call); with an LLM
    judge each instance is one cached task."""

    name = "pairwise"
    summary = "pairwise A/B/tie votes between systems and a Bradley-Terry ranking"
    default_families = ("structure", "coverage", "faithfulness")  # the offline votes use these

    def __init__(self, env: JudgeEnv) -> None:
        super().__init__(env)
        self.judge = None if env.offline else LLMPairwiseJudge(env.client, env.llm)

    def in_flow(self) -> bool:
        return self.judge is None

    def compare(self, instance_id: str, gold: str, reports: Mapping[str, str], values: Values) -> list[dict]:
        judge: PairwiseJudge = self.judge or OfflinePairwiseJudge(values)
        return pairwise_instance(instance_id, sorted(reports), gold, reports, judge)

    def outputs(
        self, rows: list[dict[str, Any]], systems: list[str]
    ) -> tuple[dict[str, bytes], dict[str, Any]]:
        if not rows:
            return {}, {}
        s = self.env.settings
        votes = pd.DataFrame(rows)
        bt = bradley_terry(votes, systems, n_boot=min(s.bootstrap, 1000), seed=s.seed)
        files = {
            "pairwise.parquet": parquet_bytes(votes.to_dict("records"), PAIRWISE_SCHEMA),
            "bradley_terry.csv": bt.to_csv(index=False).encode("utf-8"),
            "bradley_terry.md": bt_markdown(bt).encode("utf-8"),
        }
        judges = sorted(votes["judge"].astype(str).unique())
        return files, {"pairwise": {"votes": len(votes), "judges": judges}}
