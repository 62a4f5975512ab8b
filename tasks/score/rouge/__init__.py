"""ROUGE-L of R' against Y: paper 001's lexical baseline (docs/metrics/rouge.md)."""

from __future__ import annotations

from tasks.score.rouge.family import RougeFamily
from tasks.score.rouge.lcs import rouge_l

__all__ = ["RougeFamily", "rouge_l"]
