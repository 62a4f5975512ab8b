"""The `frame` command line (typer): `app`, its commands (one module per group) and `main`.

Bad input ends with exit code 2 and one line on stderr naming the file/field and the problem.
Prefect is imported only by the commands that run flows, so `frame ground` starts fast.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from flows.cli import running
from flows.cli.build import build_cmd, refresh_cmd, rerun_cmd
from flows.cli.common import _data_folder
from flows.cli.entry import _exit_without_teardown, os_error_line
from flows.cli.evolve import evolve_cmd, split_cmd
from flows.cli.ground import ground, ground_domains, qa_ground_cmd
from flows.cli.metrics import align_cmd, annotate_cmd, metrics_cmd, report_cmd
from flows.cli.release import export_eval_cmd, qa_gold_cmd, release_diff, release_verify
from flows.cli.running import _run_with_bar
from flows.cli.score import generate_cmd, score_cmd
from flows.cli.server import serve_cmd, server_start, server_status, server_stop, ui_cmd
from flows.cli.status import status_cmd
from flows.cli.view import view_cmd
from flows.configs import eval_or_build_config
from flows.meta import meta_app
from flows.terminal import FrameTyper
from tasks import ast_guard
from tasks.errors import FrameInputError

# Names other code imports from flows.cli (tests, benchmarks), kept importable here after the split.
__all__ = [
    "FrameInputError",
    "_data_folder",
    "_run_with_bar",
    "app",
    "eval_or_build_config",
    "main",
    "os_error_line",
]

app = FrameTyper(no_args_is_help=True, add_completion=False, help="frame: FRAME benchmark builder.")
qa_app = FrameTyper(no_args_is_help=True, help="Construction quality checks.")
release_app = FrameTyper(no_args_is_help=True, help="Versioned parquet releases.")
server_app = FrameTyper(no_args_is_help=True, help="A background Prefect server for a data folder.")


@app.callback()
def _frame(
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="Show Prefect's log lines (every task run) on the terminal too; by default they go only "
            "to the run's log file (data/logs/) and the terminal shows the progress bar, warnings and the "
            "summary.",
        ),
    ] = False,
) -> None:
    """frame: FRAME benchmark builder."""
    from flows.settings import VERBOSE_ENV, quiet_prefect_analytics

    if verbose:
        os.environ[VERBOSE_ENV] = "1"  # read where the logs are routed (flows.settings), also by workers
    quiet_prefect_analytics()  # before any command imports Prefect


# Registered here, in the order `frame --help` lists them: commands first, then the groups.
app.command()(ground)
app.command("ground-domains")(ground_domains)
app.command("build")(build_cmd)
app.command("rerun")(rerun_cmd)
app.command("refresh")(refresh_cmd)
app.command("status")(status_cmd)
app.command("serve")(serve_cmd)
app.command("ui")(ui_cmd)
app.command("generate")(generate_cmd)
app.command("score")(score_cmd)
app.command("split")(split_cmd)
app.command("evolve")(evolve_cmd)
app.command("metrics")(metrics_cmd)
app.command("export-eval")(export_eval_cmd)
app.command("annotate")(annotate_cmd)
app.command("report")(report_cmd)
app.command("align")(align_cmd)
app.command("view")(view_cmd)

qa_app.command("ground")(qa_ground_cmd)
qa_app.command("gold")(qa_gold_cmd)
release_app.command("verify")(release_verify)
release_app.command("diff")(release_diff)
server_app.command("start")(server_start)
server_app.command("stop")(server_stop)
server_app.command("status")(server_status)

app.add_typer(qa_app, name="qa")
app.add_typer(meta_app, name="meta")
app.add_typer(release_app, name="release")
app.add_typer(server_app, name="server")


def main() -> None:  # pragma: no cover - entry point (tests run it through the `frame` script)
    """The `frame` command: every command under one error boundary for file-system faults, which end in
    one line and exit 2 (a full or read-only disk, a busy or forbidden path), never a traceback. A command
    that succeeds ends without the interpreter's teardown (`_exit_without_teardown`)."""
    running._STANDALONE = True  # this process is `frame` itself (flows.cli.running)
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
