"""Offline `fill` role: extractive content for one leaf placeholder from its retrieved passages
(SPEC §2.7). Nothing is generated: every sentence, list item, table and figure line is copied from the
grounding documents in its original wording, so no number is ever invented or altered. The gold
reports this produces are *extractive baselines*; real builds use an LLM endpoint.

- **text**: only passages from the node's own `sources` are used when any is among the retrieved ones
  (all of them otherwise), and of those only passages scoring at least 60% of the best retrieval score
  of their document (of all passages, in the fallback). They are read in retrieval order (most relevant
  first); a sentence is kept when its query-term score (terms of the title, objective, questions and
  ancestors' titles, `tasks.synthesize.retrieve.node_query`) reaches 30% of the best sentence's, unless
  it has under 5 words, is forward-looking-statement boilerplate, or is mostly math; code fences and
  `$$` equation blocks are never quoted. Kept sentences are taken until the budget is spent: 220
  o200k_base tokens, plus 80 per additional source document (at most 600); with several sources each
  document first gets an equal share, then the rest goes to the remaining sentences. The kept
  sentences of one passage, in their original order, form one paragraph.
- **table**: the first retrieved table passage from the node's sources (else the first table passage)
  not yet placed in the report, copied verbatim with its units/caption line. A table leaf over several
  sources (a survey's comparison table) becomes a grid with one row per source document: its title (from
  the structure), the best "approach" and the best "result" sentence of that document's passages (a
  sentence not yet placed in the report first; then 3 points per strong cue such as "we present"/"we
  find", 1 per weak cue such as "method"/"improves"/"20%", plus a quarter of the query-term score; ties
  go to the earlier passage), copied verbatim ('|' escaped). No cell is empty: a row whose passages do
  not give a value is left out, and of the columns (approach, result) those that keep the most filled
  cells are shown (both unless one alone keeps more; no "not found" text). Without a table
  passage, or with no complete row, the text rule applies.
- **figure**: the first figure passage not yet placed (the `![...](...)` line and its caption), verbatim
  (none left: the text rule); for a paper, a link to an anchor of the paper (`S5.F3`, not a file) is
  dropped when the caption follows it, else its alt text is the caption (cleaned).
- **list**: items of list passages, then relevant sentences, as `- ` items (at most 8, same budget).

**Papers** (a kind whose layout is "papers": arXiv): a sentence must make sense outside its paper. Inline
footnotes are cut out of paragraphs, and every sentence goes through
`tasks.synthesize.offline.clean.clean_sentence` (citation keys and reference parentheticals removed; a
sentence with a bare key, a cross-reference such as "in Section 4" / "Table 2 shows" / "as shown
above", a trailing ':' or a licence line is not used); captions and intro/footnote paragraphs of
table and figure passages keep their label and their clean sentences (`clean_caption`). Filings are
not cleaned.

No sentence, table or figure is placed twice in one report (filings and papers): `fill` takes `used`,
the keys of what earlier placeholders hold (filled in outline order by
`tasks.synthesize.fill.fill_report`); a sentence or block sharing a key with it is skipped, and the
ones placed are added. A sentence's keys are its whitespace-collapsed text and each piece of it between
sentence-ending marks with 5 words or more; a table's or figure's key is its whole text. The report
pass after it (`tasks.synthesize.tidy`) removes what is still repeated and puts a filing's text in the
third person.

The output never contains a Markdown heading line (a line starting with '#' becomes bold text) nor the
string '<!-- FILL'. With no usable passage the content is the fixed sentence `NO_EVIDENCE` (4 words:
never a repeat).
"""

from __future__ import annotations

import re

from schemas.structure import ReportStructure, StructureNode
from tasks.llm.backend import Passage, StepContext
from tasks.markdown.document import heading_of, is_figure, is_table_row
from tasks.markdown.text import split_sentences, terms
from tasks.sources import source_kind
from tasks.synthesize.offline.clean import clean_caption, clean_sentence, strip_footnotes
from tasks.synthesize.retrieve import node_query, node_sources
from tasks.synthesize.tidy import EMPTY, image_link, is_file_target
from tasks.tokens import count_tokens

NO_EVIDENCE = EMPTY  # 4 words: two sections without evidence never make a repeat
TEXT_BUDGET = 220
EXTRA_PER_SOURCE = 80
MAX_BUDGET = 600
LIST_ITEMS = 8
MIN_WORDS = 5
MIN_RELATIVE_SCORE = 0.3
MIN_RELATIVE_PASSAGE = 0.6
_SKIP = Passage("", "", "heading", 0.0, 0)

