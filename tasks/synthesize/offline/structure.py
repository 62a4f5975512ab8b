"""Offline `structure` role: a report tree proposed from, or adapted to, a grounding set (SPEC §2.4).

Deterministic rules over the grounding documents' metadata and Markdown headings; no model, no
randomness. The gold reports they lead to are *extractive baselines*; real builds use an LLM endpoint.

**Form-free (t1), filings** (`source_kind == "edgar"`); a section only where its evidence exists, in
this order:
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

**Form-free, papers** (`source_kind == "arxiv"`): "Overview" (text over all abstracts); "Research
Themes" with one subsection per paper (title = paper title; leaves: problem-and-method text, results
text, a table leaf if the paper has a table, a figure leaf if it has a figure, preferring those of its
results section); "Comparison of Approaches" (a table leaf over all papers: one row per paper);
"Open Questions" (text from conclusion/discussion sections).

**Form-restricted (t2, t3)**: prev's sections are all kept with their ids, titles and order. Each child
is matched to the element a form-free proposal over the new set contains (same title, or the same
title but for its period phrases, for containers; same type and title, or same type and sources, for
leaves). A matched child keeps its id and title and takes the new objective and sources; a title
differing only in its numbers or its period phrases ("Fiscal Year 2025 Summary", "Second Quarter of
Fiscal Year 2026 Summary" for "First Quarter of Fiscal Year 2026 Summary") takes the new one, which
the new filing wrote. Any other title kept from prev that names prev's period (its end date read from
prev's title, "... for the period ended July 30, 2023"; fiscal year and quarter from the new set's dei
facts) is rewritten for the new period by `tasks.markdown.periods.rewrite_title`, so no heading carries
the earlier edition's period (`frame qa gold` checks it). An unmatched child is kept only if its
`sources` still resolve in the new set (same doc_id, else the same slug without its note/item number,
else a document title matching at >= 90 on rapidfuzz's token_set_ratio) and, for a subsection sharing
its document with siblings (an MD&A heading), its title (renewed) still names a heading of that
document; a table/figure leaf also needs a table/figure in its scope. Everything else is dropped.
Proposed children without counterpart are appended (new ids continue the parent's numbering, dropped
ids are never reused) while the parent has fewer subsections than the proposal: this is how a new note
or MD&A subsection enters, and how per-paper subsections are replaced by the new window's papers. A
section left without any leaf keeps one text leaf without sources, so the layout never changes. Ids:
"s1", "s1.2", "s1.2.t1" (t text, tb table, f figure, l list).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from rapidfuzz import fuzz

from schemas.documents import GroundingDocument
from schemas.structure import CONTAINERS, LEAVES, Provenance, ReportStructure, StructureNode
from tasks.ground.load import GroundingSet
from tasks.llm.backend import StepContext
from tasks.markdown.document import is_table_row
from tasks.markdown.periods import Period, find_periods, period_end_named, rewrite_title, snapshot_period
from tasks.markdown.text import split_sentences
from tasks.synthesize.retrieve import Block, parse_blocks

ALGORITHM_VERSION = "v1"
MDNA_SUBSECTIONS = 6
MDNA_TABLES = 3
MIN_PROSE_WORDS = 60
MIN_NOTE_PROSE_WORDS = 40
LEAD_MAX_WORDS = 40
TYPE_PREFIX = {"text": "t", "table": "tb", "figure": "f", "list": "l"}

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
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
_NOTE_PREFIX = re.compile(r"^\s*note\s+\d+[a-z]?\s*[-–—:.]\s*", re.IGNORECASE)
_SMALL_WORDS = {"of", "and", "the", "in", "for", "to", "on", "a", "an", "or", "by", "at", "with", "from"}
_RESULTS = re.compile(
    r"result|experiment|evaluation|finding|application|use case|performance|analysis", re.IGNORECASE
)
_CONCLUSION = re.compile(r"conclu|discussion|summary|outlook|future|limitation", re.IGNORECASE)


def provenance(role: str) -> Provenance:
    return Provenance(backend="offline", model=f"frame-offline-{role}-{ALGORITHM_VERSION}", role=role)


# ---------------------------------------------------------------- reading the documents


@dataclass
class Part:
    """The blocks under one `## ` heading of a document (heading None = text before the first one)."""

    heading: str | None
    blocks: list[Block] = field(default_factory=list)

    def prose(self) -> list[Block]:
        return [b for b in self.blocks if b.kind in ("text", "list") and not b.code]

    def prose_words(self) -> int:
        return sum(len(b.text.split()) for b in self.prose())

    def tables(self) -> list[Block]:
        return [b for b in self.blocks if b.kind == "table"]


def doc_parts(markdown: str, level: int = 2) -> list[Part]:
    """Split a document at its headings of `level` (deeper headings stay inside a part)."""
    parts = [Part(None)]
    for b in parse_blocks(markdown):
        if b.kind == "heading" and b.level == level and not b.pseudo:
            parts.append(Part(b.title))
        elif b.kind != "heading":
            parts[-1].blocks.append(b)
    return parts


def headings_of(markdown: str) -> list[str]:
    return [b.title for b in parse_blocks(markdown) if b.kind == "heading"]


def norm(text: str) -> str:
    t = text.replace("’", "'").replace("‘", "'").replace("–", "-").replace("—", "-").lower()
    return re.sub(r"\s+", " ", re.sub(r"[^a-z0-9' ]+", " ", t)).strip()


def titles_match(a: str, b: str, threshold: int = 90) -> bool:
    na, nb = norm(a), norm(b)
    if not na or not nb:
        return False
    return na == nb or fuzz.token_set_ratio(na, nb) >= threshold and fuzz.ratio(na, nb) >= 60


def nice_title(text: str) -> str:
    """Upper-case filing headings -> title case; '(Unaudited)' and note numbers dropped."""
    t = re.sub(r"\s*\((?:unaudited)\)\s*", " ", text, flags=re.IGNORECASE).strip()
    t = _NOTE_PREFIX.sub("", t)
    if t.isupper():
        words = t.lower().split()
        t = " ".join(w if (i and w in _SMALL_WORDS) else w[:1].upper() + w[1:] for i, w in enumerate(words))
    return t.strip(" .:")


def lead_sentence(blocks: list[Block], max_words: int = LEAD_MAX_WORDS) -> str:
    """First sentence of the first prose block, if short enough to quote in an objective."""
    for b in blocks:
        if b.kind != "text" or b.code:
            continue
        sents = split_sentences(b.text.replace("\n", " "))
        if not sents:
            continue
        s = sents[0]
        if len(s.split()) <= max_words and len(s.split()) >= 4:
            return s if s[-1] in ".!?" else s + "."
        return ""
    return ""


def units_line(table: Block) -> str:
    """The caption/units line attached before a table passage, without parentheses."""
    first = table.text.split("\n", 1)[0].strip()
    if is_table_row(first):
        return ""
    return first.strip("()").rstrip(":").strip()


def numeric_cells(text: str) -> int:
    return sum(
        1
        for line in text.splitlines()
        if is_table_row(line)
        for cell in line.split("|")
        if _NUMBER.search(cell)
    )


def _objective_text(heading: str, lead: str, where: str) -> str:
    if lead:
        return f"Explains {heading} as reported in {where}, which opens: {lead}"
    return f"Explains {heading} as reported in {where}."


def _objective_table(heading: str, units: str, where: str) -> str:
    if units:
        units = units[0].lower() + units[1:] if re.match(r"(?:In|The) ", units) else units
        return f"Presents the {heading} table from {where} ({units})."
    return f"Presents the {heading} table from {where}."


# ---------------------------------------------------------------- building nodes


class _Ids:
    """Deterministic ids: sections s1.., subsections <parent>.N, leaves <parent>.<prefix>N."""

    @staticmethod
    def assign(sections: list[dict]) -> list[dict]:
        for i, s in enumerate(sections, start=1):
            s["id"] = f"s{i}"
            _Ids.children(s)
        return sections

    @staticmethod
    def children(parent: dict) -> None:
        counts: dict[str, int] = {}
        for c in parent["children"]:
            key = "sub" if c["type"] in CONTAINERS else TYPE_PREFIX[c["type"]]
            counts[key] = counts.get(key, 0) + 1
            c["id"] = (
                f"{parent['id']}.{counts[key]}" if key == "sub" else f"{parent['id']}.{key}{counts[key]}"
            )
            if c["type"] in CONTAINERS:
                _Ids.children(c)


def _leaf(kind: str, title: str, objective: str, sources: list[str]) -> dict:
    return {
        "type": kind,
        "title": title,
        "objective": objective,
        "sources": list(dict.fromkeys(sources)),
        "children": [],
    }


def _container(kind: str, title: str, objective: str, children: list[dict], sources: list[str] | None = None):
    srcs = sources if sources is not None else [s for c in children for s in c.get("sources", [])]
    return {
        "type": kind,
        "title": title,
        "objective": objective,
        "sources": list(dict.fromkeys(srcs)),
        "children": children,
    }


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


def _filing_structure(gset: GroundingSet, ctx: StepContext) -> tuple[str, list[dict]]:
    company, form, period = _company(gset)
    annual = form.upper().startswith("10-K") or ctx.category == "financial_annual"
    where_form = f"the {form}" if form else "the filing"
    sections: list[dict] = []

    # Business overview (10-K)
    biz = _find_doc(gset, r"item-1-business$") if annual else None
    if biz is not None and biz.tokens >= 200:
        parts = doc_parts(gset.texts[biz.doc_id])
        lead = lead_sentence([b for p in parts for b in p.blocks])
        sections.append(
            _container(
                "section",
                "Business Overview",
                f"Describes the business of {company or 'the company'} as presented in "
                f"{nice_title(biz.title)} of {where_form}.",
                [
                    _leaf(
                        "text",
                        "Business overview",
                        _objective_text("the company's business", lead, nice_title(biz.title)),
                        [biz.doc_id],
                    )
                ],
            )
        )

    # Financial highlights: primary statements
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
            _leaf("table", title, _objective_table(title, units_line(tables[0]), where_form), [d.doc_id])
        )
    if leaves:
        sections.append(
            _container(
                "section",
                "Financial Highlights",
                f"Presents the primary financial statements of {company or 'the company'} for the period "
                f"ended {period or 'the reporting date'}: " + "; ".join(x["title"] for x in leaves) + ".",
                leaves,
            )
        )

    # MD&A subsections and liquidity
    mdna = _find_doc(gset, r"-mdna$", r"management s discussion|management's discussion")
    if mdna is not None:
        subs, liq = _mdna_parts(gset.texts[mdna.doc_id])
        where = "the MD&A"
        children = []
        tables_left = MDNA_TABLES if annual else MDNA_TABLES - 1
        for p in subs:
            kids = [
                _leaf(
                    "text",
                    p.heading or "",
                    _objective_text(p.heading or "", lead_sentence(p.blocks), where),
                    [mdna.doc_id],
                )
            ]
            if p.tables() and tables_left > 0:
                tables_left -= 1
                kids.append(
                    _leaf(
                        "table",
                        f"{p.heading} table",
                        _objective_table(p.heading or "", units_line(p.tables()[0]), where),
                        [mdna.doc_id],
                    )
                )
            children.append(
                _container(
                    "subsection", p.heading or "", f"Covers {p.heading} as discussed in {where}.", kids
                )
            )
        if children:
            sections.append(
                _container(
                    "section",
                    "Management's Discussion and Analysis",
                    "Summarises management's discussion of results for the period ended "
                    f"{period or 'the period'}: " + ", ".join(c["title"] for c in children) + ".",
                    children,
                )
            )
        if liq:
            blocks = [b for p in liq for b in p.blocks]
            kids = [
                _leaf(
                    "text",
                    "Liquidity and capital resources",
                    _objective_text("liquidity and capital resources", lead_sentence(blocks), where),
                    [mdna.doc_id],
                )
            ]
            tables = [b for b in blocks if b.kind == "table"]
            if tables:
                kids.append(
                    _leaf(
                        "table",
                        "Liquidity and capital resources table",
                        _objective_table("liquidity and capital resources", units_line(tables[0]), where),
                        [mdna.doc_id],
                    )
                )
            sections.append(
                _container(
                    "section",
                    "Liquidity and Capital Resources",
                    "Covers cash, liquidity, financing and capital return as discussed under "
                    + ", ".join(f"“{p.heading}”" for p in liq)
                    + f" in {where}.",
                    kids,
                )
            )

    # Segment information and selected notes
    notes = _docs_by_type(gset, "note")
    if notes:
        chosen = _select_notes(gset, notes, 4 if annual else 3)
        subs = []
        for d in chosen:
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
            prose_words = sum(
                len(b.text.split()) for b in blocks if b.kind in ("text", "list") and not b.code
            )
            if prose_words >= MIN_NOTE_PROSE_WORDS or not tables:
                kids.append(
                    _leaf(
                        "text",
                        title,
                        _objective_text(title, lead_sentence(blocks), f"the note “{title}”"),
                        [d.doc_id],
                    )
                )
            subs.append(_container("subsection", title, f"Covers the note “{d.title.strip()}”.", kids))
        has_segment = any("segment" in norm(d.title) for d in chosen)
        sections.append(
            _container(
                "section",
                "Segment Information and Selected Notes" if has_segment else "Selected Notes",
                "Reports the segment information and the most numeric notes to the financial statements: "
                + ", ".join(s["title"] for s in subs)
                + ".",
                subs,
            )
        )

    # Risk factors
    risk = _find_doc(gset, r"item-1a-risk-factors$")
    if risk is not None and risk.tokens >= 30:
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
        sections.append(
            _container(
                "section", "Risk Factors", f"Summarises the risk factors disclosed in {where_form}.", kids
            )
        )

    # Controls and procedures
    ctrl = _find_doc(gset, r"controls-and-procedures$")
    if ctrl is not None:
        blocks = parse_blocks(gset.texts[ctrl.doc_id])
        sections.append(
            _container(
                "section",
                "Controls and Procedures",
                "Reports management's evaluation of disclosure controls and internal control in "
                f"{where_form}.",
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
        )

    if not sections:  # a filing without any of the usual parts: one section over its largest documents
        docs = sorted(gset.documents, key=lambda d: (-d.tokens, d.doc_id))[:3]
        sections.append(
            _container(
                "section",
                "Filing Summary",
                f"Summarises {where_form}.",
                [
                    _leaf(
                        "text",
                        nice_title(d.title),
                        _objective_text(nice_title(d.title), "", where_form),
                        [d.doc_id],
                    )
                    for d in docs
                ],
            )
        )
    title = " ".join(x for x in (company, form, "report") if x) + (
        f" for the period ended {period}" if period else ""
    )
    return title, sections


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


# ---------------------------------------------------------------- papers


def short_title(title: str, max_words: int = 8) -> str:
    """'LEGWORK: A python package ...' -> 'LEGWORK'; else the first words of the title."""
    head = title.split(":", 1)[0].strip()
    if ":" in title and 0 < len(head.split()) <= 5:
        return head
    words = title.split()
    return title if len(words) <= max_words else " ".join(words[:max_words]) + "…"


def paper_parts(markdown: str) -> list[Part]:
    return doc_parts(markdown, level=2)


def _abstract(parts: list[Part]) -> Part | None:
    return next((p for p in parts if p.heading and norm(p.heading) == "abstract"), None)


def _paper_items(parts: list[Part]) -> tuple[Block | None, Block | None, list[Part], list[Part]]:
    """(best table, best figure, results parts, conclusion parts) of one paper."""
    body = [
        p for p in parts if p.heading and not re.match(r"(?i)references|bibliography|acknowledg", p.heading)
    ]
    results = [
        p for p in body if _RESULTS.search(p.heading or "") and not re.match(r"(?i)appendix", p.heading or "")
    ]
    concl = [p for p in body if _CONCLUSION.search(p.heading or "")]

    def pick(kind: str) -> Block | None:
        pool = [b for p in results for b in p.blocks if b.kind == kind]
        pool += [
            b
            for p in body
            if not re.match(r"(?i)appendix", p.heading or "")
            for b in p.blocks
            if b.kind == kind
        ]
        pool += [b for p in body for b in p.blocks if b.kind == kind]
        if kind == "table":
            small = [b for b in pool if len(b.text) <= 4000]
            numeric = [b for b in small if numeric_cells(b.text) >= 3]
            pool = numeric or small or pool
        return pool[0] if pool else None

    return pick("table"), pick("figure"), results, concl


def caption(block: Block, kind: str, max_words: int = 16) -> tuple[str, str, str]:
    """(label, short title, first caption sentence) of a table/figure block, e.g.
    ("Table 1", "Table 1: Summary of the models…", "Table 1: Summary of the models ... study.")."""
    text = block.text
    if kind == "figure":
        m = re.match(r"!\[(.*?)\]\(", text, re.S)
        cap = (m.group(1) if m else "").replace("\\\\", "\\")
        after = text.split("\n\n", 1)
        if len(after) > 1:
            cap = after[1]
    else:
        caps = [ln for ln in text.split("\n\n") if re.match(r"(?:Table|TABLE|Tab\.)\s*[A-Z]?\d+", ln.strip())]
        cap = caps[0] if caps else ""
    cap = " ".join(cap.split())
    if not cap:
        return "", "", ""
    m = re.match(r"((?:Table|TABLE|Tab\.|Figure|FIGURE|Fig\.)\s*[A-Z]?\d+)", cap)
    label = m.group(1) if m else ""
    sents = split_sentences(cap)
    sent = sents[0] if sents else cap
    words = sent.split()
    short = sent.rstrip(".") if len(words) <= max_words else " ".join(words[:max_words]) + "…"
    return label, short, sent if len(words) <= LEAD_MAX_WORDS else ""


def _paper_structure(gset: GroundingSet, ctx: StepContext) -> tuple[str, list[dict]]:
    docs = list(gset.documents)
    ids = [d.doc_id for d in docs]
    shorts = [short_title(d.title) for d in docs]
    overview = _container(
        "section",
        "Overview",
        f"Introduces the {len(docs)} papers of this window and the problems they address: "
        + "; ".join(shorts)
        + ".",
        [
            _leaf(
                "text",
                "Overview of the papers",
                "Summarises, from each paper's abstract, what the paper studies and contributes (abstract "
                "statements of aim and approach): " + "; ".join(shorts) + ".",
                ids,
            )
        ],
        ids,
    )
    subs = []
    for d, short in zip(docs, shorts, strict=True):
        parts = paper_parts(gset.texts[d.doc_id])
        ab = _abstract(parts)
        table, figure, results, concl = _paper_items(parts)
        results = results or concl
        lead = lead_sentence(ab.blocks) if ab else ""
        kids = [
            _leaf(
                "text",
                "Problem and method",
                f"States the problem {short} addresses and the method it uses"
                + (f"; its abstract opens: {lead}" if lead else "."),
                [d.doc_id],
            )
        ]
        res_where = f"its “{results[0].heading}” section" if results else "its results and conclusions"
        res_lead = lead_sentence(results[0].blocks) if results else ""
        kids.append(
            _leaf(
                "text",
                "Results",
                f"Reports the main results of {short} from {res_where}"
                + (f", which opens: {res_lead}" if res_lead else "."),
                [d.doc_id],
            )
        )
        for block, kind, verb in ((table, "table", "Reproduces"), (figure, "figure", "Shows")):
            if block is None:
                continue
            label, title, sent = caption(block, kind)
            what = label or f"the main {kind}"
            kids.append(
                _leaf(
                    kind,
                    title or f"Main {kind}",
                    f"{verb} {what} of {short}" + (f", captioned: {sent}" if sent else "."),
                    [d.doc_id],
                )
            )
        subs.append(
            _container(
                "subsection",
                d.title.strip(),
                f"Covers {short}: its problem, method and results" + (f"; {lead}" if lead else "."),
                kids,
                [d.doc_id],
            )
        )
    themes = _container(
        "section",
        "Research Themes",
        "Presents each paper of the window in turn: problem, method, results and key evidence.",
        subs,
        ids,
    )
    comparison = _container(
        "section",
        "Comparison of Approaches",
        "Compares the papers side by side: one row per paper with its approach and key result.",
        [
            _leaf(
                "table",
                "Comparison of approaches",
                "Tabulates, for each paper, the approach it presents in its abstract and the main result it "
                "reports in its abstract or conclusions.",
                ids,
            )
        ],
        ids,
    )
    open_q = _container(
        "section",
        "Open Questions",
        "Collects the open questions, limitations and future work stated by the papers.",
        [
            _leaf(
                "text",
                "Open questions and future work",
                "Summarises the limitations, open questions and future work (future directions, caveats, "
                "improvements left to future studies) stated in the conclusion and discussion sections.",
                ids,
            )
        ],
        ids,
    )
    topic = ctx.domain.replace("-", " ").replace("_", " ")
    return f"Literature survey: {topic} ({ctx.snapshot})", [overview, themes, comparison, open_q]


# ---------------------------------------------------------------- public API


def propose_structure(gset: GroundingSet, ctx: StepContext) -> ReportStructure:
    """Form-free structure at the first snapshot (no questions)."""
    if not gset.documents:
        raise ValueError(f"{ctx.domain} {ctx.snapshot}: empty grounding set, nothing to structure")
    build = _paper_structure if ctx.source_kind == "arxiv" else _filing_structure
    title, sections = build(gset, ctx)
    return ReportStructure.model_validate(
        {
            "title": title,
            "form_restricted": False,
            "nodes": _Ids.assign(sections),
            "provenance": [provenance("structure").model_dump()],
        }
    )


def resolve_sources(sources: list[str], title: str, gset: GroundingSet) -> list[str]:
    """Map prev doc_ids onto the new set: same doc_id, same slug without note/item numbers, or a
    document whose title matches `title`."""
    ids = [d.doc_id for d in gset.documents]
    keys = {i: _slug_key(i) for i in ids}
    out: list[str] = []
    for s in sources:
        if s in ids:
            out.append(s)
            continue
        k = _slug_key(s)
        hit = next((i for i in ids if keys[i] == k), None)
        if hit is None and sum(c.isalpha() for c in k) >= 10:  # fuzzy only for worded slugs, not paper ids
            best = max(ids, key=lambda i: (fuzz.ratio(keys[i], k), -ids.index(i)), default=None)
            if best is not None and fuzz.ratio(keys[best], k) >= 90:
                hit = best
        if hit is not None:
            out.append(hit)
    if not out and title and sources:
        hit = next((d.doc_id for d in gset.documents if titles_match(nice_title(d.title), title)), None)
        if hit is not None:
            out.append(hit)
    return list(dict.fromkeys(out))


def _slug_key(doc_id: str) -> str:
    return re.sub(r"^(?:note-\d+[a-z]?-|part-\d-item-\w+?-)", "", doc_id)


def _subsection_evidence(node: StructureNode, sources: list[str], gset: GroundingSet) -> bool:
    for s in sources:
        d = next(x for x in gset.documents if x.doc_id == s)
        if titles_match(nice_title(d.title), node.title) or any(
            titles_match(h, node.title) for h in headings_of(gset.texts[s])
        ):
            return True
    return False


def scoped_blocks(gset: GroundingSet, sources: list[str], title: str) -> list[Block]:
    """Blocks of the `sources` documents under the `## ` headings matching `title` (all their blocks
    when no heading matches): the evidence an element titled `title` draws on."""
    out: list[Block] = []
    for s in sources:
        if s not in gset.texts:
            continue
        parts = doc_parts(gset.texts[s])
        hit = [p for p in parts if p.heading and p.blocks and titles_match(p.heading, title)]
        out.extend(b for p in (hit or parts) for b in p.blocks)
    return out


def _leaf_evidence(node: StructureNode, sources: list[str], gset: GroundingSet, scope: str) -> bool:
    if not sources:
        return False
    if node.type not in ("table", "figure"):
        return True
    return any(b.kind == node.type for b in scoped_blocks(gset, sources, scope))


@dataclass(frozen=True)
class Dating:
    """prev's period (None: its title names no date) and the new one, for a form-restricted structure."""

    old: Period | None
    new: Period

    @classmethod
    def of(cls, prev: ReportStructure, gset: GroundingSet, ctx: StepContext) -> Dating:
        annual = ctx.category == "financial_annual"
        new = snapshot_period(ctx.snapshot, annual=annual, facts=gset.facts, texts=gset.texts.values())
        if new.end is None:
            return cls(None, new)  # a window: its titles name no date (the survey title is the proposal's)
        end = period_end_named(prev.title)
        return cls(new.at(end, annual) if end else None, new)

    def title(self, title: str) -> str:
        """A title kept from prev, for the new period."""
        return rewrite_title(title, self.old, self.new) if self.old is not None else title

    def form(self, title: str, which: Period | None) -> str:
        """`title` with its period phrases reduced to their kind (a year-to-date span of `which` as such):
        two editions' titles of one element have the same form."""
        out, at = [], 0
        for m in find_periods(title):
            kind, _, rest = m.label.partition(":")
            part = rest.rsplit(":", 1)[-1] if rest.count(":") else ""
            if kind == "E" and which is not None and which.end is not None:
                n = int(part[:-1])
                q = which.fiscal[1]
                part = "ytd" if not which.annual and q in (2, 3) and n == 3 * q else part
            out += [title[at : m.start], f" zzperiod{kind}{part[:1] if kind in 'FC' else part} "]
            at = m.end
        return norm("".join([*out, title[at:]]))

    def same_form(self, prev_title: str, cand_title: str) -> bool:
        """Titles equal but for their period phrases (prev's read for the old period, the candidate's
        for the new one)."""
        a = self.form(prev_title, self.old)
        return "zzperiod" in a and a == self.form(cand_title, self.new)


