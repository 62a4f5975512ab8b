"""Holistic direct scores 1-10 (paper 001 App. G.7): four axes of a generated report (faithfulness,
completeness, understandability, no hallucination), the saturation baseline shown beside FRAME's metrics.
An offline proxy or an LLM judge rates; the truncation helpers here are shared with ``tasks.score.pairwise``.
Specification, the proxy's formulas and its limits: docs/metrics/holistic.md.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, Field
from rapidfuzz import fuzz, process
from rapidfuzz.utils import default_process

from schemas.scoring import GroundingText, MetricResult
from tasks.markdown.numbers import Num, NumberPool
from tasks.markdown.pieces import (
    Piece,
    heading_title,
    markdown_numbers,
    markdown_pieces,
    md_blocks,
    row_figures_strong,
    strong_numbers,
)
from tasks.score.llm_judge import LLMJudge, input_budget
from tasks.score.metric import Inputs, JudgeEnv, MetricFamily, MetricSpec
from tasks.tokens import count_tokens, count_tokens_many, get_encoder

__all__ = [
    "AXES",
    "HolisticJudge",
    "HolisticReply",
    "LLMHolisticJudge",
    "OfflineHolisticJudge",
    "TextsJudge",
    "cut_to_tokens",
    "holistic",
    "input_budget",
    "prompt_room",
    "proportional_caps",
    "water_fill",
]

AXES: tuple[str, ...] = ("faithfulness", "completeness", "understandability", "hallucination")
HOLISTIC_METRICS: tuple[str, ...] = tuple(f"holistic_{a}" for a in AXES)  # hallucination: 10 = none
HEADING_MATCH = 80  # rapidfuzz token_sort_ratio for a gold heading to count as present in R'
MAX_MEDIAN_WORDS = 35  # median prose sentence length (words) still easy to read
MIN_REPEAT_WORDS = 8  # shorter sentences ("See the table.", labels) may legitimately repeat
NOTE_ALLOWANCE = 200  # tokens kept for the truncation note, rendered after the cuts
MIN_TEXT_TOKENS = 64  # below this a report excerpt is useless: refuse instead of judging nothing
MIN_DOC_TOKENS = 100  # a grounding document gets at least this much room, or is left out
GROUNDING_SHARE = 0.4  # share of the room kept for G when everything does not fit


# ======================================================================== truncation helpers


def prompt_room(judge: LLMJudge, texts: int, **blank: str) -> int:
    """Tokens left for the `texts` texts of one request of the judge's first role: its room
    (`LLMJudge.room`, the prompt rendered with empty `blank` variables) less the truncation note's
    allowance; at least MIN_TEXT_TOKENS per text, else the one-line input error naming the settings."""
    role = judge.ROLES[0]
    return judge.room(role, texts * MIN_TEXT_TOKENS, "the reports", spare=NOTE_ALLOWANCE, **blank)


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

    def rate(self, gold_markdown: str, generated_markdown: str, grounding: Sequence[GroundingText]) -> dict:
        """{"faithfulness", "completeness", "understandability", "hallucination": int 1..10,
        "rationale": str, "detail": dict of judge-specific figures}."""


def _scale(share: float) -> int:
    """1 + 9 x share rounded half up (Python's round() would send 5.5 to 6 but 6.5 to 6)."""
    return int(math.floor(1.0 + 9.0 * min(1.0, max(0.0, share)) + 0.5))


def _strong(piece: Piece) -> list[Num]:
    if piece.kind == "row":  # its own cells read with the table (stated unit, column period, a loss row)
        return [n for n, strong in row_figures_strong(piece.text, piece.source) if strong]
    return strong_numbers(piece.source)


def _headings(markdown: str) -> list[tuple[int, str]]:
    """(level, cleaned title) of the report's headings, its title included."""
    return [(b.level, heading_title(b)) for b in md_blocks(markdown) if b.kind in ("title", "heading")]


_NUMBERING = re.compile(r"^\s*(?:\d+(?:\.\d+)*\.?|[IVXLC]+\.|[A-Z]\.)\s+")
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")


def _heading_key(title: str) -> str:
    return default_process(_NUMBERING.sub("", title))


def _share(hits: int, total: int) -> float | None:
    return hits / total if total else None


def _against_grounding(pieces: list[Piece], grounding: Sequence[GroundingText]) -> dict[str, Any]:
    """Faithfulness and hallucination: the strong figures of R' looked up in G's number pool."""
    g_pool = NumberPool(n for d in grounding for n in markdown_numbers(d.markdown))  # tables with their unit
    strong = [_strong(p) for p in pieces]
    hit = g_pool.contains_many([n for nums in strong for n in nums]).tolist()
    found, start = [], 0
    for nums in strong:
        found.append(hit[start : start + len(nums)])
        start += len(nums)
    n_fig = sum(len(f) for f in found)
    n_found = sum(sum(f) for f in found)
    unsupported = sum(1 for f in found if not all(f))
    why = (
        f"faithfulness: R' strong figures found in G {n_found}/{n_fig}"
        if n_fig
        else "faithfulness: no strong figure in R' (vacuously faithful)"
    )
    return {
        "faithfulness_share": _share(n_found, n_fig),
        "figures": n_fig,
        "figures_found": n_found,
        "unsupported_pieces": unsupported,
        "hallucination_share": unsupported / len(pieces),
        "why": why,
    }


def _completeness(gold: str, generated: str) -> dict[str, Any]:
    """Completeness: Y's strong figures and H2/H3 headings found in R' (else Y's words of 4+ letters)."""
    r_pool = NumberPool(markdown_numbers(generated))
    y_nums = [n for p in markdown_pieces(gold) for n in _strong(p)]
    y_hits = int(r_pool.contains_many(y_nums).sum())
    y_heads = [_heading_key(t) for lvl, t in _headings(gold) if lvl in (2, 3)]
    r_heads = [_heading_key(t) for _, t in _headings(generated)]
    head_hits = sum(
        1
        for h in y_heads
        if r_heads and process.extractOne(h, r_heads, scorer=fuzz.token_sort_ratio)[1] >= HEADING_MATCH
    )
    y_found, heads_found = _share(y_hits, len(y_nums)), _share(head_hits, len(y_heads))
    parts = [x for x in (y_found, heads_found) if x is not None]
    words_found = None
    if parts:
        completeness = statistics.mean(parts)
    else:  # Y without figures or sections: plain word recall
        y_words = {w.lower() for w in _WORD.findall(gold) if len(w) >= 4}
        r_words = {w.lower() for w in _WORD.findall(generated)}
        words_found = _share(len(y_words & r_words), len(y_words))
        completeness = words_found if words_found is not None else 1.0
    why = [
        *([f"Y figures found in R' {y_hits}/{len(y_nums)}"] if y_nums else []),
        *([f"Y H2/H3 headings found in R' {head_hits}/{len(y_heads)}"] if y_heads else []),
    ] or [f"Y has no figure or H2/H3 heading; Y words found in R' {completeness:.2f}"]
    return {
        "gold_figures_share": y_found,
        "gold_headings_share": heads_found,
        "gold_words_share": words_found,
        "completeness_share": completeness,
        "why": "completeness: " + "; ".join(why),
    }


_HTML = re.compile(
    r"<!--|<\s*/?\s*(?:a|abbr|article|b|body|br|center|code|div|em|font|footer|h[1-6]|head|header|hr|html|"
    r"i|iframe|img|li|nav|ol|p|pre|script|section|small|span|strong|style|sub|sup|table|tbody|td|th|thead|"
    r"tr|u|ul)\b[^<>]*>|&(?:nbsp|amp|lt|gt|quot|apos|#\d+|#x[0-9a-f]+);",
    re.I,
)


def _readability(generated: str, pieces: list[Piece]) -> dict[str, Any]:
    """Understandability: four surface checks of R'."""
    blocks = md_blocks(generated)
    prose = [len(_WORD.findall(p.text)) for p in pieces if p.kind in ("sentence", "item")]
    median_words = float(statistics.median(prose)) if prose else 0.0
    # sentence by sentence: where the paragraph breaks fall neither hides nor makes a repeat
    sentences = [
        " ".join(w.lower() for w in _WORD.findall(p.text))
        for p in pieces
        if p.kind in ("sentence", "item") and len(_WORD.findall(p.text)) >= MIN_REPEAT_WORDS
    ]
    checks = {
        "has_headings": any(b.kind == "heading" for b in blocks),
        "short_sentences": median_words <= MAX_MEDIAN_WORDS,
        "no_repeated_sentence": len(sentences) == len(set(sentences)),
        "no_raw_html": not any(_HTML.search(b.raw) for b in blocks if b.kind != "code"),
    }
    why = (
        "understandability: "
        + ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in checks.items())
        + f" (median sentence {median_words:g} words)"
    )
    return {
        "readability_checks": checks,
        "median_sentence_words": median_words,
        "readability_share": sum(checks.values()) / len(checks),
        "why": why,
    }


