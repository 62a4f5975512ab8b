"""One-shot LLM generation baseline (paper §5): the model sees the sample report S (the required form)
and the grounding documents G of the target period and writes the target report in S's form, only
from G, in one call (prompt `prompts/generate_one_shot.md`, through `tasks.llm.client.LLMClient`, so
replies are cached, retried and validated).

Long inputs are handled explicitly, never silently truncated: the input budget is
`settings.context_tokens - output budget - reserve` (reserve = min(2500, context_tokens // 10), room
for one corrective turn), less the tokenizer margin (`tasks.llm.budget`). The output budget of role
`generate_one_shot` defaults to 16,384 tokens (a report as long as the gold one). While the rendered
prompt (system + user, o200k_base tokens) exceeds it, the largest remaining full document is replaced
by its *digest* (title, its heading lines and its first paragraph); the digested doc_ids are recorded in
the returned metadata and the prompt says which documents are digests. If even S plus all digests do not
fit, a `FrameInputError` is raised.

The reply is the report itself, in Markdown (`LLMClient.complete_text`, no JSON mode): one outer
```markdown fence around the whole reply is removed, and a reply that is exactly the JSON object
{"report_markdown": "..."} (the wrapper this prompt once asked for) is unwrapped. The Markdown must be
non-empty and have at least one heading line, else the model is asked again (`read_report`).
`one_shot` returns `(markdown, metadata)`; metadata holds the provenance (model,
prompt name and sha256, prompt/completion tokens, attempts, cached, request hash) and the input
accounting (input_tokens, input_budget, digested doc_ids).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, field_validator

from schemas.config import LLMSettings
from tasks.errors import FrameInputError
from tasks.llm import budget as budgets
from tasks.llm.client import LLMClient
from tasks.llm.prompts import Prompt, load_prompt, prompt_file_or, render
from tasks.llm.replies import plain_value
from tasks.markdown.document import is_heading
from tasks.synthesize.retrieve import parse_blocks
from tasks.tokens import count_tokens

__all__ = [
    "PROMPT",
    "RESERVE_TOKENS",
    "GeneratedReport",
    "digest",
    "input_budget",
    "one_shot",
    "read_report",
]

PROMPT = "generate_one_shot"
ROLE = "generate_one_shot"
RESERVE_TOKENS = 2500


class GeneratedReport(BaseModel):
    report_markdown: str

    @field_validator("report_markdown")
    @classmethod
    def _markdown(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("the report is empty")
        if not any(is_heading(ln, indent="none", space="tabs", text="word") for ln in v.split("\n")):
            raise ValueError("the report has no Markdown heading line (expected the sample's form)")
        return v.strip() + "\n"


def read_report(reply: str) -> GeneratedReport:
    """The report of a plain reply (see the module docstring); ValueError when it is not one."""
    return plain_value(GeneratedReport, "report_markdown", reply)


def input_budget(settings: LLMSettings, role: str = ROLE) -> int:
    return budgets.input_budget(settings, role, RESERVE_TOKENS)


def digest(title: str, markdown: str) -> str:
    """Title, every heading line and the first paragraph of a document (verbatim pieces)."""
    lines = [f"{title} (digest: headings and first paragraph only)"]
    first = None
    for b in parse_blocks(markdown):
        if b.kind == "heading":
            lines.append("#" * max(b.level, 1) + " " + b.title)
        elif first is None and b.kind == "text" and not b.code:
            first = b.text.strip()
            lines.append(first)
    return "\n\n".join(lines)


def _render_docs(docs: list[tuple[str, str, str]], digested: set[str]) -> str:
    parts = []
    for doc_id, title, md in docs:
        body = digest(title, md) if doc_id in digested else md.strip()
        tag = " (DIGEST)" if doc_id in digested else ""
        parts.append(f"<<<DOCUMENT {doc_id}{tag}: {title}\n{body}\nDOCUMENT>>>")
    return "\n\n".join(parts)


def build_messages(
    sample: str, docs: list[tuple[str, str, str]], settings: LLMSettings, prompt: Prompt | None = None
) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """The chat messages within the input budget, plus the accounting (see the module docstring)."""
    prompt = prompt or load_prompt(PROMPT)
    budget = input_budget(settings)
    if budget <= 0:
        raise FrameInputError(
            "llm.context_tokens",
            f"context_tokens {settings.context_tokens} leaves no room for input after the output budget "
            f"of {settings.output_budget(ROLE)} tokens (max_output_tokens)",
        )
    digested: set[str] = set()
    full_tokens = {doc_id: count_tokens(md) for doc_id, _, md in docs}
    while True:
        note = ""
        if digested:
            note = (
                f" ({len(digested)} of {len(docs)} documents are too long for the context and are given as "
                "digests: title, headings and first paragraph; marked DIGEST)"
            )
        messages = render(
            prompt, sample_report=sample.strip(), documents=_render_docs(docs, digested), digest_note=note
        )
        used = sum(count_tokens(m["content"]) for m in messages)
        if used <= budget:
            break
        rest = [d for d, _, _ in docs if d not in digested]
        if not rest:
            raise FrameInputError(
                "llm.context_tokens",
                f"sample report plus digests of all {len(docs)} documents need {used} input tokens, budget "
                f"{budget}: raise llm.context_tokens",
            )
        digested.add(max(rest, key=lambda d: (full_tokens[d], d)))
    meta = {
        "prompt": prompt.name,
        "prompt_sha256": prompt.sha256,
        "input_tokens": used,
        "input_budget": budget,
        "digested": [d for d, _, _ in docs if d in digested],
    }
    return messages, meta


def one_shot(
    instance_row: Mapping[str, Any],
    grounding_rows: Iterable[Mapping[str, Any]],
    settings: LLMSettings,
    cache_dir: str | Path,
    *,
    client: LLMClient | None = None,
    prompt: Path | None = None,
    epoch: int = 0,
) -> tuple[str, dict[str, Any]]:
    """R' for one instance by one LLM call; returns (markdown, metadata). `prompt` is a template file
    replacing prompts/generate_one_shot.md (same placeholders); `epoch` > 0 asks for another sample."""
    docs = [
        (str(r["doc_id"]), str(r.get("title") or r["doc_id"]), str(r.get("markdown") or ""))
        for r in grounding_rows
    ]
    template = prompt_file_or(prompt, PROMPT)
    messages, meta = build_messages(str(instance_row["sample_markdown"]), docs, settings, template)
    client = client or LLMClient(settings, cache_dir)
    result = client.complete_text(ROLE, messages, read_report, None, epoch=epoch)
    meta.update(
        {
            "system": "one-shot",
            "instance_id": instance_row.get("instance_id"),
            "model": result.model,
            "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens,
            "attempts": result.attempts,
            "cached": result.cached,
            "request_hash": result.request_hash,
        }
    )
    return result.value.report_markdown, meta
