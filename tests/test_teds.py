"""TEDS / TEDS-S (tasks.markdown.teds): hand-computed cases, brute-force and apted cross-checks."""

from __future__ import annotations

import random
import time
from functools import cache

import pytest

from tasks.markdown.teds import (
    TableCell,
    TableTree,
    normalized_edit_distance,
    parse_table,
    teds,
    teds_pair,
    teds_trees,
    tree_edit_distance,
)


def table(*rows: list[str], tag: str = "td") -> str:
    body = "".join("<tr>" + "".join(f"<{tag}>{c}</{tag}>" for c in r) + "</tr>" for r in rows)
    return f"<table>{body}</table>"


# --------------------------------------------------------------------------------------------- basics


def test_normalized_edit_distance():
    assert normalized_edit_distance("", "") == 0.0
    assert normalized_edit_distance("abc", "abc") == 0.0
    assert normalized_edit_distance("abc", "") == 1.0
    assert normalized_edit_distance("100", "10") == pytest.approx(1 / 3)
    assert normalized_edit_distance("kitten", "sitting") == pytest.approx(3 / 7)


def test_identical_is_one():
    h = table(["Revenue", "1,234"], ["Cost", "(56)"])
    assert teds(h, h) == 1.0
    assert teds(h, h, structure_only=True) == 1.0


def test_one_cell_text_changed():
    # 2x2 table: nodes = 1 table + 2 rows + 4 cells = 7. Only "100" -> "10" differs:
    # rename cost = Lev("100", "10") / max(3, 2) = 1/3, everything else maps at cost 0, and any edit
    # script that does not map that cell needs >= 2 insert/delete operations. TED = 1/3.
    # TEDS = 1 - (1/3) / 7 = 20/21.
    a = table(["x", "100"], ["y", "7"])
    b = table(["x", "10"], ["y", "7"])
    assert teds(a, b) == pytest.approx(20 / 21, abs=1e-12)
    assert teds(a, b, structure_only=True) == 1.0


def test_deleted_row():
    # A: 3 rows x 2 cells -> 1 + 3 + 6 = 10 nodes; B drops the middle row -> 1 + 2 + 4 = 7 nodes.
    # TED >= 10 - 7 = 3 and deleting the row and its 2 cells costs exactly 3. TEDS = 1 - 3/10 = 0.7.
    a = table(["a", "1"], ["b", "2"], ["c", "3"])
    b = table(["a", "1"], ["c", "3"])
    assert teds(a, b) == pytest.approx(0.7, abs=1e-12)
    assert teds(a, b, structure_only=True) == pytest.approx(0.7, abs=1e-12)


def test_span_mismatch_costs_one_rename():
    # One row, one cell each (3 nodes); same text but colspan 2 vs 1: rename = 1 (cheaper than
    # delete + insert = 2). TEDS = TEDS-S = 1 - 1/3.
    a = '<table><tr><td colspan="2">Total</td></tr></table>'
    b = "<table><tr><td>Total</td></tr></table>"
    assert teds(a, b) == pytest.approx(2 / 3, abs=1e-12)
    assert teds(a, b, structure_only=True) == pytest.approx(2 / 3, abs=1e-12)
    c = '<table><tr><td rowspan="2">Total</td></tr></table>'
    assert teds(b, c, structure_only=True) == pytest.approx(2 / 3, abs=1e-12)
    # explicit colspan="1" is the default
    assert teds(b, '<table><tr><td colspan="1">Total</td></tr></table>') == 1.0


def test_th_counts_as_td():
    assert teds(table(["a", "b"], tag="th"), table(["a", "b"], tag="td")) == 1.0


def test_thead_tbody_tfoot_ignored():
    a = (
        "<table><thead><tr><th>Item</th><th>2024</th></tr></thead>"
        "<tbody><tr><td>Sales</td><td>10</td></tr></tbody>"
        "<tfoot><tr><td>Total</td><td>10</td></tr></tfoot></table>"
    )
    b = table(["Item", "2024"], ["Sales", "10"], ["Total", "10"])
    assert teds(a, b) == 1.0
    assert parse_table(a) == parse_table(b)


def test_structure_only_ignores_text_but_not_shape():
    a = table(["a", "b"], ["c", "d"])
    b = table(["w", "x"], ["y", "zzz"])
    assert teds(a, b, structure_only=True) == 1.0
    assert teds(a, b) < 1.0
    # shape still counts: one extra cell -> TED 1, nodes max(7, 8) = 8
    c = table(["w", "x"], ["y", "z", "extra"])
    assert teds(a, c, structure_only=True) == pytest.approx(1 - 1 / 8, abs=1e-12)


