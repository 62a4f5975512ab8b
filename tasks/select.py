"""Which instances a smoke run uses (`--limit N`, `--instances ID,...`): a pure, deterministic choice.

The rule (docs/evaluate.md): categories in CATEGORY_ORDER (then any other category, by name); within a
category, instances ordered by sha256("frame-select:<instance_id>"); then round-robin over the
categories (the first of each, then the second of each, ...) until N are taken. The chosen ids come back
in the release's order (sorted). `--instances` names the ids itself; with `--limit` too, the limit
applies to the named ids by the same rule. Nothing given: every instance (no subset).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from schemas.config import CATEGORY_ORDER
from tasks.errors import FrameInputError

__all__ = ["Subset", "parse_ids", "select_instances"]


@dataclass(frozen=True)
class Subset:
    """The chosen instance ids (sorted), out of `total`, and how they were asked for."""

    ids: tuple[str, ...]
    total: int
    limit: int | None = None
    named: bool = False

    def how(self) -> str:
        parts = []
        if self.limit is not None:
            parts.append(f"--limit {self.limit}, stratified by category")
        if self.named:
            parts.append("--instances")
        return "; ".join(parts)

    def note(self) -> str:
        """The leaderboard line: "Subset: 4 of 22 instances (--limit 4, stratified by category): ids ..."."""
        return f"Subset: {len(self.ids)} of {self.total} instances ({self.how()}): ids {', '.join(self.ids)}"

    def record(self) -> dict:
        """What manifest.json records of the subset."""
        return {
            "instance_ids": list(self.ids),
            "n": len(self.ids),
            "of": self.total,
            "limit": self.limit,
            "named": self.named,
            "note": self.note(),
            "rule": "round-robin over categories (CATEGORY_ORDER), sha256('frame-select:<id>') within one",
        }


def parse_ids(text: str | None) -> list[str] | None:
    """`--instances a,b,c` -> ["a", "b", "c"]; None or blank -> None."""
    if text is None or not text.strip():
        return None
    return [i.strip() for i in text.split(",") if i.strip()]


def _rank(instance_id: str) -> str:
    return hashlib.sha256(f"frame-select:{instance_id}".encode()).hexdigest()


def _stratified(rows: Sequence[tuple[str, str]], limit: int) -> list[str]:
    by_cat: dict[str, list[str]] = {}
    for iid, cat in rows:
        by_cat.setdefault(cat, []).append(iid)
    order = [c for c in CATEGORY_ORDER if c in by_cat] + sorted(c for c in by_cat if c not in CATEGORY_ORDER)
    queues = [sorted(by_cat[c], key=_rank) for c in order]
    chosen: list[str] = []
    depth = 0
    while len(chosen) < limit:
        for q in queues:
            if depth < len(q) and len(chosen) < limit:
                chosen.append(q[depth])
        depth += 1
    return chosen


def select_instances(
    rows: Iterable[tuple[str, str]], limit: int | None = None, ids: Sequence[str] | None = None
) -> Subset | None:
    """The Subset of the release's (instance_id, category) `rows` that --limit / --instances ask for;
    None when neither is given or the choice is every instance."""
    rows = sorted({(str(i), str(c)) for i, c in rows})
    if limit is None and ids is None:
        return None
    if limit is not None and limit < 1:
        raise FrameInputError("--limit", f"must be >= 1 (got {limit})")
    pool = rows
    if ids is not None:
        known = {i for i, _ in rows}
        unknown = [i for i in ids if i not in known]
        if unknown or not ids:
            raise FrameInputError(
                "--instances", f"not an instance of the release: {', '.join(unknown) or '(none given)'}"
            )
        wanted = set(ids)
        pool = [r for r in rows if r[0] in wanted]
    chosen = _stratified(pool, min(limit, len(pool))) if limit is not None else [i for i, _ in pool]
    if len(chosen) == len(rows):
        return None
    return Subset(tuple(sorted(chosen)), len(rows), limit, ids is not None)
