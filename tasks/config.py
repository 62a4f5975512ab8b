"""Reading config files: a build config (`load_config`) and an evaluation config (`load_eval_config`).

The shapes are in `schemas.config` and `schemas.evaluation`; here they meet the file system: the file is
read bounded (a FIFO or a device is never opened), relative paths resolve against the file's folder,
and a folder frame would write into a release is refused. Every problem is one ConfigError line naming
the file and the field. Loading a build config loads the source kinds (`tasks.sources`) first: their
domain shapes are what `[[domains]]` tables validate against.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from schemas.config import FrameConfig, _field_path, unknown_key
from schemas.evaluation import EvalConfig, config_error
from tasks.errors import ConfigError
from tasks.files import FileProblem, read_capped, release_around
from tasks.sources import source_kinds

__all__ = ["MAX_CONFIG_BYTES", "load_config", "load_eval_config", "outside_releases", "read_toml"]


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
    source_kinds()  # every kind's domain shape is registered before the tables are validated
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
    return _placed(path, cfg, {"build": "data_dir", "source": "mirror", "run": "result_storage"})


def _placed(path: Path, cfg: Any, folders: dict[str, str]) -> Any:
    """`cfg` with each relative folder (section -> key) resolved against the config file's folder; a
    folder frame writes to must not be inside a release."""
    base = path.resolve().parent
    updates = {}
    for section, key in folders.items():
        settings = getattr(cfg, section)
        folder = getattr(settings, key) if settings is not None else None
        if folder is not None and not folder.is_absolute():
            updates[section] = settings.model_copy(update={key: (base / folder).resolve()})
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


def load_eval_config(path: str | Path) -> EvalConfig:
    """Read and validate an evaluation config; relative paths resolve against the file's folder."""
    path = Path(path)
    raw = read_toml(path)
    base = path.resolve().parent
    try:
        cfg = EvalConfig.model_validate(raw, context={"base": base})
    except ValidationError as exc:
        raise config_error(path, exc) from None
    return _placed(path, cfg, {"build": "data_dir", "run": "result_storage"})
