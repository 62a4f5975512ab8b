"""Build configuration (TOML), validated with pydantic.

Every invalid field becomes one line naming the file, the field path and what is wrong.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, SerializeAsAny, field_validator, model_validator

from schemas.domains import (
    ArxivDomain,
    ArxivWindow,
    DomainBase,
    EdgarDomain,
    category_labels,
    domain_shapes,
    validate_domains,
)
from schemas.errors import ConfigError
from schemas.strict import Strict, no_nul

# The built-in kinds' categories in display order, and their labels (schemas.domains.category_labels()
# gives every registered kind's).
CATEGORY_LABELS: dict[str, str] = category_labels()
CATEGORY_ORDER: tuple[str, ...] = tuple(CATEGORY_LABELS)

# the domain shapes live in schemas.domains; importers of the config find them here too
__all__ = ["ArxivDomain", "ArxivWindow", "EdgarDomain"]


class EdgarAccess(Strict):
    """SEC asks every client to identify itself; FRAME_EDGAR_NAME / FRAME_EDGAR_EMAIL override."""

    user_agent_name: str = ""
    user_agent_email: str = ""

    def resolved(self) -> tuple[str, str]:
        name = os.environ.get("FRAME_EDGAR_NAME", self.user_agent_name).strip()
        email = os.environ.get("FRAME_EDGAR_EMAIL", self.user_agent_email).strip()
        return name, email


class SourceConfig(Strict):
    mode: Literal["mirror", "live"] = "mirror"
    mirror: Path | None = Field(default=None, description="folder laid out like shared/corpus")

    @field_validator("mirror")
    @classmethod
    def _paths(cls, v: Path | None) -> Path | None:
        return no_nul(v)

    # A mirror file may be a symbolic link; one that leads outside the mirror folder is refused unless
    # this is on (e.g. a mirror of links into a shared corpus). Its sha256 is checked either way.
    links_outside: bool = False
    edgar: EdgarAccess = EdgarAccess()
    arxiv_html_url: str = Field(
        default="https://arxiv.org/html/{id}",
        description="template for a paper's HTML rendering; {id} is the arXiv id (with version if known)",
    )

    @model_validator(mode="after")
    def _mirror(self) -> SourceConfig:
        if self.mode == "mirror" and self.mirror is None:
            raise ValueError("mode 'mirror' needs source.mirror (a folder laid out like shared/corpus)")
        return self


# Output budget of a role whose reply is bounded by its prompt (a verdict batch, one fill element).
DEFAULT_OUTPUT_TOKENS = 4096
# Roles whose reply grows with their input, sized to what their prompt asks (docs/endpoints.md "Output
# budgets"): a 10-K's structure reaches 4,000 tokens; unit and claim extraction parts are cut so that their
# expected reply fits the budget (more budget, fewer parts); a one-shot report is as long as the gold one.
ROLE_OUTPUT_TOKENS: dict[str, int] = {
    "structure_free": 8192,
    "structure_restricted": 8192,
    "score_units": 8192,
    "score_claims": 8192,
    "generate_one_shot": 16384,
}


class LLMSettings(Strict):
    """Which backend writes structures, questions and gold text.

    The API key is never part of the config: it is read from the environment variable named by
    `api_key_env` at call time. FRAME_LLM_BACKEND / FRAME_LLM_BASE_URL / FRAME_LLM_MODEL override.
    """

    backend: Literal["offline", "openai"] = "offline"
    base_url: str | None = Field(default=None, description="OpenAI-compatible endpoint, ending in /v1")
    model: str = "gpt-4o-mini"
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    # One output budget for every role when set; unset, each role takes its own (ROLE_OUTPUT_TOKENS: what
    # its prompt asks for, docs/endpoints.md). `max_output_tokens_by_role` wins over both.
    max_output_tokens: int | None = Field(default=None, ge=16)
    max_output_tokens_by_role: dict[str, Annotated[int, Field(ge=16)]] = Field(default_factory=dict)
    context_tokens: int = Field(default=128_000, ge=1024, description="the model's context window")
    # Share of the input room kept free because prompts are counted with o200k_base, and other models'
    # tokenizers (Llama, Qwen, Mistral) count the same text as more tokens
    token_margin: float = Field(default=0.10, ge=0.0, le=0.5)
    # every wait is bounded: a request at most a day, a retry wait at most an hour
    timeout_s: float = Field(default=120.0, gt=0, le=86_400)
    transient_retries: int = Field(default=5, ge=0, le=100, description="retries on 429/5xx/timeouts")
    invalid_retries: int = Field(default=2, ge=0, le=20, description="corrective retries on invalid JSON")
    backoff_initial_s: float = Field(default=1.0, ge=0, le=3600)
    backoff_max_s: float = Field(default=30.0, ge=0, le=3600)
    concurrency: int = Field(default=4, ge=1, le=64)
    # Reasoning models (OpenAI o-series, GPT-5) take max_completion_tokens, not max_tokens, and only their
    # default temperature: "auto" sends what the model's name suggests and adapts on the endpoint's first
    # 400 that names the parameter (remembered for the client's life, docs/endpoints.md)
    max_tokens_param: Literal["auto", "max_tokens", "max_completion_tokens"] = "auto"
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None
    # per role (e.g. {"fill" = "low", "structure_restricted" = "high"}); a role not named takes the above
    reasoning_effort_by_role: dict[str, Literal["minimal", "low", "medium", "high"]] = Field(
        default_factory=dict
    )

    @field_validator("api_key_env")
    @classmethod
    def _key_name(cls, v: str) -> str:
        return env_name(v)

    def output_budget(self, role: str) -> int:
        """Output tokens one request of `role` may use: the role's own setting, else `max_output_tokens`,
        else the role's default (at most half the context, so small local models keep room for input)."""
        if role in self.max_output_tokens_by_role:
            return self.max_output_tokens_by_role[role]
        if self.max_output_tokens is not None:
            return self.max_output_tokens
        return min(ROLE_OUTPUT_TOKENS.get(role, DEFAULT_OUTPUT_TOKENS), self.context_tokens // 2)

    def resolved(self) -> LLMSettings:
        env = {
            "backend": os.environ.get("FRAME_LLM_BACKEND"),
            "base_url": os.environ.get("FRAME_LLM_BASE_URL"),
            "model": os.environ.get("FRAME_LLM_MODEL"),
        }
        update = {k: v for k, v in env.items() if v}
        return self.model_validate({**self.model_dump(), **update}) if update else self


ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)


