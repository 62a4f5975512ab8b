"""What each build step cost: wall time, LLM calls, tokens, cache hit or miss, an LLM cost estimate.

Every step call of a build goes through `StepRecorder.call`, which runs the Prefect task, tells a
cache hit (state "Cached") from a run, meters the LLM traffic of the step (`tasks.llm.client.metering`)
and appends one JSON line to `<data>/runs/.active/steps-<domain>.jsonl` as soon as the step ends, failed
or not. The lines live in the data folder, not in memory, so they survive a failed domain, a Dask worker
and a killed build. At the end the flow folds them into `<data>/runs/<run-id>/run.json` and
`<data>/runs/latest.json` (read by `frame status`) and a Prefect Markdown artifact.
One build runs per data folder at a time (`tasks.locks.data_folder_lock`), so `.active` has one owner.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from flows.steps import SYNTH_STEPS, all_steps, run_name
from schemas.config import ModelPrice
from tasks.atomic import atomic_write_text
from tasks.llm.client import metering
from tasks.sources import source_kind

COUNTERS = ("runs", "llm_calls", "llm_cache_hits", "prompt_tokens", "completion_tokens")


def runs_dir(data_dir: str | Path) -> Path:
    return Path(data_dir) / "runs"


def active_dir(data_dir: str | Path) -> Path:
    return runs_dir(data_dir) / ".active"


class StepRecorder:
    """Runs the steps of one domain and logs one line per step call."""

    def __init__(self, data_dir: str | Path, domain: str) -> None:
        self.domain = domain
        self.path = active_dir(data_dir) / f"steps-{domain}.jsonl"

    def _write(self, rec: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # One short line per append: a kill leaves whole lines (and at worst a torn last one, skipped).
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(rec, sort_keys=True) + "\n")
            fh.flush()

    def call(self, task, step: str, snapshot: str, *args: Any, part: str = "") -> Any:
        """Run `task(*args)` as the task run "step · domain · snapshot[ · part]" (`part` tells apart
        the calls of one step in one snapshot, e.g. a paper's arXiv id); the run name is not part of
        the cache key."""
        start = time.perf_counter()
        task = task.with_options(task_run_name=run_name(step, self.domain, snapshot, part))
        with metering() as meter:
            state = task(*args, return_state=True)
        spent = meter.as_dict()
        status = "cached" if state.name == "Cached" else "ran" if state.is_completed() else "failed"
        error = ""
        if status == "failed":
            exc = state.result(raise_on_failure=False)
            error = (str(exc) or type(exc).__name__).splitlines()[0][:300] if exc else str(state.message)
        self._write(
            {
                "domain": self.domain,
                "snapshot": snapshot,
                "step": step,
                "status": status,
                "wall_s": round(time.perf_counter() - start, 4),
                "runs": 1,
                "llm_calls": spent["calls_made"],
                "llm_cache_hits": spent["cache_hits"],
                "prompt_tokens": spent["prompt_tokens"],
                "completion_tokens": spent["completion_tokens"],
                "error": error,
            }
        )
        return state.result()  # re-raises a failed step's exception


def start_run(data_dir: str | Path) -> None:
    """A new build: the step lines of an earlier, interrupted one are set aside, not mixed in."""
    act = active_dir(data_dir)
    if act.exists():
        stale = runs_dir(data_dir) / f"interrupted-{_stamp()}-{os.getpid()}"
        act.rename(stale)
    act.mkdir(parents=True, exist_ok=True)
    atomic_write_text(act / "started.json", json.dumps({"started_at": _now(), "pid": os.getpid()}) + "\n")


def _now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _stamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")


def read_lines(folder: Path) -> list[dict[str, Any]]:
    rows = []
    for path in sorted(folder.glob("steps-*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue  # a torn last line of a killed build
    return rows


def cost_usd(prompt: int, completion: int, model: str, prices: dict[str, ModelPrice]) -> float | None:
    price = prices.get(model)
    if price is None:
        return None
    return prompt / 1e6 * price.input_per_mtok + completion / 1e6 * price.output_per_mtok


def fold(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per (domain, snapshot, step): counters summed; cached only if every call was."""
    acc: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in rows:
        key = (r["domain"], r["snapshot"], r["step"])
        cur = acc.get(key)
        if cur is None:
            acc[key] = {**r}
            continue
        for c in COUNTERS:
            cur[c] += r.get(c, 0)
        cur["wall_s"] = round(cur["wall_s"] + r["wall_s"], 4)
        rank = {"failed": 2, "ran": 1, "cached": 0}
        if rank[r["status"]] > rank[cur["status"]]:
            cur["status"], cur["error"] = r["status"], r.get("error", "")
    order = {s: i for i, s in enumerate(all_steps())}
    return sorted(acc.values(), key=lambda r: (r["domain"], r["snapshot"], order.get(r["step"], 99)))


def finish_run(
    data_dir: str | Path,
    results: list[dict[str, Any]],
    *,
    kind: str,
    model: str,
    backend: str,
    prices: dict[str, ModelPrice],
    wall_s: float,
    release: str | None = None,
    version: str | None = None,
) -> dict[str, Any]:
    """Fold the step lines of this build into run.json + latest.json; returns the summary (`release`,
    `version`: what the build is for, when it builds a release version)."""
    act = active_dir(data_dir)
    started = {}
    if (act / "started.json").is_file():
        started = json.loads((act / "started.json").read_text(encoding="utf-8"))
    lines = read_lines(act)
    logged = {r["domain"] for r in lines}
    for res in results:
        # A domain served whole from the cache ran no step in this build: its steps are all hits.
        if res.ok and res.cached and res.domain not in logged:
            # Only the steps the domain's kind runs (papers have no clean/split step, one convert each).
            steps = ["fetch", *source_kind(res.kind).ground_steps, *SYNTH_STEPS]
            for snap in res.snapshot_names:
                for step in steps:
                    lines.append(
                        {"domain": res.domain, "snapshot": snap, "step": step}
                        | {"status": "cached", "wall_s": 0.0, "error": ""}
                        | dict.fromkeys(COUNTERS, 0)
                    )
    steps = fold(lines)
    for s in steps:
        s["cost_usd"] = cost_usd(s["prompt_tokens"], s["completion_tokens"], model, prices)
    totals = dict.fromkeys(COUNTERS, 0)
    for s in steps:
        for c in COUNTERS:
            totals[c] += s[c]
    by_status: dict[str, int] = defaultdict(int)
    for s in steps:
        by_status[s["status"]] += 1
    total_cost = cost_usd(totals["prompt_tokens"], totals["completion_tokens"], model, prices)
    summary = {
        "kind": kind,
        "release": release,
        "version": version,
        "started_at": started.get("started_at"),
        "finished_at": _now(),
        "wall_s": round(wall_s, 3),
        "backend": backend,
        "model": model,
        "status": "failed" if any(not r.ok for r in results) else "ok",
        "domains": [
            {"domain": r.domain, "status": r.status, "cached": r.cached, "error": r.error} for r in results
        ],
        "totals": {
            **totals,
            "steps_ran": by_status["ran"],
            "steps_cached": by_status["cached"],
            "steps_failed": by_status["failed"],
            # No price for the model: unknown (None), except offline, which costs nothing.
            "cost_usd": total_cost if total_cost is not None else (0.0 if backend == "offline" else None),
        },
        "steps": steps,
    }
    run_id = _stamp()
    folder = runs_dir(data_dir) / run_id
    folder.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"run_id": run_id, **summary}, indent=1, sort_keys=True) + "\n"
    atomic_write_text(folder / "run.json", text)
    atomic_write_text(runs_dir(data_dir) / "latest.json", text)
    shutil.rmtree(act, ignore_errors=True)
    return {"run_id": run_id, **summary}


