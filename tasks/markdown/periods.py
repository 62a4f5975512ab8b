"""The periods a report heading names, and the same heading for the next edition (issue 42, point 5).

A form-restricted report keeps the earlier edition's headings, but a heading that names the earlier
edition's period ("... for the period ended July 30, 2023", "Second Quarter of Fiscal Year 2024
Summary") must name the new one. This module reads the periods a heading names (`find_periods`), tells
whether it names a snapshot's period (`names_period`, `stale_mentions`) and rewrites it for another
snapshot (`rewrite_title`). Pure functions, no I/O. What a snapshot's period is, which phrases are
read and how each moves: docs/periods.md.
"""

from __future__ import annotations

import calendar
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, timedelta

from tasks.markdown.numbers import _MONTH, _MONTH_NUM, _mentions

__all__ = [
    "Mention",
    "Period",
    "find_periods",
    "fiscal_from_facts",
    "fiscal_from_text",
    "mention_names",
    "names_period",
    "period_end_named",
    "rewrite_title",
    "snapshot_period",
    "stale_mentions",
]

QUARTER_DAYS = 365.25 / 4
_MONTH_FULL = [calendar.month_name[i] for i in range(13)]
_DATE = re.compile(
    rf"\b(?P<mon>{_MONTH})(?P<dot>\.?)(?P<s1>\s+)(?P<day>\d{{1,2}})(?P<s2>,?\s*)(?P<year>(?:19|20)\d\d)\b",
    re.I,
)
_ISO = re.compile(r"(?<![\d-])(?P<year>(?:19|20)\d\d)-(?P<mon>\d\d)-(?P<day>\d\d)(?![\d-])")
_YEAR_LIST = re.compile(r"(\s*,?\s*(?:and\s+)?)((?:19|20)\d\d)(?![\d-]|[.,]\d)")
_ORDINALS = ("first", "second", "third", "fourth")
_ORDINALS_SHORT = ("1st", "2nd", "3rd", "4th")
_ORDINAL = re.compile(r"\b(?:first|second|third|fourth|1st|2nd|3rd|4th)\b", re.I)
_MONTHS_WORD = {3: "three", 6: "six", 9: "nine", 12: "twelve"}
_MONTHS_NUM = {v: k for k, v in _MONTHS_WORD.items()}
_MONTHS_N = re.compile(r"\b(three|six|nine|twelve|3|6|9|12)(?=[- ]months?\b)", re.I)
_YEAR4 = re.compile(r"(?<!\d)(?:19|20)\d\d(?!\d)")
_YEAR2 = re.compile(r"(?<=FY)(\s?'?)(\d\d)(?!\d)|(?<=')(\d\d)(?!\d)", re.I)


# ---------------------------------------------------------------- a snapshot's period


