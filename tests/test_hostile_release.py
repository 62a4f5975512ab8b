"""Hostile release folders through the CLI, as a user runs it on a release someone else made (issue 32,
"Contain what users bring"): FIFOs and symbolic links among its members, manifest entries that point out of
it, decompression bombs, malformed JSON and parquet, and names made to rewrite the terminal.

Every case copies the demo release into tmp_path, damages the copy, and runs `frame` as a subprocess with a
time limit (a hang fails the test). Each ends in the expected exit code with `frame: error:` lines naming the
file and what is wrong, never a traceback; nothing of a file outside the release (a marker string) reaches
what frame prints or writes, and nothing in the release folder is written.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from schemas.release import STATS_SCHEMA
from tests.conftest import ROOT, frame_env

FRAME = str(Path(sys.executable).with_name("frame"))
MARKER = "SECRET-OUTSIDE-THE-RELEASE-5b1e9c"
DEMO = ROOT / "data" / "releases" / "demo" / "0.1.0"
GIB = 1 << 30


# ---------------------------------------------------------------- harness


@dataclass
class Run:
    rc: int
    out: str
    err: str
    seconds: float
    max_rss: int  # bytes, of the frame process


@dataclass
class Case:
    tmp: Path
    release: Path  # tmp/data/releases/demo/0.1.0, a copy of the demo release
    clean: Path  # an untouched copy (tmp/clean/releases/demo/0.1.0), the other side of a diff
    outside: Path  # tmp/outside: files the release must never lead frame to

    def frame(self, *args: str, limit: float = 60) -> Run:
        """`frame ARGS` in tmp, its time and peak memory; more than `limit` seconds fails the test."""
        out, err = self.tmp / ".stdout", self.tmp / ".stderr"
        env = frame_env(self.tmp / "ph")
        with out.open("wb") as fo, err.open("wb") as fe:
            started = time.monotonic()
            proc = subprocess.Popen(
                [FRAME, *args], stdout=fo, stderr=fe, stdin=subprocess.DEVNULL, cwd=self.tmp, env=env,
                start_new_session=True,
            )  # fmt: skip
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                if time.monotonic() - started > limit:
                    os.killpg(proc.pid, signal.SIGKILL)  # its own session: only what this test started
                    os.wait4(proc.pid, 0)
                    proc.returncode = -9
                    pytest.fail(f"frame {' '.join(args)} still running after {limit} s (a hang)")
                time.sleep(0.02)
            proc.returncode = os.waitstatus_to_exitcode(status)
        return Run(
            proc.returncode,
            out.read_text(encoding="utf-8", errors="replace"),
            err.read_text(encoding="utf-8", errors="replace"),
            time.monotonic() - started,
            usage.ru_maxrss * 1024,
        )


def listing(folder: Path) -> dict[str, tuple[int, int, int]]:
    """Every entry below `folder` (links and FIFOs not followed, nothing opened): mode, size, mtime."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = os.lstat(p)
            out[p.relative_to(folder).as_posix()] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out


def written_bytes(case: Case) -> bytes:
    """Every regular file frame may have written under tmp: not the outside folder, nor the releases
    (`listing` shows them unchanged), nor this harness's stdout/stderr files; links and FIFOs are never
    followed or opened."""
    chunks = []
    skip = {case.outside, case.release, case.clean}
    for dirpath, dirnames, filenames in os.walk(case.tmp):
        dirnames[:] = [d for d in dirnames if Path(dirpath, d) not in skip]
        for name in filenames:
            p = Path(dirpath) / name
            if p.parent == case.tmp and name in (".stdout", ".stderr"):
                continue
            st = os.lstat(p)
            if p.is_file() and not p.is_symlink() and st.st_size < 64 << 20:
                chunks.append(p.read_bytes())
    return b"".join(chunks)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def manifest(release: Path) -> dict:
    return json.loads((release / "manifest.json").read_text(encoding="utf-8"))


