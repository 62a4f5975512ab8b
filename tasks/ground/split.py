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
from rapidfuzz import fuzz

from tasks.ground.items import (
    ITEM_HEAD,
    PART_HEAD,
    FormItem,
    annual,
    by_title,
    covered_items,
    form_items,
    items_numbered,
    match_title,
    part_number,
)
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
from tasks.ground.textblocks import concept_label

_NOTES_START = re.compile(r"^notes to (the )?(condensed )?consolidated financial statements", re.I)
_AUDITOR = re.compile(r"^report of independent registered public accounting firm", re.I)
_STATEMENT = re.compile(
    r"^(?:[\w.,&’' ]+?\s)?(?:condensed\s+)?(?:consolidated\s+)?"
    r"(statements?\s+of\s+(?:consolidated\s+)?(?P<kind>comprehensive\s+(?:income|loss|income \(loss\))|"
    r"operations|income|earnings|cash\s+flows|"
    r"(?:changes\s+in\s+)?(?:(?:share|stock)(?:holders|owners)[’']?\s+|members[’']?\s+|partners[’']?\s+)?"
    r"(?:equity|deficit|capital))"
    r"|(?P<bs>balance\s+sheets?|statements?\s+of\s+(?:consolidated\s+)?financial\s+(?:position|condition)))"
    r"\b[^.]{0,80}$",
    re.I,
)
_HTML_PARSER = lxml_html.HTMLParser(huge_tree=True)
_BULLETS = {"•", "●", "◦", "▪", "■", "-", "–", "—", "o", "·"}

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
    # [first, end) of the cleaned filing's blocks this section came from: a gap shows what no section kept
    span: list[int] | None = None
    covers: list[str] | None = None  # every Form item a combined heading ("Items 10-14") stands for

    def to_html(self) -> str:
        """The section's blocks as one HTML fragment (what the split step hands to convert)."""
        return "".join(
            etree.tostring(b, encoding="unicode", method="html", with_tail=False) for b in self.blocks
        )

    @classmethod
    def from_html(
        cls,
        doc_id: str,
        title: str,
        section_type: str,
        part: int | None,
        item: str | None,
        fragment: str,
        span: list[int] | None = None,
        covers: list[str] | None = None,
    ) -> FilingSection:
        wrapper = lxml_html.fragment_fromstring(f"<div>{fragment}</div>")
        blocks = [b for b in wrapper if isinstance(b.tag, str)]
        return cls(doc_id, title, section_type, part, item, blocks, span, covers)


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
        if _rows(block) > 6:  # a heading laid in a table has one row of text (maybe spacer rows around)
            return None
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
    if re.search(r"equity|deficit|capital", kind):
        return "equity"
    return "operations"


@dataclass
class _ItemHead:
    """A block that may open a Form item."""

    index: int
    form_item: FormItem | None  # None: a number the Form has, but a title that is not the Form's
    part: int | None
    item: str
    title: str
    weight: float
    run_in: bool = False  # the heading starts a paragraph or table that also holds the item's text
    consumes_next: bool = False  # a bare "Item 7." whose title is the next block
    covers: list[str] = field(default_factory=list)  # "Items 10, 11, 12, 13 and 14": one section, five items


_RUN_IN_PART = re.compile(r"\bpart\s+(?P<roman>ii|i)\b\W{0,6}(?:other|financial)\s+information\b", re.I)
_NOTE_LABEL = re.compile(r"^(?:note\s*)?(?:\d{1,2}|[a-z])\s*[.:\-—–)]?$", re.I)
_NOTE_NUMBER = re.compile(
    r"^(?:note\s*(?P<n1>\d{1,2}|[a-z])\b|(?P<n2>\d{1,2})\s*[.:\-—–)]|(?P<n3>[A-Z])\s*[.:\-—–)]\s)\s*[.:\-—–)]?\s*",
    re.I,
)
_FALLBACK_NOTE = re.compile(r"^(?:note\s+(\d{1,2})\b|(\d{1,2})\s*\.)\s*[.:\-—–]?\s*(\S.*)$", re.I)


