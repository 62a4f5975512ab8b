"""Offline form-free structure for a filing (layout "filing": EDGAR), SPEC §2.4.

The plan follows the filing's own form, so two companies of one category differ where their filings
differ. Top-level sections, in the filing's document order:
- one per substantive Item (at least 150 words of prose; exhibit lists, the Item 8 / Part I Item 1
  pointer and the 10-K summary are not sections), titled by the Item's own heading without its
  "Item N." label ("Risk Factors", "Management's Discussion and Analysis of Financial Condition and
  Results of Operations"); children: subsections from the Item's own `## ` headings with at least 60
  words of prose (boilerplate such as "Available Information" or "Critical Accounting Estimates" left
  out, same-titled headings merged), the largest ones in document order, each with a text leaf and,
  the first ones holding a table, a table leaf; an Item without two such headings gets a text leaf (a
  table leaf when it has a table, a list leaf for risk factors written as lists). The MD&A's
  subsections are chosen by prose words + 150 per table, and its liquidity/cash/financing headings
  become one subsection named by the first of them;
- "Financial Statements" (Item 8's / Part I Item 1's own title): one table leaf per primary statement
  the filing has (operations, balance sheet, cash flows), titled by the statement's heading;
- one section per selected note, titled by the note's heading: the segment note plus the most numeric
  notes (by numeric table cells), 4 notes for a 10-K and 3 for a 10-Q; a table leaf when the note has
  tables and a text leaf when it has at least 40 words of prose.
Size bound (paper 000 Table 1: ~19 sections for a 10-K, ~12.5 for a 10-Q): at most 12 (10-K) / 9 (10-Q)
top-level sections (the smallest Items left out first) and 22 / 14 sections and subsections in all;
the subsection budget goes to the MD&A first (6 / 5), then to the other Items by size, 2 each.
Each objective is one sentence built from the heading and the leading sentence (or units line) of its
source; every leaf lists the doc_ids it draws on (`sources`). A filing without any of these parts gets
one "Filing Summary" section over its largest documents.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from schemas.documents import GroundingDocument
from tasks.ground.load import GroundingSet
from tasks.llm.backend import StepContext
from tasks.markdown.document import is_table_row
from tasks.synthesize.offline.structure_common import (
    Part,
    _container,
    _leaf,
    doc_parts,
    lead_sentence,
    nice_title,
    norm,
    numeric_cells,
)
from tasks.synthesize.retrieve import Block, parse_blocks

MDNA_SUBSECTIONS = 6
MDNA_TABLES = 3
MIN_PROSE_WORDS = 60
MIN_NOTE_PROSE_WORDS = 40

_BOILERPLATE = re.compile(
    r"available information|forward[- ]looking|accounting pronouncement|critical accounting|adoption of new|"
    r"non-gaap|fiscal period|understanding .*results|other information|basis of presentation",
    re.IGNORECASE,
)
_LIQUIDITY = re.compile(
    r"liquidity|capital resources|cash|financing|indebtedness|capital return|repurchase|capital expenditure|"
    r"financial condition|commercial paper|material .*requirements|obligations|debt",
    re.IGNORECASE,
)
_MDNA_WHERE = "the MD&A"
ITEM_MIN_WORDS = 150  # an Item with less prose (a pointer to another document, "None") is no section
MAX_SECTIONS = {True: 12, False: 9}  # top-level sections of a 10-K / 10-Q
MAX_CONTAINERS = {True: 22, False: 14}  # sections and subsections of a 10-K / 10-Q
_ITEM_LABEL = re.compile(r"^\s*(?:part\s+[ivx]+\W*)?item\s+\d+[a-z]?\s*[.:\-–—]?\s*", re.IGNORECASE)
_NOT_A_SECTION = re.compile(r"exhibit|financial-statements$|form-10-k-summary")
_PRIMARY = ("statement-of-operations", "balance-sheet", "statement-of-cash-flows")


def units_line(table: Block) -> str:
    """The caption/units line attached before a table passage, without parentheses."""
    first = table.text.split("\n", 1)[0].strip()
    if is_table_row(first):
        return ""
    return first.strip("()").rstrip(":").strip()


def _objective_text(heading: str, lead: str, where: str) -> str:
    if lead:
        return f"Explains {heading} as reported in {where}, which opens: {lead}"
    return f"Explains {heading} as reported in {where}."


def _objective_table(heading: str, units: str, where: str) -> str:
    if units:
        units = units[0].lower() + units[1:] if re.match(r"(?:In|The) ", units) else units
        return f"Presents the {heading} table from {where} ({units})."
    return f"Presents the {heading} table from {where}."


def _docs_by_type(gset: GroundingSet, section_type: str) -> list[GroundingDocument]:
    return [d for d in gset.documents if d.metadata.get("section_type") == section_type]


def _company(gset: GroundingSet) -> tuple[str, str, str]:
    for d in gset.documents:
        m = d.metadata
        if m.get("company") or m.get("form"):
            return str(m.get("company") or ""), str(m.get("form") or ""), str(m.get("period_end") or "")
    return "", "", ""


@dataclass(frozen=True)
class _Filing:
    """Who filed what for which period: the words every section's objective is built from."""

    company: str
    form: str
    period: str
    annual: bool
    where_form: str

    @classmethod
    def of(cls, gset: GroundingSet, ctx: StepContext) -> _Filing:
        company, form, period = _company(gset)
        annual = form.upper().startswith("10-K") or ctx.category == "financial_annual"
        return cls(company, form, period, annual, f"the {form}" if form else "the filing")


