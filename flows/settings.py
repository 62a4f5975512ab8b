"""Process-wide settings that must be in place before Prefect is imported.

Prefect reads its settings from the environment when first imported, so the CLI calls
`configure_prefect` first. Values already set by the user win (setdefault).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from flows.server import refresh_prefect_settings, running_server

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def configure_prefect(data_dir: Path | None = None, result_storage: Path | None = None) -> None:
    data_dir = Path(data_dir or PROJECT_ROOT / "data").resolve()
    # Keep Prefect's SQLite database and results inside the project, not in the home folder.
    os.environ.setdefault("PREFECT_HOME", str(PROJECT_ROOT / ".prefect"))
    # Dask workers inherit this at start: every worker reads and writes the same results.
    results = Path(result_storage) if result_storage else data_dir / "cache" / "prefect-results"
    os.environ.setdefault("PREFECT_LOCAL_STORAGE_PATH", str(results))
    os.environ.setdefault("PREFECT_RESULTS_PERSIST_BY_DEFAULT", "true")
    quiet_prefect_analytics()
    # The ephemeral server needs longer than the 20 s default to start on 2 cores.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "INFO")
    os.environ.setdefault("FRAME_CACHE_DIR", str(data_dir / "cache"))
    # A server started by `frame server start` for this data folder saves every command the start of
    # Prefect's temporary server; an explicit PREFECT_API_URL wins.
    if "PREFECT_API_URL" not in os.environ:
        found = running_server(data_dir)
        if found is not None:
            os.environ["PREFECT_API_URL"] = found["url"]
    refresh_prefect_settings()


VERBOSE_ENV = "FRAME_VERBOSE"  # `frame -v` sets it; worker processes inherit it
ENGINE_LINES = ("Finished in state", "Task run failed with ")  # Prefect's engine on a run's end
# `extra=` of a run-log record that the command also prints in its own line (a failed generation, a
# system without reports): kept in the log and the UI, left off a quiet terminal so it is said once
SAID_BY_FRAME = {"frame_said": True}


def quiet_prefect_analytics() -> None:
    """No analytics on a terminal unless the user asked for them: the server's telemetry service (offline
    it only logs a "database is locked" traceback) and the SDK's, whose first import in a new
    PREFECT_HOME prints a usage-data notice on an interactive terminal. Call before Prefect is imported."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")  # the SDK's switch (prefect._internal.analytics)


def verbose() -> bool:
    return os.environ.get(VERBOSE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


class _RunNameFormatter(logging.Formatter):
    """The log file's line: time, level, logger, then Prefect's run name where the record has one
    ("Task run 'score · rouge · ...' - Finished in state Completed()"), as the terminal shows it with -v."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        run = ""
        for kind, attr in (("Task run", "task_run_name"), ("Flow run", "flow_run_name")):
            if getattr(record, attr, None):
                run = f"{kind} {getattr(record, attr)!r} - "
                break
        return f"{record.asctime} {record.levelname} {record.name} {run}{record.message}"


def route_prefect_console(log_file: Path | None = None) -> None:
    """Send Prefect's console logs to stdout (stderr is kept for frame's one-line errors) and drop
    tracebacks of expected input errors there; the full records still go to `log_file`.

    Quiet unless `frame -v` (FRAME_VERBOSE): the terminal shows warnings and errors, each in one line
    (a traceback stays in `log_file`), not Prefect's INFO lines (every task run's start and state)."""
    import sys

    from tasks.errors import FrameInputError

    class _NoInputTracebacks(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            # Expected input errors are reported in one line; their traceback helps nobody.
            # (Mutates the record: the file handler, placed first, has already written it whole.)
            if record.exc_info and isinstance(record.exc_info[1], FrameInputError):
                record.exc_info = None
                record.exc_text = None
            return True

    quiet = not verbose()

    class _Quiet(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            if record.levelno < logging.WARNING:
                return False
            # a run's failure is said by frame in its own line (the step, system or instance named); the
            # engine's lines about it ("Task run failed with ...", "Finished in state Failed") stay in the log
            run = getattr(record, "task_run_name", None) or getattr(record, "flow_run_name", None)
            if run and record.getMessage().startswith(ENGINE_LINES):
                return False
            if getattr(record, "frame_said", False):
                return False
            if record.exc_info or record.exc_text:  # one line here; the log file has the traceback
                record.exc_info, record.exc_text = None, None
                if log_file is not None:
                    record.msg, record.args = f"{record.getMessage()} (traceback: {log_file})", ()
            return True

    from tasks.llm.redact import scrub

    class _NoSecrets(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            # No key frame knows reaches a console, a log file or the Prefect server's log table.
            record.msg, record.args = scrub(record.getMessage()), ()
            if record.exc_info and record.exc_text is None:
                record.exc_text = logging.Formatter().formatException(record.exc_info)
            if record.exc_text:  # formatters print exc_text when it is set
                record.exc_text = scrub(record.exc_text)
            return True

    root = logging.getLogger()
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        fh = logging.FileHandler(log_file, encoding="utf-8")
        fh.setFormatter(_RunNameFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        root.handlers.insert(0, fh)
    named = [lg for lg in logging.root.manager.loggerDict.values() if isinstance(lg, logging.Logger)]
    for handler in {h for lg in [root, *named] for h in lg.handlers}:
        if not any(isinstance(f, _NoSecrets) for f in handler.filters):
            handler.addFilter(_NoSecrets())
        if quiet and type(handler).__name__ == "PrefectConsoleHandler" and handler not in root.handlers:
            if not any(type(f).__name__ == "_Quiet" for f in handler.filters):
                handler.addFilter(_Quiet())  # a named logger's own console (Prefect's) is quiet too
    for handler in root.handlers:
        if type(handler).__name__ == "PrefectConsoleHandler":
            handler.setStream(sys.stdout)
            if hasattr(handler, "console"):
                handler.console.file = sys.stdout
            handler.addFilter(_NoInputTracebacks())
            if quiet and not any(type(f).__name__ == "_Quiet" for f in handler.filters):
                handler.addFilter(_Quiet())