@dataclass(frozen=True)
class Period:
    """A snapshot's period (module docstring): a filing's period end with its fiscal year and quarter
    (None: not known, the calendar is assumed), or a window label."""

    end: date | None = None
    fiscal_year: int | None = None
    fiscal_quarter: int | None = None  # 1-4; 4 is the fiscal year's last quarter (a 10-K's period)
    annual: bool = False
    label: str = ""

    @property
    def _end(self) -> date:
        if self.end is None:
            raise ValueError(f"window {self.label!r} has no calendar")
        return self.end

    @property
    def calendar_quarter(self) -> tuple[int, int]:
        mid = self._end - timedelta(days=45)
        return mid.year, (mid.month - 1) // 3 + 1

    @property
    def calendar_year(self) -> int:
        return (self._end - timedelta(days=182)).year if self.annual else self.calendar_quarter[0]

    @property
    def fiscal(self) -> tuple[int, int]:
        """(fiscal year, quarter): the known ones, else the calendar's."""
        if self.fiscal_year is not None and self.fiscal_quarter is not None:
            return self.fiscal_year, self.fiscal_quarter
        if self.annual:
            return self.calendar_year, 4
        return self.calendar_quarter

    def at(self, end: date, annual: bool | None = None) -> Period:
        """The period ending `end` of the same company: fiscal labels counted in quarters from this one
        (when this one's are known)."""
        annual = self.annual if annual is None else annual
        if self.end is None or self.fiscal_year is None or self.fiscal_quarter is None:
            return Period(end=end, annual=annual)
        idx = self.fiscal_year * 4 + self.fiscal_quarter - 1 + round((end - self.end).days / QUARTER_DAYS)
        return Period(end=end, fiscal_year=idx // 4, fiscal_quarter=idx % 4 + 1, annual=annual)


def _iso(text: str) -> date | None:
    m = re.fullmatch(r"((?:19|20)\d\d)-(\d\d)-(\d\d)", text.strip())
    if not m:
        return None
    try:
        return date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        return None


def _fiscal_part(fp: str) -> int | None:
    fp = fp.strip().upper()
    if fp in ("FY", "Q4", "H2"):
        return 4
    m = re.fullmatch(r"Q([1-3])", fp)
    if m:
        return int(m.group(1))
    return 2 if fp == "H1" else None


def fiscal_from_facts(facts: Iterable[Mapping]) -> tuple[int, int] | None:
    """(fiscal year, quarter) from a filing's dei facts (rows of facts.parquet: `concept`,
    `displayed_text`), None when either is missing or unreadable."""
    got: dict[str, str] = {}
    for f in facts:
        concept = str(f.get("concept") or "")
        if concept in ("dei:DocumentFiscalYearFocus", "dei:DocumentFiscalPeriodFocus") and concept not in got:
            got[concept] = str(f.get("displayed_text") or f.get("value") or "").strip()
    year = re.fullmatch(r"((?:19|20)\d\d)(?:\.0)?", got.get("dei:DocumentFiscalYearFocus", ""))
    quarter = _fiscal_part(got.get("dei:DocumentFiscalPeriodFocus", ""))
    if not year or quarter is None:
        return None
    return int(year.group(1)), quarter


def _label_quarter(part: str) -> int | None:
    """The quarter a label's part ends at: 'Q3' -> 3, 'H1' -> 2, 'H2' -> 4, '9M' -> 3, '12M' -> 4."""
    if part.startswith("Q"):
        return int(part[1:])
    if part.startswith("H"):
        return 2 * int(part[1:])
    if part.endswith("M"):
        n = int(part[:-1])
        return n // 3 if n in (3, 6, 9, 12) else None
    return None


def fiscal_from_text(texts: Iterable[str], end: date, annual: bool) -> tuple[int, int] | None:
    """(fiscal year, quarter) of a filing's period ending `end`, read from the filing's own text.

    The quarter: 4 for a 10-K; for a 10-Q the longest "three/six/nine months ended <end>" span (a
    second quarter reports six months to date). The year: the fiscal year its fiscal quarter, half and
    first-N-months phrases ("second quarter of fiscal year 2026", a 10-Q) or fiscal years ("fiscal 2024",
    a 10-K) name most for that quarter, kept only when the fiscal year they imply ends in the year they
    name (or, for years ending January-March, the year before: "fiscal 2023 ended February 3, 2024");
    without any, the year in which that fiscal year ends. Without a span, the (year, quarter) those
    phrases name most. None when nothing is found, or two tie."""
    votes: Counter[tuple[int, int]] = Counter()
    spans: set[int] = set()
    ended = f"E:{end.isoformat()}:"
    for text in texts:
        for m in _mentions(text):
            if m.label.startswith(ended):
                spans.add(int(m.label[len(ended) : -1]))
                continue
            kind, _, rest = m.label.partition(":")
            if kind != "F" or m.base:
                continue
            year_s, _, part = rest.partition(":")
            q = 4 if not part else _label_quarter(part)
            if q is None or (annual and q != 4) or (not annual and (not part or q == 4)):
                continue
            fye = end + timedelta(days=(4 - q) * QUARTER_DAYS)
            offset = int(year_s) - (fye - timedelta(days=10)).year
            if offset == 0 or (offset == -1 and fye.month <= 3):
                votes[(int(year_s), q)] += 1
    quarter = 4 if annual else max((n // 3 for n in spans if n in (3, 6, 9)), default=None)
    if quarter is not None:
        votes = Counter({k: v for k, v in votes.items() if k[1] == quarter})
    ranked = votes.most_common(2)
    if ranked and (len(ranked) == 1 or ranked[0][1] > ranked[1][1]):
        return ranked[0][0]
    if quarter is None or ranked:
        return None
    fye = end + timedelta(days=(4 - quarter) * QUARTER_DAYS)
    return (fye - timedelta(days=10)).year, quarter


def snapshot_period(
    snapshot: str,
    *,
    annual: bool = False,
    facts: Iterable[Mapping] = (),
    texts: Iterable[str] = (),
) -> Period:
    """The period of snapshot `snapshot` (module docstring): a period end date with its fiscal labels
    from `facts` (dei), else from `texts` (the filing's Markdown), else the calendar; or a label."""
    end = _iso(snapshot)
    if end is None:
        return Period(label=snapshot)
    fiscal = fiscal_from_facts(facts) or fiscal_from_text(texts, end, annual)
    if fiscal is None:
        return Period(end=end, annual=annual)
    return Period(end=end, fiscal_year=fiscal[0], fiscal_quarter=fiscal[1], annual=annual)


# ---------------------------------------------------------------- mentions


@dataclass(frozen=True)
class Mention:
    """A period phrase of a text: its span, its words and its canonical label ('D:2023-07-30',
    'E:2023-07-30:3M', 'F:2024:Q2', 'F:2024', 'C:2024:H1', ..., 'W:W2' for a window label)."""

    start: int
    end: int
    text: str
    label: str


def _date_of(m: re.Match[str]) -> date | None:
    mon = m.group("mon")
    month = int(mon) if mon.isdigit() else _MONTH_NUM[mon[:3].lower()]
    try:
        return date(int(m.group("year")), month, int(m.group("day")))
    except ValueError:
        return None


def find_periods(text: str) -> list[Mention]:
    """The period phrases of `text` in order, none overlapping another (module docstring)."""
    found = [Mention(m.start, m.end, text[m.start : m.end], m.label) for m in _mentions(text)]
    taken = [(x.start, x.end) for x in found]
    for rx in (_DATE, _ISO):
        for m in rx.finditer(text):
            if any(a < m.end() and m.start() < b for a, b in taken):
                continue
            d = _date_of(m)
            if d is not None:
                found.append(Mention(m.start(), m.end(), m.group(0), f"D:{d.isoformat()}"))
                taken.append((m.start(), m.end()))
    # "June 30, 2023 and 2022": the years that continue a date are its comparatives' (calendar) years
    for x in [x for x in found if x.label[0] in "DE"]:
        at = x.end
        while m := _YEAR_LIST.match(text, at):
            if any(a < m.end() and m.start() < b for a, b in taken):
                break
            found.append(Mention(m.start(2), m.end(2), m.group(2), f"C:{m.group(2)}"))
            taken.append((m.start(2), m.end(2)))
            at = m.end()
    return sorted(found, key=lambda x: x.start)


def period_end_named(title: str) -> date | None:
    """The first date `title` names ("NVIDIA CORP 10-Q report for the period ended July 30, 2023" ->
    2023-07-30): the period end of a report whose title says it; None when it names no date."""
    return next((d for m in find_periods(title) if (d := _label_date(m.label)) is not None), None)


def _label_date(label: str) -> date | None:
    kind, _, rest = label.partition(":")
    return _iso(rest[:10]) if kind in ("D", "E") else None


def _window(label: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w-]){re.escape(label)}(?![\w-])")


def mention_names(label: str, period: Period) -> bool:
    """Whether a mention labelled `label` names `period` (module docstring)."""
    kind, _, rest = label.partition(":")
    if kind == "W" or period.end is None:
        return kind == "W" and bool(period.label) and rest == period.label
    if kind in ("D", "E"):
        return _label_date(label) == period.end
    year_s, _, part = rest.partition(":")
    if not year_s.isdigit():
        return False
    year = int(year_s)
    q = _label_quarter(part) if part else None
    fy, fq = period.fiscal
    fiscal = year == fy and (not part or q == fq)
    if kind == "F":
        return fiscal
    if kind != "C":
        return False
    if not part:
        return year == period.calendar_year
    cy, cq = period.calendar_quarter
    calendar_hit = year == cy and q == (4 if period.annual else cq)
    return calendar_hit or (part.startswith("Q") and fiscal)


def _mentions_of(text: str, period: Period) -> list[Mention]:
    if period.end is None:
        if not period.label:
            return []
        return [
            Mention(m.start(), m.end(), m.group(0), f"W:{period.label}")
            for m in _window(period.label).finditer(text)
        ]
    return [m for m in find_periods(text) if not _NAMED.match(text, m.end)]


def names_period(text: str, period: Period) -> bool:
    """Whether `text` (a heading) names `period`."""
    return any(mention_names(m.label, period) for m in _mentions_of(text, period))


def stale_mentions(text: str, previous: Period, current: Period) -> list[Mention]:
    """The mentions of `text` that name `previous`, when `text` does not name `current` (else [])."""
    if names_period(text, current):
        return []
    return [m for m in _mentions_of(text, previous) if mention_names(m.label, previous)]


# ---------------------------------------------------------------- rewriting


def _cased(src: str, word: str) -> str:
    if src.isupper() and any(c.isalpha() for c in src):
        return word.upper()
    if src[:1].isupper():
        return word[:1].upper() + word[1:]
    return word.lower()


def _month_end(d: date) -> bool:
    return d.day == calendar.monthrange(d.year, d.month)[1]


def _at_month_end(year: int, month: int) -> date:
    return date(year, month, calendar.monthrange(year, month)[1])


def _moved_date(
    d: date, old: Period, new: Period, known: Iterable[date] = (), quarters: bool = False
) -> date | None:
    """Where a date of a title naming `old` goes for `new` (module docstring); None: it stays. `known`:
    period ends the title names (with the old end), used where a moved date lands on one of them;
    `quarters`: the title heads three-month columns (a first quarter's previous quarter is then that,
    not the fiscal year end of a balance sheet)."""
    assert old.end is not None and new.end is not None
    if d == old.end:
        return new.end
    gap = (old.end - d).days
    month_ends = _month_end(d) and _month_end(old.end) and _month_end(new.end)
    for years in (1, 2, 3):
        if abs(gap - 365.25 * years) <= 8:  # a comparative period's end
            if month_ends:
                return _at_month_end(new.end.year - years, new.end.month)
            # a 52/53-week year: 52 weeks a year before the new end, unless the title already names a
            # period end within a week of it (a 53-week year: "September 30, 2023" before September 28,
            # 2024)
            near = new.end - timedelta(days=364 * years)
            hit = next((k for k in sorted({old.end, *known}) if abs((k - near).days) <= 7), None)
            return hit or near
    (ofy, ofq), nfy = old.fiscal, new.fiscal[0]
    previous_quarter = abs(gap - QUARTER_DAYS) <= 8 and (ofq != 1 or quarters)
    if ofq < 4 and abs(gap - ofq * QUARTER_DAYS) <= 10 and not previous_quarter:  # the year end before
        years = nfy - ofy
        if _month_end(d):
            return _at_month_end(d.year + years, d.month)
        return d + timedelta(days=364 * years)
    if previous_quarter:  # the quarter before
        if month_ends:
            month = (new.end.month - 4) % 12 + 1
            return _at_month_end(new.end.year - (new.end.month <= 3), month)
        near = new.end - timedelta(days=91)
        return next((k for k in sorted({old.end, *known}) if abs((k - near).days) <= 7), near)
    return None


def _date_text(m: re.Match[str], d: date) -> str:
    """`d` written as the date match `m` is."""
    if m.re is _ISO:
        return d.isoformat()
    src = m.group("mon")
    full = src.lower() == _MONTH_FULL[_MONTH_NUM[src[:3].lower()]].lower()
    name = _MONTH_FULL[d.month] if full else _MONTH_FULL[d.month][:3]
    if not full and src.lower() == "sept" and d.month == 9:
        name = "Sept"
    day = f"{d.day:02d}" if len(m.group("day")) == 2 and m.group("day").startswith("0") else str(d.day)
    return f"{_cased(src, name)}{m.group('dot')}{m.group('s1')}{day}{m.group('s2')}{d.year}"


def _years(text: str, old: int, new: int) -> str:
    """Year tokens of `text` equal to `old` (4 digits, or 2 after "FY" / "'") written as `new`."""
    if old == new:
        return text
    text = _YEAR4.sub(lambda m: str(new) if int(m.group(0)) == old else m.group(0), text)

    def two(m: re.Match[str]) -> str:
        digits = m.group(2) or m.group(3)
        if int(digits) != old % 100:
            return m.group(0)
        return (m.group(1) or "") + f"{new % 100:02d}"

    return _YEAR2.sub(two, text)


def _quarter_word(text: str, q_old: int, q_new: int, half: bool = False) -> str:
    """The quarter (or half) number of a phrase: "second" -> "third", "Q2" -> "Q3", "2Q" -> "3Q"."""
    n_old, n_new = (q_old // 2, q_new // 2) if half else (q_old, q_new)
    if n_old == n_new:
        return text

    def word(m: re.Match[str]) -> str:
        w = m.group(0).lower()
        if w in _ORDINALS and _ORDINALS.index(w) + 1 == n_old:
            return _cased(m.group(0), _ORDINALS[n_new - 1])
        if w in _ORDINALS_SHORT and _ORDINALS_SHORT.index(w) + 1 == n_old:
            return _ORDINALS_SHORT[n_new - 1]
        return m.group(0)

    letter = "H" if half else "Q"
    out = _ORDINAL.sub(word, text)
    out = re.sub(rf"\b([{letter}{letter.lower()}]){n_old}\b", rf"\g<1>{n_new}", out)
    return re.sub(rf"\b{n_old}([{letter}{letter.lower()}])\b", rf"{n_new}\g<1>", out)


def _months_word(text: str, n_old: int, n_new: int) -> str:
    def sub(m: re.Match[str]) -> str:
        w = m.group(1)
        if (int(w) if w.isdigit() else _MONTHS_NUM[w.lower()]) != n_old:
            return w
        return str(n_new) if w.isdigit() else _cased(w, _MONTHS_WORD[n_new])

    return _MONTHS_N.sub(sub, text, count=1)


def _ytd(n_months: int, period: Period) -> bool:
    """A span of `n_months` ending at `period`'s end is its year to date (beyond the quarter alone)."""
    q = period.fiscal[1]
    return not period.annual and q in (2, 3) and n_months == 3 * q


def _shift_dated(text: str, label: str, old: Period, new: Period, known: list[date], quarters: bool) -> str:
    d = _label_date(label)
    if d is None:
        return text
    nd = _moved_date(d, old, new, known, quarters)
    if nd is None:
        return text
    for rx in (_DATE, _ISO):
        for m in rx.finditer(text):
            if _date_of(m) == d:
                text = text[: m.start()] + _date_text(m, nd) + text[m.end() :]
                break
        else:
            continue
        break
    parts = label.split(":")
    if parts[0] == "E" and len(parts) == 3 and _ytd(int(parts[2][:-1]), old):
        n, nq = int(parts[2][:-1]), new.fiscal[1]
        text = _months_word(text, n, 3 * nq if not new.annual and nq < 4 else n)
    return text


def _shift_labelled(text: str, label: str, old: Period, new: Period) -> str:
    kind, _, rest = label.partition(":")
    year_s, _, part = rest.partition(":")
    year = int(year_s)
    fiscal_q = part.startswith("Q") and not _calendar_names(label, old) and mention_names(label, old)
    if kind == "F" or fiscal_q:  # "Q2 2024" read as the old fiscal quarter moves as one
        (oy, oq), (ny, nq) = old.fiscal, new.fiscal
        years = ny - oy
    else:
        (oy, oq), (ny, nq) = old.calendar_quarter, new.calendar_quarter
        if old.annual:
            oq = nq = 4
        years = new.calendar_year - old.calendar_year
    if not part:
        return _years(text, year, year + years)
    q = _label_quarter(part)
    if q is None:
        return _years(text, year, year + years)
    idx = year * 4 + q - 1 + (ny * 4 + nq) - (oy * 4 + oq)
    year_new, q_new = idx // 4, idx % 4 + 1
    if part.startswith("Q"):
        return _quarter_word(_years(text, year, year_new), q, q_new)
    if part.startswith("H") and q_new in (2, 4):
        return _quarter_word(_years(text, year, year_new), q, q_new, half=True)
    if part.endswith("M") and q_new in (1, 2, 3):
        return _months_word(_years(text, year, year_new), 3 * q, 3 * q_new)
    return _years(text, year, year + years)


def _calendar_names(label: str, period: Period) -> bool:
    kind, _, rest = label.partition(":")
    year_s, _, part = rest.partition(":")
    if kind != "C" or not part:
        return False
    cy, cq = period.calendar_quarter
    return int(year_s) == cy and _label_quarter(part) == (4 if period.annual else cq)


# a year that names a plan, a program or a security, not a period: "Fiscal 2022 Restructuring Plan",
# "Fiscal Year 2023 Variable Compensation Plan", "Form of 2023 Note"
_NAMED = re.compile(
    r"(?:\s+(?!(?:of|and|the|for|in|on|to|by|with|from|vs|versus|compared|summary|highlights|results|"
    r"overview|review|outlook|report)\b)[\w&'’-]+){0,3}?"
    r"\s+(?:plans?|programs?|notes?|act|agreements?|indentures?|debentures?|bonds?|facility|facilities)\b",
    re.I,
)
_THREE_AND_THREE = re.compile(r"\b(three|3)(\s+and\s+)(?:three|3)(?=[- ]months?\b)", re.I)


def rewrite_title(title: str, old: Period, new: Period) -> str:
    """`title` for the edition of period `new`, when it names `old` (module docstring); else unchanged."""
    if old.end is None or new.end is None:
        if old.label and new.label and old.label != new.label:
            return _window(old.label).sub(new.label, title)
        return title
    if old == new or old.end == new.end:
        return title
    mentions = [m for m in find_periods(title) if not _NAMED.match(title, m.end)]
    if not any(mention_names(m.label, old) for m in mentions):
        return title
    if any(mention_names(m.label, new) for m in mentions):
        return title  # names the new period already ("as of September 28, 2024 and September 30, 2023")
    out = title
    known = [d for m in mentions if (d := _label_date(m.label)) is not None]
    quarters = any(m.label.startswith("E:") and m.label.endswith(":3M") for m in mentions)
    for m in reversed(mentions):
        if m.label[0] in "DE":
            renewed = _shift_dated(m.text, m.label, old, new, known, quarters)
        else:
            renewed = _shift_labelled(m.text, m.label, old, new)
        out = out[: m.start] + renewed + out[m.end :]
    return _THREE_AND_THREE.sub(lambda m: m.group(1), out)