class _BlockTexts:
    """The text of each block, computed once and only when read: most of a filing's large tables are
    never read whole by the splitter (a heading is short; a table counts as content)."""

    def __init__(self, blocks: list[etree._Element]) -> None:
        self.blocks = blocks
        self._cache: dict[int, str] = {}

    def __len__(self) -> int:
        return len(self.blocks)

    def __getitem__(self, i: int) -> str:
        text = self._cache.get(i)
        if text is None:
            text = self._cache[i] = _text(self.blocks[i])
        return text

    def size(self, i: int) -> int:
        """Characters of content, without reading a table (any table is real content)."""
        if self.blocks[i].tag == "table" and i not in self._cache:
            return 1000
        return len(self[i])


def _rows(table: etree._Element) -> int:
    return sum(1 for _ in table.iter("tr"))


def _is_boldish(block: etree._Element, text: str) -> bool:
    if block.get("data-bold"):
        return True
    bold = collapse_ws("".join("".join(b.itertext()) for b in block.iter("b")))
    return bool(bold) and text.startswith(bold[: min(len(bold), 12)])


def _item_heads(form: str, blocks: list[etree._Element], texts: _BlockTexts) -> list[_ItemHead]:
    """Every block that reads as a Form item heading, with its weight as evidence:
    the Form's title after the number (strong), bold type, real content before the next heading."""
    heads: list[_ItemHead] = []
    part: int | None = None
    for i, block in enumerate(blocks):
        table_head = False
        if block.tag == "table" and _rows(block) > 2:
            # A table may carry its item's heading in its first row (an exhibit index under "Item 6.").
            first = next((t for r in block.iter("tr") if (t := _text(r))), "")
            if not ITEM_HEAD.match(first):
                continue
            text, table_head = first, True
        else:
            text = texts[i]
        if not text:
            continue
        rest_text = text
        explicit_part = None
        pm = PART_HEAD.match(text)
        if pm and len(text) <= 400:
            explicit_part = part_number(pm.group("roman"))
            rest_text = pm.group("rest")
            rest_text = re.sub(r"^(?:financial|other)\s+information\W*", "", rest_text, flags=re.I)
            part = explicit_part
        elif len(text) <= 200 and (rm := _RUN_IN_PART.search(text)):
            part = part_number(rm.group("roman"))
        im = ITEM_HEAD.match(rest_text)
        if not im:
            continue
        item = im.group("num") + (im.group("letter") or "").upper()
        rest = im.group("rest").strip()
        numbered = items_numbered(form, item)
        if not numbered:
            continue
        consumes_next = False
        if not rest and i + 1 < len(blocks) and 0 < texts.size(i + 1) <= 200:
            rest, consumes_next = texts[i + 1], True
        if rest[:1].islower():
            continue  # "Item 7 of this report ...": a cross-reference, not a heading
        matches = match_title(form, item, rest)
        if not matches and len(rest) > 150:
            continue
        run_in = (len(text) > 250 or table_head) and not consumes_next
        if run_in and not matches:
            continue
        fi = matches[0] if matches else None
        if fi is None and len(numbered) == 1:
            p = numbered[0].part
        elif fi is not None:
            p = fi.part
        else:
            p = explicit_part or part
        weight = (3.0 if fi is not None else 1.0) + (1.0 if _is_boldish(block, text) else 0.0)
        title = (
            text
            if not run_in
            else f"{im.group(0)[: len(im.group(0)) - len(im.group('rest'))].strip()} {fi.title}"
        )
        if consumes_next:
            title = f"{text} {texts[i + 1]}"
        if table_head:
            title = text
        covers = covered_items(form, item, im.group("more"))
        heads.append(_ItemHead(i, fi, p, item, title[:250], weight, run_in, consumes_next, covers))
    if sum(1 for h in heads if h.form_item is not None) < 5:
        heads = sorted(
            heads + _bare_title_heads(form, blocks, texts, {h.index for h in heads}), key=lambda h: h.index
        )
    # Real headings have their item's text after them; table-of-contents lines have a page number.
    for k, h in enumerate(heads):
        stop = heads[k + 1].index if k + 1 < len(heads) else len(blocks)
        gap = sum(texts.size(j) for j in range(h.index + 1 + h.consumes_next, stop))
        if gap > 40 or h.run_in:
            h.weight += 1.0
    return heads