def save(release: Path, m: dict) -> None:
    (release / "manifest.json").write_text(json.dumps(m, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def rehash(release: Path, m: dict | None = None) -> dict:
    """The manifest's sha256 of every listed file as it is now (links followed, as a careless tool would),
    so that only what the test is about is wrong with the release."""
    m = m or manifest(release)
    for rel in m["files"]:
        p = release / rel
        if p.is_file():
            m["files"][rel] = sha(p)
    for entry in m["tables"].values():
        if entry["file"] in m["files"]:
            entry["sha256"] = m["files"][entry["file"]]
    save(release, m)
    return m


def one_line(run: Run, *names: str, rc: int = 2) -> str:
    """The run ended with exit `rc` and exactly one `frame: error:` line naming each of `names`."""
    assert run.rc == rc, (run.rc, run.err[-2000:], run.out[-500:])
    lines = run.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("frame: error: "), run.err[-2000:]
    assert "Traceback" not in run.err + run.out
    for name in names:
        assert name in lines[0], (name, lines[0])
    assert len(lines[0]) < 1000
    return lines[0]


def failed_check(run: Run, release: Path, *phrases: str) -> list[str]:
    """`frame release verify` failed its check (exit 1): every stderr line a `frame: error:` line, the
    phrases among them, stdout `PATH: FAILED`."""
    assert run.rc == 1, (run.rc, run.err[-2000:], run.out[-500:])
    lines = run.err.strip().splitlines()
    assert lines and all(ln.startswith("frame: error: ") for ln in lines), run.err[-2000:]
    assert "Traceback" not in run.err + run.out
    assert run.out.strip().splitlines() == [f"{release}: FAILED"]
    for phrase in phrases:
        assert any(phrase in ln for ln in lines), (phrase, lines)
    return lines


def contained(case: Case, before: dict, *runs: Run) -> None:
    """Nothing of the outside folder was printed or written, and the release folder is unchanged."""
    for run in runs:
        assert MARKER not in run.out + run.err
    assert MARKER.encode() not in written_bytes(case)
    assert listing(case.release) == before


@pytest.fixture
def case(request, tmp_path) -> Case:
    demo = DEMO if (DEMO / "manifest.json").is_file() else request.getfixturevalue("demo_release")
    release = tmp_path / "data" / "releases" / "demo" / "0.1.0"
    clean = tmp_path / "clean" / "releases" / "demo" / "0.1.0"
    shutil.copytree(demo, release)
    shutil.copytree(demo, clean)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(f"# Private notes\n{MARKER}\n", encoding="utf-8")
    # a valid instances table whose every text is the marker: read, it would show up in generations
    table = pq.read_table(release / "instances.parquet")
    for col in ("sample_markdown", "target_markdown"):
        i = table.schema.get_field_index(col)
        table = table.set_column(i, table.schema.field(i), pa.array([f"# {MARKER}\n"] * table.num_rows))
    pq.write_table(table, outside / "instances.parquet")
    m = manifest(release)
    m["code_version"] = MARKER
    (outside / "manifest.json").write_text(json.dumps(m), encoding="utf-8")
    os.mkfifo(outside / "fifo")
    return Case(tmp_path, release, clean, outside)


def commands(case: Case) -> dict[str, list[str]]:
    """Every command that takes a release folder, on the case's release."""
    rel = str(case.release)
    return {
        "release verify": ["release", "verify", rel],
        "release diff": ["release", "diff", str(case.clean), rel],
        "qa gold": ["qa", "gold", "--release", rel],
        "export-eval": ["export-eval", "--release", rel, "--out", str(case.tmp / "kit")],
        "split": ["split", "--release", rel],
        "generate": ["generate", "--release", rel, "--system", "copy-sample"],
        "score": ["score", "--dry-run", "--release", rel, "--systems", "copy-sample"],
    }


# ---------------------------------------------------------------- H1: FIFOs


def test_a_fifo_manifest_or_a_link_to_one_is_refused_by_every_command_without_blocking(case):
    (case.release / "manifest.json").unlink()
    os.mkfifo(case.release / "manifest.json")
    before = listing(case.release)
    runs = []
    for name, args in commands(case).items():
        run = case.frame(*args, limit=30)
        line = one_line(run, "manifest.json", "FIFO")
        assert line.endswith("not a regular file (a FIFO): refused, never opened"), (name, line)
        runs.append(run)
    assert not (case.tmp / "kit").exists() and not (case.tmp / "data" / "generations").exists()
    assert not (case.release.parent / "0.1.0.splits.json").exists()
    assert listing(case.release) == before

    # `frame score` names its release at the end (tasks/score/outputs.py): never by opening a FIFO
    from tasks.score.outputs import _file_sha, release_id

    assert release_id(case.release) == "demo/0.1.0"
    assert _file_sha(case.release / "manifest.json") is None

    (case.release / "manifest.json").unlink()
    (case.release / "manifest.json").symlink_to(case.outside / "fifo")
    before = listing(case.release)
    for name in ("release verify", "generate"):
        run = case.frame(*commands(case)[name], limit=30)
        one_line(run, "manifest.json", "a symbolic link", "refused")
        runs.append(run)
    contained(case, before, *runs)


def test_a_fifo_anywhere_in_the_release_is_reported_never_opened(case):
    """An unlisted FIFO used to be ignored (`verify` said ok); a listed one hung every reader."""
    from tasks.release.verify import verify_release

    os.mkfifo(case.release / "extra.fifo")
    before = listing(case.release)
    runs = [case.frame("release", "verify", str(case.release))]
    one_line(runs[-1], "extra.fifo", "not a regular file (a FIFO)")
    # without the CLI's gate, verify_release itself lists it (and every other non-regular member)
    report = verify_release(case.release)
    assert not report.ok
    assert "extra.fifo: a FIFO: a release holds only regular files (not read)" in report.problems
    contained(case, before, *runs)

    (case.release / "reports.parquet").unlink()
    os.mkfifo(case.release / "reports.parquet")  # a listed table
    before = listing(case.release)
    runs.append(case.frame("qa", "gold", "--release", str(case.release)))
    one_line(runs[-1], "extra.fifo: not a regular file (a FIFO)", "(and 1 more not regular: reports.parquet)")
    problems = verify_release(case.release).problems
    assert "reports.parquet: a FIFO: a release holds only regular files (not read)" in problems
    contained(case, before, *runs)

    (case.release / "extra.fifo").unlink()
    (case.release / "instances.parquet").unlink()
    os.mkfifo(case.release / "instances.parquet")  # the table every system reads: named, not "missing"
    before = listing(case.release)
    for args in (["generate", "--system", "copy-sample"], ["score", "--systems", "copy-sample", "--dry-run"]):
        runs.append(case.frame(args[0], "--release", str(case.release), *args[1:]))
        one_line(runs[-1], "instances.parquet: not a regular file (a FIFO)")
    contained(case, before, *runs)


# ---------------------------------------------------------------- H2: table files out of the release


@pytest.mark.parametrize(
    "file",
    ["{outside}/instances.parquet", "../../../../outside/instances.parquet", "sub", "/usr", "/"],
    ids=["absolute", "dotdot", "folder", "usr", "root"],
)
def test_a_table_file_outside_the_release_or_a_folder_is_never_read(case, file):
    (case.release / "sub").mkdir()
    shutil.copy(case.release / "instances.parquet", case.release / "sub" / "instances.parquet")
    m = manifest(case.release)
    m["tables"]["instances"]["file"] = file.format(outside=case.outside)
    m["files"]["sub/instances.parquet"] = sha(case.release / "sub" / "instances.parquet")
    save(case.release, m)
    before = listing(case.release)

    verify = case.frame("release", "verify", str(case.release), limit=20)
    failed_check(verify, case.release, "manifest.json: invalid: ", "tables.instances.file")
    diff = case.frame("release", "diff", str(case.clean), str(case.release), limit=20)
    one_line(diff, "manifest.json", "invalid manifest", "tables.instances.file")
    for run in (verify, diff):
        assert run.max_rss < GIB, run.max_rss  # pyarrow used to read all of /usr (1.2 GB)
    contained(case, before, verify, diff)


def test_a_table_file_the_manifest_does_not_list_is_not_read(case):
    (case.release / "instances.parquet").write_bytes(b"PAR1 not a parquet file: read, it would say so")
    m = manifest(case.release)
    del m["files"]["instances.parquet"]
    save(case.release, m)
    before = listing(case.release)

    verify = case.frame("release", "verify", str(case.release))
    lines = failed_check(
        verify,
        case.release,
        "instances.parquet: table instances file not listed in manifest.json files (not read)",
    )
    assert not any("unreadable" in ln or "instances:" in ln for ln in lines)  # never opened as a table
    diff = case.frame("release", "diff", str(case.clean), str(case.release))
    one_line(diff, "instances.parquet", "not listed in manifest.json files: refused")
    contained(case, before, verify, diff)


# ---------------------------------------------------------------- H3: symbolic links


def _link(case: Case, member: str, target: Path) -> None:
    (case.release / member).unlink()
    (case.release / member).symlink_to(target)
    rehash(case.release)  # a manifest that matches what the links lead to: verify used to say ok


@pytest.mark.parametrize("member", ["manifest.json", "README.md", "instances.parquet", "sub", "sparse"])
def test_symbolic_links_in_a_release_are_refused_never_followed(case, member):
    if member == "manifest.json":
        (case.release / "manifest.json").unlink()
        (case.release / "manifest.json").symlink_to(case.outside / "manifest.json")
        name = "manifest.json"
    elif member == "README.md":
        _link(case, "README.md", case.outside / "secret.txt")
        name = "README.md"
    elif member == "instances.parquet":
        _link(case, "instances.parquet", case.outside / "instances.parquet")
        name = "instances.parquet"
    elif member == "sub":
        (case.release / "sub").symlink_to(case.outside)
        m = manifest(case.release)
        m["files"]["sub/secret.txt"] = sha(case.outside / "secret.txt")
        save(case.release, m)
        name = "sub"
    else:  # a link to a 100 GB sparse file: hashing it used to take for ever
        sparse = case.outside / "sparse"
        with sparse.open("wb") as fh:
            fh.truncate(100 * GIB)
        (case.release / "README.md").unlink()
        (case.release / "README.md").symlink_to(sparse)
        name = "README.md"
    before = listing(case.release)
    runs = [case.frame(*commands(case)[c], limit=20) for c in ("release verify", "generate")]
    for run in runs:
        one_line(run, name, "a symbolic link", "a release holds only regular files; refused")
        assert run.seconds < 15
    assert not (case.tmp / "data" / "generations").exists()
    contained(case, before, *runs)


def test_verify_lists_every_link_and_hashes_none(case):
    """Without the CLI's gate, `verify_release` itself names every link and reads none of them."""
    from tasks.release.verify import verify_release

    _link(case, "README.md", case.outside / "secret.txt")
    (case.release / "sub").symlink_to(case.outside)
    m = manifest(case.release)
    m["files"]["sub/secret.txt"] = sha(case.outside / "secret.txt")
    save(case.release, m)
    report = verify_release(case.release)
    assert not report.ok
    for name in ("README.md", "sub"):
        assert f"{name}: a symbolic link: a release holds only regular files (not read)" in report.problems
    assert "README.md" not in report.checked_files and "sub/secret.txt" not in report.checked_files
    assert MARKER not in json.dumps(report.model_dump())


# ---------------------------------------------------------------- H4: decompression bomb


def _bomb(path: Path, rows: int = 400_000, width: int = 5000) -> None:
    """A stats table of `rows` rows whose category is one `width`-character string: ~15 KB on disk,
    2 GB decoded (dictionary-encoded; written without the Arrow schema, so it reads back as plain text)."""
    arrays, fields = [], []
    for f in STATS_SCHEMA:
        if f.name == "category":
            a = pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, np.int32)), pa.array(["x" * width]))
            f = pa.field(f.name, a.type, nullable=False)
        elif f.name == "instances":
            a = pa.array(np.zeros(rows, np.int64))
        else:
            a = pa.nulls(rows, pa.float64())
        arrays.append(a)
        fields.append(f)
    pq.write_table(pa.Table.from_arrays(arrays, schema=pa.schema(fields)), path, store_schema=False)


