"""The votes of one instance: the judge protocol, both display orders of a pair with canonical names and
votes, and every pair of an instance's systems."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

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


class PairwiseJudge(Protocol):
    name: str

    def compare(
        self, gold_markdown: str, report_1: str, report_2: str, *, systems: tuple[str, str] | None = None
    ) -> tuple[str, str]:
        """("1"|"2"|"tie", rationale): which displayed report is better; `systems` names them in display
        order (an LLM judge must not show them)."""


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
