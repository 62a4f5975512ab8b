"""Cleaned filing HTML -> grounding documents (SPEC §2.3).

Deterministic split by Part/Item; the financial statements item is split further into one
document per primary statement, the auditor's report and one per note. Each document is Markdown
with the filing's tables converted by `tasks.ground.tables`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from lxml import etree
from lxml import html as lxml_html

from tasks.ground.ixbrl import CleanFiling, _blocks, _text
from tasks.ground.tables import (
    Cell,
    collapse_ws,
    drop_empty,
    expand_spans,
    fold_columns,
    grid_to_markdown,
    merge_fragments,
)

_PART = re.compile(r"^part\s+(iv|i{1,3})\b\s*[.:\-—–]?\s*(.*)$", re.I)
_ITEM = re.compile(r"^item\s*(\d{1,2})\s*([a-c])?\s*[.:\-—–]?\s*(.*)$", re.I)
_NOTE = re.compile(r"^note\s+(\d{1,2})\s*[.:\-—–]?\s*(\S.*)$", re.I)
_NOTES_START = re.compile(r"^notes to (the )?(condensed )?consolidated financial statements", re.I)
_AUDITOR = re.compile(r"^report of independent registered public accounting firm", re.I)
_STATEMENT = re.compile(
    r"^(?:[\w.,&’' ]+?\s)?(?:condensed\s+)?(?:consolidated\s+)?"
    r"(statements?\s+of\s+(?:consolidated\s+)?(?P<kind>comprehensive\s+(?:income|loss|income \(loss\))|"
    r"operations|income|earnings|cash\s+flows|(?:changes\s+in\s+)?(?:share|stock)holders[’']?\s+equity)"
    r"|(?P<bs>balance\s+sheets?))\b[^.]{0,80}$",
    re.I,
)
_HTML_PARSER = lxml_html.HTMLParser(huge_tree=True)
_ROMAN = {"i": 1, "ii": 2, "iii": 3, "iv": 4}
_BULLETS = {"•", "●", "◦", "▪", "■", "-", "–", "—", "o", "·"}

# Canonical slugs keep file names stable across companies and snapshots (what a form-restricted
# report aligns on), whatever wording a filer uses in the heading.
ITEM_SLUGS_10Q = {
    (1, "1"): "financial-statements",
    (1, "2"): "mdna",
    (1, "3"): "market-risk",
    (1, "4"): "controls-and-procedures",
    (2, "1"): "legal-proceedings",
    (2, "1A"): "risk-factors",
    (2, "2"): "equity-sales-and-repurchases",
    (2, "3"): "defaults-on-senior-securities",
    (2, "4"): "mine-safety",
    (2, "5"): "other-information",
    (2, "6"): "exhibits",
}
ITEM_SLUGS_10K = {
    "1": "business",
    "1A": "risk-factors",
    "1B": "unresolved-staff-comments",
    "1C": "cybersecurity",
    "2": "properties",
    "3": "legal-proceedings",
    "4": "mine-safety",
    "5": "market-for-equity",
    "6": "reserved",
    "7": "mdna",
    "7A": "market-risk",
    "8": "financial-statements",
    "9": "changes-in-accountants",
    "9A": "controls-and-procedures",
    "9B": "other-information",
    "9C": "foreign-jurisdiction-inspections",
    "10": "directors-and-governance",
    "11": "executive-compensation",
    "12": "security-ownership",
    "13": "relationships-and-independence",
    "14": "accountant-fees",
    "15": "exhibits-and-schedules",
    "16": "form-10-k-summary",
}
STATEMENT_SLUGS = {
    "operations": "statement-of-operations",
    "comprehensive": "statement-of-comprehensive-income",
    "balance": "balance-sheet",
    "cash": "statement-of-cash-flows",
    "equity": "statement-of-shareholders-equity",
}


@dataclass
class FilingSection:
    doc_id: str
    title: str
    section_type: str  # cover | item | statement | auditor-report | note | signatures
    part: int | None = None
    item: str | None = None
    blocks: list[etree._Element] = field(default_factory=list, repr=False)

    def to_html(self) -> str:
        """The section's blocks as one HTML fragment (what the split step hands to convert)."""
        return "".join(
            etree.tostring(b, encoding="unicode", method="html", with_tail=False) for b in self.blocks
        )

    @classmethod
    def from_html(
        cls, doc_id: str, title: str, section_type: str, part: int | None, item: str | None, fragment: str
    ) -> FilingSection:
        wrapper = lxml_html.fragment_fromstring(f"<div>{fragment}</div>")
        return cls(doc_id, title, section_type, part, item, [b for b in wrapper if isinstance(b.tag, str)])