def test_a_parquet_decompression_bomb_is_refused_in_bounded_memory(case):
    _bomb(case.release / "stats.parquet")
    assert (case.release / "stats.parquet").stat().st_size < 100_000
    m = manifest(case.release)
    m["tables"]["stats"]["rows"] = 400_000
    rehash(case.release, m)
    before = listing(case.release)

    verify = case.frame("release", "verify", str(case.release), limit=30)
    failed_check(verify, case.release, "stats.parquet: decodes to more than 268,435,456 bytes")
    diff = case.frame("release", "diff", str(case.clean), str(case.release), limit=30)
    one_line(diff, "stats.parquet", "a decompression bomb")
    for run in (verify, diff):
        assert run.max_rss < 1.5 * GIB, run.max_rss  # it used to take 6.7 GB
    contained(case, before, verify, diff)


# ---------------------------------------------------------------- M1: one line, never a traceback


def test_deeply_nested_json_is_one_line(case):
    deep = "[" * 100_000 + "]" * 100_000
    (case.release / "inputs.json").write_text(deep, encoding="utf-8")
    rehash(case.release)
    before = listing(case.release)
    verify = case.frame("release", "verify", "--deep", str(case.release))
    failed_check(verify, case.release, "inputs.json: not JSON (nested too deep)")

    (case.release / "manifest.json").write_text(deep, encoding="utf-8")
    before = listing(case.release)
    runs = [verify]
    for name in ("qa gold", "release diff"):
        runs.append(case.frame(*commands(case)[name]))
        one_line(runs[-1], "manifest.json")
    runs.append(case.frame("release", "verify", str(case.release)))
    failed_check(runs[-1], case.release, "manifest.json: invalid: Invalid JSON: recursion limit exceeded")
    contained(case, before, *runs)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "wrong table"])