def _bare_title_heads(
    form: str, blocks: list[etree._Element], texts: _BlockTexts, taken: set[int]
) -> list[_ItemHead]:
    """Headings that are a Form item's title without "Item N" ("Risk Factors", "Legal Proceedings"):
    how a filing laid out as an annual report with a cross-reference index to the Form marks its items.
    Used only when a filing has (almost) no "Item N" headings; they weigh less than numbered ones."""
    out: list[_ItemHead] = []
    for i, block in enumerate(blocks):
        if i in taken or block.tag == "table":
            continue
        text = texts[i]
        if not text or len(text) > 120 or not _is_boldish(block, text):
            continue
        matches = by_title(form, text)
        if len(matches) != 1:
            continue
        fi = matches[0]
        covered = fi.pattern.match(text).end() / len(text)
        # The whole heading is the title ("Business Combinations" is a note, not Item 1).
        if covered < 0.6 and fuzz.ratio(text.lower(), fi.title.lower()) < 85:
            continue
        out.append(_ItemHead(i, fi, fi.part, fi.item, f"Item {fi.item}. {text}", 1.5, covers=[fi.item]))
    return out


def _select_items(form: str, heads: list[_ItemHead]) -> list[_ItemHead]:
    """The heaviest sequence of item headings in the Form's order (weighted longest increasing
    subsequence): one stray or early heading cannot push the real ones out, as a greedy pass would."""
    if not heads:
        return []
    # Unresolved parts (10-Q item without its Form title) take the part of the heading before them.
    keys: list[tuple[int, int, str]] = []
    part = 1
    for h in heads:
        if not annual(form):
            if h.part is None:
                h.part = part
            part = h.part
        num = int(re.match(r"\d+", h.item).group())
        keys.append(((h.part or 0) if not annual(form) else 0, num, h.item[len(str(num)) :]))
    best = [0.0] * len(heads)
    prev = [-1] * len(heads)
    for i, h in enumerate(heads):
        best[i] = h.weight
        for j in range(i):
            if keys[j] < keys[i] and heads[j].index < h.index and best[j] + h.weight > best[i] + 1e-9:
                best[i], prev[i] = best[j] + h.weight, j
    i = max(range(len(heads)), key=lambda k: (best[k], -k))
    chosen: list[_ItemHead] = []
    while i >= 0:
        chosen.append(heads[i])
        i = prev[i]
    return chosen[::-1]


def _note_title(block_text: str, block: etree._Element, label: str) -> str:
    if not block_text:
        return label
    if len(block_text) <= 160:
        return block_text
    bold = collapse_ws("".join("".join(b.itertext()) for b in block.iter("b")))
    if bold and len(bold) <= 160 and block_text.startswith(bold[:20]):
        return bold
    return label


def _note_doc_id(title: str, ordinal: int) -> str:
    m = _NOTE_NUMBER.match(title)
    rest = title[m.end() :] if m else title
    number = next((g for g in (m.groups() if m else ()) if g), None)
    if number and number.isdigit():
        tag = f"{int(number):02d}"
    elif number:
        tag = number.lower()
    else:
        tag = f"{ordinal:02d}"
    return f"note-{tag}-{slugify(rest or title)}"


