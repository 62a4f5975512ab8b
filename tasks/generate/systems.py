"""Report systems: one interface over frame's builtins, OpenAI-compatible models, programs and submissions.

`make_system(name, config, cache_dir=...)` turns a `[systems.NAME]` table (schemas.evaluation) into a
`ReportSystem`: `identity()` (the generation cache key, tasks.generate.identity.system_identity) and
`generate(instance, grounding) -> Generation` for one instance (a row of instances.parquet as a dict,
and its rows of grounding_documents.parquet). Only the builtin `gold` reads the target report Y; every
other system is handed the instance without it (`without_target`). A failure that concerns one
instance (a timeout, an exit code, a model that kept answering badly) is a Generation with `error` set,
so the other instances go on; a misconfigured system raises ConfigError / FrameInputError.
A submission system must be `check`ed against the release's instance ids before `generate`.
"""

from __future__ import annotations

import difflib
import shutil
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from schemas.config import LLMSettings
from schemas.evaluation import (
    BUILTIN_NAMES,
    BuiltinSystem,
    CommandSystem,
    EvalConfig,
    OpenAISystem,
    SubmissionSystem,
    reports_sha256,
)
from tasks.errors import ConfigError, FrameInputError
from tasks.generate.generation import Generation, without_target
from tasks.generate.identity import system_identity

__all__ = [
    "BuiltinReportSystem",
    "CommandReportSystem",
    "Generation",
    "OpenAIReportSystem",
    "ReportSystem",
    "SubmissionReportSystem",
    "builtin_systems",
    "legacy_one_shot",
    "make_system",
    "select_systems",
    "with_epochs",
    "without_target",
]


@runtime_checkable
class ReportSystem(Protocol):
    name: str
    kind: str

    def identity(self) -> dict[str, Any]: ...

    def generate(self, instance: dict[str, Any], grounding: list[dict[str, Any]]) -> Generation: ...


class _Base:
    kind = ""
    epochs = 1  # samples per instance (`--epochs`, set by with_epochs for a model sampled with temperature)

    def __init__(self, name: str, config: Any) -> None:
        self.name = name
        self.config = config
        self._identity: dict[str, Any] | None = None

    def identity(self) -> dict[str, Any]:
        if self._identity is None:  # a submission's digest reads every file once
            self._identity = system_identity(self.name, self.config)
        return dict(self._identity)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class BuiltinReportSystem(_Base):
    """gold (the target report Y itself), copy-sample or extractive (tasks.generate.baselines)."""

    kind = "builtin"

    def generate(self, instance: dict[str, Any], grounding: list[dict[str, Any]]) -> Generation:
        iid = str(instance["instance_id"])
        if self.config.builtin == "gold":
            target = instance.get("target_markdown")
            if not isinstance(target, str):
                return Generation(iid, None, {}, "the instance has no target_markdown")
            return Generation(iid, target, {}, None)
        from tasks.generate.baselines import generate_report

        return Generation(
            iid, generate_report(self.config.builtin, without_target(instance), grounding), {}, None
        )


def _custom_prompt(name: str, cfg: OpenAISystem) -> Path | None:
    """The configured template file, checked: it parses, and it uses only placeholders the strategy
    fills (those of the strategy's default template). None: the strategy's default prompt."""
    if cfg.prompt is None:
        return None
    from tasks.llm.prompts import PromptError, load_prompt, parse_prompt

    where = f"systems.{name}.prompt"
    try:
        prompt = parse_prompt(cfg.prompt.stem, cfg.prompt.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, PromptError) as exc:
        raise ConfigError(where, f"{cfg.prompt}: {exc}") from None
    if cfg.strategy == "one-shot":
        from tasks.generate.llm import PROMPT
    else:
        from tasks.generate.sections import PROMPT
    fills = load_prompt(PROMPT).placeholders
    extra = sorted(prompt.placeholders - fills)
    if extra:
        known = ", ".join(sorted(fills))
        raise ConfigError(
            where, f"placeholder {{{{{extra[0]}}}}} has no value ({cfg.strategy} fills {known})"
        )
    return cfg.prompt


