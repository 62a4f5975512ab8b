"""tasks.ground.paper: LaTeXML arXiv HTML -> Markdown grounding document.

Expectations are computed from the source HTML with plain lxml queries, independently of the
converter, for every paper of the arXiv corpus (../shared/corpus/arxiv/MANIFEST.csv).
"""

from __future__ import annotations

import csv
import re
import time
from pathlib import Path

import pytest
from lxml import html as lxml_html

from tasks.errors import FrameInputError
from tasks.ground.latexml_source import (
    _DISPLAY,
    _IMAGE,
    _INLINE,
    _MACRO_ERROR,
    _cls,
    _eq_rows,
    _md_headings,
    _outside_fences,
    _segments,
    _squash,
    _tabular_cells,
    _text,
    _top_level,
    _unescape,
    _xp,
)
from tasks.ground.paper import PaperMarkdown, paper_to_markdown
from tasks.markdown.tables import markdown_tables

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
ARXIV = CORPUS / "arxiv"
MANIFEST = ARXIV / "MANIFEST.csv"
LARGEST = "large-language-models/2303.17564.html"

needs_corpus = pytest.mark.skipif(
    not MANIFEST.is_file(), reason=f"arXiv corpus not found at {ARXIV} (expected ../shared beside the repo)"
)


def _manifest() -> list[dict[str, str]]:
    if not MANIFEST.is_file():
        return []
    with MANIFEST.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


PAPERS = _manifest()

# ---------------------------------------------------------------------------------------------
# one conversion per paper, shared by the tests of that paper (module-scoped => grouped by paper)


@pytest.fixture(scope="module", params=PAPERS or [None], ids=[p["path"] for p in PAPERS] or ["no-corpus"])
def paper(request):
    row = request.param
    if row is None:
        pytest.skip(f"arXiv corpus not found at {ARXIV} (expected ../shared beside the repo)")
    data = (ARXIV / row["path"]).read_bytes()
    meta = {k: row[k] for k in ("arxiv_id", "title", "first_version_date")}
    result = paper_to_markdown(data, source_name=row["path"], meta=meta)
    source = lxml_html.document_fromstring(data)
    docs = source.xpath(f"//*[{_xp('ltx_document')}]")
    doc = [d for d in docs if not d.xpath(f".//*[{_xp('ltx_document')}]")][0]
    return row, source, doc, result


def test_api_shape(paper) -> None:
    row, _, _, result = paper
    assert isinstance(result, PaperMarkdown)
    assert isinstance(result.markdown, str) and result.markdown.endswith("\n")
    assert result.metadata["arxiv_id"] == row["arxiv_id"]
    assert result.metadata["first_version_date"] == row["first_version_date"]
    assert result.metadata["title"] == result.title
    assert "license" in result.metadata
    assert result.authors, "no author found"


def test_headings_match_source_sections(paper) -> None:
    _, _, doc, result = paper
    titles = doc.xpath(
        ".//*[{}]".format(
            " or ".join(
                _xp(c)
                for c in (
                    "ltx_title_section",
                    "ltx_title_subsection",
                    "ltx_title_subsubsection",
                    "ltx_title_appendix",
                )
            )
        )
    )
    levels = {
        "ltx_title_section": 1,
        "ltx_title_appendix": 1,
        "ltx_title_subsection": 2,
        "ltx_title_subsubsection": 3,
    }
    expected = []
    for t in titles:
        level = next(v for k, v in levels.items() if k in _cls(t))
        expected.append((level, _text(t) or "(untitled)"))

    heads = _md_headings(result.markdown)
    assert heads[0] == (1, result.title)
    heads = heads[1:]
    if result.abstract:
        assert heads[0] == (2, "Abstract")
        heads = heads[1:]
    if result.references:
        assert heads[-1] == (2, "References")
        heads = heads[:-1]
    got = [(n - 1, _unescape(t).replace("^", "")) for n, t in heads]
    assert got == [(lv, t.replace("^", "")) for lv, t in expected]
    assert [(lv, _unescape(t).replace("^", "")) for lv, t in result.sections] == got


def test_display_equations_from_alttext(paper) -> None:
    _, _, doc, result = paper
    rows = _eq_rows(doc)
    blocks = _DISPLAY.findall(result.markdown)
    assert len(blocks) == len(rows) == result.equations
    for alts, block in zip(rows, blocks, strict=True):
        for alt in alts:
            assert alt in block, f"alttext {alt[:80]!r} not in $$ block {block[:120]!r}"


