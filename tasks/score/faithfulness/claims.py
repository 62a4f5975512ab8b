"""The claims of a report: the offline extraction (`claims_of`), the figures a claim asserts
(`claim_figures`), and R' cut into parts for the LLM's extraction (`report_chunks`)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from schemas.scoring import Claim
from tasks.markdown.document import code_mask, heading_of
from tasks.markdown.numbers import Num, numbers_in
from tasks.markdown.pieces import DATE, MATH, fix_dates, markdown_pieces, row_figures
from tasks.markdown.text import split_sentences
from tasks.score.faithfulness.params import MIN_WORDS
from tasks.tokens import count_tokens

# ---------------------------------------------------------------- text helpers

_WORDS = re.compile(r"[A-Za-z][A-Za-z'’-]*")
_XREF = re.compile(
    r"(?:\b(?:tables?|figures?|figs?|sections?|secs?|eqs?|equations?|appendix|appendices|notes?|items?|"
    r"parts?|footnotes?|chapters?|exhibits?|schedules?|articles?|steps?|stages?|phases?|refs?|rules?)"
    r"\.?\s*|§\s*)$",
    re.IGNORECASE,
)
_CITATION = re.compile(r"\[\s*\d{1,3}(?:\s*[,–-]\s*\d{1,3})*\s*\]")
# not claims: placeholders, boilerplate notes, statements that the sources say nothing (no passage can
# support an absence)
_PLACEHOLDER, _BOILERPLATE, _NO_CONTENT = (
    re.compile(pattern, re.I)
    for pattern in (
        r"^(?:n/?a|tbd|tba|none|nil|not applicable|not available|to be (?:determined|added|confirmed)|"
        r"\.{2,}|…|[-–—]+|\[[^\]]*\]|placeholder|lorem ipsum.*)\.?$",
        r"^(?:\(.*\)|table of contents|\(?unaudited\)?|see accompanying notes.*)\.?$",
        r"\b(?:documents?|sources?|filings?|papers?) (?:of|for) (?:the|this) (?:period|window|quarter|year) "
        r"(?:do(?:es)? not|did not) (?:cover|mention|discuss|report|address)\b",
    )
)
_MARKUP = re.compile(r"\*\*|__|`+|\\")


def _norm(text: str) -> str:
    """Whitespace- and emphasis-normalised text for verbatim matching."""
    return " ".join(_MARKUP.sub("", text).split())


def _figures_of(text: str) -> list[tuple[Num, bool]]:
    """(number, weak) for the figures of `text`: cross-references and citation markers dropped; weak =
    a year, part of a date, or inside LaTeX math (an exponent is not a reported figure)."""
    text = fix_dates(text)
    cites = [m.span() for m in _CITATION.finditer(text)]
    weak_spans = [m.span() for m in DATE.finditer(text)] + [m.span() for m in MATH.finditer(text)]
    out: list[tuple[Num, bool]] = []
    for n in numbers_in(text):
        if _XREF.search(text[max(0, n.start - 16) : n.start]):
            continue
        if any(a <= n.start and n.end <= b for a, b in cites):
            continue
        weak = n.yearlike or any(a <= n.start and n.end <= b for a, b in weak_spans)
        out.append((n, weak))
    return out


def _row_figures_of(content: str, source: str) -> list[tuple[Num, bool]]:
    """(figure, weak) of a table-row claim: its cells read with the table (`pieces.row_figures`: stated
    unit, column periods), cross-references and citation markers left out as in `_figures_of`."""
    out: list[tuple[Num, bool]] = []
    seen: dict[str, dict[tuple[int, int], bool]] = {}
    for n, cell in row_figures(content, source):
        if cell not in seen:
            seen[cell] = {(m.start, m.end): w for m, w in _figures_of(cell)}
        weak = seen[cell].get((n.start, n.end))
        if weak is not None:
            out.append((n, weak))
    return out


def _claim_figs(content: str, source: str = "") -> tuple[list[Num], list[bool]]:
    """The distinct figures a claim asserts, each with its weak flag (weak only if every occurrence is)."""
    if source.strip().startswith("|"):
        found = _row_figures_of(content, source)
    else:
        found = _figures_of(content)
    index: dict[tuple, int] = {}
    out: list[Num] = []
    weak: list[bool] = []
    for n, w in found:
        key = n.key
        if key in index:
            weak[index[key]] = weak[index[key]] and w
            continue
        index[key] = len(out)
        out.append(n)
        weak.append(w)
    return out, weak


def claim_figures(content: str, source: str = "") -> list[Num]:
    """The figures a claim asserts (docs/metrics/faithfulness.md, "Figures"), distinct by what they say
    (signed value, precision, unit, period, scale)."""
    return _claim_figs(content, source)[0]


def _strong_figures(content: str, source: str = "") -> list[Num]:
    figs, weak = _claim_figs(content, source)
    return [n for n, w in zip(figs, weak, strict=True) if not w]


def _sig(n: Num) -> int:
    if n.magnitude <= 0:
        return 1
    return max(1, int(math.floor(math.log10(n.magnitude) - math.log10(n.step) + 1e-9)) + 1)


def _is_claim(kind: str, text: str) -> bool:
    t = text.strip()
    if not t or _PLACEHOLDER.match(t) or _BOILERPLATE.match(t) or _NO_CONTENT.search(t):
        return False
    if kind == "row":
        return True
    return len(_WORDS.findall(t)) >= MIN_WORDS


def _eff_sig(n: Num) -> int:
    """Significant digits a figure claims: trailing zeros of a whole number do not count ("1,350" -> 3,
    "1,200" -> 2), shown decimals do ("12.50" -> 4)."""
    digits = n.text_digits.lstrip("0")
    if "." not in n.text:
        digits = digits.rstrip("0")
    return max(1, len(digits))


def claims_of(markdown: str) -> list[Claim]:
    """The offline claims of a Markdown report (docs/metrics/faithfulness.md, "Claims")."""
    out: list[Claim] = []
    for p in markdown_pieces(markdown):
        if _is_claim(p.kind, p.text):
            out.append(Claim(claim_id=len(out), content=p.text, source_sentence=p.source, section=p.section))
    return out


# ---------------------------------------------------------------- R' in parts (the LLM's extraction)


def _sections(markdown: str) -> list[tuple[str, str]]:
    """(heading path, text) per section of a Markdown report, in order; the text includes its heading."""
    out: list[tuple[str, list[str]]] = []
    stack: list[tuple[int, str]] = []
    cur: list[str] = []
    path = ""
    lines = markdown.replace("\r\n", "\n").split("\n")
    for line, code in zip(lines, code_mask(lines, "lenient"), strict=True):
        head = None if code else heading_of(line)
        if head:
            if any(x.strip() for x in cur):
                out.append((path, cur))
            stack = [(lv, t) for lv, t in stack if lv < head.level] + [(head.level, head.title.strip())]
            path = " > ".join(t for _, t in stack)
            cur = [line]
        else:
            cur.append(line)
    if any(x.strip() for x in cur):
        out.append((path, cur))
    return [(p, "\n".join(lines).strip()) for p, lines in out]


def _split_text(text: str, budget: int, measure: Callable[[str], int] = count_tokens) -> list[str]:
    """Cut `text` (over budget) at blank-line blocks; a big table at rows (header repeated), a big
    paragraph at sentences. Pieces are whole; one sentence over budget stays one piece. Sizes are tokens,
    or `measure`."""
    blocks = [b for b in re.split(r"\n\s*\n", text) if b.strip()]
    pieces: list[str] = []
    for b in blocks:
        if measure(b) <= budget:
            pieces.append(b)
            continue
        lines = b.split("\n")
        table_at = next((i for i, ln in enumerate(lines) if ln.strip().startswith("|")), None)
        if (
            table_at is not None
            and len(lines) > table_at + 2
            and re.match(r"^\s*\|?\s*:?-", lines[table_at + 1])
        ):
            head = lines[: table_at + 2]
            rows = lines[table_at + 2 :]
            group: list[str] = []
            for r in rows:
                if group and measure("\n".join(head + group + [r])) > budget:
                    pieces.append("\n".join(head + group))
                    group = []
                group.append(r)
            if group:
                pieces.append("\n".join(head + group))
            continue
        sents = split_sentences(" ".join(b.split()))
        group = []
        for s in sents:
            if group and measure(" ".join(group + [s])) > budget:
                pieces.append(" ".join(group))
                group = []
            group.append(s)
        if group:
            pieces.append(" ".join(group))
    return pieces


def report_chunks(
    markdown: str, budget: int, measure: Callable[[str], int] = count_tokens
) -> list[tuple[str, str]]:
    """(heading path of the chunk's first section, text) chunks of R', each within `budget` (tokens, or
    `measure`) unless a single sentence is larger; consecutive sections are packed together, nothing is
    dropped."""
    chunks: list[tuple[str, str]] = []
    cur: list[str] = []
    cur_path = ""
    cur_tok = 0
    for path, text in _sections(markdown):
        t = measure(text)
        if t > budget:
            if cur:
                chunks.append((cur_path, "\n\n".join(cur)))
                cur, cur_tok = [], 0
            heading = f"(continued: {path})\n\n" if path else ""
            for i, piece in enumerate(_split_text(text, budget, measure)):
                chunks.append((path, piece if i == 0 else heading + piece))
            continue
        if cur and cur_tok + t > budget:
            chunks.append((cur_path, "\n\n".join(cur)))
            cur, cur_tok = [], 0
        if not cur:
            cur_path = path
        cur.append(text)
        cur_tok += t
    if cur:
        chunks.append((cur_path, "\n\n".join(cur)))
    return chunks
