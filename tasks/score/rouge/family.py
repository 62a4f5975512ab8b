"""RougeFamily: ROUGE-L F1 of R' against Y, with its precision and recall kept in the detail."""

from __future__ import annotations

from schemas.scoring import MetricResult
from tasks.score.metric import Inputs, MetricFamily, MetricSpec
from tasks.score.rouge.lcs import rouge_l

_TOKENS = (
    "a token overlap of the whole texts: a changed figure or word is one token of thousands, a whole-word"
    " change of direction or period keeps every other token in sequence, and a table counts by its tokens"
)
_UNCLAIMED = tuple((a, _TOKENS) for a in ("figures", "directions", "periods", "tables"))


class RougeFamily(MetricFamily):
    """ROUGE-L F1 of R' against Y (paper 001's lexical baseline); higher is better."""

    name = "rouge"
    metrics = (MetricSpec("rouge_l", group="lexical", unclaimed=_UNCLAIMED),)
    reads = frozenset({"gold"})
    summary = "ROUGE-L F1 of R' against Y: longest common token subsequence (paper 001's lexical baseline)"

    def score(self, inputs: Inputs) -> list[MetricResult]:
        r = rouge_l(inputs.gold, inputs.generated)
        detail = {
            "precision": round(r.precision, 6),
            "recall": round(r.recall, 6),
            "lcs_tokens": r.lcs,
            "generated_tokens": r.generated_tokens,
            "gold_tokens": r.gold_tokens,
        }
        return [MetricResult(metric="rouge_l", value=r.f1, judge="deterministic", detail=detail)]
