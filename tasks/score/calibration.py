"""Calibration of the node-similarity projection per embedder: labelled pairs of real section headings
(Form items of filings, notes by their iXBRL text-block concept, arXiv sections by kind), ROC AUC and the
fit of δ. Data, criterion and figures: docs/metrics/structure.md, "Calibration".

Pure functions: the caller grounds the documents and embeds the texts (benchmarks/calibrate_structure.py).
Every node is built by `tasks.score.tree.report_tree`, so the objectives compared are the scorer's.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tasks.ground.items import ITEM_HEAD, item_label
from tasks.markdown.document import code_mask, heading_of, parse, split_lines, title_block
from tasks.score.structural_similarity import node_fields, project_array
from tasks.score.tree import report_tree

__all__ = [
    "DELTA_GRID",
    "ITEM_KINDS",
    "PAPER_KINDS",
    "Fit",
    "Pairs",
    "Unit",
    "cosine_matrix",
    "fit_delta",
    "heading_words",
    "item_units",
    "labelled_pairs",
    "note_units",
    "paper_kind",
    "pair_values",
    "paper_units",
    "roc_auc",
    "section_node",
]

# δ candidates: 0.02 .. 1.00 in steps of 0.01 (beyond 1 the RBF is nearly flat over the cosines that occur)
DELTA_GRID: tuple[float, ...] = tuple(round(0.01 * k, 2) for k in range(2, 101))

# (form, part, item) -> the kind of disclosure (Regulation S-K): the same kind in a 10-K and a 10-Q is
# one item for pairing. 10-K Item 5 (market for equity, issuer purchases) and 10-Q Part II Item 2
# (unregistered sales, issuer purchases) overlap: neither a positive nor a negative pair (AMBIGUOUS).
ITEM_KINDS: dict[tuple[str, int | None, str], str] = {
    **{
        ("10-K", None, item): kind
        for item, kind in {
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
            "15": "exhibits",
            "16": "form-10-k-summary",
        }.items()
    },
    ("10-Q", 1, "1"): "financial-statements",
    ("10-Q", 1, "2"): "mdna",
    ("10-Q", 1, "3"): "market-risk",
    ("10-Q", 1, "4"): "controls-and-procedures",
    ("10-Q", 2, "1"): "legal-proceedings",
    ("10-Q", 2, "1A"): "risk-factors",
    ("10-Q", 2, "2"): "equity-sales-and-repurchases",
    ("10-Q", 2, "3"): "defaults-on-senior-securities",
    ("10-Q", 2, "4"): "mine-safety",
    ("10-Q", 2, "5"): "other-information",
    ("10-Q", 2, "6"): "exhibits",
}
AMBIGUOUS: frozenset[frozenset[str]] = frozenset(
    {frozenset({"market-for-equity", "equity-sales-and-repurchases"})}
)

# Paper section kinds: the heading's words (numbering removed, lower case) must match one pattern in full.
PAPER_KINDS: dict[str, str] = {
    "abstract": r"abstract",
    "introduction": r"introduction",
    "related-work": r"related work|background|literature review|previous work|prior work",
    "methods": r"(?:[\w-]+ ){0,2}methods?|methodology|model architecture",
    "data": r"(?:[\w-]+ ){0,2}observations|(?:[\w-]+ )?data|datasets?",
    "results": r"(?:\w+ )?results?|experiments|evaluation",
    "discussion": r"discussion",
    "conclusions": r"conclusions?|concluding remarks|summary|summary and conclusions"
    r"|conclusions? (?:&|and) summary",
    "acknowledgements": r"acknowledge?ments?",
    "references": r"references|bibliography",
    "availability": r"data availability|code availability|data and code availability|reproducibility",
    "author-contributions": r"author contributions",
}

# Words of concept names that say nothing about the topic (two concepts sharing another word overlap).
_CONCEPT_STOP = frozenset(
    "and of or the for in to by text block disclosure disclosures note notes other policy policies".split()
)
_NUMBERING = re.compile(
    r"^(?:note\s*(?:\d{1,2}[a-z]?(?!\d)|[a-z]\b)"  # Note 7, NOTE 14, Note A
    r"|appendix\s+[a-z]\b"  # Appendix B
    r"|\d{1,2}(?:\.\d{1,2})*[a-z]?(?![\d,])"  # 3, 2.1, 1. (not a year, not 1,000)
    r"|[ivx]{1,4}\b(?=\.?\s+[A-Z])"  # II Band Deformation (roman numerals before a capital)
    r"|[a-z](?=[.)]\s))"  # H. DEBT, B) Leases
    r"[\s.:)\-—–]*",
    re.I,
)


@dataclass(frozen=True)
class Unit:
    """One labelled section of a real document: its source (items, notes, papers), its label, the
    document it comes from, its heading as written and its content (Markdown, headings of any level)."""

    source: str
    label: str
    doc: str
    heading: str
    body: str = ""


def heading_words(title: str) -> str:
    """A heading without the document's numbering: "ITEM 1A. RISK FACTORS" -> "RISK FACTORS",
    "NOTE 14. DEBT" -> "DEBT", "H. DEBT" -> "DEBT", "3 Results" -> "Results", "Appendix B Reproducibility"
    -> "Reproducibility"; trailing dots, colons and asterisks (footnote marks) dropped. Reports
    generated for frame carry no Form numbering, so the wording alone is what a reworded heading changes."""
    text = " ".join(title.split())
    m = ITEM_HEAD.match(text)
    if m and not m.group("more"):
        text = m.group("rest")
    else:
        text = _NUMBERING.sub("", text, count=1)
    return text.strip(" .:*-—–").strip()


def _demoted(body: str) -> str:
    """`body` with every heading at least two levels down and never above ###: it stays inside the
    section `section_node` puts it under."""
    lines = body.splitlines()
    mask = code_mask(lines)
    out = []
    for line, in_code in zip(lines, mask, strict=True):
        h = None if in_code else heading_of(line)
        out.append(line if h is None else f"{'#' * min(6, max(3, h.level + 2))} {h.title}")
    return "\n".join(out)


def section_node(heading: str, body: str = "") -> dict[str, Any]:
    """The section node `report_tree` builds for "## heading" followed by `body` (whose headings become
    subsections): what the scorer would compare for a report with this section."""
    tree = report_tree(f"# Calibration\n\n## {heading}\n\n{_demoted(body)}\n")
    return tree["children"][0]


# ------------------------------------------------------------------------------------------ units


def item_units(doc: str, form: str, documents: Sequence[dict], markdown: dict[str, str], peer: Iterable[str]):
    """Units of a grounded filing's Form items (`documents.json` rows and their Markdown files). Only
    items the peer parser also found (`peer`: its identifiers, `part1item2` / `7A`) and that one heading
    names alone (not "Items 10, 11, 12, 13 and 14") are kept."""
    seen = {p.lower() for p in peer}
    form = form.upper()
    out = []
    for d in documents:
        m = d.get("metadata") or {}
        if m.get("section_type") != "item" or m.get("items_covered"):
            continue
        kind = ITEM_KINDS.get((form, m.get("part") if form == "10-Q" else None, str(m.get("item"))))
        label = item_label(form, m.get("part"), m.get("item"))
        words = heading_words(d["title"])
        if kind is None or label is None or label.lower() not in seen or not _has_words(words):
            continue
        out.append(Unit("items", kind, doc, words, _body(markdown.get(f"{d['doc_id']}.md", ""))))
    return out


def note_units(doc: str, documents: Sequence[dict], markdown: dict[str, str], concepts: Sequence[str]):
    """Units of a grounded filing's notes, labelled by the filer's iXBRL note-level text-block concepts
    (`tasks.ground.textblocks.note_blocks`, in document order). Only a filing whose number of note
    documents equals its number of tagged notes is used: there the i-th note is the i-th text block."""
    notes = [d for d in documents if (d.get("metadata") or {}).get("section_type") == "note"]
    if len(notes) != len(concepts):
        return []
    out = []
    for d, concept in zip(notes, concepts, strict=True):
        words = heading_words(d["title"])
        if _has_words(words):
            out.append(Unit("notes", concept, doc, words, _body(markdown.get(f"{d['doc_id']}.md", ""))))
    return out


def paper_kind(title: str) -> str | None:
    """The kind of a paper section (`PAPER_KINDS`) from its heading, or None (no kind, or two)."""
    words = heading_words(title).lower()
    kinds = [k for k, p in PAPER_KINDS.items() if re.fullmatch(p, words)]
    return kinds[0] if len(kinds) == 1 else None


def paper_units(doc: str, markdown: str) -> list[Unit]:
    """Units of a paper's Markdown (`frame ground` of a LaTeXML page): its `##` sections whose heading
    names a kind."""
    lines = markdown.splitlines()
    heads = [(b.start, b.title) for b in parse(markdown).blocks if b.kind == "heading" and b.level == 2]
    out = []
    for k, (start, title) in enumerate(heads):
        kind = paper_kind(title)
        if kind is None:
            continue
        end = heads[k + 1][0] if k + 1 < len(heads) else len(lines)
        out.append(Unit("papers", kind, doc, heading_words(title), "\n".join(lines[start + 1 : end])))
    return out


def _body(markdown: str) -> str:
    """A grounded document's Markdown without its own H1 title."""
    title = title_block(parse(markdown).blocks)
    if title is None:
        return markdown
    return "\n".join(split_lines(markdown)[title.end :])


