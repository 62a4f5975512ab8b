"""The `frame` command line (typer).

Bad input ends with exit code 2 and one line on stderr naming the file/field and the problem.
Prefect is imported only by the commands that run flows, so `frame ground` starts fast.
"""

from __future__ import annotations

import json
import re
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from flows.configs import eval_or_build_config
from flows.meta import meta_app
from flows.places import not_in_release, release_folder, release_tables
from flows.terminal import FrameTyper, print_table, progress_bar
from tasks import ast_guard
from tasks.errors import FrameInputError

app = FrameTyper(no_args_is_help=True, add_completion=False, help="frame: FRAME benchmark builder.")
qa_app = FrameTyper(no_args_is_help=True, help="Construction quality checks.")
app.add_typer(qa_app, name="qa")
app.add_typer(meta_app, name="meta")


def _stderr_console() -> Any:
    """The rich console the progress bars draw on (stderr); rich is imported by the commands that draw."""
    from rich.console import Console

    return Console(stderr=True)


def _fail(exc: FrameInputError) -> None:
    # One line, no traceback: the message already names the file and the problem.
    print(f"frame: error: {exc}".replace("\n", " "), file=sys.stderr)
    raise typer.Exit(2)


@contextmanager
def _writing(target: Path):
    """Name `target` in a file-system fault that names no path (a full disk while writing, say), so the
    error boundary in `main` can say where it happened."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            exc.filename = str(target)
        raise


def _output_folder(out: Path) -> Path:
    """`--out` of a command that replaces a whole folder: never the working folder or one above it."""
    try:
        here, there = Path.cwd().resolve(), out.resolve()
    except OSError as exc:
        raise FrameInputError(out, exc.strerror or "unusable path") from None
    if not there.name or there == here or there in here.parents:
        raise FrameInputError("--out", f"{out} is the working folder or one above it: name a folder to write")
    if there.exists() and not there.is_dir():
        raise FrameInputError("--out", f"{out} is a file, not a folder")
    return out


NoPreflight = Annotated[
    bool,
    typer.Option(
        "--no-preflight",
        help="skip the one request per LLM endpoint that checks it answers (keys still checked)",
    ),
]


def _preflight(roles: dict, no_preflight: bool) -> None:
    """Every LLM role's key is set and (unless --no-preflight) its endpoint answers, before any step."""
    from tasks.llm.preflight import preflight

    preflight({k: v for k, v in roles.items() if v is not None}, reach=not no_preflight)


def _plan_roles(plan) -> dict:
    """The LLM roles of a score/evolve plan: judge, embedder, openai systems, evolve optimizer/critic."""
    roles = {"judge": plan.judge_llm, "embedder": plan.embed_llm}
    for name, system in plan.systems.items():
        roles[f"systems.{name}"] = getattr(system, "settings", None)
    if plan.ev is not None:
        roles["evolve.optimizer"] = plan.ev.evolve.optimizer
        roles["evolve.critic"] = plan.ev.evolve.critic
    return roles


def _before_run(plan, out: Path | None, no_preflight: bool) -> None:
    """What `frame score` checks once its plan is known: --out outside any release, every role's key."""
    if out is not None:
        not_in_release(out)
    _preflight(_plan_roles(plan), no_preflight)


def _read_input(path: Path) -> bytes:
    if not path.exists():
        raise FrameInputError(path, "no such file")
    if not path.is_file():
        raise FrameInputError(path, "not a file")
    return path.read_bytes()


@app.command()
def ground(
    path: Annotated[Path, typer.Argument(help="raw iXBRL filing or arXiv LaTeXML HTML")],
    out: Annotated[Path, typer.Option("--out", help="output folder (replaced atomically)")],
    kind: Annotated[
        str | None, typer.Option(help="source kind, e.g. edgar|arxiv (detected if omitted)")
    ] = None,
    form: Annotated[str | None, typer.Option(help="expected form, e.g. 10-Q (filings)")] = None,
) -> None:
    """Turn one raw source into Markdown grounding documents + documents.json (+ facts.parquet)."""
    from tasks.ground.documents import write_grounding
    from tasks.sources import ground_source, source_kind

    try:
        if kind is not None:
            source_kind(kind, "--kind")  # a kind nobody registered: one line naming the known ones
        _output_folder(out)
        data = _read_input(path)
        # errors name the path given; the documents record only the file name (no machine path)
        result = ground_source(
            data,
            str(path),
            kind=kind,  # type: ignore[arg-type]
            expected_form=form,
            source_ref=path.name,
        )
        with _writing(out):
            write_grounding(result, out)
    except FrameInputError as exc:
        _fail(exc)
    tokens = sum(d.tokens for d in result.documents)
    tables = sum(d.tables for d in result.documents)
    facts = f", {len(result.facts)} facts" if result.facts is not None else ""
    print(f"{out}: {len(result.documents)} documents, {tables} tables, {tokens} tokens{facts}")


@qa_app.command("ground")
def qa_ground_cmd(
    path: Annotated[Path, typer.Argument(help="the raw source that was grounded")],
    out_dir: Annotated[Path, typer.Argument(help="the grounding folder written by `frame ground`")],
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    kind: Annotated[
        str | None, typer.Option(help="source kind, e.g. edgar|arxiv (detected if omitted)")
    ] = None,
) -> None:
    """Construction QA: fact recall, table counts, mean TEDS, visible text kept."""
    from tasks.sources import qa_ground

    try:
        _read_input(path)
        figures = qa_ground(path, out_dir, kind)
    except FrameInputError as exc:
        _fail(exc)
    if as_json:
        print(json.dumps(figures, indent=2))
        return
    print_table(f"QA {path.name}", [("figure", False), ("value", True)], [(k, v) for k, v in figures.items()])


