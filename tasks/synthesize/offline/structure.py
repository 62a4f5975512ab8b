"""Offline `structure` role: a report tree proposed from, or adapted to, a grounding set (SPEC §2.4).

Deterministic rules over the grounding documents' metadata and Markdown headings; no model, no
randomness. The gold reports they lead to are *extractive baselines*; real builds use an LLM endpoint.

**Form-free (t1)**: one builder per document layout of a source kind (`tasks.sources`), each in a module
of its own, each deriving the plan from the domain's own documents: a filing's Items, statements and
notes under their own headings (layout "filing": EDGAR) in `structure_filing.py`, themes clustered from
the window's papers ("papers": arXiv) in `structure_paper.py`, any other documents in
`structure_documents.py`; what they share (reading documents, matching titles, building nodes and ids)
in `structure_common.py`.

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
from dataclasses import dataclass

from rapidfuzz import fuzz

from schemas.structure import CONTAINERS, LEAVES, ReportStructure, StructureNode
from tasks.ground.load import GroundingSet
from tasks.llm.backend import StepContext
from tasks.markdown.periods import Period, find_periods, period_end_named, rewrite_title, snapshot_period
from tasks.sources import source_kind
from tasks.synthesize.offline.structure_common import (
    ALGORITHM_VERSION,
    LEAD_MAX_WORDS,
    TYPE_PREFIX,
    Part,
    _Ids,
    doc_parts,
    headings_of,
    lead_sentence,
    nice_title,
    norm,
    numeric_cells,
    provenance,
    titles_match,
)
from tasks.synthesize.offline.structure_documents import documents_structure
from tasks.synthesize.offline.structure_filing import (
    MDNA_SUBSECTIONS,
    MDNA_TABLES,
    MIN_NOTE_PROSE_WORDS,
    MIN_PROSE_WORDS,
    _filing_structure,
    units_line,
)
from tasks.synthesize.offline.structure_paper import (
    FRAMING,
    _paper_structure,
    caption,
    paper_parts,
    short_title,
    window_theme_namer,
)
from tasks.synthesize.retrieve import Block

# The names this module held before the kinds moved out, still importable from here.
__all__ = [
    "ALGORITHM_VERSION",
    "LEAD_MAX_WORDS",
    "MDNA_SUBSECTIONS",
    "MDNA_TABLES",
    "MIN_NOTE_PROSE_WORDS",
    "MIN_PROSE_WORDS",
    "TYPE_PREFIX",
    "Dating",
    "Part",
    "adapt_structure",
    "caption",
    "doc_parts",
    "headings_of",
    "lead_sentence",
    "nice_title",
    "norm",
    "numeric_cells",
    "paper_parts",
    "propose_structure",
    "provenance",
    "resolve_sources",
    "scoped_blocks",
    "short_title",
    "titles_match",
    "units_line",
]


_BUILDERS = {"filing": _filing_structure, "papers": _paper_structure, "documents": documents_structure}


def propose_structure(
    gset: GroundingSet, ctx: StepContext, prev: ReportStructure | None = None
) -> ReportStructure:
    """Form-free structure at the first snapshot (no questions); with `prev` (what a form-restricted
    step adapts), papers are grouped under prev's themes, which a new window's papers do not name."""
    if not gset.documents:
        raise ValueError(f"{ctx.domain} {ctx.snapshot}: empty grounding set, nothing to structure")
    layout = source_kind(ctx.source_kind).layout
    if layout == "papers" and prev is not None:
        title, sections = _paper_structure(gset, ctx, [n.title for n in prev.nodes if n.title not in FRAMING])
    else:
        title, sections = _BUILDERS[layout](gset, ctx)
    return ReportStructure.model_validate(
        {
            "title": title,
            "form_restricted": False,
            "nodes": _Ids.assign(sections),
            "provenance": [provenance("structure").model_dump()],
        }
    )


# ---------------------------------------------------------------- form-restricted: prev adapted


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
    proposal = propose_structure(gset, ctx, prev)
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
    if source_kind(ctx.source_kind).layout == "papers":
        sections = _renamed_themes(sections, gset)
    return ReportStructure.model_validate(
        {
            "title": proposal.title,
            "form_restricted": True,
            "nodes": sections,
            "provenance": [provenance("structure").model_dump()],
        }
    )


def _renamed_themes(sections: list[dict], gset: GroundingSet) -> list[dict]:
    """A window's themes keep their place and layout; a theme keeps prev's title while each of its keywords
    occurs in the papers it holds now, else it is named by them (the Overview and Open Questions frame
    keeps its titles); a theme holding no paper of the new window is dropped (its title names only the
    earlier window's work)."""
    papers = {d.doc_id for d in gset.documents}
    name = window_theme_namer(gset)
    out = []
    for sec in sections:
        if sec["title"] in FRAMING:  # the survey's frame keeps its titles
            out.append(sec)
            continue
        held = [s for s in sec["sources"] if s in papers]
        if not held:
            continue
        text = " ".join(gset.texts.get(s, "") for s in held).lower()
        words = [w for w in re.split(r", | and ", sec["title"]) if w]
        if all(re.search(rf"\b{re.escape(w.lower())}", text) for w in words):
            out.append(sec)  # prev's title is still true of the papers the theme holds: the form keeps it
        else:
            out.append({**sec, "title": name(held)})
    return out
