"""Aggregation: `faithfulness` (sample R's claims, stage 1 for all, stage 2 for the weak ones, the mean)
and the metric family that runs it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from schemas.scoring import Claim, GroundingText, ItemScore, MetricResult
from tasks.score.faithfulness.llm import LLMFaithfulnessJudge
from tasks.score.faithfulness.offline import OfflineFaithfulnessJudge
from tasks.score.judges import (
    MAX_ITEMS,
    SUPPORT_THRESHOLD,
    FaithfulnessJudge,
    SampledFamily,
    sample_by_text,
)
from tasks.score.metric import Inputs, MetricSpec


def _below(first: Sequence[ItemScore], threshold: float) -> list[int]:
    """Indices of the stage-1 items that go to stage 2."""
    return [i for i, it in enumerate(first) if it.score < threshold]


def _claim_text(c: Claim) -> str:
    return c.content


def faithfulness(
    generated_md: str,
    grounding: Sequence[GroundingText],
    judge: FaithfulnessJudge,
    *,
    threshold: float = SUPPORT_THRESHOLD,
    max_items: int = MAX_ITEMS,
    seed: int = 0,
) -> MetricResult:
    """Faithfulness of `generated_md` against `grounding` (docs/metrics/faithfulness.md)."""
    claims = judge.extract_claims(generated_md)
    base: dict[str, Any] = {"max_items": max_items, "seed": seed, "threshold": threshold}
    if not claims:
        why = "the generated report has no checkable claim (no sentence, list item or table row)"
        return MetricResult.undefined("faithfulness", judge.name, why, **base, stage2=0)
    sample = sample_by_text(claims, _claim_text, max_items, seed)
    first = judge.verify(sample, grounding)
    if [it.index for it in first] != [c.claim_id for c in sample]:
        raise ValueError(f"{judge.name}: verify returned items for other claims than the sample")
    low = _below(first, threshold)
    final = list(first)
    if low:
        second = judge.entail([sample[i] for i in low], [first[i] for i in low], grounding)
        if [it.index for it in second] != [sample[i].claim_id for i in low]:
            raise ValueError(
                f"{judge.name}: entail returned items for other claims than the ones below threshold"
            )
        for i, it in zip(low, second, strict=True):
            s1 = first[i]
            final[i] = it.model_copy(
                update={
                    "stage": 2,
                    "rationale": f"stage 1 score {s1.score:.3f} ({s1.rationale}); {it.rationale}".strip(),
                }
            )
    scores = [it.score for it in final]
    detail = {
        **base,
        "sampled": len(sample),
        "stage2": len(low),
        "stage1_mean": round(float(np.mean([it.score for it in first])), 6),
        "raised_in_stage2": sum(1 for i in low if final[i].score > first[i].score),
        # stage 2's score is kept when lower too (docs/metrics/faithfulness.md, "Which stage's score counts")
        "lowered_in_stage2": sum(1 for i in low if final[i].score < first[i].score),
        "supported": sum(1 for s in scores if s >= threshold),
    }
    for attr in ("prompt_sha256",):
        if hasattr(judge, attr):
            detail[attr] = dict(getattr(judge, attr))
    return MetricResult(
        metric="faithfulness",
        value=round(float(np.mean(scores)), 6),
        judge=judge.name,
        population=len(claims),
        items=final,
        detail=detail,
    )


# ---------------------------------------------------------------- the family


# what the metric checklist does not hold a precision to (docs/metrics/robustness.md)
PRECISION_UNCLAIMED = (
    ("content", "a precision of R's claims: a section left out states nothing false (that is coverage's)"),
    ("order", "each claim is checked on its own, wherever it stands"),
    ("tables", "a precision: a table left out states nothing false"),
)


class FaithfulnessFamily(
    SampledFamily,
    metric=MetricSpec("faithfulness", group="frame", evidence="support", unclaimed=PRECISION_UNCLAIMED),
    reads="grounding",  # G, not Y: a claim of R' is checked against the grounding documents
    judges=(OfflineFaithfulnessJudge, LLMFaithfulnessJudge),
):
    """Claim support: share of the sampled claims of R' that the grounding documents support."""

    def measure(self, inputs: Inputs, *, max_items: int, seed: int) -> MetricResult:
        return faithfulness(inputs.generated, inputs.grounding, self.judge, max_items=max_items, seed=seed)

    def embeds_ahead(self) -> bool:
        return isinstance(self.judge, OfflineFaithfulnessJudge)  # the LLM judge embeds nothing

    def embedding_texts(self, inputs: Inputs) -> list[str]:
        if not self.embeds_ahead():
            return []
        return self.judge.embedding_texts(self._sample(inputs), inputs.grounding)

    def embed_ahead(self, inputs: Sequence[Inputs]) -> int:
        """Stage 1's texts of every input in one batch, then stage 2's: its windows depend on stage 1's
        cosines, which the first batch makes cheap to compute (the analyses stay memoised for the score
        tasks)."""
        n = super().embed_ahead(inputs)
        if not n:
            return n
        texts: dict[str, None] = {}
        for x in reversed(list(inputs)):
            sample = self._sample(x)
            if not sample:
                continue
            first = self.judge.verify(sample, x.grounding)
            low = _below(first, SUPPORT_THRESHOLD)
            if low:
                later = self.judge.entail_texts(
                    [sample[i] for i in low], [first[i] for i in low], x.grounding
                )
                texts.update(dict.fromkeys(later))
        if texts:
            self.env.embed(list(texts))
        return n + len(texts)

    def _sample(self, inputs: Inputs) -> list[Claim]:
        """The claims `measure(inputs)` grades (the same extraction and seeded sample)."""
        claims = self.judge.extract_claims(inputs.generated)
        return sample_by_text(claims, _claim_text, self.env.settings.max_items, inputs.seed)
