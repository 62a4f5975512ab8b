"""What of a report system changes its reports: the generation cache key of a system (JSON-able), with
program files named by their file name and keyed by their sha256. Secrets never appear."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from schemas.evaluation import (
    STRATEGY_ROLES,
    BuiltinSystem,
    CommandSystem,
    OpenAISystem,
    SubmissionSystem,
    _existing_file,
)
from tasks.errors import ConfigError
from tasks.manifest import sha256_file

__all__ = ["epoch_identity", "samples_of", "system_identity"]


def _program_files(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """argv with program files named by their file name (machine-independent), and their sha256s."""
    shown, shas = [], {}
    for i, item in enumerate(argv):
        p = Path(item)
        if p.is_absolute() and _existing_file(p) is not None:
            shown.append(p.name)
            shas[str(i)] = sha256_file(p)
        else:
            shown.append(item)
    return shown, shas


def samples_of(system: BaseModel, epochs: int) -> int:
    """How many samples per instance `--epochs` asks of a system: `epochs` for a model sampled with a
    temperature > 0, one for any system whose report is fixed (temperature 0, builtins, programs,
    submissions), as repeating it would only repeat the report."""
    if isinstance(system, OpenAISystem) and system.temperature > 0:
        return max(1, int(epochs))
    return 1


def epoch_identity(identity: dict[str, Any], epoch: int) -> dict[str, Any]:
    """The generation cache key of sample `epoch` of a system: its identity, with the epoch when > 0 (the
    first sample keeps the key it had before epochs existed)."""
    return {**identity, "epoch": int(epoch)} if epoch else dict(identity)


def system_identity(name: str, system: BaseModel) -> dict[str, Any]:
    """What of system `name` changes its reports (JSON-able). The name itself is not part of it: two
    names with the same settings share generations. Client knobs that leave replies unchanged
    (concurrency, timeouts, retries, api_key_env) are left out; secrets never appear."""
    if isinstance(system, BuiltinSystem):
        return {"kind": "builtin", "builtin": system.builtin}
    if isinstance(system, OpenAISystem):
        prompt = system.prompt_file()
        return {
            "kind": "openai",
            "base_url": system.base_url,
            "model": system.model,
            "temperature": system.temperature,
            "top_p": system.top_p,
            "seed": system.seed,
            "max_output_tokens": system.llm_settings().output_budget(STRATEGY_ROLES[system.strategy]),
            "token_margin": system.token_margin,
            "context_tokens": system.context_tokens,
            "strategy": system.strategy,
            "prompt_sha256": sha256_file(prompt) if prompt is not None else None,
        }
    if isinstance(system, CommandSystem):
        argv, shas = _program_files(system.command)
        return {
            "kind": "command",
            "argv": argv,
            "program_sha256": shas,
            "timeout_s": system.timeout_s,
            "output": system.output,
            "max_chars": system.max_chars,
            "env": sorted(system.env),
            **({"pass_env": sorted(system.pass_env)} if system.pass_env else {}),
        }
    if isinstance(system, SubmissionSystem):
        # the digest is of the reports as read (tasks.generate.systems.SubmissionReportSystem.identity):
        # hashing the files apart from reading them would let them change in between
        raise ConfigError(f"systems.{name}", "a submission's identity is the digest of its checked reports")
    raise ConfigError(f"systems.{name}", f"not a system config ({type(system).__name__})")
