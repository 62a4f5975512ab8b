"""Mirror fetch + content-addressed store, on the real corpus bytes in ../shared/corpus."""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import json
import os
from collections import defaultdict
from pathlib import Path

import pytest

from schemas.config import ArxivDomain, ArxivWindow, BuildSettings, EdgarDomain, FrameConfig, SourceConfig
from schemas.sources import RawFile
from tasks.errors import FrameInputError
from tasks.fetch import fetch_snapshot
from tasks.fetch.mirror import mirror_arxiv, mirror_edgar, parse_first_version
from tasks.fetch.store import read_raw, store_raw

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
EDGAR_MANIFEST = CORPUS / "edgar" / "MANIFEST.csv"
ARXIV_MANIFEST = CORPUS / "arxiv" / "MANIFEST.csv"
CATEGORY = {"10-Q": "financial_quarterly", "10-K": "financial_annual"}

# Suggested windows of shared/corpus/arxiv/README.md and the papers the README lists for each.
GW_WINDOWS = {
    "W1": ("2021-01-01", "2022-06-30", ["2111.08717", "2111.13700", "2206.04062"]),
    "W2": ("2022-07-01", "2023-03-31", ["2207.12409", "2210.12834", "2302.05333"]),
    "W3": ("2023-04-01", "2024-12-31", ["2304.01288", "2306.17245", "2404.02210"]),
}
EXO_WINDOWS = {
    "W1": (
        "2020-10-01",
        "2021-11-30",
        ["2010.01074", "2102.05672", "2110.06271", "2110.11839", "2111.08660"],
    ),
    "W2": (
        "2022-09-01",
        "2024-02-29",
        ["2209.08940", "2305.14220", "2307.15137", "2309.04518", "2402.06835"],
    ),
    "W3": (
        "2024-05-01",
        "2025-06-30",
        ["2405.00850", "2405.05580", "2410.21190", "2504.04261", "2506.02907"],
    ),
}

pytestmark = pytest.mark.skipif(not EDGAR_MANIFEST.is_file(), reason="shared corpus not available")


def manifest_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def edgar_domains() -> list[EdgarDomain]:
    periods: dict[tuple[str, str], list[dt.date]] = defaultdict(list)
    for row in manifest_rows(EDGAR_MANIFEST):
        if not row["form"].startswith("meta:"):
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
            for label, (a, b, _) in windows.items()
        ],
    )


GW = arxiv_domain("gw", "gravitational-wave-astrophysics", 3, GW_WINDOWS)
EXO = arxiv_domain("exo", "exoplanets-and-host-stars", 5, EXO_WINDOWS)


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