def latest_run(data_dir: str | Path) -> dict[str, Any] | None:
    """The last finished build, and whether a later one is running or was interrupted."""
    path = runs_dir(data_dir) / "latest.json"
    run = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    act = active_dir(data_dir)
    if act.is_dir():
        started = {}
        if (act / "started.json").is_file():
            started = json.loads((act / "started.json").read_text(encoding="utf-8"))
        partial = fold(read_lines(act))
        return {
            "in_progress": {
                "started_at": started.get("started_at"),
                "pid": started.get("pid"),
                "steps": partial,
            },
            **(run or {}),
        }
    return run


def _fmt_cost(v: float | None, backend: str) -> str:
    if backend == "offline":
        return "0"  # the offline backend calls no LLM
    return "n/a" if v is None else f"{v:,.4f}"  # n/a: no price for the model in [prices]


def _fmt_time(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.1f} min" if seconds >= 120 else f"{seconds:.1f} s"


STEP_COUNTS = {"computed": "ran", "cached": "cached", "failed": "failed"}  # column -> step status


def domain_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """One record per domain of the build: its step records folded (how many computed, cached,
    failed; wall time, LLM use, cost) and its status: failed, cached (no step computed) or built."""
    order = [d["domain"] for d in summary["domains"]]
    order += sorted({s["domain"] for s in summary["steps"]} - set(order))
    failed_domains = {d["domain"] for d in summary["domains"] if d["status"] != "ok"}
    rows = []
    for name in order:
        steps = [s for s in summary["steps"] if s["domain"] == name]
        row: dict[str, Any] = {
            "domain": name,
            "snapshots": len({s["snapshot"] for s in steps}),
            **{k: sum(1 for s in steps if s["status"] == st) for k, st in STEP_COUNTS.items()},
            "wall_s": round(sum(s["wall_s"] for s in steps), 4),
            **{c: sum(s[c] for s in steps) for c in COUNTERS},
        }
        costs = [s["cost_usd"] for s in steps if s.get("cost_usd") is not None]
        row["cost_usd"] = sum(costs) if costs else None
        row["status"] = (
            "failed"
            if name in failed_domains or row["failed"]
            else "cached"
            if not row["computed"]
            else "built"
        )
        rows.append(row)
    return rows


