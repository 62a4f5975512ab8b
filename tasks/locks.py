"""Inter-process locks on a data folder and on one release version (filelock: fcntl on POSIX).

A lock is released by the kernel when its holder dies, even by SIGKILL, so a crashed build never
wedges the next one. Beside each lock a small `.owner` file says who holds it (pid, host, command,
since when) so that a waiting or refused build can name the holder.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from tasks.atomic import atomic_write_text
from tasks.errors import FrameInputError

log = logging.getLogger(__name__)


class LockBusyError(FrameInputError):
    """Another process held the lock for longer than we were willing to wait."""


def _owner(path: Path) -> str:
    try:
        info = json.loads(path.with_suffix(".owner").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "another process"
    return f"pid {info.get('pid')} on {info.get('host')} since {info.get('since')} ({info.get('command')})"


@contextmanager
def hold(path: Path, timeout_s: float, what: str) -> Iterator[None]:
    """Hold the lock at `path`; wait up to `timeout_s` for another holder, then fail in one line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        log.warning("%s is held by %s; waiting up to %.0f s", what, _owner(path), timeout_s)
        print(f"frame: {what} is held by {_owner(path)}; waiting up to {timeout_s:.0f} s", file=sys.stderr)
        try:
            lock.acquire(timeout=timeout_s)
        except Timeout:
            raise LockBusyError(
                path, f"{what} is held by {_owner(path)}; gave up after {timeout_s:.0f} s"
            ) from None
    try:
        atomic_write_text(
            path.with_suffix(".owner"),
            json.dumps(
                {
                    "pid": os.getpid(),
                    "host": socket.gethostname(),
                    "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "command": " ".join(Path(sys.argv[0]).name.split() + sys.argv[1:3]) or "python",
                }
            ),
        )
        yield
    finally:
        lock.release()


def data_folder_lock(data_dir: Path, timeout_s: float) -> object:
    """One build (build, rerun, refresh) per data folder at a time: builds write the same grounding,
    report and cache folders, and a shared Prefect SQLite home cannot take two writers."""
    return hold(Path(data_dir) / ".locks" / "build.lock", timeout_s, f"data folder {data_dir}")


def release_lock(releases_root: Path, name: str, version: str, timeout_s: float = 600.0) -> object:
    """One writer per release version (checked and renamed into place under it). The lock lives
    outside the release's own folder, which holds nothing but versions."""
    path = Path(releases_root) / ".locks" / f"{name}-{version}.lock"
    return hold(path, timeout_s, f"release {name} {version}")
