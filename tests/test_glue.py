"""Glued words (issue 12): the Markdown keeps every word boundary the source renders.

Small filings built here go through the real converter (clean_filing -> split_filing ->
render_section); a few real corpus filings that had many glued tokens are checked with
`glued_tokens` against the rendered text of their visible body.
"""

from __future__ import annotations

import sys

import pytest
from lxml import etree
from lxml import html as lxml_html

from tasks.ground.glue import glued_tokens, markdown_plain, rendered_text
from tasks.ground.ixbrl import XHTML, clean_filing, parse_ixbrl
from tasks.ground.split import render_section, split_filing
from tasks.sources import ground_source
from tests.conftest import CORPUS
from tests.test_grounding_units import _filing

BOLD = "font-weight:700"
# parse_ixbrl wants at least one numeric fact in the document.
FACT = (
    '<p>Revenue was $<ix:nonFraction name="us-gaap:Revenues" contextRef="c1" unitRef="usd" '
    'decimals="-6" scale="6" format="ixt:num-dot-decimal">1,234</ix:nonFraction> million.</p>'
)


# An item heading, as every real filing has: the blocks under test sit in an item's document.
HEAD = "<p>PART I — FINANCIAL INFORMATION</p><p>Item 2. Management’s Discussion and Analysis</p>"


def _markdown(body: str) -> str:
    clean = clean_filing(_filing(HEAD + body + FACT), "glue.htm")
    return "\n".join(render_section(s).markdown for s in split_filing(clean))


def _table(*rows: str) -> str:
    return "<table>" + "".join(f"<tr>{r}</tr>" for r in rows) + "</table>"


def _source_text(data: bytes) -> str:
    return rendered_text(parse_ixbrl(data, "glue.htm").find(f"{{{XHTML}}}body"))


# ---------------------------------------------------------------- the converter


def test_br_in_a_header_cell_is_a_space():
    body = "<p>Results of operations were as follows.</p>" + _table(
        f'<td></td><td><span style="{BOLD}">Three Months Ended<br/>June 28,<br/>2025</span></td>'
        f'<td><span style="{BOLD}">Adjusted<br/>Cost</span></td>',
        "<td>Net sales</td><td>94,036</td><td>1,234</td>",
        "<td>Cost of sales</td><td>50,318</td><td>567</td>",
    )
    md = _markdown(body)
    assert "Three Months Ended June 28, 2025" in md
    assert "Adjusted Cost" in md
    assert "EndedJune" not in md and "28,2025" not in md and "AdjustedCost" not in md
    assert "| Net sales | 94,036 | 1,234 |" in md  # the table itself is unchanged


def test_blocks_inside_a_cell_are_separate_words():
    body = _table(
        "<td></td><td><p>Greater</p><p>China</p></td><td><div>Rest of</div><div>Asia Pacific</div></td>",
        "<td>Net sales</td><td>15,370</td><td>7,942</td>",
        "<td><div>Total</div><div><span>Stockholders’</span></div><div>Equity</div></td>"
        "<td>65,830</td><td>66,796</td>",
    )
    md = _markdown(body)
    assert "| Greater China | Rest of Asia Pacific |" in md
    assert "Total Stockholders’ Equity" in md
    assert "GreaterChina" not in md and "ofAsia" not in md


def test_adjacent_cells_of_a_one_row_table_are_separate_words():
    body = _table('<td><span style="font-weight:bold">Item&#160;3.</span></td><td>Market Risk</td>')
    body += "<p>Our exposure to market risk has not changed materially.</p>"
    md = _markdown(body)
    assert "Item 3. Market Risk" in md and "3.Market" not in md


def test_words_split_over_inline_elements_stay_one_word():
    body = (
        "<p><span>Rev</span><span>enue</span> grew <b>1</b><i>2</i>% and "
        '<ix:nonNumeric name="dei:Foo" contextRef="c1">de</ix:nonNumeric><a href="#x">ferred</a>'
        " revenue fell.</p>"
        + _table(
            '<td>Total</td><td><div style="display:inline">$</div>'
            '<div style="display:inline">1,234</div></td>',
            "<td>Other</td><td>5</td>",
        )
    )
    md = _markdown(body)
    assert "Revenue grew 12% and deferred revenue fell." in md
    assert "Rev enue" not in md and "de ferred" not in md
    assert "| Total | $1,234 |" in md


def test_whitespace_tail_of_a_removed_hidden_element_is_kept():
    body = (
        '<p>Sales in Greater<span style="display:none">hidden</span> China rose, as of June 28,'
        '<span style="display:none">x</span> <span>2025</span>.</p>'
    )
    md = _markdown(body)
    assert "Greater China rose, as of June 28, 2025." in md
    assert "hidden" not in md


def test_date_with_the_space_in_the_next_span():
    body = "<p><span>As of June 28,</span><span> 2025</span> and <span>June 29,</span> <span>2024</span>.</p>"
    md = _markdown(body)
    assert "As of June 28, 2025 and June 29, 2024." in md