def _filing_structure(gset: GroundingSet, ctx: StepContext) -> tuple[str, list[dict]]:
    """(report title, sections): the filing's own Items, statements and notes, in its order."""
    f = _Filing.of(gset, ctx)
    pos = {d.doc_id: i for i, d in enumerate(gset.documents)}
    notes = _select_notes(gset, _docs_by_type(gset, "note"), 4 if f.annual else 3)
    statements = _statements_section(gset, f)
    items = _substantive_items(gset, MAX_SECTIONS[f.annual] - len(notes) - (statements is not None))
    budget = MAX_CONTAINERS[f.annual] - len(items) - len(notes) - (statements is not None)
    placed: list[tuple[int, dict]] = []
    # the subsection budget goes to the MD&A first, then to the larger Items
    for d in sorted(items, key=lambda d: (not _is_mdna(d), -_prose_words(gset, d), pos[d.doc_id])):
        cap = min(budget, (MDNA_SUBSECTIONS if f.annual else MDNA_SUBSECTIONS - 1) if _is_mdna(d) else 2)
        sec = _mdna_section(gset, d, f, cap) if _is_mdna(d) else _item_section(gset, d, f, cap)
        budget -= sum(1 for c in sec["children"] if c["type"] == "subsection")
        placed.append((pos[d.doc_id], sec))
    if statements is not None:
        placed.append(statements)
    placed.extend((pos[d.doc_id], _note_section(gset, d)) for d in notes)
    sections = [sec for _, sec in sorted(placed, key=lambda x: x[0])]
    if not sections:  # a filing without any of the usual parts: one section over its largest documents
        sections.append(_summary_section(gset, f))
    title = " ".join(x for x in (f.company, f.form, "report") if x) + (
        f" for the period ended {f.period}" if f.period else ""
    )
    return title, sections


def section_title(doc_title: str) -> str:
    """A document's heading as a report title: without its "Item N." label, title-cased if shouted."""
    return nice_title(_ITEM_LABEL.sub("", doc_title)) or nice_title(doc_title)


def _is_mdna(d: GroundingDocument) -> bool:
    return bool(re.search(r"-mdna$", d.doc_id) or re.search(r"management s discussion", norm(d.title)))


def _prose_words(gset: GroundingSet, d: GroundingDocument) -> int:
    return sum(p.prose_words() for p in doc_parts(gset.texts[d.doc_id]))


def _substantive_items(gset: GroundingSet, cap: int) -> list[GroundingDocument]:
    """The Items with enough prose to report on, the largest `cap` of them, in filing order."""
    items = [
        d
        for d in _docs_by_type(gset, "item")
        if not _NOT_A_SECTION.search(d.doc_id) and _prose_words(gset, d) >= ITEM_MIN_WORDS
    ]
    keep = sorted(items, key=lambda d: (not _is_mdna(d), -_prose_words(gset, d)))[: max(cap, 0)]
    return [d for d in items if d in keep]


