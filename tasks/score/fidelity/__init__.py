"""Table and text fidelity of a generated report against the gold report (SPEC §5, paper 002 §4.1): TEDS
and TEDS-S over one-to-one matched pipe tables, and the normalised edit distance of the whole texts.
Definitions: docs/metrics/tables.md and docs/metrics/text_edit_distance.md.

Modules: `matching` (the tables' candidate scores and Hungarian matching), `text` (the edit distance),
`family` (TablesFamily, TextEditDistanceFamily and the tables' evidence items). Every name of the former
single module stays importable from here.
"""

from __future__ import annotations

from tasks.score.fidelity.family import TablesFamily, TextEditDistanceFamily, table_items
from tasks.score.fidelity.matching import (
    MATCH_THRESHOLD,
    WEIGHTS,
    TableFidelity,
    TableMatch,
    candidate_scores,
    markdown_tables,
    table_fidelity,
)
from tasks.score.fidelity.text import normalise_text, text_edit_distance

__all__ = [
    "MATCH_THRESHOLD",
    "TableMatch",
    "TableFidelity",
    "candidate_scores",
    "markdown_tables",
    "normalise_text",
    "table_fidelity",
    "text_edit_distance",
    # also re-exported: the other public names of the former single module
    "WEIGHTS",
    "TablesFamily",
    "TextEditDistanceFamily",
    "table_items",
]
