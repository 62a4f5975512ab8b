"""Running a Prefect flow from a command: the Prefect session, the early temporary server, the progress
bar drawn while the flow runs in a worker thread."""

from __future__ import annotations

from pathlib import Path

from flows.cli.common import _stderr_console
from flows.terminal import progress_bar


def _prefect_session(cfg) -> None:
    import datetime as dt

    from flows.settings import configure_prefect, route_prefect_console

    configure_prefect(cfg.build.data_dir, cfg.run.result_storage)
    _start_temporary_server(cfg.build.data_dir)
    import flows.build  # noqa: F401  (imports Prefect, which sets up the logging re-routed below)

    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    route_prefect_console(cfg.build.data_dir / "logs" / f"build-{stamp}.log")


_STANDALONE = False  # flows.cli.main() sets it: only a `frame` process starts Prefect's server early


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
