"""`frame status`: the last build's run record, per domain or per step."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from flows.cli.common import _fail
from flows.cli.options import ConfigOption, DataOption
from flows.terminal import print_table
from tasks.errors import FrameInputError


def status_cmd(
    config: ConfigOption = None,
    data: DataOption = None,
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
