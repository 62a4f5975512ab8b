"""Folder manifests (issue 16): tampered intermediate folders are warned about once and recomputed into a
byte-identical release, the release writer refuses folders without a valid manifest, `verify_deep` compares
a release with its data folder, and `frame ground --out` replaces a folder in one atomic exchange (kills
inside the write leave the old or the new folder, and what they leave beside it is recovered)."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import tasks.manifest as manifest
from tasks.errors import FrameInputError
from tasks.manifest import MANIFEST_FILE, check_folder, folder_digest, read_manifest, write_folder
from tests.conftest import CORPUS, MIRROR_HEAD, SMALL_DOMAINS, frame_env

ROOT = Path(__file__).resolve().parents[1]
FRAME = str(Path(sys.executable).with_name("frame"))
PAPERS = CORPUS / "arxiv" / "gravitational-wave-astrophysics"
OLD_PAPER, NEW_PAPER = PAPERS / "2306.17245.html", PAPERS / "2207.12409.html"
# NVDA 10-Q, two periods: a filing domain (facts.parquet) with one instance, the quickest such build.
NVDA = "[[domains]]" + SMALL_DOMAINS.split("[[domains]]")[1]
D, T1, T2 = "NVDA-10-Q", "2023-07-30", "2025-07-27"


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _siblings(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.parent.iterdir() if p.name != folder.name)


# ---------------------------------------------------------------- the manifest itself


def test_check_folder_names_each_problem_in_one_line(tmp_path):
    out = tmp_path / "g"
    entries = write_folder(out, lambda p: [(p / n).write_text(n * 3) for n in ("a.md", "b.md", "c.json")])
    assert set(entries) == {"a.md", "b.md", "c.json"} and entries["a.md"]["size"] == 12
    assert check_folder(out) == [] and read_manifest(out) == entries
    digest = folder_digest(out)
    assert manifest.manifest_digest(entries) == digest

    twin = tmp_path / "twin"  # equal content elsewhere: the same digest
    write_folder(twin, lambda p: [(p / n).write_text(n * 3) for n in ("a.md", "b.md", "c.json")])
    assert folder_digest(twin) == digest

    with (out / "a.md").open("a") as fh:
        fh.write("tampered")
    (out / "b.md").unlink()
    (out / "c.json").write_text("c.jso" * 3)  # same size, other bytes
    (out / "extra.md").write_text("x")
    assert check_folder(out) == [
        "a.md changed since it was written",
        "b.md missing",
        "c.json changed since it was written",
        "extra file extra.md",
    ]
    assert folder_digest(out) != digest
    (out / MANIFEST_FILE).write_text('{"files": [1, 2]}')
    assert check_folder(out) == [f"{MANIFEST_FILE} is not a manifest"]
    (out / MANIFEST_FILE).unlink()
    assert check_folder(out) == ["no manifest"]
    assert check_folder(tmp_path / "nothing") == ["folder missing"]


# ---------------------------------------------------------------- frame ground --out: atomic replace


@pytest.fixture(scope="module")
def papers():
    """Two grounded papers: the content of an earlier folder and of the one replacing it."""
    if not PAPERS.is_dir():
        pytest.skip(f"shared corpus not found at {CORPUS}")
    from tasks.sources import ground_source

    return {p: ground_source(p.read_bytes(), p.name, kind="arxiv") for p in (OLD_PAPER, NEW_PAPER)}


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2-exchange", "two-renames"])
def test_ground_out_replaces_an_existing_folder_without_leftovers(tmp_path, papers, monkeypatch, exchange):
    from tasks.ground.documents import write_grounding

    if not exchange:  # a kernel or file system without RENAME_EXCHANGE
        monkeypatch.setattr(manifest, "exchange", lambda a, b: False)
    elif manifest._RENAMEAT2 is None:
        pytest.skip("no renameat2 here")
    out = tmp_path / "out"
    write_grounding(papers[OLD_PAPER], out)
    old = _tree(out)
    write_grounding(papers[NEW_PAPER], out)
    new = _tree(out)
    assert new != old and check_folder(out) == []
    assert "paper-2207.12409.md" in new and "paper-2306.17245.md" not in new
    assert _siblings(out) == []  # no .out.old-PID, no .out.tmp-*


def test_ground_out_naming_a_file_is_refused_before_anything_is_written(tmp_path, papers):
    from tasks.ground.documents import write_grounding

    afile = tmp_path / "afile"
    afile.write_text("keep me")
    with pytest.raises(FrameInputError) as err:
        write_grounding(papers[NEW_PAPER], afile)
    assert str(afile) in str(err.value) and "is a file" in str(err.value) and "\n" not in str(err.value)
    assert afile.read_text() == "keep me" and _siblings(afile) == []  # no .afile.old-PID


def test_frame_ground_over_an_existing_folder(tmp_path):
    """The real command, twice on one --out: the second run's content in place, nothing beside it."""
    out = tmp_path / "out"
    for paper in (OLD_PAPER, NEW_PAPER):
        res = subprocess.run(
            [FRAME, "ground", str(paper), "--out", str(out)],
            capture_output=True,
            text=True,
            env=frame_env(tmp_path / "ph"),
            timeout=120,
        )
        assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST_FILE, "documents.json", "paper-2207.12409.md"]
    assert check_folder(out) == [] and _siblings(out) == []


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_leftovers_of_killed_writers_are_recovered_or_cleaned(tmp_path, papers):
    from tasks.ground.documents import write_grounding

    out = tmp_path / "out"
    write_grounding(papers[OLD_PAPER], out)
    old = _tree(out)
    dead, alive = _dead_pid(), os.getppid()
    # a kill between the two renames of the fallback: no `out`, the earlier folder in .out.old-PID
    os.rename(out, tmp_path / f".out.old-{dead}")
    half = tmp_path / f".out.tmp-{dead}_k2j4h5"
    half.mkdir()
    (half / "part.md").write_text("half")
    legacy = tmp_path / ".out.tmp-q1w2e3r4"  # an older frame's temp folder (no PID in its name)
    legacy.mkdir()
    busy = tmp_path / f".out.tmp-{alive}_a1b2c3"  # a live writer's: left alone
    busy.mkdir()
    other = tmp_path / f".other.old-{dead}"  # another folder's leftover: not ours to touch
    other.mkdir()

    handled = manifest.recover_leftovers(out)
    assert sorted(p.name for p in handled) == sorted([f".out.old-{dead}", half.name, legacy.name])
    assert _tree(out) == old and check_folder(out) == []  # the earlier folder is back, whole
    assert _siblings(out) == sorted([busy.name, other.name])

    busy.rmdir()
    (tmp_path / f".out.tmp-{dead}_z9y8x7").mkdir()
    write_grounding(papers[NEW_PAPER], out)  # the next `frame ground` cleans before it writes
    assert check_folder(out) == [] and "paper-2207.12409.md" in _tree(out)
    assert _siblings(out) == [other.name]


