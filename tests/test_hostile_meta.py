"""Hostile and careless annotation / meta-evaluation inputs through the CLI, as a user runs it (issue 32,
"Contain what users bring"): `frame align` and `frame meta structure|judge|items`.

Each case runs the real `frame` script in a subprocess (a hang fails the test through its timeout) and
checks the exit code, that stderr is exactly one `frame: error:` line naming the file (no traceback), and
that a marker kept in a file outside what the command was given never reaches stdout, stderr or any file
written. Kendall's tau-b (now O(n log n) above 256 members) is checked against a direct pair count."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tasks.release.evalkit import report_file_name
from tasks.score.align import kendall_tau_b
from tests.llm_server import LLMTestServer

FRAME = str(Path(sys.executable).with_name("frame"))
MARKER = "SECRET-OUTSIDE-THE-ANNOTATIONS-5c1e"
KEY = "sk-hostile-meta-KEY-0b7d41e2a9"
IID = "fq/ACME/Q1->Q2"
STEM = report_file_name(IID)  # fq_ACME_Q1__Q2: the file name `frame generate` gives its report


# ---------------------------------------------------------------- running frame


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    max_rss_mb: float
    seconds: float


# Runs `frame` as its own child and reports that child's peak memory: measured in the `frame` process
# itself, ru_maxrss would count the pytest process it was forked from.
_WAIT4 = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
with open(os.environ["FRAME_TEST_RSS_FILE"], "w") as f:
    f.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status) & 255)
"""


