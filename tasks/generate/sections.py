"""Section-by-section LLM generation (issue 14, `strategy = "section-by-section"` of `openai` systems):
the outline is S's heading lines, kept byte-identical (levels, titles, order, the H1 too) but for the
period they name: a heading naming S's period (t_sample, "... for the period ended July 30, 2023") names
the target's (t_target) instead (`tasks.generate.baselines.Renewal`), in the outline the model sees, in
the retrieval query and in the report; every heading
under which S has text of its own (a leaf, or a parent's introduction; S's text before its first heading
too) is one request that writes that text anew; a heading with nothing of its own in S stays empty.

Each request holds the passages of G retrieved for its section only (`RetrievalIndex`; query: heading
path + S's text there, as a description, never as facts), whole passages within the input budget of
`tasks.generate.llm.input_budget`. The reply is the section's body in plain Markdown (one outer
```markdown fence removed, the former {"section_markdown": ...} wrapper unwrapped: `read_body`); it must
hold no heading line and no unclosed fence (either would change S's outline); LLMClient retries an
invalid reply, then the section fails loudly. Requests run up to `settings.concurrency` at once,
cached: a rerun sends nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, field_validator

from schemas.config import LLMSettings
from schemas.structure import StructureNode
from tasks.errors import FrameInputError
from tasks.generate.baselines import Renewal, sample_sections
from tasks.generate.llm import input_budget
from tasks.ground.load import grounding_set_from_rows
from tasks.llm.backend import Passage, StepContext
from tasks.llm.client import LLMClient, LLMError, LLMResult
from tasks.llm.prompts import Prompt, PromptError, prompt_file_or, render
from tasks.llm.replies import plain_value
from tasks.markdown.document import code_mask, is_heading, markdown_plain, parse
from tasks.sources import source_kind
from tasks.synthesize.retrieve import RetrievalIndex
from tasks.tokens import count_tokens

__all__ = [
    "PROMPT",
    "ROLE",
    "SECTION_PASSAGES",
    "SECTION_PASSAGE_TOKENS",
    "STRATEGY",
    "SectionBody",
    "SectionRequest",
    "Unit",
    "body_problem",
    "plan_sections",
    "read_body",
    "section_by_section",
]

PROMPT = "generate_section"
ROLE = "generate_section"
STRATEGY = "section-by-section"
SECTION_PASSAGE_TOKENS = 6000  # o200k_base tokens of passages per request at most
SECTION_PASSAGES = 12  # passages per request at most
QUERY_WORDS = 200  # words of S's section text used in the retrieval query (its topic, not its facts)
PREAMBLE = "(text before the first heading)"

T = TypeVar("T")
R = TypeVar("R")


def body_problem(markdown: str) -> str | None:
    """Why a section body cannot be put under S's heading, or None. A heading line (any level, read
    widely: up to 3 blanks before the #'s) outside code would add or break a section of S's outline; an
    unclosed code fence would swallow the headings that follow."""
    lines = markdown.splitlines()
    for fences in ("commonmark", "any-fence"):
        if any(b.kind == "code" and not b.closed for b in parse(markdown, fences=fences).blocks):
            return "the body opens a code fence it never closes; close every ``` or ~~~ fence"
        for line, code in zip(lines, code_mask(lines, fences), strict=True):
            if not code and is_heading(line, indent="blank"):
                return (
                    f"the body has a heading line ({line.strip()[:80]!r}): the outline is fixed, write "
                    "the section's text only, without any line starting with '#'"
                )
    return None


class SectionBody(BaseModel):
    section_markdown: str

    @field_validator("section_markdown")
    @classmethod
    def _body(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("the section body is empty")
        problem = body_problem(v)
        if problem:
            raise ValueError(problem)
        return v.strip()


def read_body(reply: str) -> SectionBody:
    """The section body of a plain reply; ValueError when it cannot go under S's heading."""
    return plain_value(SectionBody, "section_markdown", reply)


@dataclass(frozen=True)
class SectionRequest:
    """One request: the unit of S it writes, its passages and its rendered messages."""

    position: int  # index among the units (the preamble, if any, is 0)
    heading: str  # S's heading line ("" for the preamble)
    path: tuple[str, ...]  # heading titles from the top down to this one
    passages: tuple[Passage, ...]
    messages: tuple[Mapping[str, str], ...]
    input_tokens: int


@dataclass(frozen=True)
class Unit:
    """A heading of S (or S's text before its first heading) with S's own text under it."""

    heading: str
    path: tuple[str, ...]
    body: str
    has_table: bool


