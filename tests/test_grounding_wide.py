"""Grounding on filers it was not tuned for: the hardest filings of ../shared/corpus/edgar-wide (issue 12).

One filing of each difficult layout, checked against the filing's own evidence (its note-level text
blocks, its items) and the public peer parser's expected top-level sections. The whole sweep over all 63
filings is `make qa-wide` (benchmarks/qa_wide.py), not part of the test suite.
"""

from __future__ import annotations

import csv
import json

import pytest

from benchmarks.qa_wide import MUST_CHARS, PEER_OVERRULED
from tasks.ground.documents import write_grounding
from tasks.ground.qa import qa_edgar
from tasks.sources import ground_source
from tests.conftest import CORPUS

WIDE = CORPUS / "edgar-wide"
# ticker/form -> the layout it stands for
HARD = {
    "GD/10-Q": "lettered notes (A. SUMMARY OF SIGNIFICANT ACCOUNTING POLICIES), capitalised statement titles",
    "CSCO/10-Q": "notes numbered without a space (1.Organization and Basis of Presentation)",
    "GM/10-K": "combined heading for Items 10-14, '1. Nature of Operations' notes",
    "MCD/10-Q": "Item 6 heading in the first row of the exhibit table",
    "KHC/10-K": "summarized guarantor statements inside MD&A; Note 1 untagged",
    "AMD/10-Q": "capitalised items; NOTE 2 heading inside note 1's text block; peer's phantom Item 5",
    "ABBV/10-Q": "a cross-reference to the 10-K's Item 1A, which this 10-Q does not have",
}


def _rows() -> list[dict]:
    manifest = WIDE / "MANIFEST.csv"
    if not manifest.is_file():
        return []
    with manifest.open(newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if f"{r['ticker']}/{r['form']}" in HARD]
    return sorted(rows, key=lambda r: r["path"])


ROWS = _rows()


@pytest.fixture(scope="module")
def grounded(tmp_path_factory):
    base = tmp_path_factory.mktemp("wide")
    out = {}
    for row in ROWS:
        src = WIDE / row["path"]
        folder = write_grounding(ground_source(src.read_bytes(), row["path"]), base / row["accession"])
        out[row["path"]] = (src, folder, qa_edgar(src, folder))
    return out


def _peer_must(row: dict) -> list[str]:
    sections = json.loads((WIDE / row["expected_sections"]).read_text(encoding="utf-8"))
    annual = row["form"] == "10-K"
    return [
        s["identifier"].upper() if annual else s["identifier"].lower()
        for s in sections
        if s["character_count"] >= MUST_CHARS and (row["accession"], s["identifier"]) not in PEER_OVERRULED
    ]


@pytest.mark.skipif(not ROWS, reason="edgar-wide corpus not found")
@pytest.mark.parametrize("row", ROWS, ids=[f"{r['ticker']}/{r['form']}" for r in ROWS])
def test_hard_layouts_ground_completely(grounded, row):
    src, folder, qa = grounded[row["path"]]
    layout = HARD[f"{row['ticker']}/{row['form']}"]
    missing = [i for i in _peer_must(row) if i not in qa["items"]]
    assert not missing, f"{layout}: items missing {missing}"
    assert qa["item_recall"] == 1.0, f"{layout}: {qa['items_missing']}"
    assert qa["notes_tagged"] >= 5
    assert 0.8 <= qa["notes_found"] / qa["notes_tagged"] <= 1.25, layout
    assert qa["largest_document_share"] <= 0.6 or "item" in qa["largest_document"], layout
    assert qa["glued_tokens"] == 0, qa["glued_examples"]
    assert qa["fact_recall"] >= 0.995, qa["facts_missing"]
    docs = json.loads((folder / "documents.json").read_text(encoding="utf-8"))
    ids = [d["doc_id"] for d in docs]
    # Statements are opened once each; a second copy means a note's table or an MD&A table was taken for one.
    assert not [i for i in ids if i.startswith(("balance-sheet-", "statement-of-")) and i[-1].isdigit()]
    # Each document keeps the span of the cleaned filing it came from, in reading order.
    spans = [d["metadata"]["source_span"] for d in docs]
    assert all(a <= b for a, b in spans) and spans == sorted(spans)


@pytest.mark.skipif(not ROWS, reason="edgar-wide corpus not found")
def test_layout_specific_documents(grounded):
    by = {f"{r['ticker']}/{r['form']}": grounded[r["path"]] for r in ROWS}

    def ids(key: str) -> list[str]:
        return [d["doc_id"] for d in json.loads((by[key][1] / "documents.json").read_text(encoding="utf-8"))]

    assert ids("GD/10-Q")[ids("GD/10-Q").index("statement-of-shareholders-equity") + 1].startswith("note-a-")
    assert "note-01-organization-and-basis-of-presentation" in ids("CSCO/10-Q")
    gm = json.loads((by["GM/10-K"][1] / "documents.json").read_text(encoding="utf-8"))
    combined = next(d for d in gm if d["metadata"]["item"] == "10")
    assert combined["metadata"]["items_covered"] == ["10", "11", "12", "13", "14"]
    assert "part-2-item-6-exhibits" in ids("MCD/10-Q")
    khc = ids("KHC/10-K")
    assert khc.index("statement-of-operations") > khc.index("item-8-financial-statements")
    assert "note-01-basis-of-presentation" in khc  # "Note 1. Basis of Presentation", not tagged
    assert "note-02-basis-of-presentation-and-significant-accounting" in ids("AMD/10-Q")
    assert "part-2-item-1a-risk-factors" not in ids("ABBV/10-Q")
