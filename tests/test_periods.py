"""tasks/markdown/periods.py: the periods a heading names, and the heading for the next edition.

Headings are real ones from the corpus filings (their cover pages, MD&A and statement headers); each
expected heading is what the next filing itself writes, or what its statement header says, so a reader
can check every case with grep. Fiscal years and quarters come from the filings' dei facts."""

from __future__ import annotations

import re
from datetime import date, datetime

import pytest

from tasks.markdown.periods import (
    Period,
    find_periods,
    fiscal_from_facts,
    fiscal_from_text,
    mention_names,
    names_period,
    period_end_named,
    rewrite_title,
    snapshot_period,
    stale_mentions,
)
from tests.conftest import edgar_rows

# ---------------------------------------------------------------- periods written out by hand

# NVDA 10-Q: quarter ended July 30, 2023 is the second quarter of fiscal year 2024 (its MD&A heading:
# "Second Quarter of Fiscal Year 2024 Summary"); April 27 / July 27 / October 26, 2025 the first, second
# and third of fiscal year 2026 (their MD&A headings say so too).
NVDA_Q2_FY24 = Period(date(2023, 7, 30), 2024, 2)
NVDA_Q1_FY26 = Period(date(2025, 4, 27), 2026, 1)
NVDA_Q2_FY26 = Period(date(2025, 7, 27), 2026, 2)
NVDA_Q3_FY26 = Period(date(2025, 10, 26), 2026, 3)
NVDA_FY23 = Period(date(2023, 1, 29), 2023, 4, annual=True)
NVDA_FY24 = Period(date(2024, 1, 28), 2024, 4, annual=True)
# AAPL: fiscal years end on the last Saturday of September ("For the Fiscal Year Ended September 30, 2023")
AAPL_FY23 = Period(date(2023, 9, 30), 2023, 4, annual=True)
AAPL_FY24 = Period(date(2024, 9, 28), 2024, 4, annual=True)
AAPL_FY25 = Period(date(2025, 9, 27), 2025, 4, annual=True)
# GOOGL: calendar quarters
GOOGL_Q2_23 = Period(date(2023, 6, 30), 2023, 2)
GOOGL_Q3_23 = Period(date(2023, 9, 30), 2023, 3)
GOOGL_Q1_24 = Period(date(2024, 3, 31), 2024, 1)


@pytest.mark.parametrize(
    "heading, dates, spans",
    [
        # NVDA 10-Q 2023-07-30, statement of shareholders' equity
        ("FOR THE THREE MONTHS ENDED JULY 30, 2023 AND JULY 31, 2022", ["2023-07-30", "2022-07-31"], [3]),
        # AAPL 10-Q 2023-07-01 cover
        ("For the Fiscal Quarter Ended July 1, 2023", ["2023-07-01"], [3]),
        # AAPL 10-K 2024-09-28 cover
        ("For the Fiscal Year Ended September 28, 2024", ["2024-09-28"], [12]),
        # NVDA 10-Q 2025-07-27 cover: "quarterly period" is no span, the date is read bare
        ("For the quarterly period ended July 27, 2025", ["2025-07-27"], []),
        # NVDA 10-K statement header (abbreviated months)
        ("Year Ended Jan 28, 2024 and Jan 29, 2023", ["2024-01-28", "2023-01-29"], [12]),
        ("Results for 2023-07-30", ["2023-07-30"], []),
    ],
)
def test_find_periods_reads_the_dates_of_real_headings(heading, dates, spans):
    found = find_periods(heading)
    assert [m.label.split(":")[1] for m in found if m.label[0] in "DE"] == dates
    assert [int(m.label.split(":")[2][:-1]) for m in found if m.label[0] == "E"] == spans
    for m in found:
        assert heading[m.start : m.end] == m.text


def test_find_periods_reads_fiscal_and_calendar_phrases():
    labels = {m.label for m in find_periods("Second Quarter of Fiscal Year 2024 Summary")}
    assert labels == {"F:2024:Q2"}
    assert {m.label for m in find_periods("Fiscal Year 2025 Summary")} == {"F:2025"}
    assert {m.label for m in find_periods("Q2 FY24 highlights")} == {"F:2024:Q2"}
    assert {m.label for m in find_periods("Results in Q2 2024")} == {"C:2024:Q2"}
    # bare years are plans and acts, not periods
    assert find_periods("Amended and Restated 2007 Equity Incentive Plan") == []
    assert find_periods("2022 Employee Stock Plan") == []


