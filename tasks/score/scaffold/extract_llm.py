"""The LLM scaffold extractor: facts, questions and entities of Y by three roles, asked once per part of Y,
merged over the parts."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import BaseModel

from schemas.scaffold import Scaffold, ScaffoldAttribute, ScaffoldEntity, ScaffoldFact, ScaffoldQuestion
from tasks.errors import FrameInputError
from tasks.markdown.chunks import Atom, atoms, pack, section_of, size
from tasks.markdown.document import is_heading
from tasks.score.llm_judge import LLMJudge
from tasks.score.scaffold.common import _norm, _renumbered
from tasks.score.scaffold.replies import EntitiesReply, FactsReply, QuestionsReply, _EntityOut


class LLMScaffoldExtractor(LLMJudge):
    """Facts, questions and entities of Y by three LLM roles, each asked once per part of Y."""

    FACTS_ROLE = "score_scaffold_facts"
    QUESTIONS_ROLE = "score_scaffold_questions"
    ENTITIES_ROLE = "score_scaffold_entities"
    ROLES = (FACTS_ROLE, QUESTIONS_ROLE, ENTITIES_ROLE)
    # role -> reply model and how many items to ask over the whole report. Facts and questions: the paper's
    # 20-100 per document (001 App. G.1, G.2). Entity attributes: 20-150 is frame's bound, not the paper's
    # (App. G.3 asks for all key entities, with no number): it keeps each reply within the output budget and
    # the per-system entity checks bounded in cost.
    ASKS: ClassVar[dict[str, tuple[type[BaseModel], int, int]]] = {
        FACTS_ROLE: (FactsReply, 20, 100),
        QUESTIONS_ROLE: (QuestionsReply, 20, 100),
        ENTITIES_ROLE: (EntitiesReply, 20, 150),
    }

    def _part_budget(self) -> int:
        overhead = max(
            self.overhead(r, report_part="", part_note="", min_items="", max_items="") for r in self.ROLES
        )
        budget = self.input_budget() - overhead - 200
        if budget < 64:
            raise FrameInputError(
                "llm.context_tokens",
                f"context_tokens {self.settings.context_tokens} / output budget "
                f"{max(self.output_budget(r) for r in self.ROLES)} (llm.max_output_tokens) leave no room to "
                "send the gold report to the scaffold extraction roles",
            )
        return budget

    def _range(self, share: float, low: int, high: int) -> tuple[int, int]:
        """How many items to ask of a part holding `share` of Y (paper: low-high per document), within what
        one reply can hold (about 60 tokens per item)."""
        cap = max(5, min(self.output_budget(r) for r in self.ROLES) // 60)
        hi = min(cap, max(5, math.ceil(high * share)))
        return min(hi, max(2, round(low * share))), hi

    def extract(self, gold_markdown: str) -> Scaffold:
        if not gold_markdown.strip():
            return Scaffold(extractor=self.name, gold_markdown=gold_markdown)
        budget = self._part_budget()
        chunks = pack(atoms(gold_markdown, budget), budget, (lambda a: a.top, lambda a: a.flat))
        total = max(1, sum(size(c) for c in chunks))

        def ask_part(job: tuple[str, int]) -> tuple[str, int, Any, int]:
            role, i = job
            schema, low, high = self.ASKS[role]
            lo, hi = self._range(size(chunks[i]) / total, low, high)
            result = self.ask(
                role,
                schema,
                report_part="\n\n".join(a.text for a in chunks[i]),
                part_note=_part_note(chunks, i),
                min_items=str(lo),
                max_items=str(hi),
            )
            return role, i, result.value, result.attempts

        jobs = [(role, i) for role in self.ROLES for i in range(len(chunks))]
        replies = self.map(ask_part, jobs)
        self.last_calls = [{"role": r, "part": i + 1, "attempts": n} for r, i, _, n in replies]
        items = self._merged(chunks, {(r, i): v for r, i, v, _ in replies})
        detail = {"parts": len(chunks), "requests": len(jobs)}
        return Scaffold(extractor=self.name, gold_markdown=gold_markdown, detail=detail, **items)

    def _merged(self, chunks: list[list[Atom]], got: dict[tuple[str, int], Any]) -> dict[str, Any]:
        """The facts, questions and entities of every part's replies: ids run on over the parts, entities
        of the same (normalised) name are merged."""
        facts: list[ScaffoldFact] = []
        questions: list[ScaffoldQuestion] = []
        entities: dict[str, ScaffoldEntity] = {}
        for i, chunk in enumerate(chunks):
            for f in got[(self.FACTS_ROLE, i)].facts:
                where = _placed(chunk, f.source, f.section)
                facts.append(ScaffoldFact(id=len(facts) + 1, text=f.fact, tier=f.tier, **where))
            for q in got[(self.QUESTIONS_ROLE, i)].questions:
                where = _placed(chunk, q.source, q.section)
                questions.append(
                    ScaffoldQuestion(
                        id=len(questions) + 1, question=q.question, answer=q.answer, tier=q.tier, **where
                    )
                )
            _merge_entities(entities, got[(self.ENTITIES_ROLE, i)].entities)
        return {"facts": facts, "questions": questions, "entities": _renumbered(entities.values())}


def _part_note(chunks: list[list[Atom]], i: int) -> str:
    """What a request is told about its part: its number, and the section it continues (when the part
    does not open with a heading)."""
    out = f"This is part {i + 1} of {len(chunks)} of the gold report."
    first = chunks[i][0]
    if first.path and not is_heading(first.text.split("\n", 1)[0]):
        out += f" It continues the section {' > '.join(first.path)}."
    return out


def _placed(chunk: list[Atom], source: str, section: str) -> dict[str, str]:
    """Source and section of an extracted item; the section found in its part when the reply gives none."""
    return {"source": source.strip(), "section": section.strip() or section_of(chunk, source)}


def _merge_entities(entities: dict[str, ScaffoldEntity], replies: Sequence[_EntityOut]) -> None:
    """Add the entities of one reply to `entities` (by normalised name), skipping repeated attributes."""
    for e in replies:
        ent = entities.setdefault(_norm(e.name), ScaffoldEntity(name=e.name, type=e.type.strip() or "other"))
        have = {_norm(a.text) for a in ent.attributes}
        for a in e.attributes:
            if _norm(a.attribute) not in have:
                have.add(_norm(a.attribute))
                ent.attributes.append(
                    ScaffoldAttribute(id=1, text=a.attribute, tier=a.tier, source=a.source.strip())
                )
