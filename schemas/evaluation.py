"""Evaluation configuration (TOML): the named report systems to score and the model roles that score them.

`[systems.NAME]` tables (kind = builtin | openai | command | submission), the `[judge]` and `[embedder]`
roles, `[score]`, `[prices]`, `[run]`, `[build]` and `[evolve]`. `tasks.config.load_eval_config` reads a
file: one-line ConfigError naming the file and the field (`config_error` here), unknown keys first (with
a "did you mean" when one is close). Relative paths (prompt templates, submissions, program files in a
command) resolve against the config's folder. `tasks.generate.identity.system_identity` is what of a
system changes its reports: the generation cache key (never an API key or an env var's value).
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from schemas.config import (
    BuildSettings,
    LLMSettings,
    ModelPrice,
    RunSettings,
    env_name,
    unknown_key,
)
from schemas.errors import ConfigError
from schemas.evolve import EvolveSettings
from schemas.scoring import ScoreSettings
from schemas.strict import Strict

__all__ = [
    "BUILTIN_NAMES",
    "DEFAULT_PROMPT",
    "SYSTEM_KINDS",
    "BuiltinSystem",
    "CommandSystem",
    "EmbedderRole",
    "EvalConfig",
    "JudgeRole",
    "OpenAISystem",
    "ScoreSection",
    "SubmissionSystem",
    "System",
    "reports_sha256",
]

BuiltinName = Literal["gold", "copy-sample", "extractive"]
BUILTIN_NAMES: tuple[str, ...] = get_args(BuiltinName)
DEFAULT_PROMPT = Path(__file__).resolve().parents[1] / "prompts" / "generate_one_shot.md"
# System names become folder names (generations/<release>/<version>/<name>/) and leaderboard columns.
SYSTEM_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}", re.ASCII)


def _context_base(info: ValidationInfo) -> Path:
    """The folder relative paths resolve against: the config's (load_eval_config), else the cwd."""
    base = (info.context or {}).get("base") if isinstance(info.context, dict) else None
    return Path(base) if base is not None else Path.cwd()


def _resolve(value: Path, info: ValidationInfo) -> Path:
    if "\x00" in str(value):
        raise ValueError("must not contain a NUL character")
    return value if value.is_absolute() else (_context_base(info) / value).resolve()


def _existing_file(path: Path) -> Path | None:
    """The absolute path when `path` is an existing file; None otherwise (an argv item such as a long
    inline script is no file name at all: the OS may refuse to even look it up)."""
    try:
        return path.resolve() if path.is_file() else None
    except (OSError, ValueError):
        return None


def _env_name(value: str) -> str:
    return env_name(value)


class BuiltinSystem(Strict):
    """One of frame's own systems: `gold` (the gold report Y: the ceiling), `copy-sample`, `extractive`.
    `builtin` defaults to the system's name (set by EvalConfig)."""

    kind: Literal["builtin"]
    builtin: BuiltinName | None = None

    @model_validator(mode="after")
    def _named(self) -> BuiltinSystem:
        if self.builtin is None:
            raise ValueError(
                f"the system name is not a builtin: set builtin = one of {', '.join(BUILTIN_NAMES)}"
            )
        return self


# The LLM role each generation strategy's requests are sent as (tasks.generate.llm / .sections)
STRATEGY_ROLES = {"one-shot": "generate_one_shot", "section-by-section": "generate_section"}