_FIGURE_LABEL = re.compile(r"^(?:Figure|FIGURE|Fig\.)\s*[A-Z]?\d+[a-z]?")
_ITEM = re.compile(r"^\s{0,3}(?:[-*+]|\d{1,3}[.)])\s+")
_BOILERPLATE = re.compile(r"forward-looking statements?|incorporated (?:herein )?by reference", re.IGNORECASE)
# (strong cue, weak cue) pairs: a strong cue scores 3, a weak one 1
_APPROACH = (
    re.compile(
        r"\b(?:we (?:present|propose|develop|introduce|describe|construct|build)|"
        r"in this (?:paper|work|study),? we|here,? we|"
        r"this (?:paper|work) (?:presents|introduces|proposes))\b",
        re.IGNORECASE,
    ),
    re.compile(
        r"\b(?:we (?:use|apply|employ|perform|adopt)|"
        r"our (?:method|approach|framework|model|pipeline|code|package)|"
        r"method|approach|framework|algorithm|technique|pipeline|package)\b",
        re.IGNORECASE,
    ),
)
_RESULT = (
    re.compile(
        r"\b(?:we (?:find|show|demonstrate|obtain|measure|detect|infer|recover|confirm)|find that|show that|"
        r"results? (?:show|indicate|suggest)|we conclude)\b",
        re.IGNORECASE,
    ),
    re.compile(
        r"\b(?:consistent with|constrain\w*|improv\w*|outperform\w*|reduc\w*|increas\w*|faster|accura\w*|"
        r"\d+(?:\.\d+)?\s*(?:%|per ?cent|times))",
        re.IGNORECASE,
    ),
)


def _budget(node: StructureNode, structure: ReportStructure | None) -> int:
    n = max(1, len(node_sources(node, structure)))
    return min(MAX_BUDGET, TEXT_BUDGET + EXTRA_PER_SOURCE * (n - 1))


def _usable(p: Passage) -> bool:
    t = p.text.lstrip()
    return p.kind in ("text", "list") and not t.startswith("```") and not t.startswith("$$")


def _units(p: Passage, paper: bool = False) -> list[str]:
    """Sentences of a text passage, or the items (marker stripped) of a list passage, verbatim; for a
    paper (`paper`), footnotes cut out and each sentence through `clean_sentence` (None dropped)."""
    if p.kind == "list":
        out = [_ITEM.sub("", ln).strip() for ln in p.text.splitlines() if _ITEM.match(ln)]
    else:
        out = []
        for para in re.split(r"\n\s*\n", p.text):
            para = " ".join(para.split("\n"))
            out.extend(split_sentences(strip_footnotes(para) if paper else para))
    if paper:
        out = [c for c in map(clean_sentence, out) if c]
    return out


_PIECE = re.compile(r"(?<=[.!?])[\"”’)\]]*\s+(?=[\"“(\[]?[A-Z0-9])")


def _keys(unit: str) -> set[str]:
    """What makes a unit a repeat: its whitespace-collapsed text and that of every piece of it between
    sentence-ending marks (with 5 words or more), so a sentence split differently elsewhere still counts."""
    text = " ".join(unit.split())
    return {text} | {p for p in (x.strip() for x in _PIECE.split(text)) if len(p.split()) >= MIN_WORDS}


def _good(sentence: str) -> bool:
    if len(sentence.split()) < MIN_WORDS or _BOILERPLATE.search(sentence):
        return False
    math = sum(len(m) for m in re.findall(r"\$[^$]*\$", sentence))
    return math <= 0.5 * len(sentence)


def _score(sentence: str, query: dict[str, float]) -> float:
    return sum(query.get(t, 0.0) for t in dict.fromkeys(terms(sentence)))


