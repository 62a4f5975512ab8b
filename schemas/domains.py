"""The domains a build config lists: one shape per source kind, registered under the kind's name.

A domain's shape says what a config must give for it (a ticker and periods, a topic and windows, ...),
its snapshots in order, and how to narrow it to one snapshot. The behaviour of a kind (fetch, discovery,
grounding, QA) lives in `tasks.sources`, which registers the shape of every kind it knows here; the
shapes of the two built-in kinds register themselves below. A config naming a kind nobody registered is
refused with the kinds there are.
"""

from __future__ import annotations

import datetime as dt
import re
import typing
from typing import Any, ClassVar, Literal, Self

from pydantic import Field, field_validator, model_validator

from schemas.strict import Strict, slug


class DomainBase(Strict):
    """What every domain has. A kind's shape subclasses it with `kind: Literal["<kind>"]`, declares its
    categories (display order and labels) and implements `snapshots` and `only`."""

    kind: str
    name: str
    category: str

    # category -> display label, in display order (the card, the leaderboard, the diagnostic report)
    CATEGORIES: ClassVar[dict[str, str]] = {}
    # which items of frame's rubric (schemas/rubric.toml `applies_to`) its reports answer: "financial",
    # "academic", or "" (only the items every report answers)
    RUBRIC_FAMILY: ClassVar[str] = ""

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return slug(v, "name")

    @field_validator("category")
    @classmethod
    def _category(cls, v: str) -> str:
        known = list(category_labels())
        if v not in known:
            # worded as pydantic words a Literal, so every bad value reads alike
            options = ", ".join(repr(c) for c in known[:-1]) + f" or {known[-1]!r}" if known else "none"
            raise ValueError(f"Input should be {options}")
        return v

    @classmethod
    def kind_name(cls) -> str:
        """The tag of this shape: the one value its `kind` field accepts."""
        args = typing.get_args(cls.model_fields["kind"].annotation)
        if len(args) != 1 or not isinstance(args[0], str):
            raise TypeError(f"{cls.__name__}.kind must be Literal['<kind name>']")
        return args[0]

    @property
    def snapshots(self) -> list[str]:
        """The snapshot labels, oldest first (they name folders and instance ids)."""
        raise NotImplementedError

    def only(self, snapshot: str) -> Self:
        """This domain narrowed to one of its snapshots, discovery off: what that snapshot's fetch sees, so
        a refresh that adds a snapshot never fetches the earlier ones again."""
        raise NotImplementedError

    def snapshot_date(self, snapshot: str) -> dt.date | None:
        """The date a snapshot stands for (a filing's period end), None when it is not a day (a window).
        The release's date columns come from here; its writer checks them against the labels."""
        return None

    def _known(self, snapshot: str) -> None:
        if snapshot not in self.snapshots:
            raise ValueError(f"domain {self.name} has no snapshot {snapshot!r} ({', '.join(self.snapshots)})")

    def without_discovery(self) -> Self:
        """This domain with automatic discovery of newer snapshots off (a refresh of other kinds)."""
        return self


_SHAPES: dict[str, type[DomainBase]] = {}


def register_domain(shape: type[DomainBase]) -> type[DomainBase]:
    """Make `shape` a valid `[[domains]]` table of a config (usable as a class decorator). Its categories
    must be new: a category names one kind's domains."""
    name = shape.kind_name()
    taken = {c: k for k, s in _SHAPES.items() if k != name for c in s.CATEGORIES}
    clash = sorted(set(shape.CATEGORIES) & set(taken))
    if clash:
        raise ValueError(f"source kind {name!r}: categories already used by another kind: {', '.join(clash)}")
    _SHAPES[name] = shape
    return shape


def unregister_domain(name: str) -> None:
    _SHAPES.pop(name, None)


def domain_shapes() -> dict[str, type[DomainBase]]:
    """kind name -> shape, in registration order (built-ins first)."""
    return dict(_SHAPES)


def category_labels() -> dict[str, str]:
    """Every registered category -> its label, in display order (by kind, then as the kind orders them)."""
    return {c: label for shape in _SHAPES.values() for c, label in shape.CATEGORIES.items()}


def kind_of_category(category: str) -> str | None:
    """The kind whose domains have `category`, None for a category nobody registered."""
    return next((k for k, s in _SHAPES.items() if category in s.CATEGORIES), None)


# ---- the built-in kinds ------------------------------------------------------------------------


