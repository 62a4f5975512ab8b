"""Read a grounding folder back (what later steps consume): documents, their Markdown, facts."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


_DUMMY_SHA = "0" * 64  # rows of a release carry no source hash of their own


def grounding_set_from_rows(grounding_rows: Iterable[Mapping[str, Any]]) -> GroundingSet:
    """A GroundingSet (documents + Markdown texts, no facts) from grounding_documents rows."""
    docs: list[GroundingDocument] = []
    texts: dict[str, str] = {}
    for r in grounding_rows:
        doc_id = str(r["doc_id"])
        if doc_id in texts:
            continue
        meta = r.get("metadata") or {}
        if not meta and r.get("metadata_json"):
            try:
                meta = json.loads(r["metadata_json"])
            except ValueError:
                meta = {}
        sha = r.get("source_sha256") or ""
        kind = r.get("source_kind")
        docs.append(
            GroundingDocument(
                doc_id=doc_id,
                title=str(r.get("title") or doc_id),
                kind=r.get("kind") if r.get("kind") in ("prose", "table", "mixed") else "mixed",
                tokens=int(r.get("tokens") or 0),
                tables=int(r.get("tables") or 0),
                images=int(r.get("images") or 0),
                source_sha256=sha if len(sha) == 64 else _DUMMY_SHA,
                source_kind=kind if isinstance(kind, str) and kind else None,
                file=f"{doc_id}.md",
                metadata=meta if isinstance(meta, dict) else {},
            )
        )
        texts[doc_id] = str(r.get("markdown") or "")
    return GroundingSet(Path("."), docs, texts, [])