def frame(args: list[str], root: Path, timeout: float = 60, **env: str) -> Run:
    """`frame ARGS` in `root`, its peak memory and time; a hang past `timeout` fails the test."""
    rss = root / ".rss"
    environ = {**os.environ, "PREFECT_HOME": str(root / "ph"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    for k in ("PREFECT_API_URL", "PREFECT_LOCAL_STORAGE_PATH", "FRAME_CACHE_DIR"):  # no flow runs; caches
        environ.pop(k, None)  # go beside the release, under root, where nothing_leaked looks
    environ.update({"HF_HUB_OFFLINE": "1", "FRAME_TEST_RSS_FILE": str(rss), **env})
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-c", _WAIT4, FRAME, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environ,
        cwd=root,
        start_new_session=True,  # its own group: a hang is killed whole (the helper and frame)
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"frame {' '.join(args)} hung (killed after {timeout:.0f} s)")
    seconds = time.monotonic() - started
    max_rss = int(rss.read_text()) / 1024 if rss.exists() else math.nan
    rss.unlink(missing_ok=True)
    text = (stdout.decode(errors="replace"), stderr.decode(errors="replace"))
    return Run(proc.returncode, *text, max_rss, seconds)


def error_line(res: Run, *needles: str) -> str:
    """The one `frame: error:` line of a run that ended in bad input (exit 2)."""
    assert res.returncode == 2, (res.returncode, res.stderr[-2000:], res.stdout[-500:])
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("frame: error: "), res.stderr[-2000:]
    assert len(lines[0]) < 600, lines[0][:600]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def nothing_leaked(root: Path, *runs: Run) -> None:
    """MARKER (kept under root/outside) is in no output of the runs and in no file written under root."""
    for res in runs:
        assert MARKER not in res.stdout and MARKER not in res.stderr
        assert KEY not in res.stdout and KEY not in res.stderr
    outside = (root / "outside").resolve()
    for p in root.rglob("*"):
        if p.is_symlink() or not p.is_file() or p.resolve().is_relative_to(outside):
            continue
        data = p.read_bytes()
        assert MARKER.encode() not in data and KEY.encode() not in data, p


def outside(root: Path) -> Path:
    """A file outside everything a command is given, holding MARKER (as a report would: a heading first)."""
    folder = root / "outside"
    folder.mkdir(exist_ok=True)
    secret = folder / "secret.md"
    secret.write_text(f"# Secret\n\nexoplanet transit {MARKER}\n", encoding="utf-8")
    return secret


def tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


# ---------------------------------------------------------------- a tiny release and its annotations


def release(root: Path) -> Path:
    """data/releases/tiny/1.0.0: one instance whose G has two documents (grounding_doc_ids is then a
    numpy array of two ids when read back), and a manifest, so that it is an (immutable) release."""
    rel = root / "data" / "releases" / "tiny" / "1.0.0"
    rel.mkdir(parents=True)
    pd.DataFrame(
        {
            "instance_id": [IID],
            "category": ["financial_quarterly"],
            "grounding_set_id": ["fq/ACME/Q2"],
            "grounding_doc_ids": [["d1", "d2"]],
            "sample_markdown": ["# Acme Q1\n\n## Results\n\nRevenue was 10.\n"],
            "target_markdown": ["# Acme Q2\n\n## Results\n\nRevenue was 12.\n\n## Outlook\n\nSteady.\n"],
        }
    ).to_parquet(rel / "instances.parquet")
    pd.DataFrame(
        {
            "grounding_set_id": ["fq/ACME/Q2", "fq/ACME/Q2"],
            "doc_id": ["d1", "d2"],
            "title": ["MD&A", "Outlook"],
            "markdown": ["Revenue was 12.", "The outlook is steady."],
        }
    ).to_parquet(rel / "grounding_documents.parquet")
    (rel / "manifest.json").write_text("{}\n", encoding="utf-8")
    return rel


def generations(root: Path) -> Path:
    """data/generations/tiny/1.0.0 (the default --generations of the release), empty."""
    gens = root / "data" / "generations" / "tiny" / "1.0.0"
    gens.mkdir(parents=True)
    return gens


def rankings(root: Path, system: str) -> Path:
    path = root / "rankings.csv"
    path.write_text(f"group_id,system,human_rank\n{IID},gold,1\n{IID},{system},2\n", encoding="utf-8")
    return path


def annotations(root: Path, system: str) -> Path:
    """human.csv + items.csv of one coverage item of `system`'s report."""
    folder = root / "annotations"
    folder.mkdir(exist_ok=True)
    item = f"{IID}|{system}|coverage|0"
    row = {"item_id": item, "instance_id": IID, "system": system, "kind": "finding"}
    pd.DataFrame([{**row, "text": "exoplanet transit", "source": "x"}]).to_csv(
        folder / "items.csv", index=False
    )
    pd.DataFrame({"item_id": [item], "score": [50]}).to_csv(folder / "human.csv", index=False)
    return folder / "human.csv"


def structure(root: Path, rank: Path, *more: str) -> Run:
    rel = root / "data/releases/tiny/1.0.0"
    return frame(["meta", "structure", "--rankings", str(rank), "--release", str(rel), *more], root)


def judge(root: Path, human: Path, *more: str, **env: str) -> Run:
    return frame(["meta", "judge", str(human), "--release", str(root / "data/releases/tiny/1.0.0"), *more],
                 root, **env)  # fmt: skip


# ---------------------------------------------------------------- frame align


def scores(path: Path, values: dict[str, float]) -> Path:
    path.write_text("item_id,score\n" + "".join(f"{k},{v:g}\n" for k, v in values.items()), encoding="utf-8")
    return path


HUMAN = {f"item-{k:02d}": float(25 * (k % 5)) for k in range(40)}


def test_align_refuses_a_fifo_a_device_and_an_oversized_file_before_reading(tmp_path):
    good = scores(tmp_path / "judge.csv", HUMAN)
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)  # opening it would wait for a writer forever
    error_line(
        frame(["align", str(fifo), str(good)], tmp_path), f"{fifo}: not a regular file (a FIFO): refused"
    )
    device = tmp_path / "device.csv"
    device.symlink_to("/dev/zero")  # the user's own link is followed: to a device, refused
    error_line(
        frame(["align", str(good), str(device)], tmp_path), f"{device}: not a regular file (a character"
    )
    sparse = tmp_path / "sparse.csv"
    with sparse.open("wb") as f:
        f.write(b"item_id,score\n")
    os.truncate(sparse, 1 << 30)  # 1 GiB of holes: it used to be read whole (2.1 GB of memory)
    res = frame(["align", str(sparse), str(good)], tmp_path)
    error_line(res, f"{sparse}: 1,073,741,824 bytes: over the 67,108,864-byte limit of an input CSV")
    assert res.max_rss_mb < 400 and res.seconds < 20, (res.max_rss_mb, res.seconds)


