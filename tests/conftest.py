"""Shared test fixtures: the real corpus beside the repo (../shared/corpus) and a Prefect harness."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("FRAME_CORPUS", ROOT.parent / "shared" / "corpus"))


def edgar_rows() -> list[dict[str, str]]:
    manifest = CORPUS / "edgar" / "MANIFEST.csv"
    if not manifest.is_file():
        return []
    with manifest.open(newline="", encoding="utf-8") as fh:
        return [r for r in csv.DictReader(fh) if not r["form"].startswith("meta:")]


def arxiv_rows() -> list[dict[str, str]]:
    manifest = CORPUS / "arxiv" / "MANIFEST.csv"
    if not manifest.is_file():
        return []
    with manifest.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="session")
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"shared corpus not found at {CORPUS}")
    return CORPUS


@pytest.fixture(scope="session")
def prefect_harness(tmp_path_factory):
    """One temporary Prefect database/server for the whole session (it costs ~10 s to start)."""
    home = tmp_path_factory.mktemp("prefect-home")
    os.environ["PREFECT_HOME"] = str(home)
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "120"
    os.environ["PREFECT_LOCAL_STORAGE_PATH"] = str(home / "results")
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield home


# The two-domain config the build tests share: NVDA 10-Q (2 snapshots) and gravitational waves (2 windows).
# Braces are doubled: test modules append it to a str.format template.
SMALL_DOMAINS = """[[domains]]
kind = "edgar"
name = "NVDA-10-Q"
category = "financial_quarterly"
ticker = "NVDA"
form = "10-Q"
periods = ["2023-07-30", "2025-07-27"]
[[domains]]
kind = "arxiv"
name = "gw"
category = "academic_simple"
topic = "gravitational-wave-astrophysics"
query = "cat:astro-ph.HE"
papers_per_window = 3
windows = [
  {{ label = "W1", start = "2021-11-01", end = "2022-06-30" }},
  {{ label = "W2", start = "2022-07-01", end = "2023-02-28" }},
]
"""
