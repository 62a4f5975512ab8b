"""Hostile command systems through `frame generate`, as a user runs it (issue 32, points 4 and 5): a program
that prints or writes far more than max_chars is stopped at once and its instance fails with one line,
nothing of the flood stored; an `output` file that is a link outside the folder or a FIFO is refused; and
nothing a program started (a background child, a double-forked child in a session of its own) is alive
once `frame generate` returns, whether the program succeeded or failed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pandas as pd
import pytest

from tasks.generate.command import MAX_CHARS
from tests.test_score_openai_flow import write_release

FRAME = str(Path(sys.executable).with_name("frame"))
PY = Path(sys.executable).as_posix()
IID = "financial_quarterly/ACME-10-Q/t1->t2"  # write_release's instance
DOUBLE_FORK = """import os, sys, time
pid_file = sys.argv[1]
if os.fork() == 0:
    os.setsid()  # a session of its own: out of the program's process group and session
    if os.fork() == 0:
        with open(pid_file + ".tmp", "w") as fh:
            fh.write(str(os.getpid()))
        os.rename(pid_file + ".tmp", pid_file)
        time.sleep(300)  # still holds stdout
    os._exit(0)
while not os.path.exists(pid_file):
    time.sleep(0.01)
print("# Report")
sys.exit(int(sys.argv[3]))
"""


GROWING = """import time
f = open("report.md", "w")
while True:
    f.write("y" * 1_000_000)
    time.sleep(0.002)
"""


def processes_with(marker: str) -> list[int]:
    """Live processes (not zombies) whose command line holds `marker`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            state = Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state not in (b"Z", b"X"):
            found.append(int(name))
    return found


