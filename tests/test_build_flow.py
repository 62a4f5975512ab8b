"""The build flow end to end on a small real config (offline backend): release, cache, rerun, kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from tests.conftest import CORPUS, SMALL_CONFIG, frame_env

pytestmark = pytest.mark.skipif(not (CORPUS / "edgar").is_dir(), reason="shared corpus not found")

FRAME = str(Path(sys.executable).with_name("frame"))

SMALL = SMALL_CONFIG


def write_config(tmp: Path, data: Path) -> Path:
    cfg = tmp / "small.toml"
    cfg.write_text(SMALL.format(data=data, corpus=CORPUS))
    return cfg


def run_frame(args: list[str], home: Path, **kw) -> subprocess.CompletedProcess:
    env = frame_env(home)  # the session's Prefect server: no temporary server start per command
    return subprocess.run([FRAME, *args], capture_output=True, text=True, env=env, timeout=900, **kw)


def manifest(path: Path) -> dict:
    return json.loads((path / "manifest.json").read_text())


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("build")
    data = tmp / "data"
    cfg = write_config(tmp, data)
    t0 = time.monotonic()
    first = run_frame(["build", "--config", str(cfg), "--release", "small", "--version", "1.0.0"], tmp / "ph")
    t1 = time.monotonic()
    assert first.returncode == 0, first.stderr[-3000:]
    second = run_frame(
        ["build", "--config", str(cfg), "--release", "small", "--version", "1.0.0"], tmp / "ph"
    )
    t2 = time.monotonic()
    assert second.returncode == 0, second.stderr[-3000:]
    return {
        "tmp": tmp,
        "data": data,
        "cfg": cfg,
        "first": first,
        "second": second,
        "release": data / "releases" / "small" / "1.0.0",
        "times": (t1 - t0, t2 - t1),
    }


def test_release_is_complete_and_verifies(built):
    rel = built["release"]
    res = run_frame(["release", "verify", str(rel)], built["tmp"] / "ph2")
    assert res.returncode == 0, res.stderr
    inst = pd.read_parquet(rel / "instances.parquet")
    assert sorted(inst.instance_id) == [
        "academic_simple/gw/W1->W2",
        "financial_quarterly/NVDA-10-Q/2023-07-30->2025-07-27",
    ]
    reports = pq.read_table(rel / "reports.parquet").to_pandas()
    assert len(reports) == 4
    # Offline gold reports: every number supported, no placeholder left, skeleton equal to the outline.
    assert (reports.support_rate == 1.0).all(), reports[["report_id", "unsupported"]]
    assert (reports.placeholders_left == 0).all() and reports.skeleton_equal.all()
    assert reports.backend.eq("offline").all()
    assert not reports.markdown.str.contains("<!-- FILL").any()
    # S of the second snapshot's instance is the first snapshot's gold report, Y the second's.
    row = inst.set_index("instance_id").loc["financial_quarterly/NVDA-10-Q/2023-07-30->2025-07-27"]
    by_id = reports.set_index("report_id")
    assert row.sample_markdown == by_id.loc["NVDA-10-Q/2023-07-30", "markdown"]
    assert row.target_markdown == by_id.loc["NVDA-10-Q/2025-07-27", "markdown"]
    structures = pd.read_parquet(rel / "structures.parquet").set_index("report_id")
    assert not structures.loc["NVDA-10-Q/2023-07-30", "form_restricted"]
    assert structures.loc["NVDA-10-Q/2025-07-27", "form_restricted"]
    card = (rel / "README.md").read_text()
    assert "offline backend" in card and "Financial, quarterly" in card
    m = manifest(rel)
    assert {"backend": "offline", "model": m["backends"][0]["model"]} in m["backends"]


def test_rebuild_recomputes_nothing(built):
    out = built["second"].stdout + built["second"].stderr
    task_lines = [ln for ln in out.splitlines() if "Task run" in ln and "Finished in state" in ln]
    # One cache hit per domain: the whole domain is served from its cache entry, no step runs.
    assert len(task_lines) == 2 and all("build-domain" in ln for ln in task_lines), out[-2000:]
    assert all("Cached" in ln for ln in task_lines), [ln for ln in task_lines if "Cached" not in ln][:5]
    first, second = built["times"]
    print(f"first build {first:.1f}s, rebuild {second:.1f}s")


def test_rerun_recomputes_one_step_and_its_dependents(built):
    res = run_frame(
        ["rerun", "fill", "--domain", "NVDA-10-Q", "--snapshot", "2023-07-30", "--config", str(built["cfg"])],
        built["tmp"] / "ph",
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert "recomputed NVDA-10-Q: 2023-07-30/fill, 2023-07-30/validate" in res.stdout
    out = res.stdout
    done = [
        ln
        for ln in out.splitlines()
        if "Task run '" in ln and "Finished in state" in ln and "build-domain" not in ln
    ]
    fresh = [ln for ln in done if "Completed()" in ln]
    assert (
        len(fresh) == 2
        and any("Task run 'fill · NVDA-10-Q · 2023-07-30'" in ln for ln in fresh)
        and any("Task run 'validate · NVDA-10-Q · 2023-07-30'" in ln for ln in fresh)
    ), fresh


def test_sigkill_during_synthesis_then_rerun_gives_identical_release(built, tmp_path):
    data = tmp_path / "data"
    cfg = write_config(tmp_path, data)
    env = frame_env(tmp_path / "ph")
    proc = subprocess.Popen(
        [FRAME, "build", "--config", str(cfg), "--release", "small", "--version", "1.0.0"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    # Wait until the first gold report exists: synthesis is under way, the rest is not done.
    deadline = time.monotonic() + 600
    first_report = data / "reports"
    while time.monotonic() < deadline and not list(first_report.glob("*/*/report.md")):
        assert proc.poll() is None, "build ended before synthesis started"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (data / "releases" / "small" / "1.0.0").exists()
    res = run_frame(
        ["build", "--config", str(cfg), "--release", "small", "--version", "1.0.0"], tmp_path / "ph2"
    )
    assert res.returncode == 0, res.stderr[-3000:]
    a, b = manifest(built["release"]), manifest(data / "releases" / "small" / "1.0.0")
    assert a["files"] == b["files"]
    assert a["tables"] == b["tables"]
    assert (built["release"] / "manifest.json").read_bytes() != b"" and a["created_at"] == b["created_at"]


def test_generate_baselines_for_every_instance(built):
    rel = built["release"]
    inst = pd.read_parquet(rel / "instances.parquet").set_index("instance_id")
    for system in ("copy-sample", "extractive"):
        res = run_frame(["generate", "--release", str(rel), "--system", system], built["tmp"] / "ph")
        assert res.returncode == 0, res.stderr[-2000:]
        out = built["data"] / "generations" / "small" / "1.0.0" / system / "generations.parquet"
        gen = pd.read_parquet(out).set_index("instance_id")
        assert sorted(gen.index) == sorted(inst.index)
        for iid, row in gen.iterrows():
            sample = inst.loc[iid, "sample_markdown"]
            if system == "copy-sample":
                assert row.markdown == sample
            else:
                # S's headings; one naming S's period names the target's, as the gold report's does
                heads = [ln for ln in sample.splitlines() if ln.startswith("#")]
                target = [ln for ln in inst.loc[iid, "target_markdown"].splitlines() if ln.startswith("#")]
                got = [ln for ln in row.markdown.splitlines() if ln.startswith("#")]
                assert len(got) == len(heads)
                assert all(g == h or g in target for g, h in zip(got, heads, strict=True)), (got, heads)
                assert row.markdown != sample