class OpenAIReportSystem(_Base):
    """A model behind an OpenAI-compatible endpoint: strategy one-shot (tasks.generate.llm.one_shot) or
    section-by-section (tasks.generate.sections.section_by_section). Replies are cached under cache_dir."""

    kind = "openai"

    def __init__(self, name: str, config: OpenAISystem, cache_dir: Path) -> None:
        super().__init__(name, config)
        self.cache_dir = Path(cache_dir)
        self.settings: LLMSettings = config.llm_settings()
        self.prompt = _custom_prompt(name, config)
        self._client: Any = None
        self._lock = threading.Lock()

    def client(self) -> Any:
        """The system's LLMClient, made on first use (it needs the API key in the environment)."""
        with self._lock:
            if self._client is None:
                from tasks.llm.client import LLMClient

                try:
                    sampling = {"top_p": self.config.top_p, "seed": self.config.seed}
                    self._client = LLMClient(self.settings, self.cache_dir, sampling=sampling)
                except FrameInputError as exc:
                    raise ConfigError(f"systems.{self.name}.api_key_env", exc.problem) from None
            return self._client

    def generate(
        self, instance: dict[str, Any], grounding: list[dict[str, Any]], epoch: int = 0
    ) -> Generation:
        """One report; `epoch` > 0 asks for another sample (tasks.llm.client.LLMClient.complete_text)."""
        from tasks.llm.client import LLMError

        iid = str(instance["instance_id"])
        visible, client = without_target(instance), self.client()
        try:
            if self.config.strategy == "one-shot":
                from tasks.generate.llm import one_shot

                markdown, meta = one_shot(
                    visible,
                    grounding,
                    self.settings,
                    self.cache_dir,
                    client=client,
                    prompt=self.prompt,
                    epoch=epoch,
                )
            else:
                from tasks.generate.sections import section_by_section

                markdown, meta = section_by_section(
                    visible,
                    grounding,
                    self.settings,
                    self.cache_dir,
                    prompt=self.prompt,
                    client=client,
                    epoch=epoch,
                )
        except (LLMError, FrameInputError) as exc:
            meta = {"kind": "openai", "model": self.settings.model}
            return Generation(iid, None, meta, str(exc), epoch)
        meta = {**meta, "system": self.name, "kind": "openai", "strategy": self.config.strategy}
        return Generation(iid, markdown, {**meta, **({"epoch": epoch} if epoch else {})}, None, epoch)