def env_name(value: str) -> str:
    """`value` when it is an environment variable's name. A key pasted in its place is never echoed."""
    if ENV_NAME.fullmatch(value):
        return value
    if value.startswith(("sk-", "sk_")) or len(value) >= 24:
        raise ValueError(
            "is not a variable name but looks like a key itself (not shown): put the key in an "
            "environment variable and name that variable here"
        )
    raise ValueError(f"{value[:40]!r} is not an environment variable name")


class BuildSettings(Strict):
    data_dir: Path = Path("data")

    @field_validator("data_dir")
    @classmethod
    def _paths(cls, v: Path) -> Path:
        return no_nul(v)


class RunSettings(Strict):
    """Where tasks run and how builds share a data folder. Not part of a release's identity:
    the same config on threads or on a Dask cluster gives the same release.
    FRAME_TASK_RUNNER / FRAME_DASK_ADDRESS override."""

    task_runner: Literal["thread", "dask"] = "thread"
    max_workers: int = Field(default=2, ge=1, le=256, description="threads of the thread runner")
    dask_address: str | None = Field(
        default=None, description="scheduler address (tcp://host:8786); none = a local cluster"
    )
    dask_workers: int = Field(default=2, ge=1, le=256, description="workers of the local cluster")
    result_storage: Path | None = Field(
        default=None,
        description="task results shared by all workers (default <data_dir>/cache/prefect-results)",
    )
    lock_timeout_s: float = Field(
        default=3600.0,
        ge=0,
        le=7 * 86_400,
        description="how long a build waits for another build on the same data folder",
    )

    @field_validator("result_storage")
    @classmethod
    def _paths(cls, v: Path | None) -> Path | None:
        return no_nul(v)

    def resolved(self) -> RunSettings:
        env = {
            "task_runner": os.environ.get("FRAME_TASK_RUNNER"),
            "dask_address": os.environ.get("FRAME_DASK_ADDRESS"),
        }
        update = {k: v for k, v in env.items() if v}
        return self.model_validate({**self.model_dump(), **update}) if update else self


