"""The `build` flow: fetch -> ground -> synthesize per snapshot -> instances -> release.

Domains run in parallel (ThreadPoolTaskRunner); within a domain, snapshots run in order because a
form-restricted structure adapts the previous snapshot's. Every step is a cached task (inputs +
task source + code digest), so a rebuild with nothing changed recomputes nothing and makes no LLM
call, and `frame rerun` recomputes exactly one step and what depends on it (`refresh`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import sys
import threading
import time
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.futures import as_completed
from prefect.task_runners import ThreadPoolTaskRunner
from prefect.transactions import CommitMode, transaction

from flows.ground import CACHE, code_version, ground_snapshot, mirror_digest
from flows.observe import StepRecorder, finish_run, markdown_table, start_run
from flows.results import sweep_interrupted
from flows.steps import run_name, snapshot_span
from schemas.config import FrameConfig, LLMSettings
from schemas.release_rows import unsupported_list
from schemas.structure import ReportStructure, structure_json
from tasks.ground.load import load_grounding_set
from tasks.instances import report_shape
from tasks.llm.backend import StepContext
from tasks.manifest import check_folder, describe, recover_leftovers, write_folder
from tasks.synthesize import make_backend
from tasks.synthesize.fill import FillResult, fill_report
from tasks.synthesize.outcome import DomainOutcome, SnapshotBuild
from tasks.synthesize.outline import render_outline
from tasks.synthesize.questions import augment_questions
from tasks.synthesize.structure import synthesize_structure
from tasks.synthesize.validate import GoldValidation, validate_gold
from tasks.tokens import count_tokens

# Progress for the CLI bar (the flow runs in a worker thread): snapshots whose gold report is done,
# computed or cached, of all the build's snapshots.
PROGRESS: dict[str, int] = {"done": 0, "total": 0}
_PROGRESS_LOCK = threading.Lock()
_DONE: dict[str, int] = {}  # domain -> its snapshots done


def _start_progress(total: int) -> None:
    # Not inline in the flow: a Dask task carries the flow (by value) and a lock does not pickle.
    with _PROGRESS_LOCK:
        _DONE.clear()
        PROGRESS.update(done=0, total=total)


def _snapshots_done(domain: str, n: int | None = None) -> None:
    """One more snapshot of `domain` done (`n`: all of its `n` are done). A domain on a Dask worker
    counts in the worker's process: here it counts when its task ends."""
    with _PROGRESS_LOCK:
        _DONE[domain] = _DONE.get(domain, 0) + 1 if n is None else max(n, _DONE.get(domain, 0))
        PROGRESS["done"] = sum(_DONE.values())


def _llm_cache_dir(cfg: FrameConfig) -> Path:
    return Path(cfg.build.data_dir) / "cache"


@task(name="structure", cache_policy=CACHE, persist_result=True)
def structure_task(
    llm: LLMSettings,
    cache_dir: str,
    gset_path: str,
    gset_digest: str,
    prev: ReportStructure | None,
    ctx: StepContext,
    code: str,
) -> ReportStructure:
    backend = make_backend(llm, Path(cache_dir))
    return synthesize_structure(backend, load_grounding_set(gset_path), prev, ctx)


@task(name="questions", cache_policy=CACHE, persist_result=True)
def questions_task(
    llm: LLMSettings,
    cache_dir: str,
    structure: ReportStructure,
    gset_path: str,
    gset_digest: str,
    prev: ReportStructure | None,
    ctx: StepContext,
    code: str,
) -> ReportStructure:
    backend = make_backend(llm, Path(cache_dir))
    return augment_questions(backend, structure, load_grounding_set(gset_path), prev, ctx)


@task(name="outline", cache_policy=CACHE, persist_result=True)
def outline_task(structure: ReportStructure, code: str) -> str:
    return render_outline(structure)


