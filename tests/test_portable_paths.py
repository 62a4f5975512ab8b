"""No machine paths in releases and outputs (issue 12).

A release and every output name their sources portably: the source kind, the path relative to the
mirror folder (`edgar/AAPL/10-Q/2025-06-28.htm`, `arxiv/<topic>/<id>.html`) or a URL, the accession
or arXiv id and the sha256; never an absolute path of the building machine.

The session's demo build (tests/conftest.py `demo_release`, every filing and paper of the corpus) reads
a copy of the corpus in a folder named ODD_MIRROR_DIR (spaces and non-ASCII letters), and its scoring
run (`demo_scored`, every metric family) scores that release: this module greps every file they write
for that folder name and for the session's temporary folder, bytes as written and parquet cells decoded.

Files that may name machine paths: operational state that is never published, listed in OPERATIONAL
(task-result and LLM/embedding caches, console logs, lock owner files). Everything else is checked:
grounding/ (Markdown, documents.json, facts.parquet), reports/ (structure, outline, report,
validation.json), raw/ (blobs and provenance records), runs/ (the run records `frame status` reads),
releases/ (parquet, manifest.json, README.md), generations/, scores/ and `frame report` pages.
Focused checks: `frame ground` output, the paper converter's Source line, the release writer's guard,
the score manifest's release name and the config hash (independent of where the folders are).
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from schemas.release_rows import document_metadata
from tests.conftest import CORPUS, ODD_MIRROR_DIR, frame_env

pytestmark = pytest.mark.skipif(not (CORPUS / "edgar").is_dir(), reason="shared corpus not found")

FRAME = str(Path(sys.executable).with_name("frame"))

# The folder name as written, and its ASCII part: it also finds JSON-escaped (\u00c4) or URL-quoted forms.
MARK = ODD_MIRROR_DIR
MARK_ASCII = "wEiRd-Mirror"

# Data-folder parts that may hold machine paths: operational, never published.
OPERATIONAL = (
    "cache",  # Prefect task results (they hold the config: data and mirror folders), LLM/embedding caches
    "logs",  # console logs of builds and scoring runs
    ".locks",  # lock owner files of the data folder
    "releases/.locks",  # lock owner files of release versions
)


def needles(tmp: Path) -> list[str]:
    """What no checked file may contain: the odd folder name and the session's temporary folder."""
    out = [MARK, MARK_ASCII, str(tmp)]
    if str(tmp.resolve()) != str(tmp):
        out.append(str(tmp.resolve()))
    return out


def _is_operational(data: Path, path: Path) -> bool:
    rel = path.relative_to(data).as_posix()
    return any(rel == p or rel.startswith(p + "/") for p in OPERATIONAL)


