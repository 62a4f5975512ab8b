"""Mirror fetch + content-addressed store, on the real corpus bytes in ../shared/corpus.

Every corpus fact (row counts, periods, papers per window, sha256) is read from the MANIFESTs, so that the
corpus may grow; `fetched` also runs on a grown copy of it to prove that."""

from __future__ import annotations

import calendar
import csv
import datetime as dt
import hashlib
import json
import os
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

from schemas.config import ArxivDomain, ArxivWindow, BuildSettings, EdgarDomain, FrameConfig, SourceConfig
from schemas.sources import RawFile
from tasks.errors import FrameInputError
from tasks.fetch.mirror import mirror_arxiv, mirror_edgar, parse_first_version
from tasks.fetch.store import read_raw, store_raw
from tasks.sources import fetch_snapshot
from tests.conftest import CORPUS

EDGAR_MANIFEST = CORPUS / "edgar" / "MANIFEST.csv"
ARXIV_MANIFEST = CORPUS / "arxiv" / "MANIFEST.csv"
CATEGORY = {"10-Q": "financial_quarterly", "10-K": "financial_annual"}

# Suggested windows of shared/corpus/arxiv/README.md; the papers each picks come from window_papers.
GW_WINDOWS = {
    "W1": ("2021-01-01", "2022-06-30"),
    "W2": ("2022-07-01", "2023-03-31"),
    "W3": ("2023-04-01", "2024-12-31"),
}
EXO_WINDOWS = {
    "W1": ("2020-10-01", "2021-11-30"),
    "W2": ("2022-09-01", "2024-02-29"),
    "W3": ("2024-05-01", "2025-06-30"),
}

pytestmark = pytest.mark.skipif(not EDGAR_MANIFEST.is_file(), reason="shared corpus not available")


