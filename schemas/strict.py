"""The strict base of every config shape: unknown keys, coerced scalars, inf and nan are refused, and the
slug rule for every name that ends up in a path or an id."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, model_validator

# Names end up in paths and ids: keep them to a safe slug so nothing can escape the data folder.
# fullmatch, not match + "$": "$" also matches before a trailing newline.
SLUG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,80}", re.ASCII)


def slug(value: str, what: str) -> str:
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


class Strict(BaseModel):
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


def no_nul(v: Path | None) -> Path | None:
    # A NUL cannot be in a path: os calls would raise far from the config that holds it.
    if v is not None and "\x00" in str(v):
        raise ValueError("must not contain a NUL character")
    return v