def _cells(value, where: str):
    """Every string inside a decoded parquet cell (lists and structs walked)."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _cells(v, f"{where}.{k}")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from _cells(v, f"{where}[{i}]")


def offences(path: Path, find: list[str]) -> list[str]:
    """Where `path` holds one of `find`: its bytes, and for parquet every decoded cell too."""
    data = path.read_bytes()
    hits = []
    for n in find:
        k = data.find(n.encode("utf-8"))
        if k >= 0:
            hits.append(f"{path}: bytes hold {n!r}: ...{data[max(0, k - 80) : k + 80]!r}...")
    if path.suffix == ".parquet":
        table = pq.read_table(path)
        meta = table.schema.metadata or {}
        text = json.dumps({k.decode(): v.decode(errors="replace") for k, v in meta.items()})
        hits += [f"{path}: schema metadata holds {n!r}" for n in find if n in text]
        for col in table.column_names:
            for row, value in enumerate(table.column(col).to_pylist()):
                for where, s in _cells(value, f"{col}[{row}]"):
                    for n in find:
                        if n in s:
                            k = s.find(n)
                            hits.append(f"{path}: {where} holds {n!r}: ...{s[max(0, k - 80) : k + 80]!r}...")
    return hits


def scan(folder: Path, find: list[str], data: Path | None = None) -> tuple[int, list[str]]:
    """(files checked, offences) of every file under `folder` (OPERATIONAL parts of `data` skipped)."""
    checked, hits = 0, []
    for p in sorted(folder.rglob("*")):
        if not p.is_file() or (data is not None and _is_operational(data, p)):
            continue
        checked += 1
        hits += offences(p, find)
    return checked, hits


def manifest_rows(kind: str) -> dict[str, dict[str, str]]:
    """Mirror-relative path (`<kind>/<MANIFEST path>`) -> MANIFEST row of the corpus."""
    with (CORPUS / kind / "MANIFEST.csv").open(newline="", encoding="utf-8") as fh:
        return {f"{kind}/{r['path']}": r for r in csv.DictReader(fh)}


# ------------------------------------------------------------------------------- the demo build


@pytest.fixture(scope="module")
def demo(demo_release) -> dict:
    tmp = demo_release.parents[3]  # <tmp>/data/releases/demo/0.1.0
    data = tmp / "data"
    config = (tmp / "demo.toml").read_text(encoding="utf-8")
    assert f'mirror = "{tmp / MARK / "corpus"}"' in config  # the build read the odd copy of the corpus
    return {"tmp": tmp, "data": data, "release": demo_release}


def test_scanner_finds_machine_paths_where_they_are_allowed(demo):
    """Positive control: the task-result cache (operational) holds the data folder's path (where a
    build wrote its grounding sets); the scanner finds it there."""
    cache = demo["data"] / "cache"
    hits = [h for p in cache.rglob("*") if p.is_file() for h in offences(p, [str(demo["tmp"])])]
    assert hits


def test_scanner_decodes_parquet_cells(tmp_path):
    import pyarrow as pa

    probe = tmp_path / "probe.parquet"
    pq.write_table(pa.table({"x": [["a", f"/x/{MARK}/y"]]}), probe, compression="zstd")
    assert any("x[0][1]" in h for h in offences(probe, [MARK]))  # zstd pages: found by decoding


def test_build_outputs_hold_no_machine_path(demo):
    data = demo["data"]
    checked, hits = scan(data, needles(demo["tmp"]), data)
    assert not hits, "\n".join(hits[:20])
    # every part that is published or read back was there to be checked
    for part in ("grounding", "reports", "raw/provenance", "raw/sha256", "runs", "releases/demo/0.1.0"):
        assert any((data / part).rglob("*")), part
    assert checked > 100


def test_release_names_sources_portably(demo):
    release = demo["release"]
    manifest = json.loads((release / "manifest.json").read_text(encoding="utf-8"))
    known = {**manifest_rows("edgar"), **manifest_rows("arxiv")}
    sources = {s["path_or_url"]: s["sha256"] for s in manifest["sources"]}
    assert sources and set(sources) <= set(known), sorted(set(sources) - set(known))
    assert all(sha == known[ref]["sha256"] for ref, sha in sources.items())
    assert {ref.split("/", 1)[0] for ref in sources} == {"edgar", "arxiv"}
    card = (release / "README.md").read_text(encoding="utf-8")
    for ref, sha in sources.items():
        assert f"| {ref} | `{sha}` |" in card


def test_provenance_records_are_portable(demo):
    data = demo["data"]
    known = {**manifest_rows("edgar"), **manifest_rows("arxiv")}
    records = [json.loads(p.read_text()) for p in (data / "raw" / "provenance").rglob("*.json")]
    assert records
    for r in records:
        assert r["origin"] == "mirror" and r["location"] in known, r["location"]
        assert known[r["location"]]["sha256"] == r["sha256"]
        assert r["path"] == f"raw/sha256/{r['sha256'][:2]}/{r['sha256']}{Path(r['path']).suffix}"
        assert (data / r["path"]).is_file()


def test_arxiv_documents_name_their_source_portably(demo):
    docs = pq.read_table(demo["release"] / "grounding_documents.parquet").to_pylist()
    papers = [d for d in docs if d["source_kind"] == "arxiv"]
    known = manifest_rows("arxiv")
    assert papers
    for d in papers:
        meta = document_metadata(d)
        lines = [x for x in d["markdown"].splitlines() if x.startswith("- Source: ")]
        assert len(lines) == 1, d["doc_id"]
        m = re.fullmatch(r"- Source: (arxiv/[a-z0-9-]+/[\w.-]+\.html) \([a-z0-9-]+\)", lines[0])
        assert m, lines[0]
        ref = m.group(1)
        assert known[ref]["arxiv_id"] == meta["arxiv_id"] and known[ref]["sha256"] == d["source_sha256"]
        assert meta["source_name"] == ref


def test_score_outputs_hold_no_machine_path(demo, demo_scored, tmp_path):
    data = demo["data"]
    out = demo_scored["out"]
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["release"] == "demo/0.1.0"
    pages = tmp_path / "report"
    res = subprocess.run(
        [FRAME, "report", "--scores", str(out), "--out", str(pages)],
        capture_output=True,
        text=True,
        env=frame_env(tmp_path / "prefect"),
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Release: demo/0.1.0\n" in (pages / "index.md").read_text(encoding="utf-8")
    find = needles(demo["tmp"])
    hits = []
    for folder in (out, data / "generations", pages):
        checked, found = scan(folder, find, data if folder.is_relative_to(data) else None)
        assert checked, folder
        hits += found
    assert not hits, "\n".join(hits[:20])
    for name in ("scores.parquet", "evidence.parquet", "leaderboard.md", "leaderboard.csv"):
        assert (out / name).is_file(), name


# ------------------------------------------------------------------------------- focused checks


def test_frame_ground_records_the_file_name_not_its_folder(tmp_path):
    """`frame ground PATH`: errors name PATH as given; the documents only its file name."""
    ref = "gravitational-wave-astrophysics/2207.12409.html"
    src = tmp_path / MARK / "in" / "2207.12409.html"
    src.parent.mkdir(parents=True)
    src.write_bytes((CORPUS / "arxiv" / ref).read_bytes())
    out = tmp_path / MARK / "out"
    env = frame_env(tmp_path / "prefect")

    def ground(path: Path) -> subprocess.CompletedProcess:
        args = [FRAME, "ground", str(path), "--out", str(out)]
        return subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)

    res = ground(src)
    assert res.returncode == 0, res.stderr[-3000:]
    (md,) = out.glob("*.md")
    assert "- Source: 2207.12409.html (" in md.read_text(encoding="utf-8")
    checked, hits = scan(out, [MARK, MARK_ASCII, str(tmp_path)])
    assert checked >= 2 and not hits, hits
    bad = src.with_name("empty.html")
    bad.write_bytes(b"")
    res = ground(bad)
    assert res.returncode == 2 and str(bad) in res.stderr  # the error names the file as given


def test_paper_source_ref_and_error_name():
    from tasks.errors import FrameInputError
    from tasks.ground.paper import paper_to_markdown

    data = (CORPUS / "arxiv" / "gravitational-wave-astrophysics" / "2207.12409.html").read_bytes()
    local = f"/home/someone/{MARK}/2207.12409.html"
    ref = "arxiv/gravitational-wave-astrophysics/2207.12409.html"
    paper = paper_to_markdown(data, source_name=local, source_ref=ref, meta={"arxiv_id": "2207.12409"})
    assert f"- Source: {ref} (" in paper.markdown and paper.metadata["source_name"] == ref
    assert MARK_ASCII not in paper.markdown + json.dumps(paper.metadata)
    with pytest.raises(FrameInputError, match=re.escape(local)):
        paper_to_markdown(data[: len(data) // 2], source_name=local, source_ref=ref)


def test_release_writer_refuses_machine_paths(tmp_path):
    from tasks.errors import FrameInputError
    from tests.test_release import SHA, write

    for bad in (f"/srv/{MARK}/corpus/edgar/a.htm", "C:\\corpus\\edgar\\a.htm", "file:///corpus/a.htm"):
        with pytest.raises(FrameInputError, match=r"sources\.0\.path_or_url.*path of this machine"):
            write(tmp_path / "r", sources=[{"path_or_url": bad, "sha256": SHA}])
        assert not list((tmp_path / "r").rglob("*.parquet"))
    ok = [{"path_or_url": "edgar/AAPL/10-Q/2025-06-28.htm", "sha256": SHA}]
    ok.append({"path_or_url": "https://www.sec.gov/Archives/edgar/data/320193/a.htm", "sha256": SHA})
    assert (write(tmp_path / "r", sources=ok) / "manifest.json").is_file()


def test_score_manifest_names_the_release_not_its_folder(tmp_path):
    from flows.score import release_id

    release = tmp_path / MARK / "releases" / "frame-x" / "2.0.0"
    release.mkdir(parents=True)
    assert release_id(release) == "frame-x/2.0.0"  # no manifest: the folder's last two names
    (release / "manifest.json").write_text(json.dumps({"name": "frame-y", "version": "2.1.0"}))
    assert release_id(release) == "frame-y/2.1.0"


def test_config_hash_ignores_where_the_data_and_the_mirror_live(tmp_path):
    """A release's config_sha256 (manifest and card) is the same wherever the folders are."""
    from flows.build import config_digest
    from tasks.config import load_config
    from tests.conftest import SMALL_CONFIG

    def digest(folder: Path, text: str = SMALL_CONFIG) -> str:
        folder.mkdir(parents=True)
        cfg = folder / "c.toml"
        cfg.write_text(text.format(data=folder / "data", corpus=folder / "corpus"), encoding="utf-8")
        return config_digest(load_config(cfg))

    here = digest(tmp_path / "a")
    assert digest(tmp_path / MARK / "b") == here
    other = SMALL_CONFIG.replace("papers_per_window = 3", "papers_per_window = 2")
    assert digest(tmp_path / "c", other) != here  # what is built still counts
