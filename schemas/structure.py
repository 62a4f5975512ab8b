"""Report structures (SPEC §1): a JSON tree of sections, subsections and content elements.

Containers (`section`, `subsection`) hold children; content elements (`text`, `table`, `figure`,
`list`) are the leaves that get one placeholder each in the outline and are filled from G.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

NodeType = Literal["section", "subsection", "text", "table", "figure", "list"]
CONTAINERS = ("section", "subsection")
LEAVES = ("text", "table", "figure", "list")
_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


class StructureNode(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="unique within the report, e.g. 's2', 's2.1', 's2.1.t1'")
    type: NodeType
    title: str = ""
    objective: str = Field(default="", description="what this element must cover")
    questions: list[str] = Field(default_factory=list, description="guiding questions (5-8 per section)")
    sources: list[str] = Field(default_factory=list, description="doc_ids of G this element draws on")
    children: list[StructureNode] = Field(default_factory=list)

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if not _ID.match(v):
            raise ValueError(f"node id must be lowercase letters, digits, '.', '_' or '-' (got {v!r})")
        return v

    @model_validator(mode="after")
    def _shape(self) -> StructureNode:
        if self.type in LEAVES and self.children:
            raise ValueError(f"node {self.id}: a {self.type} element cannot have children")
        if self.type in CONTAINERS and not self.title.strip():
            raise ValueError(f"node {self.id}: a {self.type} needs a title")
        if self.type == "section" and any(c.type == "section" for c in self.children):
            raise ValueError(f"node {self.id}: sections nest subsections, not sections")
        return self

    def walk(self):
        yield self
        for c in self.children:
            yield from c.walk()


class Provenance(BaseModel):
    model_config = ConfigDict(extra="forbid")

    backend: Literal["offline", "openai"]
    model: str = Field(description="model name, or the offline algorithm's name and version")
    role: str
    prompt_sha256: str | None = Field(default=None, description="content hash of the prompt template")
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ReportStructure(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str
    form_restricted: bool = False
    nodes: list[StructureNode] = Field(min_length=1)
    provenance: list[Provenance] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_ids(self) -> ReportStructure:
        ids = [n.id for n in self.walk()]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"node ids must be unique: {', '.join(dupes)}")
        if any(n.type != "section" for n in self.nodes):
            raise ValueError("top-level nodes must be sections")
        return self

    def walk(self):
        for n in self.nodes:
            yield from n.walk()

    def leaves(self) -> list[StructureNode]:
        return [n for n in self.walk() if n.type in LEAVES]

    def find(self, node_id: str) -> StructureNode:
        for n in self.walk():
            if n.id == node_id:
                return n
        raise KeyError(node_id)


# ---- what each LLM role must return (validated; invalid output is retried, then the step fails)


class StructureOutput(BaseModel):
    """Role `structure` (form-free and form-restricted): the report's tree without questions."""

    model_config = ConfigDict(extra="forbid")
    title: str
    sections: list[StructureNode] = Field(min_length=1)


# guiding questions per top-level section (paper 000's question step); the questions role's reply check
# enforces it, so a reply that breaks it is asked again and never cached
MIN_QUESTIONS, MAX_QUESTIONS = 5, 8


class NodeQuestions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    questions: list[str] = Field(min_length=1, max_length=12)


class QuestionsOutput(BaseModel):
    """Role `questions`: guiding questions per section id."""

    model_config = ConfigDict(extra="forbid")
    sections: list[NodeQuestions]


class FillOutput(BaseModel):
    """Role `fill`: the Markdown content for one placeholder (no headings)."""

    model_config = ConfigDict(extra="forbid")
    content: str = Field(min_length=1)


def structure_json(s: ReportStructure | dict[str, Any]) -> str:
    """Canonical JSON (sorted keys) so equal structures serialise to equal bytes."""
    import json

    data = s.model_dump(mode="json") if isinstance(s, ReportStructure) else s
    return json.dumps(data, sort_keys=True, ensure_ascii=False, indent=1)
