"""Assemble a release from a build's results: parquet tables, manifest, dataset card (SPEC §6).

Its inputs are the data folder's grounding and gold report folders: each must match its MANIFEST.json
(else FrameInputError), and the release records their manifest digests in inputs.json."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from flows.build import config_digest, report_row
from flows.ground import ROOT, code_version
from schemas.config import FrameConfig
from schemas.domains import DomainBase
from schemas.release import SNAPSHOT_DATES
from schemas.release_rows import fact_columns, metadata_columns, structure_columns
from tasks.errors import ConfigError, FrameInputError
from tasks.ground.load import load_grounding_set
from tasks.instances import category_stats, make_instances
from tasks.manifest import check_folder, describe, manifest_digest, read_manifest
from tasks.release.card import render_card
from tasks.release.verify import INPUTS_FILE, inputs_json
from tasks.release.write import write_release
from tasks.sources import periods_skipped
from tasks.synthesize.outcome import DomainOutcome


def prompt_hashes() -> dict[str, str]:
    """sha256 of the prompts that write gold reports; report generators' and judges' prompts
    (generate_*, score_*, evolve_*) do not shape a release, so editing them leaves its identity alone."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted((ROOT / "prompts").glob("*.md"))
        if not p.name.startswith(("generate_", "score_", "evolve_"))
    }


def created_at() -> str:
    # Reproducible builds set SOURCE_DATE_EPOCH; otherwise the release records when it was made.
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = dt.datetime.fromtimestamp(int(epoch), dt.UTC) if epoch else dt.datetime.now(dt.UTC)
    return when.replace(microsecond=0).isoformat().replace("+00:00", "Z")


def checked_inputs(data_dir: Path, domain: str, snapshot: str) -> dict[str, str]:
    """{"grounding/<domain>/<snapshot>": manifest digest, "reports/...": ...} of one snapshot's input
    folders; FrameInputError when one has no manifest or no longer matches it (rebuild to redo it)."""
    data = Path(data_dir)
    out = {}
    for top in ("grounding", "reports"):
        key = f"{top}/{domain}/{snapshot}"
        problems = check_folder(data / key)
        if problems:
            raise FrameInputError(f"{data.name}/{key}", f"{describe(problems)}; rebuild to recompute it")
        out[key] = manifest_digest(read_manifest(data / key))
    return out


def release_tables(
    results: list[DomainOutcome], data_dir: Path, domains: Mapping[str, DomainBase]
) -> tuple[dict[str, list[dict]], list[dict], dict[str, str]]:
    """The release's tables (rows of the current schemas.release schemas; the writer fills the snapshot
    date columns), its source files and the manifest digest of every input folder. `domains` (the
    built config's, by name) say how many source periods each instance's pair skips."""
    tables: dict[str, list[dict]] = {
        k: [] for k in ("instances", "grounding_documents", "reports", "structures", "facts")
    }
    sources: dict[str, str] = {}
    inputs: dict[str, str] = {}
    for dom in results:
        if not dom.ok:
            continue
        reports, grounding = {}, {}
        for snap in dom.snapshots:
            t = snap.snapshot
            # checked before anything is read: the release holds what the manifests vouch for
            inputs.update(checked_inputs(data_dir, dom.domain, t))
            gpath = Path(data_dir) / "grounding" / dom.domain / t
            row = report_row(dom, snap)
            reports[t] = row
            tables["reports"].append(row)
            structure = snap.structure
            tables["structures"].append(
                {
                    "report_id": row["report_id"],
                    "domain": dom.domain,
                    "snapshot": t,
                    "form_restricted": structure.form_restricted,
                    "backend": row["backend"],
                    "model": row["model"],
                    **structure_columns(structure),
                }
            )
            gset = load_grounding_set(gpath, with_facts=False)
            grounding[t] = [d.doc_id for d in gset.documents]
            for d in gset.documents:
                tables["grounding_documents"].append(
                    {
                        "grounding_set_id": f"{dom.domain}/{t}",
                        "domain": dom.domain,
                        "snapshot": t,
                        "doc_id": d.doc_id,
                        "title": d.title,
                        "kind": d.kind,
                        "tokens": d.tokens,
                        "tables": d.tables,
                        "images": d.images,
                        "source_sha256": d.source_sha256,
                        "source_kind": d.source_kind,
                        "markdown": gset.texts[d.doc_id],
                        **metadata_columns(d.metadata),
                    }
                )
            if (gpath / "facts.parquet").is_file():  # filings only; its manifest says whether it belongs
                for f in pq.read_table(gpath / "facts.parquet").to_pylist():
                    tables["facts"].append({"domain": dom.domain, "snapshot": t, **fact_columns(f)})
            for raw in snap.ground.raw:
                # portable: a URL, or the path relative to the mirror folder (never a machine path)
                sources[raw.location] = raw.sha256
        domain = domains[dom.domain]
        tables["instances"] += make_instances(
            dom.category,
            dom.domain,
            dom.snapshot_names,
            reports,
            grounding,
            lambda t, t_next, d=domain: periods_skipped(d, t, t_next),
        )
    _date_columns(
        tables, {(d.domain, s.snapshot): s.ground.date for d in results if d.ok for s in d.snapshots}
    )
    source_list = [{"path_or_url": k, "sha256": v} for k, v in sorted(sources.items())]
    return tables, source_list, inputs