def test_bold_heading_broken_by_br_stays_a_heading():
    body = (
        f'<div><span style="{BOLD}">Segment</span><br/><span style="{BOLD}">Information</span></div>'
        "<div>The Company manages its business on a geographic basis.</div>"
    )
    md = _markdown(body)
    assert "## Segment Information" in md


def test_converted_small_filing_has_no_glued_tokens():
    body = (
        "<div>Three Months Ended<br/>June 28,<br/>2025</div>"
        + _table(
            "<td><p>Exhibit</p><p>Number</p></td><td>Exhibit Description</td>",
            "<td>31.1</td><td><div>Rule 13a-14(a)</div><div>Certification</div></td>",
            "<td>32.1</td><td>Section 1350 Certifications</td>",
        )
        + '<p>Greater<span style="display:none">x</span> China</p>'
    )
    data = _filing(HEAD + body + FACT)
    md = "\n".join(render_section(s).markdown for s in split_filing(clean_filing(data, "g.htm")))
    assert glued_tokens(_source_text(data), md) == (0, [])


# ---------------------------------------------------------------- rendered_text


def test_rendered_text_of_xhtml_and_html():
    xhtml = etree.fromstring(
        f'<body xmlns="{XHTML}" xmlns:ix="http://www.xbrl.org/2013/inlineXBRL">'
        "<div>Three Months Ended<br/>June 28,<br/>2025</div><p>Rev<span>enue</span> of "
        '<ix:nonFraction name="a" contextRef="c">1,234</ix:nonFraction>\xa0million</p>'
        "<table><tr><td>Adjusted</td><td><p>Fair</p><p>Value</p></td></tr></table>"
        '<div style="display:none">hidden</div><span style="display:block">block</span>span '
        '<ix:header><ix:hidden>10-Q</ix:hidden></ix:header><div style="display:inline">in</div>line'
        "</body>"
    )
    assert rendered_text(xhtml) == (
        "Three Months Ended June 28, 2025 Revenue of 1,234 million Adjusted Fair Value block span inline"
    )
    doc = lxml_html.fromstring("<div><b>Greater</b><br>China<ul><li>one</li><li>two</li></ul>x</div>")
    assert rendered_text(doc) == "Greater China one two x"


def test_rendered_text_does_not_recurse():
    depth = sys.getrecursionlimit() + 500
    root = etree.Element("div")
    el = root
    for i in range(depth):
        el = etree.SubElement(el, "span" if i % 2 else "div")
    el.text = "deep"
    el.tail = "tail"
    assert rendered_text(root) == "deeptail"  # the innermost element is a span: inline


# ---------------------------------------------------------------- glued_tokens


def test_glued_tokens_finds_joined_neighbours_only():
    source = "Three Months Ended June 28, 2025 Total Stockholders’ Equity Rev enue Exhibit Number"
    md = (
        "# Three Months EndedJune 28,2025\n\n"
        "| TotalStockholders’Equity | ExhibitNumber |\n|---|---|\n| 1 | 2 |\n\n"
        "- Three Months Ended June 28, 2025 ThreeMonths"
    )
    n, examples = glued_tokens(source, md)
    assert n == 5
    assert set(examples) == {
        "EndedJune",
        "28,2025",
        "TotalStockholders’Equity",
        "ExhibitNumber",
        "ThreeMonths",
    }
    # Words the source shows as such are never glue, and neither are tokens not made of neighbours.
    assert glued_tokens("Revenue Total", "Revenue (Total) NewWord") == (0, [])
    assert glued_tokens(source, "Months Ended June 28, 2025") == (0, [])


def test_markdown_plain_strips_syntax():
    md = "## Title\n\n| A | B\\|C |\n|---|:---:|\n| 1 | 2 |\n\n- item\n1. first\n\n![Logo](img1.jpg)"
    assert markdown_plain(md).split() == ["Title", "A", "B|C", "1", "2", "item", "first", "Logo"]


# ---------------------------------------------------------------- real filings

REAL = [
    "edgar/AAPL/10-Q/2025-06-28.htm",
    "edgar/NVDA/10-K/2023-01-29.htm",
    "edgar-wide/BMY/10-K/0000014272-24-000044.htm",
    "edgar-wide/CSCO/10-Q/0000858877-23-000013.htm",
]


@pytest.fixture(scope="module")
def real_glue():
    """Ground each real filing once: glued tokens of its Markdown against its rendered source."""
    cache: dict[str, tuple[int, list[str]]] = {}

    def get(rel: str) -> tuple[int, list[str]]:
        if rel not in cache:
            path = CORPUS / rel
            data = path.read_bytes()
            md = "\n".join(ground_source(data, str(path), kind="edgar").markdown.values())
            cache[rel] = glued_tokens(_source_text(data), md)
        return cache[rel]

    return get


@pytest.mark.parametrize("rel", REAL)
def test_real_filing_has_no_glued_tokens(real_glue, rel):
    if not (CORPUS / rel).is_file():
        pytest.skip(f"corpus filing not found: {rel}")
    n, examples = real_glue(rel)
    assert n <= 3, examples
