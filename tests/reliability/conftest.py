"""Shared pieces of the kill/resume and corrupted-cache tests: a one-domain config (arXiv `gw`, 2 windows:
the fastest small build, ~2 s of flow after ~9 s of Prefect start), `frame` subprocess helpers, the
sha256 of every file of a release, and one uninterrupted reference build per session."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CORPUS, SMALL_DOMAINS, frame_env

FRAME = str(Path(sys.executable).with_name("frame"))
RELEASE, VERSION = "small", "1.0.0"
RUN_TIMEOUT_S = 240  # one `frame build` of the gw domain takes ~11 s here
_KEY = re.compile(r"^[0-9a-f]{64}$")  # frame's cache keys; flow results have 32-hex random names

GW_DOMAIN = next(
    "[[domains]]" + block for block in SMALL_DOMAINS.split("[[domains]]")[1:] if 'name = "gw"' in block
)
GW_CONFIG = (
    """
[build]
data_dir = "{data}"
[source]
mode = "mirror"
mirror = "{corpus}"
"""
    + GW_DOMAIN
)


def write_config(folder: Path) -> Path:
    """`folder/gw.toml` building the gw domain into `folder/data`."""
    folder.mkdir(parents=True, exist_ok=True)
    cfg = folder / "gw.toml"
    cfg.write_text(GW_CONFIG.format(data=folder / "data", corpus=CORPUS), encoding="utf-8")
    return cfg


def build_cmd(cfg: Path) -> list[str]:
    return [FRAME, "build", "--config", str(cfg), "--release", RELEASE, "--version", VERSION]


def run_env(prefect_home: Path) -> dict[str, str]:
    # Unbuffered: the log lines of a SIGKILLed run must be in its stdout file up to the kill.
    return {**frame_env(prefect_home), "PYTHONUNBUFFERED": "1"}


def run_build(cfg: Path, prefect_home: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        build_cmd(cfg), capture_output=True, text=True, env=run_env(prefect_home), timeout=RUN_TIMEOUT_S
    )


def release_dir(data: Path) -> Path:
    return data / "releases" / RELEASE / VERSION


def tree_hashes(folder: Path) -> dict[str, str]:
    """sha256 of every file under `folder`, by relative POSIX path."""
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def result_storage(data: Path) -> Path:
    return data / "cache" / "prefect-results"  # flows.settings.configure_prefect's default


def keyed_results(data: Path) -> dict[str, Path]:
    """The persisted task results (file name = cache key) of a data folder."""
    root = result_storage(data)
    return {p.name: p for p in root.iterdir() if _KEY.match(p.name)} if root.is_dir() else {}


def file_ids(paths: dict[str, Path]) -> dict[str, tuple[int, int]]:
    """(inode, mtime_ns) per file: a rewrite (atomic rename or in place) changes one of them."""
    out = {}
    for name, p in paths.items():
        st = p.stat()
        out[name] = (st.st_ino, st.st_mtime_ns)
    return out


def task_lines(stdout: str) -> list[str]:
    return [ln for ln in stdout.splitlines() if "Task run '" in ln and "Finished in state" in ln]


@pytest.fixture(scope="session")
def reliability_home(tmp_path_factory) -> Path:
    """One PREFECT_HOME for this folder's `frame` runs (always one at a time): its database is migrated
    once, so each later run starts its ephemeral server faster."""
    if not (CORPUS / "arxiv").is_dir():
        pytest.skip(f"shared corpus not found at {CORPUS}")
    return tmp_path_factory.mktemp("reliability-prefect")


@pytest.fixture(scope="session")
def gw_reference(tmp_path_factory, reliability_home) -> dict:
    """An uninterrupted `frame build` of the gw config. Returns {"cfg", "data", "hashes" (sha256 of every
    release file, taken right after the build), "keys" (number of persisted task results), "stdout"}.
    Tests may rebuild in its data folder (test_corrupt_cache does) but compare against `hashes`."""
    folder = tmp_path_factory.mktemp("reference")
    cfg = write_config(folder)
    res = run_build(cfg, reliability_home)
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-3000:]
    data = folder / "data"
    release = release_dir(data)
    assert (release / "manifest.json").is_file()
    return {
        "cfg": cfg,
        "data": data,
        "hashes": tree_hashes(release),
        "keys": len(keyed_results(data)),
        "stdout": res.stdout,
    }
