"""Where commands write, when pointed somewhere careless (issue 32, points 9 and 12), through the CLI."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CORPUS, frame_env
from tests.llm_server import LLMTestServer, chat_reply
from tests.test_hostile_endpoint import KEY_ENV, SECRET, eval_config, small_release

pytestmark = pytest.mark.skipif(not (CORPUS / "edgar").is_dir(), reason="shared corpus not found")

FRAME = str(Path(sys.executable).with_name("frame"))


def frame(args: list[str], tmp: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**frame_env(tmp / "ph"), KEY_ENV: SECRET}
    return subprocess.run([FRAME, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def test_out_inside_a_release_is_refused(demo_release, tmp_path):
    release = tmp_path / "data" / "releases" / "demo" / "0.1.0"
    shutil.copytree(demo_release, release)  # whole: `frame release verify` must still pass after
    before = tree(release)
    for args in (
        ["export-eval", "--release", str(release), "--out", str(release / "kit")],
        ["export-eval", "--release", str(release), "--out", str(release)],
        ["score", "--release", str(release), "--systems", "copy-sample", "--out", str(release / "scores")],
    ):
        res = frame(args, tmp_path, tmp_path)
        assert res.returncode == 2, (args, res.stderr[-2000:])
        assert res.stderr.strip().splitlines() == [
            f"frame: error: --out: {args[-1]} is inside the release 0.1.0: releases are immutable"
        ]
    assert tree(release) == before  # nothing written into it
    res = frame(["release", "verify", str(release)], tmp_path, tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr


def test_generate_keeps_its_cache_beside_the_release(demo_release, tmp_path):
    release = small_release(demo_release, tmp_path)  # tmp/data/releases/demo/0.1.0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with LLMTestServer() as server:
        server.default_chat = chat_reply(json.dumps({"report_markdown": "# Report\n\nText.\n"}))
        cfg = eval_config(tmp_path, {"remote": server.base_url})
        res = frame(
            ["generate", "--release", str(release), "--system", "remote", "--config", str(cfg)],
            tmp_path,
            elsewhere,
        )
        assert res.returncode == 0, res.stderr[-2000:]
        assert len(server.chat_requests) == 1
    assert list(elsewhere.iterdir()) == []  # nothing in the folder it ran from
    cached = list((tmp_path / "data" / "cache" / "llm").rglob("*.json"))
    assert len(cached) == 1  # beside the release's data folder