@qa_app.command("gold")
def qa_gold_cmd(
    release: Annotated[Path, typer.Option("--release", help="data/releases/<name>/<version>")],
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Gold report headings that name an earlier snapshot's period (exit 1 when any)."""
    from dataclasses import asdict

    from tasks.release.qa import check_gold

    try:
        release_folder(release)
        found = check_gold(release)
    except FrameInputError as exc:
        _fail(exc)
    if as_json:
        print(json.dumps([asdict(f) for f in found], indent=2))
    elif found:
        columns = [("domain", False), ("snapshot", False), ("names", False), ("heading", False)]
        rows = [(f.domain, f.snapshot, f"{f.names} ({f.which})", f.heading) for f in found]
        print_table("Gold headings naming an earlier period", columns, rows, keys=2)
    if not as_json:
        print(f"{release}: {f'{len(found)} stale heading(s)' if found else 'ok'}")
    raise typer.Exit(1 if found else 0)


@app.command("ground-domains")
def ground_domains(
    config: Annotated[Path, typer.Option("--config", help="TOML build config")],
    domain: Annotated[list[str] | None, typer.Option("--domain", help="only these domains")] = None,
) -> None:
    """Fetch and ground every snapshot of every domain (Prefect flow; cached, resumable)."""
    from tasks.config import load_config

    try:
        cfg = load_config(config)
        selected = [cfg.domain(d).name for d in domain] if domain else [d.name for d in cfg.domains]
    except FrameInputError as exc:
        _fail(exc)
    from flows.settings import configure_prefect

    configure_prefect(cfg.build.data_dir)
    _start_temporary_server(cfg.build.data_dir)
    import datetime as dt

    from flows.ground import run_domains
    from flows.server import temporary_server_ready
    from flows.settings import route_prefect_console

    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    route_prefect_console(cfg.build.data_dir / "logs" / f"ground-{stamp}.log")

    with progress_bar(_stderr_console(), "[bold]ground[/]", "{task.description}") as progress:
        bar = progress.add_task(selected[0], total=len(selected))

        def done(row) -> None:
            nxt = selected[min(progress.tasks[0].completed + 1, len(selected) - 1)]
            progress.update(bar, advance=1, description=f"{row.domain} {row.status} -> {nxt}")

        temporary_server_ready()
        summary = run_domains(cfg, selected, on_done=done)
    _print_summary(summary)
    failed = [s for s in summary if not s.ok]
    for s in failed:
        print(f"frame: error: domain {s.domain}: {s.error}", file=sys.stderr)
    if failed:
        # 2 = bad input (a file or field named in the message); 1 = anything else failed.
        raise typer.Exit(2 if all(s.input_error for s in failed) else 1)


release_app = FrameTyper(no_args_is_help=True, help="Versioned parquet releases.")
app.add_typer(release_app, name="release")


def _prefect_session(cfg) -> None:
    import datetime as dt

    from flows.settings import configure_prefect, route_prefect_console

    configure_prefect(cfg.build.data_dir, cfg.run.result_storage)
    _start_temporary_server(cfg.build.data_dir)
    import flows.build  # noqa: F401  (imports Prefect, which sets up the logging re-routed below)

    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    route_prefect_console(cfg.build.data_dir / "logs" / f"build-{stamp}.log")


_STANDALONE = False  # set by main(): only a `frame` process of its own starts Prefect's server early


def _start_temporary_server(data_dir: Path) -> None:
    """Start Prefect's temporary server now (unless an API is configured), so that it comes up while the
    command imports and plans; `_run_with_bar` waits for it before the flow runs. Only in a `frame`
    process: a command invoked in-process (tests, notebooks) leaves the host's environment alone."""
    if not _STANDALONE:
        return
    from flows.server import start_temporary_server

    start_temporary_server(data_dir)


def _run_with_bar(label: str, unit: str, work, poll, *, server_first: bool = True) -> object:
    """Run `work()` (a flow) in a worker thread while a rich bar shows `poll() -> (done, total|None)`;
    returns its result or re-raises its exception here, in the main thread. `server_first`: wait for the
    command's early Prefect server before `work()` (False: `work` waits for it itself)."""
    import threading

    box: dict = {}

    def run() -> None:
        try:
            if server_first:
                from flows.server import temporary_server_ready

                temporary_server_ready()  # started early by the command (flows.server), if at all
            box["result"] = work()
        except BaseException as exc:  # surfaced below, in the main thread
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    # On a terminal the bar is drawn on stderr and log lines print above it; elsewhere only the logs.
    with progress_bar(_stderr_console(), f"[bold]{label}[/]", unit.replace("[", "\\[")) as progress:
        bar = progress.add_task(unit, total=None)
        while worker.is_alive():
            worker.join(0.5)
            done, total = poll()
            progress.update(bar, completed=done, total=total)
    if "error" in box:
        raise box["error"]
    return box["result"]


def _run_build_with_progress(
    cfg, names: list[str], refresh: list[str], *, release: str | None = None, version: str | None = None
) -> list[dict]:
    """Run the build flow; the bar counts the snapshots finished, cached or computed (flows.build's
    PROGRESS; without it, the gold reports written since the start, which misses cached ones)."""
    import time

    import flows.build as build_flow

    total = sum(len(cfg.domain(n).snapshots) for n in names)
    reports = cfg.build.data_dir / "reports"
    start = time.time()
    counter = getattr(build_flow, "PROGRESS", None)
    if isinstance(counter, dict):
        counter.update(done=0, total=0)  # a bar of this build only, not a count left by the last one

    def poll() -> tuple[int, int]:
        if isinstance(counter, dict):
            return counter.get("done", 0), counter.get("total") or total
        done = sum(
            1
            for n in names
            for t in cfg.domain(n).snapshots
            if (reports / n / t / "report.md").is_file()
            and (reports / n / t / "report.md").stat().st_mtime >= start
        )
        return done, total

    work = lambda: build_flow.run_build(cfg, names, refresh, release=release, version=version)  # noqa: E731
    return _run_with_bar("build", "snapshots", work, poll)  # type: ignore[return-value]


@app.command("build")
def build_cmd(
    config: Annotated[Path, typer.Option("--config", help="TOML build config")],
    release: Annotated[str, typer.Option("--release", help="release name")],
    version: Annotated[str, typer.Option("--version", help="release version X.Y.Z")],
    domain: Annotated[list[str] | None, typer.Option("--domain", help="only these domains")] = None,
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
            out = build_and_publish(
                cfg,
                names,
                release,
                version,
                allow_partial=allow_partial,
                runner=_run_build_with_progress,
                allow_identical=allow_identical,
            )
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


@app.command("rerun")
def rerun_cmd(
    step: Annotated[
        str,
        typer.Argument(
            help="the step: fetch, clean, split, convert, structure, questions, outline, fill or validate"
        ),
    ],
    domain: Annotated[str, typer.Option("--domain", help="the domain")],
    snapshot: Annotated[str, typer.Option("--snapshot", help="the snapshot (period end or window label)")],
    config: Annotated[Path, typer.Option("--config", help="TOML build config")] = Path("configs/demo.toml"),
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


@app.command("refresh")
def refresh_cmd(
    config: Annotated[Path, typer.Option("--config", help="TOML build config")],
    release: Annotated[str, typer.Option("--release", help="release name")],
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


@app.command("status")
def status_cmd(
    config: Annotated[
        Path | None, typer.Option("--config", help="TOML build config (its data folder)")
    ] = None,
    data: Annotated[Path | None, typer.Option("--data", help="data folder (default: data)")] = None,
    show_all: Annotated[bool, typer.Option("--all", help="one row per step, not per domain")] = False,
    failed: Annotated[bool, typer.Option("--failed", help="only the steps and domains that failed")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the whole run record as JSON")] = False,
) -> None:
    """The last build: per domain, steps computed / cached / failed, tokens, cost and the last error
    (--all: every step with its wall time and LLM calls; --failed: only what failed)."""
    from flows.observe import latest_run

    try:
        if show_all and failed:
            raise FrameInputError("--all/--failed", "give one of them")
        if config is not None:
            from tasks.config import load_config

            data_dir = load_config(config).build.data_dir
        else:
            data_dir = data or Path("data")
    except FrameInputError as exc:
        _fail(exc)
    try:
        run = latest_run(data_dir)
        if run is not None and not isinstance(run, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:  # a truncated or hand-edited run record
        where = Path(data_dir) / "runs" / "latest.json"
        _fail(FrameInputError(where, f"not a run record ({str(exc).splitlines()[0]}); rebuild to rewrite it"))
    if run is None:
        print(f"frame: error: {data_dir}: no build has run in this data folder yet", file=sys.stderr)
        raise typer.Exit(1)
    if as_json:
        print(json.dumps(run, indent=1, sort_keys=True))
        return
    try:
        _print_status(run, "all" if show_all else "failed" if failed else "domains")
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        where = Path(data_dir) / "runs" / "latest.json"
        _fail(FrameInputError(where, f"not a run record (bad or missing field {exc}); rebuild to rewrite it"))


def _cost(v: float | None) -> str:
    return "n/a" if v is None else f"${v:.4f}"


DOMAIN_COLUMNS = [("domain", False), ("snapshots", True), ("computed", True), ("cached", True)]
DOMAIN_COLUMNS += [("failed", True), ("tokens", True), ("cost", True)]


def _domain_rows(run: dict) -> tuple[list[tuple], list[str]]:
    """One row per domain of the run (DOMAIN_COLUMNS: snapshots, steps computed / cached / failed,
    tokens, cost: flows.observe.domain_rows, as in the build's Prefect artifact), and the lines to print
    below it: the snapshots a domain computed when others came from the cache, and its last error."""
    from rich.markup import escape
    from rich.text import Text

    from flows.observe import domain_rows

    errors = {d["domain"]: d.get("error") or "failed" for d in run["domains"] if d["status"] != "ok"}
    rows, notes = [], []
    for r in domain_rows(run):
        name = r["domain"]
        mine = [s for s in run["steps"] if s["domain"] == name]
        snapshots = list(dict.fromkeys(s["snapshot"] for s in mine))
        ran_in = [t for t in snapshots if any(s["snapshot"] == t and s["status"] == "ran" for s in mine)]
        if ran_in and len(ran_in) < len(snapshots):
            rest = f"the other {len(snapshots) - len(ran_in)} from the cache"
            notes.append(f"computed {escape(name)}: {escape(', '.join(ran_in))} ({rest})")
        failed = [s for s in mine if s["status"] == "failed"]
        if failed and name not in errors:
            errors[name] = f"{failed[-1]['snapshot']} {failed[-1]['step']}: {failed[-1]['error']}"
        if name in errors:
            notes.append(f"[red]last error[/] {escape(name)}: {escape(str(errors[name]))}")
        cost = r["cost_usd"]
        rows.append(
            (
                name,
                r["snapshots"],
                Text(str(r["computed"]), style="green" if r["computed"] else ""),
                r["cached"],
                Text(str(r["failed"]), style="red" if r["failed"] else ""),
                f"{r['prompt_tokens'] + r['completion_tokens']:,}",
                _cost(0.0 if cost is None and run.get("backend") == "offline" else cost),
            )
        )
    return rows, notes


def _step_rows(steps: list[dict]) -> list[tuple]:
    from rich.text import Text

    colour = {"ran": "green", "cached": "dim", "failed": "red"}
    return [
        (
            s["domain"],
            s["snapshot"],
            s["step"],
            Text(s["status"], style=colour.get(s["status"], "")),
            f"{s['wall_s']:.2f}",
            s["llm_calls"],
            s["llm_cache_hits"],
            f"{s['prompt_tokens'] + s['completion_tokens']:,}",
            _cost(s["cost_usd"]),
        )
        for s in steps
    ]


STEP_COLUMNS = [("domain", False), ("snapshot", False), ("step", False), ("status", False)] + [
    (c, True) for c in ("wall s", "LLM calls", "hits", "tokens", "cost")
]


def _print_status(run: dict, view: str = "domains") -> None:
    """`frame status`: view "domains" (one row per domain), "all" (one per step) or "failed"."""
    from rich.markup import escape

    from flows.terminal import stdout_console

    out = stdout_console()
    if "in_progress" in run:
        p = run["in_progress"]
        out.print(
            f"[yellow]a build started {p['started_at']} (pid {p['pid']}) is running or was interrupted: "
            f"{len(p['steps'])} step(s) logged[/]"
        )
    if "steps" not in run:
        return
    t = run["totals"]
    out.print(
        f"last {run['kind']} [bold]{run['status']}[/] at {run['finished_at']}, {run['wall_s']:.1f} s; "
        f"backend {escape(str(run['backend']))} ({escape(str(run['model']))}); steps computed "
        f"{t['steps_ran']}, cached {t['steps_cached']}, failed {t['steps_failed']}; LLM calls "
        f"{t['llm_calls']} (cache hits {t['llm_cache_hits']}), tokens "
        f"{t['prompt_tokens'] + t['completion_tokens']:,}, cost " + _cost(t["cost_usd"]),
        highlight=False,
    )
    if view == "domains":
        rows, notes = _domain_rows(run)
        keep = range(len(DOMAIN_COLUMNS))
        if all(r[5] == "0" for r in rows):  # no LLM traffic (offline): the first line says it, room saved
            keep = [i for i, (c, _) in enumerate(DOMAIN_COLUMNS) if c not in ("tokens", "cost")]
        columns = [DOMAIN_COLUMNS[i] for i in keep]
        print_table(None, columns, [[r[i] for i in keep] for r in rows], console=out)
        for line in notes:  # below the table: read whole, not folded into a narrow column
            out.print(line)
        return
    steps = run["steps"] if view == "all" else [s for s in run["steps"] if s["status"] == "failed"]
    if steps:
        print_table(None, STEP_COLUMNS, _step_rows(steps), keys=3, console=out)
    for d in run["domains"]:
        if d["status"] != "ok":
            out.print(f"[red]failed[/] {escape(d['domain'])}: {escape(str(d['error']))}")
    for s in run["steps"]:
        if s["status"] == "failed":
            out.print(
                f"[red]failed step[/] {escape(s['domain'])} {escape(s['snapshot'])} {s['step']}: "
                + escape(str(s["error"]))
            )
    if view == "failed" and not steps and all(d["status"] == "ok" for d in run["domains"]):
        out.print("nothing failed")


server_app = FrameTyper(no_args_is_help=True, help="A background Prefect server for a data folder.")
app.add_typer(server_app, name="server")

DataOption = Annotated[Path | None, typer.Option("--data", help="data folder (default: data)")]
ConfigOption = Annotated[Path | None, typer.Option("--config", help="TOML build config (its data folder)")]


def _data_dir_of(config: Path | None, data: Path | None) -> Path:
    if config is not None:
        from tasks.config import load_config

        return Path(load_config(config).build.data_dir)
    return data or Path("data")


@server_app.command("start")
def server_start(config: ConfigOption = None, data: DataOption = None) -> None:
    """Start one local Prefect server for the data folder in the background: every later command on it
    uses that server instead of starting a temporary one."""
    from flows.server import start_server

    try:
        data_dir = _data_dir_of(config, data)
        rec = start_server(data_dir)
    except FrameInputError as exc:
        _fail(exc)
    except RuntimeError as exc:
        print(f"frame: error: server: {exc}", file=sys.stderr)
        raise typer.Exit(1) from None
    if rec.get("stale"):
        print(f"stale server record removed: {rec['stale']}; nothing signalled", file=sys.stderr)
    print(f"{'already running' if rec['already'] else 'started'}: {rec['url']} (pid {rec['pid']})")


@server_app.command("stop")
def server_stop(config: ConfigOption = None, data: DataOption = None) -> None:
    """Stop the data folder's background Prefect server (only a process provably its server is signalled;
    a stale record is removed)."""
    from flows.server import stop_server

    try:
        data_dir = _data_dir_of(config, data)
        rec = stop_server(data_dir)
    except FrameInputError as exc:
        _fail(exc)
    if rec and rec.get("stale"):
        print(f"stale server record removed: {rec['stale']}; nothing signalled")
        return
    print(f"stopped: {rec['url']} (pid {rec['pid']})" if rec else "no server was running")


@server_app.command("status")
def server_status(config: ConfigOption = None, data: DataOption = None) -> None:
    """Whether the data folder has a running background Prefect server (exit 1 if not)."""
    from flows.server import server_status as checked_status

    try:
        data_dir = _data_dir_of(config, data)
        rec, stale = checked_status(data_dir)
    except FrameInputError as exc:
        _fail(exc)
    if stale is not None:
        print(f"stale server record removed: {stale}; nothing signalled")
    if rec is None:
        print("no server running (commands start a temporary one)")
        raise typer.Exit(1)
    print(f"running: {rec['url']} (pid {rec['pid']}, since {rec.get('started_at', '?')})")


@app.command("serve")
def serve_cmd(
    config: Annotated[Path, typer.Option("--config", help="TOML build config")],
    release: Annotated[str, typer.Option("--release", help="release name the schedules refresh")],
) -> None:
    """Serve the scheduled refresh deployments (quarterly filings, monthly arXiv) from this process."""
    import datetime as dt

    from schemas.release import release_id_problems
    from tasks.config import load_config

    try:
        cfg = load_config(config)
        for where, problem in release_id_problems(release, "0.0.0"):
            raise FrameInputError(where, problem)
    except FrameInputError as exc:
        _fail(exc)
    from flows.settings import configure_prefect, route_prefect_console

    configure_prefect(cfg.build.data_dir, cfg.run.result_storage)
    # scheduled runs log like any command: keys scrubbed, records kept in the data folder's logs
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    route_prefect_console(cfg.build.data_dir / "logs" / f"serve-{stamp}.log")
    from flows.deploy import serve

    serve(str(config.resolve()), release)


@release_app.command("verify")
def release_verify(
    path: Annotated[Path, typer.Argument(help="data/releases/<name>/<version>")],
    deep: Annotated[
        bool,
        typer.Option(
            "--deep",
            help="also check that the data folder still holds the grounding and reports it was built from",
        ),
    ] = False,
    data: Annotated[
        Path | None, typer.Option("--data", help="--deep: the data folder (default: the release's own)")
    ] = None,
) -> None:
    """Check checksums, schemas, row counts and references of a release (--deep: and its input folders)."""
    from tasks.release.verify import verify_deep, verify_release

    try:
        release_folder(path)
        report = verify_release(path)
        problems = list(report.problems)
        if deep:
            problems += verify_deep(path, _data_folder(path, data))
    except FrameInputError as exc:
        _fail(exc)
    from tasks.release.members import line

    for p in problems:  # escaped and cut: a name from the release never rewrites the terminal
        print(f"frame: error: {line(p)}", file=sys.stderr)
    print(f"{path}: {'ok' if not problems else 'FAILED'}")
    raise typer.Exit(0 if not problems else 1)


@release_app.command("diff")
def release_diff(
    a: Annotated[Path, typer.Argument(help="older release folder")],
    b: Annotated[Path, typer.Argument(help="newer release folder")],
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """What changed between two releases: rows added/removed/changed per table, manifest changes."""
    from tasks.release.diff import diff_releases, format_diff_markdown

    try:
        for folder in (a, b):
            release_folder(folder)
        d = diff_releases(a, b)
    except FrameInputError as exc:
        _fail(exc)
    # JSON escapes every control character; the Markdown quotes release values escaped and cut
    print(json.dumps(d, indent=2, default=str) if as_json else format_diff_markdown(d))


@app.command("generate")
def generate_cmd(
    release: Annotated[Path, typer.Option("--release", help="data/releases/<name>/<version>")],
    system: Annotated[
        str,
        typer.Option("--system", help="copy-sample | extractive | one-shot | a [systems.NAME] of --config"),
    ],
    config: Annotated[
        Path | None,
        typer.Option("--config", help="evaluation config, or a build config whose [llm] one-shot uses"),
    ] = None,
    no_preflight: NoPreflight = False,
) -> None:
    """Write one generated report per instance (data/generations/<name>/<version>/<system>/)."""
    import os

    import pandas as pd

    from flows.generate import generate_all

    try:
        ev, llm, data_dir, _ = eval_or_build_config(config)
        release_tables(release)
        if system == "gold":
            raise FrameInputError("--system", "gold is the release's own target report: nothing to generate")
        from tasks.generate.systems import select_systems

        select_systems([system], ev, llm=llm, flag="--system", exclude=("gold",))  # errors name --system
        # beside the release's data folder (or the config's), never in the folder the command runs from
        cache_dir = Path(os.environ.get("FRAME_CACHE_DIR") or _data_folder(release, data_dir) / "cache")
        chosen = _score_systems(release, system, ev, llm, cache_dir, allow_missing=False)[system]
        _preflight({f"systems.{system}": getattr(chosen, "settings", None)}, no_preflight)
        total = len(pd.read_parquet(release / "instances.parquet", columns=["instance_id"]))
        with progress_bar(_stderr_console(), f"[bold]{system}[/]", elapsed=False) as progress:
            bar = progress.add_task("instances", total=total)
            out, made = generate_all(release, chosen, on_done=lambda _id: progress.advance(bar))
    except FrameInputError as exc:
        _fail(exc)
    failed = [g for g in made if g.error]
    for g in failed:
        print(f"frame: error: generate {system}: {g.instance_id}: {g.error.splitlines()[0]}", file=sys.stderr)
    print(f"generations: {out} ({len(made) - len(failed)} of {len(made)} report(s))")
    if failed:
        raise typer.Exit(1)


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


def _score_systems(release: Path, systems: str, ev: Any, llm: Any, cache_dir: Path, allow_missing: bool):
    """{name: ReportSystem, or None for gold} in the order named; submissions checked (one line per
    problem on stderr, exit 2, nothing scored)."""
    from flows.generate import check_submissions, systems_for
    from tasks.release import members

    names = [s.strip() for s in systems.split(",") if s.strip()] if systems else None
    if names is not None and (not names or len(set(names)) != len(names)):
        raise FrameInputError("--systems", f"give distinct, comma-separated system names (got {systems!r})")
    if names is None and ev is None:
        names = ["gold", "copy-sample", "extractive"]
    # the release's folder is checked by the callers (release_tables); the two tables every system reads
    # whole (instances, grounding documents) must be readable, with their columns, within their budget
    for table in ("instances", "grounding_documents"):
        members.scan_table(release, table)
    made = systems_for(names, ev, llm, cache_dir)
    order = names if names is not None else list(ev.systems)
    ids = members.read_table(release, "instances", columns=["instance_id"]).column("instance_id").to_pylist()
    problems = check_submissions(made, ids, allow_missing=allow_missing)
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
        "schemas/projection.toml, else the paper's 0.10)",
    ),
]
_TypeWeightOpt = Annotated[
    float | None,
    typer.Option("--type-weight", help="w of the structure node similarity (default: the paper's 0.2)"),
]


@app.command("score")
def score_cmd(
    release: Annotated[Path, typer.Option("--release", help="data/releases/<name>/<version>")],
    systems: Annotated[
        str,
        typer.Option(
            "--systems",
            help="comma-separated systems: builtins (gold, copy-sample, extractive), one-shot on [llm], or "
            "names of --config's [systems.NAME] (default: every configured system, else the builtins)",
        ),
    ] = "",
    metrics: Annotated[
        str,
        typer.Option(
            "--metrics",
            help="comma-separated metric families or metrics (`frame metrics` lists them; default: the "
            "config's [score] metrics, else FRAME's three)",
        ),
    ] = "",
    judge: Annotated[
        str | None, typer.Option("--judge", help="offline | openai: who judges the LLM-judged families")
    ] = None,
    embedder: Annotated[str | None, typer.Option("--embedder", help="minilm | openai:<model>")] = None,
    embed_precision: Annotated[
        str | None,
        typer.Option(
            "--embed-precision",
            help="MiniLM forward pass: auto (bf16 where the CPU has bf16 instructions) | fp32 | bf16",
        ),
    ] = None,
    tree: Annotated[
        str | None,
        typer.Option(
            "--tree",
            help="deterministic | llm structure trees (default: llm with --judge openai, else deterministic)",
        ),
    ] = None,
    max_items: Annotated[
        int | None, typer.Option("--max-items", help="units / claims sampled per report")
    ] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="sampling and bootstrap seed")] = None,
    bootstrap: Annotated[
        int | None, typer.Option("--bootstrap", help="bootstrap resamples for the CIs")
    ] = None,
    gamma: _GammaOpt = None,
    delta: _DeltaOpt = None,
    type_weight: _TypeWeightOpt = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="evaluation config ([systems.NAME], [judge], [embedder], [score]) or a build "
            "config whose [llm] judges",
        ),
    ] = None,
    allow_missing: Annotated[
        bool, typer.Option("--allow-missing", help="score a submission's reports even if some are missing")
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="print requests, tokens and cost per role and system; call nothing"),
    ] = False,
    out: Annotated[Path | None, typer.Option("--out", help="output folder (default data/scores/...)")] = None,
    no_preflight: NoPreflight = False,
) -> None:
    """Score generated reports with metric families (default: FRAME's three); leaderboard with CIs; plots."""
    try:
        options = {"judge": judge, "embedder": embedder, "tree": tree, "max_items": max_items}
        options |= {"embed_precision": embed_precision}
        options |= {"seed": seed, "bootstrap": bootstrap, "gamma": gamma}
        options |= {"delta": delta, "type_weight": type_weight}
        plan = _score_plan(
            release, systems, metrics, config, allow_missing, options, start_server=not dry_run
        )
        if dry_run:
            _print_score_estimate(release, plan)
            return
        _before_run(plan, out, no_preflight)
    except FrameInputError as exc:
        _fail(exc)
    _run_score(release, plan, out)


