"""Content-addressed store for raw fetched files.

Layout under a data dir:
- blobs: `raw/sha256/<aa>/<sha256><ext>` (written once, atomically, never rewritten; read-only mode)
- provenance: `raw/provenance/<source>/<domain>/<snapshot>/<sha256>.json` (one RawFile record each)

A record holds no path of the building machine: the blob path is relative to the data folder and a
mirror file is named by its path relative to the mirror folder (`edgar/AAPL/10-Q/2025-06-28.htm`);
`read_raw` resolves them against the data folder and mirror it is given.

Storing the same bytes with the same provenance again writes nothing (the first record, with its
`fetched_at`, is kept), so a rerun of a fetch is a no-op on disk.

A blob is checked against its sha256 whenever it is stored or read. A corrupted one (bytes changed on
disk, truncated, missing) is logged and moved to `raw/.quarantine/`; `store_raw` then writes the good
bytes it was given, and `read_raw` restores a mirror-fetched blob from its mirror file when that file
still has the recorded sha256. Otherwise reading fails with one line naming the blob and the fix
(fetch the snapshot again: `frame rerun fetch`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import os
import re
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from pydantic import ValidationError

from schemas.sources import RawFile
from tasks.atomic import atomic_write_bytes
from tasks.errors import FrameInputError
from tasks.manifest import sha256_file

_COMPONENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_EXT = re.compile(r"^(\.[A-Za-z0-9]{1,10})?$")
_SHA = re.compile(r"^[0-9a-f]{64}$")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://\S+$")

log = logging.getLogger(__name__)


def safe_component(value: Any, field: str) -> str:
    """Return `value` if it can be used as one path component inside the data dir, else raise.

    Rejects empty names, `.`/`..`, separators, absolute paths, NUL and anything outside
    letters/digits/`.`/`_`/`-`.
    """
    text = str(value) if value is not None else ""
    if not _COMPONENT.fullmatch(text) or ".." in text:  # fullmatch: "$" admits a trailing "\n"
        raise FrameInputError(
            f"provenance.{field}",
            f"unsafe path component {text!r} (letters, digits, '.', '_', '-' only; no '..', '/', NUL)",
        )
    return text


def blob_relpath(sha256: str, ext: str = "") -> str:
    """The blob's path relative to the data folder (what a RawFile records): raw/sha256/<aa>/<sha><ext>."""
    if not _SHA.fullmatch(sha256):
        raise FrameInputError("provenance.sha256", f"not a sha256 hex digest: {sha256!r}")
    if not _EXT.fullmatch(ext):
        raise FrameInputError("provenance.ext", f"unsafe file extension {ext!r}")
    return f"raw/sha256/{sha256[:2]}/{sha256}{ext}"


def blob_path(data_dir: str | Path, sha256: str, ext: str = "") -> Path:
    return Path(data_dir).absolute() / blob_relpath(sha256, ext)


def raw_blob(data_dir: str | Path, raw: RawFile) -> Path:
    """Where `raw`'s blob lives in the data folder `data_dir`."""
    return Path(data_dir).absolute() / raw.path


def mirror_file(raw: RawFile, mirror: str | Path | None) -> Path | None:
    """The mirror file a mirror-fetched `raw` was read from (None: a live fetch, or no mirror given)."""
    if raw.origin != "mirror" or mirror is None:
        return None
    return Path(mirror).absolute().joinpath(*PurePosixPath(raw.location).parts)


def _check_location(origin: Any, location: Any) -> None:
    """A record names its source portably: a URL (live) or a path relative to the mirror folder."""
    loc = str(location or "")
    if origin == "live":
        ok = bool(_URL.match(loc))
        want = "a URL"
    elif origin == "mirror":
        pure = PurePosixPath(loc)
        ok = bool(loc) and not (
            pure.is_absolute()
            or PureWindowsPath(loc).drive
            or "\\" in loc
            or "\x00" in loc
            or any(part in ("..", "") for part in loc.split("/"))
        )
        want = "a path relative to the mirror folder (no machine path, no '..')"
    else:
        return  # RawFile's own validation names a bad origin
    if not ok:
        raise FrameInputError("provenance.location", f"must be {want}, not {loc!r}")


def provenance_dir(data_dir: str | Path, source: str, domain: str, snapshot: str) -> Path:
    return (
        Path(data_dir).absolute()
        / "raw"
        / "provenance"
        / safe_component(source, "provenance.source")  # a source kind's name (tasks.sources)
        / safe_component(domain, "domain")
        / safe_component(snapshot, "snapshot")
    )


def _atomic_write(path: Path, data: bytes, mode: int = 0o644) -> None:
    atomic_write_bytes(path, data, mode)


def _existing_record(path: Path) -> RawFile | None:
    try:
        return RawFile.model_validate_json(path.read_bytes())
    except (FileNotFoundError, ValidationError):
        return None


