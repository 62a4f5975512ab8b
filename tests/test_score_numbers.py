"""Number normalisation and matching for the offline judges (tasks/markdown/numbers.py)."""

from __future__ import annotations

import pytest

from tasks.markdown.numbers import NumberPool, derivation, numbers_in, same_number


def one(text: str):
    (n,) = numbers_in(text)
    return n


@pytest.mark.parametrize(
    ("text", "value", "step", "percent"),
    [
        ("1,234.5", 1234.5, 0.1, False),
        ("$1.2 billion", 1.2e9, 1e8, False),
        ("$1.2bn", 1.2e9, 1e8, False),
        ("428.9M", 428.9e6, 1e5, False),
        ("(12)", -12.0, 1.0, False),
        ("12%", 12.0, 1.0, True),
        ("3.5 percent", 3.5, 0.1, True),
        ("−3.5", -3.5, 0.1, False),
        ("€300 million", 3e8, 1e6, False),
    ],
)
def test_normalised_values(text, value, step, percent):
    n = one(f"The figure was {text} in the period.")
    assert n.value == pytest.approx(value) and n.step == pytest.approx(step) and n.percent is percent


def test_not_figures_and_boundaries():
    assert numbers_in("Q2 FY2025 H100 results") == []
    assert [n.text for n in numbers_in("June 28,2025")] == ["2025"]  # no bogus 28,202
    assert [n.value for n in numbers_in("(Note 3) and 1,234,567")] == [3.0, 1234567.0]


def test_matching_rules():
    assert same_number(one("428.9M"), one("approximately 429M"))  # coarser precision wins
    assert same_number(one("(12)"), one("-12"))  # both negative
    assert not same_number(one("12"), one("(12)"))  # issue 41: a sign is part of the figure
    assert not same_number(one("$1.2 billion"), one("$1.3 billion"))
    assert not same_number(one("2"), one("2,000"))
    assert not same_number(one("2024"), one("2,024,000"))  # years never rescale
    assert not same_number(one("2024"), one("2023"))
    # issue 41: a bare factor of 1000 no longer matches (the old rule matched 94,930 and $94.9 billion);
    # a table's stated unit does (tests/test_figures_meaning.py)
    assert not same_number(one("94,930"), one("$94.9 billion"))
    assert not same_number(one("1,200"), one("$1.2 billion"))
    # a zero matches only a zero: "0" in millions rounds "$282,836" but does not state it
    assert not same_number(one("$282,836"), one("0 million"))
    assert not same_number(one("0 million"), one("$282,836"))
    assert same_number(one("0"), one("$0 million")) and same_number(one("1 million"), one("$1,234,567"))


def test_pool_and_derivation():
    pool = NumberPool(numbers_in("Revenue 1,200 million and 1,000 million; margin 45.0%"))
    assert pool.contains(one("$1.2 billion")) and not pool.contains(one("$1.3 billion"))
    assert pool.first_match(one("1.0 billion")).text == "1,000 million"
    assert not pool.contains(one("45.0"))  # a percentage matches only a percentage
    expr = derivation(one("20.0%"), numbers_in("sales 1,200 versus 1,000"))
    assert expr == "100 * (1,200 - 1,000) / 1,000"
    assert derivation(one("2,200"), numbers_in("1,200 and 1,000")) == "1,200 + 1,000"
    assert derivation(one("17.3"), numbers_in("1,200 and 1,000")) is None


def _one_by_one(pool: NumberPool, n) -> list[bool]:
    """The matching rules number by number, as docs/metrics/numbers.md states them for figures read from
    running text (no table unit): the same amount within half the coarser displayed step, a year only as
    that year, a zero only as a zero, the same sign (zero has none), units that agree (equal, or a plain
    figure against a currency or a count; a percentage or points only against the same) and periods that
    agree (equal, or of another kind, or not named on one side)."""

    def unit_ok(a: str, b: str) -> bool:
        if a == b:
            return True
        rates = ("%", "pp")
        return a not in rates and b not in rates and (a == "" or b == "")

    def period_ok(a: str, b: str) -> bool:
        return not a or not b or a == b or a.split(":")[0] != b.split(":")[0]

    out = []
    for m in pool.nums:
        near = abs(m.magnitude - n.magnitude) <= 0.5 * max(m.step, n.step) + 1e-9 * max(
            m.magnitude, n.magnitude
        )
        near = near and (m.yearlike == n.yearlike or m.magnitude == n.magnitude)
        near = near and (m.magnitude == 0) == (n.magnitude == 0)  # a zero only as a zero
        signs = m.value == 0 or n.value == 0 or (m.value < 0) == (n.value < 0)
        out.append(near and signs and unit_ok(m.unit, n.unit) and period_ok(m.period, n.period))
    return out


def test_matches_many_is_the_rule_for_every_number_of_a_real_filing(corpus):
    # the vectorised lookup (all of a report's figures at once) must give the rule's answer for each
    from lxml import html

    filing = sorted((corpus / "edgar" / "NVDA").rglob("*.htm"))[0]
    text = html.parse(str(filing)).getroot().text_content()
    nums = numbers_in(text)
    pool = NumberPool(nums[: len(nums) // 2])
    queries = nums[len(nums) // 2 :][:400] + numbers_in(
        "in 2024, 7 units, 1.2 billion, 1,200, (1,200), 12.5%, a 12.5% decline, $3 million in fiscal 2024, 0"
    )
    many = pool.matches_many(queries)
    assert many.shape == (len(queries), len(pool)) and many.any()
    for i, n in enumerate(queries):
        assert many[i].tolist() == _one_by_one(pool, n), n
    assert pool.contains_many(queries, chunk=7).tolist() == many.any(axis=1).tolist()
    assert NumberPool([]).contains_many(queries).tolist() == [False] * len(queries)
