"""Acceptance of filing grounding on every real filing of the shared corpus."""

from __future__ import annotations

import json
import re

import pyarrow.parquet as pq
import pytest

from schemas.facts import FACTS_SCHEMA
from tasks.ground.documents import write_grounding
from tasks.sources import ground_source, qa_ground
from tests.conftest import CORPUS, edgar_rows

ROWS = edgar_rows()


@pytest.fixture(scope="module")
def grounded(tmp_path_factory):
    """Ground each filing once per module; tests below read the folders."""
    out = {}
    base = tmp_path_factory.mktemp("edgar")
    for row in ROWS:
        src = CORPUS / "edgar" / row["path"]
        folder = base / row["path"].replace("/", "_")
        write_grounding(
            ground_source(src.read_bytes(), str(src), kind="edgar", expected_form=row["form"]), folder
        )
        out[row["path"]] = (src, folder)
    return out


@pytest.mark.skipif(not ROWS, reason="shared corpus not found")
@pytest.mark.parametrize("row", ROWS, ids=[r["path"] for r in ROWS])
def test_filing_meets_construction_qa(grounded, row):
    src, folder = grounded[row["path"]]
    qa = qa_ground(src, folder)
    assert qa["fact_recall"] >= 0.995, qa["facts_missing"]
    assert qa["html_tags_left"] == 0
    assert qa["teds_mean"] >= 0.95
    assert qa["tables_markdown"] == qa["tables_source"]
    assert qa["documents"] >= (12 if row["form"] == "10-K" else 8)
    assert qa["text_kept"] >= 0.9
    text = "\n".join(p.read_text() for p in folder.glob("*.md"))
    assert "ix:" not in text
    assert not re.search(r"<(div|span|td|tr|table|p|ix)\b", text)


@pytest.mark.skipif(not ROWS, reason="shared corpus not found")
@pytest.mark.parametrize("row", ROWS, ids=[r["path"] for r in ROWS])
def test_documents_index_and_facts(grounded, row):
    src, folder = grounded[row["path"]]
    index = json.loads((folder / "documents.json").read_text())
    ids = [d["doc_id"] for d in index]
    assert len(ids) == len(set(ids))
    for d in index:
        assert (folder / d["file"]).is_file()
        assert d["tokens"] > 0 and d["source_kind"] == "edgar"
        assert d["kind"] in ("prose", "table", "mixed")
        assert d["metadata"]["form"] == row["form"]
        assert d["metadata"]["period_end"]
    # Primary statements and the MD&A item are documents of their own with names that say so.
    for name in ("balance-sheet", "statement-of-operations", "statement-of-cash-flows"):
        assert name in ids
    assert any(i.endswith("-mdna") for i in ids)
    assert any(i.startswith("note-01-") for i in ids)
    # Every ix:nonFraction / ix:nonNumeric element of the source is one row of facts.parquet.
    raw = src.read_bytes()
    n_facts = len(re.findall(rb"<ix:non(?:Fraction|Numeric)\b", raw))
    table = pq.read_table(folder / "facts.parquet")
    assert table.schema.equals(FACTS_SCHEMA)
    assert table.num_rows == n_facts
    facts = table.to_pandas()
    shown = facts[(facts.fact_type == "nonFraction") & ~facts.hidden]
    assert shown.value.notna().mean() > 0.99
    assert (facts.concept == "dei:DocumentType").any()
    assert set(facts.loc[facts.concept == "dei:DocumentType", "displayed_text"]) == {row["form"]}
