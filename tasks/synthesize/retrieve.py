"""Passages of a grounding set and lexical retrieval per placeholder (SPEC §2.7: long grounding sets
are handled explicitly by retrieval per element, never silently truncated).

**Chunking** (`chunk_grounding_set`): every document's Markdown is cut into blocks at blank lines, in
document order. A *table* passage is a whole pipe table together with the short line introducing it
(units/caption line such as "(In millions, except per-share amounts)" or "... (dollars in millions):"),
a following "Table N: ..." caption and up to three footnote lines "(1) ...". A *figure* passage is the
`![caption](id)` line with its "Figure N: ..." caption paragraph. A *list* passage is a run of `- `/`1. `
items. Everything else is a *text* passage (one paragraph; code fences and `$$` equations whole). A
paragraph that continues across a page break (next block starts lower-case) is re-joined; prose longer
than 300 tokens is split at sentence boundaries and lists at item boundaries, tables never. Headings
(and one-line pseudo-headings such as "Americas") are not passages: they become each passage's
*context* (document title + heading path + doc_id words), which is indexed with the passage.
Passages under a References/Bibliography/Acknowledgements heading are chunked but never retrieved.

**Scoring** (`RetrievalIndex.search`): Okapi BM25 (k1 = 1.2, b = 0.75, idf = ln(1 + (N - n + 0.5) /
(n + 0.5))) over lower-cased word tokens (stop words dropped, plural "s" stripped) of the passage text
plus its context, each context term counting 3 times (a field weight, so that a query naming a heading,
e.g. "Gross Margin" or "abstract", finds the passages under it). The query is weighted: the node's
title and objective count 1 per occurrence, its questions 0.5, its ancestors' titles 0.5 (their
questions belong to the whole section and are left out); a term's weight is capped at 3. The BM25
score is divided by the best score for the query (so it lies in [0, 1]); passages from the node's
`sources` (or, if it has none, its nearest ancestor's) get +0.5; text/list passages get +0.15 for text
and list leaves. Passages scoring 0 are never returned. Order: first by *kind tier* (table leaves with
at most one source: tables first; figure leaves: figures first; a table leaf over several sources is a
comparison grid built from prose, so no tier), then for nodes with several sources by round-robin rank
(best passage of every source document before the second-best of any), then by score, then by
document order (deterministic tie-break). **Budget**: passages are taken in that order while they fit
`budget_tokens` (o200k_base tokens of the passage text); one that does not fit is skipped whole, never
cut, and at most `k` passages are returned, each carrying its score (`search`: the offline fill's top 8
within 1,500 tokens, a generated report's sections). `search_budget` fills the budget instead (the fill
step of an LLM backend, tasks/synthesize/fill.py): the same order and skipping, the first `FILL_FLOOR`
(8) passages taken exactly as `search(k=8)` takes them (so it always holds what the top 8 held), later
ones only when their *relevance* (the score without the prose bonus: normalised BM25, + 0.5 from a
source document of the node) is at least `MIN_RELEVANCE` (0.1), and at most `FILL_CEILING` (128)
passages. Why the relevance floor: nearly every passage of G shares some query term with a node (a
year, "company", "model"), so without it the budget would always be topped up with passages that share
one stray low-weight term with the element; under a tenth of the best passage's BM25 is such a match,
while every passage of the node's own source documents stays eligible (the structure names those
documents as where its content comes from). Why the ceiling: each excerpt costs ~22 tokens of framing
in the fill prompt beyond its text, and a prompt of hundreds of one-line fragments reads badly; it binds
only where G is cut into many short passages. On the demo release the LLM budgets (12,000 tokens for a
128,000-token window, 8,000 for 32,000) give an element ~76 / ~55 passages and ~11k / ~7.7k tokens,
instead of 8 passages and ~1.5k tokens (benchmarks/retrieval_recall.py, fill evidence).

Build a `RetrievalIndex(gset)` once per grounding set and call `.search` per leaf; `retrieve()` is the
one-shot form over an existing passage list (without heading context, as a `Passage` carries none).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal

from schemas.structure import ReportStructure, StructureNode
from tasks.ground.load import GroundingSet
from tasks.llm.backend import Passage
from tasks.lru import BoundedLRU
from tasks.markdown.document import heading_of, parse
from tasks.markdown.text import split_sentences, terms
from tasks.tokens import count_tokens_many

__all__ = [
    "Block",
    "RetrievalIndex",
    "chunk_grounding_set",
    "node_query",
    "parse_blocks",
    "split_sentences",
    "terms",
    "retrieve",
]

MAX_PASSAGE_TOKENS = 300
K1, B = 1.2, 0.75
SOURCE_BOOST = 0.5
PROSE_BOOST = 0.15
TERM_WEIGHT_CAP = 3.0
ANCESTOR_WEIGHT = 0.5
QUESTION_WEIGHT = 0.5
CONTEXT_WEIGHT = 3
# search_budget (the fill evidence of an LLM backend): see the module docstring, "Budget"
FILL_FLOOR = 8
FILL_CEILING = 128
MIN_RELEVANCE = 0.1

BlockKind = Literal["heading", "text", "table", "figure", "list"]

_CAPTION_AFTER_TABLE = re.compile(r"^(?:Table|TABLE|Tab\.)\s*[A-Z]?\d+[.:]")
_CAPTION_AFTER_FIGURE = re.compile(r"^(?:Figure|FIGURE|Fig\.)\s*[A-Z]?\d+[.:]")
_FOOTNOTE = re.compile(r"^(?:\(\d{1,2}\)|\([a-z]\)|\*{1,3}|†|‡|\[\d{1,2}\])\s*\S")
_UNITS = re.compile(
    r"\b(?:in|dollars in|amounts in|shares in)\s+(?:millions|thousands|billions)\b|\(in [a-z]+", re.IGNORECASE
)


@dataclass(frozen=True)
class Block:
    """One Markdown block of a document, with the heading path above it."""

    kind: BlockKind
    text: str
    headings: tuple[str, ...] = ()
    level: int = 0  # heading level for kind == "heading"
    code: bool = False  # fenced code or a display equation (never quoted as a sentence)

    @property
    def pseudo(self) -> bool:
        """A pseudo-heading: a short title-like line read as a heading (it has no '#' marks)."""
        return self.kind == "heading" and heading_of(self.text, indent="none") is None

    @property
    def title(self) -> str:
        """A heading's text: what follows the #'s (closing #'s kept, as its readers always took it), or
        the pseudo-heading's line."""
        h = heading_of(self.text, indent="none", closing=False)
        return h.title.rstrip() if h else self.text.strip()


_RAW_KIND = {"paragraph": "text", "math": "code"}


def _raw_blocks(markdown: str) -> list[tuple[str, str]]:
    """(kind, text) blocks in order (the "passages" reading of tasks.markdown); kinds: heading, table,
    figure, list, code (fenced code and $$ equations), text."""
    return [(_RAW_KIND.get(b.kind, b.kind), b.text) for b in parse(markdown, reading="passages").blocks]


def _is_pseudo_heading(text: str) -> bool:
    s = text.strip()
    if "\n" in s or len(s) > 80 or not s[:1].isalpha() or not s[:1].isupper():
        return False
    words = s.split()
    return 0 < len(words) <= 8 and s[-1] not in '.:;,?!)"”' and not any(c.isdigit() for c in s)


def _broken_off(before: str, text: str) -> bool:
    """Whether paragraph `text` continues `before` (a page break between them): it starts in lower case
    and `before` ends without a closing mark, unless `before` is a short line (8 words at most) whose
    word the paragraph starts with ("iPhone" over "iPhone net sales increased ...": a heading, never
    glued to its paragraph; "The stock" over "price fell." is one sentence)."""
    if not text[:1].islower() or before.rstrip()[-1:] in '.!?:;"”)':
        return False
    words = before.split()
    return not (len(words) <= 8 and text.split()[0] in words)


def parse_blocks(markdown: str) -> list[Block]:
    """Blocks with heading paths. Captions/units lines are attached to their table or figure, list items
    separated by blank lines are one list, a paragraph broken by a page break is re-joined (`_broken_off`),
    and a short title-like line before a paragraph is treated as a (pseudo-)heading."""
    raw = _raw_blocks(markdown)
    # attach captions, footnotes; merge list runs and broken paragraphs
    merged: list[list[str]] = []  # [kind, text]
    i = 0
    while i < len(raw):
        kind, text = raw[i]
        if kind == "table":
            if merged and merged[-1][0] == "text" and _is_table_intro(merged[-1][1]):
                text = merged.pop()[1] + "\n\n" + text
            k = i + 1
            if k < len(raw) and raw[k][0] == "text" and _CAPTION_AFTER_TABLE.match(raw[k][1].strip()):
                text += "\n\n" + raw[k][1]
                k += 1
            notes = 0
            while (
                k < len(raw)
                and notes < 3
                and raw[k][0] in ("text", "list")
                and _FOOTNOTE.match(raw[k][1].strip())
                and len(raw[k][1].split()) <= 80
            ):
                text += "\n\n" + raw[k][1]
                k += 1
                notes += 1
            merged.append(["table", text])
            i = k
            continue
        if kind == "figure":
            k = i + 1
            if k < len(raw) and raw[k][0] == "text" and _CAPTION_AFTER_FIGURE.match(raw[k][1].strip()):
                text += "\n\n" + raw[k][1]
                k += 1
            merged.append(["figure", text])
            i = k
            continue
        if kind == "list" and merged and merged[-1][0] == "list":
            merged[-1][1] += "\n\n" + text
            i += 1
            continue
        if kind == "text" and merged and merged[-1][0] == "text" and _broken_off(merged[-1][1], text):
            merged[-1][1] = merged[-1][1].rstrip() + " " + text.lstrip()
            i += 1
            continue
        merged.append([kind, text])
        i += 1

    blocks: list[Block] = []
    stack: list[tuple[int, str]] = []
    pseudo: str | None = None
    for idx, (kind, text) in enumerate(merged):
        if kind == "heading":
            h = heading_of(text, indent="none")
            assert h is not None
            level, title = h
            stack = [(lv, t) for lv, t in stack if lv < level] + [(level, title)]
            pseudo = None
            blocks.append(Block("heading", text, tuple(t for _, t in stack[:-1]), level))
            continue
        nxt = merged[idx + 1][0] if idx + 1 < len(merged) else None
        if kind == "text" and nxt in ("text", "list", "table") and _is_pseudo_heading(text):
            pseudo = text.strip()
            level = (stack[-1][0] + 1) if stack else 1
            blocks.append(Block("heading", text, tuple(t for _, t in stack), level))
            continue
        path = tuple(t for _, t in stack) + ((pseudo,) if pseudo else ())
        if kind == "code":
            blocks.append(Block("text", text, path, code=True))
        else:
            blocks.append(Block(kind, text, path))  # type: ignore[arg-type]
    return blocks


def _is_table_intro(text: str) -> bool:
    s = text.strip()
    if "\n" in s or len(s.split()) > 60:
        return False
    return s.endswith(":") or (s.startswith("(") and s.endswith(")")) or bool(_UNITS.search(s))


# ---------------------------------------------------------------- chunking


def _split_long(block: Block, tokens: int) -> list[str]:
    """Prose over MAX_PASSAGE_TOKENS -> sentence groups; lists -> item groups; tables/figures whole."""
    if tokens <= MAX_PASSAGE_TOKENS or block.kind in ("table", "figure") or block.code:
        return [block.text]
    if block.kind == "list":
        units = [u for u in re.split(r"\n\s*\n", block.text) if u.strip()]
        sep = "\n\n"
    else:
        units = split_sentences(block.text)
        sep = " "
    if len(units) <= 1:
        return [block.text]
    counts = count_tokens_many(units)
    groups: list[str] = []
    cur: list[str] = []
    cur_tok = 0
    for u, t in zip(units, counts, strict=True):
        if cur and cur_tok + t > MAX_PASSAGE_TOKENS:
            groups.append(sep.join(cur))
            cur, cur_tok = [], 0
        cur.append(u)
        cur_tok += t
    if cur:
        groups.append(sep.join(cur))
    return groups


def _chunks(gset: GroundingSet) -> tuple[list[Passage], list[str], list[bool]]:
    pieces: list[tuple[str, Block]] = []
    for doc in gset.documents:
        for b in parse_blocks(gset.texts.get(doc.doc_id, "")):
            if b.kind != "heading":
                pieces.append((doc.doc_id, b))
    counts = count_tokens_many([b.text for _, b in pieces])
    titles = {d.doc_id: d.title for d in gset.documents}
    passages: list[Passage] = []
    contexts: list[str] = []
    back_matter: list[bool] = []
    split_texts: list[tuple[str, Block, list[str], int]] = []
    for (doc_id, b), t in zip(pieces, counts, strict=True):
        split_texts.append((doc_id, b, _split_long(b, t) if t > MAX_PASSAGE_TOKENS else [b.text], t))
    # only the parts of a split block are counted again (a block kept whole has its count already)
    split_parts = [x for _, _, parts, _ in split_texts if len(parts) > 1 for x in parts]
    part_counts = iter(count_tokens_many(split_parts))
    for doc_id, b, parts, t in split_texts:
        ctx = " ".join([titles.get(doc_id, ""), *b.headings, doc_id.replace("-", " ")])
        back = any(_BACK_MATTER.match(h) for h in b.headings[1:] or b.headings)
        for part in parts:
            tokens = next(part_counts) if len(parts) > 1 else t
            passages.append(Passage(doc_id, part, b.kind, 0.0, tokens))  # type: ignore[arg-type]
            contexts.append(ctx)
            back_matter.append(back)
    return passages, contexts, back_matter


def chunk_grounding_set(gset: GroundingSet) -> list[Passage]:
    """All passages of a grounding set, in document order (score 0.0, tokens = o200k_base count)."""
    return _chunks(gset)[0]


_BACK_MATTER = re.compile(
    r"^\s*(?:\d+\.?\s*)?(?:references|bibliography|acknowledge?ments?)\b", re.IGNORECASE
)


# ---------------------------------------------------------------- query


def _ancestors(node: StructureNode, structure: ReportStructure | None) -> list[StructureNode]:
    if structure is None:
        return []

    def path(nodes: Iterable[StructureNode], trail: list[StructureNode]) -> list[StructureNode] | None:
        for n in nodes:
            if n.id == node.id:
                return trail
            found = path(n.children, [*trail, n])
            if found is not None:
                return found
        return None

    return path(structure.nodes, []) or []


def node_query(node: StructureNode, structure: ReportStructure | None) -> dict[str, float]:
    """Weighted query terms of a node (see the module docstring)."""
    weights: dict[str, float] = defaultdict(float)

    def add(text: str, w: float) -> None:
        for t in terms(text):
            weights[t] += w

    add(node.title, 1.0)
    add(node.objective, 1.0)
    for q in node.questions:
        add(q, QUESTION_WEIGHT)
    for a in _ancestors(node, structure):
        add(a.title, ANCESTOR_WEIGHT)
    return {t: min(w, TERM_WEIGHT_CAP) for t, w in sorted(weights.items())}


def node_sources(node: StructureNode, structure: ReportStructure | None) -> list[str]:
    """The node's sources, else those of its nearest ancestor that has some."""
    if node.sources:
        return list(node.sources)
    for a in reversed(_ancestors(node, structure)):
        if a.sources:
            return list(a.sources)
    return []


def preferred_kind(node: StructureNode) -> str | None:
    """Kind ranked first for this leaf: tables for (single-source) table leaves, figures for figures."""
    if node.type == "table" and len(node.sources) <= 1:
        return "table"
    if node.type == "figure":
        return "figure"
    return None


# ---------------------------------------------------------------- index

# RetrievalIndex.shared: an LRU of indexes by their documents, bounded by count and Markdown characters
# (an index takes ~15 bytes per character)
SHARED_INDEXES, SHARED_INDEX_CHARS = 64, 24_000_000
_SHARED: BoundedLRU[RetrievalIndex] = BoundedLRU(SHARED_INDEXES, SHARED_INDEX_CHARS)


def _gset_key(gset: GroundingSet) -> str:
    h = hashlib.sha256()
    for doc in gset.documents:
        for part in (doc.doc_id, doc.title, gset.texts.get(doc.doc_id, "")):
            b = str(part).encode("utf-8")
            h.update(len(b).to_bytes(8, "big"))
            h.update(b)
    return h.hexdigest()


class RetrievalIndex:
    """BM25 inverted index over the passages of one grounding set (build once, search per leaf)."""

    def __init__(
        self,
        gset: GroundingSet | None = None,
        *,
        passages: list[Passage] | None = None,
        contexts: list[str] | None = None,
    ):
        skip: list[bool] | None = None
        if gset is not None:
            passages, contexts, skip = _chunks(gset)
        self.passages: list[Passage] = list(passages or [])
        self._skip = skip or [False] * len(self.passages)
        if contexts is None:
            contexts = [p.doc_id.replace("-", " ") for p in self.passages]
        self._postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self._lengths: list[int] = []
        for i, (p, c) in enumerate(zip(self.passages, contexts, strict=True)):
            tf = Counter(terms(p.text))
            for t in terms(c):
                tf[t] += CONTEXT_WEIGHT
            self._lengths.append(sum(tf.values()))
            for t, f in tf.items():
                self._postings[t].append((i, f))
        n = len(self.passages)
        self._avgdl = (sum(self._lengths) / n) if n else 1.0
        self._idf = {t: math.log(1 + (n - len(p) + 0.5) / (len(p) + 0.5)) for t, p in self._postings.items()}

    @classmethod
    def shared(cls, gset: GroundingSet) -> RetrievalIndex:
        """The index of `gset`, built once per process for the same documents: a scoring run's extractive
        baseline and its faithfulness judge index the same grounding sets. An index is read-only once
        built, so threads share it."""
        return _SHARED.get_or_make(
            _gset_key(gset), lambda: cls(gset), lambda _: sum(len(t) for t in gset.texts.values())
        )

    @classmethod
    def from_passages(cls, passages: list[Passage]) -> RetrievalIndex:
        return cls(passages=passages)

    def bm25(self, query: dict[str, float]) -> dict[int, float]:
        scores: dict[int, float] = defaultdict(float)
        for t, w in query.items():
            idf = self._idf.get(t)
            if idf is None:
                continue
            for i, f in self._postings[t]:
                norm = K1 * (1 - B + B * self._lengths[i] / self._avgdl)
                scores[i] += w * idf * f * (K1 + 1) / (f + norm)
        return scores

    def _ranked(
        self, node: StructureNode, structure: ReportStructure | None
    ) -> list[tuple[int, float, float]]:
        """(passage index, score, relevance) of every passage with a positive score, best first; the
        relevance is the score without the prose bonus (normalised BM25 + source boost)."""
        raw = self.bm25(node_query(node, structure))
        top = max(raw.values(), default=0.0)
        sources = set(node_sources(node, structure))
        prose_leaf = node.type in ("text", "list")
        scored: dict[int, float] = {}
        relevance: dict[int, float] = {}
        for i, p in enumerate(self.passages):
            if self._skip[i]:
                continue
            s = raw.get(i, 0.0) / top if top > 0 else 0.0
            if p.doc_id in sources:
                s += SOURCE_BOOST
            if s <= 0:
                continue
            relevance[i] = s
            if prose_leaf and p.kind in ("text", "list"):
                s += PROSE_BOOST
            scored[i] = round(s, 6)
        want = preferred_kind(node)
        order = sorted(scored, key=lambda i: (-scored[i], i))
        rr: dict[int, int] = {}
        if len(sources) > 1:
            seen: Counter[str] = Counter()
            for i in order:
                rr[i] = seen[self.passages[i].doc_id]
                seen[self.passages[i].doc_id] += 1
        order.sort(
            key=lambda i: (
                0 if want is None or self.passages[i].kind == want else 1,
                rr.get(i, 0),
                -scored[i],
                i,
            )
        )
        return [(i, scored[i], relevance[i]) for i in order]

    def rank(self, node: StructureNode, structure: ReportStructure | None = None) -> list[Passage]:
        """Every passage with a positive score, best first (see the module docstring for the order)."""
        return [replace(self.passages[i], score=s) for i, s, _ in self._ranked(node, structure)]

    def search(
        self,
        node: StructureNode,
        structure: ReportStructure | None = None,
        budget_tokens: int = 4000,
        k: int = 8,
    ) -> list[Passage]:
        """Top passages for `node` that fit `budget_tokens` together (whole passages only), at most k."""
        out: list[Passage] = []
        left = budget_tokens
        for p in self.rank(node, structure):
            if len(out) >= k:
                break
            if p.tokens <= left:
                out.append(p)
                left -= p.tokens
        return out

    def search_budget(
        self,
        node: StructureNode,
        structure: ReportStructure | None = None,
        budget_tokens: int = 4000,
        *,
        floor: int = FILL_FLOOR,
        ceiling: int = FILL_CEILING,
        min_relevance: float = MIN_RELEVANCE,
    ) -> list[Passage]:
        """Passages for `node` filling `budget_tokens`: in rank order, each taken whole when it fits what
        is left (one that does not is skipped, never cut), the first `floor` ones exactly as
        `search(..., k=floor)` takes them, later ones only when their relevance (score without the prose
        bonus) is at least `min_relevance`; at most `ceiling` passages."""
        out: list[Passage] = []
        left = budget_tokens
        for i, score, relevance in self._ranked(node, structure):
            if len(out) >= ceiling or left <= 0:
                break
            p = self.passages[i]
            if p.tokens > left or (len(out) >= floor and relevance < min_relevance):
                continue
            out.append(replace(p, score=score))
            left -= p.tokens
        return out


def retrieve(
    passages: list[Passage],
    node: StructureNode,
    structure: ReportStructure | None,
    budget_tokens: int,
    k: int,
) -> list[Passage]:
    """One-shot retrieval over `passages` (builds a throw-away index; prefer RetrievalIndex per gset)."""
    return RetrievalIndex.from_passages(passages).search(node, structure, budget_tokens, k)