def _date_columns(tables: dict[str, list[dict]], dates: dict[tuple[str, str], Any]) -> None:
    """Each row's snapshot date columns from the typed snapshots of the config (never parsed back from
    the labels; the writer checks the two agree)."""
    for name, columns in SNAPSHOT_DATES.items():
        for row in tables.get(name, []):
            for date_col, snap_col in columns.items():
                row[date_col] = dates[(row["domain"], row[snap_col])]


def publish(
    cfg: FrameConfig,
    results: list[DomainOutcome],
    name: str,
    version: str,
    previous: Path | None = None,
    *,
    allow_identical: bool = False,
    allow_failed_gold: bool = False,
) -> tuple[Path, list[dict]]:
    """Write release `name` `version`; with `previous` (a release folder) its card gets a "Changes"
    section: `frame release diff previous new`. FrameInputError (IdenticalReleaseError) when its tables
    equal the previous version's, unless `allow_identical`; FrameInputError naming the first gold report
    that fails frame's own gates (tasks/score/gold_check.py) before anything is written, unless
    `allow_failed_gold` (the card's known limits then list the failures)."""
    tables, sources, inputs = release_tables(
        results, Path(cfg.build.data_dir), {d.name: d for d in cfg.domains}
    )
    gold_limits = _gold_gate(tables["reports"], allow_failed_gold)
    reports = {r["report_id"]: r for r in tables["reports"]}
    gsets: dict[str, list[dict]] = {}
    for d in tables["grounding_documents"]:
        gsets.setdefault(d["grounding_set_id"], []).append(d)
    stats = category_stats(tables["instances"], reports, gsets)
    tables["stats"] = stats
    backends = sorted({(r["backend"], r["model"]) for r in tables["reports"]})
    manifest = {
        "name": name,
        "version": version,
        "created_at": created_at(),
        "config_sha256": config_digest(cfg),
        "code_version": code_version("tasks", "schemas", "prompts"),
        "prompt_hashes": prompt_hashes(),
        "backends": [{"backend": b, "model": m} for b, m in backends],
        "sources": sources,
    }
    notes = {"limits": _limits(backends, tables["instances"]) + gold_limits}
    instances = tables["instances"]

    def card(m, staged: Path) -> str:
        if previous is None:
            return render_card(m, stats, notes, instances=instances)
        from tasks.release.diff import diff_releases, format_diff_markdown

        changes = format_diff_markdown(diff_releases(previous, staged, b_manifest=m))
        return render_card(m, stats, {**notes, "changes": changes}, instances=instances)

    extra = {INPUTS_FILE: inputs_json(inputs)}  # its sha256 is in manifest.json: `verify --deep` reads it
    path = write_release(
        Path(cfg.build.data_dir) / "releases",
        name,
        version,
        tables,
        manifest,
        card,
        extra_files=extra,
        allow_identical=allow_identical,
    )
    return path, stats


