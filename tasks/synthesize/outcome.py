"""What a build produces, typed from the flows to the release: a snapshot's grounding, its gold report
with the plan and checks behind it, and one domain's outcome (built, or failed with its first error line).

They are what the ground and build flows return (and Prefect persists), what the run log folds and what
the release tables are written from: nothing between them is a dict read by key or a JSON round trip.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Literal

from schemas.sources import RawFile
from schemas.structure import ReportStructure
from tasks.synthesize.validate import GoldValidation


@dataclass(frozen=True)
class SnapshotGrounding:
    """The grounding folder of one snapshot (data/grounding/<domain>/<snapshot>/) and what it holds."""

    snapshot: str
    sources: int
    documents: int
    tables: int
    images: int
    tokens: int
    path: str  # the folder (the build's data folder: never written to a release)
    digest: str  # content digest of the documents: what downstream cache keys depend on
    raw: tuple[RawFile, ...] = ()
    date: dt.date | None = None  # the day the snapshot stands for, from the domain's typed config

    def counts(self) -> dict[str, int | str]:
        """The columns a summary table shows."""
        return {
            "snapshot": self.snapshot,
            "sources": self.sources,
            "documents": self.documents,
            "tables": self.tables,
            "images": self.images,
            "tokens": self.tokens,
        }


@dataclass(frozen=True)
class SnapshotBuild:
    """One snapshot built: its grounding, plan, outline, gold report and the report's checks."""

    snapshot: str
    ground: SnapshotGrounding
    structure: ReportStructure
    outline: str
    report: str
    validation: GoldValidation


@dataclass(frozen=True)
class DomainOutcome:
    """One domain of a run: `snapshots` holds what was done (SnapshotBuild of a build, SnapshotGrounding of
    a grounding run); a failed domain has none and the first line of its error."""

    domain: str
    category: str
    kind: str = ""
    status: Literal["ok", "failed"] = "ok"
    snapshots: tuple[SnapshotBuild, ...] | tuple[SnapshotGrounding, ...] = ()
    cached: bool = False  # served whole from the cache (its steps ran in an earlier build)
    error: str = ""
    input_error: bool = False  # the failure names a bad input (exit code 2), not a crash

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def snapshot_names(self) -> list[str]:
        return [s.snapshot for s in self.snapshots]