def test_period_end_named_by_a_report_title():
    assert period_end_named("NVIDIA CORP 10-Q report for the period ended July 30, 2023") == date(2023, 7, 30)
    assert period_end_named("For the Fiscal Quarter Ended July 1, 2023") == date(2023, 7, 1)
    assert period_end_named("Literature survey: mixed sciences (W1)") is None


def test_names_period_fiscal_and_calendar():
    assert names_period("Second Quarter of Fiscal Year 2024 Summary", NVDA_Q2_FY24)
    assert not names_period("Second Quarter of Fiscal Year 2024 Summary", NVDA_Q1_FY26)
    assert names_period("First Quarter of Fiscal Year 2026 Summary", NVDA_Q1_FY26)
    assert names_period("For the quarterly period ended July 30, 2023", NVDA_Q2_FY24)
    assert not names_period("For the quarterly period ended July 30, 2023", NVDA_Q2_FY26)
    assert names_period("First half of fiscal year 2026", NVDA_Q2_FY26)  # H1 ends with the second quarter
    assert names_period("First nine months of fiscal year 2026", NVDA_Q3_FY26)
    assert names_period("Fiscal Year 2023 Summary", NVDA_FY23)
    # NVDA's second quarter of fiscal 2024 is the calendar quarter April-July 2023
    assert names_period("Q2 2023 results", NVDA_Q2_FY24)
    assert names_period("Q2 2023 results", GOOGL_Q2_23) and not names_period("Q2 2023 results", GOOGL_Q3_23)
    # windows: the label as a word
    assert names_period("Literature survey: large language models (W1)", Period(label="W1"))
    assert not names_period("Literature survey: large language models (W12)", Period(label="W1"))
    assert mention_names("W:W2", Period(label="W2"))


def test_stale_needs_the_previous_period_and_not_the_own():
    # a heading carried from the first quarter's edition into the second quarter's
    stale = stale_mentions("First Quarter of Fiscal Year 2026 Summary", NVDA_Q1_FY26, NVDA_Q2_FY26)
    assert [m.text for m in stale] == ["First Quarter of Fiscal Year 2026"]
    # naming both (a comparison) is right
    both = "Fiscal Year 2024 Compared to Fiscal Year 2023"
    assert stale_mentions(both, NVDA_FY23, NVDA_FY24) == []
    assert stale_mentions("Fiscal Year 2023 Summary", NVDA_FY23, NVDA_FY24)
    assert stale_mentions("Risk Factors", NVDA_FY23, NVDA_FY24) == []


Q2_24, Q1_26, Q2_26, Q3_26 = NVDA_Q2_FY24, NVDA_Q1_FY26, NVDA_Q2_FY26, NVDA_Q3_FY26
REAL_PAIRS = [
    # MD&A headings of consecutive NVDA 10-Qs and 10-Ks, as each filing writes them
    (Q2_24, Q1_26, "Second Quarter of Fiscal Year 2024 Summary", "First Quarter of Fiscal Year 2026 Summary"),
    (Q1_26, Q2_26, "First Quarter of Fiscal Year 2026 Summary", "Second Quarter of Fiscal Year 2026 Summary"),
    (Q2_26, Q3_26, "Second Quarter of Fiscal Year 2026 Summary", "Third Quarter of Fiscal Year 2026 Summary"),
    (NVDA_FY23, NVDA_FY24, "Fiscal Year 2023 Summary", "Fiscal Year 2024 Summary"),
    # cover pages
    (
        Q2_24,
        Q1_26,
        "For the quarterly period ended July 30, 2023",
        "For the quarterly period ended April 27, 2025",
    ),
    (Q1_26, Q2_26, "For the Quarter Ended April 27, 2025", "For the Quarter Ended July 27, 2025"),
    (
        NVDA_FY23,
        NVDA_FY24,
        "For the fiscal year ended January 29, 2023",
        "For the fiscal year ended January 28, 2024",
    ),
    (
        AAPL_FY23,
        AAPL_FY24,
        "For the Fiscal Year Ended September 30, 2023",
        "For the Fiscal Year Ended September 28, 2024",
    ),
    (
        GOOGL_Q3_23,
        GOOGL_Q1_24,
        "For the Quarterly Period Ended September 30, 2023",
        "For the Quarterly Period Ended March 31, 2024",
    ),
    # AAPL 10-K statement headers (September 24, 2022 ended a 53-week year): the next header's dates
    (
        AAPL_FY23,
        AAPL_FY24,
        "Years ended September 30, 2023, September 24, 2022 and September 25, 2021",
        "Years ended September 28, 2024, September 30, 2023 and September 24, 2022",
    ),
    (
        AAPL_FY24,
        AAPL_FY25,
        "Years ended September 28, 2024, September 30, 2023 and September 24, 2022",
        "Years ended September 27, 2025, September 28, 2024 and September 30, 2023",
    ),
    # the offline gold report's title (its date is the period end)
    (
        Q2_24,
        Q3_26,
        "NVIDIA CORP 10-Q report for the period ended July 30, 2023",
        "NVIDIA CORP 10-Q report for the period ended October 26, 2025",
    ),
    # a window label
    (
        Period(label="W1"),
        Period(label="W2"),
        "Literature survey: mixed sciences (W1)",
        "Literature survey: mixed sciences (W2)",
    ),
]


