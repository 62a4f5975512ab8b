"""What every command shares: the one-line error exit, input and output checks, the LLM preflight,
the data folder of a release."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer

from tasks.errors import FrameInputError


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


def _preflight(roles: dict, no_preflight: bool) -> None:
    """Every LLM role's key is set and (unless --no-preflight) its endpoint answers, before any step."""
    from tasks.llm.preflight import preflight

    preflight({k: v for k, v in roles.items() if v is not None}, reach=not no_preflight)


def _read_input(path: Path) -> bytes:
    if not path.exists():
        raise FrameInputError(path, "no such file")
    if not path.is_file():
        raise FrameInputError(path, "not a file")
    return path.read_bytes()


def _data_folder(release: Path, configured: Path | None) -> Path:
    """Where a command on a release keeps logs, caches and outputs: the config's data_dir, else
    $FRAME_DATA_DIR, else the data folder the release belongs to when it sits in one
    (<data>/releases/<name>/<version>), else ./data. Never a folder merely above the release."""
    from tasks.release.place import release_data_folder

    return release_data_folder(release, configured)