def _units(sample: str, renewal: Renewal | None = None) -> tuple[list[str], list[Unit]]:
    """(S's heading lines, the units of S: preamble first, then every heading in order), the headings
    renewed for the target period by `renewal`."""
    preamble, sections = sample_sections(sample)
    units = [Unit("", (PREAMBLE,), preamble, False)] if preamble else []
    if renewal is None:
        units += [Unit(s.line, s.path, s.body, s.has_table) for s in sections]
    else:
        units += [
            Unit(renewal.line(s.line), tuple(map(renewal.title, s.path)), s.body, s.has_table)
            for s in sections
        ]
    return [u.heading for u in units if u.heading], units


def _query_node(i: int, unit: Unit) -> StructureNode:
    words = markdown_plain(unit.body).split()[:QUERY_WORDS]
    return StructureNode(
        id=f"s{i}",
        type="table" if unit.has_table else "text",
        title=unit.path[-1] if unit.heading else "",
        objective=" ".join(words),
        questions=list(unit.path[:-1]),  # the headings above, at question weight (0.5)
    )


def _outline(headings: Sequence[str], unit: Unit) -> str:
    marked = [(">> " if h == unit.heading else "   ") + h for h in headings]
    if not unit.heading:
        marked.insert(0, ">> " + PREAMBLE)
    return "\n".join(marked)


def _passages_text(passages: Sequence[Passage], titles: Mapping[str, str]) -> str:
    if not passages:
        return "(none)"
    return "\n\n".join(
        f"<<<PASSAGE {k} from {p.doc_id} ({titles.get(p.doc_id, p.doc_id)})\n{p.text.strip()}\nPASSAGE>>>"
        for k, p in enumerate(passages, 1)
    )


def _render(
    prompt: Prompt,
    headings: Sequence[str],
    unit: Unit,
    passages: Sequence[Passage],
    titles: Mapping[str, str],
) -> tuple[list[dict[str, str]], int]:
    note = f" ({len(passages)}, best first)" if passages else " (none were found for this section)"
    try:
        messages = render(
            prompt,
            outline=_outline(headings, unit),
            section_heading=unit.path[-1],
            section_path=" > ".join(unit.path),
            sample_section=unit.body,
            passage_note=note,
            passages=_passages_text(passages, titles),
        )
    except PromptError as exc:
        raise FrameInputError(f"prompt {prompt.name}", str(exc)) from None
    return messages, sum(count_tokens(m["content"]) for m in messages)


def _plan_one(
    i: int,
    unit: Unit,
    headings: Sequence[str],
    index: RetrievalIndex,
    titles: Mapping[str, str],
    prompt: Prompt,
    budget: int,
) -> SectionRequest:
    _, fixed = _render(prompt, headings, unit, [], titles)
    if fixed > budget:
        raise FrameInputError(
            "llm.context_tokens",
            f"section {' > '.join(unit.path)!r}: the outline and the sample's section need {fixed} input "
            f"tokens, budget {budget}: raise llm.context_tokens",
        )
    room = min(SECTION_PASSAGE_TOKENS, budget - fixed)
    passages = index.search(_query_node(i, unit), budget_tokens=room, k=SECTION_PASSAGES)
    messages, used = _render(prompt, headings, unit, passages, titles)
    while used > budget and passages:  # passage framing did not fit: drop the lowest-ranked whole
        passages = passages[:-1]
        messages, used = _render(prompt, headings, unit, passages, titles)
    return SectionRequest(i, unit.heading, unit.path, tuple(passages), tuple(messages), used)