@dataclass
class RenderedDoc:
    section: FilingSection
    markdown: str
    tables: int
    images: int
    prose_chars: int
    table_chars: int


def slugify(text: str, max_len: int = 48) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text.lower().replace("’", "").replace("'", "")).strip("-")
    return s[:max_len].rstrip("-") or "section"


def _heading_text(block: etree._Element) -> str | None:
    """Short text of a non-table block, or of a one-row table (some filers lay headings in tables)."""
    if block.tag == "table":
        rows = [r for r in block.iter("tr") if _text(r)]
        if len(rows) != 1:
            return None
    t = _text(block)
    return t if 0 < len(t) <= 250 else None


def _statement_kind(text: str) -> str | None:
    m = _STATEMENT.match(text)
    if not m:
        return None
    if m.group("bs"):
        return "balance"
    kind = m.group("kind").lower()
    if kind.startswith("comprehensive"):
        return "comprehensive"
    if "cash" in kind:
        return "cash"
    if "equity" in kind:
        return "equity"
    return "operations"


def split_filing(clean: CleanFiling) -> list[FilingSection]:
    form = clean.form.upper()
    annual = form.startswith("10-K")
    # huge_tree: without it libxml2 stops at nesting depth 256 and silently drops the rest of the filing
    # (clean_filing's XHTML parse already accepts up to 2048 levels).
    body = lxml_html.fromstring(clean.html, parser=_HTML_PARSER).find("body")
    blocks = [b for b in _blocks(body) if b.tag != "page-break"]

    sections: list[FilingSection] = [FilingSection("cover-page", "Cover page", "cover")]
    part: int | None = None
    last_key: tuple[int, int, str] = (0, 0, "")
    in_statements = False
    notes_started = False
    last_note = 0
    ids: dict[str, FilingSection] = {"cover-page": sections[0]}

    def open_section(sec: FilingSection) -> FilingSection:
        base, n = sec.doc_id, 2
        while sec.doc_id in ids:  # a second block of the same statement kind
            if sections[-1].doc_id == base or sections[-1].doc_id.startswith(base + "-"):
                return sections[-1]  # consecutive continuation (e.g. two equity periods): same document
            sec.doc_id = f"{base}-{n}"
            n += 1
        ids[sec.doc_id] = sec
        sections.append(sec)
        return sec

    current = sections[0]
    for block in blocks:
        head = _heading_text(block)
        if head is not None:
            pm = _PART.match(head)
            im = _ITEM.match(head)
            if pm and len(head) <= 120:
                p = _ROMAN[pm.group(1).lower()]
                if (p, 0, "") > last_key:
                    part, last_key = p, (p, 0, "")
                    continue
            if im and (im.group(3) or len(head) <= 12):
                num, letter = im.group(1), (im.group(2) or "").upper()
                key = (part or 0, int(num), letter)
                title_rest = im.group(3).strip()
                # Cross-references ("Item 7 of this report discusses ...") read as sentences: skip them.
                sentence = len(title_rest) > 150 or title_rest[:1].islower()
                if key > last_key and not sentence:
                    last_key = key
                    item = num + letter
                    slugs = ITEM_SLUGS_10K if annual else ITEM_SLUGS_10Q
                    slug = slugs.get(item if annual else (part or 1, item)) or slugify(title_rest)
                    prefix = f"part-{part}-" if part else ""
                    current = open_section(
                        FilingSection(f"{prefix}item-{item.lower()}-{slug}", head, "item", part, item)
                    )
                    # NVIDIA-style 10-Ks put the statements under Item 15 (F-pages), not Item 8.
                    in_statements = slug in ("financial-statements", "exhibits-and-schedules")
                    notes_started = False
                    last_note = 0
                    continue
            if re.fullmatch(r"signatures?", head, re.I) and last_key > (0, 0, ""):
                current = open_section(FilingSection("signatures", head, "signatures", part))
                in_statements = False
                continue
            if in_statements:
                if _AUDITOR.match(head):
                    current = open_section(
                        FilingSection("auditor-report", head, "auditor-report", part, current.item)
                    )
                    continue
                kind = _statement_kind(head) if not notes_started else None
                if kind and len(head) <= 160:
                    current = open_section(
                        FilingSection(STATEMENT_SLUGS[kind], head, "statement", part, current.item)
                    )
                    continue
                if _NOTES_START.match(head):
                    notes_started = True
                nm = _NOTE.match(head)
                if nm and len(head) <= 160 and int(nm.group(1)) == last_note + 1:
                    last_note = int(nm.group(1))
                    title = nm.group(2).strip()
                    current = open_section(
                        FilingSection(
                            f"note-{last_note:02d}-{slugify(title)}", head, "note", part, current.item
                        )
                    )
                    continue
        current.blocks.append(block)
    return [s for s in sections if any(_text(b) or b.find(".//img") is not None for b in s.blocks)]


