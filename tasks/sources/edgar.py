"""SEC EDGAR filings (iXBRL 10-Q / 10-K): one filing per snapshot, grounded as its Parts and Items."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, ClassVar, Literal

from schemas.config import FrameConfig
from schemas.domains import EdgarDomain
from schemas.sources import RawFile
from tasks.ground.documents import Grounded, ground_filing
from tasks.ground.ixbrl import CleanFiling, clean_filing
from tasks.ground.split import FilingSection, split_filing
from tasks.sources.base import RawSource, SourceKind
from tasks.sources.pairing import filings_skipped, year_end

_IXBRL_MARKS = (b"inlineXBRL", b"<ix:header")


class EdgarKind(SourceKind):
    shape: ClassVar[type[EdgarDomain]] = EdgarDomain
    description: ClassVar[str] = "SEC EDGAR iXBRL filings (10-Q, 10-K), one per period"
    # clean: the filing's iXBRL (facts, dei) and body; split: its Parts and Items; convert: Markdown
    ground_steps: ClassVar[tuple[str, ...]] = ("clean", "split", "convert")
    layout: ClassVar[Literal["filing", "papers", "documents"]] = "filing"
    fiscal_periods: ClassVar[bool] = True

    def sniff(self, head: bytes) -> bool:
        return any(m in head for m in _IXBRL_MARKS)

    def fetch(self, cfg: FrameConfig, domain: EdgarDomain, snapshot: str) -> list[RawFile]:  # type: ignore[override]
        if cfg.source.mode == "live":
            from tasks.fetch.edgar import live_edgar

            return [live_edgar(cfg, domain, snapshot)]
        from tasks.fetch.mirror import mirror_edgar

        return [mirror_edgar(cfg, domain, snapshot)]

    def discover(  # type: ignore[override]
        self, cfg: FrameConfig, domain: EdgarDomain, known: list[str], today: dt.date, *, session: Any = None
    ) -> EdgarDomain:
        from tasks.discover import discover_edgar

        return discover_edgar(cfg, domain, known, session=session, periods_skipped=self.periods_skipped)

    def periods_skipped(self, domain: EdgarDomain, t: str, t_next: str) -> int:  # type: ignore[override]
        end, next_end = domain.snapshot_date(t), domain.snapshot_date(t_next)
        if end is None or next_end is None:
            raise ValueError(f"domain {domain.name} has no snapshot {t!r} or {t_next!r}")
        fiscal = year_end(domain.fiscal_year_end, domain.form, domain.periods)
        return filings_skipped(domain.form, end, next_end, fiscal)

    def part(self, raw: RawFile) -> str:
        return raw.accession or raw.sha256[:12]

    def ground_step(self, step: str, src: RawSource, domain: EdgarDomain, earlier: tuple) -> Any:  # type: ignore[override]
        if step == "clean":
            return clean_filing(src.read(), src.raw.location)
        if step == "split":
            (clean,) = earlier
            return [_section_row(s) for s in split_filing(clean)]
        if step == "convert":
            clean, sections = earlier
            return _convert(src.raw, clean, sections, domain.form, self.name())
        raise ValueError(f"edgar has no grounding step {step!r}")

    def ground_bytes(
        self,
        data: bytes,
        source_name: str,
        *,
        expected: str | None = None,
        meta: dict | None = None,
        source_ref: str | None = None,
    ) -> Grounded:
        import hashlib

        clean = clean_filing(data, source_name)
        sha = hashlib.sha256(data).hexdigest()
        return ground_filing(clean, sha, source_name, expected, meta or {}, kind=self.name())

    def qa(self, source: Path, out_dir: Path) -> dict:
        from tasks.ground.qa import qa_edgar

        return qa_edgar(source, out_dir)


def _section_row(s: FilingSection) -> dict:
    # plain data (the section's HTML as text): what the split step's cached result holds
    return {
        "doc_id": s.doc_id,
        "title": s.title,
        "section_type": s.section_type,
        "part": s.part,
        "item": s.item,
        "html": s.to_html(),
        "span": s.span,
        "covers": s.covers,
    }


def _convert(raw: RawFile, clean: CleanFiling, sections: list[dict], form: str, kind: str) -> Grounded:
    secs = [
        FilingSection.from_html(
            s["doc_id"],
            s["title"],
            s["section_type"],
            s["part"],
            s["item"],
            s["html"],
            s.get("span"),
            s.get("covers"),
        )
        for s in sections
    ]
    meta = {"accession": raw.accession, "ticker": raw.ticker} if raw.accession else {"ticker": raw.ticker}
    return ground_filing(clean, raw.sha256, raw.location, form, meta, sections=secs, kind=kind)
