"""`frame generate` and `frame score`: systems' reports of a release, and their scores."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from flows.cli.common import _data_folder, _fail, _preflight, _stderr_console
from flows.cli.models import (
    CONFIG_FILE,
    CONFIG_HEADER,
    PARTNER,
    CliModels,
    cli_eval_config,
    repeat_command,
    write_config,
)
from flows.cli.options import (
    EmbedderBaseUrl,
    EmbedderModel,
    InstanceIds,
    JudgeBaseUrl,
    JudgeModel,
    Limit,
    ModelArgs,
    ModelBaseUrls,
    Models,
    NoPreflight,
    ReleaseFolder,
)
from flows.cli.running import _run_with_bar, _start_temporary_server
from flows.configs import eval_or_build_config, instance_subset, missing_in_subset
from flows.places import not_in_release, release_tables
from flows.terminal import progress_bar
from tasks.errors import FrameInputError

# the systems `frame score` scores without --systems and without an evaluation config
DEFAULT_SYSTEMS = ("gold", "copy-sample", "extractive")


def _plan_roles(plan) -> dict:
    """The LLM roles of a score/evolve plan: judge, embedder, openai systems, evolve optimizer/critic."""
    roles = {"judge": plan.judge_llm, "embedder": plan.embed_llm}
    for name, system in plan.systems.items():
        roles[f"systems.{name}"] = getattr(system, "settings", None)
    if plan.ev is not None:
        roles["evolve.optimizer"] = plan.ev.evolve.optimizer
        roles["evolve.critic"] = plan.ev.evolve.critic
    return roles


# `--epochs K` (issue 35): K samples per instance of a model sampled with temperature > 0
_EpochsOpt = Annotated[
    int,
    typer.Option(
        "--epochs",
        help="samples per instance of systems with temperature > 0 (others: 1); scores are their mean",
    ),
]


def _before_run(plan, out: Path | None, no_preflight: bool) -> None:
    """What `frame score` checks once its plan is known: --out outside any release, every role's key."""
    if out is not None:
        not_in_release(out)
    _preflight(_plan_roles(plan), no_preflight)