class ModelPrice(Strict):
    """USD per million tokens (for the build's cost estimate)."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)


class FrameConfig(Strict):
    build: BuildSettings = BuildSettings()
    llm: LLMSettings = LLMSettings()
    run: RunSettings = RunSettings()
    # model name -> price; estimates only, so it lives outside [llm] (whose fields key the caches).
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    source: SourceConfig
    domains: list[SerializeAsAny[DomainBase]] = Field(min_length=1)

    @field_validator("domains", mode="before")
    @classmethod
    def _kinds(cls, v: Any) -> Any:
        # each table by the shape of the kind it names (schemas.domains: one per registered source kind)
        return validate_domains(v)

    @model_validator(mode="after")
    def _unique(self) -> FrameConfig:
        names = [d.name for d in self.domains]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"domain names must be unique: {', '.join(dupes)}")
        return self

    def domain(self, name: str) -> DomainBase:
        for d in self.domains:
            if d.name == name:
                return d
        raise ConfigError("domains", f"no domain named {name!r}")

    def for_domain(self, name: str) -> FrameConfig:
        """The config as one domain's steps see it: that domain only, default run settings and
        prices. Cache keys built from it change only when something that domain depends on does,
        so adding a snapshot to one domain (a refresh) leaves every other domain's cache valid."""
        return self.model_copy(update={"domains": [self.domain(name)], "run": RunSettings(), "prices": {}})

    def for_snapshot(self, name: str, snapshot: str) -> tuple[FrameConfig, DomainBase]:
        """The config and domain as one snapshot's fetch sees them (that snapshot only): a refresh that
        adds a snapshot never fetches the earlier ones again."""
        one = self.domain(name).only(snapshot)
        return self.model_copy(update={"domains": [one], "run": RunSettings(), "prices": {}}), one

    def with_domains(self, domains: list[DomainBase]) -> FrameConfig:
        return FrameConfig.model_validate({**self.model_dump(), "domains": [d.model_dump() for d in domains]})


def _field_path(loc: tuple) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif item in domain_shapes() and parts and parts[-1].endswith("]"):
            continue  # discriminator tag added by pydantic, not a field of the file
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts)


def _members(annotations: list[Any]) -> list[Any]:
    """The annotations through Annotated and unions (Optional included), None dropped."""
    import types
    import typing

    out: list[Any] = []
    for ann in annotations:
        origin = typing.get_origin(ann)
        if origin is Annotated:
            out += _members([typing.get_args(ann)[0]])
        elif origin in (typing.Union, types.UnionType):
            out += _members(list(typing.get_args(ann)))
        elif ann is not type(None):
            out.append(ann)
    return out


def model_at(root: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The model whose keys are valid at `loc` (a table of the file, as pydantic's error loc gives it),
    through lists, dicts, optional tables and tagged unions (whose tag pydantic puts in `loc`)."""
    import typing

    def is_model(a: Any) -> bool:
        return isinstance(a, type) and issubclass(a, BaseModel)

    def tags(m: type[BaseModel]) -> tuple:
        kind = m.model_fields.get("kind")
        return typing.get_args(kind.annotation) if kind is not None else ()

    def shapes(a: Any) -> list[Any]:
        # a domain table is one of the registered kinds' shapes
        return list(domain_shapes().values()) if a is DomainBase else [a]

    anns: list[Any] = [root]
    for item in loc:
        members = [s for m in _members(anns) for s in shapes(m)]
        models = [m for m in members if is_model(m)]
        picked = [m for m in models if item in tags(m)]
        if len(models) > 1 and picked:  # a tagged union: the item is the tag, not a key of the file
            anns = picked
            continue
        nxt: list[Any] = []
        for ann in members:
            origin, args = typing.get_origin(ann), typing.get_args(ann)
            if isinstance(item, int) and origin in (list, tuple) and args:
                nxt.append(args[0])
            elif origin is dict and len(args) == 2:
                nxt.append(args[1])
            elif is_model(ann) and item in ann.model_fields:
                nxt.append(ann.model_fields[item].annotation)
        anns = nxt
    models = [a for a in _members(anns) if isinstance(a, type) and issubclass(a, BaseModel)]
    return models[0] if len(models) == 1 else None


def unknown_key(root: type[BaseModel], loc: tuple) -> str:
    """ "unknown key 'categroy' (did you mean 'category'?)" for the extra key at the end of `loc`."""
    import difflib

    key = str(loc[-1])
    model = model_at(root, loc[:-1])
    keys = [f.alias or name for name, f in model.model_fields.items()] if model is not None else []
    close = difflib.get_close_matches(key, keys, n=1)
    return f"unknown key {key!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
