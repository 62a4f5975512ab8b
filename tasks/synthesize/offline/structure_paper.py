"""Offline form-free structure for a window of papers (layout "papers": arXiv), SPEC §2.4.

The survey opens with an "Overview" (text over all abstracts) and closes with "Open Questions" (text
from conclusion/discussion sections): the frame every survey has. Between them are the window's own
themes, not a fixed academic template: every paper gets keywords
(words of its title, weighted double, and abstract; stop words, words under 4 letters and generic
research words left out, a plural counted with its singular), weighted by tf-idf over the window; the
papers are clustered agglomeratively (the pair of clusters with the most similar keyword vectors merged
first, ties to the earlier papers) into ceil(n/2) themes (papers sharing no keyword
are not merged). A theme is named by its 3 best keywords (those
shared by most of its papers, then by weight, in the form the papers write them) and holds one
subsection per paper (title = paper title; leaves: problem-and-method text, results text, a table leaf
if the paper has a table, a figure leaf if it has a figure, preferring those of its results section)
and, with two papers or more, a "Comparison of approaches" table leaf (one row per paper).
Form-restricted (t2, t3): the themes are prev's, by title; each new paper joins the theme whose title
shares the most of its keyword weight, every theme first taking its best paper while papers remain.
`structure.adapt_structure` then renames each theme by the keywords of the papers it now holds and
drops a theme left without a paper (its old title would name the earlier window's work).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable

from schemas.documents import GroundingDocument
from tasks.ground.load import GroundingSet
from tasks.llm.backend import StepContext
from tasks.markdown.text import STOPWORDS, split_sentences
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


def _paper_structure(
    gset: GroundingSet, ctx: StepContext, themes: list[str] | None = None
) -> tuple[str, list[dict]]:
    """(survey title, sections): one section per theme of the window's papers (`themes`: prev's theme
    titles, which the papers are assigned to instead of clustering them)."""
    docs = list(gset.documents)
    counts = [_keywords(gset, d) for d in docs]
    weights = _keyword_weights(counts)
    groups = _assign(weights, themes) if themes else _cluster(weights)
    all_ids = [d.doc_id for d in docs]
    sections = [_overview_section(all_ids, [short_title(d.title) for d in docs])]
    for k, members in enumerate(groups):
        if not members and themes is None:
            continue
        # the papers' own keywords name the theme; prev's title stays the section's until the form-restricted
        # step has matched it (structure._renamed_themes then renames it)
        name = theme_title([weights[i] for i in members], [counts[i] for i in members])
        title = themes[k] if themes else name
        ids = [docs[i].doc_id for i in members]
        shorts = [short_title(docs[i].title) for i in members]
        subs = [_paper_subsection(gset, docs[i], short) for i, short in zip(members, shorts, strict=True)]
        if len(members) >= 2:
            subs.append(_comparison_leaf(ids))
        sections.append(
            _container(
                "section",
                title,
                f"Covers the window's work on {name}: " + "; ".join(shorts) + "."
                if shorts
                else f"Covers {title}.",
                subs,
                ids,
            )
        )
    sections.append(_open_questions_section(all_ids))
    topic = ctx.domain.replace("-", " ").replace("_", " ")
    return f"Literature survey: {topic} ({ctx.snapshot})", sections


# The survey's frame, the same for every topic and window: what a reader of any survey finds around its
# themes, and what keeps successive windows' reports recognisably one form while their themes change.
OVERVIEW, OPEN_QUESTIONS = "Overview", "Open Questions"
FRAMING = (OVERVIEW, OPEN_QUESTIONS)


def _overview_section(ids: list[str], shorts: list[str]) -> dict:
    return _container(
        "section",
        OVERVIEW,
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


def _open_questions_section(ids: list[str]) -> dict:
    return _container(
        "section",
        OPEN_QUESTIONS,
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


MIN_SIMILARITY = 0.05
_GENERIC = frozenset(
    """paper papers study studies result results method methods approach approaches present presents
    presented show shows shown find finds found using used based work also well however further first
    new novel propose proposed provide provides allow allows within across different several various
    including model models data analysis here thus therefore each while well large high low""".split()
)


def _keywords(gset: GroundingSet, d: GroundingDocument) -> Counter[str]:
    """Surface words of a paper's title (twice) and abstract, by count; plural and singular merged."""
    parts = paper_parts(gset.texts[d.doc_id])
    ab = _abstract(parts)
    abstract = " ".join(b.text for b in ab.prose()) if ab else ""
    # no TeX words, no bracketed metadata ("[Institutetext: Leiden Observatory ...]")
    text = re.sub(r"\$[^$]*\$|\\[A-Za-z]+|\[[A-Z][a-z]+:[^\]]*\]", " ", f"{d.title} {d.title} {abstract}")
    words = re.findall(r"[a-z][a-z-]*[a-z]", text.lower())
    return Counter(w for w in words if len(w) > 3 and w not in STOPWORDS and w not in _GENERIC)