class CommandReportSystem(_Base):
    """Any program, run once per instance in a fresh folder (tasks.generate.command.run_command)."""

    kind = "command"

    def __init__(
        self,
        name: str,
        config: CommandSystem,
        workdir_root: Path | None = None,
        files: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(name, config)
        self.files = dict(files or {})  # extra files of every instance folder (e.g. a generation skill)
        program = config.command[0]
        if shutil.which(program) is None and not Path(program).is_file():
            raise ConfigError(
                f"systems.{name}.command", f"program {program!r} not found (no such file, not on PATH)"
            )
        self.workdir_root = workdir_root

    def generate(self, instance: dict[str, Any], grounding: list[dict[str, Any]]) -> Generation:
        from tasks.generate.command import run_command

        c = self.config
        return run_command(
            c.command,
            without_target(instance),
            grounding,
            timeout_s=c.timeout_s,
            output=c.output,
            env=c.env,
            pass_env=c.pass_env,
            workdir_root=self.workdir_root,
            files=self.files,
            max_chars=c.max_chars,
        )


class SubmissionReportSystem(_Base):
    """Reports produced elsewhere (tasks.generate.submission). Call `check(instance_ids)` once before
    `generate`: it reads the submission, keeps the usable reports and returns the problems."""

    kind = "submission"

    def __init__(self, name: str, config: SubmissionSystem) -> None:
        super().__init__(name, config)
        self.reports: dict[str, str] | None = None
        self.problems: list[str] = []

    def check(self, instance_ids: Iterable[str], *, allow_missing: bool = False) -> list[str]:
        """Problems of the submission against the release's instance ids, one line each (empty: usable)."""
        from tasks.generate.submission import load_submission

        c = self.config
        self.reports, self.problems = load_submission(
            c.path, instance_ids, max_chars=c.max_chars, allow_missing=allow_missing
        )
        # the identity is the digest of what was read, never of a second reading of the files
        self._identity = {
            "kind": "submission",
            "sha256": reports_sha256(self.reports),
            "max_chars": c.max_chars,
        }
        return list(self.problems)

    def identity(self) -> dict[str, Any]:
        """The digest of the reports `check` read (each instance id and its text); before any check, the
        submission is read once, every report it holds kept."""
        if self._identity is None:
            self.check(None, allow_missing=True)
        return super().identity()

    def generate(self, instance: dict[str, Any], grounding: list[dict[str, Any]]) -> Generation:
        if self.reports is None:
            raise RuntimeError(f"submission system {self.name}: call check(instance_ids) before generate")
        iid = str(instance["instance_id"])
        meta = {"kind": "submission", "source": self.config.path.name}
        if iid not in self.reports:
            # the folder's name, not its path: errors reach results.json, which names no machine path
            return Generation(iid, None, meta, f"no usable report in the submission {self.config.path.name}")
        return Generation(iid, self.reports[iid], meta, None)


def builtin_systems() -> dict[str, BuiltinSystem]:
    """The builtins by name (gold, copy-sample, extractive): `--systems` names them without a config."""
    return {n: BuiltinSystem(kind="builtin", builtin=n) for n in BUILTIN_NAMES}  # type: ignore[arg-type]


def legacy_one_shot(llm: LLMSettings, flag: str = "--systems") -> OpenAISystem:
    """The system `--systems one-shot` has always meant: the one-shot prompt on the [llm] endpoint."""
    if llm.backend != "openai" or not llm.base_url:
        raise FrameInputError(
            flag,
            "one-shot needs an OpenAI-compatible endpoint: set FRAME_LLM_BACKEND=openai and "
            "FRAME_LLM_BASE_URL, [llm] in --config, or define the system in an evaluation config",
        )
    keep = set(OpenAISystem.model_fields) & set(LLMSettings.model_fields)
    return OpenAISystem(kind="openai", **llm.model_dump(include=keep))


def select_systems(
    names: Iterable[str] | None,
    config: EvalConfig | None = None,
    *,
    llm: LLMSettings | None = None,
    flag: str = "--systems",
    exclude: Iterable[str] = (),
) -> dict[str, Any]:
    """{name: system config} for `--systems` (None: every system of the config). A name is a configured
    system, else a builtin, else `one-shot` on the `llm` endpoint (the pre-config flag). Errors name
    `flag`, the option the user typed; an unknown name lists every valid one but `exclude`."""
    configured = dict(config.systems) if config is not None else {}
    if names is None:
        if not configured:
            raise FrameInputError(flag, "no systems: name them, or define [systems.NAME] in --config")
        return configured
    chosen: dict[str, Any] = {}
    for name in names:
        if name in chosen:
            raise FrameInputError(flag, f"system {name!r} named twice")
        if name in configured:
            chosen[name] = configured[name]
        elif name in BUILTIN_NAMES:
            chosen[name] = builtin_systems()[name]
        elif name == "one-shot":
            chosen[name] = legacy_one_shot(llm or LLMSettings().resolved(), flag)
        else:
            known = sorted({*configured, *BUILTIN_NAMES, "one-shot"} - set(exclude))
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise FrameInputError(flag, f"unknown system {name!r} ({hint}one of {', '.join(known)})")
    return chosen


def with_epochs(systems: Mapping[str, Any], epochs: int) -> dict[str, Any]:
    """`systems` with each one's samples per instance set for `--epochs` (tasks.generate.identity.
    samples_of: one for any system whose report is fixed); None (gold) stays None."""
    from tasks.generate.identity import samples_of

    if epochs < 1:
        raise FrameInputError("--epochs", f"must be 1 or more (got {epochs})")
    for system in systems.values():
        if system is not None:
            system.epochs = samples_of(system.config, epochs)
    return dict(systems)


def make_system(name: str, cfg: Any, *, cache_dir: Path) -> ReportSystem:
    """The ReportSystem of one `[systems.NAME]` table; `cache_dir` holds an openai system's replies."""
    if isinstance(cfg, BuiltinSystem):
        return BuiltinReportSystem(name, cfg)
    if isinstance(cfg, OpenAISystem):
        return OpenAIReportSystem(name, cfg, cache_dir)
    if isinstance(cfg, CommandSystem):
        return CommandReportSystem(name, cfg)
    if isinstance(cfg, SubmissionSystem):
        return SubmissionReportSystem(name, cfg)
    raise ConfigError(f"systems.{name}", f"not a system config ({type(cfg).__name__})")
