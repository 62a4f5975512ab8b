"""`frame split` and `frame evolve`: a generation skill evolved on a release's splits."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from flows.cli.common import _fail, _preflight
from flows.cli.options import InstanceIds, Limit, NoPreflight, ReleaseFolder
from flows.cli.running import _run_with_bar, _start_temporary_server
from flows.cli.score import _plan_roles, _score_plan
from flows.configs import split_subsets
from flows.places import release_folder
from tasks.errors import FrameInputError


def split_cmd(
    release: ReleaseFolder,
    discovery: Annotated[int, typer.Option("--discovery", help="domains to discover failures on")] = 2,
    validation: Annotated[
        int, typer.Option("--validation", help="domains to accept or reject skills on")
    ] = 2,
    seed: Annotated[int, typer.Option("--seed", help="seed of the draw")] = 0,
) -> None:
    """Assign the release's domains to discovery, validation and locked splits (a file beside the release)."""
    import os

    from tasks.evolve.splits import assign_splits, write_splits
    from tasks.release import members

    try:
        path = release / "instances.parquet"
        if release.is_dir() and not os.path.lexists(path):
            raise FrameInputError(path, "missing: not a frame release folder")
        release_folder(release)  # only regular files inside it: nothing read through a link, no FIFO
        columns = ["instance_id", "domain", "category"]
        instances = members.read_table(release, "instances", columns=columns, required=columns).to_pandas()
        splits = assign_splits(instances, release, discovery, validation, seed)
    except FrameInputError as exc:
        _fail(exc)
    written = write_splits(release, splits)
    for name, domains in splits.domains.items():
        print(
            f"{name}: {len(splits.instances[name])} instances, {len(domains)} domains: {', '.join(domains)} "
            f"(categories: {', '.join(splits.categories[name])})"
        )
    print(f"splits: {written}")


def evolve_cmd(
    release: Annotated[Path, typer.Option("--release", help="data/releases/<name>/<version> (split first)")],
    config: Annotated[
        Path, typer.Option("--config", help="evaluation config: [systems.NAME], [judge], [evolve]")
    ],
    systems: Annotated[
        str, typer.Option("--systems", help="comma-separated configured systems to evolve for")
    ],
    rounds: Annotated[
        int | None, typer.Option("--rounds", help="most rounds (default: [evolve] rounds)")
    ] = None,
    patience: Annotated[
        int | None, typer.Option("--patience", help="stop after this many rounds without an accepted skill")
    ] = None,
    skill: Annotated[Path | None, typer.Option("--skill", help="starting skill K0 (default: empty)")] = None,
    run: Annotated[
        str | None, typer.Option("--run", help="run name (default: a digest of the setup)")
    ] = None,
    evaluate: Annotated[
        Path | None, typer.Option("--evaluate", help="a frozen skill K*: evaluate it on the locked split")
    ] = None,
    limit: Limit = None,
    instances: InstanceIds = None,
    again: Annotated[
        bool, typer.Option("--again", help="repeat a recorded locked evaluation of this skill")
    ] = False,
    no_preflight: NoPreflight = False,
) -> None:
    """Evolve a generation skill on the discovery and validation splits; --evaluate tests one on the locked
    split (once: a repeat needs --again)."""
    try:
        job, skill0 = _evolve_job(release, config, systems, skill, run, (limit, instances))
        frozen = _read_skill(evaluate, job.settings.budget_words) if evaluate is not None else None
        if frozen is not None:  # refused before any server starts (evaluate_locked checks it again)
            _refuse_repeat(job, frozen, again)
        rounds = rounds if rounds is not None else job.settings.rounds
        patience = patience if patience is not None else job.settings.patience
        if rounds < 1 or patience < 1:
            raise FrameInputError("--rounds/--patience", "must be >= 1")
        _preflight(job.roles, no_preflight)
    except FrameInputError as exc:
        _fail(exc)
    _run_evolve(job, skill0, rounds, patience, frozen, again)


def _refuse_repeat(job, frozen, again: bool) -> None:
    from flows.evolve import locked_entry_of
    from tasks.evolve.locked import refuse_repeat

    refuse_repeat(job.release, locked_entry_of(job, frozen, _locked_folder(job, frozen)), again)