def _folded(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def _has_words(text: str) -> bool:
    return len(re.findall(r"[A-Za-z]", text)) >= 3


# ------------------------------------------------------------------------------------------ pairs


@dataclass
class Pairs:
    """Labelled node pairs of one source: indices into `nodes`, positives (same label, two documents)
    and negatives (different labels)."""

    source: str
    nodes: list[dict[str, Any]]
    positive: list[tuple[int, int]]
    negative: list[tuple[int, int]]
    labels: list[str]


def _concept_words(concept: str) -> set[str]:
    local = concept.split(":", 1)[-1]
    words = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+", local)
    return {w.lower() for w in words} - _CONCEPT_STOP


def _overlapping(source: str, a: str, b: str) -> bool:
    """Two labels too close to call a pair of them negative."""
    if source == "notes":
        return bool(_concept_words(a) & _concept_words(b))
    return frozenset({a, b}) in AMBIGUOUS


def labelled_pairs(units: Sequence[Unit], nodes: str = "headings") -> list[Pairs]:
    """Per source: one node per unit (`section_node` of its heading alone, or with its content when
    `nodes` is "sections") and the pairs of them. A pair of identical objectives says nothing about a
    projection and is left out; a pair of objectives counts once (the statutory titles repeat across
    filers); a pair whose two objectives also occur under the opposite label is dropped."""
    if nodes not in ("headings", "sections"):
        raise ValueError(f"nodes must be 'headings' or 'sections' (got {nodes!r})")
    out = []
    for source in dict.fromkeys(u.source for u in units):
        mine = [u for u in units if u.source == source]
        built = [section_node(u.heading, u.body if nodes == "sections" else "") for u in mine]
        objective = [node_fields(n)[1] for n in built]
        pos: dict[frozenset[str], tuple[int, int]] = {}
        neg: dict[frozenset[str], tuple[int, int]] = {}
        for i, j in itertools.combinations(range(len(mine)), 2):
            a, b = mine[i], mine[j]
            key = frozenset((objective[i], objective[j]))
            if len(key) == 1:
                continue
            if a.label == b.label:
                if a.doc != b.doc:
                    pos.setdefault(key, (i, j))
            elif not _overlapping(source, a.label, b.label) and _folded(a.heading) != _folded(b.heading):
                neg.setdefault(
                    key, (i, j)
                )  # one heading under two labels is the labels' noise, not a negative
        both = pos.keys() & neg.keys()
        out.append(
            Pairs(
                source,
                built,
                [p for k, p in pos.items() if k not in both],
                [p for k, p in neg.items() if k not in both],
                [u.label for u in mine],
            )
        )
    return out


# ------------------------------------------------------------------------------------------ the fit


def roc_auc(positive: Sequence[float], negative: Sequence[float]) -> float:
    """Area under the ROC curve: the probability that a random positive scores above a random negative
    (ties count one half); the Mann-Whitney U statistic over len(positive) * len(negative)."""
    pos, neg = np.asarray(positive, dtype=float), np.asarray(negative, dtype=float)
    if not len(pos) or not len(neg):
        raise ValueError("roc_auc needs at least one positive and one negative")
    values = np.concatenate([pos, neg])
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values))
    sorted_values = values[order]
    # average ranks of ties (1-based)
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_values)) + 1]
    ends = np.r_[starts[1:], len(values)]
    for s, e in zip(starts, ends, strict=True):
        ranks[order[s:e]] = (s + e + 1) / 2.0
    u = ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2.0
    return float(u / (len(pos) * len(neg)))


