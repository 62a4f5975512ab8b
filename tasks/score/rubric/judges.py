"""The rubric judges: the offline one (every item by its check) and the LLM one (judged items in one
request per report, role score_rubric; the others by their checks)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from pydantic import BaseModel, Field, field_validator

from schemas.rubric import Decision, RubricDecision, RubricItem
from tasks.errors import FrameInputError
from tasks.score.llm_judge import LLMJudge
from tasks.score.rubric.reading import CHECKS, Finding, RubricContext, _clean, _Doc, _parse
from tasks.tokens import count_tokens, count_tokens_many

OFFLINE_NAME = "offline:rubric-checks"


class RubricJudge(Protocol):
    name: str

    def decide(
        self, report_markdown: str, ctx: RubricContext, items: Sequence[RubricItem]
    ) -> list[RubricDecision]:
        """One decision per item given (all applicable to ctx.category), same order."""


def _decision(item: RubricItem, f: Finding, judge: str) -> RubricDecision:
    return RubricDecision(
        item_id=item.id,
        layer=item.layer,
        decision=f.decision,
        evidence=f.evidence,
        evidence_ref=f.evidence_ref,
        rationale=f.rationale,
        judge=judge,
    )


def _run_check(item: RubricItem, report: str, ctx: RubricContext) -> Finding:
    fn = CHECKS.get(item.check)
    if fn is None:
        raise FrameInputError("rubric", f"item {item.id!r}: unknown check {item.check!r}")
    return fn(report, ctx)


class OfflineRubricJudge:
    """Every item decided by its offline check (deterministic; judged items by their documented proxy)."""

    name = OFFLINE_NAME

    def __repr__(self) -> str:
        return "OfflineRubricJudge()"

    def decide(
        self, report_markdown: str, ctx: RubricContext, items: Sequence[RubricItem]
    ) -> list[RubricDecision]:
        return [_decision(it, _run_check(it, report_markdown, ctx), self.name) for it in items]


class _ItemDecision(BaseModel):
    item_id: str
    decision: Decision
    evidence: str = ""
    rationale: str = ""

    @field_validator("item_id", mode="before")
    @classmethod
    def _strip_id(cls, v: Any) -> Any:
        return v.strip() if isinstance(v, str) else v

    @field_validator("decision", mode="before")
    @classmethod
    def _norm_decision(cls, v: Any) -> Any:
        if isinstance(v, str):
            key = v.strip().lower().replace("-", " ").replace("_", " ")
            return {"n/a": "na", "not applicable": "na", "passed": "pass", "failed": "fail"}.get(key, key)
        return v

    @field_validator("evidence", "rationale", mode="before")
    @classmethod
    def _none_to_empty(cls, v: Any) -> Any:
        return "" if v is None else v


class RubricReply(BaseModel):
    """Reply of role score_rubric."""

    decisions: list[_ItemDecision] = Field(default_factory=list)


def _ids_check(ids: Sequence[str]) -> Callable[[RubricReply], None]:
    want = list(ids)

    def check(reply: RubricReply) -> None:
        got = [d.item_id for d in reply.decisions]
        dupes = sorted({i for i in got if got.count(i) > 1})
        if dupes:
            raise ValueError(f"item_id given more than once: {dupes}")
        extra = sorted(set(got) - set(want))
        missing = [i for i in want if i not in set(got)]
        if extra or missing:
            # the problems first: the client cuts the reason to one short line
            raise ValueError(
                "; ".join(
                    [f"unknown item_id: {extra}"] * bool(extra)
                    + [f"missing item_id: {missing}"] * bool(missing)
                    + ["decisions must cover exactly the item_ids " + ", ".join(want)]
                )
            )

    return check


def _locate(doc: _Doc, quote: str) -> str:
    """'line N' of the first line of R' holding the quoted evidence (its first 80 characters), else ''."""
    probe = " ".join(_clean(quote).lower().split())[:80].strip(" .…\"'")
    if len(probe) < 4:
        return ""
    for i, s in enumerate(doc.lines):
        if probe in " ".join(_clean(s).lower().split()):
            return f"line {i + 1}"
    return ""


