"""flows/observe.py: step records (ran / cached / failed, metered LLM use), the run summary, the artifact."""

from __future__ import annotations

import json

import pytest

from flows.observe import StepRecorder, cost_usd, finish_run, fold, latest_run, markdown_table, start_run
from schemas.config import ModelPrice
from tasks.synthesize.outcome import DomainOutcome, SnapshotGrounding

PRICES = {"m": ModelPrice(input_per_mtok=3.0, output_per_mtok=15.0)}


def built(domain: str, kind: str, snapshots: list[str], cached: bool = False) -> DomainOutcome:
    """A domain's outcome as the build returns it (its grounding counts do not matter here)."""
    snaps = tuple(SnapshotGrounding(s, 0, 0, 0, 0, 0, "", "") for s in snapshots)
    return DomainOutcome(domain, "financial_quarterly", kind, "ok", snaps, cached=cached)


def failed(domain: str, error: str) -> DomainOutcome:
    return DomainOutcome(domain, "financial_quarterly", "edgar", "failed", error=error)


def line(step: str, status: str, **kw) -> dict:
    base = {"domain": "d", "snapshot": "t1", "step": step, "status": status, "wall_s": 1.0, "error": ""}
    return (
        base
        | {"runs": 1, "llm_calls": 0, "llm_cache_hits": 0, "prompt_tokens": 0, "completion_tokens": 0}
        | kw
    )


def test_fold_sums_calls_of_one_step_and_keeps_the_worst_status():
    rows = [
        line("convert", "cached"),
        line("convert", "ran", llm_calls=2, prompt_tokens=10),
        line("fetch", "cached"),
        line("convert", "failed", error="boom"),
    ]
    out = fold(rows)
    assert [r["step"] for r in out] == ["fetch", "convert"]  # pipeline order, not arrival order
    conv = out[1]
    assert (conv["status"], conv["error"], conv["runs"], conv["llm_calls"], conv["prompt_tokens"]) == (
        "failed",
        "boom",
        3,
        2,
        10,
    )
    assert conv["wall_s"] == pytest.approx(3.0)
    assert fold([line("fetch", "cached"), line("fetch", "cached")])[0]["status"] == "cached"


def test_cost_from_the_price_table():
    assert cost_usd(1_000_000, 100_000, "m", PRICES) == pytest.approx(3.0 + 1.5)
    assert cost_usd(10, 10, "unknown", PRICES) is None


def test_finish_run_expands_a_domain_served_from_cache_and_writes_latest(tmp_path):
    start_run(tmp_path)
    StepRecorder(tmp_path, "a")._write(line("fill", "ran", domain="a", llm_calls=4, prompt_tokens=1000))
    results = [
        built("a", "edgar", ["t1"]),
        built("b", "edgar", ["x", "y"], cached=True),
        failed("c", "c: no such filing"),
    ]
    s = finish_run(tmp_path, results, kind="build", model="m", backend="openai", prices=PRICES, wall_s=2.5)
    assert s["status"] == "failed" and not (tmp_path / "runs" / ".active").exists()
    cached_b = [r for r in s["steps"] if r["domain"] == "b"]
    assert len(cached_b) == 18 and {r["status"] for r in cached_b} == {"cached"}  # 2 snapshots x 9 steps
    assert s["totals"]["llm_calls"] == 4 and s["totals"]["steps_ran"] == 1
    on_disk = json.loads((tmp_path / "runs" / "latest.json").read_text())
    assert on_disk == json.loads((tmp_path / "runs" / s["run_id"] / "run.json").read_text())
    md = markdown_table(s)
    assert md.startswith("# frame build a, b, c: failed\n") and "- backend: openai, model `m`\n" in md
    rows = [ln for ln in md.splitlines() if ln.startswith("| ") and not ln.startswith("| domain")]
    assert [r.split(" | ")[:4] for r in rows] == [
        ["| a", "built", "1", "1 / 0 / 0"],
        ["| b", "cached", "2", "0 / 18 / 0"],  # steps folded: one row per domain
        ["| c", "failed", "0", "0 / 0 / 0"],
    ]
    assert rows[0].split(" | ")[5] == "0.0030"  # 1000 tokens in at $3/Mtok, never clipped
    assert md.split("## Failures (1)\n\n")[1] == "- c: c: no such filing\n"
    paper = finish_run(
        tmp_path,
        [built("p", "arxiv", ["W1"], cached=True)],
        kind="build",
        model="m",
        backend="offline",
        prices={},
        wall_s=1.0,
    )
    assert [r["step"] for r in paper["steps"]] == [
        "fetch",
        "convert",
        "structure",
        "questions",
        "outline",
        "fill",
        "validate",
    ]
    assert s["totals"]["cost_usd"] == pytest.approx(1000 * 3.0 / 1e6)


