"""TOML text of a config's data (tables of strings, numbers, booleans, lists and inline tables): what a
command built from its flags, written so that `--config` repeats it (tasks.config.read_toml reads it back).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = ["toml_text"]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _key(k: str) -> str:
    return k if _BARE_KEY.fullmatch(k) else json.dumps(k)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"no TOML for the number {v}")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # a JSON string is a TOML basic string
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(str(k))} = {_value(x)}" for k, x in v.items()) + "}"
    raise ValueError(f"no TOML for {type(v).__name__}")


def _table(path: list[str], data: dict[str, Any], out: list[str]) -> None:
    scalars = {k: v for k, v in data.items() if not _is_table(v)}
    tables = {k: v for k, v in data.items() if _is_table(v)}
    if path and (scalars or not tables):
        out.append(f"\n[{'.'.join(_key(p) for p in path)}]")
    out.extend(f"{_key(k)} = {_value(v)}" for k, v in scalars.items() if v is not None)
    for k, v in tables.items():
        _table([*path, k], v, out)


def _is_table(v: Any) -> bool:
    return isinstance(v, dict)


def toml_text(data: dict[str, Any], header: str = "") -> str:
    """TOML of `data`: top-level and nested dicts as [tables]; None values left out."""
    out = [f"# {line}" for line in header.splitlines()]
    _table([], data, out)
    return "\n".join(out).lstrip("\n") + "\n"
