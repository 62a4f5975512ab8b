"""Faithfulness (paper 000 §4.3): how well the grounding documents G support the claims of a generated
report R'.

`faithfulness` samples R's claims, checks them for direct support (stage 1) and sends the weak ones to
entailment (stage 2); `OfflineFaithfulnessJudge` (figures and embeddings, deterministic) and
`LLMFaithfulnessJudge` are the two judges. Formulas, heuristics, thresholds and limits:
docs/metrics/faithfulness.md. Modules: `claims` (extraction), `ground` (evidence retrieval), `offline`
and `llm` (the judges), `aggregate` (the driver and the family), `params`, `items`.
"""

from __future__ import annotations

from tasks.score.faithfulness.aggregate import PRECISION_UNCLAIMED, FaithfulnessFamily, faithfulness
from tasks.score.faithfulness.claims import claim_figures, claims_of, report_chunks
from tasks.score.faithfulness.llm import (
    ClaimOut,
    ClaimsReply,
    LLMFaithfulnessJudge,
    Verdict,
    VerdictsReply,
)
from tasks.score.faithfulness.offline import OfflineFaithfulnessJudge
from tasks.score.faithfulness.params import (
    BATCH_CLAIMS,
    BM25_K,
    CLAIM_TOKENS,
    CLAIMS_KEPT,
    COMMON_MIN,
    COMMON_SHARE,
    DERIVE_POOL,
    EVIDENCE_CHARS,
    GROUND_CACHE,
    GROUND_CACHE_CHARS,
    MIN_EVIDENCE,
    MIN_WORDS,
    MORE_K,
    NOTE_WORDS,
    NUM_K,
    NUMBER_RAMP,
    PROSE_RAMP,
    REFS_SHOWN,
    SPECIFIC_DIGITS,
    UNIT_K,
    VERBATIM_MIN_CHARS,
    VERDICT_TOKENS,
    WIDE_DIGITS,
)

__all__ = [
    "BATCH_CLAIMS",
    "LLMFaithfulnessJudge",
    "OfflineFaithfulnessJudge",
    "claim_figures",
    "claims_of",
    "faithfulness",
    "report_chunks",
]

# the old module's other public names, still importable from here
_REEXPORTED = (
    PRECISION_UNCLAIMED,
    FaithfulnessFamily,
    ClaimOut,
    ClaimsReply,
    Verdict,
    VerdictsReply,
    BM25_K,
    CLAIM_TOKENS,
    CLAIMS_KEPT,
    COMMON_MIN,
    COMMON_SHARE,
    DERIVE_POOL,
    EVIDENCE_CHARS,
    GROUND_CACHE,
    GROUND_CACHE_CHARS,
    MIN_EVIDENCE,
    MIN_WORDS,
    MORE_K,
    NOTE_WORDS,
    NUM_K,
    NUMBER_RAMP,
    PROSE_RAMP,
    REFS_SHOWN,
    SPECIFIC_DIGITS,
    UNIT_K,
    VERBATIM_MIN_CHARS,
    VERDICT_TOKENS,
    WIDE_DIGITS,
)
