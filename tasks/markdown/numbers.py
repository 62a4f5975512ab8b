"""Numbers as written in reports, normalised so that two renderings of one figure match; matching at the
displayed precision and arithmetic derivation from a pool (for the offline coverage and faithfulness judges).

Specification: docs/metrics/numbers.md
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Num", "NumberPool", "derivation", "numbers_in", "same_number"]

_SCALES = {
    "thousand": 1e3,
    "k": 1e3,
    "million": 1e6,
    "mn": 1e6,
    "m": 1e6,
    "billion": 1e9,
    "bn": 1e9,
    "b": 1e9,
    "trillion": 1e12,
    "tn": 1e12,
}

_NUM = re.compile(
    r"""
    (?<![A-Za-z0-9_.])                                  # not glued to a word or another number
    (?P<open>\(\s*)?
    (?P<sign>[-−–](?=[$€£¥]?\d))?
    (?P<cur>[$€£¥]\s?)?
    (?P<digits>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)
    (?!\d|,\d|[A-Za-z_](?<![kKmMbB]))                  # not followed by more digits or a word char...
    (?:
        (?P<abbr>bn|mn|tn|[kKmMbB])(?![A-Za-z0-9])      # ...except a glued scale abbreviation (428.9M)
      | \s?(?P<word>thousand|million|billion|trillion)\b
    )?
    (?P<pct>\s?%|\s(?:percent|per\scent)\b)?
    (?P<close>\s*\))?
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class Num:
    """One displayed number: `value` is signed and scaled; `step` is its displayed precision (scaled)."""

    text: str
    value: float
    step: float
    percent: bool
    start: int
    end: int

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
        return _yearlike(self.text, self.value, self.step)


def _yearlike(text: str, value: float, step: float) -> bool:
    return step == 1.0 and 1900 <= value <= 2100 and "," not in text and float(value).is_integer()


def numbers_in(text: str) -> list[Num]:
    """Every displayed number in `text`, in order (see docs/metrics/numbers.md)."""
    out: list[Num] = []
    for m in _NUM.finditer(text):
        digits = m.group("digits")
        plain = digits.replace(",", "")
        decimals = len(plain.split(".", 1)[1]) if "." in plain else 0
        scale_key = (m.group("abbr") or m.group("word") or "").lower()
        scale = _SCALES.get(scale_key, 1.0)
        value = float(plain) * scale
        negative = bool(m.group("sign")) or bool(m.group("open") and m.group("close"))
        step = (10.0**-decimals) * scale
        s, e = m.start("digits"), m.end()
        if m.group("open") and m.group("close"):
            s = m.start()
        elif m.group("cur"):
            s = m.start("cur")
        elif m.group("sign"):
            s = m.start("sign")
        if m.group("close") and not m.group("open"):
            e = m.start("close")  # "(Note 3)": the parenthesis belongs to the sentence
        out.append(
            Num(
                text=text[s:e].strip(),
                value=-value if negative else value,
                step=step,
                percent=bool(m.group("pct")),
                start=s,
                end=e,
            )
        )
    return out


def _sig(step: float, magnitude: float) -> int:
    if magnitude <= 0:
        return 1
    return max(1, int(math.floor(math.log10(magnitude) - math.log10(step) + 1e-9)) + 1)


def same_number(a: Num, b: Num) -> bool:
    """True when `a` and `b` show the same figure (module docstring: precision, factor 1000^k rules)."""
    return bool(NumberPool([b]).matches(a).any())


class NumberPool:
    """Many numbers (e.g. all of a grounding set) as arrays, for fast :meth:`matches` / :meth:`contains`."""

    def __init__(self, nums: Iterable[Num]) -> None:
        self.nums: list[Num] = list(nums)
        self.mag = np.array([n.magnitude for n in self.nums], dtype=float)
        self.step = np.array([n.step for n in self.nums], dtype=float)
        self.sig = np.array([_sig(n.step, n.magnitude) for n in self.nums], dtype=int)
        self.year = np.array([n.yearlike for n in self.nums], dtype=bool)

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
        # a figure of one significant digit, or a year, is never read in another factor of 1000
        scalable = np.array([_sig(n.step, n.magnitude) >= 2 and not n.yearlike for n in nums])[:, None]
        pool_scalable = (self.sig >= 2) & ~self.year
        for k in range(-3, 4):
            f = 1000.0**k
            x, xs = mag * f, step * f
            tol = 0.5 * np.maximum(self.step, xs) + 1e-9 * np.maximum(self.mag, x)
            hit = np.abs(self.mag - x) <= tol
            if k != 0:
                hit &= scalable & pool_scalable
            else:
                # a year only matches the same year, never a rounded neighbour
                hit &= ~(self.year ^ year) | (self.mag == x)
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
    magnitudes of the pool (bounded: the search is quadratic).
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
        for template, grid in ops:
            hit = np.abs(np.abs(grid) - tgt) <= tol
            np.fill_diagonal(hit, False)
            idx = np.argwhere(hit)
            if idx.size:
                i, j = (int(x) for x in idx[0])
                return template.format(a=nums[i].text, b=nums[j].text)
    return None
