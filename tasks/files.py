"""Reading a file someone else hands frame (a submission, a program's output, a release's members).

Only regular files are opened: a FIFO, device or socket is refused from `lstat` before any `open` (so it
never blocks), the open does not follow a final link, and the descriptor is checked again afterwards, so a
file swapped in between is refused too. `read_regular` reads at most `limit` bytes.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = [
    "FileProblem",
    "NotRegularFile",
    "file_kind",
    "open_regular",
    "read_capped",
    "read_regular",
    "release_around",
    "within",
]

_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISLNK, "a symbolic link"),
)


class NotRegularFile(Exception):
    """A path that must be a regular file is something else: the message says what, so that it reads
    after "FILE is" ("not a regular file (a FIFO)")."""


def file_kind(mode: int) -> str:
    """What a non-regular file is, for a message: "a FIFO", "a character device", ..."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def within(path: str | Path, root: str | Path) -> bool:
    """Whether `path` is `root` or below it (both already resolved)."""
    return os.path.commonpath([os.fspath(path), os.fspath(root)]) == os.fspath(root)


def open_regular(path: str | Path, root: str | Path | None = None) -> int:
    """A read-only descriptor of the regular file `path` (its last component is not followed: resolve it
    first). Anything else raises NotRegularFile before it is opened, so a FIFO or device never blocks;
    after the open the descriptor is checked again (same file, still regular, still inside `root` when
    given), so a file swapped in between is refused too. OSError when it cannot be opened."""
    before = os.lstat(path)
    if not stat.S_ISREG(before.st_mode):
        raise NotRegularFile(f"not a regular file ({file_kind(before.st_mode)})")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        after = os.fstat(fd)
        if not stat.S_ISREG(after.st_mode) or (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
            raise NotRegularFile("not the file that was checked (replaced while being opened)")
        if root is not None:
            try:
                opened = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:  # no /proc: the lstat/fstat pair above is the check
                opened = None
            if opened is not None and not within(opened, root):
                raise NotRegularFile("not inside its folder (reached through a link)")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: str | Path, limit: int | None = None, root: str | Path | None = None) -> bytes:
    """The bytes of the regular file `path` (open_regular), at most `limit` of them."""
    fd = open_regular(path, root)
    try:
        chunks, left = [], limit
        while left is None or left > 0:
            chunk = os.read(fd, 1 << 20 if left is None else min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left = None if left is None else left - len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def release_around(path: str | Path) -> Path | None:
    """The release folder `path` is in or is (a folder holding manifest.json and instances.parquet),
    resolved; None when there is none. A release is immutable: nothing may be written inside it."""
    try:
        there = Path(path).resolve()
    except (OSError, RuntimeError):
        return None
    for folder in (there, *there.parents):
        if (folder / "manifest.json").is_file() and (folder / "instances.parquet").is_file():
            return folder
    return None


class FileProblem(ValueError):
    """A file that cannot be read as asked, in words that read after its name (one line)."""


def read_capped(path: str | Path, limit: int, root: str | Path | None = None, too_large: str = "") -> bytes:
    """read_regular of at most `limit` bytes, every refusal a FileProblem: not a regular file, unreadable,
    or larger (`too_large`, formatted with the limit, e.g. "more than {limit:,} bytes: refused").
    FileNotFoundError passes through: a missing file is the caller's to word."""
    try:
        data = read_regular(path, limit + 1, root)
    except FileNotFoundError:
        raise
    except NotRegularFile as exc:
        raise FileProblem(f"{exc}: refused") from None
    except OSError as exc:
        raise FileProblem(f"unreadable ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise FileProblem((too_large or "more than {limit:,} bytes: refused").format(limit=limit))
    return data