def _score_plan(
    release: Path,
    systems: str,
    metrics: str,
    config: Path | None,
    allow_missing: bool,
    options,
    start_server: bool = False,
):
    """Everything `frame score` resolves before it runs: config, metrics, settings, roles, systems.
    `start_server`: start Prefect's temporary server as soon as the data folder is known (flows.server)."""
    import os
    from types import SimpleNamespace

    ev, llm, data_dir, run = eval_or_build_config(config)
    data_dir = _data_folder(release, data_dir)
    if start_server:
        from flows.settings import configure_prefect

        configure_prefect(data_dir, run.result_storage)
        _start_temporary_server(data_dir)
    chosen, settings = _score_request(release, metrics, ev, **options)
    judge_llm = ev.judge_settings() if ev is not None and ev.judge is not None else llm
    if judge_llm is not None and judge_llm.backend != "openai":
        judge_llm = None
    cache_dir = Path(os.environ.get("FRAME_CACHE_DIR") or data_dir / "cache")
    named = _score_systems(release, systems, ev, llm, cache_dir, allow_missing)
    return SimpleNamespace(
        ev=ev, chosen=chosen, settings=settings, judge_llm=judge_llm, data_dir=data_dir, run=run,
        embed_llm=ev.embedder_settings() if ev is not None else None, systems=named,
    )  # fmt: skip


