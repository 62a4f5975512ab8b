"""Unit tests of the grounding pieces on small inputs built here."""

from __future__ import annotations

import pytest

from tasks.errors import FrameInputError
from tasks.ground.ixbrl import clean_filing, numeric_value
from tasks.ground.split import render_section, split_filing
from tasks.ground.tables import (
    Cell,
    drop_empty,
    expand_spans,
    fold_columns,
    grid_to_markdown,
    merge_fragments,
)
from tasks.markdown.tables import markdown_tables


@pytest.mark.parametrize(
    ("shown", "fmt", "scale", "sign", "value"),
    [
        ("94,930", "ixt:num-dot-decimal", "6", None, 94_930e6),
        ("1.65", "ixt:num-dot-decimal", "0", None, 1.65),
        ("(1,234)", "ixt:num-dot-decimal", "3", "-", -1_234_000.0),
        ("—", "ixt:fixed-zero", "6", None, 0.0),
        ("three", "ixt-sec:numwordsen", "0", None, 3.0),
        ("no", "ixt-sec:numwordsen", "0", None, 0.0),
        ("1.234,5", "ixt:num-comma-decimal", "0", None, 1234.5),
        ("n/a", "ixt:num-dot-decimal", "0", None, None),
    ],
)
def test_numeric_value(shown, fmt, scale, sign, value):
    assert numeric_value(shown, fmt, scale, sign) == value


def test_spans_fragments_and_folding_give_one_value_per_column():
    # EDGAR layout: label | "$" | number | spacer, and a row whose number spans the "$" cell.
    rows = [
        [Cell("", colspan=1), Cell("2025", colspan=3), Cell("2024", colspan=3)],
        [Cell("Revenue"), Cell("$"), Cell("94,930"), Cell(""), Cell("$"), Cell("90,753"), Cell("")],
        [Cell("Cost"), Cell("52,000", colspan=2), Cell(""), Cell("(1,200", colspan=2), Cell(")")],
    ]
    grid = fold_columns(drop_empty(merge_fragments(expand_spans(rows))))
    assert grid == [
        ["", "2025", "2024"],
        ["Revenue", "$94,930", "$90,753"],
        ["Cost", "52,000", "(1,200)"],
    ]


def test_rowspan_keeps_text_once_and_shifts_cells():
    rows = [[Cell("a", rowspan=2), Cell("b")], [Cell("c")]]
    assert expand_spans(rows) == [["a", "b"], ["", "c"]]


def test_markdown_round_trip_with_pipes():
    grid = [["name", "value"], ["a | b", "1"], ["", "2"]]
    md = grid_to_markdown(grid)
    assert markdown_tables(md) == [grid]


def _filing(body: str) -> bytes:
    return f"""<?xml version="1.0" encoding="utf-8"?>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:ix="http://www.xbrl.org/2013/inlineXBRL"
 xmlns:xbrli="http://www.xbrl.org/2003/instance" xmlns:dei="http://xbrl.sec.gov/dei/2024">
<head><title>t</title></head><body>
<div style="display:none"><ix:header><ix:hidden>
<ix:nonNumeric name="dei:DocumentType" contextRef="c1">10-Q</ix:nonNumeric></ix:hidden>
<ix:resources><xbrli:context id="c1"><xbrli:period><xbrli:startDate>2025-01-01</xbrli:startDate>
<xbrli:endDate>2025-03-31</xbrli:endDate></xbrli:period></xbrli:context>
<xbrli:unit id="usd"><xbrli:measure>iso4217:USD</xbrli:measure></xbrli:unit></ix:resources>
</ix:header></div>
{body}</body></html>""".encode()


def _page(n: int, text: str) -> str:
    return (
        f"<div>Acme Corp. | Q1 Form 10-Q</div><div>{text}</div><div>{n}</div>"
        '<hr style="page-break-after:always"/>'
    )


def test_cleaning_drops_running_headers_page_numbers_and_keeps_facts():
    body = "".join(
        [
            _page(1, "PART I — FINANCIAL INFORMATION"),
            _page(2, "Item 2. Management’s Discussion and Analysis"),
            _page(
                3,
                'Revenue was $<ix:nonFraction name="us-gaap:Revenues" contextRef="c1" unitRef="usd" '
                'decimals="-6" scale="6" format="ixt:num-dot-decimal">1,234</ix:nonFraction> million.',
            ),
            _page(4, "Item 4. Controls and Procedures"),
            _page(5, "Our controls are effective."),
        ]
    )
    clean = clean_filing(_filing(body), "acme.htm")
    assert "Acme Corp." not in clean.html
    assert clean.removed.get("running_header_footer", 0) >= 5 and clean.removed.get("page_number", 0) >= 5
    assert clean.form == "10-Q"
    fact = next(f for f in clean.facts if f.concept == "us-gaap:Revenues")
    assert fact.value == 1_234e6 and fact.unit == "iso4217:USD" and fact.period_end == "2025-03-31"
    secs = split_filing(clean)
    assert [s.doc_id for s in secs] == ["part-1-item-2-mdna", "part-1-item-4-controls-and-procedures"]
    md = render_section(secs[0]).markdown
    assert "$1,234 million" in md and "<" not in md


