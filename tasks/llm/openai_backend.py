"""The `openai` backend: the synthesis roles answered by any OpenAI-compatible chat endpoint.

Each role renders its template from `prompts/` (tasks.llm.prompts), calls
`LLMClient.complete_json` with the role's schema and a role-specific check, and turns the
validated reply into the project's objects with provenance attached:

* `propose_structure` (role `structure_free`) and `adapt_structure` (`structure_restricted`):
  StructureOutput -> ReportStructure. The check builds the ReportStructure (unique ids, only
  sections at the top, ...), requires every section to hold at least one content element and
  every `sources` entry to be a doc_id of G, and (form-restricted, filings) no title naming the
  earlier edition's period instead of the new one; a violation is invalid output (corrective retry).
* `add_questions` (`questions`): QuestionsOutput merged into the structure; every top-level
  section must get questions and no unknown id may appear; a question naming an entity that G does
  not name (tasks/markdown/entities.py: an earlier edition's paper, name or period) is invalid output.
* `fill` (`fill`): FillOutput.content; Markdown headings (a line starting with '#') or a
  leftover '<!-- FILL' placeholder make the reply invalid.

Context budget: input may use `context_tokens - output budget - reserve` tokens, less the tokenizer
margin (tasks.llm.budget: o200k_base counts; the reserve leaves room for one corrective turn). If the
grounding documents do not fit, the largest ones are replaced, one at a time, by a digest (title,
headings, opening paragraph), marked as such in the prompt and logged as a warning; if even digests do
not fit, the step fails with `ContextBudgetError`. For `fill`, the highest-scoring retrieved passages
that fit are kept and the rest dropped whole, again with a warning. Nothing is ever cut silently.

Provenance records, per role, the model the server reported, the template's sha256, the number
of model replies it took (`calls`) and their token usage. These come from the cache entry on a
cache hit, so a rerun writes identical provenance. `usage` totals what this backend requested.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from pathlib import Path
from typing import Any, Literal

from schemas.config import LLMSettings
from schemas.documents import GroundingDocument
from schemas.structure import (
    CONTAINERS,
    LEAVES,
    MAX_QUESTIONS,
    MIN_QUESTIONS,
    FillOutput,
    Provenance,
    QuestionsOutput,
    ReportStructure,
    StructureNode,
    StructureOutput,
)
from tasks.errors import FrameInputError
from tasks.ground.load import GroundingSet
from tasks.llm.backend import Passage, StepContext
from tasks.llm.budget import input_budget, output_budget
from tasks.llm.client import LLMClient, LLMError, LLMResult
from tasks.llm.prompts import Prompt, load_prompt, render
from tasks.markdown.document import hash_line, is_figure, is_heading, is_table_row
from tasks.markdown.entities import absent_entities, documents_haystack
from tasks.markdown.periods import Period, period_end_named, snapshot_period, stale_mentions
from tasks.sources import source_kind
from tasks.tokens import count_tokens

log = logging.getLogger(__name__)

ROLE_STRUCTURE_FREE = "structure_free"
ROLE_STRUCTURE_RESTRICTED = "structure_restricted"
ROLE_QUESTIONS = "questions"
ROLE_FILL = "fill"
ROLES = (ROLE_STRUCTURE_FREE, ROLE_STRUCTURE_RESTRICTED, ROLE_QUESTIONS, ROLE_FILL)

RETRY_RESERVE_TOKENS = 2500  # room for one corrective turn (echoed reply + correction)
MESSAGE_OVERHEAD_TOKENS = 16  # chat framing of the two messages
DIGEST_MAX_HEADINGS = 80
DIGEST_PARAGRAPH_WORDS = 150
OUTLINE_OBJECTIVE_CHARS = 90


class ContextBudgetError(LLMError):
    """Even the most compact form of the input does not fit the model's context window."""


# --------------------------------------------------------------------------------- text helpers


def _attr(value: str) -> str:
    """Attribute text for the <document>/<excerpt> tags (read by a model, not an XML parser)."""
    return " ".join(value.replace('"', "'").split())


def _digest_heading(line: str) -> bool:
    return is_heading(line, indent="blank", text="char")


