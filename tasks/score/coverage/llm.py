"""The paper's LLM coverage judge (docs/metrics/coverage.md): units extracted from Y part by part
(score_units), then graded in batches against R' or an excerpt of it (score_coverage)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from schemas.config import LLMSettings
from schemas.scoring import UNIT_TYPES, InfoUnit, ItemScore
from tasks.errors import FrameInputError
from tasks.markdown.chunks import Atom, atoms, halve, pack, section_of, size
from tasks.markdown.document import is_heading
from tasks.markdown.pieces import Block, clean, md_blocks
from tasks.markdown.text import terms
from tasks.score.coverage.replies import CoverageReply, UnitsReply, _batch_check, _UnitOut
from tasks.score.coverage.units import _unit_item
from tasks.score.llm_judge import LLMJudge, split_on_length
from tasks.score.reply_size import extraction_measure
from tasks.tokens import count_tokens

BATCH_UNITS = 20  # units per score_coverage request


def _norm(text: str) -> str:
    return " ".join(clean(text).lower().split())


class LLMCoverageJudge(LLMJudge):
    """The paper's LLM extractor + judge (docs/metrics/coverage.md), over any OpenAI-compatible endpoint."""

    UNITS_ROLE = "score_units"
    COVERAGE_ROLE = "score_coverage"
    ROLES = (UNITS_ROLE, COVERAGE_ROLE)

    def __init__(self, client: Any, settings: LLMSettings, *, ctx: Any = None, batch_size: int = BATCH_UNITS):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1 (got {batch_size})")
        super().__init__(client, settings, ctx=ctx)
        self.batch_size = batch_size

    def _unit_chunk_budget(self) -> int:
        return self.room(
            self.UNITS_ROLE, 64, "the gold report", spare=200, report_part="", part_note="", unit_types=""
        )

    def unit_parts(self, gold_markdown: str) -> list[list[Atom]]:
        """The gold report cut into the parts sent to score_units: each part's prompt fits the input budget
        and the reply it asks for (every unit restates its sentence or row) is expected to fit the role's
        output budget (tasks.score.reply_size)."""
        budget = self._unit_chunk_budget()
        measure = extraction_measure(budget, self.output_budget(self.UNITS_ROLE))
        gold_atoms = atoms(gold_markdown, budget, measure)
        if not any(a.text.strip() for a in gold_atoms):
            return []
        parts: list[list[Atom]] = []
        for part in pack(gold_atoms, budget, (lambda a: a.top, lambda a: a.flat)):
            if parts and all(is_heading(a.text) for a in parts[-1]):
                part = parts.pop() + part  # headings alone hold no unit: they go with what follows them
            parts.append(part)
        return parts

    # -- units

    def extract_units(self, gold_markdown: str) -> list[InfoUnit]:
        if not gold_markdown.strip():
            return []
        chunks = self.unit_parts(gold_markdown)
        if not chunks:
            return []
        total = len(chunks)
        measure = extraction_measure(self._unit_chunk_budget(), self.output_budget(self.UNITS_ROLE))

        def ask_part(job: tuple[int, list[Atom]]) -> list[tuple[list[_UnitOut], list[Atom]]]:
            i, chunk = job
            return split_on_length(
                lambda part: ask((i, part)), chunk, lambda part: halve(part, measure), self.UNITS_ROLE
            )

        def ask(job: tuple[int, list[Atom]]) -> tuple[list[_UnitOut], list[Atom]]:
            i, chunk = job
            first = chunk[0]
            where = " > ".join(first.path) or "(report start)"
            starts_at_heading = is_heading(first.text.split("\n", 1)[0])
            note = f"This is part {i + 1} of {total} of the gold report."
            if not starts_at_heading and first.path:
                note += f" It continues the section {where}."
            result = self.ask(
                self.UNITS_ROLE,
                UnitsReply,
                report_part="\n\n".join(a.text for a in chunk),
                part_note=note,
                unit_types=", ".join(UNIT_TYPES),
                on_length="split",
            )
            return result.value.units, chunk

        replies = [r for rs in self.map(ask_part, list(enumerate(chunks))) for r in rs]
        found = [(u, chunk) for got, chunk in replies for u in got]
        units = [
            InfoUnit(
                unit_id=i,
                type=u.type,
                content=u.content,
                source_sentence=u.source_sentence.strip(),
                section=u.section.strip() or section_of(chunk, u.source_sentence),
            )
            for i, (u, chunk) in enumerate(found)
        ]
        self.last_calls = [{"role": self.UNITS_ROLE, "parts": total, "units": len(units)}]
        return units

    # -- grading

    def _report_view(self, r_atoms: list[Atom], batch: list[InfoUnit], room: int) -> tuple[str, list[str]]:
        """R' whole when it fits `room` tokens, else its sections most related to the batch (report order)
        and the names of the omitted ones."""
        full = "\n\n".join(a.text for a in r_atoms)
        if count_tokens(full) <= room:
            return full, []
        want = set(terms(" ".join(u.content for u in batch)))
        parts = pack(r_atoms, max(1, room // 2), (lambda a: a.flat,))
        scored = []
        for pi, part in enumerate(parts):
            have = set(terms(" ".join(a.text for a in part)))
            scored.append((-len(want & have), pi, size(part) + 8))
        chosen: set[int] = set()
        used = 0
        for _, pi, tokens in sorted(scored):
            if used + tokens <= room:
                chosen.add(pi)
                used += tokens

        def part_names(part: list[Atom]) -> list[str]:
            return list(dict.fromkeys(" > ".join(a.path) or "(report start)" for a in part))

        shown = {name for pi in chosen for name in part_names(parts[pi])}
        names: list[str] = []
        for pi, part in enumerate(parts):
            if pi not in chosen:
                for name in part_names(part):
                    label = f"{name} (in part)" if name in shown else name
                    if label not in names:
                        names.append(label)
        pieces = []
        for pi, part in enumerate(parts):
            if pi in chosen:
                pieces.append("\n\n".join(a.text for a in part))
            elif not pieces or pieces[-1] != "[... omitted ...]":
                pieces.append("[... omitted ...]")
        return "\n\n".join(pieces), names

    def grade(self, units: Sequence[InfoUnit], generated_markdown: str) -> list[ItemScore]:
        units = list(units)
        if not units:
            return []
        batches = [units[i : i + self.batch_size] for i in range(0, len(units), self.batch_size)]
        base = self.overhead(self.COVERAGE_ROLE, generated_report="", report_note="", units="", unit_ids="")
        blocks = md_blocks(generated_markdown)
        budget = self.input_budget()
        atom_limit = max(64, (budget - base) // 4)
        r_atoms = atoms(generated_markdown, atom_limit) if generated_markdown.strip() else []
        results = self.map(lambda batch: self._grade_batch(batch, r_atoms, blocks, budget - base), batches)
        self.last_calls = [{"role": self.COVERAGE_ROLE, "batches": len(batches)}]
        return [s for batch in results for s in batch]

    def _grade_batch(
        self, batch: list[InfoUnit], r_atoms: list[Atom], blocks: list[Block], left: int
    ) -> list[ItemScore]:
        """One score_coverage request: R' (or an excerpt fitting the `left` tokens) and the batch's units."""
        listing = "\n".join(
            json.dumps({"unit_id": u.unit_id, "type": u.type, "content": u.content}, ensure_ascii=False)
            for u in batch
        )
        ids = ", ".join(str(u.unit_id) for u in batch)
        room = left - count_tokens(listing) - count_tokens(ids) - 200
        if room < 64:
            raise FrameInputError(
                "llm.context_tokens",
                f"context_tokens {self.settings.context_tokens} leave no room for the generated report "
                f"next to a batch of {len(batch)} units in {self.COVERAGE_ROLE}",
            )
        if not r_atoms:
            view, omitted = "(the generated report is empty)", []
        else:
            view, omitted = self._report_view(r_atoms, batch, room)
        if omitted:
            note = (
                "The generated report is too long for this request: below is an EXCERPT holding its "
                "sections most related to these units. Omitted sections: " + "; ".join(omitted) + "."
            )
        else:
            note = "Below is the complete generated report."
        result = self.ask(
            self.COVERAGE_ROLE,
            CoverageReply,
            check=_batch_check([u.unit_id for u in batch]),
            generated_report=view,
            report_note=note,
            units=listing,
            unit_ids=ids,
        )
        by_id = {j.unit_id: j for j in result.value.judgments}
        suffix = ""
        if omitted:
            suffix = f" [R' excerpted to fit the context; omitted sections: {'; '.join(omitted)}]"
        return [
            _unit_item(
                u,
                float(by_id[u.unit_id].score),
                evidence=by_id[u.unit_id].evidence.strip(),
                evidence_ref=self._locate(blocks, by_id[u.unit_id].evidence),
                rationale=(by_id[u.unit_id].rationale.strip() + suffix).strip(),
            )
            for u in batch
        ]

    @staticmethod
    def _locate(blocks: list[Block], evidence: str) -> str:
        """Heading path of the block of R' that holds the quoted evidence ('' when not found)."""
        quote = _norm(evidence)
        if not quote:
            return ""
        probe = quote[:120]
        for b in blocks:
            if b.kind not in ("title", "heading") and probe in _norm(b.raw.replace("|", " ")):
                return " > ".join(b.path)
        for b in blocks:  # a table row quoted with its cell bars
            if b.kind == "table" and probe in _norm(b.raw):
                return " > ".join(b.path)
        return ""
