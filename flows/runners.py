"""Task runners for the build and score flows: threads on this machine, or a Dask cluster.

Specification: docs/runs.md, section "Task runners"
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from schemas.config import FrameConfig, RunSettings

# Scheduler and nanny chatter ("State start", "Register worker", ...) drowns the build's own log lines.
_QUIET = ("distributed", "distributed.scheduler", "distributed.nanny", "distributed.core", "bokeh")


def make_task_runner(cfg: FrameConfig | RunSettings):
    """The task runner `[run]` selects (env FRAME_TASK_RUNNER / FRAME_DASK_ADDRESS override)."""
    run = (cfg.run if isinstance(cfg, FrameConfig) else cfg).resolved()
    if run.task_runner == "thread":
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=run.max_workers)
    runner_cls = _dask_classes()["FrameDaskTaskRunner"]
    if run.dask_address:
        return runner_cls(address=run.dask_address)
    return runner_cls(
        cluster_kwargs={
            "n_workers": run.dask_workers,
            "threads_per_worker": 1,  # one task per process: the steps are CPU-bound Python
            "processes": True,
            "dashboard_address": "127.0.0.1:0",  # any free local port: no clash with a parallel build
            "scheduler_kwargs": {"dashboard": False},  # its HTTP routes only (no bokeh here)
            "silence_logs": logging.WARNING,
        }
    )


def _log_file() -> str | None:
    """The log file the CLI attached to the root logger (`route_prefect_console`), if any."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            return handler.baseFilename
    return None


def _frame_env() -> dict[str, str]:
    """What the CLI put in FRAME_* (cache folder, LLM overrides), for workers that did not inherit it."""
    skip = {"FRAME_TASK_RUNNER", "FRAME_DASK_ADDRESS"}
    return {k: v for k, v in os.environ.items() if k.startswith("FRAME_") and k not in skip}


def _quiet_distributed() -> None:
    for name in _QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)
    # At shutdown a worker that still holds model threads is killed after 4 s ("still alive"): expected.
    logging.getLogger("distributed.nanny").setLevel(logging.ERROR)


def _dask_classes() -> dict[str, type]:
    """FrameDaskTaskRunner and its worker plugin, defined on first use (prefect_dask and distributed
    cost ~0.5 s to import; a thread build never needs them). Module attributes through `__getattr__`,
    so pickle sends them to the workers by reference."""
    if _LAZY:
        return _LAZY
    plugin = _worker_setup_class()
    for cls in (plugin, _runner_class(plugin)):
        cls.__module__, cls.__qualname__ = __name__, cls.__name__
        _LAZY[cls.__name__] = cls
    return _LAZY


def _worker_setup_class() -> type:
    from distributed.diagnostics.plugin import WorkerPlugin

    class FrameWorkerSetup(WorkerPlugin):
        """A worker's frame environment (FRAME_CACHE_DIR, ...; its own values win), Prefect's console
        logs to stdout and its records into the build's log file."""

        name = "frame-worker-setup"
        idempotent = True

        def __init__(self, log_file: str | None = None, env: dict[str, str] | None = None):
            self.log_file = log_file
            self.env = dict(env or {})

        def setup(self, worker: Any) -> None:
            from prefect.logging.configuration import ensure_logging_setup

            from flows.settings import route_prefect_console

            for key, value in self.env.items():
                os.environ.setdefault(key, value)
            ensure_logging_setup()
            has_file = any(isinstance(h, logging.FileHandler) for h in logging.getLogger().handlers)
            if not has_file:  # a worker of an earlier flow in this process: already routed
                route_prefect_console(Path(self.log_file) if self.log_file else None)
            _quiet_distributed()

        def teardown(self, worker: Any) -> None:
            for handler in logging.getLogger().handlers:
                handler.flush()

    return FrameWorkerSetup


def _runner_class(plugin: type) -> type:
    from prefect_dask import DaskTaskRunner

    class FrameDaskTaskRunner(DaskTaskRunner):
        """A DaskTaskRunner whose workers record to the flow's Prefect API (also an ephemeral one) and
        log where the CLI logs."""

        def __enter__(self):
            from prefect.settings import PREFECT_API_URL

            super().__enter__()
            _quiet_distributed()
            self._plugin_registered = False
            from flows.server import temporary_server_url

            self._api_url = PREFECT_API_URL.value()
            self._ephemeral = False
            if not self._api_url:
                # The flow run already started its ephemeral server, a per-process singleton: reuse it.
                from prefect.server.api.server import SubprocessASGIServer

                server = SubprocessASGIServer()
                server.start()
                self._api_url, self._ephemeral = server.api_url, True
            if self.address and (self._ephemeral or self._api_url == temporary_server_url()):
                self.logger.warning(
                    "Dask cluster %s with Prefect's temporary server %s: workers on other hosts "
                    "cannot reach it; set PREFECT_API_URL to a server every worker reaches",
                    self.address,
                    self._api_url,
                )
            if not self.address and self._cluster is None:
                # Local workers also get the URL in their environment: their background log and event
                # threads read the process settings, not the task's context.
                env = {**(self.cluster_kwargs.get("env") or {}), "PREFECT_API_URL": self._api_url}
                self.cluster_kwargs = {**self.cluster_kwargs, "env": env}
            return self

        @property
        def client(self):
            client = super().client
            if not getattr(self, "_plugin_registered", True):
                self._plugin_registered = True
                log_file = None if self.address else _log_file()
                client.register_plugin(plugin(log_file, _frame_env()))
            return client

        def submit(self, task, parameters, wait_for=None, dependencies=None):
            if not getattr(self, "_ephemeral", False):
                return super().submit(task, parameters, wait_for, dependencies)
            from prefect.settings import PREFECT_API_URL, temporary_settings

            # The serialized settings travel with the task: in the worker they name this server.
            with temporary_settings(updates={PREFECT_API_URL: self._api_url}):
                return super().submit(task, parameters, wait_for, dependencies)

    return FrameDaskTaskRunner


_LAZY: dict[str, type] = {}


def __getattr__(name: str) -> Any:
    if name in ("FrameDaskTaskRunner", "FrameWorkerSetup"):
        return _dask_classes()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