def test_align_never_echoes_a_key_file_the_environment_or_a_huge_header(tmp_path):
    """The error line used to hold the file's whole first line: the environment with its API key
    (/proc/self/environ), `OPENAI_API_KEY=sk-...` of a dotenv file, or 20.9 MB on one stderr line."""
    good = scores(tmp_path / "judge.csv", HUMAN)
    dotenv = outside(tmp_path).with_name(".env")
    dotenv.write_text(f"OPENAI_API_KEY={KEY}\nOTHER={MARKER}\n", encoding="utf-8")
    runs = [frame(["align", str(dotenv), str(good)], tmp_path)]
    line = error_line(runs[-1], str(dotenv), "missing column(s) item_id")
    assert "1 column(s): <" in line and "not shown>" in line
    runs.append(
        frame(["align", "/proc/self/environ", str(good)], tmp_path, HOSTILE=MARKER, OPENAI_API_KEY=KEY)
    )
    error_line(runs[-1], "/proc/self/environ: missing column(s)")
    wide = tmp_path / "wide.csv"
    wide.write_text(",".join(f"c{k}" for k in range(2_000_000)) + "\n1\n", encoding="utf-8")  # a 16 MB header
    runs.append(frame(["align", str(wide), str(good)], tmp_path))
    assert "and 1,999,995 more" in error_line(runs[-1], "2,000,000 column(s): 'c0', 'c1'")
    long = tmp_path / "long.csv"
    long.write_text("item_id,score\n" + "x" * 1_000_000 + ",1\n", encoding="utf-8")  # one 1 MB item id
    runs.append(frame(["align", str(long), str(good)], tmp_path))
    error_line(runs[-1], str(long), "field larger than field limit")
    nothing_leaked(tmp_path, *runs)