def test_whitespace_collapsed():
    a = "<table><tr><td>  1,234\n   million </td><td>a&nbsp; b</td></tr></table>"
    b = "<table><tr><td>1,234 million</td><td>a b</td></tr></table>"
    assert teds(a, b) == 1.0


def test_row_split_uses_general_tree_edit():
    # A: one row [a, b, c, d] (6 nodes); B: rows [a, b], [c, d] (7 nodes). Best script: delete A's row,
    # insert B's two rows, map all four cells -> TED 3 (a row-by-row alignment would need 5).
    # TEDS = 1 - 3/7.
    a = table(["a", "b", "c", "d"])
    b = table(["a", "b"], ["c", "d"])
    assert teds(a, b) == pytest.approx(4 / 7, abs=1e-12)


def test_empty_tables():
    assert teds("<table></table>", "<table></table>") == 1.0
    assert teds("<table></table>", "<table><tbody></tbody></table>", structure_only=True) == 1.0
    # 1 node vs 3 nodes: insert a row and a cell -> TED 2; TEDS = 1 - 2/3
    assert teds("<table></table>", table(["x"])) == pytest.approx(1 / 3, abs=1e-12)
    # empty rows are rows
    assert teds("<table><tr></tr></table>", "<table></table>") == pytest.approx(0.5, abs=1e-12)


def test_first_table_is_used():
    a = table(["a"]) + table(["zzz", "yyy"])
    assert teds(a, table(["a"])) == 1.0


def test_nested_table_text_counted_not_recursed():
    h = "<table><tr><td>a<table><tr><td>b</td><td>c</td></tr></table></td><td>d</td></tr></table>"
    t = parse_table(h)
    assert len(t.rows) == 1
    assert [c.text for c in t.rows[0]] == ["abc", "d"]
    assert t.n_nodes == 4


def test_no_table_raises():
    with pytest.raises(ValueError, match="no <table>"):
        teds("<p>no table here</p>", table(["a"]))
    with pytest.raises(ValueError, match="no <table>"):
        teds(table(["a"]), "")
    with pytest.raises(ValueError, match="no <table>"):
        teds(table(["a"]), "   ")


def test_full_document_and_encoding_declaration():
    doc = (
        '<?xml version="1.0" encoding="windows-1252"?><html><head><meta charset="latin-1"></head>'
        "<body><div>Über</div><table><tr><td>Umsätze €</td></tr></table></body></html>"
    )
    assert parse_table(doc).rows == ((TableCell("Umsätze €"),),)


def test_teds_pair():
    a = table(["a", "1"], ["b", "2"])
    b = table(["a", "1"], ["b", "3"])
    t, s = teds_pair(a, b)
    assert t == teds(a, b)
    assert s == teds(a, b, structure_only=True) == 1.0


# ------------------------------------------------------------------------ independent brute force


def _rename(x: tuple, y: tuple, structure_only: bool) -> float:
    if x[0] != y[0]:
        return 1.0
    if x[0] != "td":
        return 0.0
    if x[2:] != y[2:]:
        return 1.0
    return 0.0 if structure_only else normalized_edit_distance(x[1], y[1])


def brute_ted(a: TableTree, b: TableTree, structure_only: bool = False) -> float:
    """Literal forest edit distance recursion (rightmost roots; Demaine et al.), memoised. Trees are
    (label, children) with label ("table",) / ("tr",) / ("td", text, colspan, rowspan)."""

    def tree(t: TableTree):
        return (
            ("table",),
            tuple((("tr",), tuple((("td", c.text, c.colspan, c.rowspan), ()) for c in r)) for r in t.rows),
        )

    def size(forest) -> int:
        return sum(1 + size(ch) for _, ch in forest)

    @cache
    def fd(f: tuple, g: tuple) -> float:
        if not f:
            return float(size(g))
        if not g:
            return float(size(f))
        (v, vc), (w, wc) = f[-1], g[-1]
        return min(
            fd(f[:-1] + vc, g) + 1,
            fd(f, g[:-1] + wc) + 1,
            fd(f[:-1], g[:-1]) + fd(vc, wc) + _rename(v, w, structure_only),
        )

    return fd((tree(a),), (tree(b),))


