"""Semantic Scaffold (paper 001 §4): facts, questions and entity attributes extracted once from the gold
report Y, then every generated report R' judged against that fixed reference (FPS, QPS, EPS, F, Fact Focus
and plain coverage beside them). Offline heuristic and LLM extractors and judges; the family class comes last.

Specification (formulas, tiers, heuristics and thresholds, LLM roles, known limits): docs/metrics/scaffold.md.

One module per part: `common` (caps, thresholds, metric names), `extract_offline` / `extract_llm` (the
scaffold of Y), `judge_offline` / `judge_llm` (its checks against R'), `replies` and `numbered` (the LLM
roles' reply shapes and numbered reports), `metrics` (the FPS / QPS / EPS aggregation), `family`
(ScaffoldFamily). Every name of the former single module stays importable from here.
"""

from __future__ import annotations

from tasks.score.scaffold.common import (
    BATCH_ATTRIBUTES,
    BATCH_ITEMS,
    MAX_ATTRIBUTES,
    MAX_FACTS,
    MAX_PROSE_ENTITIES,
    MAX_TERM_ATTRIBUTES,
    MIN_TERM_UNITS,
    OK_THRESHOLD,
    PRESENT_RATIO,
    SCAFFOLD_METRICS,
    SEED,
)
from tasks.score.scaffold.extract_llm import LLMScaffoldExtractor
from tasks.score.scaffold.extract_offline import OfflineScaffoldExtractor
from tasks.score.scaffold.family import SCAFFOLDS_SCHEMA, ScaffoldFamily
from tasks.score.scaffold.judge_llm import LLMScaffoldJudge
from tasks.score.scaffold.judge_offline import OfflineScaffoldJudge
from tasks.score.scaffold.metrics import scaffold_metrics, scaffold_scores
from tasks.score.scaffold.replies import (
    AlignReply,
    EntitiesReply,
    EntityCheckReply,
    FactsReply,
    FaithfulReply,
    FocusReply,
    QuestionsReply,
)

__all__ = [
    "BATCH_ATTRIBUTES",
    "BATCH_ITEMS",
    "LLMScaffoldExtractor",
    "LLMScaffoldJudge",
    "OK_THRESHOLD",
    "OfflineScaffoldExtractor",
    "OfflineScaffoldJudge",
    "scaffold_metrics",
    "scaffold_scores",
    # also re-exported: the other public names of the former single module
    "MAX_ATTRIBUTES",
    "MAX_FACTS",
    "MAX_PROSE_ENTITIES",
    "MAX_TERM_ATTRIBUTES",
    "MIN_TERM_UNITS",
    "PRESENT_RATIO",
    "SCAFFOLD_METRICS",
    "SEED",
    "SCAFFOLDS_SCHEMA",
    "ScaffoldFamily",
    "AlignReply",
    "EntitiesReply",
    "EntityCheckReply",
    "FactsReply",
    "FaithfulReply",
    "FocusReply",
    "QuestionsReply",
]