@register_domain
class EdgarDomain(DomainBase):
    kind: Literal["edgar"]
    ticker: str
    cik: str | None = None
    form: Literal["10-Q", "10-K"]
    periods: list[dt.date] = Field(min_length=1, description="period-end dates of the snapshots, ascending")
    discover: bool = Field(
        default=False,
        description="`frame refresh` appends newer periods of this form found at the source",
    )
    fiscal_year_end: str | None = Field(
        default=None,
        description="the company's fiscal year end, MM-DD: pairs 10-Qs across it (a Q4 has no 10-Q); "
        "default: the quarter none of the domain's 10-Qs falls in",
    )

    CATEGORIES: ClassVar[dict[str, str]] = {
        "financial_quarterly": "Financial, quarterly (10-Q)",
        "financial_annual": "Financial, annual (10-K)",
    }
    FORM_CATEGORY: ClassVar[dict[str, str]] = {"10-Q": "financial_quarterly", "10-K": "financial_annual"}
    RUBRIC_FAMILY: ClassVar[str] = "financial"

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

    @field_validator("fiscal_year_end")
    @classmethod
    def _fiscal_year_end(cls, v: str | None) -> str | None:
        if v is None:
            return v
        m = re.fullmatch(r"(?:--)?(\d{2})-(\d{2})", v)
        try:
            return dt.date(2000, int(m.group(1)), int(m.group(2))).strftime("%m-%d")  # type: ignore[union-attr]
        except (AttributeError, ValueError):
            raise ValueError(f"fiscal_year_end must be a month-day MM-DD (got {v[:40]!r})") from None

    @model_validator(mode="after")
    def _checks(self) -> EdgarDomain:
        if self.periods != sorted(set(self.periods)):
            raise ValueError("periods must be distinct and in ascending order")
        expected = self.FORM_CATEGORY[self.form]
        if self.category != expected:
            raise ValueError(f"form {self.form} belongs to category {expected}, not {self.category}")
        return self

    @property
    def snapshots(self) -> list[str]:
        return [p.isoformat() for p in self.periods]

    def only(self, snapshot: str) -> EdgarDomain:
        self._known(snapshot)
        return self.model_copy(update={"periods": [self.snapshot_date(snapshot)], "discover": False})

    def snapshot_date(self, snapshot: str) -> dt.date | None:
        return next((p for p in self.periods if p.isoformat() == snapshot), None)

    def without_discovery(self) -> EdgarDomain:
        return self.model_copy(update={"discover": False})


class ArxivWindow(Strict):
    label: str
    start: dt.date
    end: dt.date

    @field_validator("label")
    @classmethod
    def _label(cls, v: str) -> str:
        return slug(v, "label")

    @model_validator(mode="after")
    def _order(self) -> ArxivWindow:
        if self.end < self.start:
            raise ValueError(f"window {self.label}: end {self.end} is before start {self.start}")
        return self


@register_domain
class ArxivDomain(DomainBase):
    kind: Literal["arxiv"]
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

    CATEGORIES: ClassVar[dict[str, str]] = {
        "academic_simple": "Academic, simple",
        "academic_complex": "Academic, complex",
    }
    RUBRIC_FAMILY: ClassVar[str] = "academic"

    @field_validator("topic")
    @classmethod
    def _topic(cls, v: str) -> str:
        return slug(v, "topic")

    @model_validator(mode="after")
    def _checks(self) -> ArxivDomain:
        if self.category not in self.CATEGORIES:
            raise ValueError(f"arxiv domains are {' or '.join(self.CATEGORIES)}, not {self.category}")
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

    def only(self, snapshot: str) -> ArxivDomain:
        self._known(snapshot)
        return self.model_copy(
            update={"windows": [w for w in self.windows if w.label == snapshot], "window_months": None}
        )

    def without_discovery(self) -> ArxivDomain:
        return self.model_copy(update={"window_months": None})


def validate_domains(value: Any) -> Any:
    """The `[[domains]]` list validated, each table by the shape its `kind` names (pydantic's tagged
    union over every registered kind: errors keep their place, an unknown kind lists the known ones)."""
    from pydantic import TypeAdapter

    shapes = tuple(_SHAPES.values())
    adapter = _ADAPTERS.get(shapes)  # keyed by the shapes: a kind registered again gets a new one
    if adapter is None:
        tagged = typing.Annotated[typing.Union[shapes], Field(discriminator="kind")]  # noqa: UP007
        one = shapes[0] if len(shapes) == 1 else tagged
        adapter = _ADAPTERS[shapes] = TypeAdapter(list[one])  # type: ignore[valid-type]
    return adapter.validate_python(value)


_ADAPTERS: dict[tuple[type[DomainBase], ...], Any] = {}