def test_align_duplicate_columns_fail_and_odd_line_breaks_are_data(tmp_path):
    dup = tmp_path / "dup.csv"
    dup.write_text(
        "item_id,score,score\na,50,0\nb,25,0\n", encoding="utf-8"
    )  # used to take the last silently
    error_line(frame(["align", str(dup), str(dup)], tmp_path), f"{dup}: column 'score' appears 2 times")
    vt = tmp_path / "vt.csv"
    vt.write_text("item_id,score\na\x0bx,50\nc\u2028d,25\n", encoding="utf-8")  # \v and U+2028 inside ids
    res = frame(["align", str(vt), str(vt), "--json"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["n"] == 2


def test_align_says_what_the_join_leaves_out_and_refuses_a_mostly_empty_one(tmp_path):
    human = scores(tmp_path / "human.csv", HUMAN)
    one = scores(tmp_path / "one.csv", {"item-00": 0.0, "other-1": 50.0, "other-2": 75.0})
    line = error_line(
        frame(["align", str(human), str(one)], tmp_path), f"{one}: scores only 1 of the 40 human"
    )
    assert (
        "'item-01', 'item-02', 'item-03', ..." in line and "--allow-partial" in line
    )  # used to give qwk 1.0
    res = frame(["align", str(human), str(one), "--json", "--allow-partial"], tmp_path)
    assert res.returncode == 0 and json.loads(res.stdout)["n"] == 1, res.stderr  # the user's choice
    assert "left out, n = 1" in res.stderr
    most = scores(tmp_path / "most.csv", {k: v for k, v in list(HUMAN.items())[:30]})
    res = frame(["align", str(human), str(most), "--json"], tmp_path)
    assert res.returncode == 0 and json.loads(res.stdout)["n"] == 30, res.stderr
    assert res.stderr.strip().splitlines() == [
        f"frame: warning: {most}: no score for 10 of the 40 human items of {human} (first: 'item-30', "
        "'item-31', 'item-32', ...): left out, n = 30"
    ]
    unit = scores(tmp_path / "unit.csv", {k: v / 100 for k, v in HUMAN.items()})  # a 0-1 judge
    res = frame(["align", str(human), str(unit), "--json"], tmp_path)
    assert res.returncode == 0 and "every score is <= 1 while those of" in res.stderr, res.stderr
    single = scores(tmp_path / "single.csv", {"a": 25.0})
    res = frame(["align", str(single), str(single), "--json"], tmp_path)
    assert res.returncode == 0 and json.loads(res.stdout)["qwk"] is None  # one item: no kappa


def test_align_rankings_of_20000_in_one_group_stay_small_and_fast(tmp_path):
    rng = np.random.default_rng(7)
    n = 20_000
    rank = rng.integers(1, 50, n)
    score = rank + rng.integers(0, 30, n)  # ties on both sides
    path = tmp_path / "rank.csv"
    path.write_text(
        "group_id,system,human_rank,score\n" + "".join(f"g,s{k},{rank[k]},{score[k]}\n" for k in range(n)),
        encoding="utf-8",
    )
    res = frame(["align", "--rankings", str(path), "--json"], tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads(res.stdout)
    assert got["n"] == n and got["kendall_tau"] < -0.5  # -rank against a score that grows with it
    assert res.max_rss_mb < 600, res.max_rss_mb  # the n x n sign matrices took 2.8 GB at 10,000
    assert res.seconds < 30, res.seconds


def _tau_b_by_pairs(x: list[float], y: list[float]) -> float | None:
    """Kendall tau-b by its definition: concordant minus discordant pairs over sqrt((n0-n1)(n0-n2))."""
    n = len(x)
    s = tied_x = tied_y = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = x[i] - x[j], y[i] - y[j]
            tied_x += dx == 0
            tied_y += dy == 0
            s += (dx > 0) - (dx < 0) if dy > 0 else (dx < 0) - (dx > 0) if dy < 0 else 0
    n0 = n * (n - 1) // 2
    den = math.sqrt((n0 - tied_x) * (n0 - tied_y))
    return None if n < 2 or den == 0 else s / den


def test_kendall_tau_b_equals_a_direct_pair_count_on_random_ties():
    rng = np.random.default_rng(2024)
    for n in (2, 3, 5, 17, 64, 255, 256, 257, 300, 700):  # both sides of the pairwise / O(n log n) switch
        for levels in (2, 4, n):
            x = rng.integers(0, levels, n).astype(float)
            y = (x + rng.integers(-1, 2, n) * rng.integers(0, 2, n)).astype(float)
            assert kendall_tau_b(x, y) == pytest.approx(_tau_b_by_pairs(x.tolist(), y.tolist()), abs=1e-12)
            z = rng.integers(0, levels, n).astype(float)
            assert kendall_tau_b(x, z) == pytest.approx(_tau_b_by_pairs(x.tolist(), z.tolist()), abs=1e-12)
    for n in (1, 3, 300):  # undefined: one member, or every x tied
        assert kendall_tau_b(np.ones(n), np.arange(n, dtype=float)) is None
        assert _tau_b_by_pairs([1.0] * n, list(range(n))) is None


# ---------------------------------------------------------------- frame meta structure


@pytest.mark.parametrize("system", ["{outside}", "../../../../outside", "..", "gold/../../outside"])
def test_structure_refuses_a_system_that_is_a_path(tmp_path, system):
    release(tmp_path)
    secret = outside(tmp_path)
    (secret.parent / "reports").mkdir()
    (secret.parent / "reports" / f"{STEM}.md").write_text(secret.read_text(), encoding="utf-8")
    rank = rankings(tmp_path, system.format(outside=secret.parent))
    res = structure(
        tmp_path, rank, "--generations", str(generations(tmp_path)), "--out", str(tmp_path / "out")
    )
    error_line(res, f"{rank}: row at line 3: system ", "is not a system name")
    assert not (tmp_path / "out").exists()
    nothing_leaked(tmp_path, res)


def test_structure_reads_only_the_report_it_needs_and_never_a_link_out_a_fifo_or_a_huge_file(tmp_path):
    rel = release(tmp_path)
    secret = outside(tmp_path)
    reports = generations(tmp_path) / "mine" / "reports"
    reports.mkdir(parents=True)
    needed = reports / f"{STEM}.md"
    rank = rankings(tmp_path, "mine")

    needed.symlink_to(secret)  # it used to be read and scored as a report
    error_line(structure(tmp_path, rank), f"{needed}: leads outside the generations folder", "refused")
    needed.unlink()
    os.mkfifo(needed)  # it used to hang forever
    error_line(structure(tmp_path, rank), f"{needed}: not a regular file (a FIFO): refused")
    needed.unlink()
    with needed.open("wb") as f:
        f.write(b"# Huge\n")
    os.truncate(needed, 9_000_000)
    error_line(structure(tmp_path, rank), f"{needed}: report of more than 8,000,000 bytes: refused")
    needed.unlink()
    (secret.parent / "reports").mkdir()
    (secret.parent / "reports" / f"{STEM}.md").write_text(secret.read_text(), encoding="utf-8")
    os.symlink(secret.parent, reports.parent.parent / "linked")  # a system folder that leads out
    error_line(structure(tmp_path, rankings(tmp_path, "linked")), "leads outside the generations folder")

    needed.write_text("# Mine\n\n## Results\n\nRevenue was 12.\n", encoding="utf-8")
    os.mkfifo(reports / "other.md")  # not needed: never opened (every *.md used to be read)
    (reports / "another.md").symlink_to(secret)
    res = structure(tmp_path, rankings(tmp_path, "mine"), "--json", "--out", str(tmp_path / "out"))
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads(res.stdout)["reports"] == 2 and (tmp_path / "out" / "structure.csv").is_file()
    before = tree(rel)
    res2 = structure(tmp_path, rank, "--out", str(rel / "grid"))
    error_line(res2, f"--out: {rel / 'grid'} is inside the release 1.0.0: releases are immutable")
    assert tree(rel) == before
    nothing_leaked(tmp_path, res, res2)


# ---------------------------------------------------------------- frame meta judge


def test_judge_never_judges_or_sends_a_file_outside_the_generations_folder(tmp_path):
    """The audit's case: items.csv names system `../../../../../evil2`, whose reports/<stem>.md is a link to
    a secret file: the secret was judged as a report (and, with --judges openai, sent to the endpoint)."""
    release(tmp_path)
    gens = generations(tmp_path)
    secret = outside(tmp_path)
    evil = tmp_path / "evil2" / "reports"
    evil.mkdir(parents=True)
    (evil / f"{STEM}.md").symlink_to(secret)
    hops = os.path.relpath(tmp_path, gens)  # ../../../.. from the generations folder to tmp_path
    with LLMTestServer() as server:
        env = {"FRAME_LLM_BACKEND": "openai", "FRAME_LLM_BASE_URL": server.base_url, "FRAME_LLM_MODEL": "m",
               "OPENAI_API_KEY": KEY}  # fmt: skip
        human = annotations(tmp_path, f"{hops}/evil2")
        res = judge(tmp_path, human, "--judges", "openai", "--out", str(tmp_path / "out"), **env)
        error_line(res, f"{human.with_name('items.csv')}: row at line 2: system", "is not a system name")
        (gens / "evil2" / "reports").mkdir(parents=True)  # a proper name whose report leads out
        (gens / "evil2" / "reports" / f"{STEM}.md").symlink_to(secret)
        human = annotations(tmp_path, "evil2")
        res2 = judge(tmp_path, human, "--judges", "openai", "--out", str(tmp_path / "out"), **env)
        error_line(res2, f"{gens / 'evil2' / 'reports' / STEM}.md: leads outside the generations folder")
        fifo = tmp_path / "fifo-items.csv"
        os.mkfifo(fifo)  # an annotation sheet that is a FIFO: refused, never opened
        res3 = judge(tmp_path, human, "--items", str(fifo), "--judges", "openai", **env)
        error_line(res3, f"{fifo}: not a regular file (a FIFO): refused")
        # the release itself holds a link out (as for every command on a release): refused, never read
        card = tmp_path / "data/releases/tiny/1.0.0/README.md"
        card.symlink_to(secret)
        res4 = judge(tmp_path, annotations(tmp_path, "copy-sample"), "--judges", "openai", **env)
        error_line(res4, f"{card}: a symbolic link to", "a release holds only regular files; refused")
        card.unlink()
        assert server.chat_requests == [] and server.embedding_requests == []  # nothing sent anywhere
    assert not (tmp_path / "out").exists()
    nothing_leaked(tmp_path, res, res2, res3, res4)


def test_judge_regenerates_a_builtin_report_and_never_writes_into_a_release(tmp_path):
    """A builtin's report regenerated from an instance of two grounding documents (it used to crash on
    the numpy array of their ids: "truth value of an array is ambiguous"); --out inside the release."""
    rel = release(tmp_path)
    empty = tmp_path / "empty-generations"
    empty.mkdir()
    human = annotations(tmp_path, "copy-sample")
    before = tree(rel)
    res = judge(tmp_path, human, "--release", str(rel), "--judges", "offline", "--out", str(rel / "judge"))
    error_line(res, f"--out: {rel / 'judge'} is inside the release 1.0.0: releases are immutable")
    assert tree(rel) == before
    res = judge(tmp_path, human, "--generations", str(empty), "--judges", "offline", "--json",
                "--out", str(tmp_path / "out"))  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    assert [r["n"] for r in json.loads(res.stdout)["table"]] == [1]
    assert (tmp_path / "out" / "offline.csv").is_file() and tree(rel) == before


# ---------------------------------------------------------------- frame meta items


def evidence(folder: Path, credits: list[float]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    n = len(credits)
    pd.DataFrame(
        {"instance_id": [f"i{k // 3}" for k in range(n)], "system": ["a"] * n, "metric": ["rubric"] * n,
         "kind": [f"G{k % 3}:x{k % 3}" for k in range(n)], "text": ["t"] * n, "score": credits}
    ).to_parquet(folder / "evidence.parquet")  # fmt: skip
    return folder / "evidence.parquet"


@pytest.mark.parametrize(
    ("credits", "needle"),
    [
        (
            [1.0, 0.5, 7.5, 0.0, 0.0, -1.0],
            "2 of 6 rubric credit(s) not a number in 0-1 (first: '7.5' for 'i0'",
        ),
        (
            [float("nan"), 1.0, 0.5, 0.0, 0.0, 1.0],
            "1 of 6 rubric credit(s) not a number in 0-1 (first: 'nan'",
        ),
    ],
)
def test_items_refuses_credits_outside_0_1_or_missing(tmp_path, credits, needle):
    """Credits of 7.5 and -1 used to be averaged into pass rates, a NaN credit skipped silently."""
    path = evidence(tmp_path / "scores", credits)
    res = frame(["meta", "items", "--scores", str(path.parent)], tmp_path)
    error_line(res, f"{path}: column score: ", needle)
    assert not (path.parent / "meta").exists()


def test_items_reads_only_a_regular_bounded_table_inside_the_folder_and_never_writes_into_a_release(tmp_path):
    secret_rows = tmp_path / "outside"
    path = evidence(secret_rows, [1.0, 0.5, 0.0, 0.0, 1.0, 1.0])
    scores_dir = tmp_path / "scores"
    scores_dir.mkdir()
    table = scores_dir / "evidence.parquet"
    table.symlink_to(path)
    error_line(
        frame(["meta", "items", "--scores", str(scores_dir)], tmp_path), f"{table}: leads outside its folder"
    )
    table.unlink()
    os.mkfifo(table)
    error_line(
        frame(["meta", "items", "--scores", str(scores_dir)], tmp_path),
        f"{table}: not a regular file (a FIFO)",
    )
    table.unlink()
    with table.open("wb") as f:
        f.write(b"PAR1")
    os.truncate(table, 600 * 1024 * 1024)
    error_line(
        frame(["meta", "items", "--scores", str(scores_dir)], tmp_path), "over the 536,870,912-byte limit"
    )
    table.unlink()
    evidence(scores_dir, [1.0, 0.5, 0.0, 0.0, 1.0, 1.0])
    rel = release(tmp_path)
    before = tree(rel)
    res = frame(["meta", "items", "--scores", str(scores_dir), "--out", str(rel / "items")], tmp_path)
    error_line(res, f"--out: {rel / 'items'} is inside the release 1.0.0: releases are immutable")
    assert tree(rel) == before
    res = frame(["meta", "items", "--scores", str(scores_dir), "--json"], tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert sorted(p.name for p in (scores_dir / "meta").iterdir()) == [
        "cooccurrence.csv", "items.csv", "items.png", "items.svg", "items_by_system.csv"
    ]  # fmt: skip
