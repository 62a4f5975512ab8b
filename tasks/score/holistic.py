"""Holistic direct scores 1-10 (paper 001 App. G.7): the saturation baseline shown beside FRAME's metrics.

A judge rates a generated report R' on four axes, each an integer from 1 to 10 where 10 is best:
faithfulness, completeness, understandability and hallucination (framed as its *absence*: 10 = no
hallucination, so higher is better on every axis). :func:`holistic` turns a rating into four
``MetricResult`` rows named ``schemas.scoring.HOLISTIC_METRICS`` (values 1.0..10.0, no items).

**OfflineHolisticJudge** (``name = "offline:holistic-proxy"``): a deterministic, cheap heuristic with no
embeddings and no model. It stands in for the LLM judge in offline runs and is *not* a reader: it only
looks at figures, headings and surface form. With ``s(x) = round_half_up(1 + 9 x)`` for a share x in [0, 1]:

* Pieces and figures follow the offline coverage judge (``tasks.score.coverage``): a report is cut into
  pieces (sentences, list-item sentences, captions, table rows); a piece's *strong* numbers are its
  figures that are not years, parts of dates, LaTeX math or cross-references ("Table 2").
  Figures match by ``tasks.score.numbers.NumberPool`` (same magnitude at the coarser displayed
  precision, tables' 1000^k scale allowed). G's pool holds every number of every grounding document.
* faithfulness = s(share of the strong-number occurrences of R' found in G). R' without a strong number
  is vacuously faithful (share 1, said in the rationale).
* completeness = s(mean of the defined shares among: Y's strong-number occurrences found anywhere in R';
  Y's H2/H3 headings fuzzy-found among R's headings (rapidfuzz ``token_sort_ratio`` >= 80 after
  lower-casing and dropping section numbering)). When Y has neither, the share of Y's distinct words of
  4+ letters present in R' is used instead.
* understandability = s(mean of four 0/1 checks): R' has a section heading (not just a leading H1
  title); the median prose sentence has <= 35 words (vacuously true without prose); no paragraph of 5+
  words appears twice; no raw HTML tag or entity outside code fences.
* hallucination = s(1 - share of R's pieces that carry a strong number found nowhere in G).
* An *empty* R' (no piece: whitespace or headings only) gets 1 on every axis.

Its limits are the point of a baseline: a report without figures is "faithful", a fabricated sentence
without a number is invisible, a right figure in the wrong context counts as found.

**LLMHolisticJudge** (role ``score_holistic``, prompt ``prompts/score_holistic.md``,
``name = "openai:<model>"``): the G.7 protocol with the gold report Y as the reference written from the
same sources, as much of the grounding documents G as fits, and R'. Reply
``{"faithfulness", "completeness", "understandability", "hallucination", "rationale"}`` validated by
:class:`HolisticReply` (integers 1..10; otherwise a corrective retry, then ``LLMOutputError``).

*Budget.* The input budget is ``context_tokens - max_output_tokens - min(2000, context_tokens // 10)``
minus the prompt's own tokens. When Y, R' and G do not fit, G gets at least 40% of the room (or what it
needs), Y and R' share the rest in proportion to their sizes, and the documents share G's room by
water-filling (small documents whole, the larger ones an equal share; documents whose share would fall
below ``MIN_DOC_TOKENS`` are left out, last ones first). Every cut is at a line boundary (a single
over-long line is cut at a word) and marked in the text, and the prompt's note says what was cut and
which documents were left out: inputs are never cut silently. The note is also kept in the result detail.

The truncation helpers (:func:`cut_to_tokens`, :func:`proportional_caps`, :func:`water_fill`) are shared
with ``tasks.score.pairwise``.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import BaseModel, Field
from rapidfuzz import fuzz, process
from rapidfuzz.utils import default_process

from schemas.config import LLMSettings
from schemas.scoring import HOLISTIC_METRICS, MetricResult
from tasks.errors import FrameInputError
from tasks.ground.tokens import count_tokens, count_tokens_many, get_encoder
from tasks.llm.prompts import load_prompt, render
from tasks.score.coverage import Piece, _md_blocks, _numbers, _strong_numbers, markdown_pieces
from tasks.score.coverage import _clean as _clean_md
from tasks.score.judges import GroundingDoc
from tasks.score.numbers import Num, NumberPool
from tasks.score.tree import HEADING_RE

__all__ = [
    "AXES",
    "HolisticJudge",
    "HolisticReply",
    "LLMHolisticJudge",
    "OfflineHolisticJudge",
    "cut_to_tokens",
    "holistic",
    "input_budget",
    "proportional_caps",
    "water_fill",
]

AXES: tuple[str, ...] = ("faithfulness", "completeness", "understandability", "hallucination")
HEADING_MATCH = 80  # rapidfuzz token_sort_ratio for a gold heading to count as present in R'
MAX_MEDIAN_WORDS = 35  # median prose sentence length (words) still easy to read
MIN_PARAGRAPH_WORDS = 5  # shorter paragraphs (labels, "N/A") may legitimately repeat
RESERVE_TOKENS = 2000  # as coverage: room for message framing and token-count drift
NOTE_ALLOWANCE = 200  # tokens kept for the truncation note, rendered after the cuts
MIN_TEXT_TOKENS = 64  # below this a report excerpt is useless: refuse instead of judging nothing
MIN_DOC_TOKENS = 100  # a grounding document gets at least this much room, or is left out
GROUNDING_SHARE = 0.4  # share of the room kept for G when everything does not fit


# ======================================================================== truncation helpers


def prompt_room(prompt: Any, settings: LLMSettings, role: str, texts: int, **blank: str) -> int:
    """Tokens left for the texts of one request of `role`: the input budget minus the prompt rendered
    with empty `blank` variables and the truncation note; at least MIN_TEXT_TOKENS per text, else a
    one-line input error naming the settings."""
    overhead = sum(count_tokens(m["content"]) for m in render(prompt, **blank))
    room = input_budget(settings) - overhead - NOTE_ALLOWANCE
    if room < texts * MIN_TEXT_TOKENS:
        raise FrameInputError(
            "llm.context_tokens",
            f"context_tokens {settings.context_tokens} / max_output_tokens "
            f"{settings.max_output_tokens} leave no room to send the reports to {role}",
        )
    return room


def input_budget(settings: LLMSettings) -> int:
    """Tokens available for the rendered prompt: context minus the reply minus a framing reserve."""
    reserve = min(RESERVE_TOKENS, settings.context_tokens // 10)
    return settings.context_tokens - settings.max_output_tokens - reserve


def cut_to_tokens(text: str, max_tokens: int) -> tuple[str, bool]:
    """The longest prefix of `text` ending at a line boundary within `max_tokens` tokens, and whether it
    was cut. A cut text ends with a marker line saying how many lines are shown; if even the first line
    does not fit it is cut at a word boundary (never mid-word)."""
    if count_tokens(text) <= max_tokens:
        return text, False
    lines = text.split("\n")
    marker_room = 24  # the marker line itself
    room = max(0, max_tokens - marker_room)
    sizes = count_tokens_many(lines)
    used, kept = 0, 0
    for size in sizes:
        if used + size + 1 > room:  # +1: the newline joining lines
            break
        used += size + 1
        kept += 1
    if kept:
        head = "\n".join(lines[:kept]).rstrip()
    else:
        enc = get_encoder()
        head = enc.decode(enc.encode_ordinary(lines[0])[:room])
        head = head[: head.rfind(" ")] if " " in head else ""
    marker = f"[... cut here: {kept} of {len(lines)} lines shown ...]"
    return (f"{head}\n{marker}" if head else marker), True


def proportional_caps(sizes: Sequence[int], room: int) -> list[int]:
    """Token caps for texts of `sizes` sharing `room`: everything when it fits, else each text the same
    fraction of its size (so relative lengths stay visible)."""
    total = sum(sizes)
    if total <= room:
        return list(sizes)
    return [int(room * s / total) if total else 0 for s in sizes]


def water_fill(sizes: Sequence[int], room: int) -> list[int]:
    """Caps for `sizes` sharing `room` fairly: texts below the running equal share are kept whole, the
    rest get an equal share of what remains (max-min fairness)."""
    caps = [0] * len(sizes)
    left = room
    pending = sorted(range(len(sizes)), key=lambda i: sizes[i])
    while pending:
        share = left // len(pending)
        i = pending[0]
        if sizes[i] <= share:
            caps[i] = sizes[i]
            left -= sizes[i]
            pending.pop(0)
            continue
        for j in pending:
            caps[j] = share
        break
    return caps


# ======================================================================== judges


class HolisticJudge(Protocol):
    name: str

    def rate(self, gold_markdown: str, generated_markdown: str, grounding: Sequence[GroundingDoc]) -> dict:
        """{"faithfulness", "completeness", "understandability", "hallucination": int 1..10,
        "rationale": str, "detail": dict of judge-specific figures}."""


def _scale(share: float) -> int:
    """1 + 9 x share rounded half up (Python's round() would send 5.5 to 6 but 6.5 to 6)."""
    return int(math.floor(1.0 + 9.0 * min(1.0, max(0.0, share)) + 0.5))


def _strong(piece: Piece) -> list[Num]:
    # the raw source: a table row's own cells, not the column headers repeated into its text
    return _strong_numbers(piece.source)


def _headings(markdown: str) -> list[tuple[int, str]]:
    out = []
    for b in _md_blocks(markdown):
        if b.kind in ("title", "heading"):
            m = HEADING_RE.match(b.lines[0])
            if m:
                out.append((len(m.group(1)), _clean_md(m.group(2))))
    return out


_NUMBERING = re.compile(r"^\s*(?:\d+(?:\.\d+)*\.?|[IVXLC]+\.|[A-Z]\.)\s+")
_HTML = re.compile(
    r"<!--|<\s*/?\s*(?:a|abbr|article|b|body|br|center|code|div|em|font|footer|h[1-6]|head|header|hr|html|"
    r"i|iframe|img|li|nav|ol|p|pre|script|section|small|span|strong|style|sub|sup|table|tbody|td|th|thead|"
    r"tr|u|ul)\b[^<>]*>|&(?:nbsp|amp|lt|gt|quot|apos|#\d+|#x[0-9a-f]+);",
    re.I,
)
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")


def _heading_key(title: str) -> str:
    return default_process(_NUMBERING.sub("", title))


def _share(hits: int, total: int) -> float | None:
    return hits / total if total else None


class OfflineHolisticJudge:
    """Deterministic proxy of the holistic judge (module docstring: formulas and limits)."""

    name = "offline:holistic-proxy"

    def rate(self, gold_markdown: str, generated_markdown: str, grounding: Sequence[GroundingDoc]) -> dict:
        pieces = markdown_pieces(generated_markdown)
        if not pieces:
            return {
                **dict.fromkeys(AXES, 1),
                "rationale": "the generated report has no content: 1 on every axis",
                "detail": {"empty": True},
            }
        g_pool = NumberPool(n for d in grounding for n in _numbers(d.markdown))
        r_pool = NumberPool(_numbers(generated_markdown))

        # faithfulness and hallucination: R's strong figures against G
        strong = [_strong(p) for p in pieces]
        found = [[g_pool.contains(n) for n in nums] for nums in strong]
        n_fig = sum(len(f) for f in found)
        n_fig_found = sum(sum(f) for f in found)
        faith = _share(n_fig_found, n_fig)
        unsupported = sum(1 for f in found if not all(f))
        halluc_share = unsupported / len(pieces)

        # completeness: Y's figures and section headings in R'
        y_nums = [n for p in markdown_pieces(gold_markdown) for n in _strong(p)]
        y_hits = sum(r_pool.contains(n) for n in y_nums)
        y_found = _share(y_hits, len(y_nums))
        y_heads = [_heading_key(t) for lvl, t in _headings(gold_markdown) if lvl in (2, 3)]
        r_heads = [_heading_key(t) for _, t in _headings(generated_markdown)]
        head_hits = sum(
            1
            for h in y_heads
            if r_heads and process.extractOne(h, r_heads, scorer=fuzz.token_sort_ratio)[1] >= HEADING_MATCH
        )
        heads_found = _share(head_hits, len(y_heads))
        parts = [x for x in (y_found, heads_found) if x is not None]
        words_found = None
        if parts:
            completeness = statistics.mean(parts)
        else:  # Y without figures or sections: plain word recall
            y_words = {w.lower() for w in _WORD.findall(gold_markdown) if len(w) >= 4}
            r_words = {w.lower() for w in _WORD.findall(generated_markdown)}
            words_found = _share(len(y_words & r_words), len(y_words))
            completeness = words_found if words_found is not None else 1.0

        # understandability: four surface checks
        blocks = _md_blocks(generated_markdown)
        has_headings = any(b.kind == "heading" for b in blocks)
        prose = [len(_WORD.findall(p.text)) for p in pieces if p.kind in ("sentence", "item")]
        median_words = float(statistics.median(prose)) if prose else 0.0
        paragraphs = [
            " ".join(b.raw.lower().split())
            for b in blocks
            if b.kind in ("text", "list") and len(b.raw.split()) >= MIN_PARAGRAPH_WORDS
        ]
        repeated = len(paragraphs) - len(set(paragraphs))
        html = sum(len(_HTML.findall(b.raw)) for b in blocks if b.kind != "code")
        checks = {
            "has_headings": has_headings,
            "short_sentences": median_words <= MAX_MEDIAN_WORDS,
            "no_repeated_paragraph": repeated == 0,
            "no_raw_html": html == 0,
        }
        readability = sum(checks.values()) / len(checks)

        faith_share = 1.0 if faith is None else faith
        scores = {
            "faithfulness": _scale(faith_share),
            "completeness": _scale(completeness),
            "understandability": _scale(readability),
            "hallucination": _scale(1.0 - halluc_share),
        }

        comp_why = [
            *([f"Y figures found in R' {y_hits}/{len(y_nums)}"] if y_nums else []),
            *([f"Y H2/H3 headings found in R' {head_hits}/{len(y_heads)}"] if y_heads else []),
        ] or [f"Y has no figure or H2/H3 heading; Y words found in R' {completeness:.2f}"]
        why = [
            f"faithfulness: R' strong figures found in G {n_fig_found}/{n_fig}"
            if n_fig
            else "faithfulness: no strong figure in R' (vacuously faithful)",
            "completeness: " + "; ".join(comp_why),
            "understandability: "
            + ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in checks.items())
            + f" (median sentence {median_words:g} words)",
            f"hallucination: R' pieces with a strong figure found nowhere in G {unsupported}/{len(pieces)}",
        ]
        detail: dict[str, Any] = {
            "faithfulness_share": faith,
            "figures": n_fig,
            "figures_found": n_fig_found,
            "gold_figures_share": y_found,
            "gold_headings_share": heads_found,
            "gold_words_share": words_found,
            "completeness_share": completeness,
            "readability_checks": checks,
            "median_sentence_words": median_words,
            "readability_share": readability,
            "unsupported_pieces": unsupported,
            "pieces": len(pieces),
            "hallucination_share": halluc_share,
        }
        return {**scores, "rationale": "; ".join(why), "detail": detail}


