"""Task runners for the build and score flows: threads on this machine, or a Dask cluster.

`[run] task_runner = "dask"` runs the build's domains (and the scoring's instances) on Dask workers:
the cluster at `[run] dask_address`, or a local cluster of `dask_workers` processes. Workers read and
write task results in one shared result storage (`[run] result_storage`), so a cached step computed
on one worker is a cache hit on every other.
"""

from __future__ import annotations

from schemas.config import FrameConfig, RunSettings


def make_task_runner(cfg: FrameConfig | RunSettings):
    run = (cfg.run if isinstance(cfg, FrameConfig) else cfg).resolved()
    if run.task_runner == "thread":
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=run.max_workers)
    from prefect_dask import DaskTaskRunner

    if run.dask_address:
        return DaskTaskRunner(address=run.dask_address)
    return DaskTaskRunner(
        cluster_kwargs={"n_workers": run.dask_workers, "threads_per_worker": 1, "processes": True}
    )