def generate_cmd(
    release: ReleaseFolder,
    system: Annotated[
        str | None,
        typer.Option(
            "--system",
            help="copy-sample | extractive | one-shot | a [systems.NAME] of --config (optional with --model)",
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option("--config", help="evaluation config, or a build config whose [llm] one-shot uses"),
    ] = None,
    model: Models = None,
    model_base_url: ModelBaseUrls = None,
    model_arg: ModelArgs = None,
    limit: Limit = None,
    instances: InstanceIds = None,
    no_preflight: NoPreflight = False,
    epochs: _EpochsOpt = 1,
) -> None:
    """Write one generated report per instance (data/generations/<name>/<version>/<system>/)."""
    import os

    try:
        ev, llm, data_dir, _ = eval_or_build_config(config)
        release_tables(release)
        ev, names, raw = _generate_systems(CliModels(model, model_base_url, model_arg), ev, llm, system)
        subset = instance_subset(release, limit, instances)
        # beside the release's data folder (or the config's), never in the folder the command runs from
        cache_dir = Path(os.environ.get("FRAME_CACHE_DIR") or _data_folder(release, data_dir) / "cache")
        chosen = _score_systems(release, ",".join(names), ev, llm, cache_dir, False, subset)
        from tasks.generate.systems import with_epochs

        with_epochs(chosen, epochs)
        _preflight({f"systems.{n}": getattr(c, "settings", None) for n, c in chosen.items()}, no_preflight)
    except FrameInputError as exc:
        _fail(exc)
    failed = False
    for name, made in chosen.items():
        out, ok = _generate_one(release, name, made, subset)
        failed = failed or not ok
        if raw is not None:  # the flags' config, beside the reports it produced
            write_config(
                raw, out, repeat_command("generate", release, (limit, instances), f" --system {name}")
            )
    if failed:
        raise typer.Exit(1)


def _generate_systems(cli: CliModels, ev: Any, llm: Any, system: str | None):
    """(ev, the systems to generate, the raw config of the model flags or None) of `frame generate`."""
    from tasks.generate.systems import select_systems

    if system == "gold":
        raise FrameInputError("--system", "gold is the release's own target report: nothing to generate")
    if cli.stray() is not None:
        raise FrameInputError(cli.stray(), f"needs its model flag {PARTNER[cli.stray()]}")
    if cli.given():
        if ev is not None:
            raise FrameInputError(
                "--model", "not with an evaluation --config: name its [systems.NAME] with --system"
            )
        ev, raw = cli_eval_config(cli, [system] if system else [], llm, {})
        return ev, list(ev.systems), raw
    if system is None:
        raise FrameInputError("--system", "name the system to generate (or give --model openai/<model>)")
    select_systems([system], ev, llm=llm, flag="--system", exclude=("gold",))  # errors name --system
    return ev, [system], None


def _generate_one(release: Path, name: str, system: Any, subset: Any):
    """Generate and write one system's reports; (folder, whether every instance got its report)."""
    import pandas as pd

    from flows.generate import generate_all

    only = subset.ids if subset is not None else None
    total = (
        len(only)
        if only is not None
        else len(pd.read_parquet(release / "instances.parquet", columns=["instance_id"]))
    )
    with progress_bar(_stderr_console(), f"[bold]{name}[/]", elapsed=False) as progress:
        bar = progress.add_task("instances", total=total * getattr(system, "epochs", 1))
        out, made = generate_all(release, system, on_done=lambda _id: progress.advance(bar), only=only)
    failed = [g for g in made if g.error]
    for g in failed:
        print(f"frame: error: generate {name}: {g.instance_id}: {g.error.splitlines()[0]}", file=sys.stderr)
    print(f"generations: {out} ({len(made) - len(failed)} of {len(made)} report(s))")
    return out, not failed


def _score_request(release: Path, metrics: str, ev: Any, **settings: Any):
    """(metric selection, ScoreSettings) of `frame score`'s options and the evaluation config's [score]."""
    from pydantic import ValidationError

    from schemas.scoring import ScoreSettings
    from tasks.score.registry import DEFAULT, selectable

    release_tables(release)
    given = [m.strip() for m in metrics.split(",") if m.strip()] if metrics else []
    chosen = given or (list(ev.score.metrics) if ev is not None and ev.score.metrics else list(DEFAULT))
    if any(m not in selectable() for m in chosen) or len(set(chosen)) != len(chosen):
        known = ", ".join(selectable())
        where = "--metrics" if given else "score.metrics"
        raise FrameInputError(where, f"give distinct names among {known} (got {','.join(chosen)!r})")
    try:
        if ev is not None:
            return chosen, ev.score_settings(**settings)
        return chosen, ScoreSettings(**{k: v for k, v in settings.items() if v is not None})
    except ValidationError as exc:
        err = exc.errors()[0]
        raise FrameInputError(f"--{'-'.join(map(str, err['loc'])).replace('_', '-')}", err["msg"]) from None


def _score_systems(
    release: Path, systems: str, ev: Any, llm: Any, cache_dir: Path, allow_missing: bool, subset: Any = None
):
    """{name: ReportSystem, or None for gold} in the order named; submissions checked (one line per
    problem on stderr, exit 2, nothing scored): with a `subset` (tasks.select), only its instances must
    have a report."""
    from flows.generate import check_submissions, kit_withheld, systems_for
    from tasks.release import members

    names = [s.strip() for s in systems.split(",") if s.strip()] if systems else None
    if names is not None and (not names or len(set(names)) != len(names)):
        raise FrameInputError("--systems", f"give distinct, comma-separated system names (got {systems!r})")
    if names is None and ev is None:
        names = list(DEFAULT_SYSTEMS)
    # the release's folder is checked by the callers (release_tables); the two tables every system reads
    # whole (instances, grounding documents) must be readable, with their columns, within their budget
    for table in ("instances", "grounding_documents"):
        members.scan_table(release, table)
    made = systems_for(names, ev, llm, cache_dir)
    order = names if names is not None else list(ev.systems)
    ids = members.read_table(release, "instances", columns=["instance_id"]).column("instance_id").to_pylist()
    # a blind kit's withheld instances are never missing from a submission (docs/results.md)
    withheld = kit_withheld(release) if any(hasattr(s, "check") for s in made.values()) else []
    chosen = set(subset.ids) if subset is not None else None
    withheld = [w for w in withheld if chosen is None or w in chosen]
    problems = check_submissions(
        made, ids, allow_missing=allow_missing or chosen is not None, withheld=withheld
    )
    if chosen is not None and not allow_missing:
        problems += missing_in_subset(made, [i for i in subset.ids if i not in set(withheld)])
    if problems:
        for line in problems:
            print(f"frame: error: {line}", file=sys.stderr)
        raise typer.Exit(2)
    return {n: made.get(n) for n in order}


# Options of the structure node similarity (`frame score`), declared once here to keep the command short.
_GammaOpt = Annotated[float | None, typer.Option("--gamma", help="depth weighting of Algorithm 1 (0 = off)")]


_DeltaOpt = Annotated[
    float | None,
    typer.Option(
        "--delta",
        help="RBF width of the structure node similarity (default: calibrated for the embedder in "
        "the schemas folder's projection.toml, else the paper's 0.10)",
    ),
]


_TypeWeightOpt = Annotated[
    float | None,
    typer.Option("--type-weight", help="w of the structure node similarity (default: the paper's 0.2)"),
]


# Options of point 4 and 5 of issue 35 (docs/results.md), declared here to keep the command short.
_MaxFailuresOpt = Annotated[
    float,
    typer.Option(
        "--max-failures",
        help="exit 1 when a system's share of failed generations exceeds this (0..1; default 0)",
    ),
]
_PairsOpt = Annotated[
    str, typer.Option("--pairs", help="paired tests: next (each system vs the next best) | all pairs")
]


_SystemsOpt = Annotated[
    str,
    typer.Option(
        "--systems",
        help="comma-separated systems: builtins (gold, copy-sample, extractive), one-shot on [llm], or "
        "names of --config's [systems.NAME] (default: every configured system, else the builtins)",
    ),
]
_MetricsOpt = Annotated[
    str,
    typer.Option(
        "--metrics",
        help="comma-separated metric families or metrics (`frame metrics` lists them; default: the "
        "config's [score] metrics, else FRAME's three)",
    ),
]
_JudgeOpt = Annotated[
    str | None, typer.Option("--judge", help="offline | openai: who judges the LLM-judged families")
]
_EmbedderOpt = Annotated[str | None, typer.Option("--embedder", help="minilm | openai:<model>")]
_PrecisionOpt = Annotated[
    str | None,
    typer.Option(
        "--embed-precision",
        help="MiniLM forward pass: auto (bf16 where the CPU has bf16 instructions) | fp32 | bf16",
    ),
]
_TreeOpt = Annotated[
    str | None,
    typer.Option(
        "--tree",
        help="deterministic | llm structure trees (default: llm with --judge openai, else deterministic)",
    ),
]
_MaxItemsOpt = Annotated[int | None, typer.Option("--max-items", help="units / claims sampled per report")]
_SeedOpt = Annotated[int | None, typer.Option("--seed", help="sampling and bootstrap seed")]
_BootstrapOpt = Annotated[int | None, typer.Option("--bootstrap", help="bootstrap resamples for the CIs")]
_ScoreConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="evaluation config ([systems.NAME], [judge], [embedder], [score]) or a build "
        "config whose [llm] judges",
    ),
]
_AllowMissingOpt = Annotated[
    bool, typer.Option("--allow-missing", help="score a submission's reports even if some are missing")
]
_DryRunOpt = Annotated[
    bool, typer.Option("--dry-run", help="print requests, tokens and cost per role and system; call nothing")
]
_OutOpt = Annotated[Path | None, typer.Option("--out", help="output folder (default data/scores/...)")]