def test_a_broken_parquet_is_one_line_naming_it(case, damage):
    path = case.release / "instances.parquet"
    if damage == "garbage":
        path.write_bytes(b"not a parquet file at all\n" * 100)
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    else:
        shutil.copy(case.release / "stats.parquet", path)
    rehash(case.release)
    before = listing(case.release)
    names = ("split", "qa gold", "generate", "score") if damage == "garbage" else ("split", "qa gold")
    runs = []
    for name in names:
        runs.append(case.frame(*commands(case)[name]))
        line = one_line(runs[-1], "instances.parquet")
        expected = "lacks column(s) instance_id" if damage == "wrong table" else "unreadable parquet"
        assert expected in line, (name, line)
    runs.append(case.frame("release", "verify", str(case.release)))
    failed_check(runs[-1], case.release, "instances.parquet: ")
    contained(case, before, *runs)


def test_folders_nested_1500_deep_are_one_line(case):
    from tasks.release.verify import verify_release

    path = case.release
    try:
        for _ in range(1500):  # Path.mkdir(parents=True) recurses as deep as the tree
            path = path / "a"
            path.mkdir()
        run = case.frame("release", "verify", str(case.release))  # rglob used to raise RecursionError
        line = one_line(run, "folders nested more than 8 deep")
        assert verify_release(case.release).ok  # the library's walk is iterative; empty folders hold no file
    finally:
        while path != case.release:  # shutil.rmtree recurses as deep as the tree
            path.rmdir()
            path = path.parent
    assert len(line) < 600


