"""Live EDGAR / arXiv fetch against local fakes serving real corpus bytes (no network)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import tempfile
from pathlib import Path

import pytest
import responses

from schemas.config import (
    ArxivDomain,
    ArxivWindow,
    BuildSettings,
    EdgarAccess,
    EdgarDomain,
    FrameConfig,
    SourceConfig,
)
from tasks.errors import FrameInputError
from tasks.fetch import edgar as edgar_mod
from tasks.fetch import read_raw
from tasks.fetch.arxiv import API_URL_ENV, live_arxiv, split_version, window_query
from tasks.fetch.edgar import live_edgar
from tasks.sources import fetch_snapshot

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
AAPL_DOC = CORPUS / "edgar" / "AAPL" / "10-Q" / "2025-03-29.htm"
AAPL_SUBMISSIONS = CORPUS / "edgar" / "AAPL" / "meta" / "CIK0000320193.json"
API = CORPUS / "arxiv" / "api"
GW = CORPUS / "arxiv" / "gravitational-wave-astrophysics"

pytestmark = pytest.mark.skipif(not AAPL_DOC.is_file(), reason="shared corpus not available")

ACCESSION = "0000320193-25-000057"
FOLDER = "https://www.sec.gov/Archives/edgar/data/320193/000032019325000057"
TICKER_MAP_URL = "https://www.sec.gov/files/company_tickers_exchange.json"
SUBMISSIONS_URL = "https://data.sec.gov/submissions/CIK0000320193.json"
SUBMISSIONS_PAGE2_URL = "https://data.sec.gov/submissions/CIK0000320193-submissions-001.json"
PRIMARY_URL = f"{FOLDER}/aapl-20250329.htm"
FULL_URL = f"{FOLDER}/{ACCESSION}.txt"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def full_submission(doc: bytes) -> bytes:
    """EDGAR's SGML wrapper (`<accession>.txt`) around the real primary document."""
    head = (
        f"<SEC-DOCUMENT>{ACCESSION}.txt : 20250502\n<SEC-HEADER>{ACCESSION}.hdr.sgml : 20250502\n"
        f"ACCESSION NUMBER:\t\t{ACCESSION}\nCONFORMED SUBMISSION TYPE:\t10-Q\n"
        "CONFORMED PERIOD OF REPORT:\t20250329\nFILED AS OF DATE:\t\t20250502\nFILER:\n\tCOMPANY DATA:\t\n"
        "\t\tCOMPANY CONFORMED NAME:\t\t\tApple Inc.\n\t\tCENTRAL INDEX KEY:\t\t\t0000320193\n</SEC-HEADER>\n"
        "<DOCUMENT>\n<TYPE>10-Q\n<SEQUENCE>1\n<FILENAME>aapl-20250329.htm\n<DESCRIPTION>10-Q\n<TEXT>\n<XBRL>\n"
    ).encode()
    return head + doc + b"\n</XBRL>\n</TEXT>\n</DOCUMENT>\n</SEC-DOCUMENT>\n"


# ---- EDGAR ----------------------------------------------------------------------------------


def edgar_cfg(
    data_dir: Path, name: str = "Frame Tests", email: str = "frame@example.org", **domain
) -> FrameConfig:
    dom = EdgarDomain(
        kind="edgar",
        name="aapl-10q",
        category="financial_quarterly",
        ticker="AAPL",
        form="10-Q",
        periods=[dt.date(2025, 3, 29)],
        **domain,
    )
    return FrameConfig(
        build=BuildSettings(data_dir=data_dir),
        source=SourceConfig(mode="live", edgar=EdgarAccess(user_agent_name=name, user_agent_email=email)),
        domains=[dom],
    )


@pytest.fixture
def sec(monkeypatch, tmp_path):
    """`responses` mock of the SEC endpoints the Downloader calls, serving real corpus bytes."""
    monkeypatch.delenv("FRAME_EDGAR_NAME", raising=False)
    monkeypatch.delenv("FRAME_EDGAR_EMAIL", raising=False)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))  # the downloader's temp folder must be cleaned up
    doc = AAPL_DOC.read_bytes()
    ticker_map = {
        "fields": ["cik", "name", "ticker", "exchange"],
        "data": [[320193, "Apple Inc.", "AAPL", "Nasdaq"]],
    }
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        rsps.get(TICKER_MAP_URL, json=ticker_map)
        rsps.get(SUBMISSIONS_URL, body=AAPL_SUBMISSIONS.read_bytes(), content_type="application/json")
        page2 = {k: [] for k in ("accessionNumber", "filingDate", "reportDate", "form", "primaryDocument")}
        rsps.get(SUBMISSIONS_PAGE2_URL, json=page2)
        rsps.get(FULL_URL, body=full_submission(doc), content_type="text/plain")
        rsps.get(PRIMARY_URL, body=doc, content_type="text/html")
        yield rsps, tmp


