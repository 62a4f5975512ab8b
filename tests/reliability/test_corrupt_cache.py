"""A corrupted cache entry or stored file is detected, recomputed (or fetched again) and logged.

(a) Prefect persisted task results (`<data>/cache/prefect-results/<cache key>`). Prefect 3.9.1 itself
    treats an unreadable result as a silent miss (`ResultStore.exists` swallows every error) and
    writes results non-atomically; `flows/results.py` makes the writes atomic and has the cache
    policy log and quarantine an unreadable entry. End to end: a torn, a garbage and a bad-pickle
    entry plus a corrupted raw blob in one rebuild.
(b) LLM response cache (`tasks/llm/cache.py`) over the OpenAI path against tests/llm_server.py.
    Already covered in tests/test_llm_client.py and not repeated: a truncated chat entry is logged as
    corrupt, asked again and overwritten (`test_corrupted_cache_entry_is_recomputed`); a wrong-shape
    entry is a miss (`test_cache_module_roundtrip`). Here: bytes that are not UTF-8 (they used to raise
    UnicodeDecodeError out of the cache) and a corrupted embedding entry.
(c) Embedding cache (`tasks/score/embed.py`). Already covered in tests/test_score_embed.py
    (`test_cached_corrupted_file_is_recomputed`: garbage bytes and a wrong dimension are recomputed).
    Here: a truncated shard, an empty shard and a NaN vector, each logged by path, recomputed once.
(d) Content-addressed raw blobs (`tasks/fetch/store.py`). Storing the bytes again repairs a bad blob
    (tests/test_fetch_mirror.py `test_store_layout_idempotence_and_tamper_check`). Here: `read_raw`
    restores a mirror-fetched blob from its mirror file (logged, bad copy quarantined), and fails in
    one line naming the blob and `frame rerun fetch` when it cannot.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from prefect.filesystems import LocalFileSystem  # imported first: Prefect's logging setup resets handlers
from pydantic import BaseModel

import tests.llm_server as fake_llm
from flows.results import (
    QUARANTINE,
    check_cached_result,
    install_atomic_result_writes,
    unreadable_reason,
)
from tasks.errors import FrameInputError
from tasks.fetch.store import read_raw, store_raw
from tasks.llm.client import LLMClient
from tasks.score.embed import CachedEmbedder
from tests.llm_server import fast_settings, json_reply
from tests.reliability.conftest import (
    file_ids,
    keyed_results,
    release_dir,
    run_build,
    task_lines,
    tree_hashes,
)
from tests.test_score_embed import CountingFake

llm_server = fake_llm.llm_server  # the pytest fixture (a started local server), used by name below


def _record(result) -> bytes:
    from prefect._internal.result_records import ResultRecord, ResultRecordMetadata
    from prefect.serializers import PickleSerializer

    meta = ResultRecordMetadata(storage_key="k", serializer=PickleSerializer())
    return ResultRecord(metadata=meta, result=result).serialize()


def _bad_pickle(record: bytes) -> bytes:
    """The same record with its pickled payload replaced: valid JSON, an unloadable result."""
    doc = json.loads(record)
    doc["result"] = base64.b64encode(b"\x80\x05garbage").decode()
    return json.dumps(doc).encode()


# ------------------------------------------------------------------ (a) Prefect persisted results


def test_result_writes_are_atomic(tmp_path, monkeypatch):
    import tasks.atomic

    install_atomic_result_writes()
    fs = LocalFileSystem(basepath=str(tmp_path))
    fs.write_path("key", b"old", _sync=True)
    assert (tmp_path / "key").read_bytes() == b"old" and (tmp_path / "key").stat().st_mode & 0o777 == 0o644

    def crash(fd):  # the writer dies after writing part of the new content, before the rename
        raise OSError(5, "simulated crash mid-write")

    monkeypatch.setattr(tasks.atomic.os, "fsync", crash)
    with pytest.raises(OSError, match="mid-write"):
        fs.write_path("key", b"new" * 100_000, _sync=True)
    assert (tmp_path / "key").read_bytes() == b"old"  # Prefect's own write_path would leave a torn file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["key"]


def test_unreadable_results_are_named_and_quarantined(tmp_path, caplog):
    good = _record({"x": 1})
    cases = {
        "good": good,
        "torn": good[: len(good) // 2],
        "empty": b"",
        "garbage": os.urandom(4096),
        "bad-pickle": _bad_pickle(good),
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
    assert unreadable_reason(tmp_path / "good") is None
    assert unreadable_reason(tmp_path / "absent") is None  # a plain miss
    assert unreadable_reason(tmp_path / "empty") == "empty file"
    ctx = SimpleNamespace(
        task=SimpleNamespace(name="fill"),
        result_store=SimpleNamespace(
            result_storage=LocalFileSystem(basepath=str(tmp_path)), metadata_storage=None
        ),
    )
    with caplog.at_level(logging.WARNING):
        for name in cases:
            check_cached_result(ctx, name)
    assert (tmp_path / "good").read_bytes() == good
    for name in ("torn", "empty", "garbage", "bad-pickle"):
        assert not (tmp_path / name).exists()
        assert (tmp_path / QUARANTINE / name).read_bytes() == cases[name]
        line = next(r.getMessage() for r in caplog.records if f"key {name})" in r.getMessage())
        assert "task 'fill'" in line and str(tmp_path / name) in line and "recomputing" in line
    assert len(caplog.records) == 4


def _classify(data: Path) -> dict[str, Path]:
    """Pick persisted results by what they hold: the domain entry, W2's fill, the first paper's convert."""
    from prefect._internal.result_records import ResultRecord

    from tasks.ground.documents import Grounded
    from tasks.synthesize.fill import FillResult
    from tasks.synthesize.outcome import DomainOutcome

    w2 = (data / "reports" / "gw" / "W2" / "report.md").read_text(encoding="utf-8")
    found: dict[str, Path] = {}
    converts = []
    for path in keyed_results(data).values():
        value = ResultRecord.deserialize(path.read_bytes()).result
        if isinstance(value, DomainOutcome):
            found["build-domain"] = path
        elif isinstance(value, FillResult) and value.report == w2:
            found["fill"] = path
        elif isinstance(value, Grounded):
            converts.append((value.source_sha256, path))
    sha, found["convert"] = min(converts)
    found["blob"] = next((data / "raw" / "sha256" / sha[:2]).glob(f"{sha}*"))
    return found


def test_corrupted_results_and_blob_are_detected_recomputed_and_logged(gw_reference, reliability_home):
    data, total = gw_reference["data"], gw_reference["keys"]
    picked = _classify(data)
    blob = picked["blob"]
    bad = {
        "build-domain": picked["build-domain"].read_bytes()[:5000],  # torn: a write cut short
        "fill": os.urandom(3000),  # overwritten with garbage
        "convert": _bad_pickle(picked["convert"].read_bytes()),  # valid JSON, bad pickle
    }
    for step, content in bad.items():
        picked[step].write_bytes(content)
    blob.chmod(0o644)
    blob.write_bytes(blob.read_bytes().replace(b"<", b"[", 50))  # the paper's bytes changed on disk
    untouched = {
        k: v for k, v in file_ids(keyed_results(data)).items() if k not in {picked[s].name for s in bad}
    }

    res = run_build(gw_reference["cfg"], reliability_home)
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-3000:]
    out = res.stdout

    # detected and logged, naming the task, the key and the file; the bad copy kept for inspection
    for step, content in bad.items():
        path = picked[step]
        line = next((ln for ln in out.splitlines() if f"(key {path.name})" in ln), None)
        assert line is not None and "WARNING" in line and f"task {step!r}" in line and str(path) in line, out
        assert (path.parent / QUARANTINE / path.name).read_bytes() == content
        assert unreadable_reason(path) is None  # a good entry written in its place
    blob_line = next(ln for ln in out.splitlines() if str(blob) in ln)
    assert (
        "WARNING" in blob_line and "changed on disk" in blob_line and "restored from the mirror" in blob_line
    )
    assert hashlib.sha256(blob.read_bytes()).hexdigest() == blob.name.split(".")[0]
    assert (data / "raw" / ".quarantine" / blob.name).is_file()

    # recomputed: exactly the three steps; everything else from its cache entry, never rewritten
    lines = task_lines(out)
    ran = sorted(
        re.search(r"Task run '([^'·]+?)(?: · [^']*)?' ", ln).group(1) for ln in lines if "Completed()" in ln
    )
    assert ran == ["build-domain", "convert", "fill"], lines
    assert len(lines) == total and sum("Cached(" in ln for ln in lines) == total - 3
    assert file_ids({k: p for k, p in keyed_results(data).items() if k in untouched}) == untouched
    assert len(keyed_results(data)) == total
    assert tree_hashes(release_dir(data)) == gw_reference["hashes"]  # the same release, byte for byte


# ------------------------------------------------------------------------- (b) LLM response cache

KEY_ENV = "FRAME_TEST_CORRUPT_CACHE_KEY"
MESSAGES = [{"role": "user", "content": "Give a title."}]


class Title(BaseModel):
    title: str


def test_llm_cache_garbage_and_bad_embedding_entries_are_misses(llm_server, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    llm_server.default_chat = json_reply({"title": "T"})
    client = LLMClient(fast_settings(llm_server, KEY_ENV), tmp_path / "cache")
    first = client.complete_json("answer", MESSAGES, Title, None)
    client.embed(["alpha", "beta"], model="embed-model")
    kinds = {
        p: json.loads(p.read_text())["kind"] for p in sorted((tmp_path / "cache" / "llm").rglob("*.json"))
    }
    [chat] = [p for p, kind in kinds.items() if kind == "chat"]
    embeds = [p for p, kind in kinds.items() if kind == "embedding"]
    chat.write_bytes(b"\xff\xfe\x00garbage")  # not UTF-8
    doc = json.loads(embeds[0].read_text())
    doc["embedding"] = ["not", "numbers"]
    embeds[0].write_text(json.dumps(doc))
    calls = len(llm_server.requests)

    with caplog.at_level(logging.WARNING, logger="tasks.llm.cache"):
        again = client.complete_json("answer", MESSAGES, Title, None)
        vecs = client.embed(["alpha", "beta"], model="embed-model")
    assert not again.cached and again.value == first.value
    assert len(vecs) == 2 and all(isinstance(x, float) for v in vecs for x in v)
    assert len(llm_server.requests) == calls + 2  # one chat, one embedding request (only the bad text)
    assert len(llm_server.embedding_requests[-1].body["input"]) == 1
    warned = [r.getMessage() for r in caplog.records if "corrupt" in r.getMessage()]
    assert any(str(chat) in m for m in warned) and any(str(embeds[0]) in m for m in warned), warned
    assert json.loads(chat.read_text(encoding="utf-8"))["kind"] == "chat"  # overwritten with a good entry
    assert client.complete_json("answer", MESSAGES, Title, None).cached


# ----------------------------------------------------------------------------- (c) embedding cache


def test_embedding_cache_truncated_empty_and_nan_shards(tmp_path, caplog):
    from tasks.score import embed as E

    inner = CountingFake()  # the embed tests' deterministic fake
    emb = CachedEmbedder(inner, tmp_path)
    good = np.vstack([emb.embed([t]) for t in ("a", "b", "c", "d")])  # one shard per text here
    shards = {t: emb.shard_of(t) for t in "abc"}
    full = shards["a"].read_bytes()
    shards["a"].write_bytes(full[: len(full) - 7])  # torn: header whole, data cut
    shards["b"].write_bytes(b"")
    rows = np.load(shards["c"])
    rows["vec"][:] = np.nan
    np.save(shards["c"], rows)
    E._STORES.clear()  # as a new process would read them
    emb = CachedEmbedder(inner, tmp_path)
    with caplog.at_level(logging.WARNING, logger="tasks.score.embed"):
        again = emb.embed(["a", "b", "c", "d"])
    assert inner.calls[-1] == ["a", "b", "c"]  # only the bad entries, once each
    np.testing.assert_allclose(again, good, rtol=1e-6)
    for t in "abc":
        assert any(str(shards[t]) in r.getMessage() for r in caplog.records), t
    E._STORES.clear()
    CachedEmbedder(inner, tmp_path).embed(["a", "b", "c", "d"])
    assert len(inner.calls) == 5


# --------------------------------------------------------------------------------- (d) raw blobs


def _mirror_raw(tmp_path: Path, content: bytes):
    mirror = tmp_path / "mirror" / "arxiv" / "paper.html"
    mirror.parent.mkdir(parents=True)
    mirror.write_bytes(content)
    # the record names the file relative to the mirror folder; read_raw is given the folder
    prov = dict(source="arxiv", origin="mirror", location="arxiv/paper.html", domain="gw", snapshot="W1")
    return mirror, store_raw(tmp_path / "data", content, ".html", **prov)


def _read(raw, tmp_path: Path) -> bytes:
    return read_raw(raw, tmp_path / "data", tmp_path / "mirror")


def test_raw_blob_restored_from_its_mirror_file(tmp_path, caplog):
    content = b"<html><body>" + b"paper " * 1000 + b"</body></html>"
    mirror, raw = _mirror_raw(tmp_path, content)
    blob = tmp_path / "data" / raw.path
    blob.chmod(0o644)
    blob.write_bytes(content[:100])  # truncated on disk
    with caplog.at_level(logging.WARNING, logger="tasks.fetch.store"):
        assert _read(raw, tmp_path) == content
    assert blob.read_bytes() == content and blob.stat().st_mode & 0o777 == 0o444
    assert (tmp_path / "data" / "raw" / ".quarantine" / blob.name).read_bytes() == content[:100]
    msg = caplog.records[-1].getMessage()
    assert str(blob) in msg and "changed on disk" in msg and f"restored from the mirror file {mirror}" in msg
    blob.unlink()  # missing: restored the same way
    assert _read(raw, tmp_path) == content and "is missing" in caplog.records[-1].getMessage()


@pytest.mark.parametrize("why", ["mirror changed too", "live fetch"])
def test_raw_blob_that_cannot_be_restored_is_a_clear_error(tmp_path, caplog, why):
    content = b"<html>filing</html>"
    mirror, raw = _mirror_raw(tmp_path, content)
    if why == "live fetch":
        raw = raw.model_copy(update={"origin": "live", "location": "https://example.test/x"})
    else:
        mirror.write_bytes(b"<html>edited</html>")
    blob = tmp_path / "data" / raw.path
    blob.chmod(0o644)
    blob.write_bytes(b"garbage")
    with caplog.at_level(logging.WARNING, logger="tasks.fetch.store"), pytest.raises(FrameInputError) as exc:
        _read(raw, tmp_path)
    text = str(exc.value)
    assert (
        str(blob) in text
        and "changed on disk" in text
        and "frame rerun fetch --domain gw --snapshot W1" in text
    )
    assert "\n" not in text and "cannot be restored" in caplog.records[-1].getMessage()
    # fetching again (store_raw with the good bytes) repairs the store
    prov = raw.model_dump(include={"source", "origin", "location", "domain", "snapshot"})
    store_raw(tmp_path / "data", content, ".html", **prov)
    assert _read(raw, tmp_path) == content