def _data_folder(release: Path, configured: Path | None) -> Path:
    """Where a command on a release keeps logs, caches and outputs: the config's data_dir, else
    $FRAME_DATA_DIR, else the data folder the release belongs to when it sits in one
    (<data>/releases/<name>/<version>), else ./data. Never a folder merely above the release."""
    from tasks.release.place import release_data_folder

    return release_data_folder(release, configured)


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
    args = (str(release), plan.systems, plan.settings, plan.judge_llm, str(out), plan.chosen)
    try:
        result = _run_with_bar(
            "score",
            "instance x system x metric",
            lambda: score_flow.score_release(*args, plan.run, plan.embed_llm),
            lambda: (score_flow.PROGRESS["done"], score_flow.PROGRESS["total"] or None),
            server_first=False,  # score_release starts loading MiniLM, then waits for the server
        )
    except FrameInputError as exc:
        _fail(exc)
    except score_flow.UnscoredSystems as exc:  # outputs written; a requested system produced nothing
        _print_score_outputs(Path(exc.folder), started)
        print(f"frame: error: score: {exc}", file=sys.stderr)
        raise typer.Exit(1) from None
    except Exception as exc:
        print(f"frame: error: score: {str(exc).splitlines()[0] if str(exc) else repr(exc)}", file=sys.stderr)
        raise typer.Exit(1) from None
    _print_score_outputs(Path(str(result)), started)


