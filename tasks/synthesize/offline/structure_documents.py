"""The offline form-free plan of a source kind whose documents are neither one filing's sections nor
papers (layout "documents", tasks.sources): an overview over every document, then one section per
document under its own title, so the plan follows what the snapshot actually holds."""

from __future__ import annotations

import re
from collections import Counter

from tasks.ground.load import GroundingSet
from tasks.llm.backend import StepContext
from tasks.markdown.text import terms

TOPIC_TERMS = 6  # a document's most frequent terms, named in its objective: what its leaf retrieves on


def _topics(texts: list[str]) -> str:
    """The most frequent terms of the texts (ties in first-seen order), as words for an objective."""
    counts = Counter(t for text in texts for t in terms(text) if len(t) > 2 and not t.isdigit())
    return ", ".join(t for t, _ in counts.most_common(TOPIC_TERMS))


def _node(
    kind: str, title: str, objective: str, sources: list[str], children: list[dict] | None = None
) -> dict:
    return {
        "type": kind,
        "title": title,
        "objective": objective,
        "sources": list(dict.fromkeys(sources)),
        "children": children or [],
    }


def documents_structure(gset: GroundingSet, ctx: StepContext) -> tuple[str, list[dict]]:
    """(title, sections) of the plan: sections as `{type, title, objective, sources, children}` dicts."""
    ids = [d.doc_id for d in gset.documents]
    every = _topics([gset.texts[i] for i in ids])
    overview = _node(
        "section",
        "Overview",
        "Summarises what the documents of this period report, across all of them.",
        ids,
        [
            _node(
                "text",
                "Summary",
                f"States the main facts, figures and decisions of the period: {every}.",
                ids,
            )
        ],
    )
    sections = [overview]
    seen: set[str] = set()
    for d in gset.documents:
        title = re.sub(r"\s+", " ", d.title).strip() or d.doc_id
        if title.casefold() in seen:  # two documents of one title: the section names which
            title = f"{title} ({d.doc_id})"
        seen.add(title.casefold())
        leaves = [
            _node(
                "text",
                title,
                f"Reports what {title} states about {_topics([gset.texts[d.doc_id]])}.",
                [d.doc_id],
            )
        ]
        if d.tables:
            leaves.append(
                _node("table", f"{title}: figures", f"Tabulates the figures {title} gives.", [d.doc_id])
            )
        sections.append(_node("section", title, f"Covers {title}.", [d.doc_id], leaves))
    topic = ctx.domain.replace("-", " ").replace("_", " ")
    return f"{topic}: report for {ctx.snapshot}", sections
