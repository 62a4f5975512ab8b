"""Offline mirror source: read raw files from a folder laid out like `shared/corpus`.

`<mirror>/edgar/MANIFEST.csv` (path,ticker,cik,company,form,period_end,...,sha256,bytes) and
`<mirror>/arxiv/MANIFEST.csv` (path,topic,arxiv_id,title,first_version_date,...,sha256) list every
file; `path` is relative to the manifest's folder. Every file is checked against its manifest sha256
before it is stored.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from schemas.config import ArxivDomain, ArxivWindow, EdgarDomain, FrameConfig
from schemas.sources import RawFile
from tasks.errors import FrameInputError
from tasks.fetch.store import store_raw

_ACCESSION = re.compile(r"\b(\d{10}-\d{2}-\d{6})\b")
_EDGAR_COLUMNS = ("path", "ticker", "cik", "form", "period_end", "sha256")
_ARXIV_COLUMNS = ("path", "topic", "arxiv_id", "title", "first_version_date", "sha256")


@dataclass(frozen=True)
class ManifestRow:
    manifest: Path
    line: int  # line number in the CSV file (header = 1)
    fields: dict[str, str]

    @property
    def where(self) -> str:
        return f"{self.manifest}:{self.line} (path {self.fields.get('path', '')!r})"


def mirror_root(cfg: FrameConfig) -> Path:
    if cfg.source.mirror is None:
        raise FrameInputError("source.mirror", "the mirror source needs a folder laid out like shared/corpus")
    return Path(cfg.source.mirror)


def read_manifest(manifest: Path, required: tuple[str, ...]) -> list[ManifestRow]:
    if not manifest.is_file():
        raise FrameInputError(manifest, "mirror manifest not found")
    try:
        with manifest.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in required if c not in (reader.fieldnames or [])]
            if missing:
                raise FrameInputError(manifest, f"manifest lacks column(s) {', '.join(missing)}")
            # DictReader counts physical lines, so quoted fields with newlines keep the right line numbers.
            return [
                ManifestRow(manifest, reader.line_num, {k: (v or "") for k, v in row.items()})
                for row in reader
            ]
    except UnicodeDecodeError as exc:
        raise FrameInputError(
            manifest, f"not a UTF-8 CSV file (undecodable byte at offset {exc.start})"
        ) from None
    except csv.Error as exc:
        raise FrameInputError(manifest, f"not a valid CSV file ({str(exc).splitlines()[0]})") from None


def _row_file(row: ManifestRow, links_outside: bool = False) -> Path:
    """The row's file, refusing paths that would leave the manifest's folder, and symbolic links that
    lead out of the mirror unless `links_outside` (`[source] links_outside = true`)."""
    rel = row.fields["path"]
    pure = PurePosixPath(rel)
    if (
        not rel
        or "\x00" in rel
        or "\\" in rel
        or pure.is_absolute()
        or any(part in ("..", "") for part in rel.split("/"))
    ):
        raise FrameInputError(row.where, "unsafe path (must be relative, inside the mirror, without '..')")
    path = row.manifest.parent.joinpath(*pure.parts)
    # a symbolic link (of the file or a folder on its way) must not lead out of the mirror folder
    # (<mirror>/<kind>/MANIFEST.csv)
    outside = path.exists() and not path.resolve().is_relative_to(row.manifest.parent.parent.resolve())
    if outside and not links_outside:
        raise FrameInputError(
            row.where,
            f"{rel} is a symbolic link that leads outside the mirror folder "
            "(set [source] links_outside = true to allow it)",
        )
    return path


def mirror_location(kind: str, row: ManifestRow) -> str:
    """The row's file named portably, relative to the mirror folder: `edgar/AAPL/10-Q/2025-06-28.htm`,
    `arxiv/<topic>/<id>.html` (what provenance records, grounding documents and releases hold)."""
    return PurePosixPath(kind, row.fields["path"]).as_posix()


def verified_bytes(row: ManifestRow, links_outside: bool = False) -> tuple[Path, bytes]:
    """Read a manifest row's file and check it against the row's sha256."""
    path = _row_file(row, links_outside)
    if not path.is_file():
        raise FrameInputError(row.where, f"missing file {path}")
    data = path.read_bytes()
    actual = hashlib.sha256(data).hexdigest()
    expected = row.fields["sha256"].strip().lower()
    if actual != expected:
        raise FrameInputError(row.where, f"sha256 mismatch for {path}: manifest {expected}, file {actual}")
    return path, data


def edgar_manifest(cfg: FrameConfig) -> Path:
    return mirror_root(cfg) / "edgar" / "MANIFEST.csv"


def company_filings(cfg: FrameConfig, domain: EdgarDomain) -> list[ManifestRow]:
    """The mirror's filings (no `meta:` side files) of the domain's form and company (ticker or CIK)."""
    rows = []
    for row in read_manifest(edgar_manifest(cfg), _EDGAR_COLUMNS):
        f = row.fields
        if f["form"].startswith("meta:") or f["form"] != domain.form:
            continue
        same_company = f["ticker"].upper() == domain.ticker or (
            domain.cik is not None and f["cik"].strip().zfill(10) == domain.cik
        )
        if same_company:
            rows.append(row)
    return rows


def mirror_edgar(cfg: FrameConfig, domain: EdgarDomain, snapshot: str) -> RawFile:
    """Store the mirror's primary document for (ticker or CIK, form, period_end == snapshot)."""
    manifest = edgar_manifest(cfg)
    matches = [row for row in company_filings(cfg, domain) if row.fields["period_end"] == snapshot]
    what = f"ticker {domain.ticker}, form {domain.form}, period_end {snapshot}"
    if not matches:
        raise FrameInputError(manifest, f"no filing for {what}")
    if len(matches) > 1:
        lines = ", ".join(str(r.line) for r in matches)
        raise FrameInputError(manifest, f"several filings for {what} (lines {lines})")
    row = matches[0]
    _, data = verified_bytes(row, cfg.source.links_outside)
    accession = _ACCESSION.search(row.fields.get("source_path", ""))
    return store_raw(
        cfg.build.data_dir,
        data,
        ".htm",
        source="edgar",
        origin="mirror",
        location=mirror_location("edgar", row),
        domain=domain.name,
        snapshot=snapshot,
        accession=accession.group(1) if accession else None,
        ticker=row.fields["ticker"].upper(),
        cik=row.fields["cik"].strip().zfill(10) if row.fields["cik"].strip() else None,
        form=row.fields["form"],
        period_end=row.fields["period_end"],
        title=row.fields.get("company") or None,
    )