class HolisticReply(BaseModel):
    """The reply of role score_holistic: four integers 1..10 and a short rationale."""

    faithfulness: int = Field(ge=1, le=10)
    completeness: int = Field(ge=1, le=10)
    understandability: int = Field(ge=1, le=10)
    hallucination: int = Field(ge=1, le=10)
    rationale: str = ""


def _id_list(ids: Sequence[str], limit: int = 12) -> str:
    """Ids joined, at most `limit` named (the note must stay within NOTE_ALLOWANCE tokens)."""
    shown = ", ".join(ids[:limit])
    return shown if len(ids) <= limit else f"{shown} and {len(ids) - limit} more"


class LLMHolisticJudge:
    """The G.7 direct-score judge over an OpenAI-compatible endpoint (module docstring)."""

    ROLE = "score_holistic"

    def __init__(self, client: Any, settings: LLMSettings, ctx: Any = None) -> None:
        self.client = client
        self.settings = settings
        self.ctx = ctx
        self.name = f"openai:{settings.model}"
        self.prompt = load_prompt(self.ROLE)

    def __repr__(self) -> str:
        return f"LLMHolisticJudge(model={self.settings.model!r})"

    def _room(self) -> int:
        return prompt_room(
            self.prompt, self.settings, self.ROLE, 2, gold_report="", grounding="", report="", input_note=""
        )

    def _inputs(
        self, gold: str, report: str, grounding: Sequence[GroundingDoc]
    ) -> tuple[str, str, str, list[str]]:
        """(gold, grounding, report) as sent, and the notes on every cut (empty when all fits)."""
        room = self._room()
        heads = [f"### Document {d.doc_id}: {d.title}".rstrip(": ") for d in grounding]
        bodies = [d.markdown.strip() for d in grounding]
        y_t, r_t = count_tokens(gold), count_tokens(report)
        head_t = count_tokens_many(heads) if heads else []
        body_t = count_tokens_many(bodies) if bodies else []
        g_t = sum(head_t) + sum(body_t) + 2 * len(heads)
        notes: list[str] = []
        if y_t + r_t + g_t <= room:
            g_room = g_t
        else:
            g_room = min(g_t, max(room - (y_t + r_t), int(room * GROUNDING_SHARE)))
        yr_caps = proportional_caps([y_t, r_t], room - g_room)
        gold_s, gold_cut = cut_to_tokens(gold, yr_caps[0])
        report_s, report_cut = cut_to_tokens(report, yr_caps[1])
        if gold_cut:
            notes.append(f"the gold report is cut after about {yr_caps[0]} of its {y_t} tokens")
        if report_cut:
            notes.append(f"the report to evaluate is cut after about {yr_caps[1]} of its {r_t} tokens")

        # grounding: water-fill the documents, leaving out the last ones if their share gets too small
        keep = len(grounding)
        while keep:
            room_left = g_room - sum(head_t[:keep]) - 2 * keep
            caps = water_fill(body_t[:keep], room_left)
            if keep == 1 or all(c >= min(MIN_DOC_TOKENS, s) for c, s in zip(caps, body_t, strict=False)):
                break
            keep -= 1
        docs: list[str] = []
        cut_docs: list[str] = []
        if keep:
            for d, head, body, cap in zip(grounding[:keep], heads, bodies, caps, strict=False):
                text, cut = cut_to_tokens(body, max(cap, 0))
                if cut:
                    cut_docs.append(d.doc_id)
                docs.append(f"{head}\n\n{text}")
        omitted = [d.doc_id for d in grounding[keep:]]
        if cut_docs:
            if len(cut_docs) == len(docs):
                notes.append(f"each of the {len(docs)} grounding documents shown is cut at a line boundary")
            else:
                notes.append("grounding documents cut at a line boundary: " + _id_list(cut_docs))
        if omitted:
            notes.append(
                f"{len(omitted)} of {len(grounding)} grounding documents left out for lack of room: "
                + _id_list(omitted)
            )
        grounding_text = "\n\n".join(docs) if docs else "(no grounding document)"
        return gold_s, grounding_text, report_s, notes

    def rate(self, gold_markdown: str, generated_markdown: str, grounding: Sequence[GroundingDoc]) -> dict:
        if not generated_markdown.strip():
            return {
                **dict.fromkeys(AXES, 1),
                "rationale": "the generated report is empty: 1 on every axis (no request made)",
                "detail": {"empty": True},
            }
        gold_s, grounding_s, report_s, notes = self._inputs(gold_markdown, generated_markdown, grounding)
        if notes:
            note = (
                "NOTE: the inputs were too long for the context window and were shortened: "
                + "; ".join(notes)
                + ". Each cut is marked where it happens. Judge what is shown; do not count a cut "
                "against the report."
            )
        else:
            note = "All inputs are shown in full."
        messages = render(
            self.prompt,
            gold_report=gold_s.strip() or "(empty)",
            grounding=grounding_s,
            report=report_s.strip(),
            input_note=note,
        )
        reply: HolisticReply = self.client.complete_json(self.ROLE, messages, HolisticReply, self.ctx).value
        detail: dict[str, Any] = {"truncation": note} if notes else {}
        rationale = reply.rationale.strip()
        if notes:
            rationale = f"{rationale} [inputs shortened: {'; '.join(notes)}]".strip()
        return {**{a: getattr(reply, a) for a in AXES}, "rationale": rationale, "detail": detail}


# ======================================================================== driver


def holistic(
    gold_markdown: str,
    generated_markdown: str,
    grounding: Sequence[GroundingDoc],
    judge: HolisticJudge,
) -> list[MetricResult]:
    """The four holistic metrics (``HOLISTIC_METRICS`` order) of R' from one rating by `judge`."""
    rating = judge.rate(gold_markdown, generated_markdown, list(grounding))
    detail = {"rationale": rating.get("rationale", ""), **rating.get("detail", {})}
    out = []
    for metric, axis in zip(HOLISTIC_METRICS, AXES, strict=True):
        value = int(rating[axis])
        if not 1 <= value <= 10:
            raise ValueError(f"{judge.name}: {axis} score {value} is outside 1..10")
        out.append(MetricResult(metric=metric, value=float(value), judge=judge.name, detail=dict(detail)))
    return out
