"""How many periods lie between two snapshots of a domain (0: consecutive), for the built-in kinds.

An instance pairs a snapshot with the next one the domain lists (paper 000 §3: the *next* edition). When
the source has a gap there, the instance is kept and marked with the number of periods skipped.

- Filings, from their period-end dates only (52/53-week years drift a few days, so steps are rounded):
  a 10-K's next edition is the next fiscal year; a 10-Q's is the next 10-Q, the fiscal year's last
  quarter being covered by the 10-K (Q3 -> next Q1 is consecutive). A quarter end between two 10-Qs is
  skipped unless it is the fiscal year end, which comes from the domain's `fiscal_year_end`, else from
  its own 10-Qs (the one quarter slot of the year none of them falls in).
- Windows: consecutive when the next starts the day after the previous ends; a gap counts as many
  windows as fit in it (of `window_months`, else of the two windows' mean length), at least one.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Sequence

QUARTER_DAYS = 365.2425 / 4
YEAR_DAYS = 365.2425
MONTH_DAYS = YEAR_DAYS / 12
# Quarter ends are ~91 days apart: a date within half of that of the fiscal year end is that quarter.
_SAME_QUARTER = QUARTER_DAYS / 2
_MONTH_DAY = re.compile(r"^(?:--)?(\d{1,2})[-/]?(\d{2})$")


def month_day(text: str | None) -> tuple[int, int] | None:
    """A fiscal year end as EDGAR writes it ("--09-30" in dei, "0927" in submissions JSON, "1/28" on
    some covers, "09-30" in a config) -> (month, day); None when it is none of these."""
    m = _MONTH_DAY.match((text or "").strip())
    if not m:
        return None
    month, day = int(m.group(1)), int(m.group(2))
    try:
        dt.date(2000, month, day)  # a leap year: 02-29 is a valid fiscal year end
    except ValueError:
        return None
    return month, day


def _year_distance(day: dt.date, md: tuple[int, int]) -> float:
    """Days from `day` to the nearest anniversary of month-day `md`."""
    month, d = md
    if (month, d) == (2, 29):
        month, d = 2, 28
    return min(abs((day - dt.date(y, month, d)).days) for y in (day.year - 1, day.year, day.year + 1))


def fiscal_year_end_of_quarters(periods: Sequence[dt.date]) -> tuple[int, int] | None:
    """The fiscal year end implied by 10-Q period ends: of the four quarter slots of the year (from the
    first period on), the one no 10-Q falls in, as a month-day; None unless exactly one slot is empty."""
    if not periods:
        return None
    first = periods[0]
    slots = [first + dt.timedelta(days=round(k * QUARTER_DAYS)) for k in range(4)]
    empty = [s for s in slots if all(_year_distance(p, (s.month, s.day)) > _SAME_QUARTER for p in periods)]
    return (empty[0].month, empty[0].day) if len(empty) == 1 else None


def year_end(fiscal_year_end: str | None, form: str, periods: Sequence[dt.date]) -> tuple[int, int] | None:
    """The fiscal year end a filer's pairs are counted with: the one given (a domain's MM-DD), else, for
    10-Qs, the one their period ends imply; None when unknown."""
    given = month_day(fiscal_year_end)
    return given or (fiscal_year_end_of_quarters(periods) if form == "10-Q" else None)


def filings_skipped(
    form: str, end: dt.date, next_end: dt.date, fiscal_year_end: tuple[int, int] | None
) -> int:
    """Editions of `form` missing between the filings of period ends `end` < `next_end`."""
    days = (next_end - end).days
    if form != "10-Q":
        return max(round(days / YEAR_DAYS) - 1, 0)
    quarters = round(days / QUARTER_DAYS)
    between = [end + dt.timedelta(days=k * days / quarters) for k in range(1, quarters)]
    if fiscal_year_end is None:
        # unknown year end: at most one quarter in four is it, so this many 10-Qs are surely missing
        return len(between) - math.ceil(len(between) / 4)
    return sum(1 for q in between if _year_distance(q, fiscal_year_end) > _SAME_QUARTER)


def windows_skipped(
    start: dt.date, end: dt.date, next_start: dt.date, next_end: dt.date, window_months: int | None
) -> int:
    """Windows missing between window [start, end] and the next one [next_start, next_end]."""
    gap = (next_start - end).days - 1
    if gap <= 0:
        return 0
    if window_months:
        length = window_months * MONTH_DAYS
    else:
        length = ((end - start).days + (next_end - next_start).days + 2) / 2
    return max(1, round(gap / length))
