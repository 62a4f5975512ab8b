"""Offline o200k_base token counts (tasks.tokens)."""

from __future__ import annotations

import hashlib
import importlib.util
import socket
import struct
import threading
from pathlib import Path

import pytest
import tiktoken
import tiktoken.load
import tiktoken.registry

from tasks import tokens

SAMPLES = {
    "": 0,
    "hello world": 2,
    "Revenue increased 12.5% to $1,234 million.": 14,
    "naïve café 日本語のテキスト": 10,
    "<|endoftext|> x": 8,  # special-token strings count as ordinary text
    "  \n\n\t  spaces": 3,
}


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("network disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


@pytest.fixture
def fresh(monkeypatch, tmp_path, no_network):
    """A fresh cache dir under tmp_path, no loaded encoder anywhere, and no network."""
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.setenv("FRAME_CACHE_DIR", str(tmp_path / "frame-cache"))
    monkeypatch.setattr(tokens, "_ENCODER", None)
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    return tmp_path / "frame-cache" / "tiktoken"


def test_constants_match_installed_tiktoken():
    spec = importlib.util.find_spec("tiktoken_ext.openai_public")
    assert spec is not None and spec.origin
    src = Path(spec.origin).read_text()
    block = src[src.index("def o200k_base") :][:600]
    assert tokens.O200K_BLOB_URL in block
    assert tokens.O200K_SHA256 in block
    assert tokens.cache_key() == hashlib.sha1(tokens.O200K_BLOB_URL.encode()).hexdigest()


def test_ensure_creates_cache_dir_and_file(fresh, monkeypatch):
    assert not fresh.exists()
    path = tokens.ensure_o200k()
    assert path == fresh / tokens.cache_key()
    assert path.is_file()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == tokens.O200K_SHA256
    assert [p.name for p in fresh.iterdir()] == [path.name]  # no temp files left behind
    first = path.read_bytes().splitlines()[:2]
    assert first == [b"IQ== 0", b"Ig== 1"]  # base64(b"!") 0, base64(b'"') 1
    # tiktoken's own cached reader accepts it (cache key, format, hash) without touching the network
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(fresh))
    data = tiktoken.load.read_file_cached(tokens.O200K_BLOB_URL, tokens.O200K_SHA256)
    assert data == path.read_bytes()


def test_default_dir_is_repo_data_cache(monkeypatch):
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.delenv("FRAME_CACHE_DIR", raising=False)
    repo = Path(tokens.__file__).resolve().parents[1]
    assert tokens.cache_dir() == repo / "data" / "cache" / "tiktoken"
    monkeypatch.setenv("FRAME_CACHE_DIR", "/x/y")
    assert tokens.cache_dir() == Path("/x/y/tiktoken")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "/a/b")
    assert tokens.cache_dir() == Path("/a/b")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # empty = unset here (tiktoken would disable caching)
    assert tokens.cache_dir() == Path("/x/y/tiktoken")


def test_preset_tiktoken_cache_dir_is_used(fresh, monkeypatch, tmp_path):
    preset = tmp_path / "preset"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(preset))
    assert tokens.count_tokens("hello world") == 2
    assert (preset / tokens.cache_key()).is_file()
    assert not fresh.exists()


def test_counts_offline_and_match_quicktok(fresh):
    quicktok = pytest.importorskip("quicktok")
    qt = quicktok.get_encoding("o200k_base")
    enc = tokens.get_encoder()
    assert enc.name == "o200k_base"
    for text, expected in SAMPLES.items():
        ids = enc.encode_ordinary(text)
        # cross-check: quicktok's own tokenizer gives the same ids, hence the same count ...
        assert ids == list(qt.encode_ordinary(text)), text
        assert tokens.count_tokens(text) == len(ids)
        # ... and the counts are the ones recorded when this test was written
        assert tokens.count_tokens(text) == expected, text
    assert tokens.count_tokens_many(list(SAMPLES)) == list(SAMPLES.values())
    assert (fresh / tokens.cache_key()).is_file()


