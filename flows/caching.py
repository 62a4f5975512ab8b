"""A cache key that is the same in every process for the same inputs and task code.

Prefect's INPUTS policy hashes some objects through cloudpickle, whose bytes can differ between
processes for equal pydantic models and dataclasses (e.g. a model rebuilt from a cached result
versus a freshly computed one), so a later `frame rerun` could miss every cache entry. Here inputs
are reduced to canonical JSON first: models by their fields, dataclasses by their fields.

The policy also checks the persisted result its key names (`flows.results.check_cached_result`): an
unreadable entry (torn by a kill, garbled on disk) is logged and quarantined before Prefect, which
would silently treat it as a miss, looks it up. Importing this module makes Prefect's local result
writes atomic (`flows.results.install_atomic_result_writes`) in every process that runs frame tasks.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from prefect.cache_policies import CachePolicy
from pydantic import BaseModel

from flows.results import check_cached_result, install_atomic_result_writes

install_atomic_result_writes()


def canonical(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return {"__model__": type(value).__name__, **value.model_dump(mode="json")}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            "__dataclass__": type(value).__name__,
            **{f.name: canonical(getattr(value, f.name)) for f in dataclasses.fields(value)},
        }
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = [canonical(v) for v in value]
        return sorted(items, key=json.dumps) if isinstance(value, set | frozenset) else items
    if isinstance(value, PurePath):
        return str(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"cannot build a stable cache key from {type(value).__name__}")


def task_source(fn: Any) -> str:
    """The source of a task's function. A task shipped to another process (Dask, Ray) carries its
    function by value (cloudpickle: the module attribute is the Task, not the function), without its
    file: read the source of the function the module defines under the same name instead."""
    try:
        return inspect.getsource(fn)
    except OSError:
        import importlib

        obj: Any = importlib.import_module(fn.__module__)
        for part in fn.__qualname__.split("."):
            obj = getattr(obj, part)
        return inspect.getsource(getattr(obj, "fn", obj))


@dataclass
class StableInputsAndSource(CachePolicy):
    """Key = sha256(task name, task function source, canonical JSON of the inputs). The task's name,
    not its run's name: a `task_run_name` ("fill · aapl-10q · 2024-06-29") labels runs, keys nothing."""

    def compute_key(self, task_ctx, inputs, flow_parameters, **kwargs: Any) -> str | None:
        if task_ctx is None:
            return None
        fn = task_ctx.task.fn
        payload = json.dumps(
            canonical(dict(sorted((inputs or {}).items()))),
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        )
        h = hashlib.sha256()
        for part in (task_ctx.task.name, task_source(fn), payload):
            h.update(part.encode("utf-8"))
            h.update(b"\0")
        key = h.hexdigest()
        check_cached_result(task_ctx, key)
        return key


STABLE = StableInputsAndSource()


class PublicInputsOnly(StableInputsAndSource):
    """STABLE, minus inputs whose name starts with "_" (the data they carry is keyed by a digest that is
    passed as a public input instead)."""

    def compute_key(self, task_ctx, inputs, flow_parameters, **kwargs: Any) -> str | None:
        public = {k: v for k, v in (inputs or {}).items() if not k.startswith("_")}
        return super().compute_key(task_ctx, public, flow_parameters, **kwargs)


PUBLIC_INPUTS = PublicInputsOnly()
