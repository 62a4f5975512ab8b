"""The LLM scaffold judge: the alignment of R' with a scaffold's facts, questions and entities, fact
faithfulness and Fact Focus, each asked in batches by its role."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from schemas.config import LLMSettings
from schemas.scaffold import (
    Alignment,
    Scaffold,
    ScaffoldAttribute,
    ScaffoldEntity,
    ScaffoldFact,
    ScaffoldJudgment,
)
from tasks.errors import FrameInputError
from tasks.score.judges import MAX_ITEMS, sample_by_text
from tasks.score.llm_judge import LLMJudge
from tasks.score.scaffold.common import BATCH_ATTRIBUTES, BATCH_ITEMS, SEED, _focus_facts
from tasks.score.scaffold.numbered import _excerpt_note, _facts_note, _facts_view, _Numbered, _sentence
from tasks.score.scaffold.replies import (
    AlignReply,
    EntityCheckReply,
    FaithfulReply,
    FocusReply,
    _exact_ids,
    _known_ids,
)

_Job = tuple[str, Any]  # (kind: fact | question | entity | sentence, the batch)


class LLMScaffoldJudge(LLMJudge):
    """Alignment of R' with a scaffold, fact faithfulness and Fact Focus, by four LLM roles."""

    ALIGN_ROLE = "score_scaffold_align"
    ENTITY_ROLE = "score_scaffold_entity_check"
    FAITHFUL_ROLE = "score_scaffold_faithful"
    FOCUS_ROLE = "score_scaffold_focus"
    ROLES = (ALIGN_ROLE, ENTITY_ROLE, FAITHFUL_ROLE, FOCUS_ROLE)

    def __init__(
        self,
        client: Any,
        settings: LLMSettings,
        ctx: Any = None,
        *,
        batch_size: int = BATCH_ITEMS,
        attribute_batch: int = BATCH_ATTRIBUTES,
        max_sentences: int = MAX_ITEMS,
        seed: int = SEED,
    ) -> None:
        if batch_size < 1 or attribute_batch < 1 or max_sentences < 1:
            raise ValueError("batch_size, attribute_batch and max_sentences must be >= 1")
        super().__init__(client, settings, ctx=ctx)
        self.batch_size = batch_size
        self.attribute_batch = attribute_batch
        self.max_sentences = max_sentences
        self.seed = seed

    def _room(self, role: str, **blank: str) -> int:
        room = self.input_budget() - self.overhead(role, **blank) - 200
        if room < 64:
            raise FrameInputError(
                "llm.context_tokens",
                f"context_tokens {self.settings.context_tokens} leave no room for the report next to a batch "
                f"in {role}",
            )
        return room

    def judge(self, scaffold: Scaffold, generated_markdown: str) -> ScaffoldJudgment:
        report = _Numbered.of(generated_markdown)
        has_gold = bool(len(report) and scaffold.gold_markdown.strip())
        gold = _Numbered.of(scaffold.gold_markdown) if has_gold else None
        facts = _focus_facts(scaffold)
        # F and Fact Focus grade the same seeded sample of R' sentences
        ids = list(range(1, len(report) + 1))
        picked = sample_by_text(ids, lambda i: report.pieces[i - 1].text, self.max_sentences, self.seed)
        sampled = picked if gold is not None and len(gold) else []
        focused = picked if facts else []

        def run(job: _Job) -> tuple[list[Alignment], dict[str, Any]]:
            kind, batch = job
            if kind in ("fact", "question"):
                return self._align(kind, batch, report)
            if kind == "entity":
                return self._entities(batch, report)
            if kind == "focus":
                return self._focus(batch, report, facts)
            assert gold is not None
            return self._faithful(batch, report, gold)

        jobs = self._jobs(scaffold, sampled, focused) if len(report) else []
        results = self.map(run, jobs)
        self.last_calls = [call for _, call in results]
        by_kind: dict[str, list[Alignment]] = {"item": [], "sentence": [], "focus": []}
        for (kind, _), (al, _) in zip(jobs, results, strict=True):
            by_kind[kind if kind in ("sentence", "focus") else "item"].extend(al)
        alignments, faithful = by_kind["item"], by_kind["sentence"]
        if not len(report):  # nothing to ask: every item absent
            alignments = _all_absent(scaffold)
        detail = {
            "requests": len(results),
            "retries": sum(c["attempts"] - 1 for c in self.last_calls),
            "excerpted_requests": sum(1 for c in self.last_calls if c["excerpt"]),
            "sampled_sentences": len(sampled),
            "focus_sentences": len(focused),
            "max_sentences": self.max_sentences,
            "seed": self.seed,
        }
        if gold is None and len(report):
            detail["faithfulness"] = "the scaffold holds no gold report"
        return ScaffoldJudgment(
            judge=self.name,
            sentences=len(report),
            alignments=alignments,
            faithful=faithful,
            focus=by_kind["focus"],
            detail=detail,
        )

    def _jobs(self, scaffold: Scaffold, sampled: list[int], focused: Sequence[int] = ()) -> list[_Job]:
        """Facts, questions, entities, sampled R' sentences for F and for Fact Focus, in batches, in that
        order."""
        n = self.batch_size

        def batches(items: Sequence[Any]) -> list[Any]:
            return [items[i : i + n] for i in range(0, len(items), n)]

        return (
            [("fact", b) for b in batches(scaffold.facts)]
            + [("question", b) for b in batches(scaffold.questions)]
            + [("entity", b) for b in self._entity_batches(scaffold)]
            + [("sentence", b) for b in batches(sampled)]
            + [("focus", b) for b in batches(list(focused))]
        )

    def _entity_batches(
        self, scaffold: Scaffold
    ) -> list[list[tuple[ScaffoldEntity, list[ScaffoldAttribute]]]]:
        """Entities packed while their attributes fit `attribute_batch`; a larger entity is split."""
        batches: list[list[tuple[ScaffoldEntity, list[ScaffoldAttribute]]]] = []
        cur: list[tuple[ScaffoldEntity, list[ScaffoldAttribute]]] = []
        n = 0
        for e in scaffold.entities:
            for k in range(0, len(e.attributes), self.attribute_batch):
                part = e.attributes[k : k + self.attribute_batch]
                if cur and n + len(part) > self.attribute_batch:
                    batches.append(cur)
                    cur, n = [], 0
                cur.append((e, part))
                n += len(part)
        if cur:
            batches.append(cur)
        return batches

    def _ask_about(
        self,
        role: str,
        schema: type[Any],
        doc: _Numbered,
        query: str,
        what: str,
        subject: str,
        check: Callable[[Any, set[int]], None],
        slots: tuple[str, str] = ("report_note", "sentences"),
        **variables: str,
    ) -> tuple[Any, int]:
        """One `role` request showing `doc` (whole, or the excerpt sharing most words with `query`) in the
        prompt variables `slots` (its note, its text); `check(reply, ids shown)`. Returns the reply and how
        many of doc's sentences were shown."""
        note_slot, text_slot = slots
        room = self._room(role, **{note_slot: "", text_slot: ""}, **variables)
        text, shown = doc.view(query, room)
        shown_set = set(shown)
        note = _excerpt_note(what, len(shown), len(doc), subject)
        result = self.ask(
            role,
            schema,
            check=lambda reply: check(reply, shown_set),
            **{note_slot: note, text_slot: text},
            **variables,
        )
        return result, len(shown)

    def _align(
        self, kind: str, batch: list[Any], report: _Numbered
    ) -> tuple[list[Alignment], dict[str, Any]]:
        if kind == "fact":
            listing = "\n".join(json.dumps({"id": f.id, "fact": f.text}, ensure_ascii=False) for f in batch)
            query = " ".join(f.text for f in batch)
        else:
            listing = "\n".join(
                json.dumps(
                    {"id": q.id, "question": q.question, "expected_answer": q.answer}, ensure_ascii=False
                )
                for q in batch
            )
            query = " ".join(f"{q.question} {q.answer}" for q in batch)
        ids = [it.id for it in batch]

        def check(reply: AlignReply, shown: set[int]) -> None:
            _exact_ids("id", ids, [a.id for a in reply.alignments])
            _known_ids(
                "sentence_ids", [s for a in reply.alignments for s in a.sentence_ids], shown, len(report)
            )

        what = "facts" if kind == "fact" else "questions"
        result, shown = self._ask_about(
            self.ALIGN_ROLE,
            AlignReply,
            report,
            query,
            "generated report",
            what,
            check,
            criterion=self.prompts[self.ALIGN_ROLE].parts[kind],
            item_label=what,
            items=listing,
            item_ids=", ".join(map(str, ids)),
        )
        suffix = _suffix(shown, len(report), "R'")
        out = []
        for a in sorted(result.value.alignments, key=lambda a: ids.index(a.id)):
            out.append(
                Alignment(
                    item_id=a.id,
                    kind=kind,  # type: ignore[arg-type]
                    ok=a.ok,
                    score=1.0 if a.ok else 0.0,
                    **report.cited(sorted(set(a.sentence_ids))),
                    rationale=(a.justification.strip() + suffix).strip(),
                )
            )
        return out, _call(self.ALIGN_ROLE, kind, result, shown < len(report))

    def _entities(
        self, batch: list[tuple[ScaffoldEntity, list[ScaffoldAttribute]]], report: _Numbered
    ) -> tuple[list[Alignment], dict[str, Any]]:
        listing = "\n".join(
            json.dumps(
                {
                    "entity": e.name,
                    "type": e.type,
                    "attributes": [{"id": a.id, "attribute": a.text} for a in attrs],
                },
                ensure_ascii=False,
            )
            for e, attrs in batch
        )
        ids = [a.id for _, attrs in batch for a in attrs]
        query = " ".join(f"{e.name} " + " ".join(a.text for a in attrs) for e, attrs in batch)

        def check(reply: EntityCheckReply, shown: set[int]) -> None:
            listed = [i for e in reply.entities for i in e.preserved_ids]
            unknown = sorted(set(listed) - set(ids))
            if unknown:
                raise ValueError(f"preserved_ids must be attribute ids of this request; unknown: {unknown}")
            _known_ids(
                "sentence_ids", [s for e in reply.entities for s in e.sentence_ids], shown, len(report)
            )

        result, shown = self._ask_about(
            self.ENTITY_ROLE,
            EntityCheckReply,
            report,
            query,
            "generated report",
            "entities",
            check,
            entities=listing,
        )
        kept: dict[int, list[int]] = {}
        for e in result.value.entities:
            for i in e.preserved_ids:
                kept.setdefault(i, sorted(set(e.sentence_ids)))
        suffix = _suffix(shown, len(report), "R'")
        out = [
            Alignment(
                item_id=i,
                kind="attribute",
                ok=i in kept,
                score=1.0 if i in kept else 0.0,
                **report.cited(kept.get(i, [])),
                rationale=("listed as preserved by the judge" if i in kept else "not listed as preserved")
                + suffix,
            )
            for i in ids
        ]
        return out, _call(self.ENTITY_ROLE, "attribute", result, shown < len(report))

    def _faithful(
        self, batch: list[int], report: _Numbered, gold: _Numbered
    ) -> tuple[list[Alignment], dict[str, Any]]:
        listing = "\n".join(
            json.dumps({"id": i, "sentence": report.pieces[i - 1].text}, ensure_ascii=False) for i in batch
        )
        query = " ".join(report.pieces[i - 1].text for i in batch)

        def check(reply: FaithfulReply, shown: set[int]) -> None:
            _exact_ids("id", batch, [s.id for s in reply.sentences])
            _known_ids("evidence_ids", [e for s in reply.sentences for e in s.evidence_ids], shown, len(gold))

        result, shown = self._ask_about(
            self.FAITHFUL_ROLE,
            FaithfulReply,
            gold,
            query,
            "gold report",
            "sentences to check",
            check,
            ("document_note", "document"),
            sentences=listing,
            sentence_ids=", ".join(map(str, batch)),
        )
        by_id = {s.id: s for s in result.value.sentences}
        suffix = _suffix(shown, len(gold), "Y")
        out = []
        for i in batch:
            s = by_id[i]
            out.append(
                _sentence(
                    report,
                    i,
                    s.supported,
                    **gold.cited(sorted(set(s.evidence_ids))),
                    rationale=(s.justification.strip() + suffix).strip(),
                )
            )
        return out, _call(self.FAITHFUL_ROLE, "sentence", result, shown < len(gold))

    def _focus(
        self, batch: list[int], report: _Numbered, facts: list[ScaffoldFact]
    ) -> tuple[list[Alignment], dict[str, Any]]:
        """Fact Focus (001 Table 7) asked from the sentence side: does each sampled R' sentence state at
        least one main or supporting fact (shown whole, or the facts sharing most words with the batch)?"""
        listing = "\n".join(
            json.dumps({"id": i, "sentence": report.pieces[i - 1].text}, ensure_ascii=False) for i in batch
        )
        ids = ", ".join(map(str, batch))
        room = self._room(self.FOCUS_ROLE, facts_note="", facts="", sentences=listing, sentence_ids=ids)
        text, shown = _facts_view(facts, " ".join(report.pieces[i - 1].text for i in batch), room)
        listed = set(shown)

        def check(reply: FocusReply) -> None:
            _exact_ids("id", batch, [s.id for s in reply.sentences])
            bad = sorted({f for s in reply.sentences for f in s.fact_ids if f not in listed})
            if bad:
                raise ValueError(f"fact_ids must be ids of the listed facts; not listed: {bad}")
            bare = [s.id for s in reply.sentences if s.aligned and not s.fact_ids]
            if bare:
                raise ValueError(f"an aligned sentence must give the fact_ids it states; none for: {bare}")

        result = self.ask(
            self.FOCUS_ROLE,
            FocusReply,
            check=check,
            facts_note=_facts_note(len(shown), len(facts)),
            facts=text,
            sentences=listing,
            sentence_ids=ids,
        )
        by_id = {s.id: s for s in result.value.sentences}
        fact = {f.id: f for f in facts}
        suffix = (
            f" [facts excerpted to fit the context: {len(shown)} of {len(facts)} shown]"
            if len(shown) < len(facts)
            else ""
        )
        out = []
        for i in batch:
            s = by_id[i]
            fids = sorted(set(s.fact_ids)) if s.aligned else []
            out.append(
                _sentence(
                    report,
                    i,
                    s.aligned,
                    sentence_ids=fids,
                    evidence=" ".join(fact[f].text for f in fids[:3]),
                    evidence_ref=fact[fids[0]].section if fids else "",
                    rationale=(s.justification.strip() + suffix).strip(),
                )
            )
        return out, _call(self.FOCUS_ROLE, "focus", result, len(shown) < len(facts))


def _all_absent(scaffold: Scaffold) -> list[Alignment]:
    """Every fact, question and attribute judged absent (an empty R': nothing to ask)."""
    items = (
        [("fact", f.id) for f in scaffold.facts]
        + [("question", q.id) for q in scaffold.questions]
        + [("attribute", a.id) for a in scaffold.attributes()]
    )
    return [
        Alignment(item_id=i, kind=k, ok=False, score=0.0, rationale="the generated report is empty")  # type: ignore[arg-type]
        for k, i in items
    ]


def _suffix(shown: int, total: int, which: str) -> str:
    """Added to every rationale of an excerpted request."""
    return (
        f" [{which} excerpted to fit the context: {shown} of {total} sentences shown]"
        if shown < total
        else ""
    )


def _call(role: str, kind: str, result: Any, excerpt: bool) -> dict[str, Any]:
    """One request's line of `last_calls`."""
    return {
        "role": role,
        "kind": kind,
        "attempts": result.attempts,
        "cached": result.cached,
        "excerpt": excerpt,
    }
