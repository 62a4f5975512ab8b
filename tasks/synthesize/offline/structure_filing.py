"""Offline form-free structure for a filing (layout "filing": EDGAR), SPEC §2.4.

A section only where its evidence exists, in this order:
- "Business Overview" (10-K only): Item 1 Business, one text leaf;
- "Financial Highlights": one table leaf per primary statement (operations, balance sheet, cash flows);
- "Management's Discussion and Analysis": one subsection per `## ` heading of the MD&A document with
  at least 60 words of prose (boilerplate headings such as "Available Information" or "Critical
  Accounting Estimates" and liquidity headings left out, same-titled headings merged), the 6 largest
  by prose words + 150 per table, in document order; each has a text leaf, and the first 2 (10-Q) or
  3 (10-K) that contain a table also a table leaf;
- "Liquidity and Capital Resources": the MD&A's liquidity/cash/financing headings; a text leaf, plus a
  table leaf when they hold a table;
- "Segment Information and Selected Notes": the segment note plus the most numeric notes (by numeric
  table cells), 3 notes for a 10-Q and 4 for a 10-K, in note order; each a subsection with a table
  leaf when the note has tables and a text leaf when it has at least 40 words of prose;
- "Risk Factors": a text leaf, plus a list leaf when the document has bullet lists;
- "Controls and Procedures": a text leaf.
Titles come from the source headings; each objective is one sentence built from the heading and the
leading sentence (or units line) of its source; every leaf lists the doc_ids it draws on (`sources`).
A filing without any of these parts gets one "Filing Summary" section over its largest documents.
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


def _find_doc(
    gset: GroundingSet, id_pattern: str, title_pattern: str | None = None
) -> GroundingDocument | None:
    for d in gset.documents:
        if re.search(id_pattern, d.doc_id) or (title_pattern and re.search(title_pattern, norm(d.title))):
            return d
    return None


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
    """(report title, sections): each section builder gives None where its evidence is missing."""
    f = _Filing.of(gset, ctx)
    found = (
        _business_section(gset, f),
        _highlights_section(gset, f),
        *_mdna_sections(gset, f),
        _notes_section(gset, f),
        _risk_section(gset, f),
        _controls_section(gset, f),
    )
    sections = [s for s in found if s is not None]
    if not sections:  # a filing without any of the usual parts: one section over its largest documents
        sections.append(_summary_section(gset, f))
    title = " ".join(x for x in (f.company, f.form, "report") if x) + (
        f" for the period ended {f.period}" if f.period else ""
    )
    return title, sections


def _business_section(gset: GroundingSet, f: _Filing) -> dict | None:
    """Business overview (10-K)."""
    biz = _find_doc(gset, r"item-1-business$") if f.annual else None
    if biz is None or biz.tokens < 200:
        return None
    parts = doc_parts(gset.texts[biz.doc_id])
    lead = lead_sentence([b for p in parts for b in p.blocks])
    return _container(
        "section",
        "Business Overview",
        f"Describes the business of {f.company or 'the company'} as presented in "
        f"{nice_title(biz.title)} of {f.where_form}.",
        [
            _leaf(
                "text",
                "Business overview",
                _objective_text("the company's business", lead, nice_title(biz.title)),
                [biz.doc_id],
            )
        ],
    )


def _highlights_section(gset: GroundingSet, f: _Filing) -> dict | None:
    """Financial highlights: the primary statements."""
    leaves = []
    for slug in ("statement-of-operations", "balance-sheet", "statement-of-cash-flows"):
        d = next((x for x in gset.documents if x.doc_id == slug), None)
        if d is None:
            continue
        tables = [b for b in parse_blocks(gset.texts[d.doc_id]) if b.kind == "table"]
        if not tables:
            continue
        title = nice_title(d.title)
        leaves.append(
            _leaf("table", title, _objective_table(title, units_line(tables[0]), f.where_form), [d.doc_id])
        )
    if not leaves:
        return None
    return _container(
        "section",
        "Financial Highlights",
        f"Presents the primary financial statements of {f.company or 'the company'} for the period "
        f"ended {f.period or 'the reporting date'}: " + "; ".join(x["title"] for x in leaves) + ".",
        leaves,
    )


def _mdna_sections(gset: GroundingSet, f: _Filing) -> list[dict]:
    """MD&A subsections, then liquidity: each section only where the MD&A document has its parts."""
    mdna = _find_doc(gset, r"-mdna$", r"management s discussion|management's discussion")
    if mdna is None:
        return []
    subs, liq = _mdna_parts(gset.texts[mdna.doc_id])
    sections = []
    children = []
    tables_left = MDNA_TABLES if f.annual else MDNA_TABLES - 1
    for p in subs:
        with_table = bool(p.tables()) and tables_left > 0
        if with_table:
            tables_left -= 1
        children.append(_mdna_subsection(p, mdna.doc_id, with_table))
    if children:
        sections.append(
            _container(
                "section",
                "Management's Discussion and Analysis",
                "Summarises management's discussion of results for the period ended "
                f"{f.period or 'the period'}: " + ", ".join(c["title"] for c in children) + ".",
                children,
            )
        )
    if liq:
        sections.append(_liquidity_section(liq, mdna.doc_id))
    return sections


def _mdna_subsection(p: Part, doc_id: str, with_table: bool) -> dict:
    kids = [
        _leaf(
            "text",
            p.heading or "",
            _objective_text(p.heading or "", lead_sentence(p.blocks), _MDNA_WHERE),
            [doc_id],
        )
    ]
    if with_table:
        kids.append(
            _leaf(
                "table",
                f"{p.heading} table",
                _objective_table(p.heading or "", units_line(p.tables()[0]), _MDNA_WHERE),
                [doc_id],
            )
        )
    return _container(
        "subsection", p.heading or "", f"Covers {p.heading} as discussed in {_MDNA_WHERE}.", kids
    )


def _liquidity_section(liq: list[Part], doc_id: str) -> dict:
    blocks = [b for p in liq for b in p.blocks]
    kids = [
        _leaf(
            "text",
            "Liquidity and capital resources",
            _objective_text("liquidity and capital resources", lead_sentence(blocks), _MDNA_WHERE),
            [doc_id],
        )
    ]
    tables = [b for b in blocks if b.kind == "table"]
    if tables:
        kids.append(
            _leaf(
                "table",
                "Liquidity and capital resources table",
                _objective_table("liquidity and capital resources", units_line(tables[0]), _MDNA_WHERE),
                [doc_id],
            )
        )
    return _container(
        "section",
        "Liquidity and Capital Resources",
        "Covers cash, liquidity, financing and capital return as discussed under "
        + ", ".join(f"“{p.heading}”" for p in liq)
        + f" in {_MDNA_WHERE}.",
        kids,
    )


def _notes_section(gset: GroundingSet, f: _Filing) -> dict | None:
    """Segment information and selected notes."""
    notes = _docs_by_type(gset, "note")
    if not notes:
        return None
    chosen = _select_notes(gset, notes, 4 if f.annual else 3)
    subs = [_note_subsection(gset, d) for d in chosen]
    has_segment = any("segment" in norm(d.title) for d in chosen)
    return _container(
        "section",
        "Segment Information and Selected Notes" if has_segment else "Selected Notes",
        "Reports the segment information and the most numeric notes to the financial statements: "
        + ", ".join(s["title"] for s in subs)
        + ".",
        subs,
    )


def _note_subsection(gset: GroundingSet, d: GroundingDocument) -> dict:
    title = nice_title(d.title)
    blocks = parse_blocks(gset.texts[d.doc_id])
    tables = [b for b in blocks if b.kind == "table"]
    kids = []
    if tables:
        kids.append(
            _leaf(
                "table",
                f"{title} table",
                _objective_table(title, units_line(tables[0]), nice_title(d.title)),
                [d.doc_id],
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
    return _container("subsection", title, f"Covers the note “{d.title.strip()}”.", kids)


def _risk_section(gset: GroundingSet, f: _Filing) -> dict | None:
    risk = _find_doc(gset, r"item-1a-risk-factors$")
    if risk is None or risk.tokens < 30:
        return None
    blocks = parse_blocks(gset.texts[risk.doc_id])
    kids = [
        _leaf(
            "text",
            "Risk factors",
            _objective_text("the risk factors", lead_sentence(blocks), nice_title(risk.title)),
            [risk.doc_id],
        )
    ]
    if any(b.kind == "list" for b in blocks):
        kids.append(
            _leaf(
                "list",
                "Key risks",
                f"Lists the principal risks named in {nice_title(risk.title)}.",
                [risk.doc_id],
            )
        )
    return _container(
        "section", "Risk Factors", f"Summarises the risk factors disclosed in {f.where_form}.", kids
    )


def _controls_section(gset: GroundingSet, f: _Filing) -> dict | None:
    ctrl = _find_doc(gset, r"controls-and-procedures$")
    if ctrl is None:
        return None
    blocks = parse_blocks(gset.texts[ctrl.doc_id])
    return _container(
        "section",
        "Controls and Procedures",
        f"Reports management's evaluation of disclosure controls and internal control in {f.where_form}.",
        [
            _leaf(
                "text",
                "Controls and procedures",
                _objective_text(
                    "the evaluation of controls and procedures",
                    lead_sentence(blocks),
                    nice_title(ctrl.title),
                ),
                [ctrl.doc_id],
            )
        ],
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


def _mdna_parts(markdown: str) -> tuple[list[Part], list[Part]]:
    """(chosen MD&A subsections, liquidity parts), both in document order."""
    merged: dict[str, Part] = {}
    order: list[str] = []
    for p in doc_parts(markdown):
        if p.heading is None:
            continue
        key = norm(p.heading)
        if key in merged:
            merged[key].blocks.extend(p.blocks)
        else:
            merged[key] = Part(p.heading, list(p.blocks))
            order.append(key)
    liq, cands = [], []
    for pos, key in enumerate(order):
        p = merged[key]
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