@dataclass
class Fit:
    """The chosen δ and the figures behind it."""

    delta: float
    gaps: dict[str, list[float]]  # source -> gap per DELTA_GRID value (mean proj of positives - negatives)
    macro: list[float]  # the mean of the sources' gaps per DELTA_GRID value: the criterion
    grid: tuple[float, ...]

    def best(self, source: str) -> float:
        """The δ one source alone would choose."""
        g = self.gaps[source]
        return self.grid[int(np.argmax(g))]

    def at(self, delta: float) -> float:
        return self.macro[self.grid.index(round(delta, 2))] if round(delta, 2) in self.grid else float("nan")


def fit_delta(
    cosines: dict[str, tuple[Sequence[float], Sequence[float]]], grid: Sequence[float] = DELTA_GRID
) -> Fit:
    """δ of the RBF projection that maximises the separation of positives from negatives: per source
    the mean projected similarity of its positive pairs minus that of its negative pairs (what Algorithm
    1 saves when it substitutes the right section rather than a wrong one, in units of 2 (1 - w)),
    averaged over the sources so the largest does not decide alone. Ties go to the smaller δ.

    `cosines`: source -> (cosines of its positive pairs, cosines of its negative pairs)."""
    grid = tuple(grid)
    gaps: dict[str, list[float]] = {}
    for source, (pos, neg) in cosines.items():
        p, n = np.asarray(pos, dtype=float), np.asarray(neg, dtype=float)
        if not len(p) or not len(n):
            raise ValueError(f"{source}: needs positive and negative pairs")
        gaps[source] = [
            float(project_array(p, "rbf", d, 2).mean() - project_array(n, "rbf", d, 2).mean()) for d in grid
        ]
    macro = [float(np.mean([g[k] for g in gaps.values()])) for k in range(len(grid))]
    return Fit(grid[int(np.argmax(macro))], gaps, macro, grid)