def _select(
    node: StructureNode,
    structure: ReportStructure | None,
    passages: list[Passage],
    max_units: int | None = None,
    used: set[str] | None = None,
    paper: bool = False,
) -> list[tuple[int, list[str]]]:
    """[(passage index, kept units in original order)] in passage order, within the token budget; a unit
    sharing a key with `used` (units placed earlier in the report) is skipped, chosen ones are added."""
    query = node_query(node, structure)
    budget = _budget(node, structure)
    srcs = set(node_sources(node, structure))
    own = any(p.doc_id in srcs and _usable(p) for p in passages)
    if own:
        passages = [p if p.doc_id in srcs else _SKIP for p in passages]  # keep indices, use own sources only
    best: dict[str, float] = {}
    for p in passages:
        if _usable(p):
            key = p.doc_id if own else ""
            best[key] = max(best.get(key, 0.0), p.score)
    passages = [
        p if p.score >= MIN_RELATIVE_PASSAGE * best.get(p.doc_id if own else "", 0.0) else _SKIP
        for p in passages
    ]
    docs = list(dict.fromkeys(p.doc_id for p in passages if _usable(p)))
    share = budget // len(docs) if len(docs) > 1 else budget
    cands: list[tuple[int, int, str, int, str]] = []  # (passage idx, unit idx, text, tokens, doc)
    for i, p in enumerate(passages):
        if not _usable(p):
            continue
        for j, u in enumerate(_units(p, paper)):
            if _good(u) and _score(u, query) > 0:
                cands.append((i, j, u, count_tokens(u), p.doc_id))
    top = max((_score(c[2], query) for c in cands), default=0.0)
    cands = [c for c in cands if _score(c[2], query) >= MIN_RELATIVE_SCORE * top]
    keys = _keys
    seen: set[str] = set(used or ())
    chosen: set[tuple[int, int]] = set()
    left = budget
    per_doc: dict[str, int] = {}
    for limit_by_doc in (True, False):
        for i, j, u, t, doc in cands:
            if (i, j) in chosen or t > left or not seen.isdisjoint(keys(u)):
                continue
            if max_units is not None and len(chosen) >= max_units:
                break
            if limit_by_doc and per_doc.get(doc, 0) + t > share:
                continue
            chosen.add((i, j))
            seen |= keys(u)
            left -= t
            per_doc[doc] = per_doc.get(doc, 0) + t
    out: dict[int, list[str]] = {}
    for i, j, u, _, _ in cands:
        if (i, j) in chosen:
            out.setdefault(i, []).append(u)
            if used is not None:
                used |= _keys(u)
    return sorted(out.items())


def _text(
    node: StructureNode,
    structure: ReportStructure | None,
    passages: list[Passage],
    used: set[str] | None = None,
    paper: bool = False,
) -> str:
    sel = _select(node, structure, passages, used=used, paper=paper)
    return "\n\n".join(" ".join(units) for _, units in sel)


def _list(
    node: StructureNode,
    structure: ReportStructure | None,
    passages: list[Passage],
    used: set[str] | None = None,
    paper: bool = False,
) -> str:
    ordered = [p for p in passages if p.kind == "list"] + [p for p in passages if p.kind != "list"]
    sel = _select(node, structure, ordered, LIST_ITEMS, used=used, paper=paper)
    return "\n".join(f"- {u}" for _, units in sel for u in units)


def _block_key(p: Passage) -> str:
    return "block:" + " ".join(p.text.split())


def _prefer_sources(
    node: StructureNode,
    structure: ReportStructure | None,
    passages: list[Passage],
    kind: str,
    used: set[str] | None = None,
) -> Passage | None:
    """The first `kind` passage from the node's sources (else the first of any source) not yet placed in
    the report (`used`); the one chosen is added to `used`."""
    srcs = set(node_sources(node, structure))
    of_kind = [p for p in passages if p.kind == kind and (used is None or _block_key(p) not in used)]
    chosen = next((p for p in of_kind if p.doc_id in srcs), of_kind[0] if of_kind else None)
    if chosen is not None and used is not None:
        used.add(_block_key(chosen))
    return chosen


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _comparison(
    node: StructureNode,
    structure: ReportStructure | None,
    passages: list[Passage],
    used: set[str] | None = None,
    paper: bool = False,
) -> str:
    titles: dict[str, str] = {}
    if structure is not None:
        for n in structure.walk():
            if n.type == "subsection" and len(n.sources) == 1:
                titles.setdefault(n.sources[0], n.title)
    query = node_query(node, structure)
    rows: list[tuple[str, str, str]] = []
    for doc in node.sources:
        units = [
            (u, k)
            for k, p in enumerate(passages)
            if p.doc_id == doc and _usable(p)
            for u in _units(p, paper)
            if _good(u) and len(u.split()) <= 60
        ]
        if not units:
            continue

        def best(cues: tuple[re.Pattern[str], re.Pattern[str]], exclude: str = "", units=units) -> str:
            scored = [
                (
                    used is None or used.isdisjoint(_keys(u)),  # a sentence not yet in the report first
                    3 * len(cues[0].findall(u)) + len(cues[1].findall(u)) + 0.25 * _score(u, query),
                    -k,
                    -i,
                    u,
                )
                for i, (u, k) in enumerate(units)
                if u != exclude and (cues[0].search(u) or cues[1].search(u))
            ]
            return max(scored)[4] if scored else ""

        approach = best(_APPROACH)
        result = best(_RESULT, approach)
        if not approach and not result:
            continue
        rows.append((titles.get(doc, doc), approach, result))
    cols = _complete_columns(rows)
    rows = [r for r in rows if all(r[c] for c in cols)]
    if not rows:
        return ""
    header = ["Paper"] + [("Approach", "Key result")[c - 1] for c in cols]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        lines.append("| " + " | ".join(_cell(r[c]) for c in (0, *cols)) + " |")
        if used is not None:
            for c in cols:
                if r[c]:
                    used |= _keys(r[c])
    return "\n".join(lines)


