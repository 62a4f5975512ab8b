"""`frame qa gold`, questions part (issue 34, point 2): guiding questions and section titles of a report
structure that name entities absent from the report's own snapshot G.

A form-restricted structure keeps the earlier edition's form, never its subjects: the questions of
snapshot t+1 are about the documents of t+1. For every report structure of a release
(`structures.parquet`), every node title and guiding question is read with
`tasks.markdown.entities` (quoted titles, proper names by spelling, capitalised multi-word names,
dates and years; a title is read as a heading, without capitalised runs) and looked up in the
snapshot's grounding documents (`grounding_documents.parquet`: their titles and Markdown, reference
lists dropped). A question or title naming one entity those documents do not name is counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tasks.markdown.entities import absent_entities, documents_haystack
from tasks.release.members import check_release_folder
from tasks.release.read import read_release_table, release_schema_version

__all__ = ["AbsentEntities", "absent_in_structures", "check_questions"]

STRUCTURE_COLUMNS = ("report_id", "domain", "snapshot", "nodes")
GROUNDING_COLUMNS = ("domain", "snapshot", "title", "markdown")
EXAMPLES = 5


@dataclass(frozen=True)
class AbsentEntities:
    """One report whose structure names entities absent from its snapshot's G."""

    report_id: str
    domain: str
    snapshot: str
    questions: int  # guiding questions naming at least one absent entity
    titles: int  # node titles naming at least one
    entities: tuple[str, ...]  # the absent entities, each once, in order of first use
    examples: tuple[str, ...] = field(default=())  # the first flagged questions/titles, "<node id>: text"
    check: str = "absent_entities"  # tells these entries from the stale headings in `frame qa gold --json`


def _walk(nodes: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    for n in nodes or ():
        yield n
        yield from _walk(n.get("children") or ())


def absent_in_structures(
    structures: Iterable[Mapping[str, Any]], grounding: Iterable[Mapping[str, Any]]
) -> list[AbsentEntities]:
    """The reports of `structures` naming entities absent from their snapshot's `grounding` rows (module
    docstring), by report id; rows as in the release tables."""
    by_snapshot: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for g in grounding:
        by_snapshot.setdefault((str(g["domain"]), str(g["snapshot"])), []).append(g)
    out: list[AbsentEntities] = []
    for s in sorted(structures, key=lambda r: str(r["report_id"])):
        key = (str(s["domain"]), str(s["snapshot"]))
        rows = by_snapshot.get(key, [])
        hay = documents_haystack((str(r.get("title") or ""), str(r.get("markdown") or "")) for r in rows)
        entities: dict[str, None] = {}
        examples: list[str] = []
        counts = {"questions": 0, "titles": 0}
        for node in _walk(s.get("nodes") or ()):
            texts = [("titles", str(node.get("title") or ""))]
            texts += [("questions", str(q)) for q in node.get("questions") or ()]
            for what, text in texts:
                absent = absent_entities(text, hay, heading=what == "titles")
                if absent:
                    counts[what] += 1
                    entities.update(dict.fromkeys(e.text for e in absent))
                    if len(examples) < EXAMPLES:
                        examples.append(f"{node.get('id')}: {text}")
        if entities:
            out.append(
                AbsentEntities(
                    str(s["report_id"]), *key, **counts, entities=tuple(entities), examples=tuple(examples)
                )
            )
    return out


def check_questions(folder: str | Path) -> list[AbsentEntities]:
    """`absent_in_structures` of the release in `folder` (its structures and grounding documents)."""
    folder = Path(folder)
    check_release_folder(folder)  # only regular files: nothing read through a link, no FIFO opened
    version = release_schema_version(folder)
    if not all((folder / f"{t}.parquet").is_file() for t in ("structures", "grounding_documents")):
        return []  # a gold-only folder (reports and instances): no questions to check
    structures = read_release_table(folder, "structures", version, STRUCTURE_COLUMNS)
    grounding = read_release_table(folder, "grounding_documents", version, GROUNDING_COLUMNS)
    return absent_in_structures(
        structures.select(list(STRUCTURE_COLUMNS)).to_pylist(),
        grounding.select(list(GROUNDING_COLUMNS)).to_pylist(),
    )
