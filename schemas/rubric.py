"""The hierarchical report rubric as data: its items (``schemas/rubric.toml``, read by :func:`load_rubric`)
and a judge's decision on one item. The checks and the scoring live in ``tasks.score.rubric``; the
specification is docs/metrics/rubric.md."""

from __future__ import annotations

import tomllib
from collections.abc import Collection
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from schemas.domains import domain_shapes, kind_of_category
from schemas.errors import FrameInputError

__all__ = [
    "CREDIT",
    "FAMILIES",
    "RUBRIC_PATH",
    "Decision",
    "Layer",
    "RubricDecision",
    "RubricError",
    "RubricItem",
    "category_family",
    "load_rubric",
]

RUBRIC_PATH = Path(__file__).resolve().with_name("rubric.toml")

Layer = Literal["G0", "G1", "G2"]
Decision = Literal["pass", "partial", "fail", "na"]
FAMILIES: tuple[str, ...] = ("financial", "academic")  # a kind's domains declare theirs (schemas.domains)
# Paper 003: pass 1, partial 0.5, fail 0; not applicable leaves the denominator.
CREDIT: dict[str, float | None] = {"pass": 1.0, "partial": 0.5, "fail": 0.0, "na": None}


class RubricError(FrameInputError):
    """The rubric file is missing, not TOML, or an item is invalid (one line naming file, item and field)."""


def category_family(category: str) -> str:
    """The rubric family of a category, as the domain shape of its source kind declares it: "financial"
    for filings, "academic" for papers; "" for a category of a kind with none (its family-specific items
    are not applicable) or of no registered kind."""
    kind = kind_of_category(category)
    return domain_shapes()[kind].RUBRIC_FAMILY if kind is not None else ""


class RubricItem(BaseModel):
    """One observable rubric item; `check` names its offline check (``tasks.score.rubric.CHECKS``; for a
    judged item the documented heuristic proxy used when no LLM judges)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^g[0-2]_[a-z0-9_]+$")
    layer: Layer
    title: str = Field(min_length=1)
    criterion: str = Field(min_length=1)
    mode: Literal["deterministic", "judged"]
    applies_to: list[Literal["financial", "academic"]] = Field(min_length=1)
    weight: float = Field(default=1.0, gt=0)
    check: str = Field(min_length=1)

    @model_validator(mode="after")
    def _layer_matches_id(self) -> RubricItem:
        if not self.id.startswith(self.layer.lower() + "_"):
            raise ValueError(
                f"id {self.id!r} must start with {self.layer.lower()}_ (its layer is {self.layer})"
            )
        return self

    def applies(self, category: str) -> bool:
        return category_family(category) in self.applies_to


class _RubricFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: str = "1"
    description: str = ""
    items: list[RubricItem] = Field(min_length=1)


class RubricDecision(BaseModel):
    """A judge's decision on one item, with the exact text it rests on and where that text sits."""

    item_id: str
    layer: Layer
    decision: Decision
    credit: float | None = None  # derived from `decision` (CREDIT) when not given; must agree if given
    evidence: str = ""  # the exact line / table cell / heading the decision rests on ("" when none)
    evidence_ref: str = ""  # where: "line 42", "table 2 row 5 col 3", "heading 'Liquidity' (line 9)"
    rationale: str = ""  # short reason (the offline computation, or the LLM's words)
    judge: str = ""  # who decided this item: "offline:rubric-checks" or "openai:<model>"

    @model_validator(mode="after")
    def _credit(self) -> RubricDecision:
        want = CREDIT[self.decision]
        if self.credit is None:
            self.credit = want
        elif want is None or abs(self.credit - want) > 1e-9:
            raise ValueError(f"credit {self.credit} does not match decision {self.decision!r} ({want})")
        return self


def _where(raw: Any, loc: tuple[Any, ...]) -> str:
    """'item 'g1_title' (#3) field weight' for a pydantic error location."""
    if len(loc) >= 2 and loc[0] == "items" and isinstance(loc[1], int):
        item = raw.get("items", [])[loc[1]] if isinstance(raw.get("items"), list) else None
        ident = item.get("id") if isinstance(item, dict) else None
        head = f"item {ident!r} (#{loc[1] + 1})" if ident else f"item #{loc[1] + 1}"
        rest = ".".join(str(p) for p in loc[2:])
        return f"{head} field {rest}" if rest else head
    return "field " + (".".join(str(p) for p in loc) or "(top level)")


def load_rubric(path: str | Path | None = None, *, checks: Collection[str] | None = None) -> list[RubricItem]:
    """The validated items of a rubric TOML (default ``schemas/rubric.toml``), in file order.

    Ids must be unique; when `checks` is given, every item's `check` must be one of its names (the
    checks live in ``tasks.score.rubric``, which passes them). Any problem raises :class:`RubricError` with
    one line naming the file, the item id and the field."""
    path = Path(path) if path is not None else RUBRIC_PATH
    if not path.is_file():
        raise RubricError(path, "rubric file not found")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise RubricError(path, f"not valid TOML ({str(exc).splitlines()[0]})") from None
    try:
        rubric = _RubricFile.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        msg = err["msg"].removeprefix("Value error, ")
        more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise RubricError(path, f"{_where(raw, tuple(err['loc']))}: {msg}{more}") from None
    seen: set[str] = set()
    for n, item in enumerate(rubric.items, 1):
        if item.id in seen:
            raise RubricError(path, f"item {item.id!r} (#{n}) field id: duplicate id")
        seen.add(item.id)
    for n, item in enumerate(rubric.items, 1):
        if checks is not None and item.check not in checks:
            raise RubricError(
                path,
                f"item {item.id!r} (#{n}) field check: unknown check {item.check!r} "
                f"(known: {', '.join(sorted(checks))})",
            )
    return list(rubric.items)
