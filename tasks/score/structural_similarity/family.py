"""The `structure` metric family: Algorithm 1 over the structure trees of Y and R', deterministic
(`tasks.score.tree`) or LLM-extracted (`tasks.score.tree_llm`)."""

from __future__ import annotations

from typing import Any

from schemas.scoring import MetricResult
from tasks.score.metric import Inputs, JudgeEnv, MetricFamily, MetricSpec
from tasks.score.structural_similarity.algorithm import structural_similarity
from tasks.score.structural_similarity.flat import flatten
from tasks.score.structural_similarity.node_similarity import make_node_similarity, node_fields
from tasks.score.tree import report_tree, tree_size

__all__ = ["StructureFamily"]


_NOT_FIGURES = "compares the tree of sections, tables and lists by type, heading and opening words: what the"
_NOT_FIGURES += " figures say is coverage's and faithfulness'"
_ONE_NODE = "a table is one node of the tree (paper 000 §4.1), and removing it costs one deletion over the"
_ONE_NODE += " two trees' sizes (|T1| + |T2|): under 0.05 once the trees hold more than 10 nodes each"
_UNCLAIMED = (  # docs/metrics/robustness.md
    *((aspect, _NOT_FIGURES) for aspect in ("figures", "directions", "periods")),
    ("tables", _ONE_NODE),
)


class StructureFamily(MetricFamily):
    """Structural similarity of R' to Y: Algorithm 1 over both reports' structure trees."""

    name = "structure"
    metrics = (MetricSpec("structure", group="frame", unclaimed=_UNCLAIMED),)
    reads = frozenset({"gold"})
    summary = "structural similarity of the two reports' section trees (semantic tree edit, Algorithm 1)"

    def __init__(self, env: JudgeEnv) -> None:
        super().__init__(env)
        s = env.settings
        self.similarity = make_node_similarity(
            env.embed, w=s.type_weight, proj=s.proj, delta=s.delta, n=s.power_n
        )
        self.tree_judge = None
        if s.tree == "llm":
            from tasks.score.tree_llm import TreeJudge

            self.tree_judge = TreeJudge(env.client, env.llm)
            self.builder = f"llm:{env.llm.model if env.llm else ''}"
            self.judge = f"llm-tree:{env.llm.model if env.llm else ''}+{env.embedder}"
        else:
            self.builder = s.tree
            self.judge = f"{s.tree}-tree+{env.embedder}"

    def tree(self, markdown: str) -> dict[str, Any]:
        if self.tree_judge is not None:
            return self.tree_judge.tree(markdown)[0]
        return report_tree(markdown)

    def embeds_ahead(self) -> bool:
        return self.tree_judge is None  # LLM trees come from LLM calls: left to the concurrent score tasks

    def embedding_texts(self, inputs: Inputs) -> list[str]:
        if not self.embeds_ahead():
            return []
        nodes = [*flatten(self.tree(inputs.gold)).objs, *flatten(self.tree(inputs.generated)).objs]
        return [text for node in nodes for text in node_fields(node)]

    def score(self, inputs: Inputs) -> list[MetricResult]:
        a, b = self.tree(inputs.gold), self.tree(inputs.generated)
        value = structural_similarity(a, b, self.similarity, gamma=self.env.settings.gamma)
        s = self.env.settings
        detail = {"gold_nodes": tree_size(a), "generated_nodes": tree_size(b), "proj": s.proj}
        # the node similarity's parameters and where they came from (calibrated / paper / user)
        detail |= {"delta": s.delta, "delta_source": s.delta_source}
        detail |= {"type_weight": s.type_weight, "type_weight_source": s.type_weight_source}
        detail |= {"tree": self.builder, "embedder": self.env.embedder}  # who built the trees, who embeds
        return [MetricResult(metric="structure", value=float(value), judge=self.judge, detail=detail)]
