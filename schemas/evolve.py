"""Shapes of benchmark-guided skill evolution (paper 003 section 5): the instance splits, a skill (plan /
write / review rules, each "when it applies, what to do, how to check it") and the `[evolve]` settings.
The loop itself is tasks.evolve and flows/evolve.py; docs/evolve.md describes it."""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from schemas.config import LLMSettings
from schemas.strict import Strict

__all__ = [
    "SPLITS",
    "EvolveSettings",
    "Rule",
    "Skill",
    "Splits",
]

SPLITS: tuple[str, ...] = ("discovery", "validation", "locked")
STAGES: tuple[str, ...] = ("plan", "write", "review")
Stage = Literal["plan", "write", "review"]


class Rule(BaseModel):
    """One rule of a skill. `tag` names a capability the offline `extractive` system can honour
    (tasks.evolve.skill.HONOURED); rules written by an LLM optimizer usually have none."""

    stage: Stage
    when: str = Field(min_length=3, max_length=300)
    do: str = Field(min_length=3, max_length=400)
    check: str = Field(min_length=3, max_length=300)
    tag: str = Field(default="", pattern=r"^[\w-]*$", max_length=40)

    @field_validator("when", "do", "check")
    @classmethod
    def _one_line(cls, v: str) -> str:
        v = " ".join(v.split()).rstrip(".")
        if not v:
            raise ValueError("empty")
        return v

    @property
    def words(self) -> int:
        return len(f"{self.when} {self.do} {self.check}".split())


class Skill(BaseModel):
    """A generation skill K: rules grouped by stage. Rendered as Markdown (what a system is given)."""

    rules: list[Rule] = Field(default_factory=list)

    @field_validator("rules")
    @classmethod
    def _by_stage(cls, v: list[Rule]) -> list[Rule]:
        return sorted(v, key=lambda r: STAGES.index(r.stage))  # the rendered order (stable within a stage)

    @property
    def words(self) -> int:
        return sum(r.words for r in self.rules)

    @property
    def tags(self) -> set[str]:
        return {r.tag for r in self.rules if r.tag}

    def render(self) -> str:
        if not self.rules:
            return ""
        out = ["# Report-writing skill", ""]
        for stage in STAGES:
            rules = [r for r in self.rules if r.stage == stage]
            if not rules:
                continue
            out += [f"## {stage.capitalize()}", ""]
            for r in rules:
                tag = f" <!-- {r.tag} -->" if r.tag else ""
                out.append(f"- When {r.when}: {r.do}. Check: {r.check}.{tag}")
            out.append("")
        return "\n".join(out)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.render().encode("utf-8")).hexdigest()


class Splits(BaseModel):
    """Which domains (and so instances) of a release are for discovery, validation and the locked test."""

    release: str
    version: str
    seed: int
    domains: dict[str, list[str]]
    instances: dict[str, list[str]]
    # what each split covers (written since splits were stratified; empty in an older file)
    categories: dict[str, list[str]] = Field(default_factory=dict)
    families: dict[str, list[str]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _disjoint(self) -> Splits:
        if set(self.domains) != set(SPLITS) or set(self.instances) != set(SPLITS):
            raise ValueError(f"splits must be exactly {', '.join(SPLITS)}")
        seen: set[str] = set()
        for split in SPLITS:
            both = seen & set(self.domains[split])
            if both:
                raise ValueError(f"domain {sorted(both)[0]!r} is in two splits")
            seen |= set(self.domains[split])
        return self


class EvolveSettings(Strict):
    """[evolve] of an evaluation config. Thresholds are on pass rates / metric means in [0, 1]."""

    rounds: int = Field(default=3, ge=1, le=50)
    patience: int = Field(default=2, ge=1)
    support: int = Field(default=2, ge=1)  # systems that must share a failure for it to count
    min_fail_rate: float = Field(default=0.25, gt=0.0, le=1.0)  # per system, over its reports
    min_gain: float = Field(default=0.0, ge=0.0)  # targeted items' pass rate must rise by more than this
    # paper 003 gives no number for "materially regressing non-target items" (its thresholds are in a
    # supplement we do not have): 0.05 of an item's pass rate, so one report of 20 falling from pass to
    # fail is tolerated, one of 10 is not
    item_tolerance: float = Field(default=0.05, ge=0.0, le=1.0)
    # largest allowed drop of a metric other than the rubric layers (which may never fall), as a share of
    # its range; 0: none may fall (the paper's rule). The old 2% slack is an explicit opt-in.
    max_metric_drop: float = Field(default=0.0, ge=0.0)
    budget_words: int = Field(default=350, ge=20)  # the critic's length budget for the whole skill
    max_new_rules: int = Field(default=4, ge=1)
    metrics: list[str] = Field(default_factory=lambda: ["rubric"], min_length=1)
    bootstrap: int = Field(default=2000, ge=100)
    optimizer: LLMSettings | None = None  # None: the offline optimizer
    critic: LLMSettings | None = None  # None: the offline critic

    @field_validator("optimizer", "critic", mode="before")
    @classmethod
    def _endpoint(cls, v: object) -> object:
        # a role table is an OpenAI-compatible endpoint unless it says otherwise (like [judge])
        if isinstance(v, dict):
            v = {"backend": "openai", **v}
            if v["backend"] == "openai" and not v.get("base_url"):
                raise ValueError(
                    "an openai role needs base_url (an OpenAI-compatible endpoint, ending in /v1)"
                )
        return v

    @field_validator("metrics")
    @classmethod
    def _rubric_first(cls, v: list[str]) -> list[str]:
        if "rubric" not in v:
            raise ValueError("must include 'rubric' (failures are rubric items)")
        return v
