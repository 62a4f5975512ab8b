"""ScaffoldFamily: the scaffold metrics as a metric family (offline or LLM extractor and judge, one
scaffold prepared per instance, the scaffolds.parquet output, what each metric does not claim)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from schemas.scaffold import Scaffold
from schemas.scoring import MetricResult
from tasks.score.coverage import OfflineCoverageJudge
from tasks.score.metric import Inputs, JudgeEnv, MetricFamily, MetricSpec, parquet_bytes
from tasks.score.scaffold.common import SCAFFOLD_METRICS
from tasks.score.scaffold.extract_llm import LLMScaffoldExtractor
from tasks.score.scaffold.extract_offline import OfflineScaffoldExtractor
from tasks.score.scaffold.judge_llm import LLMScaffoldJudge
from tasks.score.scaffold.judge_offline import OfflineScaffoldJudge
from tasks.score.scaffold.metrics import scaffold_metrics

_EVIDENCE = {
    "eps": "recall",
    "fact_coverage": "recall",
    "question_coverage": "recall",
    "fact_faithfulness": "support",
    "fact_focus": "support",
}
SCAFFOLDS_SCHEMA = pa.schema(
    [
        pa.field("instance_id", pa.string(), nullable=False),
        pa.field("extractor", pa.string()),
        pa.field("facts", pa.int64()),
        pa.field("questions", pa.int64()),
        pa.field("attributes", pa.int64()),
        pa.field("scaffold_json", pa.string()),  # schemas.scaffold.Scaffold
    ]
)


# What the metric checklist does not hold each metric to (docs/metrics/robustness.md).
_RECALL = (("order", "a recall of Y's scaffold, wherever its facts stand in R'"),)
_PRECISION = (
    ("content", "a precision of R's sentences: a section left out states nothing false"),
    ("order", "each sentence is graded on its own, wherever it stands"),
    ("tables", "a precision: a table left out states nothing false"),
)
_FLOOR = (
    "paper 001's preservation score rewards keeping main items while dropping supporting ones: Y against "
    "itself scores 0, its floor, so no change can lower it"
)
_MAIN_ONLY = (
    "counts main facts only: the lead prose of top-level sections and the aggregate rows of their tables"
    " (tiers follow the layout, docs/metrics/scaffold.md); what the checklist changes mostly lies"
    " elsewhere (the largest section of a 10-Q or a survey opens with a subsection, so it has no lead),"
    " and fact_coverage and supporting_coverage hold the claim for the whole report"
)
_QUESTIONS = (
    "one question per section, answered by its first fact, and one per main aggregate row: a change to the"
    " rest of a section (its tables, its later figures and directions) leaves every question answered"
)
_UNCLAIMED = {
    "fps": tuple((a, _FLOOR) for a in ("figures", "directions", "periods", "content", "order", "tables")),
    "main_coverage": (*_RECALL, *((a, _MAIN_ONLY) for a in ("figures", "directions", "content", "tables"))),
    "question_coverage": (*_RECALL, *((a, _QUESTIONS) for a in ("figures", "directions", "tables"))),
    "fact_faithfulness": _PRECISION,
    "fact_focus": _PRECISION,
}
_UNCLAIMED["qps"] = _UNCLAIMED["fps"]


class ScaffoldFamily(MetricFamily):
    """Semantic scaffold metrics (paper 001): facts, questions and entities of Y, checked in R'."""

    name = "scaffold"
    metrics = tuple(
        MetricSpec(m, evidence=_EVIDENCE.get(m, ""), unclaimed=_UNCLAIMED.get(m, _RECALL))
        for m in SCAFFOLD_METRICS
    )
    reads = frozenset({"gold", "prepared"})
    prepares = True
    summary = "semantic scaffold of the gold report (facts, questions, entities) checked in R'"

    def __init__(self, env: JudgeEnv) -> None:
        super().__init__(env)
        s = env.settings
        if env.offline:
            units = OfflineCoverageJudge(env.embed, env.embedder)
            self.extractor: Any = OfflineScaffoldExtractor(units)
            self.judge: Any = OfflineScaffoldJudge(units, max_sentences=s.max_items, seed=s.seed)
        else:
            self.extractor = LLMScaffoldExtractor(env.client, env.llm)
            self.judge = LLMScaffoldJudge(env.client, env.llm, max_sentences=s.max_items, seed=s.seed)

    def prepare(self, gold: str) -> dict[str, Any]:
        return self.extractor.extract(gold).model_dump(mode="json")

    def score(self, inputs: Inputs) -> list[MetricResult]:
        if inputs.prepared is None:
            raise ValueError("the scaffold family needs the instance's scaffold")
        sc = Scaffold.model_validate(inputs.prepared)
        return scaffold_metrics(sc, self.judge.judge(sc, inputs.generated))

    def prepared_outputs(
        self, prepared: Mapping[str, dict[str, Any]]
    ) -> tuple[dict[str, bytes], dict[str, Any]]:
        rows = [
            {
                "instance_id": iid,
                "extractor": sc.get("extractor", ""),
                "facts": len(sc.get("facts", [])),
                "questions": len(sc.get("questions", [])),
                "attributes": sum(len(e.get("attributes", [])) for e in sc.get("entities", [])),
                "scaffold_json": json.dumps(sc, sort_keys=True),
            }
            for iid, sc in sorted(prepared.items())
        ]
        return {"scaffolds.parquet": parquet_bytes(rows, SCAFFOLDS_SCHEMA)}, {"scaffolds": len(rows)}
