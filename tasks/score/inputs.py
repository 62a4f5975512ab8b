"""What the families read of a release: the grounding set of an instance and everything else per instance."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pandas as pd

from schemas.scoring import GroundingText
from tasks.errors import FrameInputError

__all__ = ["available_inputs", "grounding_of"]


@functools.lru_cache(maxsize=4)
def _grounding(release: str, mtime: float) -> dict[str, tuple[GroundingText, ...]]:
    path = Path(release) / "grounding_documents.parquet"
    if not path.is_file():
        raise FrameInputError(path, "missing: not a frame release folder")
    docs = pd.read_parquet(path)
    return {
        str(k): tuple(
            GroundingText(str(r["doc_id"]), str(r.get("title") or r["doc_id"]), str(r["markdown"]))
            for r in g.to_dict("records")
        )
        for k, g in docs.groupby("grounding_set_id")
    }


def grounding_of(release: Path, grounding_set_id: str) -> tuple[GroundingText, ...]:
    """G of one instance, as the release table `grounding_documents` holds it (cached per release file)."""
    path = release / "grounding_documents.parquet"
    return _grounding(str(release.resolve()), path.stat().st_mtime)[grounding_set_id]


def available_inputs(release: Path, instance: dict[str, Any], prepared: dict | None) -> dict[str, Any]:
    """Everything a family may read of one instance besides R' (MetricFamily.inputs keeps what it reads)."""
    return {
        "gold": str(instance["target_markdown"]),
        "sample": str(instance["sample_markdown"]),
        "grounding": grounding_of(release, str(instance["grounding_set_id"])),
        "context": {k: str(instance[k]) for k in ("category", "domain", "t_target")},
        "prepared": prepared,
    }