def random_table(rng: random.Random, max_rows: int, max_cells: int, alphabet: str = "ab") -> TableTree:
    rows = []
    for _ in range(rng.randint(0, max_rows)):
        cells = []
        for _ in range(rng.randint(0, max_cells)):
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 3)))
            cells.append(TableCell(text, rng.choice([1, 1, 1, 2]), rng.choice([1, 1, 1, 1, 2])))
        rows.append(tuple(cells))
    return TableTree(tuple(rows))


def test_matches_brute_force_on_small_trees():
    rng = random.Random(1234)
    checked = 0
    while checked < 400:
        a, b = random_table(rng, 3, 3), random_table(rng, 3, 3)
        if a.n_nodes > 7 or b.n_nodes > 7:
            continue
        so = rng.random() < 0.3
        assert tree_edit_distance(a, b, so) == pytest.approx(brute_ted(a, b, so), abs=1e-9), (a, b, so)
        checked += 1


def test_same_shape_is_sum_of_renames_when_renames_are_cheap():
    # Same shape, each cell differs by one character out of >= 5: every rename costs <= 1/5, so the
    # identity mapping (total = sum of renames) beats anything that inserts/deletes; brute force agrees.
    rng = random.Random(7)
    for _ in range(50):
        shape = [rng.randint(1, 2) for _ in range(rng.randint(1, 2))]
        texts = [["".join(rng.choice("abcdef") for _ in range(5)) for _ in range(k)] for k in shape]
        changed = [
            [t[:-1] + ("z" if t[-1] != "z" else "y") if rng.random() < 0.5 else t for t in r] for r in texts
        ]
        a = TableTree(tuple(tuple(TableCell(t) for t in r) for r in texts))
        b = TableTree(tuple(tuple(TableCell(t) for t in r) for r in changed))
        expected = sum(
            normalized_edit_distance(x, y)
            for ra, rb in zip(texts, changed, strict=True)
            for x, y in zip(ra, rb, strict=True)
        )
        assert tree_edit_distance(a, b) == pytest.approx(expected, abs=1e-12)
        assert tree_edit_distance(a, b) == pytest.approx(brute_ted(a, b), abs=1e-12)


def test_matches_apted_on_medium_trees():
    apted = pytest.importorskip("apted")

    class Node:
        def __init__(self, label: tuple, children: list[Node]):
            self.label, self.children = label, children

    class Costs(apted.Config):
        def __init__(self, structure_only: bool):
            self.structure_only = structure_only

        def rename(self, x: Node, y: Node) -> float:
            return _rename(x.label, y.label, self.structure_only)

    def to_nodes(t: TableTree) -> Node:
        return Node(
            ("table",),
            [Node(("tr",), [Node(("td", c.text, c.colspan, c.rowspan), []) for c in r]) for r in t.rows],
        )

    rng = random.Random(99)
    for _ in range(150):
        a, b = random_table(rng, 5, 5, "abc"), random_table(rng, 5, 5, "abc")
        so = rng.random() < 0.3
        want = apted.APTED(to_nodes(a), to_nodes(b), Costs(so)).compute_edit_distance()
        assert tree_edit_distance(a, b, so) == pytest.approx(want, abs=1e-9), (a, b, so)


def test_symmetry():
    rng = random.Random(5)
    for _ in range(200):
        a, b = random_table(rng, 4, 4, "abc"), random_table(rng, 4, 4, "abc")
        for so in (False, True):
            assert teds_trees(a, b, so) == teds_trees(b, a, so)
            assert 0.0 <= teds_trees(a, b, so) <= 1.0


# ------------------------------------------------------------------------------------------ speed


def _big_table(rows: int, cols: int, seed: int, drop: int | None = None) -> str:
    rng = random.Random(seed)
    body = "".join(
        "<tr>" + "".join(f"<td>{rng.randint(0, 10**6):,}</td>" for _ in range(cols)) + "</tr>"
        for r in range(rows)
        if r != drop
    )
    return f"<table><tbody>{body}</tbody></table>"


@pytest.mark.parametrize("shape", [(50, 10), (100, 5), (10, 50), (500, 1)])
def test_500_cells_well_under_a_second(shape):
    a = _big_table(*shape, seed=1)
    b = _big_table(*shape, seed=2, drop=3)
    t0 = time.perf_counter()
    value = teds(a, b)
    elapsed = time.perf_counter() - t0
    assert 0.0 < value < 1.0
    assert elapsed < 1.0, f"teds on a {shape[0]}x{shape[1]} table took {elapsed:.2f} s"
