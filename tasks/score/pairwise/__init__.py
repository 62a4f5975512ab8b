"""Pairwise A/B/tie votes between the systems of each instance, asked in both display orders, and a
Bradley-Terry ranking with instance-bootstrap intervals (paper 002 §4.2). Votes come from an LLM judge
(blind) or offline from the other families' metric values. Specification: docs/metrics/pairwise.md.

Modules: `offline` (the metric vote and its judge), `llm` (the blind LLM judge and its reply), `votes`
(the judge protocol, both display orders, an instance's pairs), `ranking` (the Bradley-Terry fit and its
board), `family` (PairwiseFamily). Every name of the former single module stays importable from here.
"""

from __future__ import annotations

from tasks.score.pairwise.family import PAIRWISE_SCHEMA, PairwiseFamily, Values
from tasks.score.pairwise.llm import LLMPairwiseJudge, PairwiseReply
from tasks.score.pairwise.offline import OfflinePairwiseJudge, offline_vote
from tasks.score.pairwise.ranking import BT_ALPHA, BT_COLUMNS, ELO_SCALE, VOTES, bradley_terry, bt_markdown
from tasks.score.pairwise.votes import VOTE_COLUMNS, PairwiseJudge, compare_both_orders, pairwise_instance

__all__ = [
    "BT_ALPHA",
    "BT_COLUMNS",
    "VOTE_COLUMNS",
    "LLMPairwiseJudge",
    "OfflinePairwiseJudge",
    "PairwiseJudge",
    "PairwiseReply",
    "bradley_terry",
    "bt_markdown",
    "compare_both_orders",
    "offline_vote",
    "pairwise_instance",
    # also re-exported: the other public names of the former single module
    "ELO_SCALE",
    "PAIRWISE_SCHEMA",
    "PairwiseFamily",
    "VOTES",
    "Values",
]