@pytest.mark.parametrize("old, new, heading, expected", REAL_PAIRS)
def test_rewrite_real_headings(old, new, heading, expected):
    assert rewrite_title(heading, old, new) == expected


def test_rewrite_leaves_other_titles_alone():
    # names no period of the old edition: a plan, a program, a plain title
    plans = (
        "Fiscal 2022 Restructuring Plan",
        "Amended and Restated 2007 Equity Incentive Plan",
        "Risk Factors",
    )
    for title in plans:
        assert rewrite_title(title, NVDA_FY23, NVDA_FY24) == title
    # the fiscal year does not change within a year: "fiscal 2026" stays
    assert rewrite_title("Outlook for fiscal 2026", NVDA_Q1_FY26, NVDA_Q2_FY26) == "Outlook for fiscal 2026"
    assert rewrite_title("Fiscal Year 2023 Summary", NVDA_FY23, NVDA_FY23) == "Fiscal Year 2023 Summary"


def test_rewrite_moves_comparisons_and_year_to_date_spans():
    # comparisons move with the period
    nvda_fy25 = Period(date(2025, 1, 26), 2025, 4, annual=True)
    compared = rewrite_title("Fiscal 2024 Compared to Fiscal 2023", NVDA_FY24, nvda_fy25)
    assert compared == "Fiscal 2025 Compared to Fiscal 2024"
    # a balance sheet's prior fiscal year end moves only when the fiscal year does (calendar quarters)
    assert rewrite_title("As of June 30, 2023 and December 31, 2022", GOOGL_Q2_23, GOOGL_Q3_23) == (
        "As of September 30, 2023 and December 31, 2022"
    )
    assert rewrite_title("As of June 30, 2023 and December 31, 2022", GOOGL_Q2_23, GOOGL_Q1_24) == (
        "As of March 31, 2024 and December 31, 2023"
    )
    # "Three and Six Months" for a second quarter is "Three and Nine Months" for a third
    assert rewrite_title("Three and Six Months Ended July 27, 2025", NVDA_Q2_FY26, NVDA_Q3_FY26) == (
        "Three and Nine Months Ended October 26, 2025"
    )


# ---------------------------------------------------------------- against the corpus filings

_HEADER_DATE = re.compile(r"\b([A-Z][a-z]{2,8})\.? (\d{1,2}), ((?:19|20)\d\d)\b")


def header_dates(text: str) -> list[date]:
    """The dates written like "July 30, 2023" or "Jul. 30, 2023" in `text`, in order."""
    out = []
    for mon, day, year in _HEADER_DATE.findall(text):
        fmt = "%b" if len(mon) == 3 else "%B"
        out.append(datetime.strptime(f"{mon} {day} {year}", f"{fmt} %d %Y").date())
    return out