def _looks_like_statement(blocks: list[etree._Element], i: int, head: str) -> str | None:
    """A primary statement heading: the statement's name (not a sentence about it) followed by a table."""
    if len(head) > 160 or head.endswith((":", ";", ",")) or re.search(r"\b(are|is|were|was)\b", head, re.I):
        return None
    if re.match(r"(summarized|supplemental|selected|condensed\s+consolidating)\b", head, re.I):
        return None
    kind = _statement_kind(head)
    if not kind:
        return None
    for b in blocks[i + 1 : i + 6]:
        if b.tag == "table" and sum(1 for r in b.iter("tr") if _text(r)) > 2:
            return kind
    return None


def split_filing(clean: CleanFiling) -> list[FilingSection]:
    """Cleaned filing -> sections: cover, every Form item the filing has (however short), the primary
    statements, the auditor's report, one section per note, signatures.

    Evidence first, typography second: note-level iXBRL text blocks (marked `note-anchor` by
    clean_filing) say where each note starts; item headings are read by the Form's item titles and
    chosen as the heaviest sequence in the Form's order; typographic note headings are the fallback
    for filings without text blocks."""
    form = clean.form.upper()
    # huge_tree: without it libxml2 stops at nesting depth 256 and silently drops the rest of the filing
    # (clean_filing's XHTML parse already accepts up to 2048 levels).
    body = lxml_html.fromstring(clean.html, parser=_HTML_PARSER).find("body")
    blocks = [b for b in _blocks(body) if b.tag != "page-break"]
    texts = _BlockTexts(blocks)
    items = {h.index: h for h in _select_items(form, _item_heads(form, blocks, texts))}
    sections = _Splitter(form, blocks, texts, items, _note_anchors(body, blocks, texts)).run()
    return [
        s
        for s in sections
        if s.section_type == "item" or any(_text(b) or b.find(".//img") is not None for b in s.blocks)
    ]


def _note_anchors(body: etree._Element, blocks: list[etree._Element], texts: _BlockTexts) -> dict[int, str]:
    """Note starts (block index -> the text block's concept): the block holding a text block's anchor,
    or, when the anchor stands alone before the note's first paragraph, the next block with text."""
    anchor_concepts: dict[int, str] = {}
    index = {id(b): i for i, b in enumerate(blocks)}
    for anchor in body.iter("note-anchor"):
        i = next((index[id(a)] for a in anchor.iterancestors() if id(a) in index), index.get(id(anchor)))
        if i is None:
            continue
        j = i
        while j < len(blocks) and not texts.size(j) and blocks[j].find(".//img") is None:
            j += 1
        if j < len(blocks):
            anchor_concepts.setdefault(j, anchor.get("data-concept", ""))
    return anchor_concepts


