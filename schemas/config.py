"""Build configuration (TOML), validated with pydantic.

Every invalid field becomes one line naming the file, the field path and what is wrong.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from tasks.errors import ConfigError
from tasks.files import FileProblem, read_capped, release_around

Category = Literal["financial_quarterly", "financial_annual", "academic_simple", "academic_complex"]
# The order and display labels of the categories, used everywhere a category is shown (release card,
# leaderboard, diagnostic report), so one name means one thing.
CATEGORY_ORDER: tuple[str, ...] = (
    "financial_quarterly",
    "financial_annual",
    "academic_simple",
    "academic_complex",
)
CATEGORY_LABELS: dict[str, str] = {
    "financial_quarterly": "Financial, quarterly (10-Q)",
    "financial_annual": "Financial, annual (10-K)",
    "academic_simple": "Academic, simple",
    "academic_complex": "Academic, complex",
}
Form = Literal["10-Q", "10-K"]

# Names end up in paths and ids: keep them to a safe slug so nothing can escape the data folder.
# fullmatch, not match + "$": "$" also matches before a trailing newline.
SLUG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,80}", re.ASCII)


def _slug(value: str, what: str) -> str:
    if not SLUG.fullmatch(value) or ".." in value:
        raise ValueError(f"{what} must be letters, digits, '.', '_' or '-' (got {value!r})")
    return value


def _scalar_kinds(annotation: Any) -> set[type]:
    """The scalar types (bool, int, float, str) a field annotation accepts, through Optional / Union /
    Annotated; other types (lists, paths, models, literals) are left to pydantic."""
    import types
    import typing

    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _scalar_kinds(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        out: set[type] = set()
        for arg in typing.get_args(annotation):
            out |= _scalar_kinds(arg)
        return out
    return {annotation} if annotation in (bool, int, float, str) else set()


class _Strict(BaseModel):
    # inf and nan are no setting: `timeout_s = inf` would be a wait without end
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_coercion(cls, data: Any) -> Any:
        # TOML has real booleans and numbers: `papers_per_window = true` or `rounds = "3"` is a mistake to
        # report, not something to read as 1 or 3 (pydantic's lax mode would).
        if not isinstance(data, dict):
            return data
        for name, field in cls.model_fields.items():
            key = field.alias or name
            if key not in data:
                continue
            problem = _scalar_problem(data[key], _scalar_kinds(field.annotation))
            if problem:
                raise ValueError(f"{key}: {problem}")
        return data


def _scalar_problem(v: Any, kinds: set[type]) -> str | None:
    if not kinds or v is None:
        return None
    if isinstance(v, bool):
        return None if bool in kinds else f"expected {_kind_words(kinds)}, got the boolean {str(v).lower()}"
    if kinds == {bool}:
        return f"expected true or false, got {v!r}"
    if isinstance(v, str) and str not in kinds:
        return f"expected {_kind_words(kinds)}, got the string {v!r}"
    return None


def _kind_words(kinds: set[type]) -> str:
    return " or ".join(w for t, w in ((int, "an integer"), (float, "a number"), (str, "text")) if t in kinds)


class EdgarDomain(_Strict):
    kind: Literal["edgar"]
    name: str
    category: Category
    ticker: str
    cik: str | None = None
    form: Form
    periods: list[dt.date] = Field(min_length=1, description="period-end dates of the snapshots, ascending")
    discover: bool = Field(
        default=False,
        description="`frame refresh` appends newer periods of this form found at the source",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _slug(v, "name")

    @field_validator("ticker")
    @classmethod
    def _ticker(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9.\-]{0,9}", v, re.ASCII) or ".." in v:
            raise ValueError(f"ticker must be 1-10 letters/digits (got {v!r})")
        return v.upper()

    @field_validator("cik")
    @classmethod
    def _cik(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if not re.fullmatch(r"[0-9]{1,10}", v):
            raise ValueError(f"cik must be up to 10 digits (got {v!r})")
        return v.zfill(10)

    @model_validator(mode="after")
    def _checks(self) -> EdgarDomain:
        if self.periods != sorted(set(self.periods)):
            raise ValueError("periods must be distinct and in ascending order")
        expected = {"10-Q": "financial_quarterly", "10-K": "financial_annual"}[self.form]
        if self.category != expected:
            raise ValueError(f"form {self.form} belongs to category {expected}, not {self.category}")
        return self

    @property
    def snapshots(self) -> list[str]:
        return [p.isoformat() for p in self.periods]


class ArxivWindow(_Strict):
    label: str
    start: dt.date
    end: dt.date

    @field_validator("label")
    @classmethod
    def _label(cls, v: str) -> str:
        return _slug(v, "label")

    @model_validator(mode="after")
    def _order(self) -> ArxivWindow:
        if self.end < self.start:
            raise ValueError(f"window {self.label}: end {self.end} is before start {self.start}")
        return self


class ArxivDomain(_Strict):
    kind: Literal["arxiv"]
    name: str
    category: Category
    topic: str
    query: str = Field(min_length=1, description="arXiv API search query for live builds")
    papers_per_window: int = Field(ge=1, le=50)
    windows: list[ArxivWindow] = Field(min_length=1)
    window_months: int | None = Field(
        default=None,
        ge=1,
        le=24,
        description="`frame refresh` appends consecutive windows of this many months once they have ended",
    )

    @field_validator("name", "topic")
    @classmethod
    def _names(cls, v: str) -> str:
        return _slug(v, "name/topic")

    @model_validator(mode="after")
    def _checks(self) -> ArxivDomain:
        if self.category not in ("academic_simple", "academic_complex"):
            raise ValueError(f"arxiv domains are academic_simple or academic_complex, not {self.category}")
        labels = [w.label for w in self.windows]
        if len(set(labels)) != len(labels):
            raise ValueError("window labels must be distinct")
        for a, b in zip(self.windows, self.windows[1:], strict=False):
            if b.start <= a.end:
                raise ValueError(f"windows must be ordered and not overlap ({a.label} then {b.label})")
        return self

    @property
    def snapshots(self) -> list[str]:
        return [w.label for w in self.windows]


Domain = Annotated[EdgarDomain | ArxivDomain, Field(discriminator="kind")]


class EdgarAccess(_Strict):
    """SEC asks every client to identify itself; FRAME_EDGAR_NAME / FRAME_EDGAR_EMAIL override."""

    user_agent_name: str = ""
    user_agent_email: str = ""

    def resolved(self) -> tuple[str, str]:
        name = os.environ.get("FRAME_EDGAR_NAME", self.user_agent_name).strip()
        email = os.environ.get("FRAME_EDGAR_EMAIL", self.user_agent_email).strip()
        return name, email


class SourceConfig(_Strict):
    mode: Literal["mirror", "live"] = "mirror"
    mirror: Path | None = Field(default=None, description="folder laid out like shared/corpus")

    @field_validator("mirror")
    @classmethod
    def _paths(cls, v: Path | None) -> Path | None:
        return _no_nul(v)

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


class LLMSettings(_Strict):
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


def _no_nul(v: Path | None) -> Path | None:
    # A NUL cannot be in a path: os calls would raise far from the config that holds it.
    if v is not None and "\x00" in str(v):
        raise ValueError("must not contain a NUL character")
    return v


class BuildSettings(_Strict):
    data_dir: Path = Path("data")

    @field_validator("data_dir")
    @classmethod
    def _paths(cls, v: Path) -> Path:
        return _no_nul(v)


class RunSettings(_Strict):
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
        return _no_nul(v)

    def resolved(self) -> RunSettings:
        env = {
            "task_runner": os.environ.get("FRAME_TASK_RUNNER"),
            "dask_address": os.environ.get("FRAME_DASK_ADDRESS"),
        }
        update = {k: v for k, v in env.items() if v}
        return self.model_validate({**self.model_dump(), **update}) if update else self


class ModelPrice(_Strict):
    """USD per million tokens (for the build's cost estimate)."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)


class FrameConfig(_Strict):
    build: BuildSettings = BuildSettings()
    llm: LLMSettings = LLMSettings()
    run: RunSettings = RunSettings()
    # model name -> price; estimates only, so it lives outside [llm] (whose fields key the caches).
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    source: SourceConfig
    domains: list[Domain] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> FrameConfig:
        names = [d.name for d in self.domains]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"domain names must be unique: {', '.join(dupes)}")
        return self

    def domain(self, name: str) -> EdgarDomain | ArxivDomain:
        for d in self.domains:
            if d.name == name:
                return d
        raise ConfigError("domains", f"no domain named {name!r}")

    def for_domain(self, name: str) -> FrameConfig:
        """The config as one domain's steps see it: that domain only, default run settings and
        prices. Cache keys built from it change only when something that domain depends on does,
        so adding a snapshot to one domain (a refresh) leaves every other domain's cache valid."""
        return self.model_copy(update={"domains": [self.domain(name)], "run": RunSettings(), "prices": {}})

    def for_snapshot(self, name: str, snapshot: str) -> tuple[FrameConfig, EdgarDomain | ArxivDomain]:
        """The config and domain as one snapshot's fetch sees them (that snapshot only): a refresh that
        adds a snapshot never fetches the earlier ones again."""
        d = self.domain(name)
        if isinstance(d, EdgarDomain):
            one = d.model_copy(update={"periods": [dt.date.fromisoformat(snapshot)], "discover": False})
        else:
            one = d.model_copy(
                update={"windows": [w for w in d.windows if w.label == snapshot], "window_months": None}
            )
        return self.model_copy(update={"domains": [one], "run": RunSettings(), "prices": {}}), one

    def with_domains(self, domains: list[EdgarDomain | ArxivDomain]) -> FrameConfig:
        return FrameConfig.model_validate({**self.model_dump(), "domains": [d.model_dump() for d in domains]})


