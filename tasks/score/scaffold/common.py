"""Settings and small helpers the scaffold's extractors, judges and metrics share: the caps, thresholds and
batch sizes of docs/metrics/scaffold.md, the nine metric names, name normalisation, attribute renumbering
and the facts Fact Focus counts."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable

from schemas.scaffold import Scaffold, ScaffoldAttribute, ScaffoldEntity, ScaffoldFact

OK_THRESHOLD = 0.5  # offline: a graded score at or above this counts as inferable / answerable / preserved
MAX_FACTS = 400  # offline facts cap (seeded sample); demo reports have at most ~230 units
MAX_ATTRIBUTES = 300  # offline attribute cap over all entities (seeded sample)
MAX_PROSE_ENTITIES = 40
MAX_TERM_ATTRIBUTES = 6  # unit sentences kept per prose entity
MIN_TERM_UNITS = 2  # a prose term is salient when this many units mention it
PRESENT_RATIO = 90  # rapidfuzz partial ratio for "the entity name is in R'"
BATCH_ITEMS = 30  # facts / questions / R' sentences per LLM request
BATCH_ATTRIBUTES = 60  # attributes per score_scaffold_entity_check request
SEED = 0
# paper 001 §4: one extraction from Y per instance, one judgment per system, all nine values from it.
# Main and supporting coverage are shown beside FPS, never replaced by it.
SCAFFOLD_METRICS: tuple[str, ...] = (
    "fps",
    "qps",
    "eps",
    "fact_faithfulness",  # F: share of R' sentences supported by Y
    "fact_focus",  # F. Focus (001 Table 7): share of R' sentences aligned to a main or supporting fact
    "fact_coverage",  # FC: share of scaffold facts (main + supporting) inferable from R'
    "question_coverage",  # QC: share of scaffold questions answerable from R'
    "main_coverage",  # M_s / M_c
    "supporting_coverage",  # S_s / S_c
)


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


def _renumbered(
    entities: Iterable[ScaffoldEntity], keep: Callable[[ScaffoldAttribute], bool] = lambda a: True
) -> list[ScaffoldEntity]:
    """The entities with their kept attributes numbered 1, 2, ... across all of them; an entity left
    without attributes is dropped."""
    ids = itertools.count(1)
    out: list[ScaffoldEntity] = []
    for e in entities:
        attrs = [a.model_copy(update={"id": next(ids)}) for a in e.attributes if keep(a)]
        if attrs:
            out.append(e.model_copy(update={"attributes": attrs}))
    return out


def _focus_facts(scaffold: Scaffold) -> list[ScaffoldFact]:
    """The facts Fact Focus aligns R' sentences to: main and supporting ("other" never counts, 001 G.1)."""
    return [f for f in scaffold.facts if f.tier != "other"]
