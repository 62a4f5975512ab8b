"""The offline form-free plan of a source kind whose documents are neither one filing's sections nor
papers (layout "documents", tasks.sources): an overview over every document, then one section per
document under its own title, so the plan follows what the snapshot actually holds."""

from __future__ import annotations

import re
from collections import Counter

from tasks.ground.load import GroundingSet
from tasks.llm.backend import StepContext
from tasks.markdown.text import terms
from tasks.synthesize.offline.structure_common import _container, _leaf

TOPIC_TERMS = 6  # a document's most frequent terms, named in its objective: what its leaf retrieves on


def _topics(texts: list[str]) -> str:
    """The most frequent terms of the texts (ties in first-seen order), as words for an objective."""
    counts = Counter(t for text in texts for t in terms(text) if len(t) > 2 and not t.isdigit())
    return ", ".join(t for t, _ in counts.most_common(TOPIC_TERMS))


def documents_structure(gset: GroundingSet, ctx: StepContext) -> tuple[str, list[dict]]:
    """(title, sections) of the plan: sections as `{type, title, objective, sources, children}` dicts."""
    ids = [d.doc_id for d in gset.documents]
    every = _topics([gset.texts[i] for i in ids])
    summary = _leaf(
        "text", "Summary", f"States the main facts, figures and decisions of the period: {every}.", ids
    )
    overview = _container(
        "section",
        "Overview",
        "Summarises what the documents of this period report, across all of them.",
        [summary],
    )
    sections = [overview]
    seen: set[str] = set()
    for d in gset.documents:
        title = re.sub(r"\s+", " ", d.title).strip() or d.doc_id
        if title.casefold() in seen:  # two documents of one title: the section names which
            title = f"{title} ({d.doc_id})"
        seen.add(title.casefold())
        leaves = [
            _leaf(
                "text",
                title,
                f"Reports what {title} states about {_topics([gset.texts[d.doc_id]])}.",
                [d.doc_id],
            )
        ]
        if d.tables:
            leaves.append(
                _leaf("table", f"{title}: figures", f"Tabulates the figures {title} gives.", [d.doc_id])
            )
        sections.append(_container("section", title, f"Covers {title}.", leaves))
    topic = ctx.domain.replace("-", " ").replace("_", " ")
    return f"{topic}: report for {ctx.snapshot}", sections
