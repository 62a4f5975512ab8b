"""`frame score --dry-run` counts the requests of an LLM-judged family added since, without an edit to the
estimator: it runs the family's own scoring code with its judges' `ask` counted (tasks/score/estimate.py).

The toy family asks its judge once per paragraph of R' ("is this paragraph on topic?"); the oracle counts
the distinct paragraphs of the reports scored, read here from the release."""

from __future__ import annotations

import pandas as pd
import pytest
from pydantic import BaseModel, Field

from schemas.config import LLMSettings
from schemas.scoring import MetricResult, ScoreSettings
from tasks.llm.prompts import parse_prompt
from tasks.score import registry
from tasks.score.estimate import estimate_score
from tasks.score.judges import SampledFamily
from tasks.score.llm_judge import LLMJudge
from tasks.score.metric import Inputs, MetricSpec

PROMPT = """---system---
You judge whether a paragraph stays on the report's topic.
---user---
Paragraph:
{{paragraph}}

Answer {"on_topic": true|false, "why": "..."}.
"""


class TopicReply(BaseModel):
    on_topic: bool
    why: str = Field(min_length=1)


class LLMTopicJudge(LLMJudge):
    def __init__(self, client, settings) -> None:
        super().__init__(client, settings)
        self.prompts["score_toy_topic"] = parse_prompt("score_toy_topic", PROMPT)

    def on_topic(self, report: str) -> float:
        paragraphs = _paragraphs(report)
        votes = [self.ask("score_toy_topic", TopicReply, paragraph=p).value.on_topic for p in paragraphs]
        return sum(votes) / len(votes) if votes else 0.0


class OfflineTopicJudge:
    def __init__(self, embed, name) -> None:
        pass

    def on_topic(self, report: str) -> float:
        return 1.0


class TopicFamily(
    SampledFamily,
    metric=MetricSpec("toy_topic", evidence="precision"),
    reads="gold",
    judges=(OfflineTopicJudge, LLMTopicJudge),
):
    """Share of R's paragraphs an LLM finds on topic (a toy)."""

    def measure(self, inputs: Inputs, *, max_items: int, seed: int) -> MetricResult:
        return MetricResult(metric="toy_topic", value=self.judge.on_topic(inputs.generated), judge="toy")


def _paragraphs(text: str) -> list[str]:
    return [p.strip() for p in text.split("\n\n") if p.strip()]


@pytest.fixture
def toy_llm_family():
    registry.register(TopicFamily)
    yield TopicFamily
    registry.unregister("toy_topic")


def test_a_new_llm_family_is_counted_by_the_dry_run(toy_llm_family, demo_release):
    judge = LLMSettings(backend="openai", base_url="http://127.0.0.1:9/v1", model="m", context_tokens=32000)
    est = estimate_score(
        demo_release,
        {"gold": None, "copy-sample": None},
        judge,
        ["toy_topic"],
        ScoreSettings(judge="openai"),
    )
    rows = {r.role: r for r in est.rows}
    instances = pd.read_parquet(demo_release / "instances.parquet")
    # gold scores Y, copy-sample scores S: one request per distinct paragraph (the cache answers repeats)
    distinct = {
        p for col in ("target_markdown", "sample_markdown") for t in instances[col] for p in _paragraphs(t)
    }
    assert rows["score_toy_topic"].requests == len(distinct)
    assert rows["score_toy_topic"].input_tokens > len(distinct) * 20  # the prompt around each paragraph
    assert rows["score_toy_topic"].output_tokens > 0  # the smallest reply its schema allows, counted
