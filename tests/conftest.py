"""Shared test fixtures: the real corpus beside the repo (../shared/corpus) and a Prefect harness."""

from __future__ import annotations

import csv
import os
import shutil
from pathlib import Path

import pytest

from tasks import ast_guard

ROOT = Path(__file__).resolve().parents[1]
# In-process flows run threads that parse Python side by side, as `frame` does (tasks/ast_guard.py).
ast_guard.install()
CORPUS = Path(os.environ.get("FRAME_CORPUS", ROOT.parent / "shared" / "corpus"))
# fp32 stays the reference in tests: MiniLM in bf16 (`auto` on CPUs with bf16 instructions) moves scores
# by up to ~0.002, which benchmarks/scoring.py measures; tests that want bf16 ask for it explicitly.
os.environ.setdefault("FRAME_EMBED_PRECISION", "fp32")
# `frame -v` for every command a test runs: tests read Prefect's task-run lines (names, states) off its
# output, which a quiet `frame` keeps in the log file (tests/test_eval_quiet.py checks the quiet default).
os.environ.setdefault("FRAME_VERBOSE", "1")


def _run_folder(var: str, prefix: str) -> Path:
    """The folder named by environment variable `var`; a temporary one (removed at exit) when unset."""
    if not os.environ.get(var):
        import atexit
        import tempfile

        os.environ[var] = tempfile.mkdtemp(prefix=prefix)
        atexit.register(shutil.rmtree, os.environ[var], ignore_errors=True)
    return Path(os.environ[var])


# Every run caches in a folder of its own (tests/run_suite.py: one for both of its processes), never in the
# checkout's data/cache (`make test` exports FRAME_CACHE_DIR there for the demo): a test must not pass on
# vectors, results or tokenizer files an older version of frame left behind.
_CACHE = _run_folder("FRAME_TEST_CACHE_DIR", "frame-test-cache-")
os.environ["FRAME_CACHE_DIR"] = str(_CACHE)
os.environ["PREFECT_LOCAL_STORAGE_PATH"] = str(_CACHE / "prefect-results")
os.environ["PREFECT_HOME"] = str(_CACHE / "prefect-home")
# `frame` subprocesses lose FRAME_CACHE_DIR (frame_env); without a data folder (`frame ground`, ...) they
# would keep the tokenizer file in the checkout's data/cache. Hypothesis' example database likewise.
os.environ["TIKTOKEN_CACHE_DIR"] = str(_CACHE / "tiktoken")
os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = str(_CACHE / "hypothesis")
# One compiled-MiniLM cache for the session (tests/run_suite.py: for both of its processes), as a user
# shares one across data folders: each `frame score` then loads the graph (~2 s) instead of importing
# sentence-transformers and tracing (~7 s). Tests of that cache point FRAME_MODEL_CACHE elsewhere.
_run_folder("FRAME_MODEL_CACHE", "frame-test-models-")


def edgar_rows() -> list[dict[str, str]]:
    manifest = CORPUS / "edgar" / "MANIFEST.csv"
    if not manifest.is_file():
        return []
    with manifest.open(newline="", encoding="utf-8") as fh:
        return [r for r in csv.DictReader(fh) if not r["form"].startswith("meta:")]


def arxiv_rows() -> list[dict[str, str]]:
    manifest = CORPUS / "arxiv" / "MANIFEST.csv"
    if not manifest.is_file():
        return []
    with manifest.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def ground_snapshot(domain: str, snapshot: str, out: Path, papers: list[str] | None = None) -> Path:
    """A grounding folder built by the current code from the corpus into `out/domain/snapshot`: the
    filing of `TICKER-FORM` for period `snapshot`, or the listed `papers` (arXiv ids) of topic `domain`.
    Files are found through the MANIFESTs by what they are, never by a path of this machine's data/."""
    from tasks.ground.documents import merge_grounded, write_grounding
    from tasks.sources import ground_source

    if papers is not None:
        by_id = {r["arxiv_id"]: r for r in arxiv_rows() if r["topic"] == domain}
        files = [CORPUS / "arxiv" / by_id[i]["path"] for i in papers]
        grounded = merge_grounded([ground_source(f.read_bytes(), str(f), kind="arxiv") for f in files])
    else:
        ticker, form = domain.split("-", 1)
        (row,) = [
            r for r in edgar_rows() if (r["ticker"], r["form"], r["period_end"]) == (ticker, form, snapshot)
        ]
        f = CORPUS / "edgar" / row["path"]
        grounded = ground_source(f.read_bytes(), str(f), kind="edgar", expected_form=form)
    return write_grounding(grounded, out / domain / snapshot)


