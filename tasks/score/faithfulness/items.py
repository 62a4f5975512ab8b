"""The evidence item of a claim, as both judges write it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from schemas.scoring import Claim, ItemScore
from tasks.score.faithfulness.params import EVIDENCE_CHARS


def _trim(text: str, anchor: str = "", limit: int = EVIDENCE_CHARS) -> str:
    """`text` whole when short, else a `limit`-character window around `anchor` (or the start), marked."""
    text = text.strip()
    if len(text) <= limit:
        return text
    pos = text.find(anchor.strip()) if anchor.strip() else -1
    if pos < 0:
        return text[:limit].rstrip() + " …"
    centre = pos + min(len(anchor.strip()), limit) // 2
    start = max(0, min(centre - limit // 2, len(text) - limit))
    end = start + limit
    return ("… " if start > 0 else "") + text[start:end].strip() + (" …" if end < len(text) else "")


def _item(claim: Claim, score: float, stage: int, **more: Any) -> ItemScore:
    """The evidence item of a claim."""
    return ItemScore(
        index=claim.claim_id,
        kind="claim",
        text=claim.content,
        source=claim.source_sentence,
        score=score,
        stage=stage,
        **more,
    )


def _paired(claims: Sequence[Claim], stage1: Sequence[ItemScore]) -> tuple[list[Claim], list[ItemScore]]:
    """The claims of stage 2 with their stage-1 items (as many of each)."""
    if len(claims) != len(stage1):
        raise ValueError(f"entail: {len(claims)} claims but {len(stage1)} stage-1 items")
    return list(claims), list(stage1)
