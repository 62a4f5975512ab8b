"""Issue 35 point 6: quiet by default. `frame score` on a terminal shows the leaderboard and where the scores
are, not Prefect's per-task INFO lines (they go to the run's log file, data/logs/score-*.log, with their run
names) and no analytics notice, even in a Prefect home that has never been used; `frame -v` shows them."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import ROOT, frame_env
from tests.test_score_openai_flow import write_release

FRAME = [sys.executable, "-m", "flows.cli"]
# What Prefect prints per flow and task run on its console (prefect/logging/logging.yml formats).
PREFECT_INFO = re.compile(r"\| INFO +\||Finished in state|Beginning flow run|Created task run|View at http")
ANALYTICS = re.compile(r"analytics|telemetry|anonymous usage", re.I)
# Prefect's SDK stays silent in CI (prefect._internal.analytics.ci_detection): a user's terminal is no CI.
CI_VARS = ("CI", "GITHUB_ACTIONS", "GITLAB_CI", "JENKINS_URL", "TRAVIS", "CIRCLECI", "BUILDKITE", "CI_NAME")


def _env(tmp: Path) -> dict[str, str]:
    env = frame_env(tmp / "fresh-prefect-home")  # a home Prefect has never seen: a new user's first run
    for k in ("FRAME_VERBOSE", "DO_NOT_TRACK", *CI_VARS):
        env.pop(k, None)
    return env | {"PYTHONPATH": str(ROOT), "TERM": "xterm", "COLUMNS": "120"}


def _on_a_terminal(args: list[str], env: dict[str, str], timeout: float = 240.0) -> tuple[int, str]:
    """Run `args` with stdout and stderr on a pty (an interactive terminal); returns (exit code, output)."""
    main, child = pty.openpty()
    proc = subprocess.Popen(args, stdin=child, stdout=child, stderr=child, env=env, cwd=ROOT)
    os.close(child)
    chunks, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            data = os.read(main, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(main)
    return proc.wait(timeout=30), b"".join(chunks).decode("utf-8", "replace")


# A program that fails on every instance: an expected failure, said in one line, never with a traceback.
BROKEN = """[systems.broken]
kind = "command"
command = ["sh", "-c", "echo no-report-today >&2; exit 3"]
timeout_s = 60
"""


def test_score_is_quiet_on_a_terminal_and_verbose_with_v(tmp_path):
    rel = write_release(tmp_path)  # tmp/data/releases/tiny/1.0.0
    logs = tmp_path / "data" / "logs"
    (tmp_path / "eval.toml").write_text(BROKEN, encoding="utf-8")
    score = ["score", "--release", str(rel), "--metrics", "rouge_l"]
    env = _env(tmp_path)

    both = ["--config", str(tmp_path / "eval.toml"), "--systems", "broken,copy-sample"]
    _, out = _on_a_terminal([*FRAME, *score, *both, "--out", str(tmp_path / "quiet")], env)
    assert "Leaderboard" in out and f"scores: {tmp_path / 'quiet'}" in out  # the summary
    assert not PREFECT_INFO.search(out), out[-3000:]
    assert not ANALYTICS.search(out), out[-3000:]
    # the failure is named by frame's own lines: no traceback, no engine lines about the failed task
    assert "exited with code 3: no-report-today" in out
    assert "Traceback" not in out and "Task run failed with" not in out, out[-3000:]
    (log,) = logs.glob("score-*.log")
    text = log.read_text(encoding="utf-8")
    # the log file keeps every task run's line, named as the terminal names them with -v, and the traceback
    task_line = r"INFO prefect\.task_runs Task run 'score · rouge · copy-sample · [^']+' - Finished"
    assert re.search(task_line, text)
    assert "Beginning flow run" in text
    assert "Task run 'generate · broken · " in text and "Traceback (most recent call last)" in text

    verbose = [*FRAME, "-v", *score, "--systems", "copy-sample", "--out", str(tmp_path / "loud")]
    loud = subprocess.run(verbose, capture_output=True, text=True, env=env, cwd=ROOT, timeout=240)
    assert loud.returncode == 0, loud.stderr[-3000:]
    said = loud.stdout + loud.stderr
    assert re.search(r"\| INFO +\| Task run 'score · rouge · copy-sample · [^']+' - Finished in state", said)
    assert not ANALYTICS.search(said)