def test_live_edgar_stores_real_filing(sec, tmp_path):
    rsps, tmp = sec
    cfg = edgar_cfg(tmp_path / "data")
    (raw,) = fetch_snapshot(cfg, cfg.domains[0], "2025-03-29")
    corpus = AAPL_DOC.read_bytes()
    assert raw.sha256 == sha(corpus) == "487848fb1b223cb23fe4f359fce0795902800a81f386d372fc2507d36569a003"
    assert read_raw(raw, cfg.build.data_dir) == corpus
    assert (raw.origin, raw.source, raw.accession, raw.location) == ("live", "edgar", ACCESSION, PRIMARY_URL)
    assert (raw.ticker, raw.cik, raw.form, raw.period_end, raw.title) == (
        "AAPL",
        "0000320193",
        "10-Q",
        "2025-03-29",
        "Apple Inc.",
    )
    record = Path(cfg.build.data_dir) / "raw/provenance/edgar/aapl-10q/2025-03-29" / f"{raw.sha256}.json"
    assert json.loads(record.read_text())["accession"] == ACCESSION
    urls = [c.request.url for c in rsps.calls]
    # one submissions page, one filing: the latest 10-Q filed within 100 days covers the period
    assert urls == [TICKER_MAP_URL, SUBMISSIONS_URL, FULL_URL, PRIMARY_URL]
    assert {c.request.headers["User-Agent"] for c in rsps.calls} == {"Frame Tests frame@example.org"}
    assert list(tmp.iterdir()) == []


def test_live_edgar_by_cik(sec, tmp_path):
    cfg = edgar_cfg(tmp_path / "data", cik="320193")
    raw = live_edgar(cfg, cfg.domains[0], "2025-03-29")
    assert raw.sha256 == sha(AAPL_DOC.read_bytes()) and raw.cik == "0000320193"


def test_live_edgar_period_mismatch(sec, tmp_path):
    rsps, tmp = sec
    cfg = edgar_cfg(tmp_path / "data")
    dom = cfg.domains[0].model_copy(update={"periods": [dt.date(2025, 3, 30)]})
    with pytest.raises(FrameInputError) as err:
        live_edgar(cfg, dom, "2025-03-30")
    assert f"no downloaded filing covers period 2025-03-30 ({ACCESSION}: 2025-03-29)" in str(err.value)
    # the second, wider pass read every submissions page and skipped the filing it had already
    assert [c.request.url for c in rsps.calls].count(PRIMARY_URL) == 1
    assert SUBMISSIONS_PAGE2_URL in [c.request.url for c in rsps.calls]
    assert list(tmp.iterdir()) == []
    assert not (tmp_path / "data").exists()


def test_live_edgar_nothing_filed(sec, tmp_path):
    cfg = edgar_cfg(tmp_path / "data")
    dom = cfg.domains[0].model_copy(update={"periods": [dt.date(2010, 3, 27)]})
    with pytest.raises(FrameInputError, match=r"no 10-Q filed between 2010-03-28 and 2010-07-05"):
        live_edgar(cfg, dom, "2010-03-27")


def test_live_edgar_download_error_is_reported(sec, tmp_path):
    rsps, tmp = sec
    rsps.replace(responses.GET, PRIMARY_URL, status=404)
    cfg = edgar_cfg(tmp_path / "data")
    with pytest.raises(FrameInputError) as err:
        live_edgar(cfg, cfg.domains[0], "2025-03-29")
    msg = str(err.value)
    assert "primary document not downloaded" in msg and "404" in msg and "\n" not in msg
    assert list(tmp.iterdir()) == []


def test_live_edgar_unknown_ticker(sec, tmp_path):
    cfg = edgar_cfg(tmp_path / "data")
    dom = cfg.domains[0].model_copy(update={"ticker": "ZZZZ"})
    with pytest.raises(FrameInputError, match="ZZZZ.*cannot be mapped to a CIK"):
        live_edgar(cfg, dom, "2025-03-29")


@pytest.mark.parametrize(("name", "email"), [("", ""), ("Frame Tests", ""), ("", "frame@example.org")])
def test_live_edgar_needs_user_agent_before_any_request(monkeypatch, tmp_path, name, email):
    monkeypatch.delenv("FRAME_EDGAR_NAME", raising=False)
    monkeypatch.delenv("FRAME_EDGAR_EMAIL", raising=False)

    def no_downloader(*args, **kwargs):
        raise AssertionError("Downloader constructed")

    monkeypatch.setattr(edgar_mod, "Downloader", no_downloader)
    cfg = edgar_cfg(tmp_path / "data", name=name, email=email)
    with responses.RequestsMock() as rsps, pytest.raises(FrameInputError) as err:
        fetch_snapshot(cfg, cfg.domains[0], "2025-03-29")
    assert len(rsps.calls) == 0
    assert str(err.value).startswith("source.edgar: live EDGAR needs a user agent name and email")
    assert "FRAME_EDGAR_NAME/FRAME_EDGAR_EMAIL" in str(err.value)