@pytest.fixture(scope="module")
def fetched(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("data")
    cfg = make_cfg(CORPUS, data_dir, [*edgar_domains(), GW, EXO])
    return cfg, fetch_all(cfg)


def test_every_edgar_snapshot_matches_manifest(fetched):
    cfg, results = fetched
    rows = [r for r in manifest_rows(EDGAR_MANIFEST) if not r["form"].startswith("meta:")]
    assert len(rows) == 14
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


@pytest.mark.parametrize(("domain", "windows"), [(GW, GW_WINDOWS), (EXO, EXO_WINDOWS)])
def test_arxiv_windows_pick_readme_papers(fetched, domain, windows):
    cfg, results = fetched
    sha = {r["arxiv_id"]: r for r in manifest_rows(ARXIV_MANIFEST)}
    for label, (_, _, expected) in windows.items():
        raws = results[(domain.name, label)]
        assert [r.arxiv_id for r in raws] == expected
        for raw in raws:
            row = sha[raw.arxiv_id]
            assert raw.sha256 == row["sha256"]
            assert hashlib.sha256(read_raw(raw, cfg.build.data_dir)).hexdigest() == row["sha256"]
            assert (raw.title, raw.first_version_date) == (row["title"], row["first_version_date"])
            assert raw.location == f"arxiv/{row['path']}"
            assert (raw.source, raw.origin, raw.snapshot) == ("arxiv", "mirror", label)
            assert raw.path.endswith(".html")


def test_second_fetch_writes_nothing(fetched):
    cfg, first = fetched
    before = tree_state(cfg.build.data_dir)
    assert len([k for k in before if k.startswith("raw/sha256/")]) == 14 + 9 + 15
    again = fetch_all(cfg)
    assert again == first  # same records, same fetched_at
    assert tree_state(cfg.build.data_dir) == before
    assert not list(cfg.build.data_dir.rglob("*.tmp"))


# ---- a small copied mirror with broken rows ----------------------------------------------------


def small_mirror(tmp_path: Path, edit) -> Path:
    """A mirror made of symlinks to a few corpus files and an edited copy of the manifests."""
    mirror = tmp_path / "mirror"
    header = EDGAR_MANIFEST.read_text().splitlines()[0].split(",")
    rows = sorted(
        (r for r in manifest_rows(EDGAR_MANIFEST) if r["ticker"] == "AAPL" and r["form"] == "10-Q"),
        key=lambda r: r["period_end"],
    )  # 2023-07-01 (MANIFEST line 2), 2025-03-29 (line 3), 2025-06-28 (line 4)
    for row in rows:
        target = mirror / "edgar" / row["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(CORPUS / "edgar" / row["path"])
    edit(rows)
    with (mirror / "edgar" / "MANIFEST.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows)
    return mirror


AAPL_Q = EdgarDomain(
    kind="edgar",
    name="aapl-10q",
    category="financial_quarterly",
    ticker="AAPL",
    form="10-Q",
    periods=[dt.date(2023, 7, 1), dt.date(2025, 3, 29), dt.date(2025, 6, 28)],
)


def test_symlinked_mirror_works(tmp_path):
    mirror = small_mirror(tmp_path, lambda rows: None)
    cfg = make_cfg(mirror, tmp_path / "data", [AAPL_Q])
    raw = mirror_edgar(cfg, AAPL_Q, "2025-06-28")
    assert raw.sha256 == "ec86034c4029ea892d587f95cf5c9c2e3a08228929fbabf269dec3c1cb26d768"


def test_a_link_out_of_the_mirror_is_refused_unless_allowed(tmp_path):
    mirror = small_mirror(tmp_path, lambda rows: None)  # every file is a link into the shared corpus
    strict = FrameConfig(
        build=BuildSettings(data_dir=tmp_path / "data"),
        source=SourceConfig(mode="mirror", mirror=mirror),
        domains=[AAPL_Q],
    )
    with pytest.raises(
        FrameInputError, match=r"MANIFEST\.csv:4 .*symbolic link that leads outside the mirror"
    ):
        mirror_edgar(strict, AAPL_Q, "2025-06-28")
    inside = mirror / "edgar" / "AAPL" / "10-Q" / "2025-06-28.htm"
    inside.unlink()
    (mirror / "store").mkdir()
    (mirror / "store" / "f.htm").write_bytes((CORPUS / "edgar" / "AAPL/10-Q/2025-06-28.htm").read_bytes())
    inside.symlink_to(mirror / "store" / "f.htm")  # a link that stays inside the mirror folder is fine
    assert not mirror_edgar(strict, AAPL_Q, "2025-06-28").sha256.startswith("0")


def test_missing_file_is_named(tmp_path):
    def edit(rows):
        rows[1]["path"] = "AAPL/10-Q/2025-03-29-gone.htm"

    cfg = make_cfg(small_mirror(tmp_path, edit), tmp_path / "data", [AAPL_Q])
    with pytest.raises(FrameInputError) as err:
        fetch_snapshot(cfg, AAPL_Q, "2025-03-29")
    msg = str(err.value)
    assert "MANIFEST.csv:3" in msg and "missing file" in msg and "2025-03-29-gone.htm" in msg
    assert not (tmp_path / "data").exists()  # nothing stored
    # the other rows still work
    assert fetch_snapshot(cfg, AAPL_Q, "2025-06-28")[0].period_end == "2025-06-28"


def test_sha_mismatch_is_reported(tmp_path):
    def edit(rows):
        rows[0]["sha256"] = "0" * 64

    cfg = make_cfg(small_mirror(tmp_path, edit), tmp_path / "data", [AAPL_Q])
    with pytest.raises(FrameInputError, match=r"MANIFEST\.csv:2 .*sha256 mismatch .*2023-07-01\.htm"):
        fetch_snapshot(cfg, AAPL_Q, "2023-07-01")


def test_changed_file_is_reported(tmp_path):
    mirror = small_mirror(tmp_path, lambda rows: None)
    target = mirror / "edgar" / "AAPL/10-Q/2025-06-28.htm"
    data = bytearray(target.read_bytes())
    target.unlink()
    data[1000] ^= 1
    target.write_bytes(bytes(data))
    cfg = make_cfg(mirror, tmp_path / "data", [AAPL_Q])
    with pytest.raises(FrameInputError, match="sha256 mismatch"):
        mirror_edgar(cfg, AAPL_Q, "2025-06-28")


def test_no_row_names_ticker_form_period(tmp_path):
    domain = AAPL_Q.model_copy(update={"periods": [dt.date(2024, 3, 30)]})
    cfg = make_cfg(CORPUS, tmp_path / "data", [domain])
    with pytest.raises(FrameInputError, match="ticker AAPL, form 10-Q, period_end 2024-03-30"):
        fetch_snapshot(cfg, domain, "2024-03-30")


def test_unknown_snapshot_and_empty_window(tmp_path):
    cfg = make_cfg(CORPUS, tmp_path / "data", [AAPL_Q, GW])
    with pytest.raises(FrameInputError, match="unknown snapshot"):
        fetch_snapshot(cfg, AAPL_Q, "2025-03-30")
    empty = arxiv_domain("gw", "gravitational-wave-astrophysics", 3, {"W0": ("2019-01-01", "2019-12-31", [])})
    cfg = make_cfg(CORPUS, tmp_path / "data", [empty])
    with pytest.raises(FrameInputError, match="no gravitational-wave-astrophysics paper .* window W0"):
        mirror_arxiv(cfg, empty, "W0")


@pytest.mark.parametrize("bad", ["../../etc/passwd", "/etc/passwd", "AAPL/../../../x.htm", "a\\b.htm"])
def test_manifest_path_escape_rejected(tmp_path, bad):
    def edit(rows):
        rows[0]["path"] = bad

    cfg = make_cfg(small_mirror(tmp_path, edit), tmp_path / "data", [AAPL_Q])
    with pytest.raises(FrameInputError, match="unsafe path"):
        mirror_edgar(cfg, AAPL_Q, "2023-07-01")


def test_arxiv_missing_file_named(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "arxiv").mkdir(parents=True)
    text = ARXIV_MANIFEST.read_text().replace(
        "gravitational-wave-astrophysics/2111.13700.html", "gravitational-wave-astrophysics/missing.html"
    )
    (mirror / "arxiv" / "MANIFEST.csv").write_text(text)
    (mirror / "arxiv" / "gravitational-wave-astrophysics").symlink_to(
        CORPUS / "arxiv" / "gravitational-wave-astrophysics"
    )
    cfg = make_cfg(mirror, tmp_path / "data", [GW])
    with pytest.raises(FrameInputError, match=r"missing file .*missing\.html"):
        mirror_arxiv(cfg, GW, "W1")
    assert [r.arxiv_id for r in mirror_arxiv(cfg, GW, "W2")] == GW_WINDOWS["W2"][2]


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