def _instance_rows(
    instance: Mapping[str, Any], grounding: Sequence[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """G of the instance: its grounding set's rows, restricted to (and ordered by) grounding_doc_ids when
    given (a list, or the numpy array pandas gives)."""
    gid = instance.get("grounding_set_id")
    rows = [r for r in grounding if gid is None or r.get("grounding_set_id") in (None, gid)]
    wanted = instance.get("grounding_doc_ids")
    wanted = [] if wanted is None else [str(d) for d in wanted]
    if not wanted:
        return rows
    by_id = {str(r["doc_id"]): r for r in rows}
    return [by_id[d] for d in wanted if d in by_id]


def plan_sections(
    instance: Mapping[str, Any], grounding: Sequence[Mapping[str, Any]], settings: LLMSettings, prompt: Prompt
) -> tuple[list[Unit], list[SectionRequest | None]]:
    """The units of S and, per unit, its request (None for a heading with no text of its own in S)."""
    budget = input_budget(settings)
    if budget <= 0:
        raise FrameInputError(
            "llm.context_tokens",
            f"context_tokens {settings.context_tokens} leaves no room for input after max_output_tokens "
            f"{settings.max_output_tokens}",
        )
    rows = _instance_rows(instance, grounding)
    headings, units = _units(str(instance["sample_markdown"]), Renewal(instance, rows))
    gset = grounding_set_from_rows(rows)
    titles = {d.doc_id: d.title for d in gset.documents}
    index = RetrievalIndex(gset)
    plans = [
        _plan_one(i, u, headings, index, titles, prompt, budget) if u.body.strip() else None
        for i, u in enumerate(units)
    ]
    return units, plans


def _bounded_map(fn: Callable[[T], R], jobs: Sequence[T], limit: int) -> list[R]:
    """fn over jobs in order, at most `limit` at once; the first failure (in job order) is raised and
    the jobs not yet started are cancelled."""
    if limit <= 1 or len(jobs) <= 1:
        return [fn(j) for j in jobs]
    with ThreadPoolExecutor(max_workers=min(limit, len(jobs))) as pool:
        futures = [pool.submit(fn, j) for j in jobs]
        try:
            return [f.result() for f in futures]
        except BaseException:
            for f in futures:
                f.cancel()
            raise


def _step(instance: Mapping[str, Any], grounding: Sequence[Mapping[str, Any]]) -> StepContext:
    kind = next((r.get("source_kind") for r in grounding if r.get("source_kind")), None)
    if kind is None:
        raise FrameInputError(
            str(instance.get("instance_id") or "instance"), "its grounding names no source_kind"
        )
    return StepContext(
        domain=str(instance.get("domain") or instance.get("instance_id") or "?"),
        snapshot=str(instance.get("t_target") or "?"),
        category=str(instance.get("category") or "?"),
        source_kind=source_kind(str(kind), "grounding source_kind").name(),
    )


def _metadata(
    instance: Mapping[str, Any],
    prompt: Prompt,
    settings: LLMSettings,
    headings: int,
    plans: Sequence[SectionRequest],
    results: Sequence[LLMResult[SectionBody]],
) -> dict[str, Any]:
    per = [
        {
            "section": " > ".join(p.path),
            "passages": [x.doc_id for x in p.passages],
            "input_tokens": p.input_tokens,
            "cached": r.cached,
            "attempts": r.attempts,
            "request_hash": r.request_hash,
        }
        for p, r in zip(plans, results, strict=True)
    ]
    cached = sum(r.cached for r in results)
    return {
        "strategy": STRATEGY,
        "instance_id": instance.get("instance_id"),
        "model": next((r.model for r in results), settings.model),
        "prompt": prompt.name,
        "prompt_sha256": prompt.sha256,
        "sections": headings,
        "requests": len(results),
        "cached_requests": cached,
        "cached": cached == len(results),
        "attempts": sum(r.attempts for r in results),
        "prompt_tokens": sum(r.prompt_tokens for r in results),
        "completion_tokens": sum(r.completion_tokens for r in results),
        "input_tokens": sum(p.input_tokens for p in plans),
        "input_budget": input_budget(settings),
        "per_section": per,
    }


def section_by_section(
    instance: dict,
    grounding: list[dict],
    settings: LLMSettings,
    cache_dir: Path,
    prompt: Path | None = None,
    *,
    client: LLMClient | None = None,
    epoch: int = 0,
) -> tuple[str, dict]:
    """R' for one instance, one request per section of S with text of its own (see the module
    docstring); returns (markdown, metadata). `prompt` is a template file replacing
    prompts/generate_section.md (same placeholders); `epoch` > 0 asks for another sample of each section."""
    template = prompt_file_or(prompt, PROMPT)
    units, plans = plan_sections(instance, grounding, settings, template)
    todo = [p for p in plans if p is not None]
    client = client or LLMClient(settings, cache_dir)
    ctx = _step(instance, grounding)

    def ask(plan: SectionRequest) -> LLMResult[SectionBody]:
        try:
            return client.complete_text(ROLE, [dict(m) for m in plan.messages], read_body, ctx, epoch=epoch)
        except LLMError as exc:  # name the section: one line, same error type
            raise type(exc)(f"{exc} (section {' > '.join(plan.path)!r})") from None

    results = _bounded_map(ask, todo, settings.concurrency)
    bodies = {p.position: r.value.section_markdown for p, r in zip(todo, results, strict=True)}
    out: list[str] = []
    for i, unit in enumerate(units):
        if unit.heading:
            out += [unit.heading, ""]
        if i in bodies:
            out += [bodies[i], ""]
    markdown = "\n".join(out).strip() + "\n"
    headings = sum(1 for u in units if u.heading)
    return markdown, _metadata(instance, template, settings, headings, todo, results)