# ---------------------------------------------------------------- M2: terminal and output injection


def test_names_and_values_from_a_release_cannot_forge_lines_or_flood_the_terminal(case):
    on_disk = "y\nreleases/demo/0.1.0: ok\n\x1b[8m"  # a file name cannot hold "/" ... but a line can
    (case.release / on_disk.replace("/", "\u2215")).write_text("unlisted\n", encoding="utf-8")
    runs = [case.frame("release", "verify", str(case.release))]
    failed_check(runs[-1], case.release, "unlisted file")
    (case.release / on_disk.replace("/", "\u2215")).unlink()
    m = manifest(case.release)
    forged = f"x\n{case.release}: ok\n\x1b[8m"
    save(case.release, {**m, "files": {**m["files"], forged: "0" * 64}})  # a name in the manifest
    runs.append(case.frame("release", "verify", str(case.release)))
    failed_check(runs[-1], case.release, "control character U+000A")
    for run in runs:
        assert "\x1b" not in run.out + run.err
        lines = (run.out + run.err).splitlines()
        assert f"{case.release}: ok" not in lines and not any(ln.endswith("0.1.0: ok") for ln in lines)
    assert "\\n" in runs[0].err and "\\x1b[8m" in runs[0].err  # the name on disk, shown escaped

    for writer in ("pyarrow\n## Forged\n\x1b[2J\x1b[31m", "A" * 1_000_000):
        save(case.release, {**m, "writer": writer})
        runs.append(case.frame("release", "diff", str(case.clean), str(case.release)))
        one_line(runs[-1], "manifest.json", "writer")
        assert "\x1b" not in runs[-1].err and len(runs[-1].err) < 1000
    (case.release / "manifest.json").write_bytes(json.dumps({**m, "writer": "A" * (70 << 20)}).encode())
    runs.append(case.frame("release", "diff", str(case.clean), str(case.release)))
    one_line(runs[-1], "manifest.json", "larger than 67,108,864 bytes: refused unread")
    assert runs[-1].seconds < 15 and len(runs[-1].out) < 1000  # it used to print all 200 MB
    for run in runs:
        assert MARKER not in run.out + run.err