class _Splitter:
    """One walk over a filing's blocks, in order: each block opens a section (an item, a note, a
    statement, the auditor's report, the signatures) or joins the section being filled."""

    def __init__(
        self,
        form: str,
        blocks: list[etree._Element],
        texts: _BlockTexts,
        items: dict[int, _ItemHead],
        anchor_concepts: dict[int, str],
    ) -> None:
        self.form = form
        self.blocks = blocks
        self.texts = texts
        self.items = items
        self.anchor_concepts = anchor_concepts
        self.anchors = set(anchor_concepts)
        self.statements_item = next(it for it in form_items(form) if it.slug == "financial-statements")
        # Items whose text may hold the notes: the statements item, the 10-K's exhibits item (F-pages).
        self.notes_items = {
            (it.part, it.item)
            for it in form_items(form)
            if it.slug in ("financial-statements", "exhibits-and-schedules")
        }
        self.has_statements_item = any(
            (h.part, h.item) in self.notes_items and h.item == self.statements_item.item
            for h in items.values()
        )
        self.sections: list[FilingSection] = [FilingSection("cover-page", "Cover page", "cover", span=[0, 0])]
        self.ids: dict[str, FilingSection] = {"cover-page": self.sections[0]}
        self.current = self.sections[0]
        self.note_ordinal = 0
        self.notes_started = False  # statements end where the notes begin
        self.last_fallback_note = 0

    def run(self) -> list[FilingSection]:
        skip = -1
        for i, block in enumerate(self.blocks):
            if i == skip:
                continue
            head = _heading_text(block)
            if i in self.items:
                if self.items[i].consumes_next:
                    skip = i + 1
                self.open_item(self.items[i], block, i)
                continue
            if self.anchored_note(block, i, head) or self.heading(i, head):
                continue
            self.current.blocks.append(block)
            self.current.span[1] = i + 1
        return self.sections

    def open_section(self, sec: FilingSection, i: int) -> FilingSection:
        base, n = sec.doc_id, 2
        while sec.doc_id in self.ids:  # a second block of the same statement kind
            last = self.sections[-1]
            if last.doc_id == base or last.doc_id.startswith(base + "-"):
                return last  # consecutive continuation (e.g. two equity periods): same document
            sec.doc_id = f"{base}-{n}"
            n += 1
        sec.span = [i, i]
        self.ids[sec.doc_id] = sec
        self.sections.append(sec)
        return sec

    def statements_context(self) -> tuple[int | None, str | None]:
        current = self.current
        if current.section_type in ("statement", "auditor-report", "note") or (
            current.section_type == "item" and current.item == self.statements_item.item
        ):
            return current.part, current.item
        return self.statements_item.part, self.statements_item.item

    def statements_here(self) -> bool:
        """Where primary statements may start: the statements item and what follows it, the F-pages
        after Item 15 or the signatures, the cover (statements before any item heading); any other item
        (MD&A's summarized guarantor tables) only in a filing without a statements item heading."""
        if self.current.section_type != "item":
            return True
        if (self.current.part, self.current.item) in self.notes_items:
            return True
        return not self.has_statements_item

    def open_item(self, h: _ItemHead, block: etree._Element, i: int) -> None:
        form = self.form
        fi = h.form_item or next(iter(items_numbered(form, h.item)), None)
        slug = fi.slug if fi else slugify(h.title)
        prefix = f"part-{h.part}-" if h.part and not annual(form) else ""
        sec = FilingSection(f"{prefix}item-{h.item.lower()}-{slug}", h.title, "item", h.part, h.item)
        sec.covers = h.covers if len(h.covers) > 1 else None
        self.current = self.open_section(sec, i)
        self.notes_started = False
        self.last_fallback_note = 0
        if h.run_in:
            self.current.blocks.append(block)
        self.current.span[1] = i + 1

    def anchored_note(self, block: etree._Element, i: int, head: str | None) -> bool:
        """A block where a note's text block starts; False when it is not one (or not a note's)."""
        if i not in self.anchors:
            return False
        current = self.current
        if current.section_type == "item" and (current.part, current.item) not in self.notes_items:
            self.anchors.discard(i)  # a text block of another item (MD&A, Item 9B): not a note
            return False
        if current.section_type == "note" and not current.blocks and current.span[1] == i:
            # The text block starts right under an untagged "Note N" heading that already opened the note.
            current.blocks.append(block)
            current.span[1] = i + 1
            return True
        self.open_anchored_note(block, i, head)
        return True

    def open_anchored_note(self, block: etree._Element, i: int, head: str | None) -> None:
        blocks, texts = self.blocks, self.texts
        self.note_ordinal += 1
        self.notes_started = True
        label_block, k = None, i - 1
        while k > 0 and not texts.size(k):
            k -= 1
        last_kept = next((b for b in reversed(self.current.blocks) if b is blocks[k] or _text(b)), None)
        if last_kept is blocks[k] and len(texts[k]) <= 12 and _NOTE_LABEL.match(texts[k]):
            label_block = blocks[k]  # "NOTE 4" on its own line belongs to the note
            self.current.blocks = [b for b in self.current.blocks if b is not label_block]
            self.current.span[1] = k
        concept = self.anchor_concepts[i]
        text = texts[i] if block.tag != "table" else (head or "")
        title = _note_title(text, block, concept_label(concept))
        if label_block is not None:
            title = f"{texts[k]} {title}"
        part, item = self.statements_context()
        if re.match(r"schedule\b", title, re.I):  # Schedule II etc.: a financial statement schedule
            self.note_ordinal -= 1
            sec = FilingSection(slugify(title), title, "schedule", part, item)
        else:
            sec = FilingSection(_note_doc_id(title, self.note_ordinal), title, "note", part, item)
        self.current = self.open_section(sec, i)
        if label_block is not None:
            self.current.span[0] = k
        if len(text) > 160 or title != text:
            self.current.blocks.append(block)
        self.current.span[1] = i + 1

    def heading(self, i: int, head: str | None) -> bool:
        """A short block that opens a section (or, as a Part heading, is dropped); False otherwise."""
        if head is None:
            return False
        if (pm := PART_HEAD.match(head)) and len(pm.group("rest")) <= 60:
            return True  # "PART II — OTHER INFORMATION": structure, carried by the items' part ids
        if re.fullmatch(r"signatures?", head, re.I) and len(self.sections) > 1:
            sec = FilingSection("signatures", head, "signatures", self.current.part)
            self.current = self.open_section(sec, i)
            self.notes_started = False
            self.current.span[1] = i + 1
            return True
        if not self.notes_started and self.current.section_type != "note" and self.statement_heading(i, head):
            return True
        if _NOTES_START.match(head):
            self.notes_started = True
        return self.fallback_note(i, head)

    def statement_heading(self, i: int, head: str) -> bool:
        """The auditor's report or a primary statement opening here."""
        if _AUDITOR.match(head):
            part, item = self.statements_context()
            self.current = self.open_section(
                FilingSection("auditor-report", head, "auditor-report", part, item), i
            )
            self.current.span[1] = i + 1
            return True
        kind = _looks_like_statement(self.blocks, i, head) if self.statements_here() else None
        if kind:
            part, item = self.statements_context()
            self.current = self.open_section(
                FilingSection(STATEMENT_SLUGS[kind], head, "statement", part, item), i
            )
            self.current.span[1] = i + 1
            return True
        return False

    def fallback_note(self, i: int, head: str) -> bool:
        """Typographic note headings: the fallback for filings without text blocks, and the notes a
        filer left untagged ("Note 1" before the first tagged note, "NOTE 2" inside note 1's block)."""
        nm = _FALLBACK_NOTE.match(head) if len(head) <= 160 else None
        if not (nm and (nm.group(1) or not self.anchors)):
            return False
        number = int(nm.group(1) or nm.group(2))
        current = self.current
        in_notes = self.notes_started or current.section_type in ("note", "statement")
        follows = number == (note_number(current) or 0) + 1 if current.section_type == "note" else number == 1
        if not (in_notes and (follows or (not self.anchors and number == self.last_fallback_note + 1))):
            return False
        self.last_fallback_note = number
        self.note_ordinal += 1
        self.notes_started = True
        part, item = self.statements_context()
        sec = FilingSection(_note_doc_id(head, self.note_ordinal), head, "note", part, item)
        self.current = self.open_section(sec, i)
        self.current.span[1] = i + 1
        return True


def note_number(sec: FilingSection) -> int | None:
    """The number a note's heading gives it (`Note 4`, `4.`, `D.` = 4), if any."""
    m = _NOTE_NUMBER.match(sec.title) if sec.section_type == "note" else None
    number = next((g for g in (m.groups() if m else ()) if g), None)
    if number is None:
        return None
    return int(number) if number.isdigit() else ord(number.lower()) - 96


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


_SPAN_VALUE = re.compile(r"[0-9]{1,9}")


def _int_attr(el: etree._Element, name: str) -> int:
    v = el.get(name)
    if v is None:
        return 1  # most cells
    v = v.strip()
    # ASCII digits only (HTML's rule; str.isdigit() also accepts "²", which int() refuses), and at most
    # 9 of them (int() refuses > 4300 digits); expand_spans caps the value.
    return int(v) if _SPAN_VALUE.fullmatch(v) and int(v) > 0 else 1


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