def test_tables_become_markdown_tables(paper) -> None:
    """Each outermost ltx_tabular is one Markdown table; a tabular nested in a cell is flattened
    into that cell (Markdown tables cannot nest), so its text is checked within the outer table."""
    _, _, doc, result = paper
    tabulars = _top_level(doc.xpath(f".//*[{_xp('ltx_tabular')}]"), "ltx_tabular")
    md_tables = markdown_tables(result.markdown)
    assert len(md_tables) == len(tabulars) == result.tables
    for tab, grid in zip(tabulars, md_tables, strict=True):
        flat = _squash(" ".join(" ".join(r) for r in grid))
        for cell in _tabular_cells(tab):
            for seg in _segments(cell):
                assert _squash(seg) in flat, f"cell text {seg[:80]!r} missing from its Markdown table"


def test_captions_and_figure_references(paper) -> None:
    _, _, doc, result = paper
    md = _squash(result.markdown)
    for cap in doc.xpath(f".//figcaption|.//*[{_xp('ltx_caption')}]"):
        for seg in _segments(cap):
            assert _squash(seg) in md, f"caption text {seg[:80]!r} missing"
    images = _IMAGE.findall(result.markdown)
    assert len(images) == result.figures
    targets = {t for _, t in images}
    figures = [f for f in doc.xpath(f".//*[{_xp('ltx_figure')}]") if f.tag != "img"]
    leaves = [f for f in figures if not f.xpath(f".//*[{_xp('ltx_figure')}][not(self::img)]")]
    for f in leaves:
        if f.get("id") and not f.xpath(f".//*[{_xp('ltx_tabular')}]"):
            assert f.get("id") in targets, f"figure {f.get('id')} has no image reference"
    if figures:
        assert result.figures >= len([f for f in leaves if f.xpath(".//img")])


def test_title_abstract_references(paper) -> None:
    _, source, doc, result = paper
    title_el = doc.xpath(f".//*[{_xp('ltx_title_document')}]")[0]
    assert _unescape(result.title) == _text(title_el)
    assert result.markdown.startswith(f"# {result.title}\n")
    abstract = _squash(result.abstract)
    assert abstract
    for ab in doc.xpath(f".//*[{_xp('ltx_abstract')}]"):
        for p in ab.xpath(f".//*[{_xp('ltx_p')}]"):
            for seg in _segments(p):
                assert _squash(seg) in abstract
    assert "## Abstract\n" in result.markdown
    bibitems = source.xpath(f"//li[{_xp('ltx_bibitem')}]")
    assert result.references == len(bibitems)
    if bibitems:
        tail = result.markdown.split("\n## References\n", 1)[1]
        assert len([ln for ln in tail.splitlines() if ln.startswith("- ")]) == len(bibitems)
    else:
        assert "\n## References\n" not in result.markdown


def test_no_html_or_chrome_left(paper) -> None:
    _, source, _, result = paper
    rest = "\n".join(_outside_fences(result.markdown))
    rest = _DISPLAY.sub(" ", rest)
    rest = _INLINE.sub(" ", rest)
    m = re.search(r"(?<!\\)<[A-Za-z/!][^>]{0,40}", rest)
    assert m is None, f"HTML tag left in Markdown: {m.group(0) if m else ''!r}"
    for script in source.iter("script"):
        lines = [ln.strip() for ln in (script.text or "").splitlines() if len(ln.strip()) >= 15]
        for ln in lines[:3]:
            assert ln not in result.markdown, f"script text leaked: {ln[:60]!r}"
    for chrome in (
        "Report Issue",
        "Back to Abstract",
        "Feeling lucky",
        "Conversion report",
        "screenshot",
        "LaTeXML",
    ):
        assert chrome not in result.markdown
    assert "ltx_" not in result.markdown


def test_macro_error_markers_dropped(paper) -> None:
    _, _, doc, result = paper
    prose = _INLINE.sub(" ", _DISPLAY.sub(" ", "\n".join(_outside_fences(result.markdown))))
    for err in doc.xpath(f".//*[{_xp('ltx_ERROR')}]"):
        text = err.text_content().strip()
        if _MACRO_ERROR.match(text):
            assert re.search(re.escape(text) + r"(?![A-Za-z@])", prose) is None, f"macro marker {text!r} kept"


# ---------------------------------------------------------------------------------------------
# behaviour on a small hand-written LaTeXML page

