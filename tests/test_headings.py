"""Two filers' titles for one Form item are one section to the form metrics (tasks/score/headings.py): the
rubric's sections-present item and the holistic proxy's headings found. Before, a report that titled its
MD&A in full missed a sample's short "Management's Discussion and Analysis" (the metric checklist's
heading_retitled cell of the rubric fell to 0.43 on the rebuilt demo)."""

from __future__ import annotations

import tasks.score.rubric  # noqa: F401  (registers the checks)
from tasks.score.headings import same_heading
from tasks.score.holistic.offline import _completeness
from tasks.score.rubric.reading import CHECKS, RubricContext

BODY = "The company reported revenue of $1,350 million for the quarter, up from $1,200 million a year ago."


def report(*headings: str) -> str:
    return "# Acme 10-Q\n\n" + "".join(f"## {h}\n\n{BODY}\n\n" for h in headings)


SAMPLE = report(
    "Management's Discussion and Analysis", "Quantitative and Qualitative Disclosures About Market Risk"
)


def test_one_form_item_under_two_titles_is_one_section():
    assert same_heading(
        "Management's Discussion and Analysis",
        "Item 2. Management’s Discussion and Analysis of Financial Condition and Results of Operations",
        85,
    )
    assert (
        same_heading(
            "Quantitative and Qualitative Disclosures About Market Risk", "Market Risk Disclosures", 85
        )
        is False
    )
    assert not same_heading("Risk Factors", "Legal Proceedings", 85)
    assert not same_heading("Revenue", "Overview", 85)  # neither names a Form item, and the words differ


def test_the_rubric_finds_a_retitled_item_and_misses_another_item():
    ctx = RubricContext("financial_quarterly", "ACME-10-Q", SAMPLE)
    full = report(
        "Management’s Discussion and Analysis of Financial Condition and Results of Operations",
        "Quantitative and Qualitative Disclosure of Market Risks",
    )
    assert CHECKS["sections_present"](full, ctx).decision == "pass"
    other = report("Risk Factors", "Legal Proceedings")
    assert CHECKS["sections_present"](other, ctx).decision == "fail"


def test_the_holistic_proxy_finds_a_retitled_item():
    retitled = report(
        "Management’s Discussion and Analysis of Financial Condition and Results of Operations",
        "Quantitative and Qualitative Disclosure of Market Risks",
    )
    assert _completeness(SAMPLE, retitled) == _completeness(SAMPLE, SAMPLE)
    assert _completeness(SAMPLE, report("Risk Factors", "Legal Proceedings")) != _completeness(SAMPLE, SAMPLE)