class OpenAISystem(Strict):
    """A model behind any OpenAI-compatible endpoint, prompted with (S, G). The API key is read from the
    env var named by `api_key_env` when the system runs; it is never part of the config or identity."""

    kind: Literal["openai"]
    base_url: str = Field(description="OpenAI-compatible endpoint, ending in /v1")
    model: str = Field(min_length=1)
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    seed: int | None = None
    # unset: the strategy's role budget (a one-shot report is as long as the gold one: schemas.config)
    max_output_tokens: int | None = Field(default=None, ge=16)
    max_output_tokens_by_role: dict[str, Annotated[int, Field(ge=16)]] = Field(default_factory=dict)
    token_margin: float = Field(default=0.10, ge=0.0, le=0.5)
    context_tokens: int = Field(default=128_000, ge=1024, description="the model's context window")
    timeout_s: float = Field(default=120.0, gt=0, le=86_400)
    transient_retries: int = Field(default=5, ge=0, le=100)
    invalid_retries: int = Field(default=2, ge=0, le=20)
    concurrency: int = Field(default=4, ge=1, le=64)
    prompt: Path | None = Field(default=None, description="prompt template file (default: the strategy's)")
    strategy: Literal["one-shot", "section-by-section"] = "one-shot"

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not re.match(r"https?://[^\s/]+", v):
            raise ValueError(f"must be an http(s) URL (got {v!r})")
        return v

    @field_validator("api_key_env")
    @classmethod
    def _key_env(cls, v: str) -> str:
        return _env_name(v)

    @field_validator("prompt")
    @classmethod
    def _prompt(cls, v: Path | None, info: ValidationInfo) -> Path | None:
        if v is None:
            return None
        path = _resolve(v, info)
        if not path.is_file():
            raise ValueError(f"prompt template not found: {path}")
        return path

    def llm_settings(self) -> LLMSettings:
        """The client settings of this system (backend openai). Fields LLMSettings does not hold
        (top_p, seed) reach the client as its `sampling` (tasks.generate.systems)."""
        mine = self.model_dump(exclude={"kind", "prompt", "strategy"})
        known = {k: v for k, v in mine.items() if k in LLMSettings.model_fields and v is not None}
        return LLMSettings(backend="openai", **known)

    def prompt_file(self) -> Path | None:
        """The template file the strategy uses: the configured one, else the one-shot prompt for
        one-shot (None for section-by-section: its own default prompts)."""
        if self.prompt is not None:
            return self.prompt
        return DEFAULT_PROMPT if self.strategy == "one-shot" else None


class CommandSystem(Strict):
    """Any program: frame writes S and G of an instance to a fresh folder (its cwd, also in
    FRAME_INSTANCE_DIR), runs `command`, and reads the report from stdout or from the file `output`.
    An argv item naming a file next to the config is replaced by its absolute path."""

    kind: Literal["command"]
    command: list[str] = Field(min_length=1, description="argv, or one string split like a shell")
    timeout_s: float = Field(default=600.0, gt=0, le=7 * 86_400)
    output: str = Field(default="stdout", description='"stdout", or a file the program writes in its folder')
    env: dict[str, str] = Field(default_factory=dict, description="extra environment variables")
    # frame's variables the program also gets (names or globs like "HF_*"); the rest of frame's
    # environment, API keys included, is not passed (tasks.generate.command.PASS_ENV)
    pass_env: list[str] = Field(default_factory=list)
    # the most a report may hold (stdout or `output`): past it the program is stopped and the instance fails
    max_chars: int = Field(default=2_000_000, ge=1)

    @field_validator("pass_env")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        for name in v:
            if not name or "=" in name or "\x00" in name:
                raise ValueError(f"{name!r} is not a variable name or pattern")
        return v

    @field_validator("command", mode="before")
    @classmethod
    def _split(cls, v: Any) -> Any:
        if isinstance(v, str):
            try:
                return shlex.split(v)
            except ValueError as exc:
                raise ValueError(f"cannot split the command line ({exc})") from None
        return v

    @field_validator("command")
    @classmethod
    def _argv(cls, v: list[str], info: ValidationInfo) -> list[str]:
        if any("\x00" in a for a in v):
            raise ValueError("must not contain a NUL character")
        if not v[0].strip():
            raise ValueError("the program (first item) is empty")
        base = _context_base(info)
        out = []
        for i, item in enumerate(v):
            local = bool(item) and not item.startswith("-") and not Path(item).is_absolute()
            path = _existing_file(base / item) if local else None
            if path is not None:
                out.append(str(path))
            elif i == 0 and "/" in item and _existing_file(Path(item)) is None:
                raise ValueError(f"program not found: {item} (relative paths start at the config's folder)")
            else:
                out.append(item)
        return out

    @field_validator("output")
    @classmethod
    def _output(cls, v: str) -> str:
        p = Path(v)
        if v != "stdout" and (not v or "\x00" in v or p.is_absolute() or ".." in p.parts):
            raise ValueError(
                f'must be "stdout" or a relative file name inside the instance folder (got {v!r})'
            )
        return v

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        for name in v:
            _env_name(name)
        return v