def _check_pairs(pairs: str, max_failures: float = 0.0) -> None:
    """--pairs and --max-failures (checked here, not by typer: a range would split the help's text)."""
    if pairs not in ("next", "all"):
        raise FrameInputError("--pairs", f"give next or all (got {pairs!r})")
    if not 0.0 <= max_failures <= 1.0:
        raise FrameInputError("--max-failures", f"give a share between 0 and 1 (got {max_failures})")


def score_cmd(
    release: ReleaseFolder,
    systems: _SystemsOpt = "",
    metrics: _MetricsOpt = "",
    judge: _JudgeOpt = None,
    embedder: _EmbedderOpt = None,
    embed_precision: _PrecisionOpt = None,
    tree: _TreeOpt = None,
    max_items: _MaxItemsOpt = None,
    seed: _SeedOpt = None,
    bootstrap: _BootstrapOpt = None,
    gamma: _GammaOpt = None,
    delta: _DeltaOpt = None,
    type_weight: _TypeWeightOpt = None,
    config: _ScoreConfigOpt = None,
    model: Models = None,
    model_base_url: ModelBaseUrls = None,
    model_arg: ModelArgs = None,
    judge_model: JudgeModel = None,
    judge_base_url: JudgeBaseUrl = None,
    embedder_model: EmbedderModel = None,
    embedder_base_url: EmbedderBaseUrl = None,
    limit: Limit = None,
    instances: InstanceIds = None,
    allow_missing: _AllowMissingOpt = False,
    dry_run: _DryRunOpt = False,
    out: _OutOpt = None,
    no_preflight: NoPreflight = False,
    max_failures: _MaxFailuresOpt = 0.0,
    pairs: _PairsOpt = "next",
    epochs: _EpochsOpt = 1,
) -> None:
    """Score generated reports with metric families (default: FRAME's three); leaderboard with CIs; plots."""
    try:
        _check_pairs(pairs, max_failures)
        options = {"judge": judge, "embedder": embedder, "tree": tree, "max_items": max_items}
        options |= {"embed_precision": embed_precision, "seed": seed, "bootstrap": bootstrap, "gamma": gamma}
        options |= {"delta": delta, "type_weight": type_weight, "epochs": epochs}
        cli = CliModels(
            model, model_base_url, model_arg, judge_model, judge_base_url, embedder_model, embedder_base_url
        )
        plan = _score_plan(
            release, systems, metrics, config, allow_missing, options, start_server=not dry_run,
            cli=cli, pick=(limit, instances),
        )  # fmt: skip
        if dry_run:
            _print_score_estimate(release, plan)
            return
        _before_run(plan, out, no_preflight)
    except FrameInputError as exc:
        _fail(exc)
    plan.pairs, plan.max_failures = pairs, max_failures
    _run_score(release, plan, out)


