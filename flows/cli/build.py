"""`frame build`, `frame rerun` and `frame refresh`: the build flow, whole, one step, or new snapshots."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from flows.cli.common import _fail, _preflight, _writing
from flows.cli.options import AllowFailedGold, BuildConfig, Domains, NoPreflight, ReleaseName
from flows.cli.running import _prefect_session, _run_build_with_progress
from flows.terminal import print_table
from tasks.errors import FrameInputError


def build_cmd(
    config: BuildConfig,
    release: ReleaseName,
    version: Annotated[str, typer.Option("--version", help="release version X.Y.Z")],
    domain: Domains = None,
    allow_partial: Annotated[
        bool, typer.Option("--allow-partial", help="write the release even if a domain failed")
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="print requests, tokens and cost per LLM role; fetch and call nothing"
        ),
    ] = False,
    reference: Annotated[
        Path | None,
        typer.Option(
            "--reference", help="--dry-run: release whose token statistics stand in for what is not built"
        ),
    ] = None,
    allow_identical: Annotated[
        bool,
        typer.Option(
            "--allow-identical",
            help="write the new version even when its tables equal the previous version's",
        ),
    ] = False,
    allow_failed_gold: AllowFailedGold = False,
    no_preflight: NoPreflight = False,
) -> None:
    """fetch -> ground -> synthesize -> instances -> release, domains in parallel, every step cached."""
    from schemas.release import release_id_problems
    from tasks.config import load_config

    try:
        for where, problem in release_id_problems(release, version):  # before any step runs (or pays)
            raise FrameInputError(where, problem)
        cfg = load_config(config)
        names = [cfg.domain(d).name for d in domain] if domain else [d.name for d in cfg.domains]
        if dry_run:
            from tasks.synthesize.estimate import estimate_build

            one = cfg.with_domains([cfg.domain(n) for n in names])
            print(
                estimate_build(
                    one, data_dir=cfg.build.data_dir, reference_release=reference
                ).render_markdown()
            )
            return
        _preflight({"llm": cfg.llm.resolved()}, no_preflight)
    except FrameInputError as exc:
        _fail(exc)
    _prefect_session(cfg)
    from flows.release import build_and_publish

    try:
        with _writing(Path(cfg.build.data_dir) / "releases" / release / version):
            allow = {"allow_partial": allow_partial, "allow_identical": allow_identical}
            allow["allow_failed_gold"] = allow_failed_gold
            out = build_and_publish(cfg, names, release, version, runner=_run_build_with_progress, **allow)
    except FrameInputError as exc:
        _fail(exc)
    for r in out["failed"]:
        print(f"frame: error: domain {r.domain}: {r.error}", file=sys.stderr)
    if out["path"] is None:
        print(
            f"frame: error: release not written: {len(out['failed'])} domain(s) failed (use --allow-partial)",
            file=sys.stderr,
        )
        raise typer.Exit(1)
    _print_stats(out["stats"])
    print(f"release: {out['path']}")
    if out["failed"]:
        raise typer.Exit(1)


def rerun_cmd(
    step: Annotated[
        str,
        typer.Argument(
            help="the step: fetch, clean, split, convert, structure, questions, outline, fill or validate"
        ),
    ],
    domain: Annotated[str, typer.Option("--domain", help="the domain")],
    snapshot: Annotated[str, typer.Option("--snapshot", help="the snapshot (period end or window label)")],
    config: BuildConfig = Path("configs/demo.toml"),
) -> None:
    """Recompute one step of one snapshot and every step that depends on it (the rest from cache)."""
    from flows.steps import all_steps, refresh_keys
    from tasks.config import load_config

    try:
        cfg = load_config(config)
        dom = cfg.domain(domain)
        if snapshot not in dom.snapshots:
            raise FrameInputError(
                "--snapshot", f"{domain} has no snapshot {snapshot!r} ({', '.join(dom.snapshots)})"
            )
        if step not in all_steps():
            raise FrameInputError("STEP", f"unknown step {step!r} (one of {', '.join(all_steps())})")
    except FrameInputError as exc:
        _fail(exc)
    keys = refresh_keys(dom, snapshot, step)
    _prefect_session(cfg)
    from tasks.locks import data_folder_lock

    try:
        with data_folder_lock(cfg.build.data_dir, cfg.run.lock_timeout_s):
            results = _run_build_with_progress(cfg, [dom.name], keys)
    except FrameInputError as exc:
        _fail(exc)
    r = results[0]
    if not r.ok:
        print(f"frame: error: domain {r.domain}: {r.error}", file=sys.stderr)
        raise typer.Exit(1)
    steps = ", ".join("/".join(k.split("|")[1:]) for k in keys)
    print(f"recomputed {dom.name}: {steps}")


def refresh_cmd(
    config: BuildConfig,
    release: ReleaseName,
    only: Annotated[
        list[str] | None, typer.Option("--only", help="discover new snapshots of these sources: edgar, arxiv")
    ] = None,
    bump: Annotated[str, typer.Option("--bump", help="version part to bump: major|minor|patch")] = "minor",
    today: Annotated[
        str | None, typer.Option("--today", help="YYYY-MM-DD: the date discovery treats as today")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print the plan, build nothing")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
) -> None:
    """Build only the snapshots newer than the latest release of NAME; write the next version."""
    import datetime as dt

    from schemas.release import release_id_problems
    from tasks.config import load_config

    try:
        for where, problem in release_id_problems(release, "0.0.0")[:1]:  # the version is computed
            raise FrameInputError(where, problem)
        cfg = load_config(config)
        if bump not in ("major", "minor", "patch"):
            raise FrameInputError("--bump", f"must be major, minor or patch (got {bump!r})")
        try:
            day = dt.date.fromisoformat(today) if today else None
        except ValueError:
            raise FrameInputError("--today", f"not a YYYY-MM-DD date: {today!r}") from None
        from flows.refresh import format_summary, plan_refresh, refresh_release, summary_json

        if dry_run:
            plan = plan_refresh(cfg, release, kinds=only, today=day, bump=bump)
            print(
                json.dumps(
                    {"version": plan.version, "new_snapshots": plan.new, "up_to_date": plan.up_to_date}
                )
            )
            return
        _prefect_session(cfg)
        with _writing(Path(cfg.build.data_dir) / "releases" / release):
            summary = refresh_release(
                cfg, release, kinds=only, today=day, bump=bump, runner=_run_build_with_progress
            )
    except FrameInputError as exc:
        _fail(exc)
    for f in summary.get("failed") or []:
        print(f"frame: error: domain {f['domain']}: {f['error']}", file=sys.stderr)
    if summary.get("stats"):
        _print_stats(summary["stats"])
    print(summary_json(summary) if as_json else format_summary(summary))
    if summary["status"] == "failed":
        print(
            "frame: error: release not written: a domain failed (the finished steps stay cached)",
            file=sys.stderr,
        )
        raise typer.Exit(1)


def _print_stats(stats: list[dict]) -> None:
    cols = ["category", "instances", "g_files_mean", "g_tokens_mean", "g_tables_mean", "g_images_mean"]
    cols += ["s_tokens_mean", "s_sections_mean", "s_tables_mean", "y_tokens_mean", "y_sections_mean"]
    cols += ["y_tables_mean"]
    columns = [(c.replace("_mean", ""), c != "category") for c in cols]
    rows = [[row.get(c, "") for c in cols] for row in stats]
    print_table("Per-category statistics (paper 000 Table 1)", columns, rows)
