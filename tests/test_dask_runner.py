"""`[run] task_runner = "dask"`: the same config built on threads and on a local Dask cluster (2 worker
processes) gives byte-identical releases, and the two share cache entries."""

from __future__ import annotations

import hashlib
import json
import pickle
import subprocess
import sys
import time
from pathlib import Path

import cloudpickle
import pytest

from tests.conftest import CORPUS, MIRROR_HEAD, SMALL_DOMAINS, frame_env

FRAME = str(Path(sys.executable).with_name("frame"))

CONFIG = MIRROR_HEAD + '[run]\ntask_runner = "{runner}"\ndask_workers = 2\n' + SMALL_DOMAINS


def _env(home: Path, temporary_server: bool = False, **extra: str) -> dict[str, str]:
    env = frame_env(home, temporary_server=temporary_server)
    for k in ("FRAME_TASK_RUNNER", "FRAME_DASK_ADDRESS"):
        env.pop(k, None)  # the config's [run] decides
    return {**env, **extra}


def _tree_sha(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_runner_choice_and_env_override(monkeypatch):
    from prefect.task_runners import ThreadPoolTaskRunner

    from flows.runners import make_task_runner
    from schemas.config import RunSettings

    monkeypatch.delenv("FRAME_TASK_RUNNER", raising=False)
    monkeypatch.delenv("FRAME_DASK_ADDRESS", raising=False)
    assert isinstance(make_task_runner(RunSettings(max_workers=3)), ThreadPoolTaskRunner)
    local = make_task_runner(RunSettings(task_runner="dask", dask_workers=2))
    assert type(local).__name__ == "FrameDaskTaskRunner" and local.address is None
    assert local.cluster_kwargs["n_workers"] == 2 and local.cluster_kwargs["processes"]
    # the runner travels to the workers inside the flow: pickled by reference, and duplicated there
    assert type(pickle.loads(cloudpickle.dumps(local.duplicate()))) is type(local)
    monkeypatch.setenv("FRAME_TASK_RUNNER", "dask")
    monkeypatch.setenv("FRAME_DASK_ADDRESS", "tcp://scheduler:8786")
    remote = make_task_runner(RunSettings())
    assert remote.address == "tcp://scheduler:8786"


def test_flows_and_task_sources_survive_pickling():
    """A Dask task carries its function and the flow by value (cloudpickle): both must pickle, and the
    cache key's task source must be the same in the worker as here."""
    import flows.build as build
    import flows.score as score
    from flows.caching import task_source

    for f in (build.build, score.score_release_flow):
        cloudpickle.dumps(f)
    for t in (build.build_domain_task, build.structure_task, score.score_task, score.prepare_task):
        shipped = pickle.loads(cloudpickle.dumps(t))
        assert task_source(shipped.fn) == task_source(t.fn)


@pytest.mark.skipif(not (CORPUS / "edgar").is_dir(), reason="shared corpus not found")
def test_thread_and_dask_builds_are_byte_identical(tmp_path):
    runs = {}
    for runner in ("thread", "dask"):
        data = tmp_path / runner / "data"
        cfg = tmp_path / runner / "small.toml"
        cfg.parent.mkdir(parents=True)
        cfg.write_text(CONFIG.format(data=data, corpus=CORPUS, runner=runner), encoding="utf-8")
        args = [FRAME, "build", "--config", str(cfg), "--release", "small", "--version", "1.0.0"]
        # Both at once: half the wall time, and both read the same code (the manifest names its digest).
        proc = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            # the Dask build starts its own temporary server (counted below); threads use the shared one
            env=_env(tmp_path / runner / "prefect", temporary_server=runner == "dask"),
        )
        runs[runner] = {"cfg": cfg, "data": data, "proc": proc, "t0": time.monotonic()}
    for runner, r in runs.items():
        r["out"], r["err"] = r["proc"].communicate(timeout=600)
        r["seconds"] = time.monotonic() - r["t0"]
        assert r["proc"].returncode == 0, f"{runner}: {r['err'][-3000:]}\n{r['out'][-3000:]}"
    print({k: f"{r['seconds']:.1f}s" for k, r in runs.items()})

    dask = runs["dask"]
    # One Prefect server (the flow's own) records every task; no cache key failed in a worker.
    assert dask["out"].count("Starting temporary server") == 1, dask["out"][-3000:]
    assert "Creating a new Dask cluster" in dask["out"]
    assert "Error encountered when computing cache key" not in dask["out"] + dask["err"]
    assert "Traceback" not in dask["err"], dask["err"][-3000:]
    # The workers' records reach the build log.
    (log,) = (dask["data"] / "logs").glob("build-*.log")
    assert "gw W2: gold report" in log.read_text(encoding="utf-8")

    rel_t = runs["thread"]["data"] / "releases" / "small" / "1.0.0"
    rel_d = dask["data"] / "releases" / "small" / "1.0.0"
    manifests = [json.loads((r / "manifest.json").read_text()) for r in (rel_t, rel_d)]
    versions = [m["code_version"] for m in manifests]
    assert versions[0] == versions[1], f"tasks/, schemas/ or prompts/ changed while the test ran: {versions}"
    assert manifests[0] == manifests[1]
    # every file of the two releases, byte for byte (parquet tables, manifest, dataset card)
    sums_t, sums_d = _tree_sha(rel_t), _tree_sha(rel_d)
    assert sums_t.keys() == sums_d.keys() and len(sums_t) >= 8
    assert {k for k in sums_t if sums_t[k] != sums_d[k]} == set()

    res = subprocess.run(
        [FRAME, "release", "verify", str(rel_d)],
        capture_output=True,
        text=True,
        env=_env(tmp_path / "verify"),
        timeout=300,
    )
    assert res.returncode == 0, res.stderr

    # The cache keys do not depend on the runner: threads over the Dask-built folder compute nothing.
    again = subprocess.run(
        [FRAME, "build", "--config", str(dask["cfg"]), "--release", "small", "--version", "1.0.0"],
        capture_output=True,
        text=True,
        env=_env(tmp_path / "dask" / "prefect", FRAME_TASK_RUNNER="thread"),
        timeout=600,
    )
    assert again.returncode == 0, again.stderr[-3000:]
    done = [ln for ln in again.stdout.splitlines() if "Task run" in ln and "Finished in state" in ln]
    assert len(done) == 2 and all("build-domain" in ln and "Cached" in ln for ln in done), done
    assert _tree_sha(rel_d) == sums_d
