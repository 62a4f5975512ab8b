"""configs/frame120.toml: a live build the size of paper 000 (4 categories x 15 domains x 3 consecutive
snapshots), validated by the config schema; its filers' CIKs are the ones their filings in the shared
corpus declare, its periods and windows are consecutive."""

from __future__ import annotations

import csv
import datetime as dt
import re
from collections import Counter

import pytest

from schemas.config import ArxivDomain, EdgarDomain
from tasks.config import load_config
from tasks.errors import ConfigError
from tests.conftest import CORPUS, ROOT

CONFIG = ROOT / "configs" / "frame120.toml"
CATEGORIES = ("financial_quarterly", "financial_annual", "academic_simple", "academic_complex")
ARXIV_CATEGORY = re.compile(r"\bcat:(?:[a-z-]+)(?:\.[A-Za-z-]+)?\b")


@pytest.fixture(scope="module")
def cfg():
    return load_config(CONFIG)


def test_frame120_is_four_categories_of_fifteen_domains_of_three_snapshots(cfg):
    assert Counter(d.category for d in cfg.domains) == dict.fromkeys(CATEGORIES, 15)
    assert all(len(d.snapshots) == 3 for d in cfg.domains)
    assert sum(len(d.snapshots) for d in cfg.domains) == 180
    assert len({d.name for d in cfg.domains}) == 60
    assert cfg.source.mode == "live" and cfg.llm.backend == "openai"
    assert cfg.llm.model in cfg.prices  # the dry run prices the configured model


def test_filings_have_ten_digit_ciks_and_consecutive_periods(cfg):
    filings = [d for d in cfg.domains if isinstance(d, EdgarDomain)]
    assert len(filings) == 30
    for d in filings:
        assert d.cik is not None and re.fullmatch(r"\d{10}", d.cik), (d.name, d.cik)
        gaps = [(b - a).days for a, b in zip(d.periods, d.periods[1:], strict=False)]
        if d.form == "10-Q":  # consecutive quarters of one fiscal year (no 10-Q covers the fourth)
            assert d.category == "financial_quarterly"
            assert all(80 <= g <= 100 for g in gaps), (d.name, d.periods)
        else:  # consecutive fiscal years (52/53-week years included)
            assert d.category == "financial_annual"
            assert all(357 <= g <= 372 for g in gaps), (d.name, d.periods)
        assert d.periods[-1] < dt.date.today()


def test_arxiv_topics_have_category_queries_and_consecutive_windows(cfg):
    papers = [d for d in cfg.domains if isinstance(d, ArxivDomain)]
    assert len(papers) == 30 and len({d.query for d in papers}) == 30
    for d in papers:
        assert ARXIV_CATEGORY.search(d.query), d.query
        for a, b in zip(d.windows, d.windows[1:], strict=False):
            assert b.start == a.end + dt.timedelta(days=1), (d.name, a, b)  # adjacent, no gap
        assert all(80 <= (w.end - w.start).days <= 95 for w in d.windows)
        assert d.windows[-1].end < dt.date.today()
    simple = {d.papers_per_window for d in papers if d.category == "academic_simple"}
    complex_ = {d.papers_per_window for d in papers if d.category == "academic_complex"}
    assert max(simple) < min(complex_)  # complex topics draw on more papers per report


def _corpus_ciks() -> dict[str, set[str]]:
    """ticker -> the CIKs its filings in the shared corpus declare (MANIFEST column or dei in the filing)."""
    out: dict[str, set[str]] = {}
    with (CORPUS / "edgar" / "MANIFEST.csv").open(newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            out.setdefault(r["ticker"], set()).add(r["cik"].zfill(10))
    pattern = re.compile(rb'name="dei:EntityCentralIndexKey"[^>]*>\s*(\d{1,10})\s*<')
    for path in sorted((CORPUS / "edgar-wide").glob("*/*/*.htm")):
        m = pattern.search(path.read_bytes())
        if m:
            out.setdefault(path.parts[-3], set()).add(m.group(1).decode().zfill(10))
    return out


@pytest.mark.skipif(not (CORPUS / "edgar-wide").is_dir(), reason="shared corpus not found")
def test_ciks_are_the_ones_the_filers_declare(cfg):
    known = _corpus_ciks()
    for d in cfg.domains:
        if isinstance(d, EdgarDomain):
            assert d.ticker in known, d.ticker
            assert known[d.ticker] == {d.cik}, (d.ticker, d.cik, known[d.ticker])


def test_a_broken_copy_fails_with_one_line_naming_the_field(tmp_path):
    text = CONFIG.read_text(encoding="utf-8").replace('cik = "0001018724"', 'cik = "10187240001018724"', 1)
    bad = tmp_path / "frame120.toml"
    bad.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(bad)
    msg = str(err.value)
    assert "\n" not in msg and "cik" in msg and "up to 10 digits" in msg, msg
