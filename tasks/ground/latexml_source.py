"""Reading a LaTeXML paper page on its own terms (plain lxml, independent of the converter).

Used by construction QA (`tasks.ground.qa`) and by the converter's tests to state what the source
holds: display-equation rows with their TeX alttext, tabular cells, captions, visible text.
"""

from __future__ import annotations

import re

from tasks.markdown.document import code_mask, heading_of

_MACRO_ERROR = re.compile(r"^\s*(\\[A-Za-z@]+\*?|\{[A-Za-z@*]+\})\s*$")
_CLS = 'contains(concat(" ", normalize-space(@class), " "), " {} ")'


def _xp(name: str) -> str:
    return _CLS.format(name)


def _cls(el) -> list[str]:
    return (el.get("class") or "").split()


def _tex(math) -> str:
    alt = math.get("alttext") or ""
    return " ".join(re.sub(r"(?<!\\)%\n", "", alt).split())


def _segments(el) -> list[str]:
    """Visible text of an element, math as $alttext$, split where a footnote sits (the converter
    writes footnotes inline in brackets); LaTeX undefined-macro markers dropped."""
    segs: list[list[str]] = [[]]

    def visit(e) -> None:
        if e.text:
            segs[-1].append(e.text)
        for c in e:
            if isinstance(c.tag, str):
                cls = _cls(c)
                if c.tag == "math":
                    segs[-1].append(f"${_tex(c)}$")
                elif "ltx_note" in cls:
                    segs.append([])
                elif "ltx_ERROR" in cls and _MACRO_ERROR.match(c.text_content()):
                    pass
                else:
                    visit(c)
            if c.tail:
                segs[-1].append(c.tail)

    visit(el)
    return [" ".join("".join(s).split()) for s in segs]


def _text(el) -> str:
    return " ".join(s for s in _segments(el) if s)


def _squash(s: str) -> str:
    """Compare texts without whitespace, Markdown escapes and the ^ the converter puts before
    numeric superscripts."""
    return re.sub(r"[\s\\^]", "", s)


def _unescape(s: str) -> str:
    return re.sub(r"\\([$<|])", r"\1", s)


def _outside_fences(md: str) -> list[str]:
    lines = md.splitlines()
    return [line for line, code in zip(lines, code_mask(lines, "backticks"), strict=True) if not code]


def _md_headings(md: str) -> list[tuple[int, str]]:
    """(level, title as written) of the heading lines `paper` writes ('#'s, one space, the title)."""
    heads = (heading_of(line, "none", "one", closing=False) for line in _outside_fences(md))
    return [(h.level, h.title) for h in heads if h]


_DISPLAY = re.compile(r"(?<!\\)\$\$((?:\\.|[^$\\]|\$(?!\$))+?)\$\$", re.S)
_INLINE = re.compile(r"(?<!\\)\$(?:\\.|[^$\\])+?\$")
_IMAGE = re.compile(r"!\[((?:\\.|[^\]\\])*)\]\(([^)\s]+)\)")


def _top_level(els, cls_name: str) -> list:
    return [e for e in els if not e.xpath(f"ancestor::*[{_xp(cls_name)}]")]


def _eq_rows(doc) -> list[list[str]]:
    """Alttexts per displayed row of every display equation (table.ltx_equation/ltx_equationgroup)."""
    tables = doc.xpath(f"//table[{_xp('ltx_equation')} or {_xp('ltx_equationgroup')}]")
    tables = [
        t
        for t in tables
        if not t.xpath(f"ancestor::table[{_xp('ltx_equation')} or {_xp('ltx_equationgroup')}]")
    ]
    rows = []
    for t in tables:
        for tr in t.iter("tr"):
            if next(tr.iterancestors("table")) is not t:
                continue
            cells = [td for td in tr if isinstance(td.tag, str) and "ltx_eqn_eqno" not in _cls(td)]
            alts = [_tex(m) for td in cells for m in td.iter("math")]
            text = "".join(
                "".join(x for x in td.itertext())
                for td in cells
                if not td.xpath(f".//*[{_xp('ltx_tag')}]") and not list(td.iter("math"))
            ).strip()
            if alts or text:
                rows.append([a for a in alts if a])
    for m in doc.xpath('//math[@display="block"]'):
        if not m.xpath(f"ancestor::table[{_xp('ltx_equation')} or {_xp('ltx_equationgroup')}]"):
            rows.append([_tex(m)])
    return rows


def _tabular_cells(tab) -> list:
    return [
        c
        for c in tab.xpath(f".//td|.//th|.//*[{_xp('ltx_td')}]")
        if c.xpath(f"ancestor::*[{_xp('ltx_tabular')}][1]")[0] is tab
    ]


def innermost_document(source):
    """The innermost ltx_document element (fixture wrappers put one on <body> as well)."""
    docs = source.xpath(f"//*[{_xp('ltx_document')}]")
    inner = [d for d in docs if not d.xpath(f".//*[{_xp('ltx_document')}]")]
    return inner[0] if inner else source


source_text = _text
squash = _squash
display_equation_rows = _eq_rows
tabular_cells = _tabular_cells
top_level = _top_level
xp_class = _xp
segments = _segments
DISPLAY_MATH = _DISPLAY
