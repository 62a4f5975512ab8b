"""The offline holistic judge: a deterministic proxy reading figures, headings and surface readability
(formulas and limits: docs/metrics/holistic.md)."""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from typing import Any

from rapidfuzz.utils import default_process

from schemas.scoring import GroundingText
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
from tasks.score.headings import same_heading
from tasks.score.holistic.rating import AXES

HEADING_MATCH = 80  # rapidfuzz token_sort_ratio for a gold heading to count as present in R'
MAX_MEDIAN_WORDS = 35  # median prose sentence length (words) still easy to read
MIN_REPEAT_WORDS = 8  # shorter sentences ("See the table.", labels) may legitimately repeat


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
    y_heads = [t for lvl, t in _headings(gold) if lvl in (2, 3)]
    r_heads = [t for _, t in _headings(generated)]
    # a heading is found when R' has one close in wording or naming the same Form item (tasks/score/headings)
    head_hits = sum(
        1 for h in y_heads if any(same_heading(h, r, HEADING_MATCH, _heading_key) for r in r_heads)
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