def _gold_gate(reports: list[dict], allow: bool) -> list[str]:
    """Frame's own gates over the gold reports: a failure stops the release (one line naming the report
    and item) unless `allow`; then the card's known-limits lines that say which gold fails."""
    from tasks.score.gold_check import gold_failures

    failed = gold_failures(reports)
    if not failed:
        return []
    first = failed[0]
    if not allow:
        raise FrameInputError(
            f"gold {first.report_id}",
            f"fails {first.item} ({first.where}: {first.rationale}); {len(failed)} failure(s) in "
            f"{len({f.report_id for f in failed})} report(s): the release is not written "
            "(`frame qa gold` lists them; --allow-failed-gold publishes anyway)",
        )
    items = sorted({f"{f.report_id} ({f.item})" for f in failed})
    return [
        "Published with --allow-failed-gold: these gold reports fail frame's own gates or repetition "
        f"item (tasks/score/gold_check.py; `frame qa gold` shows the evidence): {', '.join(items)}."
    ]


def _limits(backends: list[tuple[str, str]], instances: list[dict]) -> list[str]:
    skipped, total = sum(1 for r in instances if r["periods_skipped"] > 0), len(instances)
    limits = []
    if any(b == "offline" for b, _ in backends):
        limits.append(
            "Gold reports were written by the offline backend: extractive baselines assembled from "
            "retrieved grounding passages, not LLM-written reports. Build with an LLM endpoint "
            '([llm] backend = "openai") for benchmark-grade gold reports.'
        )
    if skipped:
        limits.append(
            f"{skipped} of {total} instances pair snapshots with periods missing between them (the corpus "
            "has no edition there): they are marked with `periods_skipped` > 0 and left out of the "
            "leaderboard's headline scopes."
        )
    return limits


def build_and_publish(
    cfg: FrameConfig,
    names: list[str],
    release: str,
    version: str,
    *,
    allow_partial: bool = False,
    refresh: list[str] | None = None,
    runner=None,
    previous: Path | None = None,
    allow_identical: bool = False,
    allow_failed_gold: bool = False,
) -> dict:
    """Build `names` and write the release, holding the data folder's build lock throughout.

    `runner(cfg, names, refresh) -> results` runs the build flow (default `flows.build.run_build`;
    the CLI passes one that shows a progress bar). Returns {"results", "failed", "path", "stats"};
    "path" is None when a domain failed and `allow_partial` is off (no release is written then).
    A version whose tables equal the previous version's raises IdenticalReleaseError (a FrameInputError:
    one line, exit 2) unless `allow_identical`.
    """
    from flows.build import run_build
    from schemas.release import release_id_problems
    from tasks.locks import data_folder_lock

    for where, problem in release_id_problems(release, version):  # before the build, not after it
        raise ConfigError(where, problem)
    with data_folder_lock(cfg.build.data_dir, cfg.run.lock_timeout_s):
        results = (runner or run_build)(cfg, names, refresh or [], release=release, version=version)
        failed = [r for r in results if not r.ok]
        if failed and not allow_partial:
            return {"results": results, "failed": failed, "path": None, "stats": []}
        path, stats = publish(
            cfg,
            results,
            release,
            version,
            previous=previous,
            allow_identical=allow_identical,
            allow_failed_gold=allow_failed_gold,
        )
    return {"results": results, "failed": failed, "path": path, "stats": stats}
