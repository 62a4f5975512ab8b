"""Process-wide settings that must be in place before Prefect is imported.

Prefect reads its settings from the environment when first imported, so the CLI calls
`configure_prefect` first. Values already set by the user win (setdefault).
"""

from __future__ import annotations

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
    # Analytics off: offline it only produces a noisy "database is locked" traceback.
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
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


def route_prefect_console(log_file: Path | None = None) -> None:
    """Send Prefect's console logs to stdout (stderr is kept for frame's one-line errors) and drop
    tracebacks of expected input errors there; the full records still go to `log_file`."""
    import logging
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
        fh.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        root.handlers.insert(0, fh)
    named = [lg for lg in logging.root.manager.loggerDict.values() if isinstance(lg, logging.Logger)]
    for handler in {h for lg in [root, *named] for h in lg.handlers}:
        if not any(isinstance(f, _NoSecrets) for f in handler.filters):
            handler.addFilter(_NoSecrets())
    for handler in root.handlers:
        if type(handler).__name__ == "PrefectConsoleHandler":
            handler.setStream(sys.stdout)
            if hasattr(handler, "console"):
                handler.console.file = sys.stdout
            handler.addFilter(_NoInputTracebacks())