def markdown_table(summary: dict[str, Any]) -> str:
    """The build's figures as Markdown (the Prefect artifact): what was built (release, version,
    backend), one row per domain (its steps folded), then every failure with its error."""
    t = summary["totals"]
    backend = summary["backend"]
    rows = domain_rows(summary)
    target = " ".join(p for p in (summary.get("release"), summary.get("version")) if p)
    names = [r["domain"] for r in rows]
    more = f" +{len(names) - 3} more" if len(names) > 3 else ""
    target = target or (", ".join(names[:3]) + more) or "(no domain)"
    engine = "offline" if backend == "offline" else f"{backend}, model `{summary['model']}`"
    n_steps = t["steps_ran"] + t["steps_cached"] + t["steps_failed"]
    if n_steps and t["steps_cached"] == n_steps:
        steps = f"all {n_steps} steps cached (nothing computed)"
    else:
        steps = f"{t['steps_ran']} computed, {t['steps_cached']} cached, {t['steps_failed']} failed"
    lines = [
        f"# frame {summary['kind']} {target}: {summary['status']}",
        "",
        f"- backend: {engine}",
        f"- {len(rows)} domain(s), {sum(r['snapshots'] for r in rows)} snapshot(s) in "
        f"{_fmt_time(summary['wall_s'])}",
        f"- steps: {steps}",
        f"- LLM calls: {t['llm_calls']:,} ({t['llm_cache_hits']:,} answered from the LLM cache); tokens in "
        f"{t['prompt_tokens']:,}, out {t['completion_tokens']:,}",
        f"- estimated cost (USD): {_fmt_cost(t['cost_usd'], backend)}"
        + (" (no price for the model in [prices])" if t["cost_usd"] is None and backend != "offline" else ""),
        "",
        "| domain | status | snapshots | steps computed / cached / failed | time | estimated cost (USD) "
        "| LLM calls | tokens in / out |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        time_s = _fmt_time(r["wall_s"]) if r["wall_s"] else "-"  # 0: served whole from its cache entry
        lines.append(
            f"| {r['domain']} | {r['status']} | {r['snapshots']} | "
            f"{r['computed']} / {r['cached']} / {r['failed']} | {time_s} | "
            f"{_fmt_cost(r['cost_usd'], backend)} | {r['llm_calls']:,} | "
            f"{r['prompt_tokens']:,} / {r['completion_tokens']:,} |"
        )
    failures = [
        f"- {s['domain']} {s['snapshot']} {s['step']}: {s['error'] or 'failed'}"
        for s in summary["steps"]
        if s["status"] == "failed"
    ]
    stepped = defaultdict(list)
    for s in summary["steps"]:
        if s["status"] == "failed" and s.get("error"):
            stepped[s["domain"]].append(s["error"])
    for d in summary["domains"]:
        # A domain can fail outside its steps (a gold report that does not validate, a bad folder);
        # a step's failure, which ends its domain, is listed once.
        said = any(d["error"].startswith(e) for e in stepped[d["domain"]])
        if d["status"] != "ok" and not said:
            failures.append(f"- {d['domain']}: {d['error'] or 'failed'}")
    if failures:
        lines += ["", f"## Failures ({len(failures)})", "", *failures]
    return "\n".join(lines) + "\n"
