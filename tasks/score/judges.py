"""What coverage and faithfulness judges must offer (offline or LLM, chosen once per family), and the
seeded sampling of units and claims both metrics share."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Protocol, TypeVar

import numpy as np

from schemas.scoring import Claim, GroundingText, InfoUnit, ItemScore, MetricResult
from tasks.score.metric import Inputs, JudgeEnv, MetricFamily, MetricSpec

__all__ = [
    "SampledFamily",
    "CoverageJudge",
    "EmbedFn",
    "FaithfulnessJudge",
    "MAX_ITEMS",
    "SUPPORT_THRESHOLD",
    "judge_for",
    "sample_items",
]

SUPPORT_THRESHOLD = 0.75  # paper 000 §4.3: claims scoring below go to the deeper stage
MAX_ITEMS = 100  # paper 000 §4.2/4.3: 100 sampled units / claims per report

# texts -> float32 array (len(texts), dim) with L2-normalised rows (tasks.score.embed.make_embed_fn)
EmbedFn = Callable[[Sequence[str]], np.ndarray]

T = TypeVar("T")


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

    def verify(self, claims: Sequence[Claim], grounding: Sequence[GroundingText]) -> list[ItemScore]:
        """Stage 1, direct support from explicit evidence: one ItemScore per claim (stage=1)."""

    def entail(
        self, claims: Sequence[Claim], stage1: Sequence[ItemScore], grounding: Sequence[GroundingText]
    ) -> list[ItemScore]:
        """Stage 2 for the claims given (those below SUPPORT_THRESHOLD): entailment under reasonable
        assumptions, arithmetic from stated figures included; one ItemScore per claim (stage=2)."""


def judge_for(env: JudgeEnv, offline: Callable[[EmbedFn, str], Any], llm: Callable[..., Any]) -> Any:
    """The offline judge (on the env's embedder) or, with the openai judge, the LLM one (on its client)."""
    return offline(env.embed, env.embedder) if env.offline else llm(env.client, env.llm)


class SampledFamily(MetricFamily):
    """A one-metric family graded on a seeded sample of items by an offline or an LLM judge.

    Declared with class keywords: ``class CoverageFamily(SampledFamily, metric=MetricSpec(...),
    reads="gold", judges=(OfflineJudge, LLMJudge))``; the subclass writes `measure`."""

    offline_judge: ClassVar[Callable[[EmbedFn, str], Any]]
    llm_judge: ClassVar[Callable[..., Any]]

    def __init_subclass__(
        cls,
        *,
        metric: MetricSpec | None = None,
        reads: str | None = None,
        judges: tuple[Callable[[EmbedFn, str], Any], Callable[..., Any]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init_subclass__(**kwargs)
        if metric is not None:
            cls.name, cls.metrics = metric.name, (metric,)
        if reads is not None:
            cls.reads = frozenset({reads})
        if judges is not None:
            cls.offline_judge, cls.llm_judge = judges

    def __init__(self, env: JudgeEnv) -> None:
        super().__init__(env)
        self.judge = judge_for(env, type(self).offline_judge, type(self).llm_judge)

    def score(self, inputs: Inputs) -> list[MetricResult]:
        return [self.measure(inputs, max_items=self.env.settings.max_items, seed=inputs.seed)]

    def measure(self, inputs: Inputs, *, max_items: int, seed: int) -> MetricResult:
        """The metric of one (instance, system) on `max_items` items sampled with `seed`."""
        raise NotImplementedError


def sample_items(population: Sequence[T], k: int = MAX_ITEMS, seed: int = 0) -> list[T]:
    """Up to `k` items drawn without replacement with a seeded RNG, returned in population order.

    The same (population, k, seed) always gives the same sample, so every system of an instance is
    graded on the same gold units.
    """
    if len(population) <= k:
        return list(population)
    picked = sorted(random.Random(seed).sample(range(len(population)), k))
    return [population[i] for i in picked]


def sample_by_text(
    population: Sequence[T], text: Callable[[T], str], k: int = MAX_ITEMS, seed: int = 0
) -> list[T]:
    """Up to `k` items, in population order, chosen by a seeded hash of each item's text (ties by position).

    For items of the generated report R' (its claims or sentences): whether one is graded depends on what
    it says, not on where it stands, so the same text re-paragraphed (or a section moved) is graded on the
    same sentences; `sample_items` by position would draw a new sample.
    """
    if len(population) <= k:
        return list(population)

    def rank(i: int) -> tuple[bytes, int]:
        key = " ".join(text(population[i]).split()).encode("utf-8")
        return hashlib.blake2b(key, digest_size=8, key=str(seed).encode("ascii")[:64]).digest(), i

    picked = sorted(sorted(range(len(population)), key=rank)[:k])
    return [population[i] for i in picked]
