"""Config loading: the demo config is valid and covers the corpus; every bad field is one clear line."""

from __future__ import annotations

from pathlib import Path

import pytest

from schemas.config import ArxivDomain, EdgarDomain
from tasks.config import load_config
from tasks.errors import ConfigError
from tests.conftest import ROOT, arxiv_rows, edgar_rows

DEMO = ROOT / "configs" / "demo.toml"


def test_demo_config_covers_every_corpus_filing_and_paper(corpus):
    cfg = load_config(DEMO)
    assert cfg.source.mode == "mirror" and cfg.source.mirror == corpus.resolve()
    filings = {
        (d.ticker, d.form, p.isoformat())
        for d in cfg.domains
        if isinstance(d, EdgarDomain)
        for p in d.periods
    }
    assert filings == {(r["ticker"], r["form"], r["period_end"]) for r in edgar_rows()}
    topics = {d.topic: d for d in cfg.domains if isinstance(d, ArxivDomain)}
    assert set(topics) == {r["topic"] for r in arxiv_rows()}
    for topic, d in topics.items():
        n = sum(1 for r in arxiv_rows() if r["topic"] == topic)
        assert d.papers_per_window * len(d.windows) >= n
    assert {d.category for d in cfg.domains} == {
        "financial_quarterly",
        "financial_annual",
        "academic_simple",
        "academic_complex",
    }


GOOD = """
[source]
mode = "mirror"
mirror = "corpus"
[[domains]]
kind = "edgar"
name = "AAPL-10-Q"
category = "financial_quarterly"
ticker = "AAPL"
form = "10-Q"
periods = ["2023-07-01", "2025-03-29"]
[[domains]]
kind = "arxiv"
name = "gw"
category = "academic_simple"
topic = "gw"
query = "cat:astro-ph.HE"
papers_per_window = 3
windows = [{ label = "W1", start = "2021-11-01", end = "2022-06-30" }]
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "c.toml"
    p.write_text(text)
    return p


def test_good_config_resolves_paths_against_its_folder(tmp_path):
    cfg = load_config(write(tmp_path, GOOD))
    assert cfg.source.mirror == (tmp_path / "corpus").resolve()
    assert cfg.build.data_dir == (tmp_path / "data").resolve()
    assert cfg.domain("gw").snapshots == ["W1"]


@pytest.mark.parametrize(
    ("edit", "field", "words"),
    [
        (('form = "10-Q"', 'form = "8-K"'), "domains[0].form", "10-Q"),
        (('category = "financial_quarterly"', 'category = "financial_annual"'), "domains[0]", "10-Q"),
        (
            ('periods = ["2023-07-01", "2025-03-29"]', 'periods = ["2025-03-29", "2023-07-01"]'),
            "domains[0]",
            "ascending",
        ),
        (('periods = ["2023-07-01", "2025-03-29"]', 'periods = ["2023-13-01"]'), "domains[0].periods", ""),
        (('name = "AAPL-10-Q"', 'name = "../escape"'), "domains[0].name", "letters"),
        (('ticker = "AAPL"', 'ticker = "AA/PL"'), "domains[0].ticker", "ticker"),
        (("papers_per_window = 3", "papers_per_window = 0"), "domains[1].papers_per_window", ""),
        (('end = "2022-06-30"', 'end = "2020-06-30"'), "domains[1].windows[0]", "before"),
        (('mode = "mirror"\nmirror = "corpus"', 'mode = "mirror"'), "source", "mirror"),
        (('mode = "mirror"', 'mode = "ftp"'), "source.mode", ""),
        (('category = "academic_simple"', 'category = "financial_annual"'), "domains[1]", "academic"),
        (
            ('query = "cat:astro-ph.HE"', 'query = "cat:astro-ph.HE"\ncolour = "red"'),
            "domains[1]",
            "key 'colour'",
        ),
    ],
)
def test_bad_field_gives_one_line_naming_it(tmp_path, edit, field, words):
    old, new = edit
    assert old in GOOD
    path = write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    msg = str(err.value)
    assert "\n" not in msg
    assert str(path) in msg and f"field {field}" in msg
    assert words.lower() in msg.lower()


def test_not_toml_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(write(tmp_path, "[source\nmode="))
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "absent.toml")
    dup = GOOD.replace('name = "gw"', 'name = "AAPL-10-Q"')
    with pytest.raises(ConfigError, match="unique"):
        load_config(write(tmp_path, dup))


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        # the typo comes first, not the "Field required" it causes for the key it was meant to be
        (
            ('category = "financial_quarterly"', 'categroy = "financial_quarterly"'),
            "field domains[0]: unknown key 'categroy' (did you mean 'category'?) (+1 more)",
        ),
        (
            ("papers_per_window = 3", "paper_per_window = 3"),
            "field domains[1]: unknown key 'paper_per_window'",
        ),
        (('mode = "mirror"', 'mdoe = "mirror"'), "field source: unknown key 'mdoe' (did you mean 'mode'?)"),
        (("[source]", "[sourc]"), "unknown key 'sourc' (did you mean 'source'?)"),
        (
            ("[source]", "[llm]\ntemprature = 0.5\n[source]"),
            "field llm: unknown key 'temprature' (did you mean",
        ),
        (
            ('label = "W1"', 'lable = "W1"'),
            "field domains[1].windows[0]: unknown key 'lable' (did you mean 'label'?)",
        ),
        (
            ("[source]", "[prices.m]\ninput_per_mtok = 1\noutput_per_mtk = 2\n[source]"),
            "field prices.m: unknown key 'output_per_mtk' (did you mean 'output_per_mtok'?)",
        ),
        (("[source]", "[zzz]\n[source]"), "unknown key 'zzz'"),
    ],
)
def test_an_unknown_key_is_said_first_with_the_key_it_was_meant_to_be(tmp_path, edit, expected):
    old, new = edit
    assert old in GOOD
    path = write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"{path}: ")
    assert msg.removeprefix(f"{path}: ").startswith(expected), msg