def _statement_header(markdown: str) -> list[tuple[str, list[date]]]:
    """(span, its dates) of a statement table's header: the row of spans ("Three Months Ended") and the
    row of dates under them, pairs of columns per span (one span over all columns for a year's)."""
    rows = [ln for ln in markdown.splitlines() if ln.startswith("|")][:4]
    spans = [c.strip() for c in rows[0].strip("|").split("|") if c.strip()]
    dates = next((header_dates(r) for r in rows[1:] if len(header_dates(r)) >= 2), [])
    if len(spans) == 1:
        return [(spans[0], dates)]
    return [(s, dates[2 * i : 2 * i + 2]) for i, s in enumerate(spans)]


def _period(gset, snapshot: str, annual: bool) -> Period:
    return snapshot_period(snapshot, annual=annual, facts=gset.facts)


def _filings() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in edgar_rows():
        out.setdefault(f"{r['ticker']}-{r['form']}", []).append(r["period_end"])
    return {k: sorted(v) for k, v in out.items()}


def test_fiscal_labels_from_text_and_counting_agree_with_dei(grounding_sets):
    """Every corpus filing: the fiscal year and quarter read from its text equal its dei facts, and those
    counted from another filing of the company equal them too."""
    filings = _filings()
    assert filings
    for domain, snaps in filings.items():
        annual = domain.endswith("10-K")
        periods = {}
        for snap in snaps:
            gset = grounding_sets(domain, snap)
            dei = fiscal_from_facts(gset.facts)
            assert dei is not None, (domain, snap)
            end = date.fromisoformat(snap)
            assert fiscal_from_text(gset.texts.values(), end, annual) == dei, (domain, snap)
            periods[snap] = _period(gset, snap, annual)
        for a in snaps:
            for b in snaps:
                counted = periods[a].at(periods[b].end)
                assert (counted.fiscal_year, counted.fiscal_quarter) == (
                    periods[b].fiscal_year,
                    periods[b].fiscal_quarter,
                ), (domain, a, b)


@pytest.mark.parametrize(
    "domain, old, new",
    [
        ("AAPL-10-Q", "2023-07-01", "2024-12-28"),
        ("AAPL-10-Q", "2024-12-28", "2025-03-29"),
        ("AAPL-10-Q", "2025-03-29", "2025-06-28"),
        ("NVDA-10-Q", "2025-04-27", "2025-07-27"),
        ("NVDA-10-Q", "2025-07-27", "2025-10-26"),
        ("AAPL-10-K", "2023-09-30", "2024-09-28"),
        ("AAPL-10-K", "2024-09-28", "2025-09-27"),
        ("NVDA-10-K", "2024-01-28", "2025-01-26"),
    ],
)
def test_statement_header_headings_move_to_the_next_filings_header(grounding_sets, domain, old, new):
    """A heading made of the old income statement's header ("Nine Months Ended July 1, 2023 and June 25,
    2022") rewritten for the next filing names the dates and span of the next filing's header."""
    annual = domain.endswith("10-K")
    g_old, g_new = grounding_sets(domain, old), grounding_sets(domain, new)
    p_old, p_new = _period(g_old, old, annual), _period(g_new, new, annual)
    h_old = _statement_header(g_old.texts["statement-of-operations"])
    h_new = _statement_header(g_new.texts["statement-of-operations"])
    assert h_old and h_new and all(len(d) >= 2 for _, d in h_old + h_new)
    for i, (span, dates) in enumerate(h_old):
        written = [f"{d:%B} {d.day}, {d.year}" for d in dates]
        heading = f"{span} {', '.join(written[:-1])} and {written[-1]}"
        want_span, want_dates = h_new[min(i, len(h_new) - 1)]
        got = rewrite_title(heading, p_old, p_new)
        assert header_dates(got) == want_dates, (heading, got)
        assert got.lower().startswith(want_span.lower()), (heading, got, want_span)