def pair_values(
    pairs: Pairs, values: Callable[[list[dict], list[dict]], np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """(values of the positive pairs, values of the negative pairs) from `values(nodes, nodes)`, a
    (len, len) matrix such as a node similarity's `matrix` or a cosine matrix."""
    m = np.asarray(values(pairs.nodes, pairs.nodes), dtype=float)

    def take(ps: list[tuple[int, int]]) -> np.ndarray:
        if not ps:
            return np.zeros(0)
        i, j = np.asarray(ps).T
        return m[i, j]

    return take(pairs.positive), take(pairs.negative)


def cosine_matrix(embed: Callable[[list[str]], np.ndarray]) -> Callable[[list[dict], list[dict]], np.ndarray]:
    """``matrix(nodes_a, nodes_b)``: the raw cosines of the nodes' objectives (what the projection maps)."""

    def matrix(nodes_a: list[dict], nodes_b: list[dict]) -> np.ndarray:
        ta, tb = [node_fields(n)[1] for n in nodes_a], [node_fields(n)[1] for n in nodes_b]
        texts = list(dict.fromkeys(ta + tb))
        arr = np.asarray(embed(texts), dtype=float)
        norms = np.linalg.norm(arr, axis=1, keepdims=True)
        arr = np.divide(arr, norms, out=np.zeros_like(arr), where=norms > 0)
        at = {t: k for k, t in enumerate(texts)}
        return np.clip(arr[[at[t] for t in ta]] @ arr[[at[t] for t in tb]].T, -1.0, 1.0)

    return matrix
