"""The metric checklist's perturbations (tasks/meta/checklist.py) do what their names say, on reports the
test writes, and `moved_right` applies the bars of issue 41 (down >= 5% of the range / within 2%)."""

from __future__ import annotations

import re

import pytest

from tasks.meta import checklist as ck

REPORT = """# Acme Corp 10-Q report for the period ended June 30, 2024

## Results of Operations

Revenue increased 12% to $3,100 million in fiscal 2024. Operating expenses rose to 1,250.

Net loss was $(45) million, up 3% from 2023.

(In millions)

| Item | 2024 | 2023 |
|---|---|---|
| Revenue | $3,100 | $2,768 |
| Net loss | (45) | (43) |

## Liquidity and Capital Resources

- Cash was $1,200 million at June 30, 2024.
- Debt declined to $800 million.

The business was broken down into two segments. See Note 3 and Item 7.

### Outlook

Growth is expected to continue.
"""


def test_figures_x1000_scales_every_body_figure_and_nothing_else():
    out = ck.perturb("figures_x1000", REPORT)
    assert "Revenue increased 12,000% to $3,100,000 million in fiscal 2024" in out
    assert "| Revenue | $3,100,000 | $2,768,000 |" in out
    assert "| Net loss | (45,000) | (43,000) |" in out
    assert "$(45,000) million" in out
    # headings, years, references and the title are left alone
    assert out.splitlines()[0] == REPORT.splitlines()[0]
    assert "Note 3 and Item 7" in out and "| Item | 2024 | 2023 |" in out


def test_signs_flipped_turns_parentheses_and_plain_figures_around():
    out = ck.perturb("signs_flipped", REPORT)
    assert "| Net loss | 45 | 43 |" in out
    assert "| Revenue | -$3,100 | -$2,768 |" in out
    assert "Revenue increased -12% to -$3,100 million" in out


def test_directions_reversed_keeps_phrasal_verbs():
    out = ck.perturb("directions_reversed", REPORT)
    assert "Revenue decreased 12%" in out and "Operating expenses fell to" in out
    assert "down 3% from 2023" in out and "Debt grew to" in out
    assert "Decline is expected" in out  # "Growth" -> "Decline", case kept
    assert "broken down into two segments" in out  # not a direction: no amount follows


def test_years_shifted_moves_every_body_year_by_one():
    out = ck.perturb("years_shifted", REPORT)
    assert "fiscal 2025" in out and "| Item | 2025 | 2024 |" in out and "June 30, 2025." in out
    assert out.splitlines()[0] == REPORT.splitlines()[0]  # the title is a heading


def test_section_dropped_and_swapped_move_whole_sections():
    dropped = ck.perturb("section_dropped", REPORT)
    assert "## Results of Operations" not in dropped and "| Revenue |" not in dropped
    assert "## Liquidity and Capital Resources" in dropped and "### Outlook" in dropped
    swapped = ck.perturb("sections_swapped", REPORT)
    heads = [ln for ln in swapped.splitlines() if ln.startswith("#")]
    assert heads[1:] == ["## Liquidity and Capital Resources", "### Outlook", "## Results of Operations"]
    assert sorted(swapped.split()) == sorted(REPORT.split())  # the same words, in another order


def test_table_removed_and_not_applicable_without_one():
    out = ck.perturb("table_removed", REPORT)
    assert not any(ln.startswith("|") for ln in out.splitlines())
    assert ck.perturb("table_removed", "# T\n\n## A\n\nNo table here.\n") is None
    # a table the report holds twice: removing one copy removes nothing it says, so the other is taken
    twice = "| a | b |\n|---|---|\n| x | 1 |\n| y | 2 |\n| z | 3 |"
    small = "| c | d |\n|---|---|\n| w | 4 |"
    report = f"# T\n\n## A\n\n{twice}\n\nText.\n\n{twice}\n\n## B\n\n{small}\n"
    out = ck.perturb("table_removed", report)
    assert out.count("| x | 1 |") == 2 and "| w | 4 |" not in out
    assert ck.perturb("table_removed", f"# T\n\n{twice}\n\n{twice}\n") is None


def test_directions_are_reversed_in_statements_on_the_prose_of_the_report():
    out = ck.perturb("directions_reversed", REPORT)
    assert "| Revenue | $3,100 | $2,768 |" in out  # tables untouched: "Gains"/"Losses" there are labels
    gains = "| | Gains | Losses |\n|---|---|---|\n| Notes | 3 | (4) |"
    assert ck.perturb("directions_reversed", REPORT + "\n" + gains + "\n").endswith(gains + "\n")
    # tested on the prose: the reference is Y without its tables
    prose = ck.reference_of("directions_reversed", REPORT)
    assert "|" not in prose and "Revenue increased 12%" in prose
    assert ck.reference_of("figures_x1000", REPORT) == REPORT


def _words(text: str) -> list[str]:
    return text.split()


