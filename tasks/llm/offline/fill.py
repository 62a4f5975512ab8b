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
- **table**: the first retrieved table passage from the node's sources (else the first table passage),
  copied verbatim with its units/caption line. A table leaf over several sources (a survey's comparison
  table) becomes a grid with one row per source document: its title (from the structure), the best
  "approach" and the best "result" sentence of that document's passages (3 points per strong cue such
  as "we present"/"we find", 1 per weak cue such as "method"/"improves"/"20%", plus a quarter of the
  query-term score; ties go to the earlier passage), copied verbatim ('|' escaped). Without a table
  passage the text rule applies.
- **figure**: the first figure passage (the `![...](...)` line and its caption), verbatim.
- **list**: items of list passages, then relevant sentences, as `- ` items (at most 8, same budget).

The output never contains a Markdown heading line (a line starting with '#' becomes bold text) nor the
string '<!-- FILL'. With no usable passage the content is the fixed sentence `NO_EVIDENCE`.
"""

from __future__ import annotations

import re

from schemas.structure import ReportStructure, StructureNode
from tasks.ground.tokens import count_tokens
from tasks.llm.backend import Passage, StepContext
from tasks.synthesize.retrieve import node_query, node_sources, split_sentences, terms

NO_EVIDENCE = "No information on this topic is available in the grounding documents for this period."
TEXT_BUDGET = 220
EXTRA_PER_SOURCE = 80
MAX_BUDGET = 600
LIST_ITEMS = 8
MIN_WORDS = 5
MIN_RELATIVE_SCORE = 0.3
MIN_RELATIVE_PASSAGE = 0.6
_SKIP = Passage("", "", "heading", 0.0, 0)

_HEADING_LINE = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
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


def _units(p: Passage) -> list[str]:
    """Sentences of a text passage, or the items (marker stripped) of a list passage, verbatim."""
    if p.kind == "list":
        return [_ITEM.sub("", ln).strip() for ln in p.text.splitlines() if _ITEM.match(ln)]
    out = []
    for para in re.split(r"\n\s*\n", p.text):
        out.extend(split_sentences(" ".join(para.split("\n"))))
    return out


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
) -> list[tuple[int, list[str]]]:
    """[(passage index, kept units in original order)] in passage order, within the token budget."""
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
        for j, u in enumerate(_units(p)):
            if _good(u) and _score(u, query) > 0:
                cands.append((i, j, u, count_tokens(u), p.doc_id))
    top = max((_score(c[2], query) for c in cands), default=0.0)
    cands = [c for c in cands if _score(c[2], query) >= MIN_RELATIVE_SCORE * top]
    seen: set[str] = set()
    chosen: set[tuple[int, int]] = set()
    left = budget
    per_doc: dict[str, int] = {}
    for limit_by_doc in (True, False):
        for i, j, u, t, doc in cands:
            if (i, j) in chosen or u in seen or t > left:
                continue
            if max_units is not None and len(chosen) >= max_units:
                break
            if limit_by_doc and per_doc.get(doc, 0) + t > share:
                continue
            chosen.add((i, j))
            seen.add(u)
            left -= t
            per_doc[doc] = per_doc.get(doc, 0) + t
    out: dict[int, list[str]] = {}
    for i, j, u, _, _ in cands:
        if (i, j) in chosen:
            out.setdefault(i, []).append(u)
    return sorted(out.items())


def _text(node: StructureNode, structure: ReportStructure | None, passages: list[Passage]) -> str:
    return "\n\n".join(" ".join(units) for _, units in _select(node, structure, passages))


def _list(node: StructureNode, structure: ReportStructure | None, passages: list[Passage]) -> str:
    ordered = [p for p in passages if p.kind == "list"] + [p for p in passages if p.kind != "list"]
    sel = _select(node, structure, ordered, LIST_ITEMS)
    return "\n".join(f"- {u}" for _, units in sel for u in units)


def _prefer_sources(
    node: StructureNode, structure: ReportStructure | None, passages: list[Passage], kind: str
) -> Passage | None:
    srcs = set(node_sources(node, structure))
    of_kind = [p for p in passages if p.kind == kind]
    return next((p for p in of_kind if p.doc_id in srcs), of_kind[0] if of_kind else None)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _comparison(node: StructureNode, structure: ReportStructure | None, passages: list[Passage]) -> str:
    titles: dict[str, str] = {}
    if structure is not None:
        for n in structure.walk():
            if n.type == "subsection" and len(n.sources) == 1:
                titles.setdefault(n.sources[0], n.title)
    query = node_query(node, structure)
    rows = []
    for doc in node.sources:
        units = [
            (u, k)
            for k, p in enumerate(passages)
            if p.doc_id == doc and _usable(p)
            for u in _units(p)
            if _good(u) and len(u.split()) <= 60
        ]
        if not units:
            continue

        def best(cues: tuple[re.Pattern[str], re.Pattern[str]], exclude: str = "", units=units) -> str:
            scored = [
                (3 * len(cues[0].findall(u)) + len(cues[1].findall(u)) + 0.25 * _score(u, query), -k, -i, u)
                for i, (u, k) in enumerate(units)
                if u != exclude and (cues[0].search(u) or cues[1].search(u))
            ]
            return max(scored)[3] if scored else ""

        approach = best(_APPROACH)
        result = best(_RESULT, approach)
        if not approach and not result:
            continue
        na = "not stated in the retrieved passages"
        rows.append(f"| {_cell(titles.get(doc, doc))} | {_cell(approach) or na} | {_cell(result) or na} |")
    if not rows:
        return ""
    return "\n".join(["| Paper | Approach | Key result |", "|---|---|---|", *rows])


def sanitize(markdown: str) -> str:
    """Demote heading lines to bold, defuse '<!-- FILL', strip trailing spaces."""
    lines = []
    for line in markdown.replace("<!-- FILL", "&lt;!-- FILL").splitlines():
        m = _HEADING_LINE.match(line)
        if m:
            line = f"**{m.group(2)}**" if m.group(2) else ""
        lines.append(line.rstrip())
    return "\n".join(lines).strip()


def fill(
    node: StructureNode,
    structure: ReportStructure | None,
    passages: list[Passage],
    ctx: StepContext | None = None,
) -> str:
    """Extractive Markdown for one leaf (see the module docstring); `ctx` only names the step."""
    out = ""
    if node.type == "table":
        if len(node.sources) >= 2:
            out = _comparison(node, structure, passages)
        else:
            p = _prefer_sources(node, structure, passages, "table")
            out = p.text if p is not None else _text(node, structure, passages)
    elif node.type == "figure":
        p = _prefer_sources(node, structure, passages, "figure")
        out = p.text if p is not None else ""
    elif node.type == "list":
        out = _list(node, structure, passages)
    else:
        out = _text(node, structure, passages)
    return sanitize(out) or NO_EVIDENCE