def test_an_interrupted_build_is_reported_and_set_aside(tmp_path):
    start_run(tmp_path)
    rec = StepRecorder(tmp_path, "a")
    rec._write(line("fetch", "ran", domain="a"))
    with rec.path.open("a") as fh:
        fh.write('{"domain": "a", "snap')  # the torn last line of a killed build
    run = latest_run(tmp_path)
    assert run["in_progress"]["steps"][0]["step"] == "fetch" and "steps" not in run
    start_run(tmp_path)  # the next build moves the old lines aside instead of mixing them in
    assert list((tmp_path / "runs").glob("interrupted-*/steps-a.jsonl"))
    assert not list((tmp_path / "runs" / ".active").glob("steps-*"))


def test_recorder_tells_ran_cached_failed_and_meters_llm_use(prefect_harness, tmp_path):
    from prefect import flow, task
    from prefect.cache_policies import INPUTS

    from tasks.llm.client import LLMStats

    @task(cache_policy=INPUTS, persist_result=True)
    def spend(x: int) -> int:
        LLMStats().add(calls=1, hits=2, prompt=30, completion=5)  # what any client of the step spends
        return x * 2

    @task
    def broken(x: int) -> int:
        raise ValueError(f"bad input {x}\nsecond line")

    rec = StepRecorder(tmp_path, "dom")

    @flow
    def f() -> tuple:
        a = rec.call(spend, "fill", "t1", 21)
        b = rec.call(spend, "fill", "t2", 21)
        with pytest.raises(ValueError, match="bad input 3"):
            rec.call(broken, "validate", "t1", 3)
        return a, b

    assert f() == (42, 42)
    rows = [json.loads(x) for x in rec.path.read_text().splitlines()]
    assert [(r["snapshot"], r["status"]) for r in rows] == [("t1", "ran"), ("t2", "cached"), ("t1", "failed")]
    assert (rows[0]["llm_calls"], rows[0]["llm_cache_hits"], rows[0]["prompt_tokens"]) == (1, 2, 30)
    assert rows[1]["llm_calls"] == 0  # a cached step spends nothing
    assert rows[2]["error"] == "bad input 3"


def test_build_summary_becomes_a_markdown_artifact(prefect_harness, tmp_path):
    import asyncio

    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from flows.build import _publish_artifact

    start_run(tmp_path)
    summary = finish_run(
        tmp_path, [], kind="build", model="offline", backend="offline", prices={}, wall_s=1.0
    )

    @flow
    def f() -> str:
        from prefect.runtime import flow_run

        _publish_artifact(summary)
        return str(flow_run.id)

    run_id = f()

    async def read() -> list:
        async with get_client() as client:
            return await client.read_artifacts(
                artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["frame-build"]))
            )

    # this flow run's artifact (other tests of the session publish frame-build artifacts to the same server)
    arts = [a for a in asyncio.run(read()) if str(a.flow_run_id) == run_id]
    assert arts and arts[0].type == "markdown" and "# frame build (no domain): ok" in arts[0].data


def test_artifact_names_the_release_and_folds_a_cached_build_and_its_failures(tmp_path):
    start_run(tmp_path)
    rec = StepRecorder(tmp_path, "a")
    rec._write(line("fetch", "cached", domain="a"))
    rec._write(line("fill", "failed", domain="a", error="fill: endpoint said 500"))
    results = [
        failed("a", "fill: endpoint said 500"),
        built("b", "edgar", ["x"], cached=True),
    ]  # the step's error
    s = finish_run(
        tmp_path,
        results,
        kind="build",
        model="offline",
        backend="offline",
        prices={},
        wall_s=1.0,
        release="demo",
        version="0.1.0",
    )
    assert (s["release"], s["version"]) == ("demo", "0.1.0")
    md = markdown_table(s)
    assert md.startswith("# frame build demo 0.1.0: failed\n")
    assert "- backend: offline\n" in md and "(offline)" not in md  # said once
    # a failed step is listed once, with its snapshot, not again as its domain's error
    assert md.split("## Failures (1)\n\n")[1] == "- a t1 fill: fill: endpoint said 500\n"

    start_run(tmp_path)
    cached = finish_run(
        tmp_path,
        results[1:],
        kind="build",
        model="offline",
        backend="offline",
        prices={},
        wall_s=0.4,
        release="demo",
        version="0.1.1",
    )
    md = markdown_table(cached)
    assert "- steps: all 9 steps cached (nothing computed)\n" in md
    (row,) = [ln for ln in md.splitlines() if ln.startswith("| b ")]
    assert row == "| b | cached | 1 | 0 / 9 / 0 | - | 0 | 0 | 0 / 0 |"
    assert "Failures" not in md and "0.00" not in md
