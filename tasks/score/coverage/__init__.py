"""Coverage (paper 000 §4.2): information-unit recall of a generated report R' against the gold report Y.

`coverage` samples Y's units and averages their grades; `OfflineCoverageJudge` (number-aware embedding
match, deterministic) and `LLMCoverageJudge` (the paper's extractor and grader) are the two judges.
Formulas, heuristics, thresholds and limits: docs/metrics/coverage.md. Modules: `units` (what a unit of
Y is, offline), `offline` and `llm` (the judges), `replies` (the LLM roles' reply shapes), `family` (the
driver and the family). Every name of the former single module stays importable from here.
"""

from __future__ import annotations

from tasks.score.coverage.family import RECALL_UNCLAIMED, CoverageFamily, coverage
from tasks.score.coverage.llm import BATCH_UNITS, LLMCoverageJudge
from tasks.score.coverage.offline import NUMBER_RAMP, PLANS_KEPT, PROSE_RAMP, OfflineCoverageJudge
from tasks.score.coverage.replies import CoverageReply, UnitsReply
from tasks.score.coverage.units import MIN_WORDS

__all__ = [
    "BATCH_UNITS",
    "LLMCoverageJudge",
    "OfflineCoverageJudge",
    "coverage",
]

# the old module's other public names, still importable from here
_REEXPORTED = (
    RECALL_UNCLAIMED,
    CoverageFamily,
    NUMBER_RAMP,
    PLANS_KEPT,
    PROSE_RAMP,
    CoverageReply,
    UnitsReply,
    MIN_WORDS,
)