@pytest.fixture(scope="session")
def grounding_sets(tmp_path_factory):
    """get(domain, snapshot, papers=None) -> GroundingSet, each built once per session (ground_snapshot)."""
    from tasks.ground.load import load_grounding_set

    if not CORPUS.is_dir():
        pytest.skip(f"shared corpus not found at {CORPUS}")
    out = tmp_path_factory.mktemp("grounding")
    built: dict[tuple, object] = {}

    def get(domain: str, snapshot: str, papers: list[str] | None = None):
        key = (domain, snapshot, tuple(papers or ()))
        if key not in built:
            folder = out / str(len(built))  # one folder per key: two paper lists of one window may differ
            built[key] = load_grounding_set(ground_snapshot(domain, snapshot, folder, papers))
        return built[key]

    return get


@pytest.fixture(scope="session")
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"shared corpus not found at {CORPUS}")
    return CORPUS


@pytest.fixture(scope="session")
def prefect_harness(tmp_path_factory):
    """The session's Prefect home and API for flows run in-process: the shared server (shared_api_url),
    or Prefect's test harness (a temporary database and server, ~10 s to start) when there is none."""
    home = tmp_path_factory.mktemp("prefect-home")
    os.environ["PREFECT_HOME"] = str(home)
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "120"
    os.environ["PREFECT_LOCAL_STORAGE_PATH"] = str(home / "results")
    url = shared_api_url()
    if url:
        from prefect.settings import PREFECT_API_URL, temporary_settings

        with temporary_settings(updates={PREFECT_API_URL: url}):
            yield home
        return
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield home


# The head of every small mirror build config of the tests (braces doubled like SMALL_DOMAINS).
MIRROR_HEAD = """
[build]
data_dir = "{data}"
[source]
mode = "mirror"
mirror = "{corpus}"
"""


# The two-domain config the build tests share: NVDA 10-Q (2 snapshots) and gravitational waves (2 windows,
# GW_DOMAIN). Braces are doubled: test modules append them to a str.format template.
GW_DOMAIN = """[[domains]]
kind = "arxiv"
name = "gw"
category = "academic_simple"
topic = "gravitational-wave-astrophysics"
query = "cat:astro-ph.HE"
papers_per_window = 3
windows = [
  {{ label = "W1", start = "2021-11-01", end = "2022-06-30" }},
  {{ label = "W2", start = "2022-07-01", end = "2023-02-28" }},
]
"""
SMALL_DOMAINS = (
    """[[domains]]
kind = "edgar"
name = "NVDA-10-Q"
category = "financial_quarterly"
ticker = "NVDA"
form = "10-Q"
periods = ["2023-07-30", "2025-07-27"]
"""
    + GW_DOMAIN
)


# A whole small build config: .format(data=..., corpus=CORPUS).
SMALL_CONFIG = MIRROR_HEAD + SMALL_DOMAINS


_SHARED_SERVER: dict[str, str] = {}


def shared_api_url() -> str | None:
    """One background Prefect server (flows/server.py, what `frame server start` runs) for the session's
    in-process flows and every `frame` subprocess: each command then skips the ~7-10 s start of a
    temporary server. tests/run_suite.py starts one for both of its processes (FRAME_TEST_PREFECT_API);
    otherwise it is started on first use and stopped at exit. FRAME_TEST_TEMP_SERVERS=1 turns it off."""
    if os.environ.get("FRAME_TEST_TEMP_SERVERS") == "1":
        return None
    if "url" not in _SHARED_SERVER and os.environ.get("FRAME_TEST_PREFECT_API"):
        _SHARED_SERVER["url"] = os.environ["FRAME_TEST_PREFECT_API"]
    if "url" not in _SHARED_SERVER:
        import atexit
        import tempfile

        from flows.server import start_server, stop_server

        data = Path(tempfile.mkdtemp(prefix="frame-test-prefect-server-"))
        try:
            _SHARED_SERVER["url"] = start_server(data)["url"]
        except RuntimeError:
            _SHARED_SERVER["url"] = ""  # fall back to temporary servers
        atexit.register(lambda: (stop_server(data), shutil.rmtree(data, ignore_errors=True)))
    return _SHARED_SERVER["url"] or None


