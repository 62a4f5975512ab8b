"""Persisted Prefect task results that survive a killed build, and a logged check of each cache entry;
flow run parameters that never exceed what the Prefect server stores, and errors that never echo them.

Specification: docs/runs.md, section "Persisted results"; docs/security.md, "Scoring runs and skills"
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

from tasks.atomic import atomic_write_bytes

log = logging.getLogger(__name__)

QUARANTINE = ".quarantine"
# Temp files older than this are swept from the shared caches (other commands may be writing younger ones).
CACHE_TEMP_AGE_S = 3600.0
_ATOMIC_TMP = re.compile(r"^\..+\.[A-Za-z0-9_]{6,}\.tmp$")  # tasks.atomic: .<name>.<random>.tmp
_GROUNDING_TMP = re.compile(r"^\..+\.(tmp-[A-Za-z0-9_]+|old-\d+)$")  # write_grounding / _replace_dir
_RELEASE_TMP = re.compile(r"^\.tmp-.+$")  # write_release: .tmp-<version>-<pid>-<hex>


# ------------------------------------------------------------------------------------ atomic writes


def _write_path_atomic(self: Any, path: str, content: bytes) -> str:
    target: Path = self._resolve_path(path)
    if target.exists() and not target.is_file():
        raise ValueError(f"Path {target} already exists and is not a file.")
    # 0o644 as Prefect's open() gives under the usual umask (mkstemp alone would leave 0o600).
    atomic_write_bytes(target, content, mode=0o644)
    return str(target)


async def _awrite_path_atomic(self: Any, path: str, content: bytes) -> str:
    import anyio.to_thread

    return await anyio.to_thread.run_sync(_write_path_atomic, self, path, content)


def install_atomic_result_writes() -> None:
    """Make Prefect's local result storage write atomically (idempotent; affects this process)."""
    from prefect._internal.compatibility.async_dispatch import async_dispatch
    from prefect.filesystems import LocalFileSystem

    if getattr(LocalFileSystem.write_path, "_frame_atomic", False):
        return
    sync = async_dispatch(_awrite_path_atomic)(_write_path_atomic)
    sync._frame_atomic = True  # type: ignore[attr-defined]
    LocalFileSystem.write_path = sync  # type: ignore[method-assign]
    LocalFileSystem.awrite_path = _awrite_path_atomic  # type: ignore[method-assign]


# ------------------------------------------------------------------------------ cache entry checks


def result_path(task_ctx: Any, key: str) -> Path | None:
    """The local file that holds the persisted result for `key`, or None if results live elsewhere."""
    from prefect.filesystems import LocalFileSystem

    store = getattr(task_ctx, "result_store", None)
    storage = getattr(store, "result_storage", None)
    if store is None or getattr(store, "metadata_storage", None) is not None:
        return None
    if not isinstance(storage, LocalFileSystem):
        return None
    return Path(storage._resolve_path(key))


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


def unreadable_reason(path: Path) -> str | None:
    """Why the persisted result at `path` cannot be used (None if it reads back fine or is absent)."""
    from prefect._internal.result_records import ResultRecord

    if not os.path.lexists(path):
        return None
    if not path.is_file():
        return "not a regular file"
    try:
        data = path.read_bytes()
    except OSError as exc:
        return _reason(exc)
    if not data:
        return "empty file"
    try:
        ResultRecord.deserialize(data)
    except Exception as exc:  # noqa: BLE001 - whatever the record or its pickle raise, it is unusable
        return _reason(exc)
    return None


def quarantine(path: Path) -> Path:
    """Move a bad result file to `<its folder>/.quarantine/<name>` (replacing an older one)."""
    dest = path.parent / QUARANTINE / path.name
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.is_dir() and not dest.is_symlink():
        shutil.rmtree(dest)
    if path.is_dir() and not path.is_symlink():
        if dest.exists():
            dest.unlink()
        shutil.move(str(path), dest)
    else:
        os.replace(path, dest)
    return dest


def _run_logger() -> logging.Logger | logging.LoggerAdapter:
    """The current Prefect run's logger (shown with the run, sent to the API), else this module's."""
    from prefect.context import FlowRunContext, TaskRunContext

    if TaskRunContext.get() is None and FlowRunContext.get() is None:
        return log
    from prefect import get_run_logger

    try:
        return get_run_logger()
    except Exception:  # noqa: BLE001
        return log


def check_cached_result(task_ctx: Any, key: str) -> None:
    """If the persisted result for `key` is unreadable: log it and quarantine the file (a miss follows).

    Never raises: a failing check must not cost the step its cache key."""
    try:
        path = result_path(task_ctx, key)
        if path is None:
            return
        reason = unreadable_reason(path)
        if reason is None:
            return
        name = getattr(getattr(task_ctx, "task", None), "name", "?")
        try:
            where = quarantine(path)
            action = f"moved to {where}"
        except OSError as exc:
            path.unlink(missing_ok=True)
            action = f"removed (could not quarantine: {exc.strerror})"
        _run_logger().warning(
            "cached result of task %r (key %s) is unreadable: %s (%s); %s, recomputing the step",
            name,
            key,
            path,
            reason,
            action,
        )
    except Exception as exc:  # noqa: BLE001
        log.warning("could not check the cached result for key %s: %s", key, _reason(exc))


