"""A model on the command line: `--model openai/<m>` (+ --model-base-url, --model-arg), `--judge-model`,
`--embedder-model` build the evaluation config a TOML file would (schemas.evaluation.EvalConfig), and
the run folder gets that config as config.toml, so `--config <folder>/config.toml` repeats the run.

Pairing (docs/evaluate.md): --model-base-url given once applies to every --model, given once per --model
it pairs in order; --model-arg key=value applies to every --model, NAME:key=value to the system NAME.
With --config these flags are refused: the file is the full form, the flags the short one.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tasks.errors import FrameInputError

__all__ = ["CliModels", "cli_eval_config", "repeat_command", "write_config"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
CONFIG_FILE = "config.toml"
CONFIG_HEADER = "# Written from the command's flags (--model ...)."  # its first line: a file frame wrote


# the model flag each endpoint flag belongs to (a stray one's error names it)
PARTNER = {
    "--model-base-url": "--model",
    "--model-arg": "--model",
    "--judge-base-url": "--judge-model",
    "--embedder-base-url": "--embedder-model",
}


class CliModels:
    """The model flags of one command, as typed."""

    def __init__(
        self,
        models: list[str] | None = None,
        base_urls: list[str] | None = None,
        args: list[str] | None = None,
        judge_model: str | None = None,
        judge_base_url: str | None = None,
        embedder_model: str | None = None,
        embedder_base_url: str | None = None,
    ) -> None:
        self.models, self.base_urls, self.args = list(models or []), list(base_urls or []), list(args or [])
        self.judge_model, self.judge_base_url = judge_model, judge_base_url
        self.embedder_model, self.embedder_base_url = embedder_model, embedder_base_url

    def given(self) -> bool:
        return bool(self.models or self.judge_model or self.embedder_model)

    def stray(self) -> str | None:
        """A flag that only means something beside another one, given alone."""
        if (self.base_urls or self.args) and not self.models:
            return "--model-base-url" if self.base_urls else "--model-arg"
        if self.judge_base_url and not self.judge_model:
            return "--judge-base-url"
        if self.embedder_base_url and not self.embedder_model:
            return "--embedder-base-url"
        return None


def _model_name(flag: str, spec: str) -> str:
    provider, sep, model = spec.partition("/")
    if not sep or provider != "openai" or not model.strip():
        raise FrameInputError(flag, f"give openai/<model> (any OpenAI-compatible endpoint; got {spec!r})")
    return model.strip()


def _system_name(model: str, taken: set[str]) -> str:
    """The system (leaderboard column, folder) of a model: its last path part, other characters as '-'."""
    base = re.sub(r"[^A-Za-z0-9._-]", "-", model.rsplit("/", 1)[-1]).strip(".")[:60] or "model"
    name, n = base, 1
    while name in taken or name == "gold":
        n += 1
        name = f"{base}-{n}"
    return name


def _arg_value(text: str) -> Any:
    """A --model-arg value: a JSON number, boolean or null as such, anything else the string itself."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, int | float | bool | type(None)) else text


def _model_args(args: list[str], names: list[str]) -> dict[str, dict[str, Any]]:
    from schemas.evaluation import OpenAISystem

    allowed = sorted(set(OpenAISystem.model_fields) - {"kind", "model", "base_url"})
    out: dict[str, dict[str, Any]] = {n: {} for n in names}
    for arg in args:
        head, eq, value = arg.partition("=")
        target, _, key = head.rpartition(":")  # NAME:key=value; a value may hold ':' and '='
        key, target = key.strip(), target.strip()
        if not eq or not key:
            raise FrameInputError("--model-arg", f"give key=value or NAME:key=value (got {arg!r})")
        if key not in allowed:
            raise FrameInputError("--model-arg", f"unknown key {key!r} (one of {', '.join(allowed)})")
        if target and target not in out:
            raise FrameInputError(
                "--model-arg", f"no --model system {target!r} (systems: {', '.join(names)})"
            )
        for name in [target] if target else names:
            out[name][key] = _arg_value(value.strip())
    return out


def _model_systems(cli: CliModels, taken: set[str]) -> dict[str, dict[str, Any]]:
    if len(cli.base_urls) not in (0, 1, len(cli.models)):
        raise FrameInputError(
            "--model-base-url",
            f"give it once, or once per --model ({len(cli.models)}; got {len(cli.base_urls)})",
        )
    urls = cli.base_urls * len(cli.models) if len(cli.base_urls) == 1 else cli.base_urls
    names, tables = [], []
    for i, spec in enumerate(cli.models):
        model = _model_name("--model", spec)
        name = _system_name(model, taken | set(names))
        names.append(name)
        tables.append({"kind": "openai", "base_url": urls[i] if urls else DEFAULT_BASE_URL, "model": model})
    args = _model_args(cli.args, names)
    return {n: {**t, **args[n]} for n, t in zip(names, tables, strict=True)}