def _statements_section(gset: GroundingSet, f: _Filing) -> tuple[int, dict] | None:
    """(position, section) of the primary statements, titled by the filing's financial-statements Item."""
    leaves, first = [], None
    for slug in _PRIMARY:
        d = next((x for x in gset.documents if x.doc_id == slug), None)
        if d is None:
            continue
        tables = [b for b in parse_blocks(gset.texts[d.doc_id]) if b.kind == "table"]
        if not tables:
            continue
        first = min(first if first is not None else len(gset.documents), gset.documents.index(d))
        title = nice_title(d.title)
        leaves.append(
            _leaf("table", title, _objective_table(title, units_line(tables[0]), f.where_form), [d.doc_id])
        )
    if not leaves or first is None:
        return None
    item = next((d for d in _docs_by_type(gset, "item") if d.doc_id.endswith("financial-statements")), None)
    at = gset.documents.index(item) if item is not None else first
    section = _container(
        "section",
        section_title(item.title) if item is not None else "Financial Statements",
        f"Presents the primary financial statements of {f.company or 'the company'} for the period "
        f"ended {f.period or 'the reporting date'}: " + "; ".join(x["title"] for x in leaves) + ".",
        leaves,
    )
    return at, section


def _mdna_section(gset: GroundingSet, mdna: GroundingDocument, f: _Filing, cap: int) -> dict:
    """The MD&A: its chosen headings as subsections, then its liquidity headings as one."""
    subs, liq = _mdna_parts(gset.texts[mdna.doc_id])
    subs = subs[: max(cap - bool(liq), 0)]
    children = []
    tables_left = MDNA_TABLES if f.annual else MDNA_TABLES - 1
    for p in subs:
        with_table = bool(p.tables()) and tables_left > 0
        if with_table:
            tables_left -= 1
        children.append(_heading_subsection(p, mdna.doc_id, _MDNA_WHERE, with_table))
    if liq and cap > len(children):
        children.append(_liquidity_subsection(liq, mdna.doc_id))
    title = section_title(mdna.title)
    if not children:
        return _item_section(gset, mdna, f, 0)
    return _container(
        "section",
        title,
        "Summarises management's discussion of results for the period ended "
        f"{f.period or 'the period'}: " + ", ".join(c["title"] for c in children) + ".",
        children,
    )


def _item_section(gset: GroundingSet, d: GroundingDocument, f: _Filing, cap: int) -> dict:
    """An Item: subsections from its own headings (at most `cap`), else its leaves."""
    title = section_title(d.title)
    text = gset.texts[d.doc_id]
    heads = [p for p in _merged_parts(text) if not _BOILERPLATE.search(p.heading or "")]
    heads = [p for p in heads if p.prose_words() >= MIN_PROSE_WORDS]
    objective = f"Reports {title} as presented in {f.where_form}."
    if cap >= 2 and len(heads) >= 2:
        top = sorted(heads, key=lambda p: (-p.prose_words(), heads.index(p)))[:cap]
        chosen = [p for p in heads if p in top]
        children = [_heading_subsection(p, d.doc_id, title) for p in chosen]
        return _container("section", title, objective, children)
    blocks = parse_blocks(text)
    kids = [_leaf("text", title, _objective_text(title, lead_sentence(blocks), f.where_form), [d.doc_id])]
    tables = [b for b in blocks if b.kind == "table"]
    if tables:
        kids.append(
            _leaf(
                "table",
                f"{title} table",
                _objective_table(title, units_line(tables[0]), f.where_form),
                [d.doc_id],
            )
        )
    if "risk-factors" in d.doc_id and any(b.kind == "list" for b in blocks):
        kids.append(_leaf("list", "Key risks", f"Lists the principal risks named in {title}.", [d.doc_id]))
    return _container("section", title, objective, kids)


def _heading_subsection(p: Part, doc_id: str, where: str, with_table: bool = True) -> dict:
    """One `## ` heading of an Item: a text leaf, and a table leaf when it has a table."""
    heading = p.heading or ""
    kids = [_leaf("text", heading, _objective_text(heading, lead_sentence(p.blocks), where), [doc_id])]
    if with_table and p.tables():
        kids.append(
            _leaf(
                "table",
                f"{heading} table",
                _objective_table(heading, units_line(p.tables()[0]), where),
                [doc_id],
            )
        )
    return _container("subsection", heading, f"Covers {heading} as discussed in {where}.", kids)


