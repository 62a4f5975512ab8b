"""Python entry point: `from flows.api import evaluate` runs what `frame score` runs and returns its
results.json as a `schemas.results.Results` (docs/results.md)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from schemas.results import Results
from tasks.errors import FrameInputError

__all__ = ["Results", "evaluate"]


def evaluate(
    release: str | Path,
    systems: Iterable[str] | None = None,
    metrics: Iterable[str] | None = None,
    config: str | Path | None = None,
    limit: int | None = None,
    out: str | Path | None = None,
    *,
    pairs: str = "next",
    allow_missing: bool = False,
    **options: Any,
) -> Results:
    """Score `release` like `frame score --release RELEASE [--systems ...] [--metrics ...] [--config ...]
    [--out ...] [--pairs ...] [--allow-missing]` and return the run's results.json, parsed.

    `systems` and `metrics` are names (the `--systems` / `--metrics` values); `options` are `frame
    score`'s scoring options by their Python names (judge, embedder, seed, bootstrap, max_items, ...).
    Failed generations do not raise: they are in `Results.systems` (generated k/n, first error); a bad
    input (release, config, submission) raises FrameInputError. `limit` is not supported yet (the
    `--limit` option of issue 35 point 2): any value raises FrameInputError."""
    import flows.score as score_flow
    from flows.cli.score import _check_pairs, _config_sha256, _score_plan
    from flows.settings import configure_prefect
    from tasks.score.results_file import read_results

    if limit is not None:
        raise FrameInputError("limit", "not supported by this frame yet: score the whole release")
    _check_pairs(pairs)
    rel = Path(release)
    config = Path(config) if config is not None else None
    names = ",".join(systems) if systems is not None else ""
    plan = _plan(_score_plan, rel, names, ",".join(metrics or ()), config, allow_missing, options)
    configure_prefect(plan.data_dir, plan.run.result_storage)
    resolved = rel.resolve()
    folder = Path(out) if out is not None else plan.data_dir / "scores" / resolved.parent.name / resolved.name
    args = (str(rel), plan.systems, plan.settings, plan.judge_llm, str(folder), plan.chosen)
    try:
        done = score_flow.score_release(*args, plan.run, plan.embed_llm, pairs, _config_sha256(config))
    except score_flow.UnscoredSystems as exc:  # outputs written: the failures are in the results
        done = exc.folder
    return read_results(Path(done))


def _plan(make: Any, *args: Any) -> Any:
    """`frame score`'s plan; its exit on a submission's problems (printed one per line) as an error."""
    import typer

    try:
        return make(*args, start_server=False)
    except typer.Exit as exc:
        raise FrameInputError(
            "systems", "a submission is not usable (its problems are printed above)"
        ) from exc