def _match(
    prev_child: StructureNode, cands: list[dict], used: set[int], gset: GroundingSet, dating: Dating
) -> int | None:
    free = [(i, c) for i, c in enumerate(cands) if i not in used]

    def same(title: str) -> bool:
        return titles_match(title, prev_child.title) or dating.same_form(prev_child.title, title)

    if prev_child.type in CONTAINERS:
        return next((i for i, c in free if c["type"] in CONTAINERS and same(c["title"])), None)
    same_type = [(i, c) for i, c in free if c["type"] == prev_child.type]
    hit = next((i for i, c in same_type if same(c["title"])), None)
    if hit is None:
        resolved = resolve_sources(prev_child.sources, prev_child.title, gset)
        hit = next((i for i, c in same_type if c["sources"] and c["sources"] == resolved), None)
    return hit


def _renumber(node: dict, new_id: str) -> dict:
    node = dict(node)
    node["id"] = new_id
    if node["type"] in CONTAINERS:
        node["children"] = [dict(c) for c in node["children"]]
        _Ids.children(node)
    return node


def _next_id(parent_id: str, taken: list[str], kind: str) -> str:
    if kind in CONTAINERS:
        nums = [int(m.group(1)) for t in taken if (m := re.fullmatch(re.escape(parent_id) + r"\.(\d+)", t))]
        return f"{parent_id}.{max(nums, default=0) + 1}"
    prefix = TYPE_PREFIX[kind]
    nums = [
        int(m.group(1)) for t in taken if (m := re.fullmatch(re.escape(parent_id) + rf"\.{prefix}(\d+)", t))
    ]
    return f"{parent_id}.{prefix}{max(nums, default=0) + 1}"


