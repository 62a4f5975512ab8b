"""Outline rendering/filling and gold validation on small structures built here."""

from __future__ import annotations

from pathlib import Path

from schemas.documents import GroundingDocument
from schemas.structure import ReportStructure
from tasks.ground.load import GroundingSet
from tasks.synthesize.outline import fill_placeholders, find_placeholders, headings, render_outline
from tasks.synthesize.validate import validate_gold

STRUCTURE = ReportStructure.model_validate(
    {
        "title": "Acme Corp. Q1 2025 report",
        "nodes": [
            {
                "id": "s1",
                "type": "section",
                "title": "Financial Highlights",
                "questions": ["What was revenue?"],
                "children": [
                    {"id": "s1.t1", "type": "text", "objective": "Summarise revenue --> and margin."},
                    {
                        "id": "s1.tb1",
                        "type": "table",
                        "objective": "Income statement table.",
                        "questions": ["Net income?"],
                    },
                ],
            },
            {
                "id": "s2",
                "type": "section",
                "title": "Outlook",
                "children": [
                    {
                        "id": "s2.1",
                        "type": "subsection",
                        "title": "Demand",
                        "children": [{"id": "s2.1.t1", "type": "text", "objective": "Demand drivers."}],
                    }
                ],
            },
        ],
    }
)


def gset(texts: dict[str, str]) -> GroundingSet:
    docs = [
        GroundingDocument(
            doc_id=k,
            title=k,
            kind="prose",
            tokens=10,
            tables=0,
            images=0,
            source_sha256="0" * 64,
            source_kind="edgar",
            file=f"{k}.md",
        )
        for k in texts
    ]
    return GroundingSet(Path("."), docs, texts, [{"displayed_text": "7,777"}])


def test_outline_has_one_placeholder_per_leaf_with_objective_and_questions():
    outline = render_outline(STRUCTURE)
    phs = find_placeholders(outline)
    assert [p.id for p in phs] == ["s1.t1", "s1.tb1", "s2.1.t1"]
    assert headings(outline) == [
        "# Acme Corp. Q1 2025 report",
        "## Financial Highlights",
        "## Outlook",
        "### Demand",
    ]
    block = outline[phs[1].start : phs[1].end]
    assert "objective: Income statement table." in block
    assert "- Net income?" in block and "- What was revenue?" in block  # own + section questions
    assert "--> and" not in outline  # an objective cannot close the comment early


def test_fill_keeps_text_outside_placeholders_byte_identical():
    outline = render_outline(STRUCTURE)
    contents = {
        "s1.t1": "Revenue was $1,200 million.",
        "s1.tb1": "| a | b |\n|---|---|\n| 1 | 2 |",
        "s2.1.t1": "Demand rose 10%.",
    }
    report = fill_placeholders(outline, contents)
    phs = find_placeholders(outline)
    # Rebuild the outline's constant text from the report by cutting the contents back out.
    pos, rpos = 0, 0
    for p in phs:
        seg = outline[pos : p.start]
        assert report[rpos : rpos + len(seg)] == seg
        rpos += len(seg) + len(contents[p.id])
        pos = p.end
    assert report[rpos:] == outline[pos:]
    check = validate_gold(
        report, outline, contents, gset({"a": "Revenue of 1,200 and 1,090; demand 10 units"})
    )
    assert check.skeleton_equal and check.placeholders_left == 0


def test_numbers_found_derived_or_reported():
    outline = render_outline(STRUCTURE)
    contents = {
        "s1.t1": "Revenue was 1,200, up 10.1% from 1,090; the total of both periods was 2,290.",
        "s1.tb1": "| x |\n|---|\n| 7,777 |",
        "s2.1.t1": "Demand reached 4,321 units.",
    }
    report = fill_placeholders(outline, contents)
    check = validate_gold(report, outline, contents, gset({"a": "Revenue 1,200 versus 1,090 a year ago."}))
    # 1,200 and 1,090 verbatim; 10.1% = (1200-1090)/1090; 2,290 = sum; 7,777 from facts; 4,321 unsupported.
    assert check.numbers_total == 6
    assert check.numbers_supported == 5
    assert [u["number"] for u in check.unsupported] == ["4,321"]
    assert check.unsupported[0]["node_id"] == "s2.1.t1"


def test_leftover_placeholder_and_heading_in_content_fail_the_skeleton():
    outline = render_outline(STRUCTURE)
    contents = {"s1.t1": "ok", "s1.tb1": "## injected heading", "s2.1.t1": "ok"}
    report = fill_placeholders(outline, contents)
    assert not validate_gold(report, outline, contents, gset({"a": ""})).skeleton_equal
    partial = outline.replace(
        outline[find_placeholders(outline)[0].start : find_placeholders(outline)[0].end], "text", 1
    )
    check = validate_gold(partial, outline, {"s1.t1": "text"}, gset({"a": ""}))
    assert check.placeholders_left == 2 and not check.ok