# -------------------------------------------------------------------------- leftovers of a killed run


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def interrupted_leftovers(data_dir: str | Path, result_storage: str | Path | None = None) -> list[Path]:
    """Temp files and folders a killed build leaves in `data_dir` (see `sweep_interrupted`)."""
    data = Path(data_dir)
    found: list[Path] = []
    # Written only by builds (under the data folder lock): any temp entry is a dead writer's.
    for pattern, regex in (
        ("grounding/*/*", _GROUNDING_TMP),
        ("reports/*/*/*", _ATOMIC_TMP),
        ("releases/*/*", _RELEASE_TMP),
    ):
        found += [p for p in data.glob(pattern) if regex.match(p.name)]
    # Shared with other commands (score, generate, ground): only old temp files.
    now = time.time()
    caches = [data / "cache", data / "raw"]
    if result_storage is not None:
        caches.append(Path(result_storage))
    for root in caches:
        if not root.is_dir():
            continue
        for p in root.rglob("*.tmp"):
            try:
                old = now - p.lstat().st_mtime > CACHE_TEMP_AGE_S
            except OSError:
                continue
            if old and _ATOMIC_TMP.match(p.name):
                found.append(p)
    return sorted(set(found))


def sweep_interrupted(data_dir: str | Path, result_storage: str | Path | None = None) -> list[Path]:
    """Remove the leftovers of killed builds; returns what was removed (logged). Hold the build lock."""
    if result_storage is None and os.environ.get("PREFECT_LOCAL_STORAGE_PATH"):
        result_storage = os.environ["PREFECT_LOCAL_STORAGE_PATH"]
    gone = interrupted_leftovers(data_dir, result_storage)
    for p in gone:
        _remove(p)
    if gone:
        shown = ", ".join(str(p) for p in gone[:5]) + (f" (+{len(gone) - 5} more)" if len(gone) > 5 else "")
        _run_logger().info("removed %d leftover(s) of an interrupted build: %s", len(gone), shown)
    return gone


# ------------------------------------------------------------------------------- flow run parameters

# The share of the server's parameter limit (PREFECT_SERVER_API_MAX_PARAMETER_SIZE, 512 KiB by default) that
# a flow run's stored parameters may take: what JSON the client sends is measured a little differently.
PARAMETER_SHARE = 0.9
_DEFAULT_PARAMETER_LIMIT = 512 * 1024
# An error message longer than this is not printed whole (a server's 422 reply quotes every parameter).
ERROR_CHARS = 500
_PARAMETER_LIMIT_MSG = re.compile(
    r"Flow run parameters must be less than [\d,]+ bytes when serialized \(got [\d,]+ bytes\)"
)


def _json_size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), default=str).encode("utf-8"))


def _parameter_limit() -> int:
    try:
        from prefect.settings import get_current_settings

        return int(get_current_settings().server.api.max_parameter_size)
    except Exception:  # noqa: BLE001 - an older or newer Prefect without the setting: its default
        return _DEFAULT_PARAMETER_LIMIT


def bounded_parameters(
    serialized: dict[str, Any], raw: dict[str, Any], limit: int | None = None
) -> dict[str, Any]:
    """`serialized` (a flow run's parameters as Prefect stores them) within `PARAMETER_SHARE` of `limit`
    bytes (default: the server's limit; <= 0: none): the largest values are replaced, one by one, by a
    placeholder naming their type and size. They are only what the server shows of the run: the flow
    itself gets the values (`raw`), so a large submission or skill no longer stops the run."""
    limit = _parameter_limit() if limit is None else limit
    if limit <= 0 or not serialized:
        return serialized
    budget = int(limit * PARAMETER_SHARE)
    if _json_size(serialized) <= budget:
        return serialized
    out = dict(serialized)
    sizes = {k: _json_size(v) for k, v in serialized.items()}
    for key in sorted(sizes, key=lambda k: (-sizes[k], k)):
        kind = type(raw.get(key)).__name__
        out[key] = f"<{kind}: {sizes[key]:,} bytes as JSON, too large to store with the flow run>"
        if _json_size(out) <= budget:
            break
    return out


def install_bounded_flow_parameters() -> None:
    """Make Prefect store at most `bounded_parameters` of every flow run's parameters (idempotent; this
    process). Without it a flow whose parameters exceed the server's limit never starts, and the
    server's refusal quotes every parameter value (megabytes on one line)."""
    from prefect.flows import Flow

    if getattr(Flow.serialize_parameters, "_frame_bounded", False):
        return
    original = Flow.serialize_parameters

    def serialize_parameters(self: Any, parameters: dict[str, Any]) -> dict[str, Any]:
        return bounded_parameters(original(self, parameters), parameters)

    serialize_parameters._frame_bounded = True  # type: ignore[attr-defined]
    Flow.serialize_parameters = serialize_parameters  # type: ignore[method-assign]


def short_error(exc: BaseException) -> BaseException | None:
    """A RuntimeError with a one-line message for an error whose message would print a flow run's
    parameters (the server's "parameters must be less than ..." refusal) or is longer than `ERROR_CHARS`;
    None when `exc` can be shown as it is. Re-raise the result `from None`: its cause holds the values."""
    text = str(exc)
    found = _PARAMETER_LIMIT_MSG.search(text)
    if found is not None:
        return RuntimeError(
            f"the Prefect server refused the flow run: {found.group(0)} "
            "(PREFECT_SERVER_API_MAX_PARAMETER_SIZE; parameter values not shown)"
        )
    first = text.splitlines()[0] if text else ""
    if len(first) <= ERROR_CHARS:
        return None
    return RuntimeError(f"{first[:ERROR_CHARS]} ... ({len(text) - ERROR_CHARS:,} more characters not shown)")
