"""The code of a baseline commit, checked out beside this one, for benchmarks that time both in one run."""

from __future__ import annotations

import contextlib
import json
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def recorded(name: str) -> dict:
    """A named baseline of benchmarks/baselines.json (value, commit, what and when it was measured)."""
    return json.loads((ROOT / "benchmarks" / "baselines.json").read_text(encoding="utf-8"))[name]


@contextlib.contextmanager
def checkout(commit: str) -> Iterator[Path | None]:
    """A temporary `git worktree` of `commit` (run it with this venv and PYTHONPATH=<it>), removed on exit;
    None, with the reason printed, when the commit is not in this repository."""
    with tempfile.TemporaryDirectory(prefix="frame-baseline-") as tmp:
        tree = Path(tmp) / "code"
        added = subprocess.run(
            ["git", "worktree", "add", "--detach", str(tree), commit],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        if added.returncode != 0:
            print(f"baseline {commit}: not available ({added.stderr.strip().splitlines()[-1:]})")
            yield None
            return
        try:
            yield tree
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], capture_output=True, cwd=ROOT)
