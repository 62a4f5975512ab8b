"""Offline ``o200k_base`` token counts (SPEC: token statistics use o200k_base).

tiktoken downloads its BPE file at first use. This machine has no network beyond the package
registries, so the file is rebuilt from the same vocabulary shipped inside the PyPI package
``quicktok-v1`` (``quicktok/data/o200k.vocab``: little-endian u32 count, then per token u16 length, the
token bytes, u32 rank) into tiktoken's own format (``base64(token) rank`` per line, by rank) and placed in
tiktoken's cache directory under tiktoken's cache key (sha1 of the blob URL). tiktoken checks the file's
sha256 itself; we check it first and raise RuntimeError on a mismatch, never falling back to another
tokenizer.

Cache directory: ``TIKTOKEN_CACHE_DIR`` if already set (non-empty), else ``$FRAME_CACHE_DIR/tiktoken``,
else ``<repo>/data/cache/tiktoken``.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import marshal
import os
import struct
import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import tiktoken
import tiktoken.load

from tasks.atomic import atomic_write_bytes
from tasks.manifest import sha256_file

__all__ = [
    "ENCODING_NAME",
    "O200K_BLOB_URL",
    "O200K_SHA256",
    "cache_dir",
    "count_tokens",
    "count_tokens_many",
    "ensure_o200k",
    "get_encoder",
]

ENCODING_NAME = "o200k_base"
# Both as in tiktoken_ext/openai_public.py (a test checks they still match the installed tiktoken).
O200K_BLOB_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
# The encoding's other parameters, as tiktoken_ext.openai_public.o200k_base() gives them (a test checks).
O200K_RANKS = 199998
O200K_SPECIAL_TOKENS = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}
O200K_PAT_STR = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_QUICKTOK_VOCAB = ("data", "o200k.vocab")

_REPO_ROOT = Path(__file__).resolve().parents[1]
_LOCK = threading.RLock()
_ENCODER: tiktoken.Encoding | None = None


def cache_dir() -> Path:
    """Directory tiktoken reads its BPE files from (see module docstring for the order)."""
    tk = os.environ.get("TIKTOKEN_CACHE_DIR")
    if tk:
        return Path(tk)
    frame = os.environ.get("FRAME_CACHE_DIR")
    if frame:
        return Path(frame) / "tiktoken"
    return _REPO_ROOT / "data" / "cache" / "tiktoken"


def cache_key() -> str:
    """File name tiktoken uses for the o200k_base blob (tiktoken.load.read_file_cached)."""
    return hashlib.sha1(O200K_BLOB_URL.encode()).hexdigest()


def quicktok_vocab_path() -> Path:
    """The o200k vocabulary file inside the installed quicktok package (not imported, only located)."""
    spec = importlib.util.find_spec("quicktok")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "cannot build the offline o200k_base tokenizer: the package 'quicktok-v1' (module quicktok) "
            "is not installed"
        )
    for loc in spec.submodule_search_locations:
        p = Path(loc).joinpath(*_QUICKTOK_VOCAB)
        if p.is_file():
            return p
    raise RuntimeError(
        f"cannot build the offline o200k_base tokenizer: {'/'.join(_QUICKTOK_VOCAB)} not found in the "
        f"installed quicktok package ({', '.join(spec.submodule_search_locations)})"
    )


def convert_quicktok_vocab(data: bytes) -> bytes:
    """quicktok binary vocab -> tiktoken BPE file contents (lines ``base64(token) rank``, by rank)."""
    if len(data) < 4:
        raise RuntimeError("quicktok o200k vocab is truncated (no header)")
    (count,) = struct.unpack_from("<I", data, 0)
    off = 4
    tokens: list[tuple[int, bytes]] = []
    try:
        for _ in range(count):
            (length,) = struct.unpack_from("<H", data, off)
            off += 2
            tok = data[off : off + length]
            if len(tok) != length:
                raise struct.error("token runs past the end")
            off += length
            (rank,) = struct.unpack_from("<I", data, off)
            off += 4
            tokens.append((rank, tok))
    except struct.error as e:
        raise RuntimeError(f"quicktok o200k vocab is truncated or malformed near byte {off}: {e}") from e
    if off != len(data):
        raise RuntimeError(f"quicktok o200k vocab has {len(data) - off} unexpected trailing bytes")
    tokens.sort()
    if [r for r, _ in tokens] != list(range(count)):
        raise RuntimeError("quicktok o200k vocab ranks are not exactly 0..count-1")
    return b"".join(base64.b64encode(tok) + b" " + str(rank).encode() + b"\n" for rank, tok in tokens)


def ensure_o200k() -> Path:
    """Make sure tiktoken's o200k_base BPE file is in :func:`cache_dir`; return its path.

    Builds it from quicktok's vocabulary if missing or corrupt (written to a temporary file, then
    renamed into place, so concurrent processes never see a partial file). Raises RuntimeError if the
    converted file's sha256 is not the one tiktoken expects.
    """
    with _LOCK:
        directory = cache_dir()
        target = directory / cache_key()
        if target.is_file() and sha256_file(target) == O200K_SHA256:
            return target
        src = quicktok_vocab_path()
        contents = convert_quicktok_vocab(src.read_bytes())
        got = hashlib.sha256(contents).hexdigest()
        if got != O200K_SHA256:
            raise RuntimeError(
                f"o200k_base vocabulary converted from {src} has sha256 {got}, but tiktoken expects "
                f"{O200K_SHA256}; refusing to use a different tokenizer"
            )
        atomic_write_bytes(target, contents)
        return target


@contextmanager
def _tiktoken_cache_env(directory: Path) -> Iterator[None]:
    """Point tiktoken at ``directory`` for the duration of the load (only if it is not already)."""
    old = os.environ.get("TIKTOKEN_CACHE_DIR")
    if old == str(directory):
        yield
        return
    os.environ["TIKTOKEN_CACHE_DIR"] = str(directory)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TIKTOKEN_CACHE_DIR", None)
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = old


def get_encoder() -> tiktoken.Encoding:
    """The tiktoken ``o200k_base`` encoding, loaded offline once per process (thread-safe)."""
    global _ENCODER
    enc = _ENCODER
    if enc is not None:
        return enc
    with _LOCK:
        if _ENCODER is None:
            path = ensure_o200k()
            _ENCODER = tiktoken.Encoding(
                name=ENCODING_NAME,
                pat_str=O200K_PAT_STR,
                mergeable_ranks=_mergeable_ranks(path),
                special_tokens=O200K_SPECIAL_TOKENS,
            )
        return _ENCODER


def _mergeable_ranks(path: Path) -> dict[bytes, int]:
    """The ranks of the verified BPE file at `path`, from a marshal copy beside it: tiktoken's own parse of
    the 200,000 base64 lines costs ~0.4 s in every process that counts tokens (a third of a `frame ground`
    run), loading the copy ~0.03 s. The copy carries the sha256 of its payload and of the BPE file it was
    made from; one that does not check out is rebuilt."""
    copy = path.with_name(f"{path.name}.ranks-py{sys.version_info[0]}{sys.version_info[1]}.marshal")
    source = O200K_SHA256.encode()
    try:
        blob = copy.read_bytes()
        digest, origin, payload = blob[:64], blob[64:128], blob[128:]
        if origin == source and hashlib.sha256(payload).hexdigest().encode() == digest:
            ranks = marshal.loads(payload)
            if isinstance(ranks, dict) and len(ranks) == O200K_RANKS:
                return ranks
    except (OSError, ValueError, EOFError, TypeError):
        pass  # missing or damaged: rebuilt below
    with _tiktoken_cache_env(path.parent):
        ranks = tiktoken.load.load_tiktoken_bpe(O200K_BLOB_URL, expected_hash=O200K_SHA256)
    payload = marshal.dumps(ranks)
    try:
        atomic_write_bytes(copy, hashlib.sha256(payload).hexdigest().encode() + source + payload)
    except OSError:
        pass  # a read-only cache: the next process parses again
    return ranks


def count_tokens(text: str) -> int:
    """Number of o200k_base tokens in ``text``; special-token strings count as ordinary text."""
    return len(get_encoder().encode_ordinary(text))


def count_tokens_many(texts: Iterable[str]) -> list[int]:
    """Token counts of many texts (tiktoken's threaded batch encoder)."""
    return [len(ids) for ids in get_encoder().encode_ordinary_batch(list(texts))]