# A real SIGKILL inside the grounding write of a `frame ground`-like process, at three points.
KILL_SCRIPT = """
import os, signal, sys
from pathlib import Path
import tasks.manifest as m
from tasks.ground.documents import write_grounding
from tasks.sources import ground_source

point, paper, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
die = lambda: os.kill(os.getpid(), signal.SIGKILL)
if point == "before-swap":  # files and manifest in the temp folder, nothing swapped yet
    m.replace_folder = lambda new, target: die()
elif point == "after-exchange":  # the new folder in place, the old one not yet removed
    real = m.exchange
    m.exchange = lambda a, b: real(a, b) and die()
else:  # between-renames: the two-rename fallback, the old folder moved away, the new one not yet in
    m.exchange = lambda a, b: False
    rename = os.rename
    os.rename = lambda a, b: rename(a, b) or (".old-" in str(b) and die())
write_grounding(ground_source(paper.read_bytes(), paper.name, kind="arxiv"), out)
"""


@pytest.mark.parametrize("point", ["before-swap", "after-exchange", "between-renames"])
def test_kill_inside_the_grounding_write_loses_nothing(tmp_path, papers, point):
    from tasks.ground.documents import write_grounding

    if point == "after-exchange" and manifest._RENAMEAT2 is None:
        pytest.skip("no renameat2 here")
    out = tmp_path / "out"
    write_grounding(papers[OLD_PAPER], out)
    old = _tree(out)
    res = subprocess.run(
        [sys.executable, "-c", KILL_SCRIPT, point, str(NEW_PAPER), str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == -signal.SIGKILL, res.stderr
    assert _siblings(out), "the kill left nothing beside the folder: it did not land inside the write"
    if point == "before-swap":
        assert _tree(out) == old
    elif point == "after-exchange":
        assert "paper-2207.12409.md" in _tree(out) and check_folder(out) == []
    else:
        assert not out.exists()  # what issue 16 found: recovered below, never lost
    manifest.recover_leftovers(out)
    assert check_folder(out) == [] and _siblings(out) == []
    if point != "after-exchange":
        assert _tree(out) == old  # the killed run never finished: the earlier folder stands
    write_grounding(papers[NEW_PAPER], out)
    assert "paper-2207.12409.md" in _tree(out) and _siblings(out) == []


# ---------------------------------------------------------------- a real build: tamper, rebuild, release


@pytest.fixture(scope="module")
def built(tmp_path_factory, prefect_harness):
    """A clean in-process build of the NVDA 10-Q domain, release small 1.0.0."""
    if not (CORPUS / "edgar").is_dir():
        pytest.skip(f"shared corpus not found at {CORPUS}")
    from flows.release import build_and_publish
    from tasks.config import load_config

    tmp = tmp_path_factory.mktemp("manifests")
    path = tmp / "small.toml"
    path.write_text((MIRROR_HEAD + NVDA).format(data=tmp / "data", corpus=CORPUS), encoding="utf-8")
    cfg = load_config(path)
    out = build_and_publish(cfg, [D], "small", "1.0.0")
    assert out["path"] is not None and not out["failed"], out["failed"]
    return {"cfg": cfg, "data": cfg.build.data_dir, "release": out["path"], "results": out["results"]}


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _rebuild(built: dict, version: str) -> tuple[Path, list[str], list[str]]:
    """Build again as `version`; returns (release, `frame: warning:` lines on stderr, warnings logged)."""
    from flows.release import build_and_publish

    err, records = io.StringIO(), _Records()
    logger = logging.getLogger("prefect.flow_runs")
    logger.addHandler(records)
    try:
        with contextlib.redirect_stderr(err):
            out = build_and_publish(built["cfg"], [D], "small", version, allow_identical=True)
    finally:
        logger.removeHandler(records)
    assert out["path"] is not None and not out["failed"], out["failed"]
    assert "Traceback" not in err.getvalue()
    warned = [ln for ln in err.getvalue().splitlines() if ln.startswith("frame: warning:")]
    return out["path"], warned, [ln for ln in records.lines if "recomputing" in ln]


def _same_release_content(a: Path, b: Path) -> None:
    """Equal tables (parquet bytes) and input digests; manifest.json and README.md name the version."""
    from tasks.release.verify import verify_release

    names = sorted(p.name for p in a.iterdir() if p.name not in ("manifest.json", "README.md"))
    assert names == sorted(p.name for p in b.iterdir() if p.name not in ("manifest.json", "README.md"))
    assert "facts.parquet" in names and "inputs.json" in names
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    report = verify_release(b)
    assert report.ok, report.problems


def test_tampered_grounding_is_warned_once_and_recomputed_into_the_same_release(built):
    from tasks.release.verify import verify_deep

    data, folder = built["data"], built["data"] / "grounding" / D / T1
    md = folder / "balance-sheet.md"
    with md.open("a", encoding="utf-8") as fh:
        fh.write("\nA sentence nobody wrote.\n")
    (folder / "facts.parquet").unlink()
    deep = verify_deep(built["release"], data)
    assert deep == [
        f"data/grounding/{D}/{T1}: balance-sheet.md changed since it was written, facts.parquet missing"
    ]

    release, warned, logged = _rebuild(built, "1.0.1")
    line = f"data/grounding/{D}/{T1}: balance-sheet.md changed since it was written, facts.parquet missing"
    assert warned == [f"frame: warning: {line}; recomputing"]
    assert logged == [f"{line}; recomputing"]
    assert "A sentence nobody wrote." not in md.read_text(encoding="utf-8")
    assert check_folder(folder) == []
    _same_release_content(built["release"], release)
    assert verify_deep(built["release"], data) == [] and verify_deep(release, data) == []


def test_truncated_missing_garbled_and_edited_files_are_recomputed(built):
    data = built["data"]
    g1, g2 = data / "grounding" / D / T1, data / "grounding" / D / T2
    r1, r2 = data / "reports" / D / T1, data / "reports" / D / T2
    facts = (g1 / "facts.parquet").read_bytes()
    (g1 / "facts.parquet").write_bytes(facts[: len(facts) // 2])  # truncated: once a traceback
    doomed = sorted(p.name for p in g2.glob("note-*.md"))[0]
    (g2 / doomed).unlink()
    (g2 / "documents.json").write_text('[{"doc_id": "cover-page", "tit', encoding="utf-8")
    (r2 / "report.md").write_text((r2 / "report.md").read_text(encoding="utf-8") + "\nedited\n")
    (r1 / MANIFEST_FILE).unlink()  # a folder written before manifests existed

    release, warned, logged = _rebuild(built, "1.0.2")
    assert warned == [
        f"frame: warning: data/grounding/{D}/{T1}: facts.parquet changed since it was written; recomputing",
        f"frame: warning: data/reports/{D}/{T1}: no manifest; recomputing",
        f"frame: warning: data/grounding/{D}/{T2}: documents.json changed since it was written, "
        f"{doomed} missing; recomputing",
        f"frame: warning: data/reports/{D}/{T2}: report.md changed since it was written; recomputing",
    ]
    assert len(logged) == 4
    assert all(check_folder(f) == [] for f in (g1, g2, r1, r2))
    _same_release_content(built["release"], release)


def test_release_writer_refuses_input_folders_without_a_valid_manifest(built):
    from flows.release import publish

    data = built["data"]
    releases = data / "releases" / "small"
    cases = [
        (data / "grounding" / D / T2, lambda f: (f / MANIFEST_FILE).unlink(), "no manifest"),
        (
            data / "reports" / D / T1,
            lambda f: (f / "outline.md").write_text("# edited\n"),
            "outline.md changed since it was written",
        ),
    ]
    for folder, spoil, problem in cases:
        keep = _tree(folder)
        spoil(folder)
        with pytest.raises(FrameInputError) as err:
            publish(built["cfg"], built["results"], "small", "9.0.0")
        rel = folder.relative_to(data.parent).as_posix()
        assert str(err.value) == f"{rel}: {problem}; rebuild to recompute it"
        assert not (releases / "9.0.0").exists()
        assert not [p for p in releases.iterdir() if p.name.startswith(".tmp-")]  # nothing half-written
        shutil.rmtree(folder)
        write_folder(
            folder,
            lambda p, keep=keep: [(p / n).write_bytes(b) for n, b in keep.items() if n != MANIFEST_FILE],
        )


def test_verify_deep_compares_a_release_with_its_data_folder(built, tmp_path):
    from tasks.release.verify import verify_deep

    data = tmp_path / "data"  # a copy of the data folder's inputs, then changed
    for top in ("grounding", "reports"):
        shutil.copytree(built["data"] / top, data / top)
    assert verify_deep(built["release"], data) == []
    g = data / "grounding" / D / T2
    (g / "cover-page.md").write_text("rewritten\n")
    manifest.write_manifest(g)  # consistent with itself, but not what the release was built from
    shutil.rmtree(data / "reports" / D / T1)
    assert verify_deep(built["release"], data) == [
        f"data/grounding/{D}/{T2}: rewritten with other content since the release was written",
        f"data/reports/{D}/{T1}: missing from the data folder",
    ]
    (tmp_path / "old").mkdir()  # a release written before inputs.json existed
    assert verify_deep(tmp_path / "old", data) == [
        "inputs.json: missing (a release written before frame recorded its input folders)"
    ]


def test_release_extra_files_are_listed_and_checked(tmp_path):
    """inputs.json rides in a release as an extra file: listed with its sha256, so `verify` sees an edit."""
    from tasks.release.verify import verify_release
    from tasks.release.write import write_release
    from tests.test_release import card, make_tables, manifest_fields

    tables = make_tables()

    def write(extra: dict) -> Path:
        return write_release(tmp_path, "t", "1.0.0", tables, manifest_fields(), card(tables["stats"]), extra)

    for bad in ({"README.md": b"x"}, {"../x.json": b"x"}, {"x.json": "text"}):
        with pytest.raises(FrameInputError):
            write(bad)
    assert not (tmp_path / "t" / "1.0.0").exists()
    path = write({"inputs.json": b'{"folders": {}}\n'})
    assert verify_release(path).ok
    (path / "inputs.json").write_text('{"folders": {"grounding/x/y": "0"}}\n')
    assert verify_release(path).problems[0].startswith("inputs.json: sha256 mismatch")


def test_cli_refuses_a_new_version_identical_to_the_last_unless_allowed(built):
    """`frame build` of a new version with nothing changed: one line, exit 2, nothing written;
    `--allow-identical` writes the copy."""
    frame = str(Path(sys.executable).with_name("frame"))
    # the highest version so far (other tests of this module rebuild `small` as 1.0.x, same content)
    versions = [p.name for p in (built["data"] / "releases" / "small").iterdir() if p.name[:1].isdigit()]
    previous = max(versions, key=lambda v: tuple(int(x) for x in v.split(".")))
    config = built["data"].parent / "small.toml"
    env = frame_env(built["data"].parent / "prefect-cli")
    args = [frame, "build", "--config", str(config), "--release", "small", "--domain", D]
    res = subprocess.run([*args, "--version", "9.0.0"], capture_output=True, text=True, env=env, timeout=900)
    assert res.returncode == 2, res.stderr[-2000:]
    assert res.stderr.strip().splitlines()[-1] == (
        f"frame: error: release small 9.0.0: nothing changed since small {previous}: every table is "
        "identical, so no new version was written (--allow-identical writes the copy anyway)"
    )
    assert not (built["data"] / "releases" / "small" / "9.0.0").exists()
    res = subprocess.run(
        [*args, "--version", "9.0.0", "--allow-identical"],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert (built["data"] / "releases" / "small" / "9.0.0" / "manifest.json").is_file()
