"""Prompt templates: files in `prompts/`, one per LLM role, hashed so outputs can name their version.

File format (Markdown with marker lines):

    anything before the first marker is a comment for maintainers (not sent)
    ---system---
    the system message
    ---user---
    the user message
    ---edgar---
    optional: a sentence or two used for SEC filings      (inserted for {{source_brief}})
    ---arxiv---
    optional: the same for arXiv papers

Placeholders are `{{name}}` (letters, digits, underscores). `render` substitutes them in a
single pass, so braces in JSON examples are left alone and a value that itself contains
`{{...}}` (e.g. a grounding document) is never expanded again. `{{source_brief}}` is filled from
the `edgar`/`arxiv` part chosen by the `source_kind` variable. A placeholder without a value is
an error, never silently left in the prompt.

`Prompt.sha256` is the hash of the whole file's bytes: the version recorded in provenance.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tasks.errors import FrameInputError

PROMPTS_DIR = Path(__file__).resolve().parents[2] / "prompts"

_MARKER = re.compile(r"^---([a-z_]+)---[ \t]*$", re.M)
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_REQUIRED = ("system", "user")


class PromptError(ValueError):
    """A template file is malformed or a placeholder has no value."""


@dataclass(frozen=True)
class Prompt:
    name: str
    system: str
    user: str
    sha256: str
    parts: dict[str, str] = field(default_factory=dict)  # extra named parts (edgar, arxiv, ...)

    @property
    def placeholders(self) -> set[str]:
        return set(_PLACEHOLDER.findall(self.system)) | set(_PLACEHOLDER.findall(self.user))


def parse_prompt(name: str, content: str) -> Prompt:
    sections: dict[str, str] = {}
    matches = list(_MARKER.finditer(content))
    for i, m in enumerate(matches):
        part = m.group(1)
        if part in sections:
            raise PromptError(f"prompt {name}: part ---{part}--- appears twice")
        end = matches[i + 1].start() if i + 1 < len(matches) else len(content)
        sections[part] = content[m.end() : end].strip("\n").strip()
    for part in _REQUIRED:
        if not sections.get(part):
            raise PromptError(f"prompt {name}: missing or empty ---{part}--- part")
    sha = hashlib.sha256(content.encode("utf-8")).hexdigest()
    extra = {k: v for k, v in sections.items() if k not in _REQUIRED}
    return Prompt(name=name, system=sections["system"], user=sections["user"], sha256=sha, parts=extra)


def load_prompt(name: str, directory: str | Path | None = None) -> Prompt:
    """Read `prompts/<name>.md` (or from `directory`)."""
    if not re.fullmatch(r"[a-z0-9_]+", name):
        raise PromptError(f"bad prompt name {name!r}")
    path = Path(directory or PROMPTS_DIR) / f"{name}.md"
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise PromptError(f"prompt template {path} not found") from None
    return parse_prompt(name, raw.decode("utf-8"))


def prompt_file_or(path: str | Path | None, default: str) -> Prompt:
    """The template in `path` (same sections and placeholders as the default), else prompts/<default>.md."""
    if path is None:
        return load_prompt(default)
    try:
        return parse_prompt(Path(path).stem, Path(path).read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, PromptError) as exc:
        raise FrameInputError(path, f"unusable prompt template ({exc})") from None


def _substitute(template: str, values: dict[str, str], where: str) -> str:
    def repl(m: re.Match[str]) -> str:
        key = m.group(1)
        if key not in values:
            raise PromptError(f"{where}: no value for placeholder {{{{{key}}}}}")
        return values[key]

    return _PLACEHOLDER.sub(repl, template)


def render(prompt: Prompt, **variables: Any) -> list[dict[str, str]]:
    """The chat messages [system, user] with every `{{placeholder}}` filled."""
    values = {k: str(v) for k, v in variables.items()}
    kind = values.get("source_kind")
    if "source_brief" not in values and kind is not None:
        if kind in prompt.parts:
            values["source_brief"] = _substitute(prompt.parts[kind], values, f"prompt {prompt.name} ({kind})")
        else:  # a kind the prompt has no part for speaks through its own brief
            from tasks.sources import source_kind

            values["source_brief"] = source_kind(kind).brief
    return [
        {"role": "system", "content": _substitute(prompt.system, values, f"prompt {prompt.name} (system)")},
        {"role": "user", "content": _substitute(prompt.user, values, f"prompt {prompt.name} (user)")},
    ]
