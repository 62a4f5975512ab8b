"""The `structure` metric family (SPEC §4, paper 000 §4): structural similarity of two report structure
trees by Algorithm 1 (semantic tree edit distance). Definitions, the DP and its proof sketch:
docs/metrics/structure.md.

One module per part: `flat` (trees numbered in preorder), `algorithm` (the node costs, the polynomial
DP, the literal reference), `batched` (K settings at once, for `frame meta structure`),
`node_similarity` (the embedding node similarity and its projections), `family` (StructureFamily). The
trees come from `tasks.score.tree` (deterministic) and `tasks.score.tree_llm` (the LLM tree judge, the
`score_structure` role), both outside this folder: the first is shared with other packages, the second
is named by its prompt file. Every name of the former single module stays importable from here.
"""

from __future__ import annotations

from tasks.score.structural_similarity.algorithm import literal_cost, structural_cost, structural_similarity
from tasks.score.structural_similarity.batched import batched_similarity
from tasks.score.structural_similarity.family import StructureFamily
from tasks.score.structural_similarity.flat import FlatTree, flatten
from tasks.score.structural_similarity.node_similarity import (
    PROJECTIONS,
    NodeSimilarity,
    make_node_similarity,
    node_fields,
    project_array,
)

__all__ = [
    "PROJECTIONS",
    "project_array",
    "FlatTree",
    "batched_similarity",
    "flatten",
    "literal_cost",
    "make_node_similarity",
    "node_fields",
    "structural_cost",
    "structural_similarity",
]

# the old module's other names, still importable from here
_REEXPORTED = (NodeSimilarity, StructureFamily)