@pytest.fixture
def marker():
    """A unique argv word for the programs of one test; whatever still carries it is killed afterwards."""
    mark = f"frame-hostile-{uuid.uuid4().hex}"
    yield mark
    for pid in processes_with(mark):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def generate(root: Path, system: str) -> tuple[subprocess.CompletedProcess, float]:
    """`frame generate --system NAME` with root/eval.toml; a hang fails the test (120 s)."""
    rel = root / "data" / "releases" / "tiny" / "1.0.0"
    if not rel.exists():
        write_release(root)
    env = {**os.environ, "PREFECT_HOME": str(root / "ph"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    args = [FRAME, "generate", "--release", str(rel), "--system", system, "--config", str(root / "eval.toml")]
    start = time.monotonic()
    try:
        res = subprocess.run(args, capture_output=True, text=True, env=env, cwd=root, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail(f"frame generate --system {system} hung")
    return res, time.monotonic() - start


def config(root: Path, systems: dict[str, tuple[list[str], str]]) -> None:
    """root/eval.toml: one command system per name (argv, output), timeout_s 600 (never what stops them)."""
    text = ""
    for name, (argv, output) in systems.items():
        # a JSON string is a TOML basic string
        text += f'[systems.{name}]\nkind = "command"\ncommand = {json.dumps(argv)}\ntimeout_s = 600\n'
        text += f'output = "{output}"\n\n'
    (root / "eval.toml").write_text(text, encoding="utf-8")


def failed_with(root: Path, system: str, res: subprocess.CompletedProcess) -> str:
    """The one error of the instance: the stderr line and the row of generations.parquet agree."""
    assert res.returncode == 1, (res.returncode, res.stderr[-2000:])
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("frame: error: ")]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr[-2000:]
    out = root / "data" / "generations" / "tiny" / "1.0.0" / system
    rows = pd.read_parquet(out / "generations.parquet")
    assert list(rows.instance_id) == [IID] and list(rows.markdown) == [""]
    assert lines[0] == f"frame: error: generate {system}: {IID}: {rows.error[0]}"
    assert not (out / "reports").exists()  # nothing half-written
    assert sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) < 100_000
    return rows.error[0]


@pytest.mark.parametrize(
    ("program", "output"),
    [
        ("import sys; sys.stdout.write('x' * 50_000_000)", "stdout"),  # 50 MB at once
        ("import sys\nwhile True: sys.stdout.write('x' * 1_000_000)", "stdout"),  # without end
        # a file that grows without end (a little slower than a disk: the test does not fill it)
        (GROWING, "report.md"),
    ],
    ids=["stdout-50mb", "stdout-endless", "output-file-endless"],
)
def test_a_flood_of_output_is_stopped_at_max_chars(tmp_path, marker, program, output):
    config(tmp_path, {"flood": ([PY, "-c", program, marker], output)})
    res, took = generate(tmp_path, "flood")
    error = failed_with(tmp_path, "flood", res)
    where = "printed" if output == "stdout" else "wrote"
    assert error.startswith(f"{where} more than {MAX_CHARS} characters")
    assert f"(max_chars {MAX_CHARS})" in error and (output == "stdout" or "to report.md" in error)
    assert took < 60  # stopped by the cap, not by the 600 s timeout
    assert processes_with(marker) == []


def test_an_output_file_outside_the_folder_or_a_fifo_is_refused(tmp_path, marker):
    secret = tmp_path / "secret.txt"
    secret.write_text("# Secret\nSECRET-OF-THE-HOST\n", encoding="utf-8")
    config(
        tmp_path,
        {
            "link": (["ln", "-s", str(secret), "report.md"], "report.md"),
            "fifo": ([PY, "-c", "import os; os.mkfifo('report.md')", marker], "report.md"),
        },
    )
    res, _ = generate(tmp_path, "link")
    outside = "report.md leads outside its folder (a symbolic link): refused"
    assert failed_with(tmp_path, "link", res) == outside
    res, _ = generate(tmp_path, "fifo")
    assert failed_with(tmp_path, "fifo", res) == "report.md is not a regular file (a FIFO): refused"
    generations = tmp_path / "data" / "generations"
    assert not any(b"SECRET-OF-THE-HOST" in p.read_bytes() for p in generations.rglob("*") if p.is_file())


def test_nothing_a_program_started_outlives_its_instance(tmp_path, marker):
    sleeper = f"'{PY}' -c 'import time; time.sleep(300)' {marker}"
    (tmp_path / "double_fork.py").write_text(DOUBLE_FORK, encoding="utf-8")
    pid_files = {code: tmp_path / f"grandchild-{code}.pid" for code in (0, 3)}
    config(
        tmp_path,
        {
            # background children, one holding stdout, one not; the program succeeds
            "background": (["sh", "-c", f"{sleeper} > /dev/null 2>&1 & echo '# Report'"], "stdout"),
            "holding": (["sh", "-c", f"{sleeper} & echo '# Report'"], "stdout"),
            # the same after a failure
            "failing": (["sh", "-c", f"{sleeper} > /dev/null 2>&1 & echo boom >&2; exit 3"], "stdout"),
            # a grandchild that double-forked and called setsid, holding stdout: success, then failure
            "escaping": ([PY, "double_fork.py", str(pid_files[0]), marker, "0"], "stdout"),
            "escaping-failing": ([PY, "double_fork.py", str(pid_files[3]), marker, "3"], "stdout"),
        },
    )
    for system in ("background", "holding", "escaping"):
        res, took = generate(tmp_path, system)
        assert res.returncode == 0, (system, res.stderr[-2000:])
        report = tmp_path / "data/generations/tiny/1.0.0" / system / "reports"
        assert [p.read_text(encoding="utf-8") for p in report.iterdir()] == ["# Report\n"], system
        assert took < 60, system  # a child holding stdout does not hold frame until the timeout
        assert processes_with(marker) == [], system
    for system in ("failing", "escaping-failing"):
        res, _ = generate(tmp_path, system)
        assert failed_with(tmp_path, system, res).startswith("exited with code 3: ")
        assert processes_with(marker) == [], system
    for pid_file in pid_files.values():  # the grandchildren did start, and are gone
        pid = int(pid_file.read_text())
        assert pid not in processes_with(marker)


ENV_DUMP = """import json, os
print("# Env\\n\\n" + json.dumps(sorted(os.environ)) + "\\n\\n" + json.dumps(os.environ.get("PASSED", "")))
"""


def test_a_program_gets_no_key_or_credential_of_frames_environment(tmp_path):
    """A command system used to inherit frame's whole environment: every API key, token and cloud
    credential of the user's shell. Now it gets a fixed allow-list (PATH, HOME, locale, ...), what
    `pass_env` names and `env`; a glob of `pass_env` never matches a key the config names."""
    (tmp_path / "dump.py").write_text(ENV_DUMP, encoding="utf-8")
    judge_key = f"sk-judge-{uuid.uuid4().hex}"
    text = (
        '[judge]\nbackend = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
        'api_key_env = "HOSTILE_JUDGE_KEY"\n\n'
    )
    for name, pass_env, passed in [
        ("plain", [], "MY_PLAIN"),
        ("globbed", ["HF_*", "*KEY*", "AWS_*"], "MY_PLAIN"),
        ("named", ["HOSTILE_JUDGE_KEY"], "HOSTILE_JUDGE_KEY"),
    ]:
        text += f'[systems.{name}]\nkind = "command"\ncommand = ["{PY}", "dump.py"]\n'
        text += f'pass_env = {json.dumps(pass_env)}\nenv = {{ PASSED = "{passed}" }}\n\n'
    (tmp_path / "eval.toml").write_text(text, encoding="utf-8")
    shell = {
        "HOSTILE_JUDGE_KEY": judge_key,
        "AWS_SECRET_ACCESS_KEY": "aws-secret-value",
        "GITHUB_TOKEN": "ghp-token-value",
        "HF_HOME": str(tmp_path / "hf"),
        "LC_ALL": "C.UTF-8",
    }
    seen = {}
    for system in ("plain", "globbed", "named"):
        with pytest.MonkeyPatch.context() as mp:
            for k, v in shell.items():
                mp.setenv(k, v)
            res, _ = generate(tmp_path, system)
        assert res.returncode == 0, (system, res.stderr[-2000:])
        reports = tmp_path / "data/generations/tiny/1.0.0" / system / "reports"
        body = [p.read_text(encoding="utf-8") for p in reports.iterdir()][0].split("\n\n")
        seen[system] = set(json.loads(body[1]))
        assert json.loads(body[2]) == ("MY_PLAIN" if system != "named" else "HOSTILE_JUDGE_KEY")
        assert {"PATH", "HOME", "LC_ALL", "FRAME_INSTANCE_DIR"} <= seen[system], system
        assert judge_key not in res.stdout + res.stderr
        for f in (tmp_path / "data").rglob("*"):
            if f.is_file():
                assert judge_key.encode() not in f.read_bytes(), f
    hostile = {"HOSTILE_JUDGE_KEY", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "HF_HOME"}
    assert not seen["plain"] & hostile  # nothing of the shell's credentials by default
    # the globs pass what they name, but never the judge's key the config names
    assert seen["globbed"] & hostile == {"AWS_SECRET_ACCESS_KEY", "HF_HOME"}
    # an exact name passes even a key (the user's explicit choice)
    assert seen["named"] & hostile == {"HOSTILE_JUDGE_KEY"}
