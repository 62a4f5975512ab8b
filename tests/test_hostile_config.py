"""Hostile or careless configs and refresh parameters, through the CLI as a user runs it (issue 32, the
surfaces not listed): a config that is a FIFO or a link to a gigabyte file, waits without end (inf), a key
pasted in place of its variable's name, a data folder inside an immutable release, and release names or
dates that would make a refresh or a scheduled deployment write outside its data folder."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tasks.config import load_config
from tasks.errors import ConfigError
from tests.conftest import CORPUS, frame_env
from tests.test_refresh import config as refresh_config

FRAME = str(Path(sys.executable).with_name("frame"))
KEY = "sk-hostile-0123456789abcdefghijklmnop"  # looks like a real key: never to be echoed


def frame(args: list[str], tmp: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            [FRAME, *args],
            capture_output=True,
            text=True,
            env=frame_env(tmp / "ph"),
            cwd=tmp,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"frame {' '.join(args[:2])} hung")


def one_line(res: subprocess.CompletedProcess, *needles: str) -> str:
    """The command failed as bad input: exit 2, one `frame` error line holding every needle."""
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2, (res.returncode, res.stderr[-2000:])
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr[-2000:]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def test_a_config_that_is_a_fifo_or_a_link_to_a_huge_file_is_refused_without_reading_it(tmp_path):
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    one_line(frame(["build", "--config", str(fifo), "--release", "r", "--version", "0.1.0"], tmp_path),
             "fifo.toml", "not a regular file (a FIFO): refused")  # fmt: skip
    huge = tmp_path / "huge.bin"
    with huge.open("wb") as fh:
        fh.truncate(1 << 30)  # 1 GiB, sparse: reading it whole took 10 s and 2 GB of memory
    link = tmp_path / "big.toml"
    link.symlink_to(huge)
    start = time.monotonic()
    res = frame(
        ["build", "--config", str(link), "--release", "r", "--version", "0.1.0", "--dry-run"], tmp_path
    )
    one_line(res, "big.toml", "more than 4,194,304 bytes: not a config")
    # an evaluation config is looked into first (is it one?): bounded the same way
    res = frame(["score", "--release", str(tmp_path), "--config", str(link), "--dry-run"], tmp_path)
    one_line(res, "big.toml", "more than 4,194,304 bytes: not a config")
    assert time.monotonic() - start < 30
    evaluation = tmp_path / "eval-fifo.toml"
    os.mkfifo(evaluation)
    one_line(
        frame(["score", "--release", str(tmp_path), "--config", str(evaluation)], tmp_path), "eval-fifo.toml"
    )


@pytest.mark.parametrize(
    ("section", "line"),
    [
        ("llm", "timeout_s = inf"),
        ("llm", "backoff_max_s = nan"),
        ("llm", "transient_retries = 1000000000"),
        ("run", "lock_timeout_s = inf"),
    ],
)
def test_a_wait_without_end_is_no_setting(tmp_path, section, line):
    cfg = tmp_path / "c.toml"
    cfg.write_text(f"[{section}]\n{line}\n", encoding="utf-8")
    key = line.split(" = ")[0]
    one_line(frame(["build", "--config", str(cfg), "--release", "r", "--version", "0.1.0"], tmp_path),
             "c.toml", f"field {section}.{key}")  # fmt: skip


def test_a_key_pasted_in_place_of_its_variable_name_is_never_echoed(tmp_path):
    build = tmp_path / "build.toml"
    build.write_text(f'[llm]\nbackend = "openai"\napi_key_env = "{KEY}"\n', encoding="utf-8")
    res = frame(["build", "--config", str(build), "--release", "r", "--version", "0.1.0"], tmp_path)
    one_line(res, "build.toml", "field llm.api_key_env", "looks like a key itself (not shown)")
    evaluation = tmp_path / "eval.toml"
    evaluation.write_text(
        '[systems.m]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
        f'api_key_env = "{KEY}"\n',
        encoding="utf-8",
    )
    res2 = frame(["score", "--release", str(tmp_path), "--config", str(evaluation)], tmp_path)
    one_line(res2, "eval.toml", "looks like a key itself (not shown)")
    for r in (res, res2):
        assert KEY not in r.stdout + r.stderr
    short = tmp_path / "short.toml"
    short.write_text('[llm]\napi_key_env = "MY KEY"\n', encoding="utf-8")
    one_line(frame(["build", "--config", str(short), "--release", "r", "--version", "0.1.0"], tmp_path),
             "'MY KEY' is not an environment variable name")  # fmt: skip


def test_a_data_folder_inside_a_release_is_refused_and_nothing_is_written_there(demo_release, tmp_path):
    release = tmp_path / "data" / "releases" / "demo" / "0.1.0"
    shutil.copytree(demo_release, release)
    before = tree(release)
    good = refresh_config(tmp_path, "good.toml").read_text(encoding="utf-8")
    data_line = f'data_dir = "{tmp_path / "data"}"'
    assert data_line in good
    build = tmp_path / "build.toml"
    build.write_text(good.replace(data_line, f'data_dir = "{release.as_posix()}"'), encoding="utf-8")
    res = frame(["build", "--config", str(build), "--release", "r", "--version", "0.1.0"], tmp_path)
    one_line(res, "field build.data_dir", "is inside the release demo/0.1.0: releases are immutable")
    evaluation = tmp_path / "eval.toml"
    evaluation.write_text(
        f'[build]\ndata_dir = "{(release / "work").as_posix()}"\n\n[systems.copy-sample]\nkind = "builtin"\n',
        encoding="utf-8",
    )
    res = frame(["score", "--release", str(release), "--config", str(evaluation), "--no-preflight"], tmp_path)
    one_line(res, "field build.data_dir", "releases are immutable")
    storage = tmp_path / "storage.toml"
    with_storage = good.replace("[run]\n", f'[run]\nresult_storage = "{(release / "cache").as_posix()}"\n')
    storage.write_text(with_storage, encoding="utf-8")
    res = frame(["build", "--config", str(storage), "--release", "r", "--version", "0.1.0"], tmp_path)
    one_line(res, "field run.result_storage", "releases are immutable")
    assert tree(release) == before
    verify = frame(["release", "verify", str(release)], tmp_path)
    assert verify.returncode == 0, verify.stdout + verify.stderr


@pytest.mark.skipif(not (CORPUS / "arxiv").is_dir(), reason="shared corpus not found")
def test_release_names_and_dates_of_refreshes_and_deployments_stay_in_the_data_folder(tmp_path):
    """`frame serve` and the refresh/build flows used to take any release name: "../../x" wrote the
    effective config outside the data folder before the build even ran; `--today 9999-12-31` ended in a
    traceback and 2205-01-01 planned 2,191 windows."""
    from flows.refresh import refresh_release
    from flows.release import build_and_publish

    cfg = refresh_config(tmp_path, "r.toml")
    for name in ("../../escaped", "/abs", "UPPER"):
        one_line(frame(["serve", "--config", str(cfg), "--release", name], tmp_path, timeout=60), "--release")
        one_line(
            frame(["refresh", "--config", str(cfg), "--release", name, "--dry-run"], tmp_path), "--release"
        )
    ran = threading.Event()

    def runner(*_a, **_k):  # the build must never start
        ran.set()
        return []

    for name in ("../../escaped", "/abs"):
        with pytest.raises(ConfigError, match="--release"):
            refresh_release(str(cfg), name, runner=runner)
        with pytest.raises(ConfigError, match="--release"):
            build_and_publish(load_config(cfg), [], name, "0.1.0", runner=runner)
    with pytest.raises(ConfigError, match="--version"):
        build_and_publish(load_config(cfg), [], "ok", "../1.0.0", runner=runner)
    assert not ran.is_set()
    assert not (tmp_path / "escaped").exists() and not Path("/abs").exists()
    assert not (tmp_path / "data" / "refresh").exists()  # nothing written before the name was checked
    for today in ("9999-12-31", "2205-01-01"):
        res = frame(
            ["refresh", "--config", str(cfg), "--release", "r", "--dry-run", "--today", today], tmp_path
        )
        one_line(res, "--today", "is after today's date")
