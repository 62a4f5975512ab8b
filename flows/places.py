"""Where a command may write: never inside a release, which is immutable (`frame release verify` checks
every file of it against its manifest). Every `--out` of a command goes through `not_in_release`, and
every release a command reads through `release_folder` / `release_tables`."""

from __future__ import annotations

from pathlib import Path

from tasks.errors import FrameInputError
from tasks.files import release_around

__all__ = ["not_in_release", "release_around", "release_folder", "release_tables"]


def not_in_release(out: Path, flag: str = "--out") -> Path:
    """`--out` of a command: never inside a release, which is immutable (`frame release verify`)."""
    inside = release_around(out)
    if inside is not None:
        raise FrameInputError(flag, f"{out} is inside the release {inside.name}: releases are immutable")
    return out


def release_tables(release: Path) -> None:
    """A release whose instances table is there: a FIFO or link in its place (or anywhere in the
    folder) is named as such by release_folder, not reported "missing"."""
    import os

    if not os.path.lexists(release / "instances.parquet"):
        raise FrameInputError(release / "instances.parquet", "missing: not a frame release folder")
    release_folder(release)


def release_folder(path: Path) -> None:
    """Bad input (exit 2), not a failed check (exit 1): a path that is no folder, a folder with neither a
    manifest nor any table of a release, or one holding anything but regular files and folders (a
    symbolic link, FIFO, device or socket: tasks.release.members.check_release_folder)."""
    import os

    from schemas.release import REQUIRED_TABLES
    from tasks.release.members import check_release_folder

    if not path.exists():
        raise FrameInputError(path, "no such folder")
    if not path.is_dir():
        raise FrameInputError(path, "not a folder (give data/releases/<name>/<version>)")
    names = ["manifest.json", *(f"{t}.parquet" for t in REQUIRED_TABLES)]
    if not any(os.path.lexists(path / n) for n in names):
        raise FrameInputError(path, "not a frame release folder (no manifest.json, no release tables)")
    check_release_folder(path)