def _adapt_children(
    prev: StructureNode, cand: dict | None, gset: GroundingSet, taken: list[str], dating: Dating
) -> list[dict]:
    cands = cand["children"] if cand else []
    used: set[int] = set()
    out: list[dict] = []
    shared = Counter(s for c in prev.children if c.type in CONTAINERS for s in dict.fromkeys(c.sources))
    for child in prev.children:
        i = _match(child, cands, used, gset, dating)
        if i is not None:
            used.add(i)
            c = cands[i]
            node = {
                "id": child.id,
                "type": child.type,
                "title": _renewed_title(child.title, c["title"], dating),
                "objective": c["objective"],
                "questions": [],
                "sources": list(c["sources"]),
                "children": [],
            }
            if child.type in CONTAINERS:
                node["children"] = _adapt_children(child, c, gset, taken, dating)
            out.append(node)
            continue
        renewed = child.model_copy(update={"title": dating.title(child.title)})
        sources = resolve_sources(child.sources, child.title, gset)
        if child.type in CONTAINERS:
            own_docs = bool(child.sources) and all(shared[s] == 1 for s in child.sources)
            if not sources or not (own_docs or _subsection_evidence(renewed, sources, gset)):
                continue
            kids = _adapt_children(child, None, gset, taken, dating)
            if not any(n["type"] in LEAVES for n in _walk_dicts(kids)):
                continue
            out.append(_copy(renewed, sources, kids))
        elif _leaf_evidence(
            child, sources, gset, dating.title(prev.title) if prev.type == "subsection" else renewed.title
        ):
            out.append(_copy(renewed, sources, []))
    # additions: proposed children without counterpart, while below the proposal's container count
    n_cont = sum(1 for o in out if o["type"] in CONTAINERS)
    cap_cont = sum(1 for c in cands if c["type"] in CONTAINERS)
    for i, c in enumerate(cands):
        if i in used:
            continue
        if c["type"] in CONTAINERS:
            if n_cont >= cap_cont:
                continue
            n_cont += 1
        elif any(o["type"] == c["type"] for o in out):
            continue  # a leaf of this kind is already there
        new_id = _next_id(prev.id, taken, c["type"])
        taken.append(new_id)
        node = _renumber(c, new_id)
        taken.extend(n["id"] for n in _walk_dicts(node["children"]))
        out.append(node)
    return out