def manifest_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def write_manifest(path: Path, rows: list[dict[str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def filings(corpus: Path = CORPUS) -> list[dict[str, str]]:
    """The primary filings of a corpus' edgar MANIFEST (no `meta:` side files)."""
    return [r for r in manifest_rows(corpus / "edgar" / "MANIFEST.csv") if not r["form"].startswith("meta:")]


def papers(corpus: Path = CORPUS) -> list[dict[str, str]]:
    return manifest_rows(corpus / "arxiv" / "MANIFEST.csv")


def edgar_domains(corpus: Path = CORPUS) -> list[EdgarDomain]:
    periods: dict[tuple[str, str], list[dt.date]] = defaultdict(list)
    for row in filings(corpus):
        periods[(row["ticker"], row["form"])].append(dt.date.fromisoformat(row["period_end"]))
    return [
        EdgarDomain(
            kind="edgar",
            name=f"{ticker.lower()}-{form.lower()}",
            category=CATEGORY[form],
            ticker=ticker,
            form=form,
            periods=sorted(p),
        )
        for (ticker, form), p in sorted(periods.items())
    ]


def arxiv_domain(name: str, topic: str, n: int, windows: dict) -> ArxivDomain:
    return ArxivDomain(
        kind="arxiv",
        name=name,
        category="academic_simple" if n <= 4 else "academic_complex",
        topic=topic,
        query="cat:astro-ph",
        papers_per_window=n,
        windows=[
            ArxivWindow(label=label, start=dt.date.fromisoformat(a), end=dt.date.fromisoformat(b))
            for label, (a, b) in windows.items()
        ],
    )


GW = arxiv_domain("gw", "gravitational-wave-astrophysics", 3, GW_WINDOWS)
EXO = arxiv_domain("exo", "exoplanets-and-host-stars", 5, EXO_WINDOWS)


# ---- the test's own oracle of the window rule (independent of mirror.select_papers) -------------


def days_covered(first_version_date: str) -> tuple[dt.date, dt.date]:
    """The first and last day a first_version_date stands for: one day, or a whole YYYY-MM month."""
    if len(first_version_date) == len("YYYY-MM"):
        year, month = map(int, first_version_date.split("-"))
        return dt.date(year, month, 1), dt.date(year, month, calendar.monthrange(year, month)[1])
    day = dt.date.fromisoformat(first_version_date)
    return day, day


def window_papers(rows: list[dict[str, str]], domain: ArxivDomain, label: str) -> list[str]:
    """The ids the window should pick: the topic's papers whose date meets the window, by (first day, id),
    at most papers_per_window."""
    (window,) = [w for w in domain.windows if w.label == label]
    inside = []
    for row in rows:
        first, last = days_covered(row["first_version_date"])
        if row["topic"] == domain.topic and first <= window.end and last >= window.start:
            inside.append((first, row["arxiv_id"]))
    return [arxiv_id for _, arxiv_id in sorted(inside)[: domain.papers_per_window]]


def blob_count(corpus: Path) -> int:
    """Distinct contents a full fetch stores: every primary filing plus the papers the windows pick."""
    rows = papers(corpus)
    sha = {r["arxiv_id"]: r["sha256"] for r in rows}
    picked = {sha[i] for d in (GW, EXO) for w in d.windows for i in window_papers(rows, d, w.label)}
    return len({r["sha256"] for r in filings(corpus)} | picked)


def make_cfg(mirror: Path, data_dir: Path, domains: list) -> FrameConfig:
    return FrameConfig(
        build=BuildSettings(data_dir=data_dir),
        source=SourceConfig(mode="mirror", mirror=mirror, links_outside=True),
        domains=domains,
    )


def tree_state(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under root: (mtime_ns, inode, sha256) — detects any write, even an identical rewrite."""
    state = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            st = p.stat()
            state[str(p.relative_to(root))] = (
                st.st_mtime_ns,
                st.st_ino,
                hashlib.sha256(p.read_bytes()).hexdigest(),
            )
    return state


def fetch_all(cfg: FrameConfig) -> dict[tuple[str, str], list[RawFile]]:
    return {(d.name, s): fetch_snapshot(cfg, d, s) for d in cfg.domains for s in d.snapshots}


# ---- a grown copy of the corpus: one more filing, one more paper per window --------------------


@dataclass(frozen=True)
class Grown:
    root: Path
    filing: dict[str, str]  # the added edgar MANIFEST row
    papers: dict[tuple[str, str], dict[str, str]]  # (domain, window label) -> the added arxiv MANIFEST row


def add_changed_copy(kind_dir: Path, source: dict[str, str], row: dict[str, str]) -> None:
    """Write source's bytes plus a comment naming row's path (so its sha256 is new) at row's path, and
    fill in row's sha256 and bytes."""
    data = (CORPUS / kind_dir.name / source["path"]).read_bytes()
    data += f"\n<!-- grown copy for tests: {row['path']} -->\n".encode()
    target = kind_dir / row["path"]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    row.update(sha256=hashlib.sha256(data).hexdigest(), bytes=str(len(data)))


@pytest.fixture(scope="module")
def grown(tmp_path_factory) -> Grown:
    root = tmp_path_factory.mktemp("grown") / "corpus"
    for kind in ("edgar", "arxiv"):  # unchanged files are links into the shared corpus
        for row in manifest_rows(CORPUS / kind / "MANIFEST.csv"):
            link = root / kind / row["path"]
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(CORPUS / kind / row["path"])

    latest = aapl_q_rows()[-1]  # an AAPL 10-Q one quarter (13 weeks) after the latest
    period = (dt.date.fromisoformat(latest["period_end"]) + dt.timedelta(weeks=13)).isoformat()
    filing = {**latest, "path": f"AAPL/10-Q/{period}.htm", "period_end": period}
    filing.update(fiscal_year="", fiscal_period="")  # not read from the (copied) file's dei: facts
    add_changed_copy(root / "edgar", latest, filing)

    # Dates by window: its first day (sorts first, so it must be picked), its middle day, its last month
    # (YYYY-MM; not picked when the window is already full).
    added, serial = {}, 0
    for domain in (GW, EXO):
        source = next(r for r in papers() if r["topic"] == domain.topic)
        for i, w in enumerate(domain.windows):
            serial += 1
            arxiv_id = f"9999.{serial:05d}"
            date = [w.start.isoformat(), (w.start + (w.end - w.start) // 2).isoformat(), f"{w.end:%Y-%m}"]
            row = {**source, "path": f"{domain.topic}/{arxiv_id}.html", "arxiv_id": arxiv_id}
            row.update(title=f"{source['title']} (grown copy)", first_version_date=date[i % 3])
            add_changed_copy(root / "arxiv", source, row)
            added[(domain.name, w.label)] = row

    for kind, new_rows in (("edgar", [filing]), ("arxiv", list(added.values()))):
        text = (CORPUS / kind / "MANIFEST.csv").read_text(encoding="utf-8")
        with (root / kind / "MANIFEST.csv").open("w", newline="", encoding="utf-8") as fh:
            fh.write(text if text.endswith("\n") else text + "\n")  # the same MANIFEST, plus new rows
            csv.DictWriter(fh, fieldnames=list(new_rows[0]), lineterminator="\n").writerows(new_rows)
    return Grown(root, filing, added)


def test_grown_corpus_really_grew(grown):
    shared, more = filings(), filings(grown.root)
    assert more == [*shared, grown.filing]
    aapl_q = [r for r in shared if (r["ticker"], r["form"]) == ("AAPL", "10-Q")]
    assert grown.filing["period_end"] > max(r["period_end"] for r in aapl_q)
    assert grown.filing["sha256"] not in {r["sha256"] for r in shared}
    old, new = papers(), papers(grown.root)
    assert new == [*old, *grown.papers.values()]
    assert not {r["arxiv_id"] for r in grown.papers.values()} & {r["arxiv_id"] for r in old}
    assert len({r["sha256"] for r in new}) == len(new)
    for (name, label), row in grown.papers.items():
        (window,) = [w for w in (GW if name == "gw" else EXO).windows if w.label == label]
        first, last = days_covered(row["first_version_date"])
        assert first <= window.end and last >= window.start
    # a paper dated on its window's first day changes that window's selection
    early = [
        (d, w.label)
        for d in (GW, EXO)
        for w in d.windows
        if grown.papers[(d.name, w.label)]["first_version_date"] == w.start.isoformat()
    ]
    assert any(
        grown.papers[(d.name, label)]["arxiv_id"] in window_papers(new, d, label)
        and window_papers(new, d, label) != window_papers(old, d, label)
        for d, label in early
    )
    assert blob_count(grown.root) > blob_count(CORPUS)


# ---- a full fetch of the shared corpus and of the grown copy -----------------------------------


@pytest.fixture(scope="module", params=["shared", "grown"])
def fetched(request, tmp_path_factory):
    corpus = CORPUS if request.param == "shared" else request.getfixturevalue("grown").root
    data_dir = tmp_path_factory.mktemp(f"data-{request.param}")
    cfg = make_cfg(corpus, data_dir, [*edgar_domains(corpus), GW, EXO])
    return cfg, fetch_all(cfg)


def test_every_edgar_snapshot_matches_manifest(fetched):
    cfg, results = fetched
    rows = filings(cfg.source.mirror)
    assert len(rows) == len(results) - sum(len(d.windows) for d in (GW, EXO))  # one snapshot per row
    for row in rows:
        key = (f"{row['ticker'].lower()}-{row['form'].lower()}", row["period_end"])
        (raw,) = results[key]
        assert raw.sha256 == row["sha256"]
        assert raw.size == int(row["bytes"])
        assert (raw.source, raw.origin, raw.ticker, raw.form) == (
            "edgar",
            "mirror",
            row["ticker"],
            row["form"],
        )
        assert (raw.period_end, raw.snapshot, raw.cik) == (row["period_end"], row["period_end"], row["cik"])
        # portable: relative to the mirror folder and to the data folder
        assert raw.location == f"edgar/{row['path']}"
        assert raw.path == f"raw/sha256/{raw.sha256[:2]}/{raw.sha256}.htm"
        assert hashlib.sha256(read_raw(raw, cfg.build.data_dir)).hexdigest() == row["sha256"]
        record = cfg.build.data_dir / "raw/provenance/edgar" / key[0] / key[1] / f"{raw.sha256}.json"
        assert RawFile.model_validate(json.loads(record.read_text())) == raw
    # the accession is read from the source path when it carries one
    (googl,) = results[("googl-10-q", "2023-06-30")]
    assert googl.accession == "0001652044-23-000070"
    (aapl,) = results[("aapl-10-q", "2025-03-29")]
    assert aapl.accession is None


@pytest.mark.parametrize("domain", [GW, EXO], ids=["gw", "exo"])
def test_arxiv_windows_pick_oracle_papers(fetched, domain):
    cfg, results = fetched
    rows = papers(cfg.source.mirror)
    by_id = {r["arxiv_id"]: r for r in rows}
    for window in domain.windows:
        expected = window_papers(rows, domain, window.label)
        assert expected, f"window {window.label} picks no paper"  # else the test proves nothing
        raws = results[(domain.name, window.label)]
        assert [r.arxiv_id for r in raws] == expected
        for raw in raws:
            row = by_id[raw.arxiv_id]
            assert raw.sha256 == row["sha256"]
            assert hashlib.sha256(read_raw(raw, cfg.build.data_dir)).hexdigest() == row["sha256"]
            assert (raw.title, raw.first_version_date) == (row["title"], row["first_version_date"])
            assert raw.location == f"arxiv/{row['path']}"
            assert (raw.source, raw.origin, raw.snapshot) == ("arxiv", "mirror", window.label)
            assert raw.path.endswith(".html")


def test_second_fetch_writes_nothing(fetched):
    cfg, first = fetched
    before = tree_state(cfg.build.data_dir)
    assert len([k for k in before if k.startswith("raw/sha256/")]) == blob_count(cfg.source.mirror)
    again = fetch_all(cfg)
    assert again == first  # same records, same fetched_at
    assert tree_state(cfg.build.data_dir) == before
    assert not list(cfg.build.data_dir.rglob("*.tmp"))


# ---- a small copied mirror with broken rows ----------------------------------------------------


def aapl_q_rows() -> list[dict[str, str]]:
    """The corpus' AAPL 10-Q rows, oldest period first (the order small_mirror writes them in)."""
    rows = [r for r in filings() if (r["ticker"], r["form"]) == ("AAPL", "10-Q")]
    return sorted(rows, key=lambda r: r["period_end"])


def aapl_q() -> EdgarDomain:
    periods = [dt.date.fromisoformat(r["period_end"]) for r in aapl_q_rows()]
    return EdgarDomain(
        kind="edgar",
        name="aapl-10q",
        category="financial_quarterly",
        ticker="AAPL",
        form="10-Q",
        periods=periods,
    )


def earliest_middle_latest() -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    rows = aapl_q_rows()
    assert len(rows) >= 3, "the small mirror tests need three AAPL 10-Q filings"
    return rows[0], rows[len(rows) // 2], rows[-1]


def row_for(rows: list[dict[str, str]], period: str) -> dict[str, str]:
    (row,) = [r for r in rows if r["period_end"] == period]
    return row


def small_mirror(tmp_path: Path, edit) -> Path:
    """A mirror made of symlinks to the corpus' AAPL 10-Q files and an edited copy of their manifest rows."""
    mirror = tmp_path / "mirror"
    rows = aapl_q_rows()
    for row in rows:
        target = mirror / "edgar" / row["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(CORPUS / "edgar" / row["path"])
    edit(rows)
    write_manifest(mirror / "edgar" / "MANIFEST.csv", rows)
    return mirror


def manifest_line(mirror: Path, period: str) -> int:
    """The line (header = 1) of the small mirror's MANIFEST.csv that holds the row of `period`."""
    lines = (mirror / "edgar" / "MANIFEST.csv").read_text(encoding="utf-8").splitlines()
    (line,) = [n for n, text in enumerate(lines, 1) if period in next(csv.reader([text]))]
    return line


def test_symlinked_mirror_works(tmp_path):
    _, _, latest = earliest_middle_latest()
    mirror = small_mirror(tmp_path, lambda rows: None)
    cfg = make_cfg(mirror, tmp_path / "data", [aapl_q()])
    assert mirror_edgar(cfg, aapl_q(), latest["period_end"]).sha256 == latest["sha256"]


def test_a_link_out_of_the_mirror_is_refused_unless_allowed(tmp_path):
    _, _, latest = earliest_middle_latest()
    period = latest["period_end"]
    mirror = small_mirror(tmp_path, lambda rows: None)  # every file is a link into the shared corpus
    strict = FrameConfig(
        build=BuildSettings(data_dir=tmp_path / "data"),
        source=SourceConfig(mode="mirror", mirror=mirror),
        domains=[aapl_q()],
    )
    line = manifest_line(mirror, period)
    with pytest.raises(
        FrameInputError, match=rf"MANIFEST\.csv:{line} .*symbolic link that leads outside the mirror"
    ):
        mirror_edgar(strict, aapl_q(), period)
    inside = mirror / "edgar" / latest["path"]
    inside.unlink()
    (mirror / "store").mkdir()
    (mirror / "store" / "f.htm").write_bytes((CORPUS / "edgar" / latest["path"]).read_bytes())
    inside.symlink_to(mirror / "store" / "f.htm")  # a link that stays inside the mirror folder is fine
    assert mirror_edgar(strict, aapl_q(), period).sha256 == latest["sha256"]


def test_missing_file_is_named(tmp_path):
    _, middle, _ = earliest_middle_latest()
    period = middle["period_end"]
    gone = middle["path"].removesuffix(".htm") + "-gone.htm"

    def edit(rows):
        row_for(rows, period)["path"] = gone

    mirror = small_mirror(tmp_path, edit)
    cfg = make_cfg(mirror, tmp_path / "data", [aapl_q()])
    with pytest.raises(FrameInputError) as err:
        fetch_snapshot(cfg, aapl_q(), period)
    msg = str(err.value)
    assert f"MANIFEST.csv:{manifest_line(mirror, period)} " in msg
    assert "missing file" in msg and Path(gone).name in msg
    assert not (tmp_path / "data").exists()  # nothing stored
    # the other rows still work
    for other in aapl_q().snapshots:
        if other != period:
            assert fetch_snapshot(cfg, aapl_q(), other)[0].period_end == other


def test_sha_mismatch_is_reported(tmp_path):
    earliest, _, _ = earliest_middle_latest()
    period = earliest["period_end"]

    def edit(rows):
        row_for(rows, period)["sha256"] = "0" * 64

    mirror = small_mirror(tmp_path, edit)
    cfg = make_cfg(mirror, tmp_path / "data", [aapl_q()])
    name = re.escape(Path(earliest["path"]).name)
    with pytest.raises(
        FrameInputError, match=rf"MANIFEST\.csv:{manifest_line(mirror, period)} .*sha256 mismatch .*{name}"
    ):
        fetch_snapshot(cfg, aapl_q(), period)


def test_changed_file_is_reported(tmp_path):
    _, _, latest = earliest_middle_latest()
    mirror = small_mirror(tmp_path, lambda rows: None)
    target = mirror / "edgar" / latest["path"]
    data = bytearray(target.read_bytes())
    target.unlink()
    data[1000] ^= 1
    target.write_bytes(bytes(data))
    cfg = make_cfg(mirror, tmp_path / "data", [aapl_q()])
    with pytest.raises(FrameInputError, match="sha256 mismatch"):
        mirror_edgar(cfg, aapl_q(), latest["period_end"])


def test_no_row_names_ticker_form_period(tmp_path):
    _, _, latest = earliest_middle_latest()
    absent = dt.date.fromisoformat(latest["period_end"]) + dt.timedelta(days=1)
    assert absent.isoformat() not in {r["period_end"] for r in aapl_q_rows()}
    domain = aapl_q().model_copy(update={"periods": [absent]})
    cfg = make_cfg(CORPUS, tmp_path / "data", [domain])
    with pytest.raises(FrameInputError, match=f"ticker AAPL, form 10-Q, period_end {absent}"):
        fetch_snapshot(cfg, domain, absent.isoformat())


def test_unknown_snapshot_and_empty_window(tmp_path):
    earliest, _, _ = earliest_middle_latest()
    unknown = (dt.date.fromisoformat(earliest["period_end"]) - dt.timedelta(days=1)).isoformat()
    assert unknown not in aapl_q().snapshots
    cfg = make_cfg(CORPUS, tmp_path / "data", [aapl_q(), GW])
    with pytest.raises(FrameInputError, match="unknown snapshot"):
        fetch_snapshot(cfg, aapl_q(), unknown)
    # the year before the topic's first paper
    year = min(days_covered(r["first_version_date"])[0] for r in papers() if r["topic"] == GW.topic).year - 1
    empty = arxiv_domain("gw", GW.topic, 3, {"W0": (f"{year}-01-01", f"{year}-12-31")})
    assert window_papers(papers(), empty, "W0") == []
    cfg = make_cfg(CORPUS, tmp_path / "data", [empty])
    with pytest.raises(FrameInputError, match="no gravitational-wave-astrophysics paper .* window W0"):
        mirror_arxiv(cfg, empty, "W0")


@pytest.mark.parametrize("bad", ["../../etc/passwd", "/etc/passwd", "AAPL/../../../x.htm", "a\\b.htm"])
def test_manifest_path_escape_rejected(tmp_path, bad):
    earliest, _, _ = earliest_middle_latest()

    def edit(rows):
        row_for(rows, earliest["period_end"])["path"] = bad

    cfg = make_cfg(small_mirror(tmp_path, edit), tmp_path / "data", [aapl_q()])
    with pytest.raises(FrameInputError, match="unsafe path"):
        mirror_edgar(cfg, aapl_q(), earliest["period_end"])


def test_arxiv_missing_file_named(tmp_path):
    rows = papers()
    picked = {w.label: window_papers(rows, GW, w.label) for w in GW.windows}
    gone = picked["W1"][len(picked["W1"]) // 2]
    others = {label: ids for label, ids in picked.items() if ids and gone not in ids}
    assert others  # some window does not need the missing paper
    for row in rows:
        if row["arxiv_id"] == gone:
            row["path"] = f"{GW.topic}/missing.html"
    mirror = tmp_path / "mirror"
    write_manifest(mirror / "arxiv" / "MANIFEST.csv", rows)
    (mirror / "arxiv" / GW.topic).symlink_to(CORPUS / "arxiv" / GW.topic)
    cfg = make_cfg(mirror, tmp_path / "data", [GW])
    with pytest.raises(FrameInputError, match=r"missing file .*missing\.html"):
        mirror_arxiv(cfg, GW, "W1")
    for label, ids in others.items():
        assert [r.arxiv_id for r in mirror_arxiv(cfg, GW, label)] == ids


# ---- store --------------------------------------------------------------------------------------


def provenance(**over):
    base = dict(source="edgar", origin="live", location="https://example.test/x", domain="d", snapshot="s1")
    return {**base, **over}


@pytest.mark.parametrize(
    "over",
    [
        {"domain": ".."},
        {"domain": "a/b"},
        {"domain": "/tmp/abs"},
        {"domain": "x\x00y"},
        {"domain": ""},
        {"snapshot": "../../escape"},
        {"snapshot": ".."},
        {"snapshot": "W1/../../x"},
        {"source": "../edgar"},
    ],
)
def test_store_rejects_path_escape(tmp_path, over):
    data_dir = tmp_path / "data"
    with pytest.raises(FrameInputError):
        store_raw(data_dir, b"hello", ".htm", **provenance(**over))
    assert not any(p.is_file() for p in tmp_path.rglob("*"))


@pytest.mark.parametrize("ext", ["/../x", ".h/tm", "htm", ".a\x00"])
def test_store_rejects_bad_extension(tmp_path, ext):
    with pytest.raises(FrameInputError):
        store_raw(tmp_path, b"hello", ext, **provenance())


def test_store_layout_idempotence_and_tamper_check(tmp_path):
    raw = store_raw(tmp_path, b"hello", ".htm", **provenance(accession="0000320193-25-000057"))
    sha = hashlib.sha256(b"hello").hexdigest()
    assert raw.path == f"raw/sha256/{sha[:2]}/{sha}.htm"  # relative to the data folder
    assert raw.fetched_at.endswith("Z") and raw.size == 5
    record = tmp_path / "raw/provenance/edgar/d/s1" / f"{sha}.json"
    assert json.loads(record.read_text())["accession"] == "0000320193-25-000057"
    state = tree_state(tmp_path)
    assert store_raw(tmp_path, b"hello", ".htm", **provenance(accession="0000320193-25-000057")) == raw
    assert tree_state(tmp_path) == state
    # new provenance for the same bytes updates the record, never the blob
    other = store_raw(tmp_path, b"hello", ".htm", **provenance(location="https://example.test/y"))
    assert (
        other.location.endswith("/y")
        and tree_state(tmp_path)[f"raw/sha256/{sha[:2]}/{sha}.htm"]
        == state[f"raw/sha256/{sha[:2]}/{sha}.htm"]
    )
    blob = tmp_path / raw.path
    assert not os.access(blob, os.W_OK) or os.geteuid() == 0  # blobs are read-only
    blob.chmod(0o644)
    blob.write_bytes(b"HELLO")
    with pytest.raises(FrameInputError, match=f"{blob}.*changed.*frame rerun fetch"):
        read_raw(raw, tmp_path)  # a live fetch cannot be restored (tests/reliability/test_corrupt_cache.py)
    assert not blob.exists()  # quarantined
    blob.write_bytes(b"HELLO")
    store_raw(tmp_path, b"hello", ".htm", **provenance())  # storing the bytes again repairs the blob
    assert blob.read_bytes() == b"hello" and read_raw(raw, tmp_path) == b"hello"
    blob.unlink()
    with pytest.raises(FrameInputError, match="missing"):
        read_raw(raw, tmp_path)


@pytest.mark.parametrize(
    "over",
    [
        {"origin": "mirror", "location": "/abs/corpus/edgar/AAPL/10-Q/2025-06-28.htm"},
        {"origin": "mirror", "location": "C:\\corpus\\edgar\\a.htm"},
        {"origin": "mirror", "location": "edgar/../../a.htm"},
        {"origin": "mirror", "location": ""},
        {"origin": "live", "location": "/abs/a.htm"},
        {"origin": "live", "location": "www.sec.gov/a.htm"},
    ],
)
def test_store_refuses_machine_paths_as_location(tmp_path, over):
    """A provenance record names its source portably: a URL or a path relative to the mirror."""
    with pytest.raises(FrameInputError, match="provenance.location"):
        store_raw(tmp_path, b"hello", ".htm", **provenance(**over))
    assert not any(p.is_file() for p in tmp_path.rglob("*"))


def test_store_rejects_bad_field_values(tmp_path):
    with pytest.raises(FrameInputError, match="provenance.origin"):
        store_raw(tmp_path, b"x", ".htm", **provenance(origin="web"))
    with pytest.raises(TypeError):
        store_raw(tmp_path, b"x", ".htm", sha256="0" * 64, **provenance())


def test_first_version_date_month_precision():
    assert parse_first_version("2022-10-23") == (dt.date(2022, 10, 23), dt.date(2022, 10, 23))
    assert parse_first_version("2024-02") == (dt.date(2024, 2, 1), dt.date(2024, 2, 29))
    assert parse_first_version("2021-12") == (dt.date(2021, 12, 1), dt.date(2021, 12, 31))
    with pytest.raises(ValueError):
        parse_first_version("2021")
