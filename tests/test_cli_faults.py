"""File-system faults and bad arguments end in one line on stderr and exit 2, before anything is written
(issue "Trust nothing on disk"): the commands that write, on a read-only folder and on a full disk (a tiny
tmpfs: mounted when the tests run as root, skipped otherwise); `--out .`/`..`/a file; an unusable release
name or version before any step; a corrupt run record; a boolean where a number belongs; where `frame
score` keeps its data. (Help text at 80 columns: tests/test_cli_terminal.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from schemas.scoring import EVIDENCE_SCHEMA
from tests.conftest import CORPUS, frame_env
from tests.test_score_openai_flow import write_release

FRAME = str(Path(sys.executable).with_name("frame"))
PAPER = CORPUS / "arxiv" / "large-language-models" / "2412.19437.html"  # small: grounds in ~1 s
pytestmark = pytest.mark.skipif(not PAPER.is_file(), reason="shared corpus not found")


def run(args: list[str], tmp: Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [FRAME, *args], capture_output=True, text=True, env=frame_env(tmp / "ph"), cwd=cwd, timeout=300
    )


def one_line(res: subprocess.CompletedProcess, *needles: str) -> str:
    err = res.stderr.strip()
    assert res.returncode == 2, (res.returncode, res.stderr[-2000:], res.stdout[-500:])
    assert "\n" not in err and err.startswith("frame: error: "), err
    assert "Traceback" not in res.stdout + res.stderr
    for n in needles:
        assert n in err, err
    return err


def mount(where: Path, size: str, readonly_after=None) -> Path:
    """A tmpfs of `size` at `where`; `readonly_after(where)` fills it, then it is remounted read-only."""
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    if readonly_after is not None:
        readonly_after(where)
        assert subprocess.run(["mount", "-o", "remount,ro", str(where)]).returncode == 0
    return where


@pytest.fixture
def mounts(tmp_path):
    made: list[Path] = []

    def make(name: str, size: str, fill=None) -> Path:
        made.append(mount(tmp_path / name, size, fill))
        return made[-1]

    yield make
    for m in reversed(made):
        subprocess.run(["umount", "-l", str(m)])


CONFIG = """[build]
data_dir = "{data}"
[source]
mode = "mirror"
mirror = "{corpus}"
[[domains]]
kind = "arxiv"
name = "llm"
category = "academic_simple"
topic = "large-language-models"
query = "cat:cs.CL"
papers_per_window = {papers}
windows = [
  {{ label = "W1", start = "2023-01-01", end = "2023-12-31" }},
  {{ label = "W2", start = "2024-01-01", end = "2024-12-31" }},
]
"""


def config(tmp: Path, data: Path, papers: str = "2") -> Path:
    path = tmp / "build.toml"
    path.write_text(CONFIG.format(data=data, corpus=CORPUS, papers=papers), encoding="utf-8")
    return path


def evidence(folder: Path) -> Path:
    """A scoring folder holding one coverage evidence row (what `frame annotate` samples from)."""
    folder.mkdir(parents=True, exist_ok=True)
    row = {f.name: None for f in EVIDENCE_SCHEMA}
    row.update(item_id="i|s|coverage|0", instance_id="i", system="s", metric="coverage", index=0)
    row.update(kind="statistic", text="Revenue rose.", score=1.0, judge="offline")
    pq.write_table(pa.Table.from_pylist([row], schema=EVIDENCE_SCHEMA), folder / "evidence.parquet")
    return folder


def test_every_writing_command_on_a_read_only_folder_fails_in_one_line(tmp_path, mounts):
    def fill(root: Path) -> None:
        write_release(root)  # root/data/releases/tiny/1.0.0
        evidence(root / "scores")

    ro = mounts("ro", "4m", fill)
    rel = ro / "data" / "releases" / "tiny" / "1.0.0"
    cfg = config(tmp_path, ro / "data")
    cases = {
        "ground": ["ground", str(PAPER), "--out", str(ro / "g")],
        "build": ["build", "--config", str(cfg), "--release", "r", "--version", "1.0.0"],
        "rerun": ["rerun", "structure", "--domain", "llm", "--snapshot", "W1", "--config", str(cfg)],
        "refresh": ["refresh", "--config", str(cfg), "--release", "r", "--today", "2025-01-01"],
        "generate": ["generate", "--release", str(rel), "--system", "copy-sample"],
        "score": [
            "score",
            "--release",
            str(rel),
            "--systems",
            "copy-sample",
            "--metrics",
            "text_edit_distance",
        ],
        "annotate": ["annotate", "--scores", str(ro / "scores"), "--out", str(ro / "a"), "--n", "1"],
    }
    for name, args in cases.items():
        err = one_line(run(args, tmp_path), "Read-only file system")
        assert str(tmp_path) in err or "ro" in err, (name, err)


def test_a_full_disk_fails_in_one_line_and_leaves_no_temp_files(tmp_path, mounts):
    tiny = mounts("tiny", "8k")  # two pages
    one_line(run(["ground", str(PAPER), "--out", str(tiny / "g")], tmp_path), "No space left on device", "g")
    rel = write_release(tmp_path)
    big = evidence(tmp_path / "scores")
    one_line(run(["annotate", "--scores", str(big), "--out", str(tiny / "a"), "--n", "1"], tmp_path))
    left = [p for p in tiny.rglob("*") if ".tmp" in p.name or ".old" in p.name or p.name == "g"]
    assert not left, left  # no temp file, no half grounding folder
    assert rel.is_dir()


def test_out_must_name_a_folder_to_write(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("keep me", encoding="utf-8")
    one_line(run(["ground", str(PAPER), "--out", "."], tmp_path, cwd=tmp_path), "--out", "working folder")
    one_line(run(["ground", str(PAPER), "--out", ".."], tmp_path, cwd=tmp_path), "--out")
    one_line(run(["ground", str(PAPER), "--out", str(afile)], tmp_path), "is a file")
    assert afile.read_text() == "keep me" and sorted(
        p.name for p in tmp_path.iterdir() if p.name != "ph"
    ) == ["afile"]


def test_release_name_and_version_are_checked_before_any_step(tmp_path):
    data = tmp_path / "data"
    args = ["build", "--config", str(config(tmp_path, data)), "--release", "Bad Name", "--version", "../../x"]
    one_line(run(args, tmp_path), "--release", "'Bad Name'")
    args[-3:] = ["ok", "--version", "../../x"]
    one_line(run(args, tmp_path), "--version", "semver")
    assert not data.exists()  # nothing fetched, grounded or logged


def test_a_boolean_is_not_a_count(tmp_path):
    cfg = config(tmp_path, tmp_path / "data", papers="true")
    err = one_line(
        run(["build", "--config", str(cfg), "--release", "r", "--version", "1.0.0", "--dry-run"], tmp_path)
    )
    assert "papers_per_window" in err and "boolean" in err


def test_status_on_a_corrupt_run_record(tmp_path):
    runs = tmp_path / "data" / "runs"
    runs.mkdir(parents=True)
    (runs / "latest.json").write_text('{"kind": "bu', encoding="utf-8")
    one_line(run(["status", "--data", str(tmp_path / "data")], tmp_path), "latest.json", "not a run record")
    (runs / "latest.json").write_text(json.dumps({"kind": "build", "steps": []}), encoding="utf-8")
    one_line(run(["status", "--data", str(tmp_path / "data")], tmp_path), "latest.json", "not a run record")


def test_score_keeps_its_data_where_configured_never_above_the_release(tmp_path, monkeypatch):
    from flows.cli import _data_folder

    monkeypatch.delenv("FRAME_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    inside = tmp_path / "d" / "releases" / "tiny" / "1.0.0"
    assert _data_folder(inside, None) == tmp_path / "d"  # a release of a data folder: that folder
    loose = tmp_path / "x" / "y" / "1.0.0"
    assert _data_folder(loose, None) == Path("data")  # anywhere else: ./data, not its grandparent
    assert _data_folder(Path("/rel"), None) == Path("data")
    from tasks.generate.runs import runs_folder

    # generations of a loose release: ./data, never /generations (its grandparent's folder)
    assert runs_folder(loose, "s") == Path("data", "generations", "y", "1.0.0", "s")
    assert runs_folder(inside, "s") == tmp_path / "d" / "generations" / "tiny" / "1.0.0" / "s"
    assert _data_folder(inside, tmp_path / "cfg") == tmp_path / "cfg"
    monkeypatch.setenv("FRAME_DATA_DIR", str(tmp_path / "env"))
    assert _data_folder(inside, None) == tmp_path / "env"
    # not a release: nothing is created anywhere before that is said
    (loose).mkdir(parents=True)
    before = sorted(tmp_path.rglob("*"))
    one_line(
        run(["score", "--release", str(loose), "--systems", "copy-sample"], tmp_path), "instances.parquet"
    )
    assert sorted(p for p in tmp_path.rglob("*") if "ph" not in p.parts) == [
        p for p in before if "ph" not in p.parts
    ]


def test_a_long_doctype_does_not_hide_the_kind_of_file(tmp_path):
    from tasks.sources import detect_kind

    filing = (CORPUS / "edgar" / "AAPL" / "10-Q" / "2025-06-28.htm").read_bytes()
    at = filing.index(b"<html")
    entities = b"".join(b'<!ENTITY e%d "%s">' % (k, b"x" * 50) for k in range(20_000))  # ~1.4 MB
    laughs = b'<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
    bloated = filing[:at] + b"<!DOCTYPE html [" + laughs + entities + b"]>" + filing[at:]
    assert detect_kind(bloated, "f.htm") == detect_kind(filing, "f.htm") == "edgar"


def test_outputs_get_the_usual_permissions(tmp_path):
    """One policy for every output: files 0666 and folders 0777 less the umask (no 0600 temp-file modes)."""
    from tasks.atomic import DIR_MODE, FILE_MODE, atomic_write_text
    from tasks.ground.documents import write_grounding
    from tasks.sources import ground_source

    out = write_grounding(ground_source(PAPER.read_bytes(), PAPER.name), tmp_path / "g")
    modes = {p.name: p.stat().st_mode & 0o777 for p in [out, *out.iterdir()]}
    assert modes.pop("g") == DIR_MODE and set(modes.values()) == {FILE_MODE}, modes
    assert atomic_write_text(tmp_path / "r" / "report.md", "x").stat().st_mode & 0o777 == FILE_MODE


def test_a_disk_that_fills_up_while_the_release_is_written(tmp_path, mounts):
    """Build once on a small tmpfs, fill what is left, build a new version (every step cached, only the
    release is new): one line, exit 2, no partial release, the first release intact."""
    disk = mounts("disk", "24m")
    cfg = config(tmp_path, disk / "data", papers="1")
    first = run(["build", "--config", str(cfg), "--release", "r", "--version", "1.0.0"], tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    (disk / "filler").write_bytes(b"\0" * max(free - 64 * 1024, 0))
    res = run(["build", "--config", str(cfg), "--release", "r", "--version", "1.0.1"], tmp_path)
    one_line(res, "No space left on device", "releases/r/1.0.1")
    releases = disk / "data" / "releases" / "r"
    assert sorted(p.name for p in releases.iterdir()) == ["1.0.0"]  # nothing half-written beside it
    (disk / "filler").unlink()
    assert run(["release", "verify", str(releases / "1.0.0")], tmp_path).returncode == 0


def test_input_errors_survive_pickling():
    # a domain's failure comes back from a Dask worker pickled: its one-line message must survive
    import pickle

    from tasks.errors import ConfigError, FrameInputError
    from tasks.release.write import IdenticalReleaseError

    for cls in (FrameInputError, ConfigError, IdenticalReleaseError):
        err = pickle.loads(pickle.dumps(cls("configs/x.toml", "bad value")))
        assert type(err) is cls and str(err) == "configs/x.toml: bad value" and err.where == "configs/x.toml"