def _print_score_outputs(folder: Path, started: float) -> None:
    """The leaderboard, one warning per failed generation, and where the scores are."""
    import time

    print((folder / "leaderboard.md").read_text(encoding="utf-8"))
    failed = json.loads((folder / "manifest.json").read_text(encoding="utf-8")).get("generation_failures", [])
    for f in failed:  # recorded, not fatal: the other instances and systems were scored
        line = f"frame: warning: {f['system']}: {f['instance_id']}: generation failed: {f['error']}"
        print(line.splitlines()[0], file=sys.stderr)
    print(f"scores: {folder} ({time.time() - started:.1f} s)")


@app.command("split")
def split_cmd(
    release: Annotated[Path, typer.Option("--release", help="data/releases/<name>/<version>")],
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
            f"{name}: {len(splits.instances[name])} instances, {len(domains)} domains: {', '.join(domains)}"
        )
    print(f"splits: {written}")


@app.command("evolve")
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
    no_preflight: NoPreflight = False,
) -> None:
    """Evolve a generation skill on the discovery and validation splits; --evaluate tests one on the locked
    split."""
    try:
        job, skill0 = _evolve_job(release, config, systems, skill, run)
        frozen = _read_skill(evaluate, job.settings.budget_words) if evaluate is not None else None
        rounds = rounds if rounds is not None else job.settings.rounds
        patience = patience if patience is not None else job.settings.patience
        if rounds < 1 or patience < 1:
            raise FrameInputError("--rounds/--patience", "must be >= 1")
        _preflight(job.roles, no_preflight)
    except FrameInputError as exc:
        _fail(exc)
    _run_evolve(job, skill0, rounds, patience, frozen)


