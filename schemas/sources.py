"""Provenance of one fetched raw file (an EDGAR filing, an arXiv paper, or a file of another source
kind), stored content-addressed."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class RawFile(BaseModel):
    """One raw file as stored by `tasks.fetch.store.store_raw`.

    Every field is portable (no path of the building machine: the record can be published and the
    data folder or the mirror moved): `path` is the content-addressed blob relative to the data
    folder (`raw/sha256/<aa>/<sha256><ext>`); `location` says where the bytes came from: a URL for
    live fetches, the path relative to the mirror folder for mirror fetches
    (`edgar/AAPL/10-Q/2025-06-28.htm`, `arxiv/<topic>/<id>.html`). `tasks.fetch.store.read_raw`
    resolves both against the data folder and the mirror.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    path: str = Field(description="blob path relative to the data folder: raw/sha256/<aa>/<sha256><ext>")
    size: int = Field(ge=0)
    source: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,31}$", description="the source kind's name")
    origin: Literal["mirror", "live"]
    location: str = Field(description="URL (live) or path relative to the mirror folder (mirror)")
    domain: str
    snapshot: str = Field(description="period-end ISO date (EDGAR) or window label (arXiv)")
    # EDGAR
    accession: str | None = None
    ticker: str | None = None
    cik: str | None = None
    form: str | None = None
    period_end: str | None = None
    # arXiv
    arxiv_id: str | None = Field(default=None, description="arXiv id without version, e.g. 2111.08717")
    arxiv_version: str | None = Field(default=None, description="version suffix if known, e.g. v1")
    title: str | None = None
    first_version_date: str | None = Field(
        default=None, description="YYYY-MM-DD, or YYYY-MM if only the month is known"
    )
    license: str | None = None
    fetched_at: str = Field(description="ISO 8601 UTC time of the first store of this record")