SMALL = """<!DOCTYPE html><html><head><title>x</title><script>var leaked = "SCRIPTTEXT";</script></head>
<body><div class="ltx_page_main"><div class="ltx_page_content"><article class="ltx_document">
<h1 class="ltx_title ltx_title_document">A <math alttext="\\beta" display="inline"><mi>β</mi>
</math> Paper<span
 class="ltx_note ltx_role_thanks"><sup class="ltx_note_mark">*</sup><span class="ltx_note_outer"><span
 class="ltx_note_content"><sup class="ltx_note_mark">*</sup>
<span class="ltx_note_type">thanks: </span>Funded.</span></span></span></h1>
<div class="ltx_authors"><span class="ltx_creator ltx_role_author">
<span class="ltx_personname">Ann Smith<sup>1</sup>,
 Bob Jones<sup>2</sup><br class="ltx_break"/>Some University</span></span></div>
<div class="ltx_abstract"><h6 class="ltx_title ltx_title_abstract">Abstract</h6>
<p class="ltx_p">We study $5 and
 <math alttext="x&lt;y" display="inline"><mi>x</mi></math> with &lt;s&gt; tokens.</p></div>
<section class="ltx_section" id="S1"><h2 class="ltx_title ltx_title_section">
<span class="ltx_tag ltx_tag_section">1 </span>Intro</h2>
<div class="ltx_para"><p class="ltx_p">Because <span class="ltx_ERROR undefined">\\ac</span>GW waves
 exist<span class="ltx_note ltx_role_footnote"><sup class="ltx_note_mark">1</sup>
<span class="ltx_note_outer"><span
 class="ltx_note_content"><sup class="ltx_note_mark">1</sup>
<span class="ltx_tag ltx_tag_note">1</span>A note.</span></span></span>.
 See <cite class="ltx_cite">[<a href="#bib.bib1" class="ltx_ref">1</a>]</cite>.<button>Report
 issue</button></p>
<table class="ltx_equation ltx_eqn_table" id="S1.E1"><tbody><tr class="ltx_equation ltx_eqn_row">
<td class="ltx_eqn_cell"><math alttext="E=mc^{2}%&#10;+1" display="inline"><mi>E</mi></math></td>
<td class="ltx_eqn_cell ltx_eqn_eqno"><span class="ltx_tag ltx_tag_equation">(1)</span></td></tr>
</tbody></table>
</div>
<section class="ltx_subsection" id="S1.SS1"><h3 class="ltx_title ltx_title_subsection">1.1 Data</h3>
<section class="ltx_paragraph" id="S1.SS1.P1"><h4 class="ltx_title ltx_title_paragraph">Setup.</h4>
<div class="ltx_para"><p class="ltx_p">Text.</p></div></section>
<figure class="ltx_table" id="S1.T1"><figcaption class="ltx_caption">
<span class="ltx_tag ltx_tag_table">Table 1: </span>Numbers.</figcaption>
<table class="ltx_tabular"><thead class="ltx_thead"><tr class="ltx_tr">
<th class="ltx_td ltx_th ltx_th_column" colspan="2">Model</th>
<th class="ltx_td ltx_th ltx_th_column">Score</th></tr></thead><tbody class="ltx_tbody">
<tr class="ltx_tr"><td class="ltx_td" rowspan="2">A</td><td class="ltx_td">a|1</td><td class="ltx_td">
<table class="ltx_tabular"><tr class="ltx_tr"><td class="ltx_td">9.5</td></tr><tr class="ltx_tr">
<td class="ltx_td">(0.1)</td></tr></table></td></tr>
<tr class="ltx_tr"><td class="ltx_td">a2</td><td class="ltx_td">
<math alttext="10^{3}" display="inline"><mn>1000</mn></math></td></tr>
</tbody></table></figure>
<figure class="ltx_figure" id="S1.F1"><div class="ltx_flex_figure">
<figure class="ltx_figure ltx_figure_panel" id="S1.F1.sf1"><img src="a.png" class="ltx_graphics" alt="">
<figcaption class="ltx_caption"><span class="ltx_tag ltx_tag_figure">(a) </span>Left
 [part].</figcaption></figure>
<figure class="ltx_figure ltx_figure_panel" id="S1.F1.sf2">
<img src="b.png" class="ltx_graphics" alt=""></figure>
</div><figcaption class="ltx_caption"><span class="ltx_tag ltx_tag_figure">Figure 1: </span>Both
 panels.</figcaption></figure>
</section></section>
<section class="ltx_appendix" id="A1"><h2 class="ltx_title ltx_title_appendix">Appendix A Extra</h2>
<div class="ltx_para"><ul class="ltx_itemize"><li class="ltx_item">
<span class="ltx_tag ltx_tag_item">•</span>
<div class="ltx_para"><p class="ltx_p"># one</p></div></li></ul></div></section>
<section class="ltx_bibliography" id="bib"><h2 class="ltx_title ltx_title_bibliography">References</h2>
<ul class="ltx_biblist"><li class="ltx_bibitem" id="bib.bib1">
<span class="ltx_tag ltx_tag_bibitem">[1]</span>
<span class="ltx_bibblock">A. Author. A title.</span>
<span class="ltx_bibblock ltx_bib_cited">Cited by: §1.</span></li></ul></section>
</article></div><footer class="ltx_page_footer"><div class="ltx_page_logo">Generated by LaTeXML</div>
</footer></div>
</body></html>"""