def document_digest(doc: GroundingDocument, text: str) -> str:
    """Title, headings and opening paragraph of one grounding document (what digest mode sends)."""
    lines = text.splitlines()
    headings = [ln.strip() for ln in lines if _digest_heading(ln)]
    blocks = [b.strip() for b in re.split(r"\n\s*\n", text) if b.strip()]

    def is_prose(block: str) -> bool:
        first = block.lstrip()
        head = first.splitlines()[0]
        return not (_digest_heading(head) or is_table_row(first) or is_figure(first) or first.startswith("<"))

    opening = next((b for b in blocks if is_prose(b)), None)
    if opening is None:
        opening = next((b for b in blocks if not _digest_heading(b.splitlines()[0])), "")
    words = opening.split()
    if len(words) > DIGEST_PARAGRAPH_WORDS:
        opening = (
            " ".join(words[:DIGEST_PARAGRAPH_WORDS])
            + f" [... {len(words) - DIGEST_PARAGRAPH_WORDS} more words]"
        )
    parts = [f"Title: {doc.title}"]
    if headings:
        shown = headings[:DIGEST_MAX_HEADINGS]
        more = len(headings) - len(shown)
        parts.append("Headings:\n" + "\n".join(shown) + (f"\n[... {more} more headings]" if more else ""))
    else:
        parts.append("Headings: (none)")
    if opening:
        parts.append("Opening paragraph:\n" + opening)
    extra = []
    if doc.tables:
        extra.append(f"{doc.tables} tables")
    if doc.images:
        extra.append(f"{doc.images} figures")
    if extra:
        parts.append("Also contains: " + ", ".join(extra) + " (not shown).")
    return "\n\n".join(parts)


def document_block(doc: GroundingDocument, body: str, digest: bool) -> str:
    attrs = f'doc_id="{_attr(doc.doc_id)}" title="{_attr(doc.title)}" kind="{doc.kind}"'
    if digest:
        attrs += f' shown="digest" full_tokens="{doc.tokens}"'
    return f"<document {attrs}>\n{body.strip()}\n</document>"


def passage_block(p: Passage) -> str:
    return f'<excerpt doc_id="{_attr(p.doc_id)}" kind="{p.kind}">\n{p.text.strip()}\n</excerpt>'


def _strip_questions(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _strip_questions(v) for k, v in data.items() if k != "questions"}
    if isinstance(data, list):
        return [_strip_questions(v) for v in data]
    return data


def structure_prompt_json(s: ReportStructure, with_questions: bool = False) -> str:
    """The structure as the model sees it: title and section tree, no provenance."""
    data: Any = {"title": s.title, "sections": [n.model_dump(mode="json") for n in s.nodes]}
    if not with_questions:
        data = _strip_questions(data)
    return json.dumps(data, ensure_ascii=False, indent=1)


def _has_leaf(node: StructureNode) -> bool:
    return any(n.type in LEAVES for n in node.walk())


def _heading_lines(content: str) -> list[str]:
    return [ln for ln in content.splitlines() if hash_line(ln)]


def check_fill_content(content: str) -> None:
    """Raise ValueError unless `content` is usable as one placeholder's Markdown."""
    if not content.strip():
        raise ValueError("content is empty")
    heads = _heading_lines(content)
    if heads:
        first = heads[0].strip()[:60]
        raise ValueError(
            f"content must not contain Markdown headings, but {len(heads)} line(s) start with '#' "
            f"(first: {first!r})"
        )
    if "<!-- FILL" in content:
        raise ValueError("content still contains a '<!-- FILL' placeholder")


# ------------------------------------------------------------------------------------------ backend