def _roles(cli: CliModels, llm: Any, judge: str | None) -> dict[str, Any]:
    """[judge] and [embedder] of the flags; `--judge openai` alone is the [llm] endpoint (FRAME_LLM_*)."""
    out: dict[str, Any] = {}
    model_url = cli.base_urls[0] if cli.base_urls else None
    if cli.judge_model:
        url = cli.judge_base_url or model_url or DEFAULT_BASE_URL
        out["judge"] = {"base_url": url, "model": _model_name("--judge-model", cli.judge_model)}
    elif judge == "openai" and llm is not None and llm.backend == "openai":
        out["judge"] = {"base_url": llm.base_url, "model": llm.model, "api_key_env": llm.api_key_env}
    if cli.embedder_model:
        url = cli.embedder_base_url or cli.judge_base_url or model_url or DEFAULT_BASE_URL
        model = _model_name("--embedder-model", cli.embedder_model)
        out["embedder"] = {"kind": "openai", "base_url": url, "model": model}
    return out


def _validated(raw: dict[str, Any], cli: CliModels):
    """The EvalConfig of `raw`; a refused value is a one-line error naming the flag that gave it."""
    from schemas.evaluation import EvalConfig, config_error

    try:
        return EvalConfig.model_validate(raw, context={"base": Path.cwd()})
    except ValidationError as exc:
        loc = [str(p) for p in exc.errors()[0]["loc"]]
        flag = {"judge": "--judge-model", "embedder": "--embedder-model"}.get(loc[0], "--model")
        if loc[0] == "systems" and loc[-1] not in ("kind", "model", "base_url") and cli.args:
            flag = "--model-arg"
        elif loc[-1] == "base_url":
            flag = {"--model": "--model-base-url", "--judge-model": "--judge-base-url"}.get(
                flag, "--embedder-base-url"
            )
        raise FrameInputError(flag, config_error(Path(flag), exc).problem.removeprefix("field ")) from None


def cli_eval_config(
    cli: CliModels, names: list[str], llm: Any, score: dict[str, Any], judge: str | None = None
):
    """The EvalConfig the flags stand for: the systems `names` (builtins, one-shot on [llm]) then one
    openai system per --model; [judge], [embedder]; [score] of the score options given."""
    from tasks.generate.systems import select_systems

    bad = cli.stray()
    if bad is not None:
        raise FrameInputError(bad, f"needs its model flag {PARTNER[bad]}")
    chosen = select_systems(names, None, llm=llm) if names else {}
    systems: dict[str, Any] = {n: c.model_dump(mode="json", exclude_defaults=True) | {"kind": c.kind}
                               for n, c in chosen.items()}  # fmt: skip
    systems |= _model_systems(cli, set(systems))
    raw: dict[str, Any] = {"systems": systems, **_roles(cli, llm, judge)}
    precision = score.pop("embed_precision", None)
    if precision is not None:
        raw.setdefault("embedder", {"kind": "minilm"})
        if raw["embedder"].get("kind", "minilm") == "minilm":
            raw["embedder"]["precision"] = precision
    raw["score"] = {k: v for k, v in score.items() if v is not None}
    ev = _validated(raw, cli)
    from tasks.llm import redact

    # as for a config file (flows.configs): every key the flags name is a secret from now on
    redact.register_env(redact.key_envs(ev.model_dump()))
    return ev, raw


def repeat_command(command: str, release: Path, pick: tuple[int | None, str | None], extra: str = "") -> str:
    """The command line that repeats a run from its written config.toml ({config} stands for its path)."""
    limit, ids = pick
    # relative to where the command ran, like the paths the user typed (no machine path is written), and
    # quoted for a shell: an instance id holds '->'
    line = f"frame {command} --release {shlex.quote(os.path.relpath(release))} --config {{config}}{extra}"
    line += f" --limit {limit}" if limit is not None else ""
    return line + (f" --instances {shlex.quote(ids)}" if ids else "")


def write_config(raw: dict[str, Any], folder: Path, command_line: str) -> Path:
    """<folder>/config.toml: the config the flags built (an API key's variable name, never its value);
    its header is the command that repeats the run (repeat_command)."""
    from tasks.atomic import atomic_write_text
    from tasks.toml_text import toml_text

    path = folder / CONFIG_FILE
    header = (
        CONFIG_HEADER[2:]
        + " Repeat the run:\n"
        + command_line.format(config=shlex.quote(os.path.relpath(path)))
    )
    atomic_write_text(path, toml_text(raw, header))
    return path
