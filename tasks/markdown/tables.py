"""Markdown pipe tables as grids of cell strings (grounding QA, questions) or TEDS trees (fidelity)."""

from __future__ import annotations

from tasks.markdown.document import Fences, inline_text, is_separator, is_table_row, parse, split_row
from tasks.markdown.teds import TableCell, TableTree

__all__ = ["markdown_tables", "table_grids", "table_trees"]


def _cells(line: str) -> list[str]:
    return [c.replace("\\|", "|") for c in split_row(line)]


def markdown_tables(markdown: str) -> list[list[list[str]]]:
    """Every pipe table in a Markdown text, as grids of cell strings (header row first, \\| unescaped).

    A line-by-line scan, not fence-aware: a table starts at any pipe line followed by a delimiter row
    (three dashes per cell) and runs over the following pipe lines."""
    lines = markdown.splitlines()
    tables: list[list[list[str]]] = []
    i = 0
    while i < len(lines) - 1:
        if is_table_row(lines[i]) and is_separator(lines[i + 1]):
            grid = [_cells(lines[i])]
            i += 2
            while i < len(lines) and is_table_row(lines[i]):
                grid.append(_cells(lines[i]))
                i += 1
            tables.append(grid)
        else:
            i += 1
    return tables


def table_grids(markdown: str, fences: Fences = "prefix") -> list[list[list[str]]]:
    """The tables of the commonmark reading (`parse`) as rows of `inline_text` cells, header row first:
    the scorers' reading (tasks/score/tree.table_grids)."""
    return [
        [[inline_text(c) for c in row] for row in (b.table.header, *b.table.rows)]
        for b in parse(markdown, fences=fences).tables
        if b.table is not None
    ]


def table_trees(markdown: str, fences: Fences = "prefix") -> list[TableTree]:
    """`table_grids` as TEDS trees (every cell spans 1; the header row is a row like the others)."""
    return [
        TableTree(rows=tuple(tuple(TableCell(text=c) for c in row) for row in grid))
        for grid in table_grids(markdown, fences)
    ]