_DETAIL = (  # the offline judge's figures, in the order its detail lists them
    "faithfulness_share",
    "figures",
    "figures_found",
    "gold_figures_share",
    "gold_headings_share",
    "gold_words_share",
    "completeness_share",
    "readability_checks",
    "median_sentence_words",
    "readability_share",
    "unsupported_pieces",
    "pieces",
    "hallucination_share",
)


class OfflineHolisticJudge:
    """Deterministic proxy of the holistic judge (formulas and limits: docs/metrics/holistic.md)."""

    name = "offline:holistic-proxy"

    def rate(self, gold_markdown: str, generated_markdown: str, grounding: Sequence[GroundingText]) -> dict:
        pieces = markdown_pieces(generated_markdown)
        if not pieces:
            return {
                **dict.fromkeys(AXES, 1),
                "rationale": "the generated report has no content: 1 on every axis",
                "detail": {"empty": True},
            }
        g = _against_grounding(pieces, grounding)
        c = _completeness(gold_markdown, generated_markdown)
        r = _readability(generated_markdown, pieces)
        faith = g["faithfulness_share"]
        scores = {
            "faithfulness": _scale(1.0 if faith is None else faith),
            "completeness": _scale(c["completeness_share"]),
            "understandability": _scale(r["readability_share"]),
            "hallucination": _scale(1.0 - g["hallucination_share"]),
        }
        halluc = f"hallucination: R' pieces with a strong figure found nowhere in G {g['unsupported_pieces']}"
        why = [g.pop("why"), c.pop("why"), r.pop("why"), f"{halluc}/{len(pieces)}"]
        parts = {**g, **c, **r, "pieces": len(pieces)}
        return {**scores, "rationale": "; ".join(why), "detail": {k: parts[k] for k in _DETAIL}}


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


