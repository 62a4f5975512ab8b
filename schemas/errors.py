"""Errors that the CLI turns into one clear line on stderr and exit code 2 (no traceback).

They live with the shapes, the bottom layer, so that validating a shape can raise them; `tasks.errors`
is where the rest of frame imports them from."""

from __future__ import annotations

from pathlib import Path


class FrameInputError(Exception):
    """Bad input: a file or config field that cannot be used as given.

    The message is a single line naming the file (or field) and what is wrong with it.
    """

    def __init__(self, where: str | Path, problem: str) -> None:
        self.where = str(where)
        self.problem = problem
        super().__init__(f"{self.where}: {problem}")

    def __reduce__(self):  # a failure shipped back from a Dask worker unpickles with its message
        return (type(self), (self.where, self.problem))


class ConfigError(FrameInputError):
    """A config file field is missing or invalid."""