def flow_arguments(release: Path, plan: Any, out: Path) -> tuple:
    """score_release's arguments for a plan (`_score_plan`, with `pairs` set) scored into `out`; writes
    the flags' config.toml there first (its digest is then the run's)."""
    _write_run_config(release, plan, out)
    subset = plan.subset.record() if plan.subset is not None else None
    return (
        str(release), plan.systems, plan.settings, plan.judge_llm, str(out), plan.chosen, plan.run,
        plan.embed_llm, plan.pairs, plan.config_sha256, subset,
    )  # fmt: skip


def _write_run_config(release: Path, plan: Any, out: Path) -> None:
    """The flags' config.toml beside the scores it produced, its digest the run's config digest (the same
    as a repeat's from it); an earlier run's flags config in `out` that this run did not use is removed."""
    import hashlib

    written = out / CONFIG_FILE
    if plan.written is None:
        if (
            written.is_file()
            and written != plan.config_path
            and written.read_text(errors="replace").startswith(CONFIG_HEADER)
        ):
            written.unlink()
        return
    extra = f" --epochs {plan.epochs}" if plan.epochs > 1 else ""
    extra += " --pairs all" if plan.pairs == "all" else ""
    path = write_config(plan.written, out, repeat_command("score", release, plan.pick, extra))
    plan.config_sha256 = hashlib.sha256(path.read_bytes()).hexdigest()


def _config_sha256(config: Path | None) -> str | None:
    """sha256 of the evaluation config file's bytes (None without one: results.json then digests the
    run's request)."""
    import hashlib

    return hashlib.sha256(config.read_bytes()).hexdigest() if config is not None else None


def _cli_config(cli: CliModels | None, ev: Any, llm: Any, systems: str, metrics: str, options: dict):
    """(ev, systems, metrics, the raw config to write or None): the flags' config when a model flag is
    given (flows.cli.models), else what --config said, unchanged."""
    if cli is not None and cli.stray() is not None:
        raise FrameInputError(cli.stray(), f"needs its model flag {PARTNER[cli.stray()]}")
    if cli is None or not cli.given():
        return ev, systems, metrics, None
    if ev is not None:
        raise FrameInputError(
            "--model", "not with an evaluation --config: name its [systems.NAME], or drop --config"
        )
    if (options.get("embedder") or "minilm") != "minilm":
        raise FrameInputError(
            "--embedder", "with --model, name the embedder with --embedder-model openai/<m>"
        )
    names = [s.strip() for s in systems.split(",") if s.strip()] if systems else list(DEFAULT_SYSTEMS)
    score = {k: options.get(k) for k in ("max_items", "seed", "bootstrap", "tree", "delta", "type_weight")}
    score |= {"gamma": options.get("gamma"), "embed_precision": options.get("embed_precision")}
    score["metrics"] = [m.strip() for m in metrics.split(",") if m.strip()] if metrics else None
    ev, raw = cli_eval_config(cli, names, llm, score, options.get("judge"))
    return ev, "", "", raw