def test_live_edgar_user_agent_from_env(sec, monkeypatch, tmp_path):
    rsps, _ = sec
    monkeypatch.setenv("FRAME_EDGAR_NAME", "Env Name")
    monkeypatch.setenv("FRAME_EDGAR_EMAIL", "env@example.org")
    cfg = edgar_cfg(tmp_path / "data", name="", email="")
    live_edgar(cfg, cfg.domains[0], "2025-03-29")
    assert rsps.calls[0].request.headers["User-Agent"] == "Env Name env@example.org"


# ---- arXiv ----------------------------------------------------------------------------------


def arxiv_cfg(data_dir: Path, html_url: str, start: str, end: str, n: int = 3, query: str = "cat:math.CO"):
    dom = ArxivDomain(
        kind="arxiv",
        name="test-topic",
        category="academic_simple",
        topic="test-topic",
        query=query,
        papers_per_window=n,
        windows=[ArxivWindow(label="W1", start=dt.date.fromisoformat(start), end=dt.date.fromisoformat(end))],
    )
    return FrameConfig(
        build=BuildSettings(data_dir=data_dir),
        source=SourceConfig(mode="live", arxiv_html_url=html_url),
        domains=[dom],
    )


def serve_feed(httpserver, name: str, status: int = 200) -> None:
    httpserver.expect_request("/api/query").respond_with_data(
        (API / name).read_bytes(), status=status, content_type="application/atom+xml"
    )


def test_live_arxiv_stores_paper_html(httpserver, tmp_path):
    serve_feed(httpserver, "arxivpy_id_1605.08386.xml")
    paper = (GW / "2207.12409.html").read_bytes()
    httpserver.expect_request("/html/1605.08386v1").respond_with_data(paper, content_type="text/html")
    cfg = arxiv_cfg(tmp_path / "data", httpserver.url_for("/html/{id}"), "2016-01-01", "2016-12-31")
    (raw,) = live_arxiv(
        cfg, cfg.domains[0], "W1", api_url=httpserver.url_for("/api/query?{}"), delay_seconds=0
    )
    assert raw.sha256 == sha(paper) and read_raw(raw, cfg.build.data_dir) == paper
    assert (raw.arxiv_id, raw.arxiv_version, raw.first_version_date) == ("1605.08386", "v1", "2016-05-26")
    assert raw.title == "Heat-bath random walks with Markov bases"
    assert (raw.source, raw.origin, raw.location) == (
        "arxiv",
        "live",
        httpserver.url_for("/html/1605.08386v1"),
    )
    assert raw.license is None
    api_request = httpserver.log[0][0]
    assert (
        api_request.args["search_query"] == "(cat:math.CO) AND submittedDate:[201601010000 TO 201612312359]"
    )
    assert (api_request.args["sortBy"], api_request.args["sortOrder"]) == ("submittedDate", "ascending")
    assert api_request.args["max_results"] == "3"


def test_live_arxiv_orders_and_limits(httpserver, tmp_path):
    # 5 real cs.LG entries from one day, newest first; keep 3, stored oldest first
    serve_feed(httpserver, "paperpulse_search_cat_cs.LG.xml")
    files = {"2604.21930v1": "2207.12409", "2604.21927v1": "2306.17245", "2604.21923v1": "2302.05333"}
    for short, corpus_id in files.items():
        body = (GW / f"{corpus_id}.html").read_bytes()
        httpserver.expect_request(f"/html/{short}").respond_with_data(body, content_type="text/html")
    cfg = arxiv_cfg(tmp_path / "data", httpserver.url_for("/html/{id}"), "2026-04-01", "2026-04-30")
    raws = live_arxiv(cfg, cfg.domains[0], "W1", api_url=httpserver.url_for("/api/query"), delay_seconds=0)
    assert [r.arxiv_id for r in raws] == ["2604.21923", "2604.21927", "2604.21930"]
    assert [r.sha256 for r in raws] == [
        sha((GW / f"{files[r.arxiv_id + 'v1']}.html").read_bytes()) for r in raws
    ]


def test_live_arxiv_drops_results_outside_window(httpserver, tmp_path):
    serve_feed(httpserver, "arxivpy_search_testing_start0_max10.xml")  # 10 entries, 2012..2025
    paper = (GW / "2207.12409.html").read_bytes()
    httpserver.expect_request(re.compile(r"^/html/.+")).respond_with_data(paper, content_type="text/html")
    cfg = arxiv_cfg(tmp_path / "data", httpserver.url_for("/html/{id}"), "2022-01-01", "2022-12-31", n=10)
    raws = live_arxiv(cfg, cfg.domains[0], "W1", api_url=httpserver.url_for("/api/query"), delay_seconds=0)
    assert [(r.arxiv_id, r.first_version_date) for r in raws] == [
        ("2202.12139", "2022-02-24"),
        ("2204.08348", "2022-04-18"),
    ]


