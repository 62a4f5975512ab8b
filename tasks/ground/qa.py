"""Construction QA of grounding documents against their raw source (SPEC §5).

Figures: fact_recall (displayed iXBRL numbers found in the Markdown), tables source vs Markdown,
mean TEDS of converted tables vs their source tables, and the share of source visible text kept.

How the source side is read (documented so the figures can be trusted):
- visible = not inside ix:header and not display:none;
- a source table's *display grid* is its cells with spans expanded, EDGAR's "$" / "%" / ")"
  fragment cells joined to their number and empty spacer rows/columns dropped; Markdown cannot
  carry spans, so both sides are compared span-free; one-row tables and bullet tables are
  layout, not data, and table-of-contents tables are page furniture: all three are counted apart.
- each fact counts once per displayed occurrence; a displayed value is found when it occurs in the
  Markdown bounded by non-digits, and a value displayed k times must occur k times.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from lxml import etree
from lxml import html as lxml_html
from rapidfuzz import fuzz

from tasks.ground import latexml_source as ls
from tasks.ground.glue import glued_tokens, rendered_text
from tasks.ground.items import form_items_named, item_label
from tasks.ground.ixbrl import IX, XHTML, _text, hidden_elements, parse_ixbrl
from tasks.ground.split import filing_table_grid, layout_kind
from tasks.ground.tables import Cell, drop_empty, expand_spans, grid_to_html
from tasks.ground.textblocks import note_blocks
from tasks.markdown.tables import markdown_tables
from tasks.markdown.teds import teds

_WORD = re.compile(r"\w+", re.UNICODE)


def _load_markdown(out_dir: Path) -> tuple[list[dict], list[str]]:
    index_path = out_dir / "documents.json"
    if not index_path.is_file():
        from tasks.errors import FrameInputError

        raise FrameInputError(out_dir, "no documents.json: not a grounding folder")
    docs = json.loads(index_path.read_text(encoding="utf-8"))
    docs.sort(key=lambda d: d.get("metadata", {}).get("order", 0))
    texts = [(out_dir / d["file"]).read_text(encoding="utf-8") for d in docs]
    return docs, texts


def _visible_body(root: etree._Element) -> etree._Element:
    body = root.find(f"{{{XHTML}}}body")
    for el in list(body.iter(f"{{{IX}}}header")):
        el.getparent().remove(el)
    for el in hidden_elements(body):
        if el.getparent() is not None:
            el.getparent().remove(el)
    return body


_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def fact_recall(facts_displayed: list[str], markdown: str) -> tuple[float, list[str]]:
    """Share of displayed facts found in the Markdown; numbers are matched as whole numbers, so
    "1,234" is not found inside "11,234" or "1,234,567"."""
    need = Counter(t for t in facts_displayed if t)
    numbers = Counter(_NUMBER.findall(markdown))
    found = 0
    missing: list[str] = []
    for text, k in need.items():
        if _NUMBER.fullmatch(text):
            have = numbers[text]
        else:  # displayed text with words or signs around the number: bounded search
            have = len(re.findall(r"(?<!\d)(?<!\d[.,])" + re.escape(text) + r"(?!\d|[.,]\d)", markdown))
        found += min(have, k)
        if have < k:
            missing.append(text)
    total = sum(need.values())
    return (found / total if total else 1.0), missing


def word_recall(source_text: str, markdown: str) -> float:
    src = Counter(w.lower() for w in _WORD.findall(source_text))
    out = Counter(w.lower() for w in _WORD.findall(markdown))
    total = sum(src.values())
    return sum(min(c, out[w]) for w, c in src.items()) / total if total else 1.0


def _is_toc(grid: list[list[str]]) -> bool:
    """A table of contents: rows naming Parts/Items (on the row or the row above, where a filer puts
    "Item 4." on a row of its own) that end in a page number (or N/A)."""
    paged = entries = 0
    above = False
    for row in grid:
        cells = [c for c in row if c.strip()]
        label = any(re.match(r"^(part\s+(i|ii|iii|iv)\b|item\s*\d+)", c, re.I) for c in cells)
        if cells and re.fullmatch(r"\d{1,3}|[ivx]+|n/?a", cells[-1].strip(), re.I):
            paged += 1
            entries += label or above
        above = label
    return entries >= 3 and paged >= 0.4 * len(grid)


def align_tables(src: list[list[list[str]]], out: list[list[list[str]]]) -> list[tuple[int, int]]:
    """Order-preserving alignment (Needleman-Wunsch on a cheap text similarity)."""

    def key(g: list[list[str]]) -> str:
        return " ".join(c for row in g for c in row if c)[:400]

    a, b = [key(g) for g in src], [key(g) for g in out]
    n, m = len(a), len(b)
    score = [[0.0] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            sim = fuzz.ratio(a[i - 1], b[j - 1]) / 100.0
            score[i][j] = max(score[i - 1][j], score[i][j - 1], score[i - 1][j - 1] + sim)
    pairs: list[tuple[int, int]] = []
    i, j = n, m
    while i > 0 and j > 0:
        sim = fuzz.ratio(a[i - 1], b[j - 1]) / 100.0
        if abs(score[i][j] - (score[i - 1][j - 1] + sim)) < 1e-12 and sim >= 0.5:
            pairs.append((i - 1, j - 1))
            i, j = i - 1, j - 1
        elif score[i - 1][j] >= score[i][j - 1]:
            i -= 1
        else:
            j -= 1
    return pairs[::-1]


def _table_figures(src_grids: list[list[list[str]]], md_grids: list[list[list[str]]]) -> dict:
    pairs = align_tables(src_grids, md_grids)
    scores = [teds(grid_to_html(src_grids[i]), grid_to_html(md_grids[j])) for i, j in pairs]
    total = sum(scores)  # unmatched source tables count as 0
    return {
        "tables_source": len(src_grids),
        "tables_markdown": len(md_grids),
        "tables_matched": len(pairs),
        "teds_mean": round(total / len(src_grids), 6) if src_grids else 1.0,
        "teds_mean_matched": round(total / len(pairs), 6) if pairs else 1.0,
        "teds_min": round(min(scores), 6) if scores else 1.0,
    }


def qa_edgar(source: Path, out_dir: Path) -> dict:
    data = source.read_bytes()
    root = parse_ixbrl(data, str(source))
    docs, texts = _load_markdown(out_dir)
    markdown = "\n".join(texts)
    notes_tagged = len(note_blocks(root))
    # Rendered before _visible_body removes hidden parts (it drops their tails, which would glue the
    # source side too and hide real glue); rendered_text skips hidden parts itself.
    source_text = rendered_text(root.find(f"{{{XHTML}}}body"))
    body = _visible_body(root)
    glued, glued_examples = glued_tokens(source_text, markdown)
    form = next((d.get("metadata", {}).get("form") for d in docs if d.get("metadata", {}).get("form")), "")
    tokens = [int(d.get("tokens", 0)) for d in docs]
    largest = max(range(len(docs)), key=lambda i: tokens[i]) if docs else None
    # A fact nested in another shows the same characters once: count the outermost only.
    displayed = [
        _text(el)
        for el in body.iter(f"{{{IX}}}nonFraction")
        if re.search(r"\d", _text(el)) and next(el.iterancestors(f"{{{IX}}}nonFraction"), None) is None
    ]
    recall, missing = fact_recall(displayed, markdown)
    src_grids, layout, toc = [], 0, 0
    named_text = source_text  # the filing's text without its table of contents: where items really are
    # Tables get their plain tag names so the converter's grid reader can be reused as is.
    for el in body.iter():
        if isinstance(el.tag, str) and el.tag.startswith(f"{{{XHTML}}}"):
            el.tag = el.tag.split("}", 1)[1]
    for table in body.iter("table"):
        if next(table.iterancestors("table"), None) is not None:
            continue
        grid = filing_table_grid(table)
        if layout_kind(grid) is not None:
            layout += 1
        elif _is_toc(grid):
            toc += 1
            named_text = named_text.replace(rendered_text(table).strip(), " ", 1)
        else:
            src_grids.append(grid)
    items = item_figures(form, named_text, docs)
    md_grids = markdown_tables(markdown)
    figures = _table_figures(src_grids, [_strip_blank_header(g) for g in md_grids])
    return {
        "kind": "edgar",
        "source": str(source),
        "documents": len(texts),
        "facts_displayed": len(displayed),
        "fact_recall": round(recall, 6),
        "facts_missing": missing[:20],
        **figures,
        "tables_source_layout": layout,
        "tables_source_toc": toc,
        "text_kept": round(word_recall(" ".join(body.itertext()), markdown), 6),
        "html_tags_left": _html_tags(markdown),
        **items,
        "notes_tagged": notes_tagged,
        "notes_found": sum(
            1 for d in docs if d.get("metadata", {}).get("section_type") in ("note", "schedule")
        ),
        "largest_document": docs[largest]["doc_id"] if largest is not None else None,
        "largest_document_share": round(tokens[largest] / sum(tokens), 6) if sum(tokens) else 0.0,
        "glued_tokens": glued,
        "glued_examples": glued_examples[:20],
    }


def item_figures(form: str, source_text: str, docs: list[dict]) -> dict:
    """Form items the filing has (its text names them with their Form title, e.g. in its table of
    contents or its headings) against the items present as documents."""
    have = [
        item_label(form, d["metadata"].get("part"), it)
        for d in docs
        for it in (d["metadata"].get("items_covered") or [d["metadata"].get("item")])
    ]
    have_set = {h for h in have if h}
    expected = form_items_named(form, source_text)
    found = [i for i in expected if i in have_set]
    return {
        "items_expected": len(expected),
        "items_found": len(found),
        "item_recall": round(len(found) / len(expected), 6) if expected else 1.0,
        "items_missing": [i for i in expected if i not in have_set],
        "items": sorted(have_set, key=have.index),
    }


def _strip_blank_header(grid: list[list[str]]) -> list[list[str]]:
    """A Markdown table without a header row carries an all-blank one; it is not source content."""
    if grid and not any(c.strip() for c in grid[0]):
        return grid[1:]
    return grid


_TAG = re.compile(r"<(/?[a-zA-Z][a-zA-Z0-9:-]*)(\s[^<>]*)?/?>")


def _html_tags(markdown: str) -> int:
    # Math ($...$) may legitimately hold '<' comparisons; tags are counted outside it.
    no_math = re.sub(r"\$\$.*?\$\$|\$[^$\n]*\$", " ", markdown, flags=re.S)
    return len(_TAG.findall(no_math)) + no_math.count("ix:")


def qa_arxiv(source: Path, out_dir: Path) -> dict:
    data = source.read_bytes()
    _, texts = _load_markdown(out_dir)
    markdown = "\n".join(texts)
    doc = ls.innermost_document(lxml_html.document_fromstring(data))
    rows = ls.display_equation_rows(doc)
    blocks = ls.DISPLAY_MATH.findall(markdown)
    block_text = "\n".join(blocks)
    tabulars = ls.top_level(doc.xpath(f".//*[{ls.xp_class('ltx_tabular')}]"), "ltx_tabular")
    src_grids = [_latexml_grid(t) for t in tabulars]
    # The source side reads a cell without its footnotes (LaTeXML keeps them in ltx_note); the
    # converter writes them inline as "[Footnote ...]", so they are taken out before comparing.
    md_grids = [
        [[_drop_footnotes(c) for c in row] for row in _strip_blank_header(g)]
        for g in markdown_tables(markdown)
    ]
    flat = ls.squash(markdown)
    captions = doc.xpath(f".//figcaption|.//*[{ls.xp_class('ltx_caption')}]")
    kept = sum(1 for c in captions if all(ls.squash(seg) in flat for seg in ls.segments(c)))
    return {
        "kind": "arxiv",
        "source": str(source),
        "documents": len(texts),
        "sections_source": len(
            doc.xpath(
                ".//*[contains(@class, 'ltx_title_section') or "
                "contains(@class, 'ltx_title_subsection') or "
                "contains(@class, 'ltx_title_subsubsection') or "
                "contains(@class, 'ltx_title_appendix')]"
            )
        ),
        "display_equations_source": len(rows),
        "display_equations_markdown": len(blocks),
        "equation_tex_missing": sum(1 for r in rows for alt in r if alt not in block_text),
        **_table_figures(src_grids, md_grids),
        "figure_captions": len(captions),
        "figure_captions_kept": kept,
        "text_kept": round(word_recall(ls.source_text(doc), markdown), 6),
        "html_tags_left": _html_tags(markdown),
    }


def _drop_footnotes(text: str) -> str:
    out, i = [], 0
    while True:
        j = text.find("[Footnote", i)
        if j < 0:
            out.append(text[i:])
            break
        out.append(text[i:j])
        depth, k = 0, j
        while k < len(text):
            depth += {"[": 1, "]": -1}.get(text[k], 0)
            k += 1
            if depth == 0:
                break
        i = k
    return " ".join("".join(out).split())


def _latexml_grid(table: etree._Element) -> list[list[str]]:
    rows = []
    for tr in table.xpath(".//tr[ancestor::table[1] = $t]", t=table):
        rows.append(
            [
                Cell(ls.source_text(td), _span(td, "colspan"), _span(td, "rowspan"))
                for td in tr.xpath("./td|./th")
            ]
        )
    return drop_empty(expand_spans(rows))


def _span(td: etree._Element, name: str) -> int:
    v = (td.get(name) or "1").strip()
    return int(v) if v.isdigit() and int(v) > 0 else 1
