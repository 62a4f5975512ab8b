"""PairwiseFamily: the votes between the systems of each instance and the files of their Bradley-Terry
fit (the vote table, the board as CSV and Markdown)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
import pyarrow as pa

from tasks.score.metric import ComparisonFamily, JudgeEnv, parquet_bytes
from tasks.score.pairwise.llm import LLMPairwiseJudge
from tasks.score.pairwise.offline import OfflinePairwiseJudge
from tasks.score.pairwise.ranking import bradley_terry, bt_markdown
from tasks.score.pairwise.votes import PairwiseJudge, pairwise_instance

Values = Mapping[str, Mapping[str, float | None]]  # metric values by system, then metric

PAIRWISE_SCHEMA = pa.schema(
    [
        pa.field("instance_id", pa.string(), nullable=False),
        pa.field("system_a", pa.string(), nullable=False),  # canonical order: sorted names
        pa.field("system_b", pa.string(), nullable=False),
        pa.field("order", pa.string(), nullable=False),  # "ab": A shown first, "ba": B shown first
        pa.field("raw_vote", pa.string()),  # as displayed: "1" | "2" | "tie"
        pa.field("vote", pa.string(), nullable=False),  # canonical: "A" | "B" | "tie"
        pa.field("judge", pa.string()),
        pa.field("rationale", pa.string()),
    ]
)


class PairwiseFamily(ComparisonFamily):
    """A/B/tie votes between the systems of each instance (both display orders) and a Bradley-Terry fit.

    Offline the vote is the majority of the other families' metric values (no judge call); with an LLM
    judge each instance is one cached task."""

    name = "pairwise"
    summary = "pairwise A/B/tie votes between systems and a Bradley-Terry ranking"
    default_families = ("structure", "coverage", "faithfulness")  # the offline votes use these

    def __init__(self, env: JudgeEnv) -> None:
        super().__init__(env)
        self.judge = None if env.offline else LLMPairwiseJudge(env.client, env.llm)

    def in_flow(self) -> bool:
        return self.judge is None

    def compare(self, instance_id: str, gold: str, reports: Mapping[str, str], values: Values) -> list[dict]:
        judge: PairwiseJudge = self.judge or OfflinePairwiseJudge(values)
        return pairwise_instance(instance_id, sorted(reports), gold, reports, judge)

    def outputs(
        self, rows: list[dict[str, Any]], systems: list[str]
    ) -> tuple[dict[str, bytes], dict[str, Any]]:
        if not rows:
            return {}, {}
        s = self.env.settings
        votes = pd.DataFrame(rows)
        bt = bradley_terry(votes, systems, n_boot=min(s.bootstrap, 1000), seed=s.seed)
        files = {
            "pairwise.parquet": parquet_bytes(votes.to_dict("records"), PAIRWISE_SCHEMA),
            "bradley_terry.csv": bt.to_csv(index=False).encode("utf-8"),
            "bradley_terry.md": bt_markdown(bt).encode("utf-8"),
        }
        judges = sorted(votes["judge"].astype(str).unique())
        return files, {"pairwise": {"votes": len(votes), "judges": judges}}
