"""The Markdown document model (tasks/markdown): heading readings, fences, blocks, tables, list items."""

from __future__ import annotations

import pytest

from tasks.markdown import (
    code_mask,
    hash_line,
    heading_of,
    headings,
    is_heading,
    markdown_tables,
    parse,
    split_row,
    table_grids,
    table_trees,
    title,
)

REPORT = """# Apple Inc. Quarterly Report

Intro paragraph
over two lines.

## Results

| Metric | Q1 | Q2 |
|---|---:|---:|
| Net sales | $1,234 | $1,300 |
| Margin \\| gross | 45% | 46% |

```python
# not a heading
## nor this
```

### Outlook ###

- first item
  continued here
- second item

1. numbered

## Risks
"""


def test_blocks_kinds_lines_and_paths() -> None:
    doc = parse(REPORT)
    got = [(b.kind, b.start, b.end, b.path) for b in doc.blocks]
    assert got == [
        ("heading", 1, 1, ()),
        ("paragraph", 3, 4, ("Apple Inc. Quarterly Report",)),
        ("heading", 6, 6, ("Apple Inc. Quarterly Report",)),
        ("table", 8, 11, ("Apple Inc. Quarterly Report", "Results")),
        ("code", 13, 16, ("Apple Inc. Quarterly Report", "Results")),
        ("heading", 18, 18, ("Apple Inc. Quarterly Report", "Results")),
        ("list", 20, 24, ("Apple Inc. Quarterly Report", "Results", "Outlook")),
        ("heading", 26, 26, ("Apple Inc. Quarterly Report",)),
    ]
    assert [(b.level, b.title) for b in doc.headings] == [
        (1, "Apple Inc. Quarterly Report"),
        (2, "Results"),
        (3, "Outlook"),  # closing #'s stripped
        (2, "Risks"),
    ]
    outlook = doc.blocks[5]
    assert doc.blocks[6].parents == (0, 2, 5) and doc.blocks[outlook.parents[-1]].title == "Results"
    assert doc.title == title(REPORT) == "Apple Inc. Quarterly Report"
    assert headings(REPORT)[1] == (2, "Results")


def test_fenced_hash_lines_are_not_headings() -> None:
    doc = parse(REPORT)
    code = doc.blocks[4]
    assert code.closed and code.lines[1] == "# not a heading"
    assert "not a heading" not in [b.title for b in doc.headings]
    assert not parse("```\n# a\n").blocks[0].closed  # an unclosed fence runs to the end
    assert [b.kind for b in parse("~~~\n# a\n~~~\n# b").blocks] == ["code", "heading"]
    # the same text through the passages reading (retrieval): its fences are ``` only
    assert [b.kind for b in parse("~~~\n# a\n~~~", reading="passages").blocks] == [
        "paragraph",
        "heading",
        "paragraph",
    ]


def test_tables_header_rows_and_cells() -> None:
    table = parse(REPORT).tables[0].table
    assert table is not None
    assert table.header == ("Metric", "Q1", "Q2")
    assert table.rows == (("Net sales", "$1,234", "$1,300"), ("Margin \\| gross", "45%", "46%"))
    assert split_row("| a \\| b | c |") == ["a \\| b", "c"]
    # grounding's reader: \| unescaped, any pipe line followed by a delimiter row starts a table
    assert markdown_tables(REPORT) == [
        [["Metric", "Q1", "Q2"], ["Net sales", "$1,234", "$1,300"], ["Margin | gross", "45%", "46%"]]
    ]
    assert markdown_tables("| a |\n| - |\n| 1 |") == []  # three dashes per cell
    assert table_grids("Intro\n| **a** | [b](x) |\n| - | - |\n| 1 | 2 |") == [[["a", "b"], ["1", "2"]]]
    trees = table_trees(REPORT)
    assert [[c.text for c in row] for row in trees[0].rows][0] == ["Metric", "Q1", "Q2"]


def test_list_items() -> None:
    lists = [b for b in parse(REPORT).blocks if b.kind == "list"]
    assert [(i.line, i.text) for i in lists[0].items] == [
        (20, "first item continued here"),
        (22, "second item"),
        (24, "numbered"),
    ]
    passages = parse("- a\nb\n- c\n\n1) d", reading="passages").blocks
    assert [(b.kind, [(i.line, i.text) for i in b.items]) for b in passages] == [
        ("list", [(1, "a b"), (3, "c")]),
        ("list", [(5, "d")]),
    ]


@pytest.mark.parametrize(
    ("line", "kwargs", "expected"),
    [
        ("## Title ##", {}, (2, "Title")),
        ("   ### Three spaces", {}, (3, "Three spaces")),
        ("    #### four spaces is code", {}, None),
        ("\t## tab indent", {}, None),
        ("\t## tab indent", {"indent": "blank"}, (2, "tab indent")),
        (" ## one space", {"indent": "none"}, None),
        ("####### seven", {}, None),
        ("#hashtag", {}, None),
        ("## C#", {}, (2, "C")),
        ("## C#", {"closing": False}, (2, "C#")),
        ("##  two  ", {"space": "one", "closing": False}, (2, " two  ")),
        ("##\tTabbed", {"space": "one"}, None),
        ("##\tTabbed", {"space": "tabs"}, (2, "Tabbed")),
        ("##\u00a0nbsp", {"space": "tabs"}, None),
        ("## ", {}, (2, "")),
        ("## ", {"text": "char"}, None),
        ("## ", {"space": "tabs", "text": "word"}, None),
        ("## #", {"space": "tabs", "text": "word"}, (2, "")),
    ],
)
def test_heading_readings(line: str, kwargs: dict, expected: tuple[int, str] | None) -> None:
    assert heading_of(line, **kwargs) == expected
    assert is_heading(line, **{k: v for k, v in kwargs.items() if k != "closing"}) == (expected is not None)


def test_hash_line_is_the_widest_reading() -> None:
    assert hash_line("#hashtag") and hash_line(" \t## x") and not hash_line("text # x")


@pytest.mark.parametrize(
    ("fences", "expected"),
    [
        ("commonmark", [1, 1, 1, 1, 1, 1]),  # a shorter run, or one with text after it, does not close
        ("lenient", [1, 1, 1, 1, 0, 1]),  # the closing run may carry text
        ("prefix", [1, 1, 1, 1, 0, 1]),
        ("any-fence", [1, 1, 0, 1, 1, 1]),  # any fence of the same character closes
        ("backticks", [1, 1, 0, 1, 1, 1]),
    ],
)
def test_fence_readings(fences, expected) -> None:
    lines = ["````", "```", "# x", "```` x", "# y", "````"]
    assert code_mask(lines, fences) == [bool(x) for x in expected]
