"""HTML tables -> Markdown grids (Markdown tables are read back by tasks.markdown.tables).

The pieces are format-neutral: a converter (iXBRL or LaTeXML) reads its own cells into `Cell`s,
then `expand_spans` -> (optional EDGAR clean-ups) -> `grid_to_markdown`.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

# EDGAR lays out one number over several cells: "$" | "1,234" | ")" | "%". These fragments belong
# to the number beside them (SPEC §2.3: "$"/"%" merged into their numbers, "(123)" kept negative).
_PREFIX_FRAGMENTS = {"$", "€", "£", "¥", "(", "($", "$(", "US$"}
_SUFFIX_FRAGMENTS = {"%", ")", ")%", "%)", "pts", "bps", "x"}
_WS = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class Cell:
    text: str
    colspan: int = 1
    rowspan: int = 1
    header: bool = False


def collapse_ws(text: str) -> str:
    return _WS.sub(" ", text.replace("\u200b", "")).strip()


# Caps that keep hostile span values from blowing up memory and time (real tables stay far below):
# - one span covers at most MAX_SPAN rows or columns (HTML itself caps colspan at 1000);
# - a rowspan never reaches past the table's last row (those slots are never displayed);
# - spans never widen a row past MAX_SPAN_COLUMNS columns (a wide row pads every other row);
# - all spans of one table together add at most MAX_SPAN_SLOTS slots; later spans then count as 1.
MAX_SPAN = 1000
MAX_SPAN_COLUMNS = 1000
MAX_SPAN_SLOTS = 250_000


def expand_spans(rows: list[list[Cell]]) -> list[list[str]]:
    """Lay cells on a rectangular grid. A spanned cell's text sits in its first slot; the slots it
    also covers stay empty, so every displayed value appears exactly once. Spans are capped (see
    MAX_SPAN, MAX_SPAN_COLUMNS, MAX_SPAN_SLOTS)."""
    grid: list[list[str | None]] = []
    pending: dict[tuple[int, int], bool] = {}  # (row, col) slots taken by a rowspan from above
    budget = MAX_SPAN_SLOTS
    for r, row in enumerate(rows):
        out: list[str | None] = []
        c = 0
        for cell in row:
            while pending.pop((r, c), False):
                out.append("")
                c += 1
            cs = max(1, min(cell.colspan, MAX_SPAN, MAX_SPAN_COLUMNS - c))
            rs = max(1, min(cell.rowspan, MAX_SPAN, len(rows) - r))
            if cs * rs - 1 > budget:
                cs = rs = 1
            budget -= cs * rs - 1
            out.append(cell.text)
            out.extend([""] * (cs - 1))
            for dr in range(1, rs):
                for dc in range(cs):
                    pending[(r + dr, c + dc)] = True
            c += cs
        while pending.pop((r, c), False):
            out.append("")
            c += 1
        grid.append(out)
    width = max((len(r) for r in grid), default=0)
    return [[x or "" for x in row] + [""] * (width - len(row)) for row in grid]


def merge_fragments(grid: list[list[str]]) -> list[list[str]]:
    """Join currency/percent/parenthesis fragment cells to the number next to them."""
    out = []
    for row in grid:
        row = list(row)
        for i, text in enumerate(row):
            t = text.strip()
            if t in _PREFIX_FRAGMENTS:
                j = _next_filled(row, i, +1)
                if j is not None and _numberish(row[j]):
                    row[j] = t + row[j].strip()
                    row[i] = ""
            elif t in _SUFFIX_FRAGMENTS:
                j = _next_filled(row, i, -1)
                if j is not None and (_numberish(row[j]) or row[j].strip().startswith("(")):
                    # A unit word keeps the space the cell boundary shows ("0.4 pts"); signs join.
                    row[j] = row[j].strip() + (" " if t[0].isalpha() else "") + t
                    row[i] = ""
        out.append(row)
    return out


def _next_filled(row: list[str], i: int, step: int) -> int | None:
    j = i + step
    while 0 <= j < len(row):
        if row[j].strip():
            return j
        j += step
    return None


_NUMBERISH = re.compile(r"^[(\-−–—$€£¥]*\s*[\d.,]+\s*[)%]*$|^[—–-]+$")


def _numberish(text: str) -> bool:
    return bool(_NUMBERISH.match(text.strip()))


def drop_empty(grid: list[list[str]]) -> list[list[str]]:
    """Remove rows and columns with no text at all (EDGAR spacer cells)."""
    rows = [r for r in grid if any(c.strip() for c in r)]
    if not rows:
        return []
    keep = [j for j in range(len(rows[0])) if any(r[j].strip() for r in rows)]
    return [[r[j] for j in keep] for r in rows]


def fold_columns(grid: list[list[str]]) -> list[list[str]]:
    """Fold neighbouring columns that are never filled in the same row into one column.

    EDGAR aligns one logical column over several cells ("$" | number | ")" | spacer) and rows
    disagree on which of them carries the text (a colspan here, a split there); after fragment
    merging, the pieces of one logical column are exactly such disjoint neighbours.
    """
    if not grid:
        return grid
    width = len(grid[0])
    groups: list[list[int]] = []
    filled: list[set[int]] = []
    for j in range(width):
        rows_j = {i for i, row in enumerate(grid) if row[j].strip()}
        if groups and not (filled[-1] & rows_j) and _foldable(grid, groups[-1], j):
            groups[-1].append(j)
            filled[-1] |= rows_j
        else:
            groups.append([j])
            filled.append(rows_j)
    return [["".join(row[j] for j in g if row[j].strip()) for g in groups] for row in grid]


def _foldable(grid: list[list[str]], group: list[int], j: int) -> bool:
    """The row-label column never folds into a value column (labels are text, values numbers)."""
    if group == [0]:
        return False
    return True


def _escape_cell(text: str) -> str:
    return collapse_ws(text).replace("|", "\\|")


def grid_to_markdown(grid: list[list[str]], header_rows: int = 1) -> str:
    """Render a GitHub-flavoured Markdown table. Markdown allows one header row, so extra header
    rows become ordinary first rows (their text is kept, only the styling is lost)."""
    if not grid:
        return ""
    width = max(len(r) for r in grid)
    rows = [[_escape_cell(c) for c in r] + [""] * (width - len(r)) for r in grid]
    if header_rows <= 0:
        head = [""] * width
        body = rows
    else:
        head, body = rows[0], rows[1:]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * width) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines)


def grid_to_html(grid: list[list[str]]) -> str:
    """A plain <table> of the grid (no spans), for TEDS."""
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in grid)
    return f"<table>{body}</table>"
