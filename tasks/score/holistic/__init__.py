"""Holistic direct scores 1-10 (paper 001 App. G.7): four axes of a generated report (faithfulness,
completeness, understandability, no hallucination), the saturation baseline shown beside FRAME's metrics.
An offline proxy or an LLM judge rates. Specification, the proxy's formulas and its limits:
docs/metrics/holistic.md.

Modules: `rating` (the axes, the judge protocol, the driver), `offline` (the proxy judge), `llm` (the LLM
judge and its reply), `truncate` (fitting texts into the context window, shared with
``tasks.score.pairwise``), `family` (HolisticFamily). Every name of the former single module stays
importable from here.
"""

from __future__ import annotations

from tasks.score.holistic.family import HolisticFamily
from tasks.score.holistic.llm import GROUNDING_SHARE, MIN_DOC_TOKENS, HolisticReply, LLMHolisticJudge
from tasks.score.holistic.offline import (
    HEADING_MATCH,
    MAX_MEDIAN_WORDS,
    MIN_REPEAT_WORDS,
    OfflineHolisticJudge,
)
from tasks.score.holistic.rating import AXES, HOLISTIC_METRICS, HolisticJudge, holistic
from tasks.score.holistic.truncate import (
    MIN_TEXT_TOKENS,
    NOTE_ALLOWANCE,
    TextsJudge,
    cut_to_tokens,
    prompt_room,
    proportional_caps,
    water_fill,
)
from tasks.score.llm_judge import input_budget

__all__ = [
    "AXES",
    "HolisticJudge",
    "HolisticReply",
    "LLMHolisticJudge",
    "OfflineHolisticJudge",
    "TextsJudge",
    "cut_to_tokens",
    "holistic",
    "input_budget",
    "prompt_room",
    "proportional_caps",
    "water_fill",
    # also re-exported: the other public names of the former single module
    "GROUNDING_SHARE",
    "HEADING_MATCH",
    "HOLISTIC_METRICS",
    "HolisticFamily",
    "MAX_MEDIAN_WORDS",
    "MIN_DOC_TOKENS",
    "MIN_REPEAT_WORDS",
    "MIN_TEXT_TOKENS",
    "NOTE_ALLOWANCE",
]
