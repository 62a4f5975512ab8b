"""Hostile submissions through `frame generate`, as a user runs it (issue 32, point 3): a report file that is
a symbolic link to a file outside the submission folder, a report file that is a FIFO, and a submission
`path` that is itself a FIFO or a device. Each ends in one error line naming the file (exit 2, nothing
written), never in a hang, and nothing from outside the folder reaches data/generations."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasks.release.evalkit import report_file_name
from tests.test_score_openai_flow import write_release

FRAME = str(Path(sys.executable).with_name("frame"))
MARKER = "SECRET-OUTSIDE-THE-SUBMISSION-7f3a"
A = "financial_quarterly/ACME-10-Q/t1->t2"  # write_release's instance
B = "financial_quarterly/ACME-10-Q/t0->t1"  # a second one, so that one bad report is seen per instance


def release(root: Path) -> Path:
    """A two-instance release (write_release's, plus a copy under another id)."""
    rel = write_release(root)
    table = pq.read_table(rel / "instances.parquet")
    rows = table.to_pylist()
    rows.append({**rows[0], "instance_id": B})
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), rel / "instances.parquet")
    return rel


def env(root: Path) -> dict[str, str]:
    out = {**os.environ, "PREFECT_HOME": str(root / "ph"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    out.pop("PREFECT_API_URL", None)
    return out


def generate(root: Path, path: str, more: str = "") -> subprocess.CompletedProcess:
    """`frame generate --system sub` with `[systems.sub] path = path` (+ `more`); a hang fails the test."""
    config = f'[systems.sub]\nkind = "submission"\npath = "{path}"\n{more}'
    (root / "eval.toml").write_text(config, encoding="utf-8")
    args = [FRAME, "generate", "--release", str(root / "data/releases/tiny/1.0.0"), "--system", "sub"]
    args += ["--config", str(root / "eval.toml")]
    try:
        return subprocess.run(args, capture_output=True, text=True, env=env(root), cwd=root, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("frame generate hung on a hostile submission")


def error_lines(res: subprocess.CompletedProcess) -> list[str]:
    assert res.returncode == 2, (res.returncode, res.stderr[-2000:], res.stdout[-500:])
    lines = res.stderr.strip().splitlines()
    assert lines and all(ln.startswith("frame: error: ") for ln in lines), res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    return lines


def stored(root: Path) -> bytes:
    """Every byte under data/generations."""
    base = root / "data" / "generations"
    return b"".join(p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()) if base.exists() else b""


def test_a_report_linked_to_a_file_outside_the_folder_is_refused(tmp_path):
    release(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text(f"# Not a report\n{MARKER}\n", encoding="utf-8")
    reports = tmp_path / "reports"
    (reports / "drafts").mkdir(parents=True)
    (reports / "drafts" / "final.md").write_text("# Report B\nkept inside the folder\n", encoding="utf-8")
    a, b = (reports / f"{report_file_name(i)}.md" for i in (A, B))
    a.symlink_to(secret)
    b.symlink_to(Path("drafts") / "final.md")  # a link that stays inside the folder is fine

    lines = error_lines(generate(tmp_path, "reports"))
    assert len(lines) == 1, lines  # instance A only
    assert str(a) in lines[0] and A in lines[0] and "outside the submission folder" in lines[0]
    assert MARKER.encode() not in stored(tmp_path)

    a.unlink()
    a.write_text("# Report A\n", encoding="utf-8")
    res = generate(tmp_path, "reports")
    assert res.returncode == 0, res.stderr[-2000:]
    out = pd.read_parquet(tmp_path / "data/generations/tiny/1.0.0/sub/generations.parquet")
    assert dict(zip(out.instance_id, out.markdown, strict=True)) == {
        A: "# Report A\n",
        B: "# Report B\nkept inside the folder\n",
    }
    assert MARKER.encode() not in stored(tmp_path)


def test_a_report_file_that_is_a_fifo_is_refused_without_blocking(tmp_path):
    release(tmp_path)
    reports = tmp_path / "reports"
    reports.mkdir()
    a = reports / f"{report_file_name(A)}.md"
    os.mkfifo(a)  # opening it for reading would wait for a writer forever
    (reports / f"{report_file_name(B)}.md").write_text("# Report B\n", encoding="utf-8")
    lines = error_lines(generate(tmp_path, "reports"))
    assert lines == [f"frame: error: {a}: instance {A}: not a regular file (a FIFO): refused"]
    assert not (tmp_path / "data" / "generations").exists()


@pytest.mark.parametrize("name", ["run.jsonl", "run.parquet", "device.jsonl"])
def test_a_submission_path_that_is_a_fifo_or_a_device_is_one_error_line(tmp_path, name):
    release(tmp_path)
    path = tmp_path / name
    if name.startswith("device"):
        path.symlink_to("/dev/null")  # the link is followed: the user's own link to a device is refused
        kind = "a character device"
    else:
        os.mkfifo(path)
        kind = "a FIFO"
    lines = error_lines(generate(tmp_path, name))
    # the config resolves its paths: the error names the file itself
    assert lines == [f"frame: error: {path.resolve()}: not a regular file or folder ({kind}): refused"]
    assert not (tmp_path / "data" / "generations").exists()


def test_a_huge_report_file_is_read_only_up_to_max_chars(tmp_path):
    release(tmp_path)
    reports = tmp_path / "reports"
    reports.mkdir()
    a = reports / f"{report_file_name(A)}.md"
    a.write_bytes(b"# A\n" + b"x" * 1_000_000)
    (reports / f"{report_file_name(B)}.md").write_text("# Report B\n", encoding="utf-8")
    lines = error_lines(generate(tmp_path, "reports", "max_chars = 100\n"))
    assert lines == [f"frame: error: {a}: instance {A}: report of more than 100 characters (max_chars 100)"]