def test_not_ixbrl_and_truncated_are_input_errors():
    with pytest.raises(FrameInputError, match="not an iXBRL filing"):
        clean_filing(b"<html><body><p>hello</p></body></html>", "plain.htm")
    data = _filing(_page(1, "Item 2. MD&amp;A"))
    with pytest.raises(FrameInputError, match="truncated"):
        clean_filing(data[: len(data) - 40], "cut.htm")


def test_facts_table_is_exact_and_needs_no_pandas(tmp_path):
    # `frame ground` should not pay pandas' import for the facts table; the table must equal what
    # pyarrow builds from the Python values directly (floats, ints, booleans, nulls, non-ASCII text)
    import subprocess
    import sys
    import textwrap

    from tests.conftest import CORPUS, ROOT

    filing = next(iter(sorted((CORPUS / "edgar").glob("*/10-Q/*.htm"))), None)
    if filing is None:
        pytest.skip("no EDGAR filing in the corpus")
    code = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        import pyarrow as pa
        from tasks.ground.documents import facts_table
        from tasks.sources import ground_source
        p = Path({str(filing)!r})
        facts = ground_source(p.read_bytes(), p.name).facts
        table = facts_table(facts)
        assert "pandas" not in sys.modules, "facts_table imported pandas"
        assert "pyarrow.compute" not in sys.modules, "facts_table imported pyarrow.compute (a cast)"
        from schemas.facts import FACTS_SCHEMA
        assert table.schema.equals(FACTS_SCHEMA), table.schema  # the non-null fields stay non-null
        ref = pa.Table.from_pydict(
            {{f.name: [getattr(x, f.name) for x in facts] for f in table.schema}}, schema=table.schema
        )
        assert table.num_rows > 100 and table.equals(ref)
        assert facts_table([]).num_rows == 0
        print("ok", table.num_rows)
        """
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert res.returncode == 0 and res.stdout.startswith("ok"), res.stderr[-2000:]


def test_facts_table_refuses_an_empty_value_in_a_required_column():
    # the reader's columns are re-labelled with the schema, not cast: a null where the schema says
    # "not null" must still stop the table (pyarrow's ArrowInvalid is a ValueError)
    import dataclasses

    from tasks.ground.documents import facts_table
    from tests.conftest import CORPUS

    filing = next(iter(sorted((CORPUS / "edgar").glob("*/10-Q/*.htm"))), None)
    if filing is None:
        pytest.skip("no EDGAR filing in the corpus")
    from tasks.sources import ground_source

    facts = ground_source(filing.read_bytes(), filing.name).facts[:3]
    assert facts_table(facts).num_rows == 3
    with pytest.raises(ValueError, match="null"):
        facts_table([dataclasses.replace(facts[0], concept=None), *facts[1:]])


def test_facts_table_keeps_a_fact_larger_than_the_json_block():
    # a TextBlock fact can hold a whole note: a row of several MiB must not straddle the reader's blocks
    import dataclasses

    import pyarrow as pa

    from tasks.ground.documents import facts_table
    from tests.conftest import CORPUS

    filing = next(iter(sorted((CORPUS / "edgar").glob("*/10-Q/*.htm"))), None)
    if filing is None:
        pytest.skip("no EDGAR filing in the corpus")
    from tasks.sources import ground_source

    facts = ground_source(filing.read_bytes(), filing.name).facts[:3]
    big = [dataclasses.replace(facts[0], displayed_text="note text " * 300_000), *facts[1:]]
    table = facts_table(big)
    ref = pa.Table.from_pydict(
        {f.name: [getattr(x, f.name) for x in big] for f in table.schema}, schema=table.schema
    )
    assert table.equals(ref) and len(table.column("displayed_text")[0].as_py()) == 3_000_000


def test_element_text_folds_whitespace_like_the_regex_it_replaced():
    # `_text` joins the text in C (XPath string()) and folds whitespace with str.split; it must read
    # every element of a real filing exactly as itertext + re.sub(r"\s+", " ") + strip did, including
    # non-breaking and other Unicode spaces, tails of nested elements and processing instructions.
    import re

    from lxml import etree

    from tasks.ground.ixbrl import _text, parse_ixbrl
    from tests.conftest import CORPUS

    filing = next(iter(sorted((CORPUS / "edgar").glob("*/10-Q/*.htm"))), None)
    if filing is None:
        pytest.skip("no EDGAR filing in the corpus")
    root = parse_ixbrl(filing.read_bytes(), filing.name)
    made = etree.fromstring(
        "<div>a\u00a0\u2003b<?pi skipped?>c<b> d\n\t</b>e<i/>\u3000f<x>g<y>h</y>i</x>j</div>"
    )
    elements = [e for e in (*made.iter(), *root.iter()) if isinstance(e.tag, str)]
    assert len(elements) > 10_000
    for el in elements:
        assert _text(el) == re.sub(r"\s+", " ", "".join(el.itertext())).strip()
    assert _text(made) == "a bc d e fghij"