def test_small_document_layout() -> None:
    r = paper_to_markdown(
        SMALL.encode(), source_name="small.html", meta={"arxiv_id": "2401.00001", "title": "T"}
    )
    md = r.markdown
    assert r.title == "A $\\beta$ Paper"
    assert md.startswith("# A $\\beta$ Paper\n")
    assert "[Thanks: Funded.]" in md
    assert r.authors == ["Ann Smith", "Bob Jones"]
    assert r.metadata["arxiv_id"] == "2401.00001" and r.metadata["manifest_title"] == "T"
    assert r.metadata["license"] is None and r.metadata["first_version_date"] is None
    assert "We study \\$5 and $x<y$ with \\<s> tokens." in r.abstract
    assert r.sections == [(1, "1 Intro"), (2, "1.1 Data"), (1, "Appendix A Extra")]
    assert "Because GW waves exist [Footnote 1: A note.] . See [1]." in md
    assert "$$E=mc^{2}+1$$ (1)" in md and r.equations == 1
    assert "**Setup.**" in md
    assert "| Model |  | Score |\n|---|---|---|\n| A | a\\|1 | 9.5 (0.1) |\n|  | a2 | $10^{3}$ |" in md
    assert r.tables == 1 and "Table 1: Numbers." in md
    assert "![(a) Left \\[part\\].](S1.F1.sf1)\n\n(a) Left [part].\n\n" in md
    assert "![Figure 1: Both panels.](S1.F1.sf2)" in md and "\nFigure 1: Both panels.\n" in md
    assert r.figures == 2
    assert "- \\# one" in md
    assert md.rstrip().endswith("## References\n\n- [1] A. Author. A title.")
    assert r.references == 1
    for junk in ("SCRIPTTEXT", "Report issue", "Cited by", "LaTeXML", "\\ac"):
        assert junk not in md
    # str input gives the same document
    assert (
        paper_to_markdown(SMALL, source_name="small.html", meta={"arxiv_id": "2401.00001", "title": "T"}) == r
    )


# ---------------------------------------------------------------------------------------------
# bad input


def _raises(path: Path) -> FrameInputError:
    with pytest.raises(FrameInputError) as info:
        paper_to_markdown(path.read_bytes(), source_name=path.name)
    msg = str(info.value)
    assert path.name in msg and "\n" not in msg
    return info.value


def test_empty_file(tmp_path: Path) -> None:
    p = tmp_path / "empty.html"
    p.write_bytes(b"")
    assert "empty" in _raises(p).problem
    p2 = tmp_path / "blank.html"
    p2.write_bytes(b"  \n\t\n")
    assert "empty" in _raises(p2).problem


def test_binary_file(tmp_path: Path) -> None:
    p = tmp_path / "figure.png"
    p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    assert "binary" in _raises(p).problem
    p2 = tmp_path / "latin.html"
    p2.write_bytes(b'<html><body class="ltx_document"><p>caf\xe9 \xff\xfe</p></body></html>')
    assert "UTF-8" in _raises(p2).problem


@needs_corpus
def test_truncated_file(tmp_path: Path) -> None:
    data = (ARXIV / "large-language-models/1810.04805.html").read_bytes()
    p = tmp_path / "1810.04805.html"
    p.write_bytes(data[: len(data) // 2])
    assert "truncated" in _raises(p).problem


def test_not_latexml(tmp_path: Path) -> None:
    p = tmp_path / "plain.html"
    p.write_text(
        "<!DOCTYPE html><html><head><title>Hi</title></head><body><h1>Hello</h1><p>x</p></body></html>\n"
    )
    assert "not a LaTeXML paper" in _raises(p).problem


@needs_corpus
def test_largest_paper_is_fast() -> None:
    data = (ARXIV / LARGEST).read_bytes()
    t0 = time.perf_counter()
    r = paper_to_markdown(data, source_name=LARGEST)
    elapsed = time.perf_counter() - t0
    assert elapsed < 2.0, f"{LARGEST} took {elapsed:.2f}s"
    assert r.metadata["arxiv_id"] == "2303.17564"  # found in the page (ar5iv canonical link)
