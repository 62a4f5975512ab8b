"""The filing split on layouts that one filer's typography does not cover (issue 12).

Each test builds a small iXBRL filing in one of the layouts seen on real filers (numbered, lettered and
untitled notes; run-in Part headings; item titles in capitals; short items; combined items; an annual
report with a cross-reference index instead of "Item N" headings) and checks the documents that the real
converter (clean_filing -> split_filing -> render_section) makes of it.
"""

from __future__ import annotations

from tasks.ground.ixbrl import clean_filing
from tasks.ground.split import render_section, split_filing
from tasks.ground.textblocks import note_blocks
from tests.test_grounding_units import _filing

BOLD = "font-weight:700"
FACT = (
    '<p>Revenue was $<ix:nonFraction name="us-gaap:Revenues" contextRef="c1" unitRef="usd" '
    'decimals="-6" scale="6" format="ixt:num-dot-decimal">1,234</ix:nonFraction> million.</p>'
)
TEXT = "<p>" + "The company describes this part of its business in some detail here. " * 3 + "</p>"


def _bold(text: str) -> str:
    return f'<p><span style="{BOLD}">{text}</span></p>'


def _note(concept: str, heading: str, body: str = TEXT, label: str | None = None) -> str:
    """A note-level text block as filers tag it: the heading and the text inside one ix:nonNumeric."""
    pre = _bold(label) if label else ""
    return (
        f'{pre}<ix:nonNumeric name="{concept}" contextRef="c1" escape="true">'
        f"{_bold(heading)}{body}</ix:nonNumeric>"
    )


def _table(rows: int = 4) -> str:
    cells = "".join(f"<tr><td>Line {i}</td><td>{100 + i}</td><td>{90 + i}</td></tr>" for i in range(rows))
    return f"<table>{cells}</table>"


def _split(body: str, form: str = "10-Q"):
    data = _filing(body + FACT)
    if form != "10-Q":
        data = data.replace(b">10-Q</ix:nonNumeric>", f">{form}</ix:nonNumeric>".encode())
    clean = clean_filing(data, "layout.htm")
    assert clean.form == form
    return split_filing(clean)


def _ids(sections) -> list[str]:
    return [s.doc_id for s in sections]


def test_item_letter_is_not_taken_from_the_title():
    secs = _split(
        _bold("ITEM 1 BUSINESS")
        + TEXT
        + _bold("ITEM 1A. RISK FACTORS")
        + TEXT
        + _bold("ITEM 13 CERTAIN RELATIONSHIPS AND RELATED TRANSACTIONS")
        + TEXT,
        form="10-K",
    )
    assert [s.doc_id for s in secs if s.section_type == "item"] == [
        "item-1-business",
        "item-1a-risk-factors",
        "item-13-relationships-and-independence",
    ]


def test_parts_come_from_the_item_titles_and_a_run_in_part_heading():
    body = (
        _bold("PART I — FINANCIAL INFORMATION")
        + _bold("Item 1. Consolidated Condensed Financial Statements")
        + TEXT
        + _bold("Item 2. Management’s Discussion and Analysis of Financial Condition")
        + TEXT
        # A page header run into the Part heading: the Part is still read, and Item 1's title decides.
        + "<p>Acme Corp. | Q2 2025 Form 10-Q | 24 PART II — OTHER INFORMATION</p>"
        + _bold("Item 1. Legal Proceedings")
        + TEXT
        + _bold("Item 1A. Risk Factors")
        + TEXT
        + _bold("Item 2. Unregistered Sales of Equity Securities and Use of Proceeds")
        + TEXT
    )
    ids = _ids(_split(body))
    assert ids == [
        "cover-page",
        "part-1-item-1-financial-statements",
        "part-1-item-2-mdna",
        "part-2-item-1-legal-proceedings",
        "part-2-item-1a-risk-factors",
        "part-2-item-2-equity-sales-and-repurchases",
    ] or ids == [i for i in ids if i != "cover-page"]  # the cover is dropped when it holds nothing


def test_short_items_are_documents_with_their_text():
    body = (
        _bold("Item 1A. Risk Factors")
        + TEXT
        + _bold("Item 1B. Unresolved Staff Comments")
        + "<p>None.</p>"
        + _bold("Item 4. Mine Safety Disclosures Not applicable.")
        + _bold("Item 6. [Reserved]")
        + _bold("Item 7. Management’s Discussion and Analysis")
        + TEXT
    )
    secs = _split(body, form="10-K")
    md = {s.doc_id: render_section(s).markdown for s in secs}
    assert "None." in md["item-1b-unresolved-staff-comments"]
    assert "Not applicable." in md["item-4-mine-safety"]
    assert "item-6-reserved" in md and "[Reserved]" in md["item-6-reserved"]


def test_a_table_of_contents_does_not_take_the_place_of_the_items():
    toc = "".join(
        f"<p>Item {n}. {t} {p}</p>"
        for n, t, p in [("1", "Business", 3), ("1A", "Risk Factors", 9), ("2", "Properties", 20)]
    )
    body = (
        toc
        + _bold("Item 1. Business")
        + TEXT
        + _bold("Item 1A. Risk Factors")
        + TEXT
        + _bold("Item 2. Properties")
        + TEXT
    )
    secs = [s for s in _split(body, form="10-K") if s.section_type == "item"]
    assert [s.item for s in secs] == ["1", "1A", "2"]
    assert all("describes this part" in render_section(s).markdown for s in secs)