@task(name="fill", cache_policy=CACHE, persist_result=True)
def fill_task(
    llm: LLMSettings,
    cache_dir: str,
    outline: str,
    structure: ReportStructure,
    gset_path: str,
    gset_digest: str,
    ctx: StepContext,
    code: str,
) -> FillResult:
    backend = make_backend(llm, Path(cache_dir))
    # Per-element retrieval keeps every call far below the context window (never a silent cut).
    budget = 1500 if llm.backend == "offline" else max(1000, min(12_000, llm.context_tokens // 4))
    return fill_report(backend, outline, structure, load_grounding_set(gset_path), ctx, budget_tokens=budget)


@task(name="validate", cache_policy=CACHE, persist_result=True)
def validate_task(
    filled: FillResult, outline: str, gset_path: str, gset_digest: str, code: str
) -> GoldValidation:
    return validate_gold(filled.report, outline, filled.contents, load_grounding_set(gset_path))


def _save_report_files(
    folder: Path, structure: ReportStructure, outline: str, filled: FillResult, check: GoldValidation
) -> None:
    """data/reports/<domain>/<snapshot>/: what a person opens to inspect one gold report (with its
    MANIFEST.json, written all or nothing like a grounding folder)."""
    validation = {
        "skeleton_equal": check.skeleton_equal,
        "placeholders_left": check.placeholders_left,
        "numbers_total": check.numbers_total,
        "numbers_supported": check.numbers_supported,
        "support_rate": check.support_rate,
        "unsupported": check.unsupported,
        "evidence": filled.evidence,
    }
    files = {
        "structure.json": structure_json(structure) + "\n",
        "outline.md": outline,
        "report.md": filled.report,
        "validation.json": json.dumps(validation, indent=1, sort_keys=True) + "\n",
    }

    def fill(tmp: Path) -> None:
        for name, text in files.items():
            (tmp / name).write_text(text, encoding="utf-8")

    write_folder(folder, fill)


# A domain whose config, code, sources, backend settings and written outputs are unchanged is served
# whole from one cache entry (a rebuild then costs one lookup per domain, not one per step);
# otherwise its steps run, each cached on its own.
@task(name="build-domain", cache_policy=CACHE, persist_result=True)
def build_domain_task(
    cfg: FrameConfig,
    domain_name: str,
    refresh: list[str],
    code: str,
    digest: str,
    llm: LLMSettings,
) -> DomainOutcome:
    """Every snapshot of one domain: ground, then structure -> questions -> outline -> fill -> validate."""
    # Steps run inside this task; in Prefect 3 their cache records would commit only with this task's
    # transaction, so a failure later in the domain would discard every finished step. EAGER commits
    # each step as it finishes: a rerun resumes from the step that failed.
    with transaction(commit_mode=CommitMode.EAGER):
        return _build_domain(cfg, domain_name, refresh, code, digest, llm)


def _build_domain(
    cfg: FrameConfig, domain_name: str, refresh: list[str], code: str, digest: str, llm: LLMSettings
) -> DomainOutcome:
    log = get_run_logger()
    domain = cfg.domain(domain_name)
    cache_dir = str(_llm_cache_dir(cfg))

    recorder = StepRecorder(cfg.build.data_dir, domain.name)

    def step(t, name: str, snapshot: str):
        t = t.with_options(refresh_cache=f"{domain.name}|{snapshot}|{name}" in refresh)
        return lambda *args: recorder.call(t, name, snapshot, *args)

    prev: ReportStructure | None = None
    snapshots = []
    for snap in domain.snapshots:
        g = ground_snapshot(
            cfg,
            domain,
            snap,
            code,
            digest,
            refresh=[k.split("|")[2] for k in refresh if k.startswith(f"{domain.name}|{snap}|")],
            recorder=recorder,
        )
        ctx = StepContext(domain.name, snap, domain.category, domain.kind)
        structure = step(structure_task, "structure", snap)(llm, cache_dir, g.path, g.digest, prev, ctx, code)
        structure = step(questions_task, "questions", snap)(
            llm, cache_dir, structure, g.path, g.digest, prev, ctx, code
        )
        outline = step(outline_task, "outline", snap)(structure, code)
        filled = step(fill_task, "fill", snap)(
            llm, cache_dir, outline, structure, g.path, g.digest, ctx, code
        )
        check = step(validate_task, "validate", snap)(filled, outline, g.path, g.digest, code)
        if not check.ok:
            raise RuntimeError(
                f"gold report {domain.name} {snap}: skeleton differs from the outline or "
                f"{check.placeholders_left} placeholder(s) left"
            )
        _save_report_files(
            Path(cfg.build.data_dir) / "reports" / domain.name / snap, structure, outline, filled, check
        )
        _snapshots_done(domain.name)
        log.info(
            "%s %s: gold report %d tokens, numeric support %.3f (%d/%d)",
            domain.name,
            snap,
            count_tokens(filled.report),
            check.support_rate,
            check.numbers_supported,
            check.numbers_total,
        )
        snapshots.append(SnapshotBuild(snap, g, structure, outline, filled.report, check))
        prev = structure
    return DomainOutcome(domain.name, domain.category, domain.kind, "ok", tuple(snapshots))


def stale_outputs(cfg: FrameConfig, name: str) -> list[str]:
    """One line per snapshot folder of domain `name` (grounding, gold report) that exists but no longer
    matches its manifest: `data/grounding/<domain>/<snapshot>: <problems>` (relative to the data
    folder's parent). Leftovers of a killed write are cleaned first; a folder not written yet is none."""
    data = Path(cfg.build.data_dir)
    lines = []
    for t in cfg.domain(name).snapshots:
        for top in ("grounding", "reports"):
            folder = data / top / name / t
            recover_leftovers(folder)
            if not folder.exists():
                continue
            problems = check_folder(folder)
            if problems:
                lines.append(f"{data.name}/{top}/{name}/{t}: {describe(problems)}")
    return lines


def _outputs_missing(cfg: FrameConfig, name: str) -> bool:
    data = Path(cfg.build.data_dir)
    return not all(
        (data / top / name / t).is_dir()
        for t in cfg.domain(name).snapshots
        for top in ("grounding", "reports")
    )


def _warn_stale(lines: list[str]) -> None:
    """Each folder in one line, in the run's log and on stderr (a person running `frame` sees it)."""
    log = get_run_logger()
    for line in lines:
        log.warning("%s; recomputing", line)
        # not print(): the flow's log_prints would turn it into a second log record instead
        sys.stderr.write(f"frame: warning: {line}; recomputing\n")
        sys.stderr.flush()


def report_row(domain: DomainOutcome, snap: SnapshotBuild) -> dict:
    structure, check = snap.structure, snap.validation
    prov = structure.provenance[-1] if structure.provenance else None
    return {
        "report_id": f"{domain.domain}/{snap.snapshot}",
        "domain": domain.domain,
        "category": domain.category,
        "snapshot": snap.snapshot,
        "markdown": snap.report,
        "outline": snap.outline,
        "tokens": count_tokens(snap.report),
        **report_shape(snap.report),
        "backend": prov.backend if prov else "offline",
        "model": prov.model if prov else "",
        "form_restricted": structure.form_restricted,
        "numbers_total": check.numbers_total,
        "numbers_supported": check.numbers_supported,
        "support_rate": check.support_rate,
        "unsupported": unsupported_list(check.unsupported),
        "placeholders_left": check.placeholders_left,
        "skeleton_equal": check.skeleton_equal,
    }


def config_digest(cfg: FrameConfig) -> str:
    """What was built and how; where the data folder and the mirror live is not part of a release's
    identity (the mirror's files are, by their sha256 in the manifest's sources)."""
    # Nor are where tasks run ([run]) and the price table: they never change what is built.
    exclude = {"build": {"data_dir"}, "source": {"mirror"}, "run": True, "prices": True}
    return hashlib.sha256(cfg.model_dump_json(exclude=exclude).encode()).hexdigest()


def build_run_name() -> str:
    """The build's flow run name: "build demo 0.1.0" (release, version), or, for a build that writes
    no release (`frame rerun`), its kind and domains: "rerun NVDA-10-Q"."""
    from prefect.runtime import flow_run

    p = flow_run.parameters
    kind = "rerun" if p.get("refresh") else "build"
    if p.get("release"):
        return " ".join(str(x) for x in (kind, p["release"], p.get("version")) if x)
    names = list(p.get("domains") or [])
    more = f" +{len(names) - 3}" if len(names) > 3 else ""
    return f"{kind} {', '.join(names[:3])}{more}".strip()


@flow(
    name="build",
    flow_run_name=build_run_name,
    log_prints=True,
    task_runner=ThreadPoolTaskRunner(max_workers=2),
)
def build(
    cfg: FrameConfig,
    domains: list[str],
    refresh: list[str] | None = None,
    release: str | None = None,
    version: str | None = None,
) -> list[DomainOutcome]:
    """Build every domain (in parallel); returns one result per domain: ok with its data, or failed.
    `release` and `version` name what the build is for (the flow run's name, the artifact), nothing
    else: the build's outputs and cache keys do not depend on them."""
    refresh = refresh or []
    started = time.perf_counter()
    _start_progress(sum(len(cfg.domain(n).snapshots) for n in domains))
    sweep_interrupted(cfg.build.data_dir, cfg.run.result_storage)  # a killed build's temp files
    start_run(cfg.build.data_dir)
    code = code_version("tasks", "schemas", "prompts")
    digest = mirror_digest(cfg)
    llm = cfg.llm.resolved()
    futures = {}
    for name in domains:
        mine = [k for k in refresh if k.startswith(f"{name}|")]
        # Missing outputs (a deleted data folder part) or outputs that no longer match their manifests
        # (edited, truncated, deleted files) also run the domain: its steps come from their own caches
        # and write the folders again, as a clean build would.
        stale = stale_outputs(cfg, name)
        _warn_stale(stale)
        run = bool(mine or stale) or _outputs_missing(cfg, name)
        snaps = cfg.domain(name).snapshots
        t = build_domain_task.with_options(
            refresh_cache=True if run else None,
            task_run_name=run_name("build-domain", name, snapshot_span(snaps)),
        )
        # Keyed on this domain's slice of the config: a change to another domain leaves it cached.
        futures[name] = t.submit(cfg.for_domain(name), name, mine, code, digest, llm)
    for fut in as_completed(list(futures.values())):
        name = next(n for n, f in futures.items() if f is fut)
        fut.wait()  # its final state (a Dask future's state is read back from the API otherwise)
        if fut.state.is_completed():  # its snapshots are done (all at once when served from the cache)
            _snapshots_done(name, len(cfg.domain(name).snapshots))
    results = []
    for name, fut in futures.items():
        fut.wait()
        state = fut.state
        domain = cfg.domain(name)
        if state.is_completed():
            results.append(dataclasses.replace(fut.result(), cached=state.name == "Cached"))
        else:
            results.append(DomainOutcome(name, domain.category, domain.kind, "failed", error=_failure(state)))
    summary = finish_run(
        cfg.build.data_dir,
        results,
        kind="rerun" if refresh else "build",
        model=llm.model if llm.backend == "openai" else "offline",
        backend=llm.backend,
        prices=cfg.prices,
        wall_s=time.perf_counter() - started,
        release=release,
        version=version,
    )
    t = summary["totals"]
    get_run_logger().info(
        "build %s in %.1f s: %d step(s) ran, %d cached, %d failed; %d LLM call(s), %d token(s)",
        summary["status"],
        summary["wall_s"],
        t["steps_ran"],
        t["steps_cached"],
        t["steps_failed"],
        t["llm_calls"],
        t["prompt_tokens"] + t["completion_tokens"],
    )
    _publish_artifact(summary)
    return results


def _failure(state) -> str:
    """The first line of a failed domain's exception (its state's message if the exception cannot be
    read back, e.g. one that does not unpickle from a Dask worker's persisted result)."""
    try:
        exc = state.result(raise_on_failure=False)
    except Exception:
        exc = None
    if isinstance(exc, Exception) and str(exc):
        return str(exc).splitlines()[0]
    msg = str(state.message or state)
    return msg.removeprefix("Task run encountered an exception ").splitlines()[0]


def _publish_artifact(summary: dict) -> None:
    """The build's figures as a Prefect Markdown artifact (shown in the UI with the flow run)."""
    from prefect.artifacts import create_markdown_artifact

    try:
        create_markdown_artifact(
            markdown=markdown_table(summary),
            key="frame-build",
            description=" ".join(
                x for x in (f"frame {summary['kind']}", summary.get("release"), summary.get("version")) if x
            )
            + ": steps per domain, cache hits, tokens, cost, failures",
        )
    except Exception as exc:  # an artifact is a report, never a reason to fail the build
        get_run_logger().warning("could not create the build artifact: %s", exc)


def run_build(
    cfg: FrameConfig,
    domains: list[str],
    refresh: list[str] | None = None,
    *,
    release: str | None = None,
    version: str | None = None,
) -> list[DomainOutcome]:
    """The build flow on the task runner that `[run]` selects (threads, or a Dask cluster); PROGRESS
    counts its snapshots as their gold reports are done."""
    from flows.runners import make_task_runner

    _start_progress(sum(len(cfg.domain(n).snapshots) for n in domains))
    flow_on_runner = build.with_options(task_runner=make_task_runner(cfg))
    return flow_on_runner(cfg, domains, refresh, release, version)


def clear_folder(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path)