def store_raw(data_dir: str | Path, data: bytes, ext: str, **provenance: Any) -> RawFile:
    """Store `data` content-addressed and record its provenance; return the RawFile record.

    `provenance` holds the RawFile fields other than sha256/path/size/fetched_at (source, origin,
    location, domain, snapshot, and the EDGAR or arXiv identifiers). `location` must be portable: a
    URL, or a mirror file's path relative to the mirror folder.
    """
    for computed in ("sha256", "path", "size", "fetched_at"):
        if computed in provenance:
            raise TypeError(f"store_raw computes {computed!r} itself")
    _check_location(provenance.get("origin"), provenance.get("location"))
    sha = hashlib.sha256(data).hexdigest()
    rel = blob_relpath(sha, ext)
    blob = Path(data_dir).absolute() / rel
    record_dir = provenance_dir(
        data_dir, provenance.get("source", ""), provenance.get("domain", ""), provenance.get("snapshot", "")
    )
    try:
        raw = RawFile(
            sha256=sha,
            path=rel,
            size=len(data),
            fetched_at=dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
            **provenance,
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "(record)"
        raise FrameInputError(f"provenance.{field}", err["msg"]) from None

    if blob.is_file() and sha256_file(blob) == sha:
        pass  # already stored
    else:
        if os.path.lexists(blob):
            where = quarantine_blob(blob)
            log.warning(
                "stored blob %s does not match its sha256 name (corrupted on disk); moved to %s, "
                "storing the fetched bytes again",
                blob,
                where,
            )
        _atomic_write(blob, data, mode=0o444)

    record_path = record_dir / f"{sha}.json"
    old = _existing_record(record_path)
    if old is not None and old.model_copy(update={"fetched_at": raw.fetched_at}) == raw:
        return old  # same provenance already recorded: keep it (and its fetched_at) untouched
    body = json.dumps(raw.model_dump(), indent=2, ensure_ascii=False, sort_keys=True) + "\n"
    _atomic_write(record_path, body.encode("utf-8"))
    return raw


def quarantine_blob(blob: Path) -> Path:
    """Move a bad blob to `raw/.quarantine/<name>` (replacing an older one there); returns where."""
    dest = blob.parents[2] / ".quarantine" / blob.name
    dest.parent.mkdir(parents=True, exist_ok=True)
    if blob.is_dir() and not blob.is_symlink():
        import shutil

        shutil.rmtree(dest, ignore_errors=True)
        shutil.move(str(blob), dest)
    else:
        os.replace(blob, dest)
    return dest


def _restore_from_mirror(raw: RawFile, path: Path, mirror: str | Path | None) -> bytes | None:
    """The blob's bytes again from the mirror file it was fetched from, if that still matches."""
    source = mirror_file(raw, mirror)
    if source is None:
        return None
    try:
        data = source.read_bytes()
    except OSError:
        return None
    if hashlib.sha256(data).hexdigest() != raw.sha256:
        return None
    _atomic_write(path, data, mode=0o444)
    return data


def read_raw(raw: RawFile, data_dir: str | Path, mirror: str | Path | None = None) -> bytes:
    """Read a stored blob back from the data folder `data_dir`, re-verifying its sha256; a bad blob is
    restored from its file in `mirror` when possible (logged), else reading fails in one line naming
    the blob and how to fetch it again."""
    path = raw_blob(data_dir, raw)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        problem, data = "is missing", None
    except OSError as exc:
        problem, data = f"is unreadable ({exc.strerror})", None
    else:
        actual = hashlib.sha256(data).hexdigest()
        if actual == raw.sha256:
            return data
        problem = f"changed on disk: sha256 {actual} != recorded {raw.sha256}"
    if os.path.lexists(path):
        where = quarantine_blob(path)
        problem += f"; moved to {where}"
    restored = _restore_from_mirror(raw, path, mirror)
    came_from = mirror_file(raw, mirror) or raw.location
    if restored is not None:
        log.warning("stored blob %s %s; restored from the mirror file %s", path, problem, came_from)
        return restored
    log.warning("stored blob %s %s; it cannot be restored from %s", path, problem, came_from)
    raise FrameInputError(
        path,
        f"stored blob {problem}; fetch it again: frame rerun fetch --domain {raw.domain} "
        f"--snapshot {raw.snapshot}",
    )


def load_records(data_dir: str | Path, source: str, domain: str, snapshot: str) -> list[RawFile]:
    """All provenance records stored for one snapshot of one domain (sorted by sha256)."""
    folder = provenance_dir(data_dir, source, domain, snapshot)
    if not folder.is_dir():
        return []
    return [RawFile.model_validate_json(p.read_bytes()) for p in sorted(folder.glob("*.json"))]