def test_a_cross_reference_is_not_a_heading():
    body = (
        _bold("Item 7. Management’s Discussion and Analysis")
        + TEXT
        + "<p>Item 8 of this report contains the consolidated statements.</p>"
        + TEXT
        + _bold("Item 8. Financial Statements and Supplementary Data")
        + TEXT
    )
    secs = _split(body, form="10-K")
    mdna = next(s for s in secs if s.item == "7")
    assert "Item 8 of this report" in render_section(mdna).markdown


def test_combined_items_cover_each_item():
    body = _bold("Item 9B. Other Information") + TEXT + _bold("Items 10, 11, 12, 13 and 14") + TEXT
    sec = next(s for s in _split(body, form="10-K") if s.item == "10")
    assert sec.covers == ["10", "11", "12", "13", "14"]


def test_notes_follow_their_text_blocks_whatever_their_headings():
    notes = (
        _note("us-gaap:SignificantAccountingPoliciesTextBlock", "SUMMARY OF SIGNIFICANT ACCOUNTING POLICIES")
        + _note("us-gaap:BasisOfPresentationTextBlock", "1.Basis of Presentation")
        + _note(
            "us-gaap:CommitmentsAndContingenciesDisclosureTextBlock",
            "J. COMMITMENTS AND CONTINGENCIES",
            body="<p>Certain balance sheet components are as follows:</p>" + _table(),
        )
        + _note("us-gaap:IncomeTaxDisclosureTextBlock", "Income Taxes", label="NOTE 11")
    )
    body = (
        _bold("Item 1. Financial Statements")
        + _bold("Condensed Consolidated Balance Sheets")
        + _table()
        + _bold("Condensed Consolidated Statements of Cash Flows")
        + _table()
        + notes
        + _bold("Item 2. Management’s Discussion and Analysis")
        + TEXT
    )
    secs = _split(body)
    ids = _ids(secs)
    assert [i for i in ids if i.startswith("note-")] == [
        "note-01-summary-of-significant-accounting-policies",
        "note-01-basis-of-presentation",
        "note-j-commitments-and-contingencies",
        "note-11-income-taxes",
    ]
    assert "balance-sheet-2" not in ids  # the note's "balance sheet components" sentence is not a statement
    cash = next(s for s in secs if s.doc_id == "statement-of-cash-flows")
    assert "SUMMARY OF SIGNIFICANT" not in render_section(cash).markdown
    tax = next(s for s in secs if s.doc_id == "note-11-income-taxes")
    assert tax.title == "NOTE 11 Income Taxes"
    assert ids[-1] == "part-1-item-2-mdna"


def test_an_untagged_note_before_the_first_tagged_one_is_a_note():
    body = (
        _bold("Item 1. Financial Statements")
        + _bold("Consolidated Statements of Operations")
        + _table()
        + _bold("Note 1. Background and Basis of Presentation")
        + TEXT
        + _note("us-gaap:SignificantAccountingPoliciesTextBlock", "Note 2. Significant Accounting Policies")
        + _bold("Item 2. Management’s Discussion and Analysis")
        + TEXT
    )
    ids = _ids(_split(body))
    assert "note-01-background-and-basis-of-presentation" in ids
    assert "note-02-significant-accounting-policies" in ids


def test_detail_text_blocks_inside_a_note_are_not_notes():
    nested = (
        '<ix:nonNumeric name="us-gaap:DebtDisclosureTextBlock" contextRef="c1" continuedAt="k1">'
        + _bold("Debt")
        + "</ix:nonNumeric>"
        + '<ix:nonNumeric name="us-gaap:ScheduleOfDebtTableTextBlock" contextRef="c1">'
        + _table()
        + "</ix:nonNumeric>"
        + '<ix:nonNumeric name="us-gaap:ScheduleOfMaturitiesOfLongTermDebtTextBlock" contextRef="c1">'
        + _table()
        + "</ix:nonNumeric>"
        + '<ix:continuation id="k1">'
        + TEXT
        + "</ix:continuation>"
    )
    from lxml import etree

    root = etree.fromstring(_filing(nested + FACT))
    assert [n.concept for n in note_blocks(root)] == ["us-gaap:DebtDisclosureTextBlock"]


def test_an_annual_report_laid_out_without_item_headings():
    # A 10-K written as an annual report: bold section titles named like the Form's items, and a
    # cross-reference index at the end instead of "Item N" headings.
    body = (
        _bold("Business")
        + TEXT
        + _bold("Risk Factors")
        + TEXT
        + _bold("Business Combinations")
        + TEXT  # a title that only starts like an item's
        + _bold("Legal Proceedings")
        + TEXT
        + _bold("Management’s Discussion and Analysis of Financial Condition and Results of Operations")
        + TEXT
    )
    items = [s.item for s in _split(body, form="10-K") if s.section_type == "item"]
    assert items == ["1", "1A", "3", "7"]


def test_sections_keep_their_source_span():
    body = (
        _bold("Item 1. Financial Statements")
        + _bold("Consolidated Balance Sheets")
        + _table()
        + _bold("Item 2. Management’s Discussion and Analysis")
        + TEXT
        + _bold("Item 4. Controls and Procedures")
        + TEXT
    )
    secs = _split(body)
    spans = [s.span for s in secs]
    assert all(a <= b for a, b in spans)
    # Sections are consecutive and in order: a gap would be text no document kept.
    assert all(prev[1] == nxt[0] for prev, nxt in zip(spans, spans[1:], strict=False))


def test_a_filing_without_item_headings_is_one_cover_document():
    secs = _split(TEXT)
    assert [s.doc_id for s in secs] == ["cover-page"]
    assert "describes this part" in render_section(secs[0]).markdown