def _read_skill(path: Path, budget_words: int | None = None):
    """The skill at `path`; one over `budget_words` is refused from its size before it is read."""
    from tasks.evolve.skill import read_skill

    try:
        return read_skill(path, budget_words)
    except (OSError, UnicodeDecodeError) as exc:
        raise FrameInputError(path, f"unreadable skill file ({exc})") from None
    except ValueError as exc:
        raise FrameInputError(path, str(exc).splitlines()[0].split(": ", 1)[-1]) from None


def _evolve_job(release: Path, config: Path, systems: str, skill: Path | None, run: str | None):
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
    instances = pd.read_parquet(release / "instances.parquet", columns=["instance_id", "domain"])
    splits = read_splits(release, list(instances.instance_id))
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


def _run_evolve(job, skill0, rounds: int, patience: int, frozen) -> None:
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
            out = job.folder / f"locked-{frozen.sha256[:12]}"
            bar(lambda: evolve_flow.evaluate_locked(job, frozen, out))
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


@app.command("metrics")
def metrics_cmd() -> None:
    """List the metric families `frame score --metrics` accepts: names, metrics, ranges, what each reads."""
    from tasks.score import registry

    for name, fam in registry.families().items():
        reads = ", ".join(["generated", *sorted(fam.reads)])
        print(f"{name}: {fam.summary} [reads {reads}]")
        for m in fam.metrics:
            arrow = "higher is better" if m.higher_is_better else "lower is better"
            print(f"  {m.name}  {m.low:g}..{m.high:g}  {arrow}")
    for name, comp in registry.comparisons().items():
        print(f"{name}: {comp.summary} [compares the systems of each instance]")


