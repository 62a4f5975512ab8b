"""Property-based tests (hypothesis): random and mutated HTML/Markdown into grounding and scoring parsers.

Seeds are real: a small filing assembled from elements of a corpus 10-Q (its XBRL header pruned to the
contexts in use, the cover, Part I / Item 1, the statement of operations with its table, Note 1) and a
small real arXiv LaTeXML page. Mutations: truncation, byte flips, inserted bytes (NUL, RTL override,
UTF-8-encoded surrogates, invalid UTF-8), tag deletion/duplication, attribute garbage, huge or odd
colspan/rowspan values, deep nesting and odd unicode text.

Property: each function returns a well-formed result (Markdown tables rectangular, text is str, ...)
or raises `tasks.errors.FrameInputError` whose message is one line naming the input; nothing else.
Runs are derandomized (same examples on every run) and bounded.
"""

from __future__ import annotations

import copy
import functools
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree
from lxml import html as lxml_html

from tasks.errors import FrameInputError
from tasks.ground.ixbrl import IX, XHTML, clean_filing, numeric_value
from tasks.ground.split import _block_markdown, filing_table_grid, split_filing
from tasks.ground.tables import (
    MAX_SPAN_COLUMNS,
    Cell,
    collapse_ws,
    expand_spans,
    grid_to_markdown,
)
from tasks.markdown.pieces import markdown_pieces
from tasks.markdown.pieces import md_blocks as _md_blocks
from tasks.markdown.tables import markdown_tables
from tasks.markdown.teds import parse_table, teds_pair
from tasks.score.tree import report_tree, table_grids, tree_size
from tasks.sources import ground_source
from tests.conftest import CORPUS

FILING = CORPUS / "edgar" / "AAPL" / "10-Q" / "2025-03-29.htm"
PAPER = CORPUS / "arxiv" / "large-language-models" / "2412.19437.html"

pytestmark = pytest.mark.skipif(not (FILING.is_file() and PAPER.is_file()), reason="shared corpus not found")