# ---------------------------------------------------------------- Markdown rendering


def table_cells(table: etree._Element) -> list[list[Cell]]:
    rows: list[list[Cell]] = []
    for tr in table.iter("tr"):
        if tr.getparent() is not None and _nearest_table(tr) is not table:
            continue  # rows of a nested table are read as that table's text
        cells = []
        for td in tr:
            if not isinstance(td.tag, str) or td.tag not in ("td", "th"):
                continue
            cells.append(
                Cell(
                    _text(td),
                    colspan=_int_attr(td, "colspan"),
                    rowspan=_int_attr(td, "rowspan"),
                    header=td.tag == "th",
                )
            )
        rows.append(cells)
    return rows


def _nearest_table(el: etree._Element) -> etree._Element | None:
    for anc in el.iterancestors("table"):
        return anc
    return None


def _int_attr(el: etree._Element, name: str) -> int:
    v = el.get(name, "1").strip()
    # ASCII digits only (HTML's rule; str.isdigit() also accepts "²", which int() refuses), and at most
    # 9 of them (int() refuses > 4300 digits); expand_spans caps the value.
    return int(v) if re.fullmatch(r"[0-9]{1,9}", v) and int(v) > 0 else 1


def filing_table_grid(table: etree._Element) -> list[list[str]]:
    """Display grid of a filing table: spans expanded, $/%/) fragments joined, spacers dropped."""
    return fold_columns(drop_empty(merge_fragments(expand_spans(table_cells(table)))))


def layout_kind(grid: list[list[str]]) -> str | None:
    """'paragraph' for one-row/one-cell tables, 'list' for bullet tables, None for data tables."""
    if not grid:
        return "empty"
    if len(grid) == 1 or all(sum(1 for c in row if c.strip()) <= 1 for row in grid):
        return "paragraph"
    firsts = [next((c.strip() for c in row if c.strip()), "") for row in grid]
    if all(f in _BULLETS or re.fullmatch(r"\(?[a-z0-9]{1,3}[.)]", f) for f in firsts) and len(grid[0]) <= 3:
        return "list"
    return None


def _block_markdown(block: etree._Element) -> tuple[str, str]:
    """(markdown, kind) with kind in prose|table|heading|image."""
    if block.tag == "table":
        grid = filing_table_grid(block)
        layout = layout_kind(grid)
        if layout == "empty":
            return "", "prose"
        if layout == "paragraph":
            return " ".join(collapse_ws(c) for row in grid for c in row if c.strip()), "prose"
        if layout == "list":
            items = []
            for row in grid:
                cells = [collapse_ws(c) for c in row if c.strip()]
                items.append("- " + " ".join(cells[1:] if cells[0] in _BULLETS else cells))
            return "\n".join(items), "prose"
        return grid_to_markdown(grid, header_rows=1), "table"
    imgs = block.findall(".//img") if block.tag != "img" else [block]
    text = _text(block)
    if imgs and not text:
        return "\n".join(f"![{collapse_ws(i.get('alt', ''))}]({i.get('src', '')})" for i in imgs), "image"
    if not text:
        return "", "prose"
    if block.tag in ("ul", "ol"):
        return "\n".join(f"- {_text(li)}" for li in block.iter("li")), "prose"
    if _is_bold_heading(block, text):
        return f"## {text}", "heading"
    if text[0] in "•●▪■" and len(text) > 1:
        return f"- {text[1:].strip()}", "prose"
    suffix = "".join(f"\n\n![{collapse_ws(i.get('alt', ''))}]({i.get('src', '')})" for i in imgs)
    return text + suffix, "image" if imgs else "prose"


def _is_bold_heading(block: etree._Element, text: str) -> bool:
    if len(text) > 120 or text.endswith((".", ":", ",", ";")) or text.startswith("("):
        return False
    if block.get("data-bold"):
        return True
    bold = collapse_ws("".join("".join(b.itertext()) for b in block.iter("b")))
    return bold == text


def render_section(sec: FilingSection) -> RenderedDoc:
    parts = [f"# {sec.title}"]
    tables = images = prose = table_chars = 0
    for block in sec.blocks:
        md, kind = _block_markdown(block)
        if not md:
            continue
        if kind == "table":
            tables += 1
            table_chars += len(md)
        else:
            prose += len(md)
        if kind == "image":
            images += md.count("![")
        parts.append(md)
    return RenderedDoc(sec, "\n\n".join(parts) + "\n", tables, images, prose, table_chars)