@app.command("export-eval")
def export_eval_cmd(
    release: Annotated[Path, typer.Option("--release", help="data/releases/<name>/<version>")],
    out: Annotated[Path, typer.Option("--out", help="new (or empty) folder for the kit")],
    instances: Annotated[
        str, typer.Option("--instances", help="comma-separated instance ids (default: every blind one)")
    ] = "",
) -> None:
    """Write the blind evaluation kit of a release: per instance S, G and metadata, never the gold report.

    An instance whose gold report is the sample of another instance in the kit is withheld (its answer
    would be in the kit); `--instances` with the withheld ids makes a second kit for other participants."""
    from tasks.release.evalkit import export_eval_kit

    try:
        chosen = [x.strip() for x in instances.split(",") if x.strip()] or None
        summary = export_eval_kit(release, not_in_release(out), instances=chosen)
    except FrameInputError as exc:
        _fail(exc)
    print(f"{out}: {summary['instances']} instance(s), {summary['documents']} grounding document(s)")
    if summary.get("withheld"):
        print(
            f"withheld {len(summary['withheld'])} instance(s) whose gold report is the sample of another "
            f"instance in the kit: {', '.join(summary['withheld'])}"
        )


@app.command("annotate")
def annotate_cmd(
    scores: Annotated[Path, typer.Option("--scores", help="a `frame score` output folder")],
    out: Annotated[Path, typer.Option("--out", help="folder for items.csv, judge.csv, GUIDELINES.md")],
    metric: Annotated[
        str | None, typer.Option("--metric", help="a metric with a guideline (default: the first)")
    ] = None,
    n: Annotated[int, typer.Option("--n", help="items to sample (spread over systems)")] = 40,
    seed: Annotated[int, typer.Option("--seed", help="sampling seed")] = 0,
    systems: Annotated[
        str | None, typer.Option("--systems", help="comma-separated systems to sample from (default: all)")
    ] = None,
) -> None:
    """Export a blind annotation sheet (items.csv, no judge scores) and the judge's scores (judge.csv)."""
    import pandas as pd

    from tasks.atomic import atomic_write_text
    from tasks.score.annotate import GUIDELINES, annotation_sheets

    try:
        path = scores / "evidence.parquet"
        if not path.is_file():
            raise FrameInputError(path, "missing: not a `frame score` output folder")
        try:
            chosen = [x.strip() for x in systems.split(",") if x.strip()] if systems else None
            metric = metric or next(iter(GUIDELINES))
            items, judge = annotation_sheets(pd.read_parquet(path), metric, n, seed, chosen)
        except ValueError as exc:
            raise FrameInputError("--systems" if "system" in str(exc) else "--metric", str(exc)) from None
    except FrameInputError as exc:
        _fail(exc)
    atomic_write_text(out / "items.csv", items.to_csv(index=False, lineterminator="\n"))
    atomic_write_text(out / "judge.csv", judge.to_csv(index=False, lineterminator="\n"))
    atomic_write_text(out / "GUIDELINES.md", f"# Annotation guideline: {metric}\n\n{GUIDELINES[metric]}\n")
    print(f"{out}: {len(items)} {metric} items (items.csv is blind; judge.csv holds the judge's scores)")


