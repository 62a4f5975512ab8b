"""Offline `questions` role: guiding questions built from the salient facts of each element's sources
(SPEC §2.5). Deterministic templates over the grounding documents; no model, no randomness.

**Candidates per leaf**, from its *scope* (the leaf's `sources`, narrowed to the `## ` part whose heading
matches the enclosing subsection's title, or the leaf's own title, when there is one):
- filings, tables: for every pipe table, line items are rows with a label and a number; the 3 with
  the largest absolute value in the first value column (header without "change"/"%") give
  "What was <item> — <column header>?" and, when a second value column exists and both headers name
  periods, "How did <item> change from <column 2> to <column 1>?" (column headers = the table's
  header rows joined top-down, spanned labels carried right, units "(in millions)" dropped; a label
  repeated in the table is qualified by its group row, e.g. "Products (Cost of sales)"). Tables are
  interleaved round-robin;
- filings, prose: sentences holding a number whose subject precedes a reporting verb ("Americas net
  sales increased ...") give "What drove the change in <subject>?" or "What does the filing report for
  <subject>?"; sub-headings give "What does the filing report about <heading>?";
- papers: per paper (short title = the part before a colon, or its first 8 words, quoted when longer
  than 3 words) "What method does <paper> use?", "What dataset does <paper> use?" (when its text
  names data, catalogues, simulations, surveys ...), "What problem does <paper> address?", "What does
  <paper> report for the <metric>?" (a noun phrase before "of/is/was/reaches ... <number>" in its
  abstract, results or conclusion sections), "What does Table N of <paper> show?", "What open
  questions or future work does <paper> identify?" ..., chosen by the element (problem/method,
  results, table, figure, overview, comparison, open questions).

**Per node**: a subsection merges its leaves' candidates, a section its children's, round-robin (first
candidate of every child before the second of any), duplicates dropped. Sections get 5-8 questions
(target = 2 + number of leaves, within 5..8), generic questions about the section title completing
one with fewer than 5 candidates; subsections and leaves get 1-3 (a generic "What does the filing
report about <title>?" when nothing specific is found). Share counts and per-share rows are skipped
when ranking line items (their units differ from the money rows).

**With `prev`** (form-restricted): prev's questions for the same node id come first when every
content word and number of the question still occurs in the node's new sources (so a question about a
period no longer reported is dropped) and every entity it names (`tasks.markdown.entities`: quoted
titles, names, dates and years, capitalised names) is named there too: for papers by the titles of the
node's papers, since every paper question is about one paper ("What problem does BERT address?" is
not renewed for a window whose papers only cite BERT); for filings by the node's source texts. The
rest is filled with new candidates, those whose subject prev already asked about first.
Output order is fully deterministic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import zip_longest

from schemas.structure import CONTAINERS, LEAVES, ReportStructure, StructureNode
from tasks.ground.load import GroundingSet
from tasks.llm.backend import StepContext
from tasks.markdown.entities import Haystack, absent_entities
from tasks.markdown.periods import find_periods
from tasks.markdown.tables import markdown_tables
from tasks.markdown.text import split_sentences, terms
from tasks.sources import source_kind
from tasks.synthesize.offline.structure import (
    caption,
    paper_parts,
    provenance,
    scoped_blocks,
    short_title,
    titles_match,
)
from tasks.synthesize.retrieve import Block, parse_blocks

SECTION_MIN, SECTION_MAX = 5, 8
SUBSECTION_MAX = 3
LEAF_MAX = 3
TABLE_ITEMS = 3

_TEMPLATE_WORDS = frozenset(
    terms(
        "what was were for how did change from to does do filing report reports reported about drove amount "
        "amounts which main points makes compared prior period factors management cite regarding risks "
        "uncertainties mention conclusions draw problem address method use dataset data contribution key "
        "result results open questions future work identify limitations acknowledge approaches approach "
        "differ show illustrate paper list listed under lists principal"
    )
)
_VALUE = re.compile(r"-?\(?\$?\s*-?\d[\d,]*(?:\.\d+)?")
_SUBJECT = re.compile(
    r"^(?:The |Our )?(?P<subj>[A-Z][^,;:()“”\"]{2,70}?)\s+"
    r"(?P<verb>increased|decreased|grew|declined|rose|fell|was|were|totaled|totalled|remained|represented|"
    r"amounted|included)\b"
)
_SHARES = re.compile(r"\bshares?\b|per[- ]share", re.IGNORECASE)
_NOT_A_TOPIC = re.compile(r"exhibit|schedule [ivx]+\b|signatures?|index|table of contents", re.IGNORECASE)
_CHANGE_VERBS = {"increased", "decreased", "grew", "declined", "rose", "fell"}
_BAD_SUBJECT_START = re.compile(
    r"^(?:No|Not|None|During|In|As|For|On|At|Beginning|Based|This|These|That|Those|It|We|There|If|When|While|"
    r"Although|Because|Due|Such|Each|Any|All|Some|Other|Certain|Of|From|With|To|By|After|Before)\b"
)
_UNITS_IN_HEADER = re.compile(r"\(\s*\$?\s*in\s+[a-z]+[^)]*\)|\(\s*in\s+[^)]*\)", re.IGNORECASE)
_DATA = re.compile(
    r"\b(?:data ?sets?|catalog(?:ue)?s?|GWTC-?\d*|benchmarks?|corpus|corpora|surveys?|light curves?|spectra|"
    r"observations?|simulations?|samples?)\b",
    re.IGNORECASE,
)
_METRIC = re.compile(
    r"\b(?:the|a|an|our)\s+(?P<m>[a-z][a-z\-]+(?:\s+[a-z][a-z\-]+){0,3})\s+"
    r"(?:of|is|are|was|were|reaches|reached|improves?|increases?|decreases?|drops?)\s+"
    r"(?:by\s+|to\s+|about\s+|approximately\s+|roughly\s+|only\s+|~\s*|\$\s*)?[~≈<>]?\s*\d"
)
_RESULT_LEAF = re.compile(r"result|finding|evaluation|experiment|performance", re.IGNORECASE)
_OPEN = re.compile(r"open|future|limitation|question|outlook|challenge", re.IGNORECASE)
_COMPARE = re.compile(r"compar|contrast|versus|approaches", re.IGNORECASE)


@dataclass(frozen=True)
class Candidate:
    text: str
    subject: str  # what the question is about (line item, heading, paper short title)


# ---------------------------------------------------------------- tables


def _number(cell: str) -> float | None:
    m = _VALUE.search(cell.replace("\u2212", "-"))
    if not m:
        return None
    raw = m.group(0)
    neg = "(" in raw or raw.lstrip().startswith("-")
    digits = re.sub(r"[^\d.]", "", raw)
    try:
        v = float(digits)
    except ValueError:
        return None
    return -v if neg else v


def _header_rows(grid: list[list[str]]) -> int:
    n = 1  # the Markdown header row
    while n < len(grid) and not grid[n][0].strip():
        n += 1
    return n


def _column_headers(grid: list[list[str]], n_header: int) -> list[str]:
    width = max(len(r) for r in grid)
    heads = [""] * width
    for r, row in enumerate(grid[:n_header]):
        carry = ""
        cells = list(row) + [""] * (width - len(row))
        for j in range(1, width):
            text = cells[j].strip()
            if text:
                carry = text
            elif r < n_header - 1:  # spanned labels of upper header rows cover the columns to the right
                text = carry
            if text:
                heads[j] = f"{heads[j]} {text}".strip()
    return [" ".join(_UNITS_IN_HEADER.sub("", h).split()) for h in heads]


def table_questions(table_text: str) -> list[Candidate]:
    """Value and change questions for the largest line items of the pipe tables in `table_text`."""
    out: list[list[Candidate]] = []
    for grid in markdown_tables(table_text):
        if len(grid) < 2 or max(len(r) for r in grid) < 2:
            continue
        nh = _header_rows(grid)
        heads = _column_headers(grid, nh)
        value_cols = [
            j for j, h in enumerate(heads) if j > 0 and not re.search(r"change|%", h, re.IGNORECASE)
        ]
        items: list[tuple[float, int, str, list[str]]] = []
        group = ""
        labels = [r[0].strip() for r in grid[nh:]]
        for i, row in enumerate(grid[nh:]):
            label = row[0].strip()
            cells = [row[j] if j < len(row) else "" for j in value_cols]
            nums = [_number(c) for c in cells]
            if not label:
                continue
            if all(v is None for v in nums):
                group = label.rstrip(":").strip()
                continue
            first = next((k for k, v in enumerate(nums) if v is not None), None)
            if first is None:
                continue
            name = re.sub(r"(?:\s*\(\d{1,2}\))+\s*$", "", label).rstrip(":").strip()
            if _SHARES.search(name) or _SHARES.search(group):
                continue  # share counts and per-share amounts are not comparable with the money rows
            if labels.count(label) > 1 and group:
                name = f"{name} ({group})"
            cols = [heads[value_cols[k]] for k in range(first, len(value_cols)) if nums[k] is not None]
            items.append((abs(nums[first] or 0.0), i, name, cols))
        qs: list[Candidate] = []
        for _, _, name, cols in sorted(items, key=lambda x: (-x[0], x[1]))[:TABLE_ITEMS]:
            if cols and cols[0]:
                # the dash keeps the row label and the column header apart: joined by "for", two
                # labels read as one made-up name ("Total for As of June 30") to the entity check
                qs.append(Candidate(f"What was {name} — {cols[0]}?", name))
                if len(cols) > 1 and cols[1] and cols[1] != cols[0] and _period(cols[0]) and _period(cols[1]):
                    qs.append(Candidate(f"How did {name} change from {cols[1]} to {cols[0]}?", name))
            else:
                qs.append(Candidate(f"What amount does the filing report for {name}?", name))
        out.append(qs)
    return _round_robin(out)


def _period(header: str) -> bool:
    """A column header naming a period: only between two periods does "how did it change" make sense
    (two segments or two measures side by side are not a change)."""
    return bool(find_periods(header)) or re.fullmatch(r"(?:FY\s*)?(?:19|20)\d\d", header.strip()) is not None


# ---------------------------------------------------------------- prose


def _case(subject: str, scope_lower_words: set[str]) -> str:
    first, _, rest = subject.partition(" ")
    if first[1:].islower() and first.lower() in scope_lower_words:
        return (first.lower() + " " + rest).strip()
    return subject


def prose_questions(blocks: list[Block], skip_headings: tuple[str, ...] = ()) -> list[Candidate]:
    """Sentence questions first (document order), then sub-heading questions."""
    words = {w for b in blocks for w in re.findall(r"\b[a-z][a-z\-]+\b", b.text)}
    out: list[Candidate] = []
    heads: list[Candidate] = []
    for b in blocks:
        if b.kind == "heading":
            h = b.title
            if (
                1 <= len(h.split()) <= 8
                and not _NOT_A_TOPIC.search(h)
                and not any(titles_match(h, x) for x in skip_headings)
            ):
                heads.append(Candidate(f"What does the filing report about {h}?", h))
            continue
        if b.kind not in ("text", "list") or b.code:
            continue
        for sent in split_sentences(b.text.replace("\n", " ")):
            if not re.search(r"\d", sent):
                continue
            m = _SUBJECT.match(sent)
            if not m:
                continue
            subj = m.group("subj").strip()
            if _BAD_SUBJECT_START.match(subj) or not 1 <= len(subj.split()) <= 8 or re.search(r"\d", subj):
                continue
            subj = _case(subj, words)
            if m.group("verb") in _CHANGE_VERBS:
                out.append(Candidate(f"What drove the change in {subj}?", subj))
            else:
                out.append(Candidate(f"What does the filing report for {subj}?", subj))
    return out + heads


def _scope(gset: GroundingSet, node: StructureNode, parent: StructureNode | None) -> list[Block]:
    title = parent.title if parent is not None and parent.type == "subsection" else node.title
    return scoped_blocks(gset, node.sources, title)


def _with_headings(gset: GroundingSet, node: StructureNode, parent: StructureNode | None) -> list[Block]:
    """Scope blocks plus the (pseudo-)headings inside the scope, in order."""
    title = parent.title if parent is not None and parent.type == "subsection" else node.title
    scope = {b.text for b in scoped_blocks(gset, node.sources, title)}
    out = []
    for s in node.sources:
        blocks = parse_blocks(gset.texts.get(s, ""))
        for i, b in enumerate(blocks):
            if b.kind != "heading" and b.text in scope:
                out.append(b)
            elif b.kind == "heading" and b.level >= 2 and i + 1 < len(blocks) and blocks[i + 1].text in scope:
                out.append(b)
    return out


def filing_leaf_candidates(
    gset: GroundingSet, node: StructureNode, parent: StructureNode | None
) -> list[Candidate]:
    blocks = _with_headings(gset, node, parent)
    tables = "\n\n".join(b.text for b in blocks if b.kind == "table")
    if node.type == "table":
        return table_questions(tables)
    if node.type == "list":
        heads = [
            h
            for h, nxt in zip(blocks, blocks[1:], strict=False)
            if h.kind == "heading" and nxt.kind == "list"
        ]
        qs = [Candidate(f"Which risks does the filing list under {h.title}?", h.text) for h in heads]
        return qs + prose_questions([b for b in blocks if b.kind != "heading"])
    skip = (node.title,) + ((parent.title,) if parent is not None else ())
    return prose_questions(blocks, skip) + table_questions(tables)[:2]


# ---------------------------------------------------------------- papers


@dataclass
class _Paper:
    doc_id: str
    short: str
    data: bool
    metrics: list[str]
    tables: dict[str, str]  # short caption title -> label
    figures: dict[str, str]


def _paper_info(gset: GroundingSet, doc_id: str) -> _Paper:
    doc = next(d for d in gset.documents if d.doc_id == doc_id)
    parts = paper_parts(gset.texts[doc_id])
    body = [
        p for p in parts if p.heading and not re.match(r"(?i)references|bibliography|acknowledg", p.heading)
    ]
    text = " ".join(b.text for p in body for b in p.prose())
    results = [
        p for p in body if re.search(r"(?i)abstract|result|conclu|summary|discussion", p.heading or "")
    ]
    metrics: list[str] = []
    for p in results:
        for b in p.prose():
            for m in _METRIC.finditer(b.text):
                phrase = m.group("m")
                if all(t in _TEMPLATE_WORDS for t in terms(phrase)) or not terms(phrase):
                    continue
                if phrase not in metrics:
                    metrics.append(phrase)
    tables, figures = {}, {}
    for p in body:
        for b in p.blocks:
            if b.kind in ("table", "figure"):
                label, title, _ = caption(b, b.kind)
                if label and title:
                    (tables if b.kind == "table" else figures).setdefault(title, label)
    short = short_title(doc.title)
    if len(short.split()) > 3:
        short = f"“{short}”"
    return _Paper(doc_id, short, bool(_DATA.search(text)), metrics[:2], tables, figures)


def paper_leaf_candidates(
    papers: dict[str, _Paper], node: StructureNode, section: StructureNode
) -> list[Candidate]:
    ps = [papers[s] for s in node.sources if s in papers]
    if not ps:
        return []
    if len(ps) == 1:
        p = ps[0]
        if node.type in ("table", "figure"):
            label = (p.tables if node.type == "table" else p.figures).get(node.title, f"the main {node.type}")
            verb = "show" if node.type == "table" else "illustrate"
            return [Candidate(f"What does {label} of {p.short} {verb}?", p.short)]
        if _RESULT_LEAF.search(node.title):
            qs = [Candidate(f"What does {p.short} report for the {m}?", m) for m in p.metrics]
            return qs + [Candidate(f"What are the main results of {p.short}?", p.short)]
        qs = [Candidate(f"What method does {p.short} use?", p.short)]
        if p.data:
            qs.append(Candidate(f"What dataset does {p.short} use?", p.short))
        return qs + [Candidate(f"What problem does {p.short} address?", p.short)]
    where = f"{section.title} {node.title}"
    per: list[list[Candidate]] = []
    for p in ps:
        if _OPEN.search(where):
            per.append(
                [
                    Candidate(f"What open questions or future work does {p.short} identify?", p.short),
                    Candidate(f"What limitations does {p.short} acknowledge?", p.short),
                ]
            )
        elif _COMPARE.search(where):
            per.append(
                [
                    Candidate(f"What approach does {p.short} take?", p.short),
                    Candidate(f"What is the key result of {p.short}?", p.short),
                ]
            )
        else:
            per.append(
                [
                    Candidate(f"What problem does {p.short} address?", p.short),
                    Candidate(f"What is the main contribution of {p.short}?", p.short),
                ]
            )
    qs = _round_robin(per)
    if _COMPARE.search(where) and len(ps) >= 2:
        qs.insert(
            0, Candidate(f"How do the approaches of {ps[0].short} and {ps[1].short} differ?", ps[0].short)
        )
    return qs


# ---------------------------------------------------------------- assembly


def _round_robin(lists: list[list[Candidate]]) -> list[Candidate]:
    out, seen = [], set()
    for row in zip_longest(*lists):
        for c in row:
            if c is not None and c.text.lower() not in seen:
                seen.add(c.text.lower())
                out.append(c)
    return out


def _generic(title: str, paper: bool) -> list[Candidate]:
    t = " ".join(w.lower() if w[:1].isupper() and w[1:].islower() else w for w in title.split())
    if paper:
        texts = [
            f"What are the main findings reported under {t}?",
            f"Which methods are discussed under {t}?",
            f"How do the papers differ with respect to {t}?",
            f"What evidence supports the claims made under {t}?",
            f"What open issues remain regarding {t}?",
        ]
    else:
        texts = [
            f"What are the main points the filing makes about {t}?",
            f"How did {t} change compared with the prior period?",
            f"What factors does management cite regarding {t}?",
            f"What risks or uncertainties does the filing mention regarding {t}?",
            f"What conclusions does the filing draw about {t}?",
        ]
    return [Candidate(x, title) for x in texts]


def _still_valid(question: str, vocab: set[str]) -> bool:
    words = [t for t in terms(question) if t not in _TEMPLATE_WORDS]
    return bool(words) and all(t in vocab for t in words)


class _Builder:
    def __init__(
        self, structure: ReportStructure, gset: GroundingSet, prev: ReportStructure | None, paper: bool
    ):
        self.gset = gset
        self.paper = paper
        self.prev = {n.id: list(n.questions) for n in prev.walk()} if prev is not None else {}
        self.papers = {d.doc_id: _paper_info(gset, d.doc_id) for d in gset.documents} if paper else {}
        self._vocab: dict[tuple[str, ...], set[str]] = {}
        self._named: dict[tuple[str, ...], Haystack] = {}

    def vocab(self, sources: list[str]) -> set[str]:
        key = tuple(sources) or tuple(d.doc_id for d in self.gset.documents)
        if key not in self._vocab:
            self._vocab[key] = set(terms("\n".join(self.gset.texts.get(s, "") for s in key)))
        return self._vocab[key]

    def still_named(self, question: str, sources: list[str]) -> bool:
        """No entity of `question` absent from the node's sources (module docstring: papers by title)."""
        key = tuple(sources) or tuple(d.doc_id for d in self.gset.documents)
        if key not in self._named:
            if self.paper:
                titles = {d.doc_id: d.title for d in self.gset.documents}
                self._named[key] = Haystack(titles.get(s, "") for s in key)
            else:
                self._named[key] = Haystack(self.gset.texts.get(s, "") for s in key)
        return not absent_entities(question, self._named[key])

    def leaf(self, node: StructureNode, parent: StructureNode, section: StructureNode) -> list[Candidate]:
        if self.paper:
            return paper_leaf_candidates(self.papers, node, section)
        return filing_leaf_candidates(self.gset, node, parent)

    def visit(
        self, node: StructureNode, parent: StructureNode | None, section: StructureNode
    ) -> tuple[dict, list]:
        """(node dict with questions, its candidate list)."""
        if node.type in LEAVES:
            cands = self.leaf(node, parent or section, section)
            children: list[dict] = []
        else:
            results = [self.visit(c, node, section) for c in node.children]
            children = [r[0] for r in results]
            cands = _round_robin([r[1] for r in results])
        if node.type == "section":
            n_leaves = sum(1 for n in node.walk() if n.type in LEAVES)
            lo, hi = SECTION_MIN, max(SECTION_MIN, min(SECTION_MAX, 2 + n_leaves))
        elif node.type in CONTAINERS:
            lo, hi = 0, SUBSECTION_MAX
        else:
            lo, hi = 0, LEAF_MAX
        srcs = list(dict.fromkeys(s for n in node.walk() for s in n.sources))
        questions = self.select(node, cands, srcs, lo, hi)
        data = node.model_dump(mode="json")
        data["questions"] = questions
        data["children"] = children
        return data, cands

    def select(
        self, node: StructureNode, cands: list[Candidate], sources: list[str], lo: int, hi: int
    ) -> list[str]:
        prev = self.prev.get(node.id, [])
        vocab = self.vocab(sources)
        out = [q for q in prev if _still_valid(q, vocab) and self.still_named(q, sources)][:hi]
        asked = " ".join(prev).lower()
        ordered = [c for c in cands if c.subject.lower() in asked] + [
            c for c in cands if c.subject.lower() not in asked
        ]
        if len(out) < lo:
            ordered += _generic(node.title, self.paper)
        elif not cands and not out and node.type != "section":  # every element gets at least one question
            about = "the papers report" if self.paper else "the filing report"
            ordered = [Candidate(f"What does {about} about {node.title}?", node.title)]
            lo = 1
        seen = {q.lower() for q in out}
        for c in ordered:
            if len(out) >= hi or (len(out) >= lo and c in _generic(node.title, self.paper)):
                break
            if c.text.lower() not in seen:
                seen.add(c.text.lower())
                out.append(c.text)
        return out