def frame_env(prefect_home: Path, *, temporary_server: bool = False) -> dict[str, str]:
    """Environment for a `frame` subprocess with its own Prefect home (and a fixed release date). Its
    flows report to the session's shared Prefect server (`temporary_server`: a temporary one of their own,
    for tests about that path)."""
    env = {
        **os.environ,
        "PREFECT_HOME": str(prefect_home),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
        "SOURCE_DATE_EPOCH": "1767225600",
        "HF_HUB_OFFLINE": "1",
    }
    for k in ("PREFECT_API_URL", "PREFECT_LOCAL_STORAGE_PATH", "FRAME_CACHE_DIR"):
        env.pop(k, None)
    url = None if temporary_server else shared_api_url()
    if url:
        env["PREFECT_API_URL"] = url
    return env


# The folder the demo release's mirror is copied into: a name no output may hold
# (tests/test_portable_paths.py: a release names its sources portably, never by a machine path).
ODD_MIRROR_DIR = "wEiRd-Mirror_ÄØ 42"


def copy_mirror(dest: Path, kinds: tuple[str, ...] = ("edgar", "arxiv")) -> Path:
    """A writable copy of the corpus' `kinds` folders (MANIFEST.csv and files) in `dest`."""
    for kind in kinds:
        for src in sorted((CORPUS / kind).rglob("*")):
            if src.is_file():
                target = dest / src.relative_to(CORPUS)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, target)
    return dest


@pytest.fixture(scope="session")
def demo_release(tmp_path_factory) -> Path:
    """The demo release (configs/demo.toml: the whole shared corpus, offline backend), built once per
    test session into a temporary data folder with `frame build`; returns the release folder.
    The mirror is a copy of the corpus in a folder named ODD_MIRROR_DIR, so that
    tests/test_portable_paths.py can check that no output names it."""
    import subprocess
    import sys

    if not CORPUS.is_dir():
        pytest.skip(f"shared corpus not found at {CORPUS}")
    tmp = tmp_path_factory.mktemp("demo")
    mirror = copy_mirror(tmp / ODD_MIRROR_DIR / "corpus")
    text = (ROOT / "configs" / "demo.toml").read_text(encoding="utf-8")
    text = text.replace('data_dir = "../data"', f'data_dir = "{tmp / "data"}"')
    text = text.replace('mirror = "../../shared/corpus"', f'mirror = "{mirror}"')
    cfg = tmp / "demo.toml"
    cfg.write_text(text, encoding="utf-8")
    frame = str(Path(sys.executable).with_name("frame"))
    res = subprocess.run(
        [frame, "build", "--config", str(cfg), "--release", "demo", "--version", "0.1.0"],
        capture_output=True,
        text=True,
        env=frame_env(tmp / "prefect"),
        timeout=1200,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    release = tmp / "data" / "releases" / "demo" / "0.1.0"
    assert (release / "instances.parquet").is_file()
    return release


SCORED_SYSTEMS = "gold,copy-sample,extractive"
# every family: FRAME's three, table/text fidelity, semantic scaffold, rubric, holistic, pairwise + BT
SCORED_METRICS = (
    "structure,coverage,faithfulness,teds,teds_s,text_edit_distance,scaffold,rubric,holistic,pairwise"
)
SCORED_MAX_ITEMS = 100  # the default


@pytest.fixture(scope="session")
def demo_scored(demo_release, tmp_path_factory) -> dict:
    """`frame score` (offline judges, every metric family) over the demo release for gold, copy-sample and
    extractive, run twice with one Prefect home: the second run must come entirely from cache.
    Returns {"release", "out" (the scores folder), "cache" (FRAME_CACHE_DIR used), "home" (PREFECT_HOME),
    "first", "second"}."""
    import subprocess
    import sys

    home = tmp_path_factory.mktemp("score-prefect")
    frame = str(Path(sys.executable).with_name("frame"))
    args = [frame, "score", "--release", str(demo_release), "--systems", SCORED_SYSTEMS]
    args += ["--metrics", SCORED_METRICS, "--max-items", str(SCORED_MAX_ITEMS)]
    runs = []
    for _ in range(2):
        res = subprocess.run(args, capture_output=True, text=True, env=frame_env(home), timeout=1800)
        assert res.returncode == 0, res.stderr[-3000:]
        runs.append(res)
    data = demo_release.parents[2]
    return {
        "release": demo_release,
        "out": data / "scores" / "demo" / "0.1.0",
        "cache": data / "cache",
        "home": home,
        "first": runs[0],
        "second": runs[1],
    }