def test_longer_text_matches_quicktok(fresh):
    quicktok = pytest.importorskip("quicktok")
    qt = quicktok.get_encoding("o200k_base")
    text = (
        "Item 7. Management's Discussion and Analysis of Financial Condition and Results of Operations\n\n"
        "| Segment | 2024 | 2023 |\n|---|---:|---:|\n| Cloud | $1,234.5 | (98.7) |\n"
        "Ελληνικά, русский, العربية, 中文, emoji 🚀🚀 and code `def f(x): return x**2`\r\n" * 20
    )
    assert tokens.count_tokens(text) == len(qt.encode_ordinary(text)) > 100
    assert tokens.get_encoder().decode(tokens.get_encoder().encode_ordinary(text)) == text


def test_corrupt_cache_file_is_rebuilt(fresh):
    fresh.mkdir(parents=True)
    target = fresh / tokens.cache_key()
    target.write_bytes(b"garbage 0\n")
    assert tokens.ensure_o200k() == target
    assert hashlib.sha256(target.read_bytes()).hexdigest() == tokens.O200K_SHA256


def test_hash_mismatch_raises_clear_error(fresh, monkeypatch, tmp_path):
    bogus = tmp_path / "o200k.vocab"
    entries = [b"a", b"b", b"ab"]
    bogus.write_bytes(
        struct.pack("<I", len(entries))
        + b"".join(struct.pack("<H", len(t)) + t + struct.pack("<I", r) for r, t in enumerate(entries))
    )
    monkeypatch.setattr(tokens, "quicktok_vocab_path", lambda: bogus)
    with pytest.raises(RuntimeError, match="sha256"):
        tokens.ensure_o200k()
    with pytest.raises(RuntimeError, match="refusing"):
        tokens.count_tokens("hello")
    assert not fresh.exists() or not any(fresh.iterdir())


def test_malformed_vocab_raises():
    with pytest.raises(RuntimeError, match="truncated"):
        tokens.convert_quicktok_vocab(struct.pack("<I", 2) + struct.pack("<H", 5) + b"ab")
    with pytest.raises(RuntimeError, match="trailing"):
        tokens.convert_quicktok_vocab(struct.pack("<I", 0) + b"x")
    good = struct.pack("<I", 1) + struct.pack("<H", 1) + b"a" + struct.pack("<I", 0)
    assert tokens.convert_quicktok_vocab(good) == b"YQ== 0\n"


def test_missing_quicktok_file_raises(fresh, monkeypatch):
    monkeypatch.setattr(tokens, "_QUICKTOK_VOCAB", ("data", "no-such.vocab"))
    with pytest.raises(RuntimeError, match="not found"):
        tokens.ensure_o200k()


def test_thread_safe_first_use(fresh):
    results: list[object] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def worker():
        try:
            barrier.wait()
            results.append(tokens.get_encoder())
            assert tokens.count_tokens("hello world") == 2
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 8 and all(r is results[0] for r in results)
    names = sorted(p.name for p in fresh.iterdir())  # the BPE file and its ranks copy, nothing half-written
    assert names[0] == tokens.cache_key() and len(names) == 2 and names[1].endswith(".marshal")


def test_encoder_from_the_ranks_copy_is_tiktokens_own(fresh):
    # the encoding frame builds (pattern, special tokens, ranks from its marshal copy) must be tiktoken's
    import tiktoken_ext.openai_public as public

    path = tokens.ensure_o200k()
    with tokens._tiktoken_cache_env(path.parent):
        ref = public.o200k_base()
        lib = tiktoken.get_encoding("o200k_base")
    assert tokens.O200K_PAT_STR == ref["pat_str"] and tokens.O200K_SPECIAL_TOKENS == ref["special_tokens"]
    assert len(ref["mergeable_ranks"]) == tokens.O200K_RANKS
    text = "Net revenue rose 12% to $4.1 billion — ünïcödé 日本語 <|endoftext|>\n\n  tabs\tend 2025-06-28"
    enc = tokens.get_encoder()
    assert enc.encode_ordinary(text) == lib.encode_ordinary(text)
    assert enc.encode(text, allowed_special="all") == lib.encode(text, allowed_special="all")
    copies = list(path.parent.glob(f"{path.name}.ranks-*.marshal"))
    assert len(copies) == 1
    # a damaged copy is not trusted: rebuilt from the verified BPE file
    blob = copies[0].read_bytes()
    copies[0].write_bytes(blob[:200] + bytes([blob[200] ^ 1]) + blob[201:])
    assert tokens._mergeable_ranks(path) == ref["mergeable_ranks"]
    assert copies[0].read_bytes() == blob
