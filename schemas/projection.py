"""The node-similarity projection's δ and w per embedder (``schemas/projection.toml``), and where they
come from: "calibrated for <embedder>" (benchmarks/calibrate_structure.py), "paper" (paper 000 §4.4.1,
fitted for text-embedding-3-small) or "user" (given to `frame score` / [score]). An embedder without an
entry gets the paper's values, and its source says so. docs/metrics/structure.md, Calibration."""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path
from typing import NamedTuple

from schemas.errors import FrameInputError

__all__ = ["PAPER_DELTA", "PAPER_TYPE_WEIGHT", "PROJECTION_PATH", "Projection", "projection_for"]

PROJECTION_PATH = Path(__file__).resolve().with_name("projection.toml")
PAPER_DELTA = 0.10  # paper 000 §4.4.1, Table 2 (text-embedding-3-small, GPT-5 trees, human rankings)
PAPER_TYPE_WEIGHT = 0.2  # paper 000 §4.4.1, Table 3


class Projection(NamedTuple):
    delta: float
    type_weight: float
    delta_source: str
    type_weight_source: str


@cache
def _entries(path: Path) -> dict[str, dict]:
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FrameInputError(path, "projection file not found") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise FrameInputError(path, f"not valid TOML ({str(exc).splitlines()[0]})") from None
    entries = raw.get("embedders", {})
    for name, entry in entries.items():
        for key in ("delta", "type_weight"):
            value = entry.get(key)
            if not isinstance(value, int | float) or isinstance(value, bool) or not 0 < value <= 1:
                raise FrameInputError(
                    path, f"embedders.{name} field {key}: a number in (0, 1] (got {value!r})"
                )
        for key in ("delta_source", "type_weight_source"):
            if entry.get(key) not in ("calibrated", "paper"):
                raise FrameInputError(path, f"embedders.{name} field {key}: 'calibrated' or 'paper'")
    return entries


def projection_for(embedder: str, path: Path | None = None) -> Projection:
    """δ, w and their sources for `embedder` (a ScoreSettings.embedder: "minilm", "openai:<model>")."""
    entry = _entries(Path(path or PROJECTION_PATH)).get(embedder)
    if entry is None:
        fallback = f"paper (no calibration for {embedder})"
        return Projection(PAPER_DELTA, PAPER_TYPE_WEIGHT, fallback, fallback)

    def source(key: str) -> str:
        return f"calibrated for {embedder}" if entry[key] == "calibrated" else "paper"

    return Projection(
        float(entry["delta"]),
        float(entry["type_weight"]),
        source("delta_source"),
        source("type_weight_source"),
    )
