"""What a source kind supplies: its domain shape, fetch (mirror and live), discovery, grounding steps,
QA, and the few traits synthesis reads. One subclass per kind, registered in `tasks.sources.registry`."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from schemas.config import FrameConfig
from schemas.domains import DomainBase
from schemas.sources import RawFile
from tasks.errors import FrameInputError
from tasks.fetch.store import read_raw
from tasks.ground.documents import Grounded


@dataclass(frozen=True)
class RawSource:
    """One fetched raw file of a snapshot and where its bytes are: `data_dir` and `mirror` are what a
    RawFile's portable blob and mirror paths resolve against (they key a step's cache with it)."""

    raw: RawFile
    data_dir: str
    mirror: str | None

    def read(self) -> bytes:
        return read_raw(self.raw, self.data_dir, self.mirror)


class SourceKind:
    """A kind of raw source (SEC filings, arXiv papers, ...). Subclasses set the class attributes and
    implement `fetch`, `ground_step` and `ground_bytes`; the rest has defaults."""

    shape: ClassVar[type[DomainBase]]  # the `[[domains]]` table of this kind (schemas.domains)
    description: ClassVar[str] = ""
    # The grounding steps of one raw file, in order: each gets the outputs of the earlier ones, the last
    # returns a `Grounded`. Their names are the Prefect task names, the step timings' rows and what
    # `frame rerun --step` accepts.
    ground_steps: ClassVar[tuple[str, ...]] = ("convert",)
    # Traits synthesis reads:
    # - layout: how a snapshot's documents relate, which decides the offline backend's form-free plan:
    #   "filing" (the Parts, Items, statements and notes of one filing), "papers" (self-contained papers,
    #   cited by title; a sentence taken from one must make sense outside it), "documents" (anything
    #   else: a section per document)
    # - fiscal_periods: the report speaks of the reporting period its documents name ("the quarter ended
    #   ..."): a form-restricted plan renames the earlier period to the new one
    layout: ClassVar[Literal["filing", "papers", "documents"]] = "documents"
    fiscal_periods: ClassVar[bool] = False
    # `{{source_brief}}` of an LLM prompt that has no part for this kind: a sentence on its documents
    brief: ClassVar[str] = ""

    @classmethod
    def name(cls) -> str:
        return cls.shape.kind_name()

    # ---- raw files -----------------------------------------------------------------------------
    def sniff(self, head: bytes) -> bool:
        """Whether the first bytes of a file look like this kind (`frame ground` without --kind)."""
        return False

    def fetch(self, cfg: FrameConfig, domain: DomainBase, snapshot: str) -> list[RawFile]:
        """The raw files of one snapshot, from the mirror or live (cfg.source.mode), stored."""
        raise NotImplementedError

    def discover(
        self, cfg: FrameConfig, domain: DomainBase, known: list[str], today: dt.date, *, session: Any = None
    ) -> DomainBase:
        """The domain with its snapshots = the configured ones, the `known` (released) ones, and newer ones
        found at the source when the domain asks for discovery. Default: a kind without discovery keeps
        its configured snapshots and refuses released ones it no longer lists."""
        missing = sorted(set(known) - set(domain.snapshots))
        if missing:
            raise FrameInputError(
                f"domains.{domain.name}",
                f"released snapshot(s) {', '.join(missing)} are no longer configured (a refresh never drops "
                "released data)",
            )
        return domain

    def periods_skipped(self, domain: DomainBase, t: str, t_next: str) -> int:
        """How many periods of the source lie between snapshot `t` and the next listed one `t_next`: 0
        when `t_next` is the next edition (an instance's pair is consecutive), n when the source has n
        editions between them that the domain does not list. Default: 0 (a kind without periods)."""
        return 0

    def part(self, raw: RawFile) -> str:
        """Which source of a snapshot a step converts, in run names, when a snapshot has several."""
        return raw.sha256[:12]

    # ---- grounding -----------------------------------------------------------------------------
    def ground_step(self, step: str, src: RawSource, domain: DomainBase, earlier: tuple) -> Any:
        """Run grounding step `step` on one raw file; `domain` is narrowed to the file's snapshot and
        `earlier` holds the outputs of the steps before it, in order."""
        raise NotImplementedError

    def ground_bytes(
        self,
        data: bytes,
        source_name: str,
        *,
        expected: str | None = None,
        meta: dict | None = None,
        source_ref: str | None = None,
    ) -> Grounded:
        """One raw file's bytes -> its grounding documents (`frame ground`). `source_name` names it in
        errors; `source_ref` (default `source_name`) is what the documents record as their source."""
        raise NotImplementedError

    def qa(self, source: Path, out_dir: Path) -> dict:
        """Construction QA of one grounded file (`frame qa ground`): what the conversion kept."""
        raise FrameInputError(str(source), f"no construction QA for {self.name()} sources")