def add_questions(
    structure: ReportStructure, gset: GroundingSet, prev: ReportStructure | None, ctx: StepContext
) -> ReportStructure:
    """Structure with 5-8 questions per section and 1-3 per subsection and leaf (module docstring)."""
    layout = source_kind(ctx.source_kind).layout
    b = _Builder(structure, gset, prev, layout == "papers")
    nodes = [b.visit(sec, None, sec)[0] for sec in structure.nodes]
    if layout == "documents":
        nodes = [_about_documents(n) for n in nodes]
    prov = [p.model_dump() for p in structure.provenance]
    mine = provenance("questions").model_dump()
    if mine not in prov:
        prov.append(mine)
    return ReportStructure.model_validate(
        {
            "title": structure.title,
            "form_restricted": structure.form_restricted,
            "nodes": nodes,
            "provenance": prov,
        }
    )


# The filing wording of the templates, said of the documents of a kind that is neither filings nor papers.
_DOCUMENTS_WORDING = (
    ("does the filing report", "do the documents report"),
    ("the filing makes", "the documents make"),
    ("does management cite", "do the documents cite"),
    ("does the filing mention", "do the documents mention"),
    ("does the filing draw", "do the documents draw"),
    ("does the filing list", "do the documents list"),
)


def _about_documents(node: dict) -> dict:
    def reword(q: str) -> str:
        for old, new in _DOCUMENTS_WORDING:
            q = q.replace(old, new)
        return q

    return {
        **node,
        "questions": [reword(q) for q in node.get("questions", [])],
        "children": [_about_documents(c) for c in node.get("children", [])],
    }


__all__ = ["Candidate", "add_questions", "prose_questions", "table_questions"]