SETTINGS = dict(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

ODD_TEXT = [
    "\u202e",  # RTL override
    "\u202c",
    "\u0301",  # combining acute
    "\uff0e\uff0e\uff0f",  # fullwidth ../
    "\u200b",
    "\u2028",
    "\ufeff",
    "|",
    "\\|",
    "$",
    "(",
    ")",
    "%",
    "—",
    "1,234",
    "(56)",
    "Item 2.",
    "PART II",
    "Note 3 – Fair Value",
    "\U0001f600",
    "\t\n  ",
]
ODD_BYTES = [
    b"\x00",
    b"\xe2\x80\xae",  # RTL override, UTF-8
    b"\xed\xa0\x80",  # a lone surrogate, as (invalid) UTF-8 bytes
    b"\xed\xbf\xbf",
    b"\xff",
    b"\xc3",  # a cut multi-byte sequence
    b"<",
    b">",
    b"&",
    b"&#0;",
    b"&bogus;",
    b"]]>",
    b"<![CDATA[",
    b"<!--",
    b"</table>",
    b"<td colspan='99999999999999999999'>",
    b"</html>",
]
SPAN_VALUES = [
    "0",
    "-3",
    "1",
    "2",
    "3",
    "1000",
    "65535",
    "999999999",
    "9" * 30,
    "9" * 5000,
    "\u00b2",  # superscript two: isdigit() but not int()
    "\u0663",  # Arabic-Indic three
    "\uff13",  # fullwidth three
    "3px",
    " 4 ",
    "+2",
    "1_0",
    "",
    "nan",
    "0x10",
]
GARBAGE_ATTRS = [
    ("style", "display:none"),
    ("style", "font-weight:900;page-break-after:always"),
    ("style", ";;;:::;"),
    ("style", "visibility:hidden"),
    ("style", "break-before:page"),
    ("class", "ltx_ERROR ltx_tabular ltx_equation"),
    ("scale", "9" * 40),
    ("scale", "1000000"),
    ("scale", "-99999999999"),
    ("format", "ixt:num-dot-decimal"),
    ("format", "ixt:fixed-zero"),
    ("sign", "-"),
    ("contextRef", "no-such-context"),
    ("alttext", "\\frac{a}{b}%\n"),
    ("src", "../../etc/passwd"),
    ("alt", "\u202eevil"),
]


def assert_input_error(exc: BaseException, name: str) -> None:
    assert isinstance(exc, FrameInputError), repr(exc)
    msg = str(exc)
    assert msg.startswith(f"{name}: "), msg
    assert len(msg.splitlines()) == 1, repr(msg)


def assert_tables_rectangular(markdown: str) -> None:
    for table in markdown_tables(markdown):
        width = len(table[0])
        assert all(len(row) == width for row in table), table
    for table in table_grids(markdown):
        width = len(table[0])
        assert all(len(row) == width for row in table), table


def assert_grounded(g) -> None:
    assert len(g.markdown) == len(g.documents)
    assert len({d.file for d in g.documents}) == len(g.documents)
    for doc in g.documents:
        md = g.markdown[doc.file]
        assert isinstance(md, str) and md.endswith("\n")
        assert isinstance(doc.tokens, int) and doc.tokens >= 0
        assert "/" not in doc.file and not doc.file.startswith(".")
        assert_tables_rectangular(md)


# ---------------------------------------------------------------- seeds


@functools.cache
def filing_seed() -> bytes:
    """A small well-formed filing made of real elements of the corpus 10-Q."""
    root = etree.parse(str(FILING), etree.XMLParser(huge_tree=True)).getroot()
    body = root.find(f"{{{XHTML}}}body")
    kids = list(body)
    texts = ["".join(k.itertext()).strip() for k in kids]
    cover = next(
        i
        for i, k in enumerate(kids)
        if k.find(f".//{{{IX}}}nonNumeric[@name='dei:DocumentType']") is not None
    )
    part1 = next(i for i, t in enumerate(texts) if t.upper().startswith("PART I") and i > cover)
    ops = next(i for i, t in enumerate(texts) if "STATEMENTS OF OPERATIONS" in t.upper() and i > part1)
    table = next(i for i in range(ops, len(kids)) if kids[i].find(f".//{{{XHTML}}}table") is not None)
    note1 = next(i for i, t in enumerate(texts) if t.startswith("Note 1") and i > table)
    picked = [cover, *range(part1, table + 1), *range(note1, note1 + 3)]
    header_div = copy.deepcopy(kids[0])
    header = header_div.find(f".//{{{IX}}}header")
    assert header is not None
    used = {"c-1"}
    for i in picked:
        used |= {e.get("contextRef") for e in kids[i].iter(f"{{{IX}}}nonFraction", f"{{{IX}}}nonNumeric")}
    for ctx in list(header.iter("{http://www.xbrl.org/2003/instance}context")):
        if ctx.get("id") not in used:
            ctx.getparent().remove(ctx)
    hidden = header.find(f"{{{IX}}}hidden")
    if hidden is not None:
        for fact in list(hidden):
            if not (fact.get("name") or "").startswith("dei:"):
                hidden.remove(fact)
    new_root = etree.Element(root.tag, nsmap=root.nsmap)
    new_root.append(copy.deepcopy(root.find(f"{{{XHTML}}}head")))
    new_body = etree.SubElement(new_root, f"{{{XHTML}}}body")
    new_body.append(header_div)
    for i in picked:
        new_body.append(copy.deepcopy(kids[i]))
    return etree.tostring(new_root, xml_declaration=True, encoding="utf-8")


@functools.cache
def paper_seed() -> bytes:
    return PAPER.read_bytes()


def test_seeds_ground_normally():
    """The unmutated seeds give real documents (otherwise the properties would test error paths only)."""
    seed = filing_seed()
    assert len(seed) < 120_000
    g = ground_source(seed, "seed.htm", kind="edgar")
    assert_grounded(g)
    files = [d.file for d in g.documents]
    assert "statement-of-operations.md" in files and any(f.startswith("note-01-") for f in files)
    assert any(markdown_tables(md) for md in g.markdown.values())
    assert sum(f.value is not None for f in g.facts) >= 20
    p = ground_source(paper_seed(), "paper.html", kind="arxiv")
    assert_grounded(p)
    [md] = p.markdown.values()
    assert md.startswith("# ") and "## References" in md


# ---------------------------------------------------------------- mutation strategies


def tree_ops():
    op = st.one_of(
        st.tuples(st.just("delete"), st.floats(0, 1)),
        st.tuples(st.just("duplicate"), st.floats(0, 1)),
        st.tuples(
            st.just("span"),
            st.floats(0, 1),
            st.sampled_from(["colspan", "rowspan"]),
            st.sampled_from(SPAN_VALUES),
        ),
        st.tuples(st.just("attr"), st.floats(0, 1), st.sampled_from(GARBAGE_ATTRS)),
        st.tuples(st.just("nest"), st.floats(0, 1), st.integers(1, 1500)),
        st.tuples(
            st.just("text"), st.floats(0, 1), st.lists(st.sampled_from(ODD_TEXT), min_size=1, max_size=4)
        ),
    )
    return st.lists(op, max_size=6)


def byte_ops():
    op = st.one_of(
        st.tuples(st.just("truncate"), st.floats(0, 1)),
        st.tuples(st.just("flip"), st.floats(0, 1), st.integers(1, 255)),
        st.tuples(st.just("insert"), st.floats(0, 1), st.sampled_from(ODD_BYTES)),
        st.tuples(st.just("cut"), st.floats(0, 1), st.integers(1, 400)),
    )
    return st.lists(op, max_size=3)


def apply_tree_ops(root, ops) -> None:
    for op in ops:
        elements = [e for e in root.iter() if isinstance(e.tag, str) and e.getparent() is not None]
        if not elements:
            return
        el = elements[min(int(op[1] * len(elements)), len(elements) - 1)]
        kind = op[0]
        if kind == "delete":
            el.getparent().remove(el)
        elif kind == "duplicate":
            el.addnext(copy.deepcopy(el))
        elif kind == "span":
            cells = [
                e for e in root.iter() if isinstance(e.tag, str) and etree.QName(e).localname in ("td", "th")
            ]
            if cells:
                cells[min(int(op[1] * len(cells)), len(cells) - 1)].set(op[2], op[3])
        elif kind == "attr":
            el.set(*op[2])
        elif kind == "nest":
            parent, index = el.getparent(), el.getparent().index(el)
            outer = inner = etree.Element(el.tag.replace(etree.QName(el).localname, "div"))
            for _ in range(op[2] - 1):
                inner = etree.SubElement(inner, outer.tag)
            parent.remove(el)
            inner.append(el)
            parent.insert(index, outer)
        elif kind == "text":
            el.text = (el.text or "") + "".join(op[2])


def apply_byte_ops(data: bytes, ops) -> bytes:
    for op in ops:
        at = int(op[1] * len(data))
        if op[0] == "truncate":
            data = data[:at]
        elif op[0] == "flip":
            if at < len(data):
                data = data[:at] + bytes([data[at] ^ op[2]]) + data[at + 1 :]
        elif op[0] == "insert":
            data = data[:at] + op[2] + data[at:]
        elif op[0] == "cut":
            data = data[:at] + data[at + op[2] :]
    return data


# ---------------------------------------------------------------- grounding properties


@settings(max_examples=80, **SETTINGS)
@given(tree=tree_ops(), raw=byte_ops())
def test_mutated_filing_grounds_or_fails_cleanly(tree, raw):
    root = etree.fromstring(filing_seed(), etree.XMLParser(huge_tree=True))
    apply_tree_ops(root, tree)
    data = apply_byte_ops(etree.tostring(root, xml_declaration=True, encoding="utf-8"), raw)
    try:
        clean = clean_filing(data, "mutated.htm")
    except FrameInputError as exc:
        assert_input_error(exc, "mutated.htm")
        return
    assert isinstance(clean.html, str)
    assert all(f.value is None or isinstance(f.value, float) for f in clean.facts)
    sections = split_filing(clean)
    assert len({s.doc_id for s in sections}) == len(sections)
    try:
        g = ground_source(data, "mutated.htm", kind="edgar")
    except FrameInputError as exc:
        assert_input_error(exc, "mutated.htm")
        return
    assert_grounded(g)


@settings(max_examples=50, **SETTINGS)
@given(tree=tree_ops(), raw=byte_ops())
def test_mutated_paper_converts_or_fails_cleanly(tree, raw):
    root = lxml_html.document_fromstring(paper_seed(), parser=lxml_html.HTMLParser(encoding="utf-8"))
    apply_tree_ops(root, tree)
    data = apply_byte_ops(lxml_html.tostring(root, encoding="utf-8"), raw)
    try:
        g = ground_source(data, "mutated.html", kind="arxiv")
    except FrameInputError as exc:
        assert_input_error(exc, "mutated.html")
        return
    assert_grounded(g)
    [md] = g.markdown.values()
    assert md.startswith("# ")


@settings(max_examples=60, **SETTINGS)
@given(raw=st.binary(max_size=3000), kind=st.sampled_from([None, "edgar", "arxiv"]))
def test_random_bytes_never_crash_grounding(raw, kind):
    try:
        g = ground_source(raw, "random.bin", kind=kind)
    except FrameInputError as exc:
        assert_input_error(exc, "random.bin")
        return
    assert_grounded(g)


def test_deep_nesting_grounds_or_is_refused():
    """Nesting below the parser limit grounds like the seed; beyond it, a one-line refusal."""
    seed = filing_seed()
    at = seed.index(b"<body>") + len(b"<body>")
    plain = ground_source(seed, "deep.htm", kind="edgar")
    for depth, ok in ((300, True), (1500, True), (2100, False)):
        data = seed[:at] + b"<div>" * depth + b"<p>deep text</p>" + b"</div>" * depth + seed[at:]
        if ok:
            g = ground_source(data, "deep.htm", kind="edgar")
            assert [d.file for d in g.documents] == [d.file for d in plain.documents]
            assert "deep text" in g.markdown["cover-page.md"]
        else:
            with pytest.raises(FrameInputError) as exc:
                ground_source(data, "deep.htm", kind="edgar")
            assert_input_error(exc.value, "deep.htm")
    paper = paper_seed()
    at = paper.index(b">", paper.index(b'<article class="ltx_document')) + 1
    para = b'<div class="ltx_para"><p class="ltx_p">deep text</p></div>'
    for depth in (200, 3000):
        data = paper[:at] + b"<div>" * depth + para + b"</div>" * depth + paper[at:]
        try:
            g = ground_source(data, "deep.html", kind="arxiv")
        except FrameInputError as exc:
            assert depth > 1000
            assert_input_error(exc, "deep.html")
        else:
            assert "deep text" in next(iter(g.markdown.values()))


def test_huge_spans_are_capped():
    """colspan/rowspan of a billion on every cell: bounded grid, fast, every text kept once."""
    html_rows = "".join(
        "<tr>"
        + "".join(f'<td colspan="999999999" rowspan="999999999">r{r}c{c}</td>' for c in range(40))
        + "</tr>"
        for r in range(40)
    )
    table = lxml_html.fragment_fromstring(f"<table>{html_rows}</table>")
    t0 = time.monotonic()
    grid = expand_spans([[Cell(f"r{r}c{c}", 10**9, 10**9) for c in range(40)] for r in range(40)])
    assert len(grid) == 40 and all(len(row) == len(grid[0]) for row in grid)
    assert len(grid[0]) <= MAX_SPAN_COLUMNS + 40 * 40
    texts = sorted(x for row in grid for x in row if x)
    assert texts == sorted(f"r{r}c{c}" for r in range(40) for c in range(40))
    md, kind = _block_markdown(table)
    assert kind == "table"
    assert_tables_rectangular(md)
    assert time.monotonic() - t0 < 10


# ---------------------------------------------------------------- tables


cell_text = st.text(
    alphabet=st.sampled_from(
        list("ab1,.$%()-| \\\n\t*_`#<>") + ["\u202e", "\u0301", "\u200b", "\u2028", "\x85", "—"]
    ),
    max_size=12,
)
cells = st.builds(
    Cell,
    cell_text,
    colspan=st.one_of(st.integers(-2, 4), st.sampled_from([1000, 10**6, 10**12])),
    rowspan=st.one_of(st.integers(-2, 4), st.sampled_from([1000, 10**6, 10**12])),
    header=st.booleans(),
)


@settings(max_examples=150, **SETTINGS)
@given(rows=st.lists(st.lists(cells, max_size=6), min_size=1, max_size=8), header_rows=st.integers(0, 2))
def test_grid_markdown_round_trip(rows, header_rows):
    grid = expand_spans(rows)
    width = len(grid[0]) if grid else 0
    assert len(grid) == len(rows) and all(len(r) == width for r in grid)
    # every non-empty cell text appears exactly once
    assert sorted(x for r in grid for x in r if x) == sorted(c.text for r in rows for c in r if c.text)
    if width == 0:
        return
    md = grid_to_markdown(grid, header_rows=header_rows)
    expected = [[collapse_ws(x) for x in r] for r in grid]
    if header_rows <= 0:
        expected = [[""] * width, *expected]
    assert markdown_tables(md) == [expected]
    [tree_grid] = table_grids(md)
    assert len(tree_grid) == len(expected) and all(len(r) == width for r in tree_grid)
    blocks = _md_blocks(md)
    assert [b.kind for b in blocks] == ["table"] and len(blocks[0].lines) == len(expected) + 1
    assert all(isinstance(p.text, str) for p in markdown_pieces(md))


def table_html(rows, attrs) -> str:
    out = []
    for r, row in enumerate(rows):
        tds = []
        for c, text in enumerate(row):
            a = attrs[(r * 7 + c) % len(attrs)] if attrs else ("", "")
            extra = f' {a[0]}="{a[1]}"' if a[0] else ""
            tds.append(f"<td{extra}>{text}</td>")
        out.append("<tr>" + "".join(tds) + "</tr>")
    return "<table>" + "".join(out) + "</table>"


html_text = st.lists(
    st.sampled_from(list("ab1,.$%()-|<>&/ ") + ["\u202e", "\u00b2", "&amp;", "<b>", "<td>", "</tr>"]),
    max_size=8,
).map("".join)
span_attr = st.tuples(st.sampled_from(["colspan", "rowspan", "style", "class"]), st.sampled_from(SPAN_VALUES))


@settings(max_examples=120, **SETTINGS)
@given(
    rows=st.lists(st.lists(html_text, max_size=6), min_size=1, max_size=6),
    attrs=st.lists(span_attr, max_size=5),
    other=st.lists(st.lists(html_text, max_size=4), min_size=1, max_size=4),
)
def test_html_tables_to_markdown_and_teds(rows, attrs, other):
    html = table_html(rows, attrs)
    try:
        table = lxml_html.fragment_fromstring(html)
    except etree.ParserError:
        return  # not one element (lxml's own refusal, before any of ours)
    if table.tag == "table":
        grid = filing_table_grid(table)
        assert all(len(r) == len(grid[0]) for r in grid)
        md, kind = _block_markdown(table)
        assert isinstance(md, str) and kind in ("table", "prose")
        assert_tables_rectangular(md)
    a, b = teds_pair(html, table_html(other, []))
    assert 0.0 <= b <= 1.0 and 0.0 <= a <= 1.0
    assert parse_table(html).n_nodes >= 1


@settings(max_examples=80, **SETTINGS)
@given(
    text=st.text(alphabet=st.sampled_from(list("0123456789,.-—() $%") + ["\u0663", "\uff11"]), max_size=14),
    fmt=st.sampled_from(
        [None, "ixt:num-dot-decimal", "ixt:num-comma-decimal", "ixt:fixed-zero", "ixt:num-word-en"]
    ),
    scale=st.sampled_from([None, "0", "3", "-2", "6", "1000000", "-1000000", "9" * 30, "x", ""]),
    sign=st.sampled_from([None, "-", "+"]),
)
def test_numeric_value_is_none_or_finite(text, fmt, scale, sign):
    value = numeric_value(text, fmt, scale, sign)
    assert value is None or (isinstance(value, float) and value == value and abs(value) != float("inf"))


# ---------------------------------------------------------------- Markdown read by scoring


md_line = st.one_of(
    st.sampled_from(
        [
            "",
            "# Title",
            "## Section",
            "###### deep",
            "####### seven",
            "#",
            "| a | b |",
            "|---|---|",
            "| --- |",
            "|",
            "||",
            "---",
            "***",
            "```",
            "~~~",
            "- item",
            "  continued",
            "1. first",
            "999999999. big",
            "![alt](fig-1)",
            '![a](b "c")',
            "> quote",
            "$$x^2$$",
            "Revenue was $1.2 billion, up 5% from June 28,2025.",
            "Table 3 and Note 4(1) Level 2",
            "\u202e| x |",
            "| \\| | \\\\ |",
        ]
    ),
    st.text(
        alphabet=st.sampled_from(
            list("|-#*_`>![]() ab1.$\t\\") + ["\u202e", "\u2028", "\r", "\x00", "\ud800"]
        ),
        max_size=20,
    ),
)


@settings(max_examples=150, **SETTINGS)
@given(lines=st.lists(md_line, max_size=30))
def test_markdown_parsers_accept_any_text(lines):
    md = "\n".join(lines)
    tree = report_tree(md)
    assert tree["type"] == "report" and isinstance(tree["title"], str)
    n = tree_size(tree)
    assert n >= 1
    todo, types, tables = [tree], set(), 0
    while todo:
        node = todo.pop()
        types.add(node["type"])
        tables += node["type"] == "table"
        assert isinstance(node["objective"], str) and set(node) == {"type", "title", "objective", "children"}
        todo.extend(node["children"])
    assert types <= {"report", "section", "subsection", "table", "figure", "list", "text"}
    grids = table_grids(md)
    assert len(grids) == tables
    blocks = _md_blocks(md)
    assert sum(b.kind == "table" for b in blocks) == tables  # one reading of the blocks, shared
    pieces = markdown_pieces(md)
    assert all(isinstance(p.text, str) and isinstance(p.path, tuple) for p in pieces)
    assert all(isinstance(c, str) for t in markdown_tables(md) for r in t for c in r)  # ground-side reader
