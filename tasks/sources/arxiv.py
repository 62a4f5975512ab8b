"""arXiv papers (their LaTeXML HTML rendering): the papers of a time window per snapshot, one grounding
document per paper."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, ClassVar, Literal

from schemas.config import FrameConfig
from schemas.domains import ArxivDomain
from schemas.sources import RawFile
from tasks.ground.documents import Grounded, ground_paper
from tasks.sources.base import RawSource, SourceKind
from tasks.sources.pairing import windows_skipped

_LATEXML_MARKS = (b"ltx_document", b"ltx_page_main", b"LaTeXML")


class ArxivKind(SourceKind):
    shape: ClassVar[type[ArxivDomain]] = ArxivDomain
    description: ClassVar[str] = "arXiv papers (HTML), the papers of a topic first posted in each window"
    ground_steps: ClassVar[tuple[str, ...]] = ("convert",)
    layout: ClassVar[Literal["filing", "papers", "documents"]] = "papers"

    def sniff(self, head: bytes) -> bool:
        return any(m in head for m in _LATEXML_MARKS)

    def fetch(self, cfg: FrameConfig, domain: ArxivDomain, snapshot: str) -> list[RawFile]:  # type: ignore[override]
        if cfg.source.mode == "live":
            from tasks.fetch.arxiv import live_arxiv

            return live_arxiv(cfg, domain, snapshot)
        from tasks.fetch.mirror import mirror_arxiv

        return mirror_arxiv(cfg, domain, snapshot)

    def discover(  # type: ignore[override]
        self, cfg: FrameConfig, domain: ArxivDomain, known: list[str], today: dt.date, *, session: Any = None
    ) -> ArxivDomain:
        from tasks.discover import discover_arxiv

        return discover_arxiv(cfg, domain, known, today)

    def periods_skipped(self, domain: ArxivDomain, t: str, t_next: str) -> int:  # type: ignore[override]
        w = {x.label: x for x in domain.windows}
        a, b = w[t], w[t_next]
        return windows_skipped(a.start, a.end, b.start, b.end, domain.window_months)

    def part(self, raw: RawFile) -> str:
        return raw.arxiv_id or raw.sha256[:12]

    def ground_step(self, step: str, src: RawSource, domain: ArxivDomain, earlier: tuple) -> Any:  # type: ignore[override]
        if step != "convert":
            raise ValueError(f"arxiv has no grounding step {step!r}")
        raw = src.raw
        meta = {
            "arxiv_id": raw.arxiv_id,
            "title": raw.title,
            "first_version_date": raw.first_version_date,
            "license": raw.license,
        }
        # raw.location (a URL or the mirror-relative path) is the document's portable `Source`
        return self.ground_bytes(src.read(), raw.location, meta=meta)

    def ground_bytes(
        self,
        data: bytes,
        source_name: str,
        *,
        expected: str | None = None,
        meta: dict | None = None,
        source_ref: str | None = None,
    ) -> Grounded:
        return ground_paper(data, source_name, self.name(), meta=meta, source_ref=source_ref)

    def qa(self, source: Path, out_dir: Path) -> dict:
        from tasks.ground.qa import qa_arxiv

        return qa_arxiv(source, out_dir)
