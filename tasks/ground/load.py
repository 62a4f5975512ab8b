"""Read a grounding folder back (what later steps consume): documents, their Markdown, facts."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from schemas.documents import GroundingDocument
from tasks.errors import FrameInputError


@dataclass
class GroundingSet:
    """D_t: the grounding documents of one snapshot of one domain."""

    folder: Path
    documents: list[GroundingDocument]
    texts: dict[str, str]  # doc_id -> Markdown
    facts: list[dict] = field(default_factory=list)  # facts.parquet rows (filings), else empty

    @property
    def tokens(self) -> int:
        return sum(d.tokens for d in self.documents)


def load_grounding_set(folder: str | Path, with_facts: bool = True) -> GroundingSet:
    folder = Path(folder)
    index = folder / "documents.json"
    if not index.is_file():
        raise FrameInputError(folder, "no documents.json: not a grounding folder")
    try:
        docs = [GroundingDocument.model_validate(d) for d in json.loads(index.read_text(encoding="utf-8"))]
    except (ValueError, TypeError) as exc:
        raise FrameInputError(index, f"invalid documents.json ({str(exc).splitlines()[0]})") from None
    texts = {}
    for d in docs:
        path = folder / d.file
        if not path.is_file():
            raise FrameInputError(path, "listed in documents.json but missing")
        texts[d.doc_id] = path.read_text(encoding="utf-8")
    facts: list[dict] = []
    if with_facts and (folder / "facts.parquet").is_file():
        facts = pq.read_table(folder / "facts.parquet").to_pylist()
    return GroundingSet(folder, docs, texts, facts)