def _complete_columns(rows: list[tuple[str, str, str]]) -> tuple[int, ...]:
    """The value columns (1 approach, 2 result) that leave the most complete rows (a row missing a value
    is dropped, never shown with an empty cell): both when that keeps as many cells as one alone."""

    def cells(cols: tuple[int, ...]) -> int:
        return len(cols) * sum(1 for r in rows if all(r[c] for c in cols))

    return max(((1, 2), (1,), (2,)), key=cells)


def _clean_block(text: str) -> str:
    """A table or figure passage of a paper with its caption/intro/footnote paragraphs cleaned
    (`clean_caption`): the table rows are kept as they are, and so is a `![...](...)` line pointing at a
    file; one pointing at an anchor of the paper (`S5.F3`) is dropped when a caption paragraph gives its
    label ("Figure 3"), else its alt text becomes the (cleaned) caption."""
    paras = [p for p in re.split(r"\n\s*\n", text) if p.strip()]
    labels = {m.group(0) for p in paras if (m := _FIGURE_LABEL.match(p.strip()))}
    out = []
    for para in paras:
        s = para.strip()
        img = image_link(s)
        if img is not None and not is_file_target(img[1]):
            m = _FIGURE_LABEL.match(img[0])
            if not (m and m.group(0) in labels) and (c := clean_caption(img[0])):
                out.append(c)
        elif is_table_row(s) or is_figure(s):
            out.append(para)
        elif c := clean_caption(s):
            out.append(c)
    return "\n\n".join(out)


def sanitize(markdown: str) -> str:
    """Demote heading lines to bold, defuse '<!-- FILL', strip trailing spaces."""
    lines = []
    for line in markdown.replace("<!-- FILL", "&lt;!-- FILL").splitlines():
        h = heading_of(line, indent="blank")
        if h:
            line = f"**{h.title}**" if h.title else ""
        lines.append(line.rstrip())
    return "\n".join(lines).strip()


def fill(
    node: StructureNode,
    structure: ReportStructure | None,
    passages: list[Passage],
    ctx: StepContext | None = None,
    used: set[str] | None = None,
) -> str:
    """Extractive Markdown for one leaf (see the module docstring); `ctx` names the step and tells a
    paper set (the kind's layout) from a filing; `used` collects the sentences and blocks already
    placed in the report (none of them is placed again)."""
    paper = ctx is not None and source_kind(ctx.source_kind).layout == "papers"
    out = ""
    if node.type == "table":
        p = None if len(node.sources) >= 2 else _prefer_sources(node, structure, passages, "table", used)
        if len(node.sources) >= 2:
            out = _comparison(node, structure, passages, used, paper)
        elif p is not None:
            out = _clean_block(p.text) if paper else p.text
        out = out or _text(node, structure, passages, used, paper)
    elif node.type == "figure":
        p = _prefer_sources(node, structure, passages, "figure", used)
        out = (_clean_block(p.text) if paper else p.text) if p is not None else ""
        out = out or _text(node, structure, passages, used, paper)  # every figure placed already
    elif node.type == "list":
        out = _list(node, structure, passages, used, paper)
    else:
        out = _text(node, structure, passages, used, paper)
    return sanitize(out) or NO_EVIDENCE
