"""Figures as written in reports, read for what they mean: an amount with its scale, a unit, a sign and,
where the sentence names one, a period; matching at the displayed precision (two renderings of one
figure match, two different figures do not) and arithmetic derivation from a pool (for the offline
coverage and faithfulness judges and the scaffold and holistic proxies).

Specification: docs/metrics/numbers.md
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "PERCENT",
    "POINTS",
    "Num",
    "NumberPool",
    "derivation",
    "header_period",
    "numbers_in",
    "periods_agree",
    "same_number",
    "units_agree",
]

_SCALES = {
    "thousand": 1e3,
    "thousands": 1e3,
    "k": 1e3,
    "million": 1e6,
    "millions": 1e6,
    "mn": 1e6,
    "m": 1e6,
    "billion": 1e9,
    "billions": 1e9,
    "bn": 1e9,
    "b": 1e9,
    "trillion": 1e12,
    "tn": 1e12,
}

PERCENT = "%"
POINTS = "pp"  # percentage points; basis points are read as hundredths of them
_CURRENCIES = {"$": "USD", "us$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY"}
_ISO = ("USD", "EUR", "GBP", "JPY", "CNY", "CAD", "AUD", "CHF", "INR")
# counted things whose figures never match an amount of money or another count ("45 million shares")
_COUNTS = {
    "share": "share",
    "shares": "share",
    "unit": "unit",
    "units": "unit",
    "employee": "employee",
    "employees": "employee",
    "people": "employee",
    "customer": "customer",
    "customers": "customer",
    "user": "user",
    "users": "user",
    "subscriber": "subscriber",
    "subscribers": "subscriber",
    "store": "store",
    "stores": "store",
    "vehicle": "vehicle",
    "vehicles": "vehicle",
    "device": "device",
    "devices": "device",
    "parameter": "parameter",
    "parameters": "parameter",
    "token": "token",
    "tokens": "token",
}
_COUNT_WORDS = "|".join(sorted(_COUNTS, key=len, reverse=True))
_CUR = r"(?:US\$|[$€£¥]|(?:" + "|".join(_ISO) + r")(?=\s?\d))"

_NUM = re.compile(
    rf"""
    (?<![A-Za-z0-9_.])                                  # not glued to a word or another number
    (?P<cur0>{_CUR}\s?(?=\(\s*\d))?                     # "$(45) million"
    (?P<open>\(\s*)?
    (?P<sign>[-−–](?=(?:{_CUR}\s?)?\d))?
    (?P<cur>{_CUR}\s?)?
    (?P<digits>\d{{1,3}}(?:,\d{{3}})+(?:\.\d+)?|\d+(?:\.\d+)?)
    (?!\d|,\d|[A-Za-z_](?<![kKmMbB]))                  # not followed by more digits or a word char...
    (?:
        (?P<abbr>bn|mn|tn|[kKmMbB])(?![A-Za-z0-9])      # ...except a glued scale abbreviation (428.9M)
      | \s?(?P<word>thousand|million|billion|trillion)\b
    )?
    (?P<pct>\s?%|\s(?:percent|per\scent)\b)?
    (?P<close>\s*\))?
    (?(close)(?:\s?(?P<word2>thousand|million|billion|trillion)\b)?(?P<pct2>\s?%)?)
    (?P<bp>\s?(?:basis[\s-]points?|bps?)\b)?
    (?P<pp>\s(?:percentage[\s-]points?|ppts?|pp)\b)?
    (?P<note>\s?\(\s*(?:\$\s*)?(?:in|dollars\sin|amounts\sin)\s(?P<word3>thousands|millions|billions)\s*\))?
    (?P<count>\s(?:(?:common|ordinary|outstanding|full-time|diluted|basic|active|paid|new)\s)?
        (?:{_COUNT_WORDS})\b)?
    """,
    re.VERBOSE,
)

# ---------------------------------------------------------------- sign words

# a figure is the amount of a loss or a fall: "net loss of $45 million", "declined 12%", "a 12% decline"
_FILLER = r"(?:(?:approximately|about|nearly|roughly|around|almost|some|an?|the|just|over|under)\s+)?"
_NEG_BEFORE = re.compile(
    r"(?:\b(?:negative|minus)\s+"
    r"|\b(?:loss(?:es)?|deficits?)\b(?:\s+(?!(?:and|but|or|to|from|while|after)\b)[A-Za-z0-9][\w'’-]*){0,5}?"
    r"\s*(?:\bwas|\bwere|\bis|\bare|\bof|\btotall?ed|\btotall?ing|\bamounted\s+to|\breached|:)\s+"
    + _FILLER
    + r"|\b(?:declin(?:ed|es|ing)|decreas(?:ed|es|ing)|fell|falls?|fallen|dropped|drops?|down|lower|"
    r"reduced|shrank|shrunk|slipped|slid|plunged|dipped|contracted)\s+(?:by\s+)?"
    + _FILLER
    + r"|\b(?:decline|decrease|drop|reduction|fall|loss|losses)\s+of\s+"
    + _FILLER
    + r")$",
    re.IGNORECASE,
)
# a cheap test before the two patterns above (substrings, lower case): a word any of them needs
_NEG_HINTS = (
    "negative",
    "minus",
    "loss",
    "deficit",
    "declin",
    "decreas",
    "fell",
    "fall",
    "drop",
    "down",
    "lower",
    "reduc",
    "shr",
    "slipped",
    "slid",
    "plunged",
    "dipped",
    "contracted",
)
_NEG_AFTER = re.compile(
    r"^\s*(?:(?:year[- ]over[- ]year|yoy|sequential|annual|quarterly|net|pre-?tax|after-?tax|operating|"
    r"one-time|total)\s+)?(?:loss(?:es)?|declines?|decreases?|drops?|reductions?|lower|deficit)\b"
    r"|^\s*(?:in|of)\s+(?:net\s+)?loss(?:es)?\b",
    re.IGNORECASE,
)

# ---------------------------------------------------------------- periods

_MONTH_NUM = {
    "jan": 1,
    "feb": 2,
    "mar": 3,
    "apr": 4,
    "may": 5,
    "jun": 6,
    "jul": 7,
    "aug": 8,
    "sep": 9,
    "oct": 10,
    "nov": 11,
    "dec": 12,
}
_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|"
    r"Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_DATE = rf"(?P<mon>{_MONTH})\.?\s+(?P<day>\d{{1,2}}),?\s*(?P<year>(?:19|20)\d\d)"
_ORD = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4}
_ORDS = r"(?:first|second|third|fourth|1st|2nd|3rd|4th)"
_MONTHS_N = {"three": 3, "six": 6, "nine": 9, "twelve": 12, "3": 3, "6": 6, "9": 9, "12": 12}
# a fiscal year: "fiscal 2024", "fiscal year 2024", "FY2024", "FY24", "FY '24"
_FYY = r"(?:fiscal\s+(?:year\s+)?(?P<y>(?:19|20)\d\d)|FY\s?'?(?P<yy>(?:19|20)\d\d|\d\d))"
_CYY = r"(?:(?P<y>(?:19|20)\d\d)|'(?P<yy>\d\d))"
_PERIODS: list[tuple[str, re.Pattern[str]]] = [
    (kind, re.compile(pattern, re.I))
    for kind, pattern in (
        ("ended", rf"\b(?P<n>three|six|nine|twelve|3|6|9|12)[- ]months?\s+(?:period\s+)?ended\s+{_DATE}"),
        ("ended_span", rf"\b(?:fiscal\s+)?(?P<span>year|quarter)s?\s+ended\s+{_DATE}"),
        ("asof", rf"\b(?:as\s+of|as\s+at|at)\s+{_DATE}"),
        ("fq", rf"\b(?:the\s+)?(?P<o>{_ORDS})\s+(?:fiscal\s+)?quarter\s+(?:of\s+)?{_FYY}\b"),
        ("fq", rf"\bQ(?P<q>[1-4])\s*(?:of\s+)?{_FYY}\b"),
        ("fq", rf"\b{_FYY}\s*Q(?P<q>[1-4])\b"),
        ("fq", rf"\bfiscal\s+(?P<o>{_ORDS})\s+quarter\s+(?:of\s+)?(?P<y>(?:19|20)\d\d)\b"),
        ("fm", rf"\b(?:the\s+)?first\s+(?P<n>three|six|nine)\s+months\s+(?:of\s+)?{_FYY}\b"),
        ("fh", rf"\b(?P<h>first|second)\s+half\s+(?:of\s+)?{_FYY}\b"),
        ("fh", rf"\bH(?P<q>[12])\s*{_FYY}\b"),
        ("fy", rf"\b{_FYY}\b(?![-–]\d)"),
        ("cq", rf"\b(?P<o>{_ORDS})\s+quarter\s+(?:of\s+)?(?:calendar\s+(?:year\s+)?)?(?P<y>(?:19|20)\d\d)\b"),
        ("cq", rf"\bQ(?P<q>[1-4])\s*(?:of\s+)?{_CYY}\b"),
        ("cq", r"\b(?P<q>[1-4])Q\s*'?(?P<yy>\d\d)\b"),
        (
            "cm",
            r"\b(?:the\s+)?first\s+(?P<n>three|six|nine)\s+months\s+(?:of\s+)?(?:calendar\s+(?:year\s+)?)?"
            r"(?P<y>(?:19|20)\d\d)\b",
        ),
        (
            "ch",
            r"\b(?P<h>first|second)\s+half\s+(?:of\s+)?(?:calendar\s+(?:year\s+)?)?(?P<y>(?:19|20)\d\d)\b",
        ),
        ("ch", rf"\bH(?P<q>[12])\s*{_CYY}\b"),
        (
            "cy",
            r"\b(?:in|for|during|throughout|of|by\s+(?:the\s+)?end\s+of)\s+(?:calendar\s+(?:year\s+)?)?"
            r"(?P<y>(?:19|20)\d\d)\b(?![,.]?\d|[-–/]\d)",
        ),
    )
]
# a word each pattern of a kind needs (lower case): a window without it is not searched with it
_HINTS = {
    "ended": ("ended",),
    "ended_span": ("ended",),
    "asof": ("as of", "as at", "at "),
    "fq": ("quarter", "q"),
    "fm": ("months",),
    "fh": ("half", "h"),
    "fy": ("fiscal", "fy"),
    "cq": ("quarter", "q"),
    "cm": ("months",),
    "ch": ("half", "h"),
    "cy": ("in ", "for ", "during ", "throughout ", "of ", "end of "),
}
_NEEDS_FISCAL = ("fq", "fh", "fm")
# a period named as the base of a comparison ("compared with fiscal 2023", "up 12% from 2023") is not the
# period of the sentence's figures
_BASE = re.compile(
    r"\b(?:from|compared\s+(?:to|with)|as\s+compared\s+(?:to|with)|versus|vs\.?|than|over|relative\s+to|"
    r"against|since|prior|previous|preceding|last|year-ago)\s+(?:(?:in|the|same|period|of|for|a|year|"
    r"quarter|fiscal)\s+){0,4}$",
    re.I,
)
_ADJACENT = re.compile(r"^[\s,]*(?:(?:in|for|during|at|of|on|the|through|ended)\s+)*$", re.I)
# a sentence ends wherever tasks.markdown.text.split_sentences may end one (and at ";" and line ends), so
# that a sentence read alone and inside its paragraph give its figures the same period
_SENTENCE_END = re.compile(
    r"(?<=[.!?])[\"”’)\]]*\s+(?=[\"“‘(\[$]?[A-Z0-9])|(?<=[a-z]{3}[.!?])\s+(?=[a-z])|(?<=;)\s+|\n"
)


def _year(text: str | None) -> int | None:
    if not text:
        return None
    digits = text.lstrip("'")
    return int(digits) if len(digits) == 4 else 2000 + int(digits)


def _date_label(m: re.Match[str]) -> str:
    mon = _MONTH_NUM[m.group("mon")[:3].lower()]
    return f"{m.group('year')}-{mon:02d}-{int(m.group('day')):02d}"


def _period_label(kind: str, m: re.Match[str]) -> str | None:
    """A canonical period: 'F:2024', 'F:2024:Q3', 'F:2024:H1', 'C:…', 'E:2024-06-30:3M', 'D:2024-06-30'."""
    g = m.groupdict()
    if kind == "ended":
        return f"E:{_date_label(m)}:{_MONTHS_N[g['n'].lower()]}M"
    if kind == "ended_span":
        return f"E:{_date_label(m)}:{12 if g['span'].lower() == 'year' else 3}M"
    if kind == "asof":
        return f"D:{_date_label(m)}"
    prefix = "F" if kind.startswith("f") else "C"
    year = _year(g.get("y") or g.get("yy"))
    if year is None:
        return None
    if kind in ("fq", "cq"):
        q = _ORD[g["o"].lower()] if g.get("o") else int(g["q"])
        return f"{prefix}:{year}:Q{q}"
    if kind in ("fm", "cm"):
        return f"{prefix}:{year}:{_MONTHS_N[g['n'].lower()]}M"
    if kind in ("fh", "ch"):
        half = (1 if g["h"].lower() == "first" else 2) if g.get("h") else int(g["q"])
        return f"{prefix}:{year}:H{half}"
    return f"{prefix}:{year}"


@dataclass(frozen=True)
class _Mention:
    start: int
    end: int
    label: str
    base: bool


# every period names a year: long texts are searched only around their year-like tokens
_YEARISH = re.compile(r"(?:19|20)\d\d|'\d\d|FY\s?\d\d|\dQ\s*'?\d\d", re.I)
_WINDOW = (100, 4)  # characters searched before / after a year-like token


def _windows(text: str) -> list[tuple[int, int]]:
    if len(text) <= 400:
        return [(0, len(text))] if _YEARISH.search(text) else []
    out: list[tuple[int, int]] = []
    for m in _YEARISH.finditer(text):
        a, b = max(0, m.start() - _WINDOW[0]), min(len(text), m.end() + _WINDOW[1])
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def _mentions(text: str) -> list[_Mention]:
    """Period mentions of `text`, longest pattern first, none overlapping another."""
    found: list[tuple[int, int, int, str, re.Match[str]]] = []
    for a, b in _windows(text):
        chunk = text[a:b]
        low = chunk.lower()
        fiscal = "fiscal" in low or "fy" in low
        for pri, (kind, rx) in enumerate(_PERIODS):
            if not any(h in low for h in _HINTS[kind]) or (kind in _NEEDS_FISCAL and not fiscal):
                continue
            found.extend((pri, a + m.start(), a + m.end(), kind, m) for m in rx.finditer(chunk))
    starts: list[int] = []  # taken spans, sorted and disjoint
    ends: list[int] = []
    out: list[_Mention] = []
    for _, start, end, kind, m in sorted(found, key=lambda f: (f[0], f[1])):
        i = bisect.bisect_right(starts, start)
        if (i and ends[i - 1] > start) or (i < len(starts) and starts[i] < end):
            continue
        label = _period_label(kind, m)
        if label is None:
            continue
        starts.insert(i, start)
        ends.insert(i, end)
        base = bool(_BASE.search(text[max(0, start - 60) : start]))
        out.append(_Mention(start, end, label, base))
    return sorted(out, key=lambda x: x.start)


@functools.lru_cache(maxsize=4096)
def header_period(text: str) -> str:
    """The period a table column header names: its first period mention, a bare date ("Apr 27, 2025") or a
    bare year ("2024"); '' when none."""
    found = _mentions(text)
    if found:
        return found[0].label
    m = re.search(_DATE, text, re.I)
    if m:
        return f"D:{_date_label(m)}"
    years = re.findall(r"(?<![\d,.])((?:19|20)\d\d)(?![\d,.])", text)
    return f"C:{years[0]}" if len(set(years)) == 1 else ""


def _span_of_year(start: int, mentions: list[_Mention]) -> str:
    """The part of its year a year token names, when it sits inside a mention of one ("third quarter of
    2025" -> 'S:2025:Q3', "first nine months of 2025" -> 'S:2025:9M', "three months ended June 28, 2025"
    -> 'S:2025:3M'); '' for a whole year or none. Kind "S" compares years only with years: "2025" of the
    third quarter is not "2025" of the first nine months, and either still matches a bare "2025"."""
    k = bisect.bisect_right([m.start for m in mentions], start) - 1
    if k < 0 or not mentions[k].start <= start < mentions[k].end:
        return ""
    parts = mentions[k].label.split(":")
    if len(parts) != 3 or parts[0] == "D":
        return ""
    return f"S:{parts[1][:4]}:{parts[2]}"


def _period_of(start: int, end: int, text: str, mentions: list[_Mention]) -> str:
    """The period a sentence gives a figure at [start, end) (docs/metrics/numbers.md, "Period")."""
    if not mentions:
        return ""
    for m in mentions:  # named right after it: "$60.9 billion in fiscal 2024"
        if m.start >= end and _ADJACENT.match(text[end : m.start]):
            if not m.base:
                return m.label
            break
    own = [m for m in mentions if not m.base and not (m.start <= start < m.end)]
    if len({m.label for m in own}) == 1:
        return own[0].label
    before = [m for m in own if m.end <= start]
    return before[-1].label if before else ""


def _sentence_spans(text: str) -> list[tuple[int, int]]:
    spans, at = [], 0
    for m in _SENTENCE_END.finditer(text):
        spans.append((at, m.start()))
        at = m.end()
    spans.append((at, len(text)))
    return spans


@dataclass(frozen=True)
class Num:
    """One displayed figure.

    `value` is signed and scaled (scale words and a table's stated unit applied); `step` is its displayed
    precision (scaled); `unit` is '' (plain), '%', 'pp' (percentage points; basis points are read as
    hundredths of them), a currency code ('USD', 'EUR', ...) or 'count:<thing>' ('count:share');
    `period` a canonical period label or ''; `implied` the factor a table's stated unit applied (1 when
    none); `worded` whether a scale word or note is written with the figure."""

    text: str
    value: float
    step: float
    percent: bool
    start: int
    end: int
    unit: str = ""
    period: str = ""
    implied: float = 1.0
    worded: bool = False

    def __post_init__(self) -> None:
        # `percent` and unit '%' say the same thing; either may be given
        if self.percent and not self.unit:
            object.__setattr__(self, "unit", PERCENT)
        elif self.unit == PERCENT and not self.percent:
            object.__setattr__(self, "percent", True)

    @property
    def magnitude(self) -> float:
        return abs(self.value)

    @property
    def sig_digits(self) -> int:
        digits = self.text_digits.lstrip("0")
        return len(digits) if digits else 1

    @property
    def text_digits(self) -> str:
        return re.sub(r"\D", "", re.sub(r"^[^\d]*", "", self.text).split("e")[0])

    @property
    def yearlike(self) -> bool:
        return _yearlike(self.text, self.value, self.step) and self.implied == 1.0

    @property
    def bare(self) -> bool:
        """Written without any scale: no scale word or note and no table unit."""
        return not self.worded and self.implied == 1.0

    @property
    def key(self) -> tuple:
        """What the figure says (equal keys: the same figure)."""
        return (self.value, self.step, self.unit, self.period, self.implied, self.worded)

    def replace(self, **changes: object) -> Num:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def written(self) -> Num:
        """The figure as written in its cell, without its table's stated unit."""
        if self.implied == 1.0:
            return self
        return self.replace(value=self.value / self.implied, step=self.step / self.implied, implied=1.0)


def _yearlike(text: str, value: float, step: float) -> bool:
    return step == 1.0 and 1900 <= value <= 2100 and "," not in text and float(value).is_integer()


def numbers_in(text: str) -> list[Num]:
    """Every displayed figure in `text`, in order, read with its unit, sign, scale and period (see
    docs/metrics/numbers.md)."""
    out: list[Num] = []
    mentions = _mentions(text)
    m_starts = [x.start for x in mentions]
    sentences = _sentence_spans(text) if mentions else []
    sent_starts = [a for a, _ in sentences]
    for m in _NUM.finditer(text):
        digits = m.group("digits")
        plain = digits.replace(",", "")
        decimals = len(plain.split(".", 1)[1]) if "." in plain else 0
        scale_key = (m.group("abbr") or m.group("word") or m.group("word2") or m.group("word3") or "").lower()
        scale = _SCALES.get(scale_key, 1.0)
        value = float(plain) * scale
        step = (10.0**-decimals) * scale
        paren = bool(m.group("open") and m.group("close"))
        # a year in parentheses is a citation or a label ("Smith et al. (2023)"), not a negative figure
        year = _yearlike(digits, value, step) and not m.group("cur") and not m.group("cur0")
        negative = bool(m.group("sign")) or (paren and not year)
        s, e = m.start("digits"), m.end()
        if m.group("cur0"):
            s = m.start("cur0")
        elif paren:
            s = m.start()
        elif m.group("cur"):
            s = m.start("cur")
        elif m.group("sign"):
            s = m.start("sign")
        for tail in (
            "count",
            "note",
        ):  # "45 million shares", "1,200 (in millions)": the figure is "45 million"
            if m.group(tail):
                e = min(e, m.start(tail))
        if m.group("close") and not m.group("open"):
            e = m.start("close")  # "(Note 3)": the parenthesis belongs to the sentence
        unit = ""
        cur = (m.group("cur0") or m.group("cur") or "").strip()
        if m.group("pct") or m.group("pct2"):
            unit = PERCENT
        elif m.group("bp"):
            unit, value, step = POINTS, value / 100.0, step / 100.0
        elif m.group("pp"):
            unit = POINTS
        elif cur:
            unit = _CURRENCIES.get(cur.lower(), cur.upper())
        elif m.group("count"):
            unit = "count:" + _COUNTS[m.group("count").split()[-1].lower()]
        if not negative and not year:
            around = text[max(0, s - 60) : m.end() + 40]
            low = around.lower()
            if any(h in low for h in _NEG_HINTS):
                head, tail = text[max(0, s - 60) : s], text[m.end() : m.end() + 40]
                negative = bool(_NEG_BEFORE.search(head) or _NEG_AFTER.match(tail))
        period = ""
        if mentions and year:
            period = _span_of_year(s, mentions)
        elif mentions and not _yearlike(digits, value, step):
            k = bisect.bisect_right(sent_starts, s) - 1
            lo, hi = sentences[k] if k >= 0 else (0, len(text))
            local = mentions[bisect.bisect_left(m_starts, lo) : bisect.bisect_left(m_starts, hi)]
            if not any(x.start <= s < x.end for x in local):
                period = _period_of(s, e, text, local)
        out.append(
            Num(
                text=text[s:e].strip(),
                value=-value if negative and value else value,
                step=step,
                percent=unit == PERCENT,
                start=s,
                end=e,
                unit=unit,
                period=period,
                worded=bool(scale_key),
            )
        )
    return out


def _sig(step: float, magnitude: float) -> int:
    if magnitude <= 0:
        return 1
    return max(1, int(math.floor(math.log10(magnitude) - math.log10(step) + 1e-9)) + 1)


def units_agree(a: str, b: str) -> bool:
    """The same unit, or a plain figure against a stated amount unit (a currency or a count: tables put
    the "$" on their first and total rows only); a percentage or points never against anything else."""
    if a == b:
        return True
    if a in (PERCENT, POINTS) or b in (PERCENT, POINTS):
        return False
    return a == "" or b == ""


def periods_agree(a: str, b: str) -> bool:
    """Two figures' periods agree unless both name one of the same kind (fiscal, calendar, ended, as of)
    and they differ: a fiscal quarter is not compared with a calendar one (a fiscal calendar is not
    known here)."""
    if not a or not b or a == b:
        return True
    return a.split(":", 1)[0] != b.split(":", 1)[0]


def same_number(a: Num, b: Num) -> bool:
    """True when `a` and `b` show the same figure (docs/metrics/numbers.md, "Matching")."""
    return bool(NumberPool([b]).matches(a).any())


def _codes(values: Sequence[str], table: dict[str, int]) -> np.ndarray:
    return np.array([table.setdefault(v, len(table)) for v in values], dtype=np.int64)


class NumberPool:
    """Many numbers (e.g. all of a grounding set) as arrays, for fast :meth:`matches` / :meth:`contains`."""

    def __init__(self, nums: Iterable[Num]) -> None:
        self.nums: list[Num] = list(nums)
        self.mag = np.array([n.magnitude for n in self.nums], dtype=float)
        self.step = np.array([n.step for n in self.nums], dtype=float)
        self.sig = np.array([_sig(n.step, n.magnitude) for n in self.nums], dtype=int)
        self.year = np.array([n.yearlike for n in self.nums], dtype=bool)
        self.sign = np.array([np.sign(n.value) for n in self.nums], dtype=np.int8)
        self.implied = np.array([n.implied for n in self.nums], dtype=float)
        self.bare = np.array([n.bare for n in self.nums], dtype=bool)
        self._units = [n.unit for n in self.nums]
        self._periods = [n.period for n in self.nums]

    def __len__(self) -> int:
        return len(self.nums)

    def matches(self, n: Num) -> np.ndarray:
        """Boolean mask of the pool's numbers that show the same figure as `n`."""
        return self.matches_many([n])[0]

    def matches_many(self, nums: Sequence[Num]) -> np.ndarray:
        """(len(nums), len(pool)) boolean: row i masks the pool's numbers that show the figure of nums[i].
        One pass of array operations for all of `nums` (a report's figures are looked up by the hundred)."""
        out = np.zeros((len(nums), len(self.nums)), dtype=bool)
        if not len(nums) or not len(self.nums):
            return out
        mag = np.array([n.magnitude for n in nums], dtype=float)[:, None]
        step = np.array([n.step for n in nums], dtype=float)[:, None]
        year = np.array([n.yearlike for n in nums], dtype=bool)[:, None]
        sign = np.array([np.sign(n.value) for n in nums], dtype=np.int8)[:, None]
        implied = np.array([n.implied for n in nums], dtype=float)[:, None]
        bare = np.array([n.bare for n in nums], dtype=bool)[:, None]

        def near(x: np.ndarray, xs: np.ndarray, y: np.ndarray, ys: np.ndarray) -> np.ndarray:
            return np.abs(y - x) <= 0.5 * np.maximum(ys, xs) + 1e-9 * np.maximum(y, x)

        # the amount: equal as stated, or (a figure of unstated scale against a table figure) as written
        hit = near(mag, step, self.mag, self.step)
        hit &= ~(self.year ^ year) | (self.mag == mag)  # a year only matches the same year
        # a zero matches only a zero: "0" in a table in millions is no stand-in for "$282,836"
        hit &= (self.mag == 0) == (mag == 0)
        written = (bare & (self.implied != 1.0)) | ((implied != 1.0) & self.bare)
        if written.any():
            as_written = near(
                mag / implied, step / implied, self.mag / self.implied, self.step / self.implied
            )
            hit |= written & as_written
        hit &= (self.sign == sign) | (self.sign == 0) | (sign == 0)
        # units and periods: compared through small tables of the distinct values
        unit_ids: dict[str, int] = {}
        u_pool, u_q = _codes(self._units, unit_ids), _codes([n.unit for n in nums], unit_ids)
        names = sorted(unit_ids, key=unit_ids.get)  # type: ignore[arg-type]
        agree = np.array([[units_agree(a, b) for b in names] for a in names], dtype=bool)
        hit &= agree[u_q[:, None], u_pool[None, :]]
        period_ids: dict[str, int] = {}
        p_pool, p_q = _codes(self._periods, period_ids), _codes([n.period for n in nums], period_ids)
        if len(period_ids) > 1:
            names = sorted(period_ids, key=period_ids.get)  # type: ignore[arg-type]
            agree = np.array([[periods_agree(a, b) for b in names] for a in names], dtype=bool)
            hit &= agree[p_q[:, None], p_pool[None, :]]
        out |= hit
        return out

    def contains(self, n: Num) -> bool:
        return bool(self.matches(n).any())

    def match_pairs(self, nums: Sequence[Num], chunk: int = 256) -> tuple[np.ndarray, np.ndarray]:
        """(i, j) of every match of nums[i] with the pool's j-th number: matches_many `chunk` rows at a
        time, so memory stays bounded however many numbers are asked."""
        rows, cols = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
        for start in range(0, len(nums), chunk):
            r, c = np.nonzero(self.matches_many(nums[start : start + chunk]))
            rows.append(r + start)
            cols.append(c)
        return np.concatenate(rows), np.concatenate(cols)

    def contains_many(self, nums: Sequence[Num], chunk: int = 256) -> np.ndarray:
        """Whether each of `nums` is in the pool."""
        out = np.zeros(len(nums), dtype=bool)
        out[self.match_pairs(nums, chunk)[0]] = True
        return out

    def first_match(self, n: Num) -> Num | None:
        idx = np.flatnonzero(self.matches(n))
        return self.nums[int(idx[0])] if idx.size else None


def derivation(target: Num, pool: Sequence[Num], limit: int = 400) -> str | None:
    """An expression over two numbers of `pool` that gives `target` at its displayed precision, or None.

    Tries a+b, a-b, a/b, 100*a/b (share) and 100*(a-b)/b (percent change) over the first `limit` distinct
    magnitudes of the pool (bounded: the search is quadratic). Magnitudes only: the caller chooses
    operands of a fitting unit and period. A sum or difference with an operand below the target's
    displayed precision is not a derivation (it is the other operand).
    """
    seen: dict[float, Num] = {}
    for n in pool:
        if n.magnitude > 0 and n.magnitude not in seen:
            seen[n.magnitude] = n
            if len(seen) >= limit:
                break
    if len(seen) < 2:
        return None
    nums = list(seen.values())
    v = np.array([n.magnitude for n in nums], dtype=float)
    a, b = v[:, None], v[None, :]
    tgt = target.magnitude
    tol = 0.5 * target.step + 1e-9 * max(tgt, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ops = [
            ("{a} + {b}", a + b),
            ("|{a} - {b}|", a - b),
            ("{a} / {b}", a / b),
            ("100 * {a} / {b}", 100.0 * a / b),
            ("100 * ({a} - {b}) / {b}", 100.0 * (a - b) / b),
        ]
        if target.percent:  # a percentage is most likely a share or a change
            ops = ops[3:] + ops[:3]
        # an operand below the target's precision adds nothing: "a + b" would just be "a"
        trivial = np.minimum(a, b) <= tol
        for template, grid in ops:
            hit = np.abs(np.abs(grid) - tgt) <= tol
            if "+" in template or template == "|{a} - {b}|":
                hit &= ~trivial
            np.fill_diagonal(hit, False)
            idx = np.argwhere(hit)
            if idx.size:
                i, j = (int(x) for x in idx[0])
                return template.format(a=nums[i].text, b=nums[j].text)
    return None
