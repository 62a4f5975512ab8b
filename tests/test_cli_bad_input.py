"""Bad input to `frame ground`: exit 2, one short stderr line naming the file, nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CORPUS

FRAME = str(Path(sys.executable).with_name("frame"))
TEN_Q = CORPUS / "edgar" / "AAPL" / "10-Q" / "2025-03-29.htm"
TEN_K = CORPUS / "edgar" / "AAPL" / "10-K" / "2024-09-28.htm"
PAPER = CORPUS / "arxiv" / "gravitational-wave-astrophysics" / "2111.08717.html"

pytestmark = pytest.mark.skipif(not TEN_Q.is_file(), reason="shared corpus not found")


def run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([FRAME, *args], capture_output=True, text=True, timeout=120, env=env)


def bad_files(tmp: Path) -> dict[str, tuple[Path, list[str], str]]:
    """name -> (file, extra args, words the error must contain)."""
    empty = tmp / "empty.htm"
    empty.write_bytes(b"")
    binary = tmp / "binary.htm"
    binary.write_bytes(bytes(range(256)) * 64)
    data = TEN_Q.read_bytes()
    truncated = tmp / "truncated.htm"
    truncated.write_bytes(data[: len(data) // 2])
    plain = tmp / "plain.html"
    plain.write_text(
        "<html><head><title>x</title></head><body><p>Quarterly results: revenue 12.</p></body></html>"
    )
    paper = PAPER.read_bytes()
    cut_paper = tmp / "cut-paper.html"
    cut_paper.write_bytes(paper[: len(paper) // 2])
    return {
        "empty": (empty, ["--kind", "edgar"], "empty"),
        "empty-detect": (empty, [], "empty"),
        "binary": (binary, ["--kind", "edgar"], "binary"),
        "truncated": (truncated, ["--kind", "edgar"], "truncated"),
        "truncated-detected": (truncated, [], "truncated"),
        "plain-html-as-edgar": (plain, ["--kind", "edgar"], "not an iXBRL filing"),
        "10-K-given-as-10-Q": (TEN_K, ["--kind", "edgar", "--form", "10-Q"], "10-K"),
        "truncated-paper": (cut_paper, ["--kind", "arxiv"], "truncated"),
        "missing": (tmp / "nope.htm", [], "no such file"),
    }


CASES = [
    "empty",
    "empty-detect",
    "binary",
    "truncated",
    "truncated-detected",
    "plain-html-as-edgar",
    "10-K-given-as-10-Q",
    "truncated-paper",
    "missing",
]


@pytest.mark.parametrize("case", CASES)
def test_bad_input_exits_2_with_one_line(tmp_path, case):
    path, extra, words = bad_files(tmp_path)[case]
    out = tmp_path / "out"
    res = run("ground", str(path), "--out", str(out), *extra)
    assert res.returncode == 2, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert "Traceback" not in res.stderr
    assert path.name in lines[0]
    assert words.lower() in lines[0].lower()
    assert len(lines[0]) < 300
    assert not out.exists()
    # No temp folder is left beside the output either.
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


def test_failed_rerun_keeps_previous_output(tmp_path):
    """A bad input never destroys a folder that an earlier good run wrote."""
    out = tmp_path / "out"
    assert run("ground", str(TEN_Q), "--out", str(out)).returncode == 0
    before = sorted(p.name for p in out.iterdir())
    empty = tmp_path / "empty.htm"
    empty.write_bytes(b"")
    assert run("ground", str(empty), "--out", str(out), "--kind", "edgar").returncode == 2
    assert sorted(p.name for p in out.iterdir()) == before


def test_good_filing_and_qa_json(tmp_path):
    import json

    out = tmp_path / "out"
    res = run("ground", str(TEN_Q), "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert (out / "facts.parquet").is_file() and (out / "documents.json").is_file()
    qa = run("qa", "ground", str(TEN_Q), str(out), "--json")
    assert qa.returncode == 0, qa.stderr
    figures = json.loads(qa.stdout)
    for key in ("fact_recall", "tables_source", "tables_markdown", "teds_mean", "text_kept"):
        assert key in figures
    assert figures["fact_recall"] >= 0.995
