"""Offline form-free structure for a window of papers (layout "papers": arXiv), SPEC §2.4.

"Overview" (text over all abstracts); "Research Themes" with one subsection per paper (title = paper
title; leaves: problem-and-method text, results text, a table leaf if the paper has a table, a figure
leaf if it has a figure, preferring those of its results section); "Comparison of Approaches" (a table
leaf over all papers: one row per paper); "Open Questions" (text from conclusion/discussion sections).
"""

from __future__ import annotations

import re

from schemas.documents import GroundingDocument
from tasks.ground.load import GroundingSet
from tasks.llm.backend import StepContext
from tasks.markdown.text import split_sentences
from tasks.synthesize.offline.structure_common import (
    LEAD_MAX_WORDS,
    Part,
    _container,
    _leaf,
    doc_parts,
    lead_sentence,
    norm,
    numeric_cells,
)
from tasks.synthesize.retrieve import Block

_RESULTS = re.compile(
    r"result|experiment|evaluation|finding|application|use case|performance|analysis", re.IGNORECASE
)
_CONCLUSION = re.compile(r"conclu|discussion|summary|outlook|future|limitation", re.IGNORECASE)


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
    """(survey title, sections) for the window's papers, in grounding-set order."""
    docs = list(gset.documents)
    ids = [d.doc_id for d in docs]
    shorts = [short_title(d.title) for d in docs]
    subs = [_paper_subsection(gset, d, short) for d, short in zip(docs, shorts, strict=True)]
    themes = _container(
        "section",
        "Research Themes",
        "Presents each paper of the window in turn: problem, method, results and key evidence.",
        subs,
        ids,
    )
    topic = ctx.domain.replace("-", " ").replace("_", " ")
    sections = [
        _overview_section(ids, shorts),
        themes,
        _comparison_section(ids),
        _open_questions_section(ids),
    ]
    return f"Literature survey: {topic} ({ctx.snapshot})", sections


def _overview_section(ids: list[str], shorts: list[str]) -> dict:
    return _container(
        "section",
        "Overview",
        f"Introduces the {len(ids)} papers of this window and the problems they address: "
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


def _paper_subsection(gset: GroundingSet, d: GroundingDocument, short: str) -> dict:
    """One paper's subsection of "Research Themes"."""
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
    return _container(
        "subsection",
        d.title.strip(),
        f"Covers {short}: its problem, method and results" + (f"; {lead}" if lead else "."),
        kids,
        [d.doc_id],
    )


def _comparison_section(ids: list[str]) -> dict:
    return _container(
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


def _open_questions_section(ids: list[str]) -> dict:
    return _container(
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