def _note_section(gset: GroundingSet, d: GroundingDocument) -> dict:
    title = nice_title(d.title)
    blocks = parse_blocks(gset.texts[d.doc_id])
    tables = [b for b in blocks if b.kind == "table"]
    kids = []
    if tables:
        kids.append(
            _leaf(
                "table", f"{title} table", _objective_table(title, units_line(tables[0]), title), [d.doc_id]
            )
        )
    prose_words = sum(len(b.text.split()) for b in blocks if b.kind in ("text", "list") and not b.code)
    if prose_words >= MIN_NOTE_PROSE_WORDS or not tables:
        kids.append(
            _leaf(
                "text",
                title,
                _objective_text(title, lead_sentence(blocks), f"the note “{title}”"),
                [d.doc_id],
            )
        )
    return _container(
        "section", title, f"Reports the note “{d.title.strip()}” to the financial statements.", kids
    )


def _liquidity_subsection(liq: list[Part], doc_id: str) -> dict:
    """The MD&A's liquidity, cash and financing headings as one subsection, named by the first."""
    title = liq[0].heading or "Liquidity and Capital Resources"
    blocks = [b for p in liq for b in p.blocks]
    kids = [_leaf("text", title, _objective_text(title, lead_sentence(blocks), _MDNA_WHERE), [doc_id])]
    tables = [b for b in blocks if b.kind == "table"]
    if tables:
        kids.append(
            _leaf(
                "table",
                f"{title} table",
                _objective_table(title, units_line(tables[0]), _MDNA_WHERE),
                [doc_id],
            )
        )
    return _container(
        "subsection",
        title,
        "Covers cash, liquidity, financing and capital return as discussed under "
        + ", ".join(f"“{p.heading}”" for p in liq)
        + f" in {_MDNA_WHERE}.",
        kids,
    )


def _summary_section(gset: GroundingSet, f: _Filing) -> dict:
    docs = sorted(gset.documents, key=lambda d: (-d.tokens, d.doc_id))[:3]
    return _container(
        "section",
        "Filing Summary",
        f"Summarises {f.where_form}.",
        [
            _leaf(
                "text",
                nice_title(d.title),
                _objective_text(nice_title(d.title), "", f.where_form),
                [d.doc_id],
            )
            for d in docs
        ],
    )


def _merged_parts(markdown: str) -> list[Part]:
    """A document's `## ` parts with a heading, same-titled ones merged (a summary and its full text)."""
    merged: dict[str, Part] = {}
    for p in doc_parts(markdown):
        if p.heading is None:
            continue
        key = norm(p.heading)
        if key in merged:
            merged[key].blocks.extend(p.blocks)
        else:
            merged[key] = Part(p.heading, list(p.blocks))
    return list(merged.values())


def _mdna_parts(markdown: str) -> tuple[list[Part], list[Part]]:
    """(chosen MD&A subsections, liquidity parts), both in document order."""
    liq, cands = [], []
    for pos, p in enumerate(_merged_parts(markdown)):
        if _BOILERPLATE.search(p.heading or ""):
            continue
        if _LIQUIDITY.search(p.heading or ""):
            if p.prose_words() >= 40 or p.tables():
                liq.append(p)
            continue
        if p.prose_words() >= MIN_PROSE_WORDS:
            cands.append((p.prose_words() + 150 * len(p.tables()), pos, p))
    top = sorted(cands, key=lambda x: (-x[0], x[1]))[:MDNA_SUBSECTIONS]
    return [p for _, _, p in sorted(top, key=lambda x: x[1])], liq


def _select_notes(gset: GroundingSet, notes: list[GroundingDocument], cap: int) -> list[GroundingDocument]:
    segment = [d for d in notes if "segment" in norm(d.title)][:1]
    scored = sorted(
        ((numeric_cells(gset.texts[d.doc_id]), i, d) for i, d in enumerate(notes) if d not in segment),
        key=lambda x: (-x[0], x[1]),
    )
    chosen = segment + [d for n, _, d in scored if n > 0][: cap - len(segment)]
    pos = {d.doc_id: i for i, d in enumerate(notes)}
    return sorted(chosen, key=lambda d: pos[d.doc_id])
