"""Shapes of grounding documents and their per-folder index (documents.json)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

DocKind = Literal["prose", "table", "mixed"]
# A source kind's name ("edgar", "arxiv", or a kind registered in tasks.sources)
SourceKind = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,31}$")]


class GroundingDocument(BaseModel):
    """One Markdown grounding document; one record of documents.json."""

    doc_id: str = Field(description="file stem, unique within its folder, e.g. 'part-1-item-2-mdna'")
    title: str
    kind: DocKind
    tokens: int = Field(ge=0, description="o200k_base token count of the Markdown text")
    tables: int = Field(ge=0)
    images: int = Field(ge=0)
    source_sha256: str = Field(min_length=64, max_length=64)
    # None only for a document read back from rows that do not say (a scoring index needs no kind); what
    # depends on the kind (synthesis) refuses it
    source_kind: SourceKind | None = None
    file: str = Field(description="Markdown file name inside the output folder")
    source_ids: list[str] = Field(default_factory=list, description="accession / arXiv id / CIK")
    metadata: dict[str, Any] = Field(default_factory=dict)


def doc_kind(prose_chars: int, table_chars: int) -> DocKind:
    """Classify by where the text lives: mostly tables, mostly prose, or both."""
    total = prose_chars + table_chars
    if total == 0 or table_chars / total < 0.2:
        return "prose"
    if table_chars / total > 0.8:
        return "table"
    return "mixed"
