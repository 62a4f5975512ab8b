"""`frame server start|stop|status` (a background Prefect server) and `frame serve` (the schedules)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from flows.cli.common import _fail
from flows.cli.options import BuildConfig, ConfigOption, DataOption
from tasks.errors import FrameInputError


def _data_dir_of(config: Path | None, data: Path | None) -> Path:
    if config is not None:
        from tasks.config import load_config

        return Path(load_config(config).build.data_dir)
    return data or Path("data")


def server_start(
    config: ConfigOption = None,
    data: DataOption = None,
    no_ui: Annotated[bool, typer.Option("--no-ui", help="Serve the API only, not Prefect's UI.")] = False,
) -> None:
    """Start one local Prefect server for the data folder in the background: every later command on it
    uses that server instead of starting a temporary one, and its UI (`frame ui` prints the address)
    shows the folder's run history."""
    from flows.server import start_server, ui_url

    try:
        data_dir = _data_dir_of(config, data)
        rec = start_server(data_dir, ui=not no_ui)
    except FrameInputError as exc:
        _fail(exc)
    except RuntimeError as exc:
        print(f"frame: error: server: {exc}", file=sys.stderr)
        raise typer.Exit(1) from None
    if rec.get("stale"):
        print(f"stale server record removed: {rec['stale']}; nothing signalled", file=sys.stderr)
    print(f"{'already running' if rec['already'] else 'started'}: {rec['url']} (pid {rec['pid']})")
    print(f"UI: {ui_url(rec)}" if ui_url(rec) else "UI: off")


def ui_cmd(config: ConfigOption = None, data: DataOption = None) -> None:
    """Print the address of the Prefect UI of the data folder's background server (exit 1, saying how to
    start one, when none runs or it runs without its UI)."""
    from flows.server import running_server, ui_url

    try:
        data_dir = _data_dir_of(config, data)
        rec = running_server(data_dir)
    except FrameInputError as exc:
        _fail(exc)
    start = f"frame server start --data {data_dir}"
    if rec is None:
        print(
            f"frame: error: no Prefect server runs for data folder {data_dir}: start one with `{start}`",
            file=sys.stderr,
        )
        raise typer.Exit(1)
    if ui_url(rec) is None:
        print(
            f"frame: error: the Prefect server of data folder {data_dir} runs without its UI: "
            f"`frame server stop --data {data_dir}`, then `{start}`",
            file=sys.stderr,
        )
        raise typer.Exit(1)
    print(ui_url(rec))


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


def server_status(config: ConfigOption = None, data: DataOption = None) -> None:
    """Whether the data folder has a running background Prefect server (exit 1 if not)."""
    from flows.server import server_status as checked_status
    from flows.server import ui_url

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
    print(f"UI: {ui_url(rec)}" if ui_url(rec) else "UI: off")


def serve_cmd(
    config: BuildConfig,
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