# ---------------------------------------------------------------- L2: manifest size and entries


def test_a_huge_manifest_is_refused_by_its_size_and_entry_count(case):
    m = manifest(case.release)
    text = json.dumps(m)
    (case.release / "manifest.json").write_text(text + " " * (65 << 20), encoding="utf-8")
    runs = []
    for name in ("qa gold", "release diff"):
        runs.append(case.frame(*commands(case)[name], limit=20))
        one_line(runs[-1], "manifest.json", "larger than 67,108,864 bytes")
    runs.append(case.frame("release", "verify", str(case.release), limit=20))
    failed_check(runs[-1], case.release, "manifest.json: larger than 67,108,864 bytes: refused unread")
    print("RSS", [(r.seconds, r.max_rss) for r in runs])
    for run in runs:
        assert run.seconds < 10 and run.max_rss < GIB, (run.seconds, run.max_rss, run.err[-300:])

    m["files"].update({f"f{i:05d}.txt": "0" * 64 for i in range(20_000)})
    save(case.release, m)
    before = listing(case.release)
    runs.append(case.frame("release", "verify", str(case.release)))
    failed_check(runs[-1], case.release, "files: Dictionary should have at most 10000 items")
    contained(case, before, *runs)


# ---------------------------------------------------------------- what keeps working


def test_an_untouched_release_still_works_and_is_never_written(case):
    before = listing(case.release)
    verify = case.frame("release", "verify", str(case.release))
    assert (verify.rc, verify.out.strip(), verify.err.strip()) == (0, f"{case.release}: ok", "")
    diff = case.frame("release", "diff", str(case.clean), str(case.release))
    assert diff.rc == 0 and "The tables are identical." in diff.out, diff.err[-2000:]
    split = case.frame("split", "--release", str(case.release))
    assert split.rc == 0 and (case.release.parent / "0.1.0.splits.json").is_file(), split.err[-2000:]
    assert listing(case.release) == before
