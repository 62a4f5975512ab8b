"""A metric checklist (in the spirit of CheckList, Ribeiro et al. 2020, and of perturbation checklists for
NLG metrics, Sai et al. 2021): perturb a gold report in a way whose effect on its meaning is known, score the
perturbed report against the gold with a metric, and check that the score moves the right way.

Meaning-changing perturbations (`CHANGING`) must lower a metric that looks at what they change by at least
`DROP` of its range; meaning-preserving ones (`PRESERVING`) must leave it within `STEADY`. Each perturbation
is a pure function of the Markdown text (and, for a retitled heading, of a table of other filers' titles)
that returns the perturbed text, or None when the report has nothing it could change (no table to remove, too
few figures): such instances are not counted. The figures of a report are found by this module's own plain
pattern, not by frame's number reader (tasks/markdown/numbers.py), so a perturbation never inherits that
reader's blind spots. Runner: benchmarks/metric_checklist.py; results: docs/metrics/robustness.md.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from tasks.markdown.document import Block, is_table_row, parse
from tasks.markdown.text import split_sentences

__all__ = [
    "CHANGING",
    "DROP",
    "PERTURBATIONS",
    "PRESERVING",
    "STEADY",
    "Perturbation",
    "MIN_CHANGED",
    "body_figures",
    "changed_share",
    "filer_titles",
    "moved_right",
    "perturb",
    "reference_of",
    "without_tables",
]

DROP = 0.05  # a meaning-changing perturbation must lower the score by at least this share of its range
# ...and it counts only where it changes at least this share of the report's sentences and table rows
# (`changed_share`), twice DROP: an ideal recall or precision metric then drops by >= 2 x DROP, so a cell
# below the bar is the metric's fault, not a perturbation too small to see (3 direction words among 200
# sentences move no recall by 5%)
MIN_CHANGED = 0.10
STEADY = 0.02  # a meaning-preserving one must keep it within this share of its range
MIN_FIGURES = 3  # a report with fewer body figures (or direction words) has too little to perturb

# ---------------------------------------------------------------- figures, as this checklist reads them

# A figure: digits with thousands commas and decimals, optionally $-prefixed or parenthesised, not glued to a
# word ("10-Q", "H100", "GPT-4", "3D") and not a reference number ("Item 7", "Note 3", "Table 2").
_FIGURE = re.compile(
    r"(?<![\w.,/\-])(?<!\\)(?P<open>\()?(?P<cur>\$)?(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"(?P<close>\))?(?![\w,]|\.\d|-[A-Za-z])"
)
_REFERENCE = re.compile(
    r"(?:item|note|part|section|figure|fig\.|table|chapter|exhibit|appendix|step|phase|q|h|page|pp?\.)\s*$",
    re.I,
)


def _yearlike(num: str) -> bool:
    return re.fullmatch(r"(19|20)\d\d", num) is not None


def _is_figure(line: str, m: re.Match[str]) -> bool:
    return not _REFERENCE.search(line[: m.start()]) and not _yearlike(m.group("num"))


def _body_lines(markdown: str) -> list[tuple[int, bool]]:
    """(index, is_body) of every line: headings, code and math blocks are not body."""
    lines = markdown.split("\n")
    body = [True] * len(lines)
    for b in parse(markdown, images="start").blocks:
        if b.kind in ("heading", "code", "math"):
            for k in range(b.start - 1, b.end):
                if k < len(body):
                    body[k] = False
    return list(enumerate(body))


def body_figures(markdown: str) -> list[str]:
    """Every figure of the body (not headings, code or years), as written."""
    lines = markdown.split("\n")
    return [
        m.group(0)
        for i, body in _body_lines(markdown)
        if body
        for m in _FIGURE.finditer(lines[i])
        if _is_figure(lines[i], m)
    ]


def _map_body(markdown: str, fn: Callable[[str], str]) -> str:
    lines = markdown.split("\n")
    for i, body in _body_lines(markdown):
        if body:
            lines[i] = fn(lines[i])
    return "\n".join(lines)


def _map_figures(markdown: str, fn: Callable[[re.Match[str]], str]) -> str | None:
    if len(body_figures(markdown)) < MIN_FIGURES:
        return None

    def line_fn(line: str) -> str:
        return _FIGURE.sub(lambda m: fn(m) if _is_figure(line, m) else m.group(0), line)

    return _map_body(markdown, line_fn)


def _fmt(value: float, decimals: int) -> str:
    return f"{value:,.{decimals}f}"


# ---------------------------------------------------------------- meaning-changing


def figures_x1000(markdown: str) -> str | None:
    """Every body figure written 1000 times larger ("$97,960" -> "$97,960,000", "2.41" -> "2,410")."""

    def scale(m: re.Match[str]) -> str:
        num = m.group("num").replace(",", "")
        decimals = max(0, len(num.split(".")[1]) - 3) if "." in num else 0
        out = _fmt(float(num) * 1000, decimals)
        return f"{m.group('open') or ''}{m.group('cur') or ''}{out}{m.group('close') or ''}"

    return _map_figures(markdown, scale)


def signs_flipped(markdown: str) -> str | None:
    """Every body figure of the other sign: "(248)" -> "248", "$97,960" -> "-$97,960"."""

    def flip(m: re.Match[str]) -> str:
        cur, num = m.group("cur") or "", m.group("num")
        if m.group("open") and m.group("close"):
            return f"{cur}{num}"
        return f"{m.group('open') or ''}-{cur}{num}{m.group('close') or ''}"

    return _map_figures(markdown, flip)


def years_shifted(markdown: str) -> str | None:
    """Every year of the body one later ("fiscal 2024" -> "fiscal 2025", "December 28, 2024" -> 2025)."""
    year = re.compile(r"(?<![\w.,$\-])(19|20)(\d\d)(?![\w,]|\.\d)")
    if sum(len(year.findall(markdown.split("\n")[i])) for i, b in _body_lines(markdown) if b) < MIN_FIGURES:
        return None
    return _map_body(markdown, lambda line: year.sub(lambda m: str(int(m.group(0)) + 1), line))


# Both ways: every form of a direction word and the form of the opposite direction that takes its place.
_DIRECTION_PAIRS = (
    ("increase", "decrease"),
    ("increased", "decreased"),
    ("increases", "decreases"),
    ("increasing", "decreasing"),
    ("rose", "fell"),
    ("rise", "fall"),
    ("rises", "falls"),
    ("risen", "fallen"),
    ("rising", "falling"),
    ("grew", "declined"),
    ("grow", "decline"),
    ("grows", "declines"),
    ("growing", "declining"),
    ("growth", "decline"),
    ("higher", "lower"),
    ("gain", "loss"),
    ("gains", "losses"),
    ("up", "down"),
)
_OPPOSITE = {a: b for a, b in _DIRECTION_PAIRS} | {b: a for a, b in _DIRECTION_PAIRS[::-1]}
_DIRECTION = re.compile(r"\b(" + "|".join(sorted(_OPPOSITE, key=len, reverse=True)) + r")\b", re.I)


def _same_case(word: str, like: str) -> str:
    if like.isupper() and len(like) > 1:
        return word.upper()
    return word[:1].upper() + word[1:] if like[:1].isupper() else word


def directions_reversed(markdown: str) -> str | None:
    """Every direction word of the body turned around: increased <-> decreased, rose <-> fell, grew <->
    declined, higher <-> lower, gain <-> loss, up <-> down (in prose and lists, not in tables)."""
    lines = markdown.split("\n")
    said = [lines[i] for i, b in _body_lines(markdown) if b and not is_table_row(lines[i])]
    if sum(len(_DIRECTION.findall(line)) for line in said) < MIN_FIGURES:
        return None

    def turn(m: re.Match[str]) -> str:
        word = m.group(0)
        # "up"/"down" name a direction only before an amount ("up 12%", "down by $3 million"), not in
        # phrasal verbs ("broken down", "set up")
        if word.lower() in ("up", "down") and not _AMOUNT_NEXT.match(m.string, m.end()):
            return word
        return _same_case(_OPPOSITE[word.lower()], word)

    # statements only: in a table "Gains" / "Losses" are column and row labels, and swapping them moves
    # the cells under another label (a sign change, which signs_flipped covers), not a stated direction
    return _map_body(markdown, lambda line: line if is_table_row(line) else _DIRECTION.sub(turn, line))


_AMOUNT_NEXT = re.compile(r"\s+(?:by\s+|from\s+)?[$(]?\d")


def _sections(markdown: str) -> tuple[list[str], list[tuple[int, int]]]:
    """The lines and the (start, end) line spans of the top-level sections (the shallowest heading level
    below the title, with everything under them)."""
    lines = markdown.split("\n")
    heads = [b for b in parse(markdown, images="start").blocks if b.kind == "heading"]
    levels = sorted({b.level for b in heads if b.level > 1} or {b.level for b in heads})
    if not levels:
        return lines, []
    top = levels[0]
    starts = [b.start - 1 for b in heads if b.level == top]
    closers = [b.start - 1 for b in heads if b.level <= top]
    spans = []
    for s in starts:
        end = min((c for c in closers if c > s), default=len(lines))
        spans.append((s, end))
    return lines, spans


def _words(lines: Sequence[str]) -> int:
    return sum(len(line.split()) for line in lines)


def section_dropped(markdown: str) -> str | None:
    """The largest top-level section (with its subsections) removed."""
    lines, spans = _sections(markdown)
    if len(spans) < 2:
        return None
    s, e = max(spans, key=lambda se: (_words(lines[se[0] : se[1]]), -se[0]))
    return "\n".join(lines[:s] + lines[e:])


def sections_swapped(markdown: str) -> str | None:
    """The two largest top-level sections trade places."""
    lines, spans = _sections(markdown)
    if len(spans) < 2:
        return None
    a, b = sorted(sorted(spans, key=lambda se: (_words(lines[se[0] : se[1]]), -se[0]))[-2:])
    body_a, body_b = lines[a[0] : a[1]], lines[b[0] : b[1]]
    return "\n".join(lines[: a[0]] + body_b + lines[a[1] : b[0]] + body_a + lines[b[1] :])


def _blocks(markdown: str, kind: str) -> list[Block]:
    return [b for b in parse(markdown, images="start").blocks if b.kind == kind]


def _table_key(b: Block) -> str:
    return " ".join(" ".join(b.lines).split())


def table_removed(markdown: str) -> str | None:
    """The largest table removed (of the tables that are not repeated: removing one copy of a table the
    report holds twice removes nothing it says)."""
    tables = _blocks(markdown, "table")
    body = Counter(_table_key(b) for b in tables)
    tables = [b for b in tables if body[_table_key(b)] == 1]
    if not tables:
        return None
    t = max(tables, key=lambda b: (len(b.lines), -b.start))
    lines = markdown.split("\n")
    return "\n".join(lines[: t.start - 1] + lines[t.end :])


# ---------------------------------------------------------------- meaning-preserving


_ENDS_SENTENCE = re.compile(r"[.!?][\"”’)\]]*$")


def _paragraph_runs(markdown: str) -> list[list[Block]]:
    """Runs of consecutive paragraphs (separated by blank lines only); a paragraph that does not end a
    sentence (a caption, a unit note, a lead-in ending in ":", a line standing for a heading) ends its run:
    joining it to the next would change how its text reads, not only the layout."""
    runs: list[list[Block]] = []
    prev: Block | None = None
    for b in parse(markdown, images="start").blocks:
        if (
            b.kind == "paragraph"
            and prev is not None
            and prev.kind == "paragraph"
            and _ENDS_SENTENCE.search(prev.lines[-1].strip())
        ):
            runs[-1].append(b)
        elif b.kind == "paragraph":
            runs.append([b])
        prev = b
    return runs


def paragraphs_merged(markdown: str) -> str | None:
    """Every run of consecutive paragraphs joined into one paragraph."""
    runs = [r for r in _paragraph_runs(markdown) if len(r) > 1]
    if not runs:
        return None
    lines = markdown.split("\n")
    for run in reversed(runs):
        joined = " ".join(" ".join(line.strip() for line in b.lines) for b in run)
        lines[run[0].start - 1 : run[-1].end] = [joined]
    return "\n".join(lines)


def paragraphs_split(markdown: str) -> str | None:
    """Every paragraph of several sentences cut into paragraphs of one sentence each."""
    lines = markdown.split("\n")
    changed = False
    for b in reversed([b for run in _paragraph_runs(markdown) for b in run]):
        # frame's splitter: a cut after "et al." or inside $...$ math would change the text, not its layout
        sentences = split_sentences(" ".join(line.strip() for line in b.lines))
        if len(sentences) > 1:
            changed = True
            out: list[str] = []
            for s in sentences:
                out += [s, ""]
            lines[b.start - 1 : b.end] = out[:-1]
    return "\n".join(lines) if changed else None


def markdown_restyled(markdown: str) -> str | None:
    """The same document in another Markdown style: `*` bullets for `-`, `__` for `**`, closing #'s on
    headings, padded table cells, paragraphs hard-wrapped at 80 columns (soft line breaks)."""
    doc = parse(markdown, images="start")
    lines = markdown.split("\n")
    for b in reversed(doc.blocks):
        span = slice(b.start - 1, b.end)
        if b.kind == "heading":
            lines[span] = [f"{lines[b.start - 1].rstrip()} {'#' * b.level}"]
        elif b.kind == "list":
            lines[span] = [re.sub(r"^(\s*)-(\s)", r"\1*\2", line).replace("**", "__") for line in b.lines]
        elif b.kind == "table":
            lines[span] = [re.sub(r"\s*(?<!\\)\|\s*", " | ", line).strip() for line in b.lines]  # not "\|"
        elif b.kind == "paragraph":
            text = " ".join(line.strip() for line in b.lines).replace("**", "__")
            wrapped, cur = [], ""
            for word in text.split(" "):
                if cur and len(cur) + 1 + len(word) > 80:
                    wrapped.append(cur)
                    cur = word
                else:
                    cur = f"{cur} {word}" if cur else word
            lines[span] = [*wrapped, cur]
    out = "\n".join(lines)
    return out if out != markdown else None


def heading_retitled(markdown: str, titles: Mapping[str, Sequence[str]]) -> str | None:
    """Headings replaced by another filer's title for the same item: `titles` maps a normalised heading
    (lower case, words only) to the other titles filers give that item; the first one that differs is
    used. None when no heading of the report is in `titles`."""
    lines = markdown.split("\n")
    changed = False
    for b in parse(markdown, images="start").blocks:
        if b.kind != "heading" or b.level == 1:
            continue
        others = [t for t in titles.get(_norm_title(b.title), ()) if _norm_title(t) != _norm_title(b.title)]
        if others:
            lines[b.start - 1] = f"{'#' * b.level} {others[0]}"
            changed = True
    return "\n".join(lines) if changed else None


def filer_titles(pairs: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """The `titles` table of `heading_retitled` from (item, title) pairs of real filings (the same Form item
    as different filers title it): every title, and every word prefix of three words or more of it (a
    report's "Management's Discussion and Analysis" is item 7's title cut short), maps to the item's other
    titles, most common first (then the fullest)."""
    by_item: dict[str, Counter[str]] = {}
    for item, t in pairs:
        by_item.setdefault(item, Counter())[t.strip()] += 1
    out: dict[str, list[str]] = {}
    for names in by_item.values():
        # most filers' wording first; among equals a fuller title, and one not in capitals (casing is style)
        ranked = [
            t for t, _ in sorted(names.items(), key=lambda kv: (-kv[1], kv[0].isupper(), -len(kv[0]), kv[0]))
        ]
        for t in ranked:
            words = _norm_title(t).split()
            for k in range(min(3, len(words)), len(words) + 1):
                key = " ".join(words[:k])
                out.setdefault(key, [])
                out[key] += [o for o in ranked if _norm_title(o) != key and o not in out[key]]
    return out


def _norm_title(title: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", title.lower().replace("’", "'")))


# ---------------------------------------------------------------- the checklist


def without_tables(markdown: str) -> str:
    """The report with its tables removed: the prose a direction perturbation is tested on."""
    lines = markdown.split("\n")
    for b in reversed(_blocks(markdown, "table")):
        del lines[b.start - 1 : b.end]
    return "\n".join(lines)


@dataclass(frozen=True)
class Perturbation:
    name: str
    changes_meaning: bool
    what: str  # the aspect of a report it changes (families say which aspects they do not look at)
    fn: Callable[..., str | None]
    # the reference it is applied to and scored against (None: Y itself). Directions are stated in prose
    # only, and in a 10-Q the prose is a minority of the sentences and rows: reversing every direction
    # changes under 10% of Y, too little to hold a metric to the bar, but far more of Y's prose
    base: Callable[[str], str] | None = None


PERTURBATIONS: tuple[Perturbation, ...] = (
    Perturbation("figures_x1000", True, "figures", figures_x1000),
    Perturbation("signs_flipped", True, "figures", signs_flipped),
    Perturbation("directions_reversed", True, "directions", directions_reversed, base=without_tables),
    Perturbation("years_shifted", True, "periods", years_shifted),
    Perturbation("section_dropped", True, "content", section_dropped),
    Perturbation("sections_swapped", True, "order", sections_swapped),
    Perturbation("table_removed", True, "tables", table_removed),
    Perturbation("paragraphs_merged", False, "paragraphing", paragraphs_merged),
    Perturbation("paragraphs_split", False, "paragraphing", paragraphs_split),
    Perturbation("heading_retitled", False, "heading wording", heading_retitled),
    Perturbation("markdown_restyled", False, "markdown style", markdown_restyled),
)
CHANGING = tuple(p.name for p in PERTURBATIONS if p.changes_meaning)
PRESERVING = tuple(p.name for p in PERTURBATIONS if not p.changes_meaning)
_BY_NAME = {p.name: p for p in PERTURBATIONS}


def perturb(name: str, markdown: str, titles: Mapping[str, Sequence[str]] | None = None) -> str | None:
    """The perturbed report, or None when the perturbation does not apply to it."""
    p = _BY_NAME[name]
    if name == "heading_retitled":
        return p.fn(markdown, titles or {})
    return p.fn(markdown)


def reference_of(name: str, gold: str) -> str:
    """The reference `name` is applied to and scored against: Y, or the part of Y it is tested on."""
    base = _BY_NAME[name].base
    return base(gold) if base is not None else gold


def changed_share(before: str, after: str) -> float:
    """Share of the sentences and other non-blank lines (table rows, headings) of `before` that `after`
    changes, removes or moves (difflib's longest matching blocks: of two swapped sections, the smaller
    counts as moved). Sentences, not lines: a paragraph is one line however many sentences it holds,
    and the metrics count sentences and rows."""
    import difflib

    def units(text: str) -> list[str]:
        return [s for line in text.split("\n") if line.strip() for s in (split_sentences(line) or [line])]

    a, b = units(before), units(after)
    if not a:
        return 0.0
    same = sum(m.size for m in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks())
    return 1.0 - same / len(a)


def moved_right(
    name: str, before: float, after: float, low: float, high: float, higher_is_better: bool
) -> bool:
    """Whether a score moved as `name` should move it: down by >= DROP of the range for a meaning-changing
    perturbation (up, for a lower-is-better metric), within STEADY of the range for a preserving one."""
    span = (high - low) or 1.0
    delta = (after - before) / span * (1.0 if higher_is_better else -1.0)
    if _BY_NAME[name].changes_meaning:
        return delta <= -DROP
    return abs(delta) <= STEADY