def _copy(node: StructureNode, sources: list[str], children: list[dict]) -> dict:
    return {
        "id": node.id,
        "type": node.type,
        "title": node.title,
        "objective": node.objective,
        "questions": [],
        "sources": sources,
        "children": children,
    }


def _renewed_title(old: str, new: str, dating: Dating) -> str:
    """Prev's title for the new period, unless the counterpart's differs from it only in its numbers
    (e.g. a fiscal year) or its period phrases ("First Quarter" for "Second Quarter"): then the
    counterpart's."""
    if old != new and (
        norm(re.sub(r"\d", "", old)) == norm(re.sub(r"\d", "", new)) or dating.same_form(old, new)
    ):
        return new
    return dating.title(old)


def _walk_dicts(nodes: list[dict]):
    for n in nodes:
        yield n
        yield from _walk_dicts(n.get("children", []))


def adapt_structure(prev: ReportStructure, gset: GroundingSet, ctx: StepContext) -> ReportStructure:
    """Form-restricted structure: prev's layout adapted to the evidence of `gset` (module docstring)."""
    proposal = propose_structure(gset, ctx)
    cand_sections = proposal.model_dump(mode="json")["nodes"]
    dating = Dating.of(prev, gset, ctx)
    taken = [n.id for n in prev.walk()]
    sections = []
    used: set[int] = set()
    for sec in prev.nodes:
        ci = next(
            (
                i
                for i, c in enumerate(cand_sections)
                if i not in used
                and (titles_match(c["title"], sec.title) or dating.same_form(sec.title, c["title"]))
            ),
            None,
        )
        cand = cand_sections[ci] if ci is not None else None
        if ci is not None:
            used.add(ci)
        kids = _adapt_children(sec, cand, gset, taken, dating)
        if not any(n["type"] in LEAVES for n in _walk_dicts(kids)):
            first = next((n for n in sec.children if n.type in LEAVES), None)
            leaf_id = first.id if first is not None else _next_id(sec.id, taken, "text")
            kids = [
                {
                    "id": leaf_id,
                    "type": "text",
                    "title": dating.title(first.title if first else sec.title),
                    "objective": first.objective if first else sec.objective,
                    "questions": [],
                    "sources": [],
                    "children": [],
                }
            ]
        srcs = list(dict.fromkeys(s for n in _walk_dicts(kids) for s in n["sources"]))
        sections.append(
            {
                "id": sec.id,
                "type": "section",
                "title": cand["title"]
                if cand and dating.same_form(sec.title, cand["title"])
                else dating.title(sec.title),
                "objective": cand["objective"] if cand else sec.objective,
                "questions": [],
                "sources": srcs,
                "children": kids,
            }
        )
    return ReportStructure.model_validate(
        {
            "title": proposal.title,
            "form_restricted": True,
            "nodes": sections,
            "provenance": [provenance("structure").model_dump()],
        }
    )