class SubmissionSystem(Strict):
    """Reports produced elsewhere: a JSONL or parquet file (instance_id, markdown), or a folder of
    Markdown files named as `frame generate` names them. Checked by tasks.generate.submission."""

    kind: Literal["submission"]
    path: Path
    max_chars: int = Field(default=2_000_000, ge=1)

    @field_validator("path")
    @classmethod
    def _path(cls, v: Path, info: ValidationInfo) -> Path:
        return _resolve(v, info)


System = Annotated[
    BuiltinSystem | OpenAISystem | CommandSystem | SubmissionSystem, Field(discriminator="kind")
]
SYSTEM_KINDS: dict[str, type[BaseModel]] = {
    "builtin": BuiltinSystem,
    "openai": OpenAISystem,
    "command": CommandSystem,
    "submission": SubmissionSystem,
}


class JudgeRole(LLMSettings):
    """The LLM judge role ([judge]): LLMSettings whose backend defaults to openai."""

    backend: Literal["offline", "openai"] = "openai"

    @model_validator(mode="after")
    def _endpoint(self) -> JudgeRole:
        if self.backend == "openai" and not self.base_url:
            raise ValueError("an openai judge needs base_url (an OpenAI-compatible endpoint, ending in /v1)")
        return self


class EmbedderRole(Strict):
    """The embedder role ([embedder]): the local MiniLM, or an OpenAI-compatible embeddings endpoint."""

    kind: Literal["minilm", "openai"] = "minilm"
    model: str | None = None
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    # MiniLM only: "auto" = bf16 where the CPU has bf16 instructions (docs/metrics/embeddings.md)
    precision: Literal["auto", "fp32", "bf16"] | None = None

    @field_validator("api_key_env")
    @classmethod
    def _key_env(cls, v: str) -> str:
        return _env_name(v)

    @model_validator(mode="after")
    def _fields(self) -> EmbedderRole:
        if self.kind == "minilm" and (self.model or self.base_url):
            raise ValueError("kind 'minilm' is the local all-MiniLM-L6-v2: it takes no model or base_url")
        if self.kind == "openai" and not (self.model and self.base_url):
            raise ValueError("kind 'openai' needs model and base_url")
        return self


class ScoreSection(Strict):
    """[score]: the metric selection and sampling; unset fields keep ScoreSettings' defaults."""

    metrics: list[str] | None = Field(default=None, min_length=1)
    max_items: int | None = Field(default=None, ge=1)
    seed: int | None = None
    bootstrap: int | None = Field(default=None, ge=100)
    tree: Literal["deterministic", "llm"] | None = None
    # structure node similarity; unset: the embedder's calibrated values (schemas/projection.toml)
    delta: float | None = Field(default=None, gt=0.0)
    type_weight: float | None = Field(default=None, ge=0.0, le=1.0)
    gamma: float | None = Field(default=None, ge=0.0)  # depth weighting of Algorithm 1 (--gamma)