def _score_plan(
    release: Path,
    systems: str,
    metrics: str,
    config: Path | None,
    allow_missing: bool,
    options,
    start_server: bool = False,
    cli: CliModels | None = None,
    pick: tuple[int | None, str | None] = (None, None),
):
    """Everything `frame score` resolves before it runs: config, metrics, settings, roles, systems, the
    instance subset (--limit / --instances). `start_server`: start Prefect's temporary server as soon as
    the data folder is known (flows.server). `options["epochs"]`: samples per instance of the systems
    sampled with a temperature (--epochs)."""
    import os
    from types import SimpleNamespace

    from tasks.generate.systems import with_epochs

    options = dict(options)
    epochs = options.pop("epochs", 1)

    ev, llm, data_dir, run = eval_or_build_config(config)
    ev, systems, metrics, raw = _cli_config(cli, ev, llm, systems, metrics, options)
    data_dir = _data_folder(release, data_dir)
    subset = instance_subset(release, *pick)
    if start_server:
        from flows.settings import configure_prefect

        configure_prefect(data_dir, run.result_storage)
        _start_temporary_server(data_dir)
    chosen, settings = _score_request(release, metrics, ev, **options)
    judge_llm = ev.judge_settings() if ev is not None and ev.judge is not None else llm
    if judge_llm is not None and judge_llm.backend != "openai":
        judge_llm = None
    cache_dir = Path(os.environ.get("FRAME_CACHE_DIR") or data_dir / "cache")
    named = with_epochs(_score_systems(release, systems, ev, llm, cache_dir, allow_missing, subset), epochs)
    return SimpleNamespace(
        ev=ev, chosen=chosen, settings=settings, judge_llm=judge_llm, data_dir=data_dir, run=run,
        embed_llm=ev.embedder_settings() if ev is not None else None, systems=named, subset=subset,
        written=raw, pick=pick, epochs=epochs, config_sha256=_config_sha256(config),
        config_path=config.resolve() if config is not None else None,
    )  # fmt: skip


def _print_score_estimate(release: Path, plan) -> None:
    from flows.generate import ESTIMATE_GENERATORS
    from tasks.score.estimate import estimate_score

    cfgs = {n: (getattr(s, "config", None) if s is not None else None) for n, s in plan.systems.items()}
    est = estimate_score(
        release,
        cfgs,
        plan.judge_llm,
        plan.chosen,
        plan.settings,
        prices=plan.ev.prices if plan.ev is not None else None,
        generators=ESTIMATE_GENERATORS,
        only=plan.subset.ids if plan.subset is not None else None,
    )
    print(est.render_markdown())


def _run_score(release: Path, plan, out: Path | None) -> None:
    import datetime as dt
    import time

    from flows.settings import configure_prefect, route_prefect_console

    configure_prefect(plan.data_dir, plan.run.result_storage)
    import flows.score as score_flow

    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    route_prefect_console(plan.data_dir / "logs" / f"score-{stamp}.log")
    _start_temporary_server(plan.data_dir)
    started = time.time()
    rel = release.resolve()
    out = out or plan.data_dir / "scores" / rel.parent.name / rel.name
    args = flow_arguments(release, plan, Path(out))
    try:
        result = _run_with_bar(
            "score",
            "instance x system x metric",
            lambda: score_flow.score_release(*args),
            lambda: (score_flow.PROGRESS["done"], score_flow.PROGRESS["total"] or None),
            server_first=False,  # score_release starts loading MiniLM, then waits for the server
        )
    except FrameInputError as exc:
        _fail(exc)
    except score_flow.UnscoredSystems as exc:  # outputs written; a requested system produced nothing
        result = exc.folder
    except Exception as exc:
        print(f"frame: error: score: {str(exc).splitlines()[0] if str(exc) else repr(exc)}", file=sys.stderr)
        raise typer.Exit(1) from None
    _print_score_outputs(Path(str(result)), started)
    _end_on_failures(Path(str(result)), plan.max_failures)


def _end_on_failures(folder: Path, max_failures: float) -> None:
    """One line per system with failed generations (an error when its failure share exceeds
    `max_failures`, else a warning); exit 1 after them when any exceeds it."""
    from tasks.score.unscored import failed_systems, summary_line

    summary = json.loads((folder / "manifest.json").read_text(encoding="utf-8")).get("generation", {})
    over = failed_systems(summary, max_failures)
    for name, g in summary.items():
        if g.get("failed"):
            level = "error" if name in over else "warning"
            print(f"frame: {level}: {summary_line(name, g)}", file=sys.stderr)
    if over:
        raise typer.Exit(1)


def _print_score_outputs(folder: Path, started: float) -> None:
    """The leaderboard, one warning per failed generation, and where the scores are."""
    import time

    print((folder / "leaderboard.md").read_text(encoding="utf-8"))
    failed = json.loads((folder / "manifest.json").read_text(encoding="utf-8")).get("generation_failures", [])
    for f in failed:  # recorded, not fatal: the other instances and systems were scored
        line = f"frame: warning: {f['system']}: {f['instance_id']}: generation failed: {f['error']}"
        print(line.splitlines()[0], file=sys.stderr)
    print(f"scores: {folder} ({time.time() - started:.1f} s)")
