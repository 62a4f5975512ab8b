"""The LLM holistic judge (paper 001 App. G.7 direct scores): its reply shape and the inputs it sends,
the gold report, the grounding documents and R', shortened to fit the context window when needed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from schemas.scoring import GroundingText
from tasks.score.holistic.rating import AXES
from tasks.score.holistic.truncate import TextsJudge, cut_to_tokens, proportional_caps, water_fill
from tasks.tokens import count_tokens, count_tokens_many

MIN_DOC_TOKENS = 100  # a grounding document gets at least this much room, or is left out
GROUNDING_SHARE = 0.4  # share of the room kept for G when everything does not fit


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
        grounding_text, grounding_notes = _fit_grounding(grounding, heads, bodies, head_t, body_t, g_room)
        notes.extend(grounding_notes)
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


def _fit_grounding(
    grounding: Sequence[GroundingText],
    heads: list[str],
    bodies: list[str],
    head_t: list[int],
    body_t: list[int],
    g_room: int,
) -> tuple[str, list[str]]:
    """The grounding documents as sent within `g_room` tokens, and the notes on their cuts and omissions."""
    notes: list[str] = []
    # water-fill the documents, leaving out the last ones if their share gets too small
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
    return grounding_text, notes