class EvalConfig(Strict):
    """A whole evaluation config. `systems` keeps the file's order."""

    systems: dict[str, System] = Field(default_factory=dict)
    judge: JudgeRole | None = None
    embedder: EmbedderRole | None = None
    score: ScoreSection = ScoreSection()
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    run: RunSettings = RunSettings()
    build: BuildSettings | None = None
    evolve: EvolveSettings = EvolveSettings()

    @field_validator("systems", mode="before")
    @classmethod
    def _default_builtin(cls, v: Any) -> Any:
        # `builtin` defaults to the table's name: [systems.extractive] kind = "builtin" is enough.
        if not isinstance(v, dict):
            return v
        out = {}
        for name, table in v.items():
            if isinstance(table, dict) and table.get("kind") == "builtin" and "builtin" not in table:
                table = {**table, "builtin": name} if name in BUILTIN_NAMES else table
            out[name] = table
        return out

    @field_validator("systems")
    @classmethod
    def _names(cls, v: dict[str, Any]) -> dict[str, Any]:
        for name, system in v.items():
            if not SYSTEM_NAME.fullmatch(name) or name in (".", ".."):
                raise ValueError(f"system name {name!r} must be 1-64 letters, digits, '.', '_' or '-'")
            is_gold = isinstance(system, BuiltinSystem) and system.builtin == "gold"
            if name == "gold" and not is_gold:
                raise ValueError("the system name 'gold' is reserved for the builtin gold report")
            if is_gold and name != "gold":
                raise ValueError(
                    f"system {name!r}: the builtin gold must be named 'gold' (scoring's reference)"
                )
        return v

    @field_validator("judge", mode="before")
    @classmethod
    def _judge(cls, v: Any) -> Any:
        return {"backend": "openai", **v} if isinstance(v, dict) else v

    def judge_settings(self) -> LLMSettings | None:
        """The judges' endpoint (a plain LLMSettings), or None for the offline judges."""
        if self.judge is None or self.judge.backend != "openai":
            return None
        return LLMSettings.model_validate(self.judge.model_dump())

    def embedder_name(self) -> str:
        """ScoreSettings.embedder: "minilm" or "openai:<model>"."""
        if self.embedder is None or self.embedder.kind == "minilm":
            return "minilm"
        return f"openai:{self.embedder.model}"

    def embedder_settings(self) -> LLMSettings | None:
        """The embeddings endpoint of an openai embedder (its `model` is the embedding model)."""
        e = self.embedder
        if e is None or e.kind != "openai":
            return None
        return LLMSettings(
            backend="openai", base_url=e.base_url, model=e.model or "", api_key_env=e.api_key_env
        )

    def score_settings(self, **overrides: Any) -> ScoreSettings:
        """ScoreSettings from [judge], [embedder] and [score]; `overrides` (e.g. CLI flags) win."""
        values: dict[str, Any] = {
            "judge": "openai" if self.judge_settings() is not None else "offline",
            "embedder": self.embedder_name(),
        }
        if self.embedder is not None and self.embedder.precision is not None:
            values["embed_precision"] = self.embedder.precision
        values.update(self.score.model_dump(exclude={"metrics"}, exclude_none=True))
        values.update({k: v for k, v in overrides.items() if v is not None})
        return ScoreSettings(**values)


# ---------------------------------------------------------------- loading


def _field_path(loc: tuple) -> str:
    parts = list(loc)
    if len(parts) > 2 and parts[0] == "systems" and parts[2] in SYSTEM_KINDS:
        del parts[2]  # the discriminator tag pydantic adds, not a key of the file
    return ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in parts).replace(".[", "[")


def _message(err: dict) -> str:
    kind, loc = err["type"], tuple(err["loc"])
    if kind == "extra_forbidden":
        return unknown_key(EvalConfig, loc)
    kinds = ", ".join(SYSTEM_KINDS)
    if kind == "union_tag_not_found":
        return f"kind is missing (one of {kinds})"
    if kind == "union_tag_invalid":
        return f"kind {err.get('ctx', {}).get('tag')!r} is not one of {kinds}"
    if kind == "missing":
        return "required"
    return str(err["msg"]).removeprefix("Value error, ")


def config_error(path: Path, exc: ValidationError) -> ConfigError:
    """The one-line ConfigError of an evaluation config that failed validation."""
    errors = exc.errors()
    # an unknown key is usually a typo, and the cause of the other errors (a "missing" field): say it first
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = tuple(err["loc"])
    where = _field_path(loc[:-1] if err["type"] == "extra_forbidden" else loc)
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    return ConfigError(path, (f"field {where}: " if where else "") + _message(err) + more)


# ---------------------------------------------------------------- identity


def reports_sha256(reports: Mapping[str, str]) -> str:
    """sha256 of a submission's reports as read: each instance id and its text, in id order."""
    h = hashlib.sha256()
    for iid in sorted(reports):
        h.update(iid.encode("utf-8") + b"\x00" + reports[iid].encode("utf-8") + b"\x00")
    return h.hexdigest()