class LLMRubricJudge(LLMJudge):
    """Judged items decided by an LLM in one request per report; deterministic items by their checks."""

    ROLE = "score_rubric"
    ROLES = (ROLE,)
    MIN_REPORT_TOKENS = 200  # below this the report cannot be judged: refuse

    def _report_view(self, report: str, room: int) -> tuple[str, str, bool]:
        """(text sent, note for the prompt, excerpted?): the whole report, or its head and tail."""
        if count_tokens(report) <= room:
            return report, "Below is the complete report.", False
        lines = report.split("\n")
        sizes = count_tokens_many([ln + "\n" for ln in lines])
        marker = 40  # tokens kept for the omission marker
        half = max(0, (room - marker) // 2)
        head_end, used = 0, 0
        while head_end < len(lines) and used + sizes[head_end] <= half:
            used += sizes[head_end]
            head_end += 1
        tail_start, used = len(lines), 0
        while tail_start > head_end and used + sizes[tail_start - 1] <= half:
            used += sizes[tail_start - 1]
            tail_start -= 1
        omitted = (head_end + 1, tail_start)
        text = "\n".join(
            [*lines[:head_end], f"[... lines {omitted[0]}-{omitted[1]} omitted ...]", *lines[tail_start:]]
        )
        note = (
            f"The report is too long for this request: below are its first {head_end} lines and its last "
            f"{len(lines) - tail_start} lines; lines {omitted[0]}-{omitted[1]} (of {len(lines)}) are omitted "
            f"and marked [... lines {omitted[0]}-{omitted[1]} omitted ...]. Judge from what you see and do "
            "not penalise the omission itself."
        )
        return text, note, True

    def decide(
        self, report_markdown: str, ctx: RubricContext, items: Sequence[RubricItem]
    ) -> list[RubricDecision]:
        items = list(items)
        judged = [it for it in items if it.mode == "judged"]
        out: dict[str, RubricDecision] = {
            it.id: _decision(it, _run_check(it, report_markdown, ctx), OFFLINE_NAME)
            for it in items
            if it.mode != "judged"
        }
        self.last_calls = []
        if judged:
            out.update(self._judge(report_markdown, ctx, judged))
        return [out[it.id] for it in items]

    def _judge(self, report: str, ctx: RubricContext, judged: list[RubricItem]) -> dict[str, RubricDecision]:
        """The decisions on the judged items: one request holding the report (or its head and tail)."""
        listing = "\n".join(
            json.dumps({"item_id": it.id, "title": it.title, "criterion": it.criterion}, ensure_ascii=False)
            for it in judged
        )
        variables = {
            "category": ctx.category,
            "domain": ctx.domain,
            "items": listing,
            "item_ids": ", ".join(it.id for it in judged),
            "report_note": "",
        }
        room = self.room(self.ROLE, self.MIN_REPORT_TOKENS, "the report", report="", **variables)
        if report.strip():
            view, note, excerpted = self._report_view(report, room)
        else:
            view, note, excerpted = "(the report is empty)", "The report is empty.", False
        variables["report_note"] = note
        ids = _ids_check([it.id for it in judged])
        reply: RubricReply = self.ask(self.ROLE, RubricReply, check=ids, report=view, **variables).value
        doc = _parse(report)
        by_id = {d.item_id: d for d in reply.decisions}
        suffix = " [judged on the head and tail of the report only]" if excerpted else ""
        self.last_calls.append({"role": self.ROLE, "items": len(judged), "excerpted": excerpted})
        return {
            it.id: RubricDecision(
                item_id=it.id,
                layer=it.layer,
                decision=by_id[it.id].decision,
                evidence=by_id[it.id].evidence.strip(),
                evidence_ref=_locate(doc, by_id[it.id].evidence),
                rationale=(by_id[it.id].rationale.strip() + suffix).strip(),
                judge=self.name,
            )
            for it in judged
        }
