"""Source kinds as plugins: what turns a domain of a config into raw files and grounding documents.

Flows and commands ask the registry for a domain's kind and run what it supplies; nothing else branches
on a kind's name. `tasks.sources.base.SourceKind` says what a kind supplies; docs/extending.md shows how
to add one.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from schemas.config import FrameConfig
from schemas.domains import DomainBase
from schemas.sources import RawFile
from tasks.errors import FrameInputError
from tasks.ground.documents import Grounded, sniff_head
from tasks.sources.base import RawSource, SourceKind
from tasks.sources.registry import ground_steps, register, source_kind, source_kinds, unregister

__all__ = [
    "RawSource",
    "SourceKind",
    "detect_kind",
    "discover_domain",
    "fetch_snapshot",
    "ground_source",
    "ground_steps",
    "kind_of",
    "periods_skipped",
    "qa_ground",
    "register",
    "source_kind",
    "source_kinds",
    "unregister",
]


def kind_of(domain: DomainBase) -> SourceKind:
    return source_kind(domain.kind, f"domains.{domain.name}.kind")


def detect_kind(data: bytes, source_name: str) -> str:
    """The kind whose `sniff` recognises the file; a one-line error naming the file otherwise."""
    head = sniff_head(data)
    for name, kind in source_kinds().items():
        if kind.sniff(head):
            return name
    if not data.strip():
        raise FrameInputError(source_name, "file is empty")
    if b"\x00" in data[:4096]:
        raise FrameInputError(source_name, "binary data, not an HTML document")
    known = " or ".join(source_kinds())
    raise FrameInputError(source_name, f"not a file of any known source kind ({known}); pass --kind")


def ground_source(
    data: bytes,
    source_name: str,
    kind: str | None = None,
    expected_form: str | None = None,
    meta: dict | None = None,
    source_ref: str | None = None,
) -> Grounded:
    """One raw file -> grounding documents (`frame ground`). `source_name` names the input in error
    messages; `source_ref` (default `source_name`) is what the documents record as their source: a
    portable name (a URL, a mirror-relative path or a file name), never a path of the building machine."""
    name = kind or detect_kind(data, source_name)
    return source_kind(name, "--kind").ground_bytes(
        data, source_name, expected=expected_form, meta=meta, source_ref=source_ref
    )


def fetch_snapshot(cfg: FrameConfig, domain: DomainBase, snapshot: str) -> list[RawFile]:
    """Fetch one snapshot of one domain from the configured source (mirror or live)."""
    if snapshot not in domain.snapshots:
        raise FrameInputError(
            f"domains.{domain.name}",
            f"unknown snapshot {snapshot!r} (snapshots: {', '.join(domain.snapshots)})",
        )
    return kind_of(domain).fetch(cfg, domain, snapshot)


def periods_skipped(domain: DomainBase, t: str, t_next: str) -> int:
    """Periods of the source between snapshot `t` and the next listed `t_next` (0: consecutive)."""
    return kind_of(domain).periods_skipped(domain, t, t_next)


def discover_domain(
    cfg: FrameConfig, domain: DomainBase, known: list[str], today: dt.date, *, session: Any = None
) -> DomainBase:
    """The domain with snapshots = sorted union(domain's, `known`) + discovered ones newer than the last
    (for domains that ask for discovery). The result is validated as the same shape."""
    return kind_of(domain).discover(cfg, domain, known, today, session=session)


def qa_ground(source: Path, out_dir: Path, kind: str | None = None) -> dict:
    source, out_dir = Path(source), Path(out_dir)
    name = kind or detect_kind(source.read_bytes(), str(source))
    return source_kind(name, "--kind").qa(source, out_dir)
