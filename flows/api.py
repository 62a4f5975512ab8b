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
    instances: Iterable[str] | None = None,
    models: Iterable[str] | None = None,
    model_base_url: Iterable[str] | None = None,
    epochs: int = 1,
    pairs: str = "next",
    allow_missing: bool = False,
    **options: Any,
) -> Results:
    """Score `release` like `frame score --release RELEASE [--systems ...] [--metrics ...] [--config ...]
    [--limit N] [--instances ...] [--model ...] [--model-base-url ...] [--epochs K] [--out ...]
    [--pairs ...] [--allow-missing]` and return the run's results.json, parsed.

    `systems`, `metrics`, `instances`, `models` and `model_base_url` are the values of those options (one
    name per item); `options` are `frame score`'s scoring options by their Python names (judge,
    embedder, seed, bootstrap, max_items, ...). Failed generations do not raise: they are in
    `Results.systems` (generated k/n, first error); a bad input (release, config, submission) raises
    FrameInputError. With `models`, the equivalent config.toml is written beside the scores."""
    import flows.score as score_flow
    from flows.cli.models import CliModels
    from flows.cli.score import _check_pairs, _score_plan, flow_arguments
    from flows.settings import configure_prefect
    from tasks.score.results_file import read_results

    _check_pairs(pairs)
    systems, metrics, instances, models, model_base_url = (
        [x] if isinstance(x, str) else x for x in (systems, metrics, instances, models, model_base_url)
    )  # one name given as a string is that one name, not its letters
    rel = Path(release)
    config = Path(config) if config is not None else None
    names = ",".join(systems) if systems is not None else ""
    pick = (limit, ",".join(instances) if instances is not None else None)
    cli = CliModels(list(models or []), list(model_base_url or []))
    options = {**options, "epochs": epochs}
    plan = _plan(
        _score_plan, rel, names, ",".join(metrics or ()), config, allow_missing, options, cli=cli, pick=pick
    )
    configure_prefect(plan.data_dir, plan.run.result_storage)
    resolved = rel.resolve()
    folder = Path(out) if out is not None else plan.data_dir / "scores" / resolved.parent.name / resolved.name
    plan.pairs = pairs
    try:
        done = score_flow.score_release(*flow_arguments(rel, plan, folder))
    except score_flow.UnscoredSystems as exc:  # outputs written: the failures are in the results
        done = exc.folder
    return read_results(Path(done))


def _plan(make: Any, *args: Any, **kwargs: Any) -> Any:
    """`frame score`'s plan; its exit on a submission's problems (printed one per line) as an error."""
    import typer

    try:
        return make(*args, start_server=False, **kwargs)
    except typer.Exit as exc:
        raise FrameInputError(
            "systems", "a submission is not usable (its problems are printed above)"
        ) from exc