class OpenAIBackend:
    """Backend protocol (tasks.llm.backend) over an OpenAI-compatible endpoint."""

    name: Literal["offline", "openai"] = "openai"

    def __init__(
        self,
        settings: LLMSettings,
        cache_dir: str | Path,
        *,
        client: LLMClient | None = None,
        prompts_dir: str | Path | None = None,
    ) -> None:
        self.settings = settings
        self.client = client or LLMClient(settings, Path(cache_dir))
        self._prompts: dict[str, Prompt] = {}
        self._prompts_dir = prompts_dir
        self._lock = threading.Lock()
        self._usage: dict[str, dict[str, int]] = {}
        self._models: dict[str, str] = {}
        self.input_budget = input_budget(settings, ROLES, RETRY_RESERVE_TOKENS)
        if self.input_budget <= 0:
            raise FrameInputError(
                "llm.context_tokens",
                f"context_tokens {settings.context_tokens} leaves no room for input after the output "
                f"budget of {output_budget(settings, ROLES)} tokens (llm.max_output_tokens)",
            )

    # -- bookkeeping

    def prompt(self, name: str) -> Prompt:
        with self._lock:
            if name not in self._prompts:
                self._prompts[name] = load_prompt(name, self._prompts_dir)
            return self._prompts[name]

    def prompt_hashes(self) -> dict[str, str]:
        """sha256 of every role's template (for release manifests)."""
        return {role: self.prompt(role).sha256 for role in ROLES}

    def _record(self, role: str, result: LLMResult) -> None:
        with self._lock:
            u = self._usage.setdefault(
                role, {"requests": 0, "cached": 0, "calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
            )
            u["requests"] += 1
            u["cached"] += int(result.cached)
            u["calls"] += result.attempts
            u["prompt_tokens"] += result.prompt_tokens
            u["completion_tokens"] += result.completion_tokens
            self._models[role] = result.model

    @property
    def usage(self) -> dict[str, dict[str, int]]:
        """Per role and `total`: requests answered, of which cached, model replies (`calls`) and tokens.

        Tokens and calls include cached answers (what producing the artifacts cost); what this
        process actually spent on HTTP is `self.client.stats`.
        """
        with self._lock:
            out = {role: dict(u) for role, u in self._usage.items()}
        total = {"requests": 0, "cached": 0, "calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        for u in out.values():
            for k in total:
                total[k] += u[k]
        out["total"] = total
        return out

    def provenance(self, role: str, result: LLMResult | None = None) -> Provenance:
        """Provenance of one result, or (without `result`) of everything `role` did so far."""
        prompt = self.prompt(role)
        if result is not None:
            return Provenance(
                backend="openai",
                model=result.model,
                role=role,
                prompt_sha256=prompt.sha256,
                calls=result.attempts,
                prompt_tokens=result.prompt_tokens,
                completion_tokens=result.completion_tokens,
            )
        u = self.usage.get(role, {})
        with self._lock:
            model = self._models.get(role, self.settings.model)
        return Provenance(
            backend="openai",
            model=model,
            role=role,
            prompt_sha256=prompt.sha256,
            calls=u.get("calls", 0),
            prompt_tokens=u.get("prompt_tokens", 0),
            completion_tokens=u.get("completion_tokens", 0),
        )

    # -- budgeting

    def _tokens(self, messages: list[dict[str, str]]) -> int:
        return sum(count_tokens(m["content"]) for m in messages) + MESSAGE_OVERHEAD_TOKENS

    def _grounding(
        self, prompt: Prompt, gset: GroundingSet, variables: dict[str, Any], role: str, ctx: StepContext
    ) -> list[dict[str, str]]:
        """Render `prompt` with G in full, or with digests of the largest documents if it must."""
        if not gset.documents:
            raise FrameInputError(gset.folder, "grounding set has no documents")
        texts: dict[str, str] = {}
        for d in gset.documents:
            if d.doc_id not in gset.texts:
                raise FrameInputError(gset.folder, f"no Markdown text loaded for document {d.doc_id}")
            texts[d.doc_id] = gset.texts[d.doc_id]
        full = {d.doc_id: document_block(d, texts[d.doc_id], digest=False) for d in gset.documents}

        def build(blocks: dict[str, str], note: str) -> list[dict[str, str]]:
            docs = "\n\n".join(blocks[d.doc_id] for d in gset.documents)
            return render(
                prompt,
                **variables,
                document_count=len(gset.documents),
                document_note=note,
                grounding_documents=docs,
            )

        full_note = "Every document is given in full."
        messages = build(full, full_note)
        full_tokens = self._tokens(messages)
        if full_tokens <= self.input_budget:
            return messages

        # Too long: replace the largest documents by digests, one at a time, until the prompt fits.
        sizes = {k: count_tokens(v) for k, v in full.items()}
        estimate = full_tokens
        blocks = dict(full)
        digested: list[str] = []
        used = full_tokens
        for d in sorted(gset.documents, key=lambda d: (-sizes[d.doc_id], d.doc_id)):
            blocks[d.doc_id] = document_block(d, document_digest(d, texts[d.doc_id]), digest=True)
            estimate += count_tokens(blocks[d.doc_id]) - sizes[d.doc_id]
            digested.append(d.doc_id)
            note_room = 40 + sum(count_tokens(i) + 1 for i in digested)  # the note lists the ids
            if estimate + note_room > self.input_budget and len(digested) < len(gset.documents):
                continue
            order = [x.doc_id for x in gset.documents if x.doc_id in digested]
            note = (
                f"{len(order)} of the documents were too long to include in full and are shown as "
                'digests (title, headings and opening paragraph, marked shown="digest"): '
                + ", ".join(order)
                + ". Their full text covers everything their headings list."
            )
            messages = build(blocks, note)
            used = self._tokens(messages)
            if used <= self.input_budget:
                break
        if used > self.input_budget:
            raise ContextBudgetError(
                f"{LLMClient.where(role, ctx)}: grounding set does not fit the context even as digests "
                f"({used} input tokens, budget {self.input_budget}; raise llm.context_tokens or use a "
                "model with a larger context)"
            )
        log.warning(
            "%s: grounding set (%d prompt tokens in full) exceeds the input budget of %d tokens; sent "
            "digests (title, headings, opening paragraph) instead of the full text for %d of %d "
            "documents: %s",
            LLMClient.where(role, ctx),
            full_tokens,
            self.input_budget,
            len(order),
            len(gset.documents),
            ", ".join(order),
        )
        return messages

    @staticmethod
    def _base_vars(ctx: StepContext) -> dict[str, Any]:
        return {
            "source_kind": ctx.source_kind,
            "domain": ctx.domain,
            "category": ctx.category,
            "snapshot": ctx.snapshot,
        }

    # -- structure roles

    def _structure_from(self, out: StructureOutput, restricted: bool, doc_ids: set[str]) -> ReportStructure:
        nodes = [n.model_copy(deep=True) for n in out.sections]
        for top in nodes:
            for n in top.walk():
                n.questions = []
        unknown = sorted({s for top in nodes for n in top.walk() for s in n.sources if s not in doc_ids})
        if unknown:
            known = ", ".join(sorted(doc_ids))
            raise ValueError(f"sources name unknown doc_ids {', '.join(unknown[:5])}; use only: {known}")
        structure = ReportStructure(title=out.title, form_restricted=restricted, nodes=nodes)
        empty = [n.id for n in structure.walk() if n.type in CONTAINERS and not _has_leaf(n)]
        if empty:
            raise ValueError(
                f"every section and subsection needs at least one content element below it; none in "
                f"{', '.join(empty[:5])}"
            )
        return structure

    @staticmethod
    def _check_periods(structure: ReportStructure, periods: tuple[Period, Period] | None) -> None:
        """The form-restricted rule of prompts/structure_restricted.md that `frame qa gold` checks on the
        release: no title names the earlier edition's period in place of the new one."""
        if periods is None:
            return
        old, new = periods
        titles = [("(report title)", structure.title)] + [
            (n.id, n.title) for n in structure.walk() if n.title
        ]
        stale = [f"{i} {t!r}" for i, t in titles if stale_mentions(t, old, new)]
        if stale:
            raise ValueError(
                f"titles name the earlier edition's period, not the new one ({new.label or new.end}): "
                + "; ".join(stale[:5])
                + ". Rewrite each for the new period, keeping its id and place"
            )

    @staticmethod
    def _periods(prev: ReportStructure, gset: GroundingSet, ctx: StepContext) -> tuple[Period, Period] | None:
        """(earlier, new) period of a filing's form-restricted structure, the earlier read from the earlier
        plan's title ("... for the period ended July 30, 2023"); None when it names none (papers)."""
        end = period_end_named(prev.title)
        if not source_kind(ctx.source_kind).fiscal_periods or end is None:
            return None
        new = snapshot_period(
            ctx.snapshot,
            annual=ctx.category == "financial_annual",
            facts=gset.facts,
            texts=gset.texts.values(),
        )
        if new.end is None or new.end == end:
            return None
        return new.at(end), new

    def _structure_call(
        self,
        role: str,
        messages,
        gset: GroundingSet,
        restricted: bool,
        ctx: StepContext,
        periods: tuple[Period, Period] | None = None,
    ):
        doc_ids = {d.doc_id for d in gset.documents}

        def check(out: StructureOutput) -> None:
            self._check_periods(self._structure_from(out, restricted, doc_ids), periods)

        result = self.client.complete_json(role, messages, StructureOutput, ctx, check=check)
        self._record(role, result)
        structure = self._structure_from(result.value, restricted, doc_ids)
        structure.provenance = [self.provenance(role, result)]
        return structure

    def propose_structure(self, gset: GroundingSet, ctx: StepContext) -> ReportStructure:
        role = ROLE_STRUCTURE_FREE
        messages = self._grounding(self.prompt(role), gset, self._base_vars(ctx), role, ctx)
        return self._structure_call(role, messages, gset, restricted=False, ctx=ctx)

    def adapt_structure(self, prev: ReportStructure, gset: GroundingSet, ctx: StepContext) -> ReportStructure:
        role = ROLE_STRUCTURE_RESTRICTED
        variables = {**self._base_vars(ctx), "previous_structure": structure_prompt_json(prev)}
        messages = self._grounding(self.prompt(role), gset, variables, role, ctx)
        periods = self._periods(prev, gset, ctx)
        structure = self._structure_call(role, messages, gset, restricted=True, ctx=ctx, periods=periods)
        prev_ids = {n.id for n in prev.walk()}
        kept = sum(1 for n in structure.walk() if n.id in prev_ids)
        log.info(
            "%s: adapted structure keeps %d of %d earlier node ids (%d nodes now)",
            LLMClient.where(role, ctx),
            kept,
            len(prev_ids),
            sum(1 for _ in structure.walk()),
        )
        return structure

    # -- questions

    @staticmethod
    def _check_named(out: QuestionsOutput, gset: GroundingSet) -> None:
        """The rule `frame qa gold` checks on the release (tasks/release/qa_questions.py): no question names
        an entity the new documents do not (a paper, name or period of the earlier edition carried over)."""
        hay = documents_haystack((d.title, gset.texts.get(d.doc_id, "")) for d in gset.documents)
        stale = [
            f"{q.id} {x!r} ({', '.join(e.text for e in absent)})"
            for q in out.sections
            for x in q.questions
            if (absent := absent_entities(x, hay))
        ]
        if stale:
            raise ValueError(
                "questions name papers, names or periods that the new documents do not: "
                + "; ".join(stale[:6])
                + ". Ask about the new documents only: replace each with a question about what they report"
            )

    @staticmethod
    def _check_questions(out: QuestionsOutput, structure: ReportStructure) -> None:
        ids = {n.id for n in structure.walk()}
        given = [q.id for q in out.sections]
        unknown = sorted({i for i in given if i not in ids})
        if unknown:
            raise ValueError(f"unknown ids {', '.join(unknown[:5])}; use the ids of the plan")
        dupes = sorted({i for i in given if given.count(i) > 1})
        if dupes:
            raise ValueError(f"ids given more than once: {', '.join(dupes[:5])}")
        missing = [n.id for n in structure.nodes if n.id not in given]
        if missing:
            raise ValueError(f"no questions for section(s) {', '.join(missing[:8])}")
        blank = [q.id for q in out.sections if any(not x.strip() for x in q.questions)]
        if blank:
            raise ValueError(f"empty question strings for {', '.join(blank[:5])}")
        # the step's own rule (tasks/synthesize/questions.py), checked here so that a reply breaking it is
        # asked again with the reason and never cached, rather than cached and failing every rerun
        top = {n.id for n in structure.nodes}
        odd = [
            f"{q.id} ({len(q.questions)})"
            for q in out.sections
            if q.id in top and not MIN_QUESTIONS <= len(q.questions) <= MAX_QUESTIONS
        ]
        if odd:
            raise ValueError(
                f"each top-level section needs {MIN_QUESTIONS}-{MAX_QUESTIONS} guiding questions; "
                f"not so for {', '.join(odd[:8])}"
            )

    def add_questions(
        self, structure: ReportStructure, gset: GroundingSet, prev: ReportStructure | None, ctx: StepContext
    ) -> ReportStructure:
        role = ROLE_QUESTIONS
        ids = {n.id for n in structure.walk()}
        previous: dict[str, list[str]] = {}
        if prev is not None:
            previous = {n.id: list(n.questions) for n in prev.walk() if n.questions and n.id in ids}
        variables = {
            **self._base_vars(ctx),
            "structure": structure_prompt_json(structure),
            "previous_questions": json.dumps(previous, ensure_ascii=False, indent=1) if previous else "none",
        }
        messages = self._grounding(self.prompt(role), gset, variables, role, ctx)

        def check(out: QuestionsOutput) -> None:
            self._check_questions(out, structure)
            self._check_named(out, gset)

        result = self.client.complete_json(role, messages, QuestionsOutput, ctx, check=check)
        self._record(role, result)
        by_id = {q.id: [x.strip() for x in q.questions] for q in result.value.sections}
        out = structure.model_copy(deep=True)
        for n in out.walk():
            if n.id in by_id:
                n.questions = by_id[n.id]
        out.provenance = [*structure.provenance, self.provenance(role, result)]
        return out

    # -- fill

    @staticmethod
    def _outline(structure: ReportStructure, target: str) -> str:
        lines: list[str] = []

        def visit(n: StructureNode, depth: int) -> None:
            mark = ">> " if n.id == target else "   "
            if n.type in CONTAINERS:
                label = n.title
            else:
                obj = " ".join(n.objective.split())
                if n.id != target and len(obj) > OUTLINE_OBJECTIVE_CHARS:
                    obj = obj[: OUTLINE_OBJECTIVE_CHARS - 3] + "..."
                label = obj or n.title
            lines.append(f"{mark}{'  ' * depth}- {n.id} [{n.type}] {label}".rstrip())
            for c in n.children:
                visit(c, depth + 1)

        for top in structure.nodes:
            visit(top, 0)
        return "\n".join(lines)

    @staticmethod
    def _ancestors(structure: ReportStructure, node_id: str) -> list[StructureNode]:
        def search(nodes: list[StructureNode], path: list[StructureNode]) -> list[StructureNode] | None:
            for n in nodes:
                if n.id == node_id:
                    return path
                found = search(n.children, [*path, n])
                if found is not None:
                    return found
            return None

        return search(structure.nodes, []) or []

    def fill(
        self, node: StructureNode, structure: ReportStructure, passages: list[Passage], ctx: StepContext
    ) -> str:
        role = ROLE_FILL
        prompt = self.prompt(role)
        ancestors = self._ancestors(structure, node.id)
        questions = list(node.questions)
        for a in reversed(ancestors):
            if questions:
                break
            questions = list(a.questions)
        type_rules = prompt.parts.get(node.type, "")
        if not type_rules:
            raise FrameInputError(
                f"prompts/{role}.md", f"no ---{node.type}--- part for element type {node.type}"
            )
        variables = {
            **self._base_vars(ctx),
            "report_title": structure.title,
            "outline": self._outline(structure, node.id),
            "node_id": node.id,
            "node_type": node.type,
            "node_path": " > ".join(a.title for a in ancestors) or "(top level)",
            "node_objective": " ".join(node.objective.split()) or "(none given)",
            "node_questions": "\n".join(f"- {q}" for q in questions) if questions else "(none)",
            "type_rules": type_rules,
        }

        def build(chosen: list[Passage]) -> list[dict[str, str]]:
            return render(
                prompt,
                **variables,
                passage_count=len(chosen),
                passages="\n\n".join(passage_block(p) for p in chosen) or "(no excerpts)",
            )

        fixed = self._tokens(build([]))
        if fixed > self.input_budget:
            raise ContextBudgetError(
                f"{LLMClient.where(role, ctx)}: the fill prompt for {node.id} alone needs {fixed} tokens "
                f"(budget {self.input_budget})"
            )
        ranked = sorted(enumerate(passages), key=lambda ip: (-ip[1].score, ip[0]))
        room = self.input_budget - fixed
        keep: set[int] = set()
        for i, p in ranked:
            t = count_tokens(passage_block(p)) + 2
            if t <= room:
                keep.add(i)
                room -= t
        chosen = [p for i, p in enumerate(passages) if i in keep]
        if len(chosen) < len(passages):
            dropped = len(passages) - len(chosen)
            log.warning(
                "%s: %d of %d retrieved passages for %s do not fit the input budget of %d tokens and were "
                "left out (kept the highest-scoring passages that fit)",
                LLMClient.where(role, ctx),
                dropped,
                len(passages),
                node.id,
                self.input_budget,
            )
        result = self.client.complete_json(
            role, build(chosen), FillOutput, ctx, check=lambda out: check_fill_content(out.content)
        )
        self._record(role, result)
        return result.value.content.strip()
