"""The contracts of coverage and faithfulness judges, and the seeded sampling both metrics share.

A judge is either offline (deterministic, documented: `tasks.score.coverage.OfflineCoverageJudge`,
`tasks.score.faithfulness.OfflineFaithfulnessJudge`) or an LLM behind an OpenAI-compatible endpoint
(`LLMCoverageJudge`, `LLMFaithfulnessJudge` in the same modules). The metric drivers
(`tasks.score.coverage.coverage`, `tasks.score.faithfulness.faithfulness`) only talk to these protocols.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol, TypeVar

import numpy as np

from schemas.scoring import Claim, InfoUnit, ItemScore

__all__ = [
    "CoverageJudge",
    "EmbedFn",
    "FaithfulnessJudge",
    "GroundingDoc",
    "SUPPORT_THRESHOLD",
    "sample_items",
]

SUPPORT_THRESHOLD = 0.75  # paper 000 §4.3: claims scoring below go to the deeper stage
MAX_ITEMS = 100  # paper 000 §4.2/4.3: 100 sampled units / claims per report

# texts -> float32 array (len(texts), dim) with L2-normalised rows (tasks.score.embed.make_embed_fn)
EmbedFn = Callable[[Sequence[str]], np.ndarray]

T = TypeVar("T")


class GroundingDoc(NamedTuple):
    """One grounding document of G, as in the release table `grounding_documents`."""

    doc_id: str
    title: str
    markdown: str


class CoverageJudge(Protocol):
    name: str  # recorded as the judge of every score, e.g. "offline:number-aware+all-MiniLM-L6-v2"

    def extract_units(self, gold_markdown: str) -> list[InfoUnit]:
        """All information units of the gold report, unit_id = position (deterministic for a given input)."""

    def grade(self, units: Sequence[InfoUnit], generated_markdown: str) -> list[ItemScore]:
        """One ItemScore per unit (same order, index = unit_id): how well R' covers it, in [0, 1]."""


class FaithfulnessJudge(Protocol):
    name: str

    def extract_claims(self, generated_markdown: str) -> list[Claim]:
        """All checkable claims of the generated report, claim_id = position."""

    def verify(self, claims: Sequence[Claim], grounding: Sequence[GroundingDoc]) -> list[ItemScore]:
        """Stage 1, direct support from explicit evidence: one ItemScore per claim (stage=1)."""

    def entail(
        self, claims: Sequence[Claim], stage1: Sequence[ItemScore], grounding: Sequence[GroundingDoc]
    ) -> list[ItemScore]:
        """Stage 2 for the claims given (those below SUPPORT_THRESHOLD): entailment under reasonable
        assumptions, arithmetic from stated figures included; one ItemScore per claim (stage=2)."""


def sample_items(population: Sequence[T], k: int = MAX_ITEMS, seed: int = 0) -> list[T]:
    """Up to `k` items drawn without replacement with a seeded RNG, returned in population order.

    The same (population, k, seed) always gives the same sample, so every system of an instance is
    graded on the same gold units.
    """
    if len(population) <= k:
        return list(population)
    picked = sorted(random.Random(seed).sample(range(len(population)), k))
    return [population[i] for i in picked]
