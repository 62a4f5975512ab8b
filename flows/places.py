"""Where a command may write: never inside a release, which is immutable (`frame release verify` checks
every file of it against its manifest). Every `--out` of a command goes through `not_in_release`."""

from __future__ import annotations

from pathlib import Path

from tasks.errors import FrameInputError
from tasks.files import release_around

__all__ = ["not_in_release", "release_around"]


def not_in_release(out: Path, flag: str = "--out") -> Path:
    """`--out` of a command: never inside a release, which is immutable (`frame release verify`)."""
    inside = release_around(out)
    if inside is not None:
        raise FrameInputError(flag, f"{out} is inside the release {inside.name}: releases are immutable")
    return out
