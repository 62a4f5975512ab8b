"""results.json: what one scoring run found, as data (docs/results.md). Written by every `frame score`
run beside leaderboard.md, and returned by `flows.api.evaluate`. A number here is the same number as in
leaderboard.csv / paired_tests.csv (there rounded to 6 decimals); an undefined one (NaN there) is null.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from schemas.scoring import ScoreSettings

__all__ = [
    "RESULTS_SCHEMA_VERSION",
    "Results",
    "ResultsCell",
    "ResultsCommon",
    "ResultsMetric",
    "ResultsPaired",
    "ResultsScope",
    "ResultsSystem",
    "ResultsVersions",
]

# Bump on any change a reader must know of (a field renamed, removed or given a new meaning); adding an
# optional field keeps the version.
RESULTS_SCHEMA_VERSION = 1


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ResultsSystem(_Shape):
    """A system asked for: who it is and how many reports it produced ("generated k/n")."""

    name: str
    kind: str  # builtin | openai | command | submission
    identity: dict[str, Any]  # what keys its generations (model, program digest, submission digest...)
    instances: int  # n: the instances asked of it (a kit submission's withheld ones left out)
    generated: int  # k: reports produced
    failed: int
    failed_samples: int = 0  # `--epochs`: failed samples of any epoch (`failed` counts instances' first)
    withheld: int = 0  # instances a blind kit withholds, never asked of this submission
    first_instance: str | None = None  # of its first failed generation
    first_error: str | None = None
    baseline: bool = False  # a builtin non-LLM reference (copy-sample, extractive)
    reference: bool = False  # gold: the ceiling, never ranked


class ResultsMetric(_Shape):
    name: str
    direction: Literal["higher", "lower"]  # which way is better
    range: tuple[float, float]  # the values' bounds


class ResultsScope(_Shape):
    """ "overall", a category, or "skipped_periods"; `instances`: in the scope, on the common set."""

    name: str
    label: str
    instances: int


class ResultsCell(_Shape):
    """One system x scope x metric (metric "frame_score": the composite primary score) over the common
    instances, and the system's own mean over all its instances."""

    system: str
    scope: str
    metric: str
    n: int  # defined values on the common instances
    n_undefined: int | None = None
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    own_n: int | None = None
    own_mean: float | None = None


class ResultsPaired(_Shape):
    """One paired test, overall scope: `system` minus `versus` over the instances both have defined."""

    metric: str
    rank: int
    system: str
    versus: str
    n: int
    mean_diff: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    p_holm: float | None  # Holm-adjusted over the pairs of the metric


class ResultsCommon(_Shape):
    """The instances the ranking is over: those every scored system has a score for."""

    instances: int
    of: int
    left_out: list[str]


class ResultsVersions(_Shape):
    frame: str  # the frame package's version
    release: str  # "<name>/<version>"
    release_manifest_sha256: str | None
    scoring_code: dict[str, str]  # family -> code digest


class Results(_Shape):
    schema_version: int = RESULTS_SCHEMA_VERSION
    release: str
    systems: list[ResultsSystem]  # in the order asked for
    metrics: list[ResultsMetric]
    scopes: list[ResultsScope]
    primary: dict[str, Any]  # {label, metrics, composite, method}: what orders the board
    order: list[str]  # the board's systems, best first (gold first)
    cells: list[ResultsCell]
    common: ResultsCommon
    pairs: Literal["next", "all"]
    paired: list[ResultsPaired]
    settings: ScoreSettings
    bootstrap: dict[str, Any]  # {method, confidence, n_resamples, seed}
    judges: dict[str, Any]  # the judge and embedder roles' identity
    versions: ResultsVersions
    config_sha256: str  # of the evaluation config file used, else of the run's request (docs/results.md)
    started_at: str  # UTC, ISO 8601
    scored_at: str
    # a --limit / --instances run: {instance_ids, n, of, limit, named, note, rule}; None = every instance
    subset: dict[str, Any] | None = None
    # `--epochs`: per system and metric {system, metric, samples, n, mean, ci_low, ci_high,
    # sampling_variance}; empty when every system was sampled once
    sampling: list[dict[str, Any]] = []
