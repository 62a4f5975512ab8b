"""The `ground` flow: fetch -> clean -> split -> convert for every snapshot of one domain.

Each step is a Prefect task cached on its inputs + its own source + `code_version` (a digest of
the grounding code the task calls), with results persisted under the data folder, so a rerun
recomputes only what changed and a failed step resumes where it stopped.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

from prefect import flow, get_run_logger, task

from flows.caching import STABLE
from flows.steps import run_name
from schemas.config import ArxivDomain, EdgarDomain, FrameConfig
from schemas.sources import RawFile
from tasks.errors import FrameInputError
from tasks.fetch import fetch_snapshot, read_raw
from tasks.ground.documents import Grounded, ground_filing, ground_source, merge_grounded, write_grounding
from tasks.ground.ixbrl import CleanFiling, clean_filing
from tasks.ground.split import FilingSection, split_filing

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
    cfg: FrameConfig, domain: EdgarDomain | ArxivDomain, snapshot: str, source_digest: str, code: str
) -> list[RawFile]:
    raws = fetch_snapshot(cfg, domain, snapshot)
    get_run_logger().info("fetched %d raw file(s) for %s %s", len(raws), domain.name, snapshot)
    return raws


# `data_dir` / `mirror` say where the raw bytes are: a RawFile names its blob and mirror file portably,
# relative to them.
@task(name="clean", cache_policy=CACHE, persist_result=True)
def clean_task(raw: RawFile, data_dir: str, mirror: str | None, code: str) -> CleanFiling:
    return clean_filing(read_raw(raw, data_dir, mirror), raw.location)


@task(name="split", cache_policy=CACHE, persist_result=True)
def split_task(clean: CleanFiling, code: str) -> list[dict]:
    return [
        {
            "doc_id": s.doc_id,
            "title": s.title,
            "section_type": s.section_type,
            "part": s.part,
            "item": s.item,
            "html": s.to_html(),
            "span": s.span,
            "covers": s.covers,
        }
        for s in split_filing(clean)
    ]


@task(name="convert", cache_policy=CACHE, persist_result=True)
def convert_filing_task(
    raw: RawFile, clean: CleanFiling, sections: list[dict], form: str, code: str
) -> Grounded:
    secs = [
        FilingSection.from_html(
            s["doc_id"],
            s["title"],
            s["section_type"],
            s["part"],
            s["item"],
            s["html"],
            s.get("span"),
            s.get("covers"),
        )
        for s in sections
    ]
    meta = {"accession": raw.accession, "ticker": raw.ticker} if raw.accession else {"ticker": raw.ticker}
    return ground_filing(clean, raw.sha256, raw.location, form, meta, sections=secs)


@task(name="convert-paper", cache_policy=CACHE, persist_result=True)
def convert_paper_task(raw: RawFile, data_dir: str, mirror: str | None, code: str) -> Grounded:
    meta = {
        "arxiv_id": raw.arxiv_id,
        "title": raw.title,
        "first_version_date": raw.first_version_date,
        "license": raw.license,
    }
    # raw.location (a URL or the mirror-relative path) is the document's portable `Source`
    return ground_source(read_raw(raw, data_dir, mirror), raw.location, kind="arxiv", meta=meta)


def ground_snapshot(
    cfg: FrameConfig,
    domain: EdgarDomain | ArxivDomain,
    snapshot: str,
    code: str,
    source_digest: str,
    refresh: list[str] | tuple[str, ...] = (),
    recorder=None,
) -> dict:
    """fetch -> clean -> split -> convert for one snapshot; writes data/grounding/<domain>/<snapshot>/.

    `refresh` names steps to recompute even when cached (`frame rerun`); `recorder` (a
    `flows.observe.StepRecorder`) logs each step's time, cache hit and cost."""

    def step(t, name: str, part: str = ""):
        t = t.with_options(refresh_cache=True) if name in refresh else t
        if recorder is None:
            return t.with_options(task_run_name=run_name(name, domain.name, snapshot, part))
        return lambda *args: recorder.call(t, name, snapshot, *args, part=part)

    # Keyed on this snapshot alone: adding a later snapshot to the domain does not fetch this one again.
    fcfg, fdomain = cfg.for_snapshot(domain.name, snapshot)
    raws = step(fetch_task, "fetch")(fcfg, fdomain, snapshot, source_digest, code)
    data_dir = str(cfg.build.data_dir)
    mirror = str(cfg.source.mirror) if cfg.source.mode == "mirror" and cfg.source.mirror else None
    parts: list[Grounded] = []
    for raw in raws:
        # Which source of the snapshot a step converts, when it has several (the papers of a window).
        part = (raw.arxiv_id or raw.accession or raw.sha256[:12]) if len(raws) > 1 else ""
        if isinstance(domain, EdgarDomain):
            clean = step(clean_task, "clean", part)(raw, data_dir, mirror, code)
            sections = step(split_task, "split", part)(clean, code)
            parts.append(step(convert_filing_task, "convert", part)(raw, clean, sections, domain.form, code))
        else:
            parts.append(step(convert_paper_task, "convert", part)(raw, data_dir, mirror, code))
    grounded = merge_grounded(parts)
    out = write_grounding(grounded, Path(cfg.build.data_dir) / "grounding" / domain.name / snapshot)
    docs = grounded.documents
    return {
        "snapshot": snapshot,
        "sources": len(raws),
        "documents": len(docs),
        "tables": sum(d.tables for d in docs),
        "images": sum(d.images for d in docs),
        "tokens": sum(d.tokens for d in docs),
        "path": str(out),
        "digest": grounding_digest(grounded),
        "raw": [r.model_dump(mode="json") for r in raws],
    }


def grounding_digest(grounded: Grounded) -> str:
    """Content digest of a grounding set: what downstream cache keys depend on (not its path)."""
    h = hashlib.sha256()
    for d in grounded.documents:
        h.update(d.model_dump_json().encode())
        h.update(grounded.markdown[d.file].encode())
    return h.hexdigest()


@flow(name="ground", flow_run_name="ground {domain_name}", log_prints=True)
def ground_domain(cfg: FrameConfig, domain_name: str) -> dict:
    """Ground every snapshot of one domain into data/grounding/<domain>/<snapshot>/."""
    log = get_run_logger()
    domain = cfg.domain(domain_name)
    code = code_version("tasks", "schemas")
    digest = mirror_digest(cfg)
    rows = []
    for snapshot in domain.snapshots:
        row = ground_snapshot(cfg, domain, snapshot, code, digest)
        log.info(
            "grounded %s %s: %d documents, %d tokens", domain.name, snapshot, row["documents"], row["tokens"]
        )
        rows.append(row)
    return {"domain": domain.name, "category": domain.category, "status": "ok", "snapshots": rows}


def run_domains(cfg: FrameConfig, names: list[str], on_done=None) -> list[dict]:
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
                {
                    "domain": name,
                    "category": domain.category,
                    "status": "failed",
                    "input_error": isinstance(exc, FrameInputError),
                    "error": msg.splitlines()[0] if msg else "failed",
                    "snapshots": [],
                }
            )
        if on_done is not None:
            on_done(summary[-1])
    return summary
