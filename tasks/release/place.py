"""Where a command on a release keeps what it writes (generations, scores, caches, logs).

A release sits in a data folder as <data>/releases/<name>/<version>; a release copied elsewhere (a
download, a kit) has no data folder of its own, and nothing is ever written next to or above it.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["release_data_folder"]


def release_data_folder(release: str | Path, configured: str | Path | None = None) -> Path:
    """`configured` (a config's data_dir), else $FRAME_DATA_DIR, else the data folder the release belongs
    to when it sits in one, else ./data. Never a folder merely above the release (a release at
    /a/b/1.0.0 used to send its generations to /generations)."""
    if configured is not None:
        return Path(configured)
    if os.environ.get("FRAME_DATA_DIR"):
        return Path(os.environ["FRAME_DATA_DIR"])
    rel = Path(release).resolve()
    if len(rel.parents) >= 3 and rel.parents[1].name == "releases":
        return rel.parents[2]
    return Path("data")