def test_live_arxiv_old_style_id_via_env_and_dispatch(httpserver, tmp_path, monkeypatch):
    serve_feed(httpserver, "arxivpy_id_astro-ph_0601001.xml")
    paper = (GW / "2306.17245.html").read_bytes()
    httpserver.expect_request("/html/astro-ph/0601001v1").respond_with_data(paper, content_type="text/html")
    monkeypatch.setenv(API_URL_ENV, httpserver.url_for("/api/query?{}"))
    cfg = arxiv_cfg(tmp_path / "data", httpserver.url_for("/html/{id}"), "2006-01-01", "2006-01-31")
    (raw,) = fetch_snapshot(cfg, cfg.domains[0], "W1")
    assert (raw.arxiv_id, raw.arxiv_version, raw.sha256) == ("astro-ph/0601001", "v1", sha(paper))


def test_live_arxiv_404_is_clear(httpserver, tmp_path):
    serve_feed(httpserver, "arxivpy_id_1605.08386.xml")
    httpserver.expect_request("/html/1605.08386v1").respond_with_data("Not Found", status=404)
    cfg = arxiv_cfg(tmp_path / "data", httpserver.url_for("/html/{id}"), "2016-01-01", "2016-12-31")
    url = httpserver.url_for("/html/1605.08386v1")
    with pytest.raises(FrameInputError, match=f"^{re.escape(url)}: HTML download returned HTTP 404"):
        live_arxiv(cfg, cfg.domains[0], "W1", api_url=httpserver.url_for("/api/query"), delay_seconds=0)
    assert not (tmp_path / "data").exists()


def test_live_arxiv_rejects_non_latexml_page(httpserver, tmp_path):
    serve_feed(httpserver, "arxivpy_id_1605.08386.xml")
    landing = (
        b"<!DOCTYPE html><html><head><title>arXiv</title></head>"
        b"<body><h1>No HTML for 1605.08386</h1></body></html>"
    )
    httpserver.expect_request("/html/1605.08386v1").respond_with_data(landing, content_type="text/html")
    cfg = arxiv_cfg(tmp_path / "data", httpserver.url_for("/html/{id}"), "2016-01-01", "2016-12-31")
    with pytest.raises(FrameInputError, match="not a LaTeXML HTML rendering"):
        live_arxiv(cfg, cfg.domains[0], "W1", api_url=httpserver.url_for("/api/query"), delay_seconds=0)
    assert not (tmp_path / "data").exists()


def test_live_arxiv_api_error_and_empty_feed(httpserver, tmp_path):
    cfg = arxiv_cfg(tmp_path / "data", httpserver.url_for("/html/{id}"), "2016-01-01", "2016-12-31")
    serve_feed(httpserver, "arxivpy_id_abc_error.xml", status=400)
    with pytest.raises(FrameInputError, match="arXiv API query failed: Page request resulted in HTTP 400"):
        live_arxiv(cfg, cfg.domains[0], "W1", api_url=httpserver.url_for("/api/query"), num_retries=0)
    httpserver.clear()
    serve_feed(httpserver, "arxivpy_id_0000.0000_empty.xml")
    with pytest.raises(FrameInputError, match="arXiv returned no paper first submitted in window W1"):
        live_arxiv(cfg, cfg.domains[0], "W1", api_url=httpserver.url_for("/api/query"), num_retries=0)


def test_query_and_id_helpers():
    window = ArxivWindow(label="W2", start=dt.date(2022, 7, 1), end=dt.date(2023, 3, 31))
    assert window_query("cat:gr-qc AND abs:population", window) == (
        "(cat:gr-qc AND abs:population) AND submittedDate:[202207010000 TO 202303312359]"
    )
    assert split_version("2111.08717v12") == ("2111.08717", "v12")
    assert split_version("astro-ph/9710163") == ("astro-ph/9710163", None)


def test_live_edgar_document_name_from_submissions_json(sec, tmp_path):
    rsps, _ = sec
    rsps.replace(responses.GET, FULL_URL, body=b"no SGML header here", content_type="text/plain")
    cfg = edgar_cfg(tmp_path / "data")
    raw = live_edgar(cfg, cfg.domains[0], "2025-03-29")
    assert (raw.location, raw.cik, raw.title) == (PRIMARY_URL, "0000320193", None)
    assert [c.request.url for c in rsps.calls].count(SUBMISSIONS_URL) == 2
