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

from flows.steps import STEPS
from schemas.config import ModelPrice
from tasks.atomic import atomic_write_text
from tasks.llm.client import metering

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

    def call(self, task, step: str, snapshot: str, *args: Any) -> Any:
        start = time.perf_counter()
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
    order = {s: i for i, s in enumerate(STEPS)}
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
) -> dict[str, Any]:
    """Fold the step lines of this build into run.json + latest.json; returns the summary."""
    act = active_dir(data_dir)
    started = {}
    if (act / "started.json").is_file():
        started = json.loads((act / "started.json").read_text(encoding="utf-8"))
    lines = read_lines(act)
    logged = {r["domain"] for r in lines}
    for res in results:
        # A domain served whole from the cache ran no step in this build: its steps are all hits.
        if res.get("status") == "ok" and res.get("cached") and res["domain"] not in logged:
            # Papers have no clean/split step (one convert per paper): list only what the domain runs.
            steps = [s for s in STEPS if not (res.get("kind") == "arxiv" and s in ("clean", "split"))]
            for snap in res.get("snapshots", []):
                for step in steps:
                    lines.append(
                        {"domain": res["domain"], "snapshot": snap["snapshot"], "step": step}
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
        "started_at": started.get("started_at"),
        "finished_at": _now(),
        "wall_s": round(wall_s, 3),
        "backend": backend,
        "model": model,
        "status": "failed" if any(r.get("status") != "ok" for r in results) else "ok",
        "domains": [
            {
                "domain": r["domain"],
                "status": r["status"],
                "cached": bool(r.get("cached")),
                "error": r.get("error", ""),
            }
            for r in results
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


def _fmt_cost(v: float | None) -> str:
    return "n/a" if v is None else f"${v:.4f}"


def markdown_table(summary: dict[str, Any]) -> str:
    """The build's figures as Markdown (the Prefect artifact)."""
    t = summary["totals"]
    lines = [
        f"# frame {summary['kind']} {summary['status']}",
        "",
        f"{summary['wall_s']:.1f} s; backend {summary['backend']} (`{summary['model']}`); "
        f"steps ran {t['steps_ran']}, cached {t['steps_cached']}, failed {t['steps_failed']}; "
        f"LLM calls {t['llm_calls']} (cache hits {t['llm_cache_hits']}); tokens in {t['prompt_tokens']:,}, "
        f"out {t['completion_tokens']:,}; estimated cost {_fmt_cost(t['cost_usd'])}.",
        "",
        "| domain | snapshot | step | status | wall s | LLM calls | cache hits | tokens in | tokens out "
        "| cost |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for s in summary["steps"]:
        lines.append(
            f"| {s['domain']} | {s['snapshot']} | {s['step']} | {s['status']} | {s['wall_s']:.2f} | "
            f"{s['llm_calls']} | {s['llm_cache_hits']} | {s['prompt_tokens']} | {s['completion_tokens']} | "
            f"{_fmt_cost(s['cost_usd'])} |"
        )
    failed = [d for d in summary["domains"] if d["status"] != "ok"]
    if failed:
        lines += ["", "Failed domains:", ""] + [f"- {d['domain']}: {d['error']}" for d in failed]
    return "\n".join(lines) + "\n"