def test_nvda_two_year_gap_statement_headings(grounding_sets):
    """NVDA's real "FOR THE SIX MONTHS ENDED JULY 30, 2023 AND JULY 31, 2022" (fiscal 2024, second quarter)
    for each 2025 quarter: that quarter's year-to-date span and dates, as its income statement heads them."""
    g_old = grounding_sets("NVDA-10-Q", "2023-07-30")
    equity = g_old.texts["statement-of-shareholders-equity"]
    headings = re.findall(r"^## (FOR THE (?:THREE|SIX) MONTHS ENDED .*)$", equity, re.M)
    assert len(headings) == 2
    p_old = _period(g_old, "2023-07-30", False)
    for new in ("2025-04-27", "2025-07-27", "2025-10-26"):
        g_new = grounding_sets("NVDA-10-Q", new)
        header = _statement_header(g_new.texts["statement-of-operations"])
        for i, heading in enumerate(headings):
            got = rewrite_title(heading, p_old, _period(g_new, new, False))
            span, dates = header[min(i, len(header) - 1)]
            assert header_dates(got.title()) == dates, (heading, got)
            assert got.startswith("FOR THE " + span.upper()), (got, span)


def _header_dates(markdown: str, after: str | None = None) -> list[date]:
    """The dates of a table's first header row that has two or more (of the table after the line holding
    `after`, else of the document's first table)."""
    lines = markdown.splitlines()
    start = next(i for i, ln in enumerate(lines) if after in ln) if after else 0
    rows = [ln for ln in lines[start:] if ln.startswith("|")][:4]
    return next(header_dates(r) for r in rows if len(header_dates(r)) >= 2)


@pytest.mark.parametrize(
    "domain, old, new",
    [
        ("NVDA-10-Q", "2025-04-27", "2025-07-27"),
        ("NVDA-10-Q", "2025-07-27", "2025-10-26"),
        ("GOOGL-10-Q", "2023-06-30", "2023-09-30"),
        ("GOOGL-10-Q", "2023-09-30", "2024-03-31"),
        ("AAPL-10-Q", "2024-12-28", "2025-03-29"),
        ("AAPL-10-Q", "2025-03-29", "2025-06-28"),
    ],
)
def test_balance_sheet_headings_keep_the_fiscal_year_end(grounding_sets, domain, old, new):
    """ "As of <the balance sheet's dates>": the period end moves, the prior fiscal year end moves only
    when the fiscal year changes - as the next balance sheet's header has them."""
    g_old, g_new = grounding_sets(domain, old), grounding_sets(domain, new)
    old_dates = _header_dates(g_old.texts["balance-sheet"])
    heading = "As of " + " and ".join(f"{d:%B} {d.day}, {d.year}" for d in old_dates)
    got = rewrite_title(heading, _period(g_old, old, False), _period(g_new, new, False))
    assert header_dates(got) == _header_dates(g_new.texts["balance-sheet"]), (heading, got)


@pytest.mark.parametrize("old, new", [("2025-04-27", "2025-07-27"), ("2025-07-27", "2025-10-26")])
def test_quarter_over_quarter_heading_moves_to_the_next_filings(grounding_sets, old, new):
    """NVDA's MD&A heads its quarter-over-quarter table "Three Months Ended <this quarter>, <the quarter
    before> and <a year before>"; the first quarter's "quarter before" is the fiscal year end."""
    g_old, g_new = grounding_sets("NVDA-10-Q", old), grounding_sets("NVDA-10-Q", new)
    old_dates = _header_dates(g_old.texts["part-1-item-2-mdna"], "Quarter-over-Quarter")
    written = [f"{d:%b} {d.day}, {d.year}" for d in old_dates]
    heading = f"Three Months Ended {', '.join(written[:-1])} and {written[-1]}"
    got = rewrite_title(heading, _period(g_old, old, False), _period(g_new, new, False))
    assert header_dates(got) == _header_dates(g_new.texts["part-1-item-2-mdna"], "Quarter-over-Quarter"), got


def test_years_that_name_plans_and_notes_are_no_periods():
    # NVDA's exhibit indexes, as written there
    for title in ("Fiscal Year 2023 Variable Compensation Plan", "Form of 2023 Note"):
        assert rewrite_title(title, NVDA_FY23, NVDA_FY24) == title
        assert stale_mentions(title, NVDA_FY23, NVDA_FY24) == []
    # AAPL 10-K 2024-09-28 exhibit index: names the new period already, so it is right as it is
    title = "Consolidated Balance Sheets as of September 28, 2024 and September 30, 2023"
    assert rewrite_title(title, AAPL_FY23, AAPL_FY24) == title
    assert stale_mentions(title, AAPL_FY23, AAPL_FY24) == []