def test_meaning_preserving_perturbations_keep_every_word():
    merged = ck.perturb("paragraphs_merged", REPORT)
    assert _words(merged) == _words(REPORT)
    paras = [b for b in re.split(r"\n\s*\n", merged) if b.startswith("Revenue increased")]
    assert paras and "Net loss was" in paras[0]  # two paragraphs became one
    # a paragraph that ends no sentence (a line standing for a heading, a lead-in to a list) ends its run
    lead = "# T\n\n## A\n\nSegment results\n\nSales rose. Costs fell.\n\nMargins held.\n"
    assert ck.perturb("paragraphs_merged", lead).endswith(
        "Segment results\n\nSales rose. Costs fell. Margins held.\n"
    )
    split = ck.perturb("paragraphs_split", REPORT)
    assert _words(split) == _words(REPORT)
    assert "\n\nOperating expenses rose" in split
    restyled = ck.perturb("markdown_restyled", REPORT)
    assert "* Cash was" in restyled and "## Results of Operations ##" in restyled
    # an escaped pipe inside a cell stays one cell; an image line stays one line
    cell = "| Symbol | Meaning |\n|---|---|\n| $\\|k\\|$ | wave number |"
    figure = "![Figure 1: " + "a long caption " * 10 + "](f1.png)"
    odd = ck.perturb("markdown_restyled", REPORT + "\n" + cell + "\n\n" + figure + "\n")
    assert "| $\\|k\\|$ | wave number |" in odd and figure in odd
    plain = [w for w in _words(restyled) if not set(w) <= set("#|-*")]
    assert plain == [w for w in _words(REPORT) if not set(w) <= set("#|-*")]


def test_heading_retitled_uses_another_filers_title_for_the_same_item():
    pairs = [
        ("7", "Management's Discussion and Analysis of Financial Condition and Results of Operations"),
        ("7", "Management’s Discussion and Analysis of Financial Condition and Results of Operations"),
        ("7", "MD&A"),
        ("1A", "Risk Factors"),
    ]
    titles = ck.filer_titles(pairs)
    report = "# R\n\n## Management's Discussion and Analysis\n\nText.\n\n## Risk Factors\n\nMore.\n"
    out = ck.perturb("heading_retitled", report, titles)
    assert "## Management's Discussion and Analysis of Financial Condition and Results of Operations" in out
    assert "## Risk Factors" in out  # one title only: nothing to replace it with
    assert ck.perturb("heading_retitled", "# R\n\n## Overview\n\nText.\n", titles) is None


def test_too_few_figures_is_not_applicable():
    assert ck.perturb("figures_x1000", "# R\n\n## A\n\nIt was 3 of them.\n") is None


@pytest.mark.parametrize(
    ("name", "before", "after", "higher", "right"),
    [
        ("figures_x1000", 0.80, 0.74, True, True),  # down 0.06
        ("figures_x1000", 0.80, 0.76, True, False),  # down 0.04: not enough
        ("figures_x1000", 10.0, 16.0, False, True),  # lower-is-better on 0..100: up 0.06 of the range
        ("paragraphs_merged", 0.80, 0.815, True, True),
        ("paragraphs_merged", 0.80, 0.83, True, False),
    ],
)
def test_moved_right_applies_the_bars(name, before, after, higher, right):
    high = 100.0 if not higher else 1.0
    assert ck.moved_right(name, before, after, 0.0, high, higher) is right


def test_changed_share_counts_changed_removed_and_moved_lines():
    # sentences, not lines: a paragraph of three sentences is three units, one of them changed
    assert (
        ck.changed_share(
            "Sales rose. Costs fell. Margins held.\n| a | 1 |",
            "Sales rose. Costs rose. Margins held.\n| a | 1 |",
        )
        == 0.25
    )
    before = "a\nb\n\nc\nd\n"
    assert ck.changed_share(before, before) == 0.0
    assert ck.changed_share(before, "a\nb\n") == 0.5  # c and d removed
    assert ck.changed_share(before, "a\nB\nc\nd\n") == 0.25
    assert ck.changed_share(before, "c\nd\n\na\nb\n") == 0.5  # two blocks swapped: one counts as moved
    dropped = ck.perturb("section_dropped", REPORT)
    assert ck.changed_share(REPORT, dropped) >= ck.MIN_CHANGED


def test_every_unclaimed_aspect_is_a_checklist_aspect_with_a_reason():
    from tasks.score import registry

    aspects = {p.what for p in ck.PERTURBATIONS}
    for name, spec in registry.specs().items():
        for aspect, why in spec.unclaimed:
            assert aspect in aspects, (name, aspect)
            assert len(why.split()) >= 5, (name, aspect, why)
    # the issue's own example: structure says it does not read figures; coverage claims figures
    assert "figures" in dict(registry.spec("structure").unclaimed)
    assert "figures" not in dict(registry.spec("coverage").unclaimed)