@app.command("report")
def report_cmd(
    scores: Annotated[Path, typer.Option("--scores", help="a `frame score` output folder")],
    out: Annotated[Path | None, typer.Option("--out", help="output folder (default <scores>/report)")] = None,
    top: Annotated[int, typer.Option("--top", help="failed items listed per family")] = 10,
) -> None:
    """One diagnostic page per system (Markdown + HTML): all families side by side, the items it failed
    most, and how far each metric spreads across systems."""
    from tasks.score.diagnostic import render_system_reports

    try:
        if top < 1:
            raise FrameInputError("--top", f"must be >= 1 (got {top})")
        paths = render_system_reports(scores, out, top_n=top)
    except FrameInputError as exc:
        _fail(exc)
    for p in paths:
        print(p)


@app.command("align")
def align_cmd(
    human: Annotated[Path | None, typer.Argument(help="human scores CSV (item_id,score on 0-100)")] = None,
    judge: Annotated[Path | None, typer.Argument(help="judge scores CSV (item_id,score on 0-100)")] = None,
    rankings: Annotated[
        Path | None, typer.Option("--rankings", help="CSV group_id,system,human_rank,score")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    allow_partial: Annotated[
        bool,
        typer.Option("--allow-partial", help="align even if under half the human items have a judge score"),
    ] = False,
) -> None:
    """Judge-human alignment (PA@0, PA@25, QWK, ICC(3,1), ICC(A,1)) or ranking agreement."""
    from tasks.score.align import main_json, rankings_json

    try:
        if rankings is not None:
            text = rankings_json(rankings)
        elif human is not None and judge is not None:
            text = main_json(human, judge, allow_partial=allow_partial)
        else:
            raise FrameInputError("frame align", "give HUMAN.csv JUDGE.csv, or --rankings FILE")
    except FrameInputError as exc:
        _fail(exc)
    if as_json:
        print(text)
        return
    print_table("alignment", [("metric", False), ("value", True)], list(json.loads(text).items()))


def _print_stats(stats: list[dict]) -> None:
    cols = ["category", "instances", "g_files_mean", "g_tokens_mean", "g_tables_mean", "g_images_mean"]
    cols += ["s_tokens_mean", "s_sections_mean", "s_tables_mean", "y_tokens_mean", "y_sections_mean"]
    cols += ["y_tables_mean"]
    columns = [(c.replace("_mean", ""), c != "category") for c in cols]
    rows = [[row.get(c, "") for c in cols] for row in stats]
    print_table("Per-category statistics (paper 000 Table 1)", columns, rows)


def _print_summary(rows: list) -> None:
    numeric = ("sources", "documents", "tables", "images", "tokens")
    columns = [(c, c in numeric) for c in ("domain", "category", "snapshot", *numeric, "status")]
    table_rows = []
    for r in rows:  # tasks.synthesize.outcome.DomainOutcome of SnapshotGrounding
        for snap in [s.counts() for s in r.snapshots] or [{}]:
            table_rows.append(
                [r.domain, r.category, snap.get("snapshot", "-")]
                + [snap.get(c, "-") for c in numeric]
                + [r.status]
            )
    # Wide enough for the table when output goes to a pipe or a log (rich defaults to 80 there).
    print_table("Grounding documents per snapshot", columns, table_rows)


def os_error_line(exc: OSError) -> str:
    """One line for a file-system fault: the path (relative to the working folder when inside it) and the
    reason (read-only file system, no space left, permission denied, ...)."""
    name = exc.filename if exc.filename is not None else ""
    if name and re.match(r"\..+\.(tmp|old)-", Path(name).name):  # a temp file of a write: name its folder
        name = str(Path(name).parent)
    if name:
        try:
            name = str(Path(name).resolve().relative_to(Path.cwd()))
        except (ValueError, OSError):
            name = str(name)
    reason = exc.strerror or str(exc) or type(exc).__name__
    return f"{name}: {reason}" if name else reason


def _exit_without_teardown() -> None:
    """End a `frame` process that succeeded without the interpreter's teardown, which frees every object
    one by one: the tokenizer (a 200,000-entry vocabulary and its Rust tables), parsed filings, torch and
    MiniLM, pandas/pyarrow. That is ~0.1 s of a 0.7 s `frame ground` and ~2 s of a cold `frame score`; the
    OS reclaims the memory at once. Everything else a normal exit does still happens, in the interpreter's
    order (Py_FinalizeEx): threading's exit hooks (Prefect drains its logs and events to the server) and
    the wait for non-daemon threads, then the atexit hooks (the temporary server stops, logging flushes
    and closes its files), then the standard streams are flushed. Where either private entry point is
    missing, or a stream cannot be flushed, the normal exit is kept."""
    import atexit
    import os
    import threading

    shutdown_threads = getattr(threading, "_shutdown", None)
    run_exit_hooks = getattr(atexit, "_run_exitfuncs", None)
    if shutdown_threads is None or run_exit_hooks is None:
        return
    shutdown_threads()  # a second call (by the normal exit, if we return below) does nothing
    run_exit_hooks()  # and clears them: none runs twice
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            return  # a closed pipe: the normal exit reports it as Python does
    os._exit(0)


def main() -> None:  # pragma: no cover - entry point (tests run it through the `frame` script)
    """The `frame` command: every command under one error boundary for file-system faults, which end in
    one line and exit 2 (a full or read-only disk, a busy or forbidden path), never a traceback. A command
    that succeeds ends without the interpreter's teardown (`_exit_without_teardown`)."""
    global _STANDALONE
    _STANDALONE = True
    ast_guard.install()  # commands run threads that parse Python side by side (tasks/ast_guard.py)
    try:
        app()
    except OSError as exc:
        print(f"frame: error: {os_error_line(exc)}".replace("\n", " "), file=sys.stderr)
        sys.exit(2)
    except SystemExit as exc:
        if exc.code in (None, 0):
            _exit_without_teardown()
        raise
    _exit_without_teardown()


if __name__ == "__main__":  # pragma: no cover
    main()