def _locked_folder(job, frozen, again: bool = False) -> Path:
    """<run>/locked-<sha>; an evaluation asked for again gets a folder of its own (-2, -3, ...), so the
    record of an earlier one still names its result."""
    base = job.folder / f"locked-{frozen.sha256[:12]}"
    out, n = base, 1
    while again and out.exists():
        n += 1
        out = base.with_name(f"{base.name}-{n}")
    return out


def _read_skill(path: Path, budget_words: int | None = None):
    """The skill at `path`; one over `budget_words` is refused from its size before it is read."""
    from tasks.evolve.skill import read_skill

    try:
        return read_skill(path, budget_words)
    except (OSError, UnicodeDecodeError) as exc:
        raise FrameInputError(path, f"unreadable skill file ({exc})") from None
    except ValueError as exc:
        raise FrameInputError(path, str(exc).splitlines()[0].split(": ", 1)[-1]) from None


def _evolve_job(
    release: Path, config: Path, systems: str, skill: Path | None, run: str | None, pick: tuple = (None, None)
):
    import hashlib
    import os

    import pandas as pd

    from flows.evolve import EvolveJob, evolve_folder
    from schemas.evolve import Skill
    from tasks.evolve.splits import read_splits

    if not config.is_file():
        raise FrameInputError(config, "no such evaluation config")
    names = [s.strip() for s in systems.split(",") if s.strip()]
    if not names or "gold" in names:
        raise FrameInputError(
            "--systems", "name the report systems to evolve for (gold has no skill to learn)"
        )
    plan = _score_plan(release, ",".join(names), "", config, False, {})
    if plan.ev is None:
        raise FrameInputError(config, "not an evaluation config (no [systems], [judge], [score] or [evolve])")
    settings = plan.ev.evolve
    plan = _score_plan(release, ",".join(names), ",".join(settings.metrics), config, False, {})
    instances = pd.read_parquet(release / "instances.parquet", columns=["instance_id", "domain", "category"])
    splits = split_subsets(read_splits(release, list(instances.instance_id)), instances, *pick)
    skill0 = _read_skill(skill, settings.budget_words) if skill is not None else Skill()
    made = {n: s for n, s in plan.systems.items() if s is not None}
    domains = set(instances.domain)
    names_ = domains | {d.split("-")[0] for d in domains}
    cache_dir = Path(os.environ.get("FRAME_CACHE_DIR") or plan.data_dir / "cache")
    job = EvolveJob(
        release.resolve(), splits, made, settings, plan.settings, Path("."), cache_dir,
        plan.judge_llm, plan.embed_llm, names_,
    )  # fmt: skip
    run = run or "run-" + hashlib.sha256(job.key(skill0.sha256).encode()).hexdigest()[:10]
    job.folder = evolve_folder(release, plan.data_dir, run)
    job.data_dir = plan.data_dir
    job.run_settings = plan.run
    job.roles = _plan_roles(plan)
    return job, skill0


def _run_evolve(job, skill0, rounds: int, patience: int, frozen, again: bool = False) -> None:
    import datetime as dt

    from flows.settings import configure_prefect, route_prefect_console

    configure_prefect(job.data_dir, job.run_settings.result_storage)
    _start_temporary_server(job.data_dir)
    import flows.evolve as evolve_flow

    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    route_prefect_console(job.data_dir / "logs" / f"evolve-{stamp}.log")
    import flows.score as score_flow

    def bar(work):  # the bar follows each scoring pass; Prefect's log lines name the round
        unit = "instance x system x metric (this scoring pass)"
        poll = lambda: (score_flow.PROGRESS["done"], score_flow.PROGRESS["total"] or None)  # noqa: E731
        return _run_with_bar("evolve", unit, work, poll)

    try:
        if frozen is not None:
            out = _locked_folder(job, frozen, again)
            bar(lambda: evolve_flow.evaluate_locked(job, frozen, out, again))
            print((out / "report.md").read_text(encoding="utf-8"))
            print(f"locked evaluation: {out}")
            return
        summary = bar(lambda: evolve_flow.evolve(job, skill0, rounds, patience))
    except FrameInputError as exc:
        _fail(exc)
    except Exception as exc:
        print(f"frame: error: evolve: {str(exc).splitlines()[0] if str(exc) else repr(exc)}", file=sys.stderr)
        raise typer.Exit(1) from None
    for r in summary["rounds"]:
        verdict = "accepted" if r["accepted"] else "rejected"
        print(f"round {r['round']}: {verdict}: {r['reasons'][0]}")
    print(f"best skill ({summary['skill_words']} words): {job.folder / 'skill.md'}")
