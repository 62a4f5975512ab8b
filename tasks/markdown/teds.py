"""TEDS and TEDS-S: tree-edit-distance similarity of two HTML tables (SPEC §5, paper 002 §4.1 / App. A),
exact for these depth-2 trees by a row-wise dynamic programme.

Specification: docs/metrics/tables.md (sections "TEDS and TEDS-S" and "Algorithm")
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import lxml.html
import numpy as np
from lxml import etree
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

__all__ = [
    "TableCell",
    "TableTree",
    "normalized_edit_distance",
    "parse_table",
    "table_from_element",
    "teds",
    "teds_pair",
    "teds_trees",
    "tree_edit_distance",
]

_WS = re.compile(r"\s+")
_DIGITS = re.compile(r"\s*(\d+)")
_CELL_TAGS = frozenset({"td", "th"})


@dataclass(frozen=True, slots=True)
class TableCell:
    text: str  # whitespace-collapsed text content (nested tables included, not recursed into)
    colspan: int = 1
    rowspan: int = 1


@dataclass(frozen=True, slots=True)
class TableTree:
    rows: tuple[tuple[TableCell, ...], ...]

    @property
    def n_cells(self) -> int:
        return sum(len(r) for r in self.rows)

    @property
    def n_nodes(self) -> int:
        """Nodes of the tree: the table, its rows and its cells."""
        return 1 + len(self.rows) + self.n_cells


def collapse_ws(text: str) -> str:
    return _WS.sub(" ", text.replace("\u200b", "")).strip()


def normalized_edit_distance(a: str, b: str) -> float:
    """Levenshtein distance / max(len(a), len(b), 1); 0.0 for two empty strings."""
    return Levenshtein.distance(a, b) / max(len(a), len(b), 1)


def _span(value: str | None) -> int:
    if value is None:
        return 1
    m = _DIGITS.match(value)
    if not m:
        return 1
    # int() refuses strings of more than 4300 digits; no real span has more than a few.
    digits = m.group(1)
    return int(digits) if len(digits) <= 9 else 10**9


def _local(tag: object) -> str:
    """Lower-case local tag name; '' for comments and processing instructions."""
    if not isinstance(tag, str):
        return ""
    return tag.rsplit("}", 1)[-1].lower()


def _owning_table(el: etree._Element) -> etree._Element | None:
    for anc in el.iterancestors():
        if _local(anc.tag) == "table":
            return anc
    return None


def table_from_element(table: etree._Element) -> TableTree:
    """Build the tree of one ``<table>`` element. Rows of nested tables are not rows of this table; a cell
    holding a nested table keeps that table's text as part of its own text."""
    rows = []
    for tr in table.iter():
        if _local(tr.tag) != "tr" or _owning_table(tr) is not table:
            continue
        cells = []
        for child in tr:
            if _local(child.tag) in _CELL_TAGS:
                cells.append(
                    TableCell(
                        text=collapse_ws(child.text_content()),
                        colspan=_span(child.get("colspan")),
                        rowspan=_span(child.get("rowspan")),
                    )
                )
        rows.append(tuple(cells))
    return TableTree(rows=tuple(rows))


def parse_table(html: str) -> TableTree:
    """Parse the first ``<table>`` of an HTML string. Raises ValueError if there is none."""
    if not isinstance(html, str):
        raise TypeError(f"expected an HTML string, got {type(html).__name__}")
    head = html[:80].replace("\n", " ")
    if not html.strip():
        raise ValueError("no <table> element in the HTML input (input is empty)")
    parser = lxml.html.HTMLParser(encoding="utf-8")
    try:
        root = lxml.html.document_fromstring(html.encode("utf-8"), parser=parser)
    except (etree.ParserError, ValueError) as e:
        raise ValueError(f"cannot parse HTML input starting {head!r}: {e}") from e
    for el in root.iter():
        if _local(el.tag) == "table":
            return table_from_element(el)
    raise ValueError(f"no <table> element in the HTML input starting {head!r}")


# ---------------------------------------------------------------------------------------------------------
# Exact tree edit distance for table trees
# ---------------------------------------------------------------------------------------------------------


def _cell_costs(
    row: tuple[TableCell, ...], b_texts: list[str], b_cs: np.ndarray, b_rs: np.ndarray, structure_only: bool
) -> np.ndarray:
    """Rename costs of the cells of one row of A against all cells of B, shape (len(row), cells_B)."""
    k, nb = len(row), len(b_texts)
    if k == 0 or nb == 0:
        return np.zeros((k, nb))
    if structure_only:
        cost = np.zeros((k, nb))
    else:
        a_texts = [c.text for c in row]
        dist = process.cdist(a_texts, b_texts, scorer=Levenshtein.distance, dtype=np.int64)
        a_len = np.array([len(t) for t in a_texts])
        b_len = np.array([len(t) for t in b_texts])
        cost = dist / np.maximum(np.maximum(a_len[:, None], b_len[None, :]), 1)
    a_cs = np.array([c.colspan for c in row])
    a_rs = np.array([c.rowspan for c in row])
    cost[(a_cs[:, None] != b_cs[None, :]) | (a_rs[:, None] != b_rs[None, :])] = 1.0
    return cost


def _row_distances(cost: np.ndarray, pad_index: np.ndarray, b_lens: np.ndarray) -> np.ndarray:
    """Sequence edit distance (indel 1, substitution = ``cost``) between one row of A and every row of B.

    ``pad_index`` (rows_B, K) holds the global index of B's cell (w, s), 0 in the padding; the padding lies
    right of each row's end and cannot influence the entries read back at column ``b_lens[w]``.
    """
    m_b, k_max = pad_index.shape
    cols = np.arange(k_max + 1, dtype=np.float64)
    h = np.broadcast_to(cols, (m_b, k_max + 1)).copy()
    e = np.empty_like(h)
    for t in range(cost.shape[0]):
        sub = cost[t][pad_index]
        e[:, 0] = t + 1
        np.minimum(h[:, 1:] + 1.0, h[:, :-1] + sub, out=e[:, 1:])
        h = cols + np.minimum.accumulate(e - cols, axis=1)
    return h[np.arange(m_b), b_lens]