def _field_path(loc: tuple) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif item in ("edgar", "arxiv") and parts and parts[-1].endswith("]"):
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

    anns: list[Any] = [root]
    for item in loc:
        members = _members(anns)
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


MAX_CONFIG_BYTES = 4 << 20  # frame's largest config is a few KB


def read_toml(path: Path) -> dict[str, Any]:
    """The parsed TOML file; a one-line ConfigError when it is missing or not TOML."""
    try:  # a FIFO or device is never opened (it would block or never end); a config is small
        raw = read_capped(path.resolve(), MAX_CONFIG_BYTES, None, "more than {limit:,} bytes: not a config")
    except FileNotFoundError:
        raise ConfigError(path, "config file not found") from None
    except FileProblem as exc:
        raise ConfigError(path, str(exc)) from None
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(path, f"not valid TOML ({str(exc).splitlines()[0]})") from None


def load_config(path: str | Path) -> FrameConfig:
    """Read and validate a TOML config. Relative paths resolve against the config file's folder."""
    path = Path(path)
    raw = read_toml(path)
    try:
        cfg = FrameConfig.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors()
        # An unknown key is usually a typo, and the cause of the others (the real key is "missing"): it
        # comes first, with the key it was probably meant to be.
        err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        loc = tuple(err["loc"])
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        if err["type"] == "extra_forbidden":
            field = _field_path(loc[:-1])
            problem = (f"field {field}: " if field else "") + unknown_key(FrameConfig, loc)
        else:
            field = _field_path(loc) or "(top level)"
            problem = f"field {field}: " + err["msg"].removeprefix("Value error, ")
        raise ConfigError(path, problem + more) from None
    base = path.resolve().parent
    updates = {}
    if not cfg.build.data_dir.is_absolute():
        updates["build"] = cfg.build.model_copy(update={"data_dir": (base / cfg.build.data_dir).resolve()})
    if cfg.source.mirror is not None and not cfg.source.mirror.is_absolute():
        updates["source"] = cfg.source.model_copy(update={"mirror": (base / cfg.source.mirror).resolve()})
    if cfg.run.result_storage is not None and not cfg.run.result_storage.is_absolute():
        updates["run"] = cfg.run.model_copy(
            update={"result_storage": (base / cfg.run.result_storage).resolve()}
        )
    cfg = cfg.model_copy(update=updates) if updates else cfg
    outside_releases(path, build=cfg.build, run=cfg.run)
    return cfg


def outside_releases(path: Path, **sections: Any) -> None:
    """ConfigError when a folder frame writes to (build.data_dir, run.result_storage) is inside a
    release: a release is immutable (`frame release verify` would fail on every file written there)."""
    for section, settings in sections.items():
        if settings is None:
            continue
        for key in ("data_dir", "result_storage"):
            folder = getattr(settings, key, None)
            inside = release_around(folder) if folder is not None else None
            if inside is not None:
                raise ConfigError(
                    path,
                    f"field {section}.{key}: {folder} is inside the release {inside.parent.name}/"
                    f"{inside.name}: releases are immutable",
                )