def parse_first_version(value: str) -> tuple[dt.date, dt.date]:
    """(first day, last day) that a first_version_date covers: one day, or a whole month for YYYY-MM."""
    value = value.strip()
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        day = dt.date.fromisoformat(value)
        return day, day
    if re.fullmatch(r"\d{4}-\d{2}", value):
        first = dt.date.fromisoformat(value + "-01")
        nxt = (first.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
        return first, nxt - dt.timedelta(days=1)
    raise ValueError(f"first_version_date must be YYYY-MM-DD or YYYY-MM, not {value!r}")


def find_window(domain: ArxivDomain, snapshot: str) -> ArxivWindow:
    for w in domain.windows:
        if w.label == snapshot:
            return w
    labels = ", ".join(w.label for w in domain.windows)
    raise FrameInputError(f"domains.{domain.name}", f"no window labelled {snapshot!r} (windows: {labels})")


def in_window(first: dt.date, last: dt.date, window: ArxivWindow) -> bool:
    """A paper belongs to a window when its first-version date (a day or a month) overlaps it."""
    return first <= window.end and last >= window.start


def arxiv_manifest(cfg: FrameConfig) -> Path:
    return mirror_root(cfg) / "arxiv" / "MANIFEST.csv"


def read_arxiv_manifest(cfg: FrameConfig) -> list[ManifestRow]:
    """The mirror's arXiv manifest rows (columns checked)."""
    return read_manifest(arxiv_manifest(cfg), _ARXIV_COLUMNS)


def select_papers(rows: list[ManifestRow], domain: ArxivDomain, window: ArxivWindow) -> list[ManifestRow]:
    """The topic's rows first submitted in the window: by date then id, at most papers_per_window."""
    picked: list[tuple[dt.date, str, ManifestRow]] = []
    for row in rows:
        if row.fields["topic"] != domain.topic:
            continue
        try:
            first, last = parse_first_version(row.fields["first_version_date"])
        except ValueError as exc:
            raise FrameInputError(row.where, str(exc)) from None
        if in_window(first, last, window):
            picked.append((first, row.fields["arxiv_id"], row))
    picked.sort(key=lambda item: (item[0], item[1]))
    return [row for _, _, row in picked[: domain.papers_per_window]]


def mirror_arxiv(cfg: FrameConfig, domain: ArxivDomain, snapshot: str) -> list[RawFile]:
    """Store the topic's papers first submitted in the window: by date then id, at most papers_per_window."""
    window = find_window(domain, snapshot)
    manifest = arxiv_manifest(cfg)
    picked = select_papers(read_arxiv_manifest(cfg), domain, window)
    if not picked:
        raise FrameInputError(
            manifest,
            f"no {domain.topic} paper first submitted in window {window.label} "
            f"({window.start}..{window.end})",
        )
    out = []
    for row in picked:
        arxiv_id = row.fields["arxiv_id"]
        _, data = verified_bytes(row, cfg.source.links_outside)
        out.append(
            store_raw(
                cfg.build.data_dir,
                data,
                ".html",
                source="arxiv",
                origin="mirror",
                location=mirror_location("arxiv", row),
                domain=domain.name,
                snapshot=snapshot,
                arxiv_id=arxiv_id,
                title=row.fields["title"] or None,
                first_version_date=row.fields["first_version_date"].strip(),
                license=row.fields.get("license") or None,
            )
        )
    return out
