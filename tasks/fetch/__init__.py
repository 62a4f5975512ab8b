"""fetch: raw EDGAR filings and arXiv papers, stored content-addressed with provenance (which fetch a
domain takes is its source kind's choice: tasks.sources)."""

from __future__ import annotations

from schemas.sources import RawFile
from tasks.fetch.store import read_raw, store_raw

__all__ = ["RawFile", "read_raw", "store_raw"]