class TextsJudge(LLMJudge):
    """An LLM judge whose one request (role ROLES[0]) carries `TEXTS` whole texts, cut to fit when needed
    (the holistic and the pairwise judge)."""

    TEXTS: ClassVar[int] = 1

    def _room(self) -> int:
        """Tokens for the texts: `prompt_room` with every variable of the prompt blank."""
        blank = dict.fromkeys(self.prompts[self.ROLES[0]].placeholders, "")
        return prompt_room(self, self.TEXTS, **blank)


class LLMHolisticJudge(TextsJudge):
    """The G.7 direct-score judge over an OpenAI-compatible endpoint (docs/metrics/holistic.md)."""

    ROLE = "score_holistic"
    ROLES = (ROLE,)
    TEXTS = 2  # the gold report and R' get at least MIN_TEXT_TOKENS each

    def _inputs(
        self, gold: str, report: str, grounding: Sequence[GroundingText]
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

    def rate(self, gold_markdown: str, generated_markdown: str, grounding: Sequence[GroundingText]) -> dict:
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
        reply: HolisticReply = self.ask(
            self.ROLE,
            HolisticReply,
            gold_report=gold_s.strip() or "(empty)",
            grounding=grounding_s,
            report=report_s.strip(),
            input_note=note,
        ).value
        detail: dict[str, Any] = {"truncation": note} if notes else {}
        rationale = reply.rationale.strip()
        if notes:
            rationale = f"{rationale} [inputs shortened: {'; '.join(notes)}]".strip()
        return {**{a: getattr(reply, a) for a in AXES}, "rationale": rationale, "detail": detail}


# ======================================================================== driver


def holistic(
    gold_markdown: str,
    generated_markdown: str,
    grounding: Sequence[GroundingText],
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


# ======================================================================== the family


# What the metric checklist does not hold the offline proxy's axes to (docs/metrics/robustness.md).
_NO_WORDS = "the offline proxy reads figures and headings, not direction words"
_NO_YEARS = "years are not among the figures the offline proxy reads"
_SHARE = "shares of figures and headings found anywhere, wherever they stand"
_PRECISE = "a share of R's figures found in G: leaving something out states nothing false"
_WHOLE_POINTS = (
    "a whole-point 1-10 rating of the share of Y's figures and headings found: a table holding under a"
    " ninth of Y's figures (the small tables of surveys) moves it by less than a point"
)
_SURFACE = "surface readability checks (headings, sentence length, repetition, raw HTML), not what R' says"
_UNCLAIMED = {
    "holistic_completeness": (
        ("directions", _NO_WORDS),
        ("periods", _NO_YEARS),
        ("order", _SHARE),
        ("tables", _WHOLE_POINTS),
    ),
    "holistic_faithfulness": (
        ("directions", _NO_WORDS),
        ("periods", _NO_YEARS),
        ("content", _PRECISE),
        ("order", _SHARE),
        ("tables", _PRECISE),
    ),
    "holistic_understandability": tuple(
        (a, _SURFACE) for a in ("figures", "directions", "periods", "content", "order", "tables")
    ),
}
_UNCLAIMED["holistic_hallucination"] = _UNCLAIMED["holistic_faithfulness"]


class HolisticFamily(MetricFamily):
    """Four direct 1-10 scores of R': the saturation baseline shown beside the other families."""

    name = "holistic"
    metrics = tuple(
        MetricSpec(m, 1.0, 10.0, saturation_baseline=True, unclaimed=_UNCLAIMED[m]) for m in HOLISTIC_METRICS
    )
    reads = frozenset({"gold", "grounding"})
    summary = "direct 1-10 scores (faithfulness, completeness, understandability, hallucination): a baseline"

    def __init__(self, env: JudgeEnv) -> None:
        super().__init__(env)
        self.judge: HolisticJudge = (
            OfflineHolisticJudge() if env.offline else LLMHolisticJudge(env.client, env.llm)
        )

    def score(self, inputs: Inputs) -> list[MetricResult]:
        return holistic(inputs.gold, inputs.generated, inputs.grounding, self.judge)
