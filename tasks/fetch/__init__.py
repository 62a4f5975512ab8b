"""fetch: raw EDGAR filings and arXiv papers, stored content-addressed with provenance."""

from __future__ import annotations

from schemas.config import ArxivDomain, EdgarDomain, FrameConfig
from schemas.sources import RawFile
from tasks.errors import FrameInputError
from tasks.fetch.store import read_raw, store_raw

__all__ = ["RawFile", "fetch_snapshot", "read_raw", "store_raw"]


def fetch_snapshot(cfg: FrameConfig, domain: EdgarDomain | ArxivDomain, snapshot: str) -> list[RawFile]:
    """Fetch one snapshot of one domain from the configured source (mirror or live)."""
    if snapshot not in domain.snapshots:
        raise FrameInputError(
            f"domains.{domain.name}",
            f"unknown snapshot {snapshot!r} (snapshots: {', '.join(domain.snapshots)})",
        )
    live = cfg.source.mode == "live"
    if isinstance(domain, EdgarDomain):
        if live:
            from tasks.fetch.edgar import live_edgar

            return [live_edgar(cfg, domain, snapshot)]
        from tasks.fetch.mirror import mirror_edgar

        return [mirror_edgar(cfg, domain, snapshot)]
    if live:
        from tasks.fetch.arxiv import live_arxiv

        return live_arxiv(cfg, domain, snapshot)
    from tasks.fetch.mirror import mirror_arxiv

    return mirror_arxiv(cfg, domain, snapshot)