def _ted_oriented(a: TableTree, b: TableTree, structure_only: bool) -> float:
    # Forests of B in chain order: empty, then per row w: its cells loose one by one, then row w intact.
    b_lens = np.array([len(r) for r in b.rows], dtype=np.int64)
    m_b, n_b = len(b.rows), b.n_nodes
    is_cell = np.zeros(n_b, dtype=bool)
    cell_of = np.zeros(n_b, dtype=np.int64)  # B state -> global cell index (cell states)
    row_of = np.zeros(n_b, dtype=np.int64)  # B state -> row index (row states)
    map_pred = np.zeros(n_b, dtype=np.int64)  # forest left after removing the rightmost tree
    s, g, last_intact = 1, 0, 0
    for w, r in enumerate(b.rows):
        for _ in r:
            is_cell[s], cell_of[s], map_pred[s] = True, g, s - 1
            s, g = s + 1, g + 1
        row_of[s], map_pred[s] = w, last_intact
        last_intact = s
        s += 1
    b_cells = [c for r in b.rows for c in r]
    b_texts = [c.text for c in b_cells]
    b_cs = np.array([c.colspan for c in b_cells], dtype=np.int64)
    b_rs = np.array([c.rowspan for c in b_cells], dtype=np.int64)
    k_max = int(b_lens.max()) if m_b else 0
    pad_index = np.zeros((m_b, k_max), dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(b_lens)[:-1])) if m_b else np.zeros(0, dtype=np.int64)
    for w in range(m_b):
        pad_index[w, : b_lens[w]] = starts[w] + np.arange(b_lens[w])
    row_len_at = np.where(is_cell, 0, b_lens[row_of] if m_b else 0)

    idx = np.arange(n_b, dtype=np.float64)
    prev = idx.copy()  # D[empty forest of A][b] = size of forest b = b
    intact = prev
    a_state = 0
    for row in a.rows:
        cost = _cell_costs(row, b_texts, b_cs, b_rs, structure_only)
        # A: the cells of this row set loose, one by one (rightmost root = that cell)
        for t in range(len(row)):
            a_state += 1
            ren = np.where(is_cell, cost[t][cell_of] if b_texts else 1.0, 1.0 + row_len_at)
            prev = _dp_step(prev, prev, ren, map_pred, idx, a_state)
        # A: the row intact (rightmost root = the row)
        a_state += 1
        seq = _row_distances(cost, pad_index, b_lens) if m_b else np.zeros(0)
        ren = np.where(is_cell, 1.0 + len(row), seq[row_of] if m_b else 0.0)
        prev = _dp_step(prev, intact, ren, map_pred, idx, a_state)
        intact = prev
    return float(prev[-1])


def _dp_step(
    prev: np.ndarray, map_src: np.ndarray, ren: np.ndarray, map_pred: np.ndarray, idx: np.ndarray, size: int
) -> np.ndarray:
    """One forest of A against all forests of B: min(delete A's rightmost root, map the rightmost trees,
    insert B's rightmost root); the insertion chain is a running minimum."""
    e = prev + 1.0
    mapped = map_src[map_pred] + ren
    mapped[0] = np.inf
    np.minimum(e, mapped, out=e)
    e[0] = size
    return idx + np.minimum.accumulate(e - idx)


def _orientation_key(t: TableTree) -> tuple:
    return tuple(tuple((c.text, c.colspan, c.rowspan) for c in r) for r in t.rows)


def _work(a: TableTree, b: TableTree) -> int:
    k_max = max((len(r) for r in b.rows), default=0)
    return a.n_cells * len(b.rows) * (k_max + 1) + a.n_nodes * b.n_nodes


def tree_edit_distance(a: TableTree, b: TableTree, structure_only: bool = False) -> float:
    """Exact tree edit distance between two table trees under the TEDS costs (symmetric)."""
    # The distance is symmetric; pick the cheaper orientation, deterministically, so that
    # tree_edit_distance(a, b) and tree_edit_distance(b, a) run the very same computation.
    if (_work(a, b), _orientation_key(a)) > (_work(b, a), _orientation_key(b)):
        a, b = b, a
    # The roots (table -> table, cost 0) are always mapped in an optimal edit script: mapping them costs
    # nothing and keeps every other mapping valid, so TED = forest distance of the row forests.
    return _ted_oriented(a, b, structure_only)


def teds_trees(a: TableTree, b: TableTree, structure_only: bool = False) -> float:
    """TEDS (or TEDS-S) of two parsed tables, in [0, 1]."""
    n = max(a.n_nodes, b.n_nodes)
    ted = tree_edit_distance(a, b, structure_only)
    return max(0.0, min(1.0, 1.0 - ted / n))


def teds(a_html: str, b_html: str, structure_only: bool = False) -> float:
    """TEDS of the first table of each HTML string (TEDS-S with ``structure_only=True``).

    Raises ValueError if an input holds no ``<table>``.
    """
    return teds_trees(parse_table(a_html), parse_table(b_html), structure_only)


def teds_pair(a_html: str, b_html: str) -> tuple[float, float]:
    """(TEDS, TEDS-S), parsing each input once."""
    a, b = parse_table(a_html), parse_table(b_html)
    return teds_trees(a, b), teds_trees(a, b, structure_only=True)
