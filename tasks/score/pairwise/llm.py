"""The blind LLM pairwise judge: its reply shape and the three texts it sends, cut to the same fraction
of their length when they do not fit the context window (docs/metrics/pairwise.md)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, field_validator

from tasks.score.holistic.truncate import TextsJudge, cut_to_tokens, proportional_caps
from tasks.tokens import count_tokens


class PairwiseReply(BaseModel):
    """The reply of role score_pairwise."""

    winner: Literal["1", "2", "tie"]
    rationale: str = ""

    @field_validator("winner", mode="before")
    @classmethod
    def _normalise(cls, v: Any) -> Any:
        # tolerate 1 / "Report 1" / "TIE"; anything else fails validation (-> corrective retry)
        if isinstance(v, bool):
            return v
        if isinstance(v, int):
            return str(v)
        if isinstance(v, str):
            s = v.strip().lower().removeprefix("report").strip()
            return s
        return v


class LLMPairwiseJudge(TextsJudge):
    """Blind pairwise judge over an OpenAI-compatible endpoint (docs/metrics/pairwise.md)."""

    ROLE = "score_pairwise"
    TEXTS = 3  # the gold report and both reports
    ROLES = (ROLE,)

    def compare(
        self, gold_markdown: str, report_1: str, report_2: str, *, systems: tuple[str, str] | None = None
    ) -> tuple[str, str]:
        # `systems` is deliberately unused: the judgment is blind
        empty_1, empty_2 = not report_1.strip(), not report_2.strip()
        if empty_1 and empty_2:
            return "tie", "both reports are empty (no request made)"
        if empty_1:
            return "2", "report 1 is empty (no request made)"
        if empty_2:
            return "1", "report 2 is empty (no request made)"
        texts = [gold_markdown, report_1, report_2]
        labels = ["the gold report", "report 1", "report 2"]
        sizes = [count_tokens(t) for t in texts]
        caps = proportional_caps(sizes, self._room())
        shown: list[str] = []
        notes: list[str] = []
        for text, size, cap, label in zip(texts, sizes, caps, labels, strict=True):
            cut, was_cut = cut_to_tokens(text, cap)
            shown.append(cut)
            if was_cut:
                notes.append(f"{label} is cut after about {cap} of its {size} tokens")
        if notes:
            note = (
                "NOTE: the texts were too long for the context window; each was cut to the same fraction "
                "of its length at a line boundary: "
                + "; ".join(notes)
                + ". Each cut is marked where it happens. Judge what is shown; do not count a cut "
                "against a report."
            )
        else:
            note = "All texts are shown in full."
        reply: PairwiseReply = self.ask(
            self.ROLE,
            PairwiseReply,
            gold_report=shown[0].strip() or "(empty)",
            report_1=shown[1].strip(),
            report_2=shown[2].strip(),
            input_note=note,
        ).value
        rationale = reply.rationale.strip()
        if notes:
            rationale = f"{rationale} [texts cut: {'; '.join(notes)}]".strip()
        return reply.winner, rationale