def _stem(word: str) -> str:
    return word[:-1] if word.endswith("s") and not word.endswith("ss") else word


def _keyword_weights(counts: list[Counter[str]]) -> list[dict[str, float]]:
    """tf-idf per paper over stems: a word every paper of the window uses names no theme."""
    stems = [Counter({}) for _ in counts]
    for c, st in zip(counts, stems, strict=True):
        for w, n in c.items():
            st[_stem(w)] += n
    df = Counter(w for st in stems for w in st)
    n = len(stems)
    return [{w: k * math.log((1 + n) / df[w]) for w, k in st.items() if df[w] < n or n == 1} for st in stems]


def _cosine(a: dict[str, float], b: dict[str, float]) -> float:
    dot = sum(v * b.get(w, 0.0) for w, v in a.items())
    na, nb = math.sqrt(sum(v * v for v in a.values())), math.sqrt(sum(v * v for v in b.values()))
    return dot / (na * nb) if na and nb else 0.0


def _cluster(weights: list[dict[str, float]]) -> list[list[int]]:
    """ceil(n/2) groups of paper indices, most similar clusters merged first, in paper order."""
    groups = [[i] for i in range(len(weights))]
    target = max(1, math.ceil(len(weights) / 2))

    def vec(g: list[int]) -> dict[str, float]:
        out: Counter[str] = Counter()
        for i in g:
            out.update(weights[i])
        return dict(out)

    while len(groups) > target:
        pairs = [(a, b) for a in range(len(groups)) for b in range(a + 1, len(groups))]
        a, b = max(pairs, key=lambda p: (_cosine(vec(groups[p[0]]), vec(groups[p[1]])), -p[0], -p[1]))
        if _cosine(vec(groups[a]), vec(groups[b])) < MIN_SIMILARITY:
            break  # papers sharing no keyword stay apart
        groups[a] = sorted(groups[a] + groups[b])
        del groups[b]
    return groups


def theme_title(weights: list[dict[str, float]], counts: list[Counter[str]], n: int = 3) -> str:
    """The theme's best keywords (shared by most of its papers, then by weight), as the papers write them."""
    total: Counter[str] = Counter()
    for w in weights:
        total.update(w)
    shared = Counter(s for w in weights for s in w)
    best = sorted(total, key=lambda s: (-shared[s], -total[s], s))[:n]
    surface: Counter[str] = Counter()
    for c in counts:
        surface.update(c)
    names = []
    for s in best:
        form = max((w for w in surface if _stem(w) == s), key=lambda w: (surface[w], w))
        names.append(form[:1].upper() + form[1:])
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else "".join(names) or "Papers"


def window_theme_namer(gset: GroundingSet) -> Callable[[list[str]], str]:
    """The theme title of a group of the window's papers (by doc_id), keywords weighted over the whole
    window (computed once): a form-restricted theme is renamed by the papers it holds now."""
    docs = list(gset.documents)
    counts = [_keywords(gset, d) for d in docs]
    weights = _keyword_weights(counts)

    def name(doc_ids: list[str]) -> str:
        ids = set(doc_ids)
        idx = [i for i, d in enumerate(docs) if d.doc_id in ids]
        return theme_title([weights[i] for i in idx], [counts[i] for i in idx])

    return name


def _assign(weights: list[dict[str, float]], themes: list[str]) -> list[list[int]]:
    """Papers to prev's themes by the keyword weight a theme's title shares; each theme first takes its
    best paper while papers remain, the rest go to their best theme."""
    title_stems = [{_stem(w) for w in re.findall(r"[a-z][a-z-]*[a-z]", t.lower())} for t in themes]

    def score(i: int, k: int) -> float:
        return sum(v for s, v in weights[i].items() if s in title_stems[k])

    groups: list[list[int]] = [[] for _ in themes]
    free = list(range(len(weights)))
    for k in range(len(themes)):
        if not free:
            break
        best = max(free, key=lambda i: (score(i, k), -i))
        groups[k].append(best)
        free.remove(best)
    for i in free:
        groups[max(range(len(themes)), key=lambda k: (score(i, k), -k))].append(i)
    return [sorted(g) for g in groups]


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


def _comparison_leaf(ids: list[str]) -> dict:
    return _leaf(
        "table",
        "Comparison of approaches",
        "Tabulates, for each paper of the theme, the approach it presents in its abstract and the main "
        "result it reports in its abstract or conclusions.",
        ids,
    )
