"""The `ground` flow: fetch, then the source kind's steps (clean -> split -> convert for a filing, convert
for a paper), for every snapshot of one domain.

Each step is a Prefect task cached on its inputs + its own source + `code_version` (a digest of
the grounding code the task calls), with results persisted under the data folder, so a rerun
recomputes only what changed and a failed step resumes where it stopped.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task

from flows.caching import STABLE
from flows.steps import run_name
from schemas.config import FrameConfig
from schemas.domains import DomainBase
from schemas.sources import RawFile
from tasks.errors import FrameInputError
from tasks.ground.documents import Grounded, merge_grounded, write_grounding
from tasks.sources import RawSource, fetch_snapshot, kind_of, source_kind
from tasks.synthesize.outcome import DomainOutcome, SnapshotGrounding

CACHE = STABLE
ROOT = Path(__file__).resolve().parents[1]


@cache
def code_version(*packages: str) -> str:
    """Digest of the source files of the given packages (part of every cache key)."""
    h = hashlib.sha256()
    for pkg in packages:
        for path in sorted(p for p in (ROOT / pkg).rglob("*") if p.suffix in (".py", ".md") and p.is_file()):
            h.update(path.relative_to(ROOT).as_posix().encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def mirror_digest(cfg: FrameConfig) -> str:
    """Mirror fetches are keyed on the MANIFESTs too: an edited mirror is fetched again."""
    if cfg.source.mode != "mirror" or cfg.source.mirror is None:
        return "live"
    h = hashlib.sha256()
    for m in sorted(Path(cfg.source.mirror).glob("*/MANIFEST.csv")):
        h.update(m.read_bytes())
    return h.hexdigest()[:16]


@task(name="fetch", cache_policy=CACHE, persist_result=True)
def fetch_task(
    cfg: FrameConfig, domain: DomainBase, snapshot: str, source_digest: str, code: str
) -> list[RawFile]:
    raws = fetch_snapshot(cfg, domain, snapshot)
    get_run_logger().info("fetched %d raw file(s) for %s %s", len(raws), domain.name, snapshot)
    return raws


# One task for every grounding step of every kind, named after the step (its runs, its timings and its
# cache key all say "clean", "split", "convert", ...). `src` says where the raw bytes are: a RawFile names
# its blob and mirror file portably, relative to the data folder and the mirror. `domain` is narrowed to
# the snapshot, so adding a later snapshot to the domain keys nothing of this one anew.
@task(name="ground-step", cache_policy=CACHE, persist_result=True)
def ground_step_task(
    kind: str, step: str, src: RawSource, domain: DomainBase, earlier: tuple, code: str
) -> Any:
    return source_kind(kind).ground_step(step, src, domain, earlier)


def ground_snapshot(
    cfg: FrameConfig,
    domain: DomainBase,
    snapshot: str,
    code: str,
    source_digest: str,
    refresh: list[str] | tuple[str, ...] = (),
    recorder=None,
) -> SnapshotGrounding:
    """fetch, then the kind's grounding steps for every raw file of one snapshot; writes
    data/grounding/<domain>/<snapshot>/.

    `refresh` names steps to recompute even when cached (`frame rerun`); `recorder` (a
    `flows.observe.StepRecorder`) logs each step's time, cache hit and cost."""

    def step(t, name: str, part: str = ""):
        t = t.with_options(refresh_cache=True) if name in refresh else t
        if recorder is None:
            return t.with_options(task_run_name=run_name(name, domain.name, snapshot, part))
        return lambda *args: recorder.call(t, name, snapshot, *args, part=part)

    kind = kind_of(domain)
    # Keyed on this snapshot alone: adding a later snapshot to the domain does not fetch this one again.
    fcfg, fdomain = cfg.for_snapshot(domain.name, snapshot)
    raws = step(fetch_task, "fetch")(fcfg, fdomain, snapshot, source_digest, code)
    data_dir = str(cfg.build.data_dir)
    mirror = str(cfg.source.mirror) if cfg.source.mode == "mirror" and cfg.source.mirror else None
    parts: list[Grounded] = []
    for raw in raws:
        # Which source of the snapshot a step converts, when it has several (the papers of a window).
        part = kind.part(raw) if len(raws) > 1 else ""
        src, earlier = RawSource(raw, data_dir, mirror), ()
        for name in kind.ground_steps:
            t = ground_step_task.with_options(name=name)
            earlier = (*earlier, step(t, name, part)(domain.kind, name, src, fdomain, earlier, code))
        parts.append(earlier[-1])
    grounded = merge_grounded(parts)
    out = write_grounding(grounded, Path(cfg.build.data_dir) / "grounding" / domain.name / snapshot)
    docs = grounded.documents
    return SnapshotGrounding(
        snapshot=snapshot,
        sources=len(raws),
        documents=len(docs),
        tables=sum(d.tables for d in docs),
        images=sum(d.images for d in docs),
        tokens=sum(d.tokens for d in docs),
        path=str(out),
        digest=grounding_digest(grounded),
        raw=tuple(raws),
        date=domain.snapshot_date(snapshot),
    )


def grounding_digest(grounded: Grounded) -> str:
    """Content digest of a grounding set: what downstream cache keys depend on (not its path)."""
    h = hashlib.sha256()
    for d in grounded.documents:
        h.update(d.model_dump_json().encode())
        h.update(grounded.markdown[d.file].encode())
    return h.hexdigest()


@flow(name="ground", flow_run_name="ground {domain_name}", log_prints=True)
def ground_domain(cfg: FrameConfig, domain_name: str) -> DomainOutcome:
    """Ground every snapshot of one domain into data/grounding/<domain>/<snapshot>/."""
    log = get_run_logger()
    domain = cfg.domain(domain_name)
    code = code_version("tasks", "schemas")
    digest = mirror_digest(cfg)
    rows = []
    for snapshot in domain.snapshots:
        row = ground_snapshot(cfg, domain, snapshot, code, digest)
        log.info("grounded %s %s: %d documents, %d tokens", domain.name, snapshot, row.documents, row.tokens)
        rows.append(row)
    return DomainOutcome(domain.name, domain.category, domain.kind, "ok", tuple(rows))


def run_domains(cfg: FrameConfig, names: list[str], on_done=None) -> list[DomainOutcome]:
    """Run the ground flow per domain; a failing domain is reported, the others still complete."""
    summary = []
    for name in names:
        domain = cfg.domain(name)
        state = ground_domain(cfg, name, return_state=True)
        if state.is_completed():
            summary.append(state.result())
        else:
            exc = state.result(raise_on_failure=False)
            msg = str(exc) if isinstance(exc, Exception) else str(state.message)
            summary.append(
                DomainOutcome(
                    name,
                    domain.category,
                    domain.kind,
                    "failed",
                    error=msg.splitlines()[0] if msg else "failed",
                    input_error=isinstance(exc, FrameInputError),
                )
            )
        if on_done is not None:
            on_done(summary[-1])
    return summary
