"""The Prefect ground flow: per-domain isolation, cached reruns, nothing half-written."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from schemas.config import EdgarDomain, FrameConfig, SourceConfig
from tests.conftest import CORPUS, frame_env

pytestmark = pytest.mark.skipif(not (CORPUS / "edgar").is_dir(), reason="shared corpus not found")

NVDA = EdgarDomain(
    kind="edgar",
    name="NVDA-10-Q",
    category="financial_quarterly",
    ticker="NVDA",
    form="10-Q",
    periods=["2023-07-30", "2025-07-27"],
)
AAPL = EdgarDomain(
    kind="edgar",
    name="AAPL-10-Q",
    category="financial_quarterly",
    ticker="AAPL",
    form="10-Q",
    periods=["2023-07-01", "2025-03-29"],
)


def broken_mirror(tmp: Path) -> Path:
    """A mirror of the AAPL and NVDA 10-Qs (symlinks) whose MANIFEST points one AAPL row at a missing file."""
    mirror = tmp / "mirror"
    (mirror / "edgar").mkdir(parents=True)
    with (CORPUS / "edgar" / "MANIFEST.csv").open(newline="") as fh:
        reader = csv.DictReader(fh)
        rows = [r for r in reader if r["form"] == "10-Q" and r["ticker"] in ("AAPL", "NVDA")]
        fields = reader.fieldnames
    for r in rows:
        target = mirror / "edgar" / r["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(CORPUS / "edgar" / r["path"])
        if r["path"] == "AAPL/10-Q/2025-03-29.htm":
            target.unlink()  # the row stays, the file is gone
    with (mirror / "edgar" / "MANIFEST.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    return mirror


def test_failing_domain_does_not_stop_others_and_rerun_is_cached(tmp_path, prefect_harness):
    from flows.ground import run_domains

    cfg = FrameConfig(
        source=SourceConfig(mode="mirror", mirror=broken_mirror(tmp_path), links_outside=True),
        domains=[AAPL, NVDA],
        build={"data_dir": tmp_path / "data"},
    )
    summary = {s.domain: s for s in run_domains(cfg, ["AAPL-10-Q", "NVDA-10-Q"])}
    assert summary["NVDA-10-Q"].ok and [s.snapshot for s in summary["NVDA-10-Q"].snapshots] == NVDA.snapshots
    assert summary["AAPL-10-Q"].status == "failed" and summary["AAPL-10-Q"].input_error
    assert "MANIFEST.csv" in summary["AAPL-10-Q"].error and "missing file" in summary["AAPL-10-Q"].error
    out = tmp_path / "data" / "grounding"
    assert (out / "NVDA-10-Q" / "2025-07-27" / "documents.json").is_file()
    assert (out / "AAPL-10-Q" / "2023-07-01" / "documents.json").is_file()  # the snapshot before the bad one
    assert not (out / "AAPL-10-Q" / "2025-03-29").exists()
    assert not [p for p in out.rglob(".*tmp-*")]

    # Rerun: every finished task is served from the persisted cache (no recomputation).
    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    from flows.ground import ground_domain

    state = ground_domain(cfg, "NVDA-10-Q", return_state=True)
    assert state.is_completed()
    this_run = FlowRunFilter(id=FlowRunFilterId(any_=[state.state_details.flow_run_id]))
    deadline = time.monotonic() + 60  # task runs reach the server as events, recorded in batches
    with get_client(sync_client=True) as client:  # the session's server may hold other tests' runs
        while True:
            runs = client.read_task_runs(flow_run_filter=this_run)
            if (runs and all(r.state and r.state.is_final() for r in runs)) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    states = [r.state.name for r in runs]
    assert states and all(s == "Cached" for s in states), states
    index = json.loads((out / "NVDA-10-Q" / "2025-07-27" / "documents.json").read_text())
    assert len(index) >= 8


def test_cli_ground_domains_reports_bad_domain_in_one_line(tmp_path):
    mirror = broken_mirror(tmp_path)
    config = tmp_path / "build.toml"
    config.write_text(f"""
[build]
data_dir = "{tmp_path / "data"}"
[source]
mode = "mirror"
mirror = "{mirror}"
links_outside = true
[[domains]]
kind = "edgar"
name = "AAPL-10-Q"
category = "financial_quarterly"
ticker = "AAPL"
form = "10-Q"
periods = ["2025-03-29"]
""")
    env = frame_env(tmp_path / "prefect-home")
    frame = str(Path(sys.executable).with_name("frame"))
    res = subprocess.run(
        [frame, "ground-domains", "--config", str(config)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert res.returncode == 2, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert "MANIFEST.csv" in lines[0] and "missing file" in lines[0]
    assert not (tmp_path / "data" / "grounding" / "AAPL-10-Q" / "2025-03-29").exists()
