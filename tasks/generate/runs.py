"""Where a system's reports live and how they are read and written: the release inputs a system sees,
`generations/<release>/<version>/<system>/` (reports/*.md + generations.parquet), the code digest that
keys generation caches."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tasks.atomic import atomic_write_bytes, atomic_write_text
from tasks.errors import FrameInputError
from tasks.generate.systems import Generation
from tasks.release.evalkit import report_file_name
from tasks.release.place import release_data_folder

__all__ = [
    "GENERATIONS_SCHEMA",
    "GENERATION_CODE",
    "digest_paths",
    "instance_digest",
    "load_release_inputs",
    "runs_folder",
    "write_generations",
]

ROOT = Path(__file__).resolve().parents[2]
# What generated reports depend on (globs under the repo root): a change here invalidates them.
GENERATION_CODE = (
    "tasks/generate/*.py",
    "tasks/synthesize/retrieve.py",
    "tasks/llm/*.py",
    "tasks/markdown/*.py",  # the generators read S and G through the Markdown model
    "tasks/ground/load.py",
    "tasks/tokens.py",
    "prompts/generate_*.md",
)
GENERATIONS_SCHEMA = pa.schema(
    [
        pa.field("instance_id", pa.string(), nullable=False),
        pa.field("system", pa.string(), nullable=False),
        pa.field("markdown", pa.string(), nullable=False),  # "" when the generation failed
        pa.field("metadata_json", pa.string()),  # provenance (model, prompt, tokens; {} for baselines)
        pa.field("error", pa.string()),  # why the generation failed (null when it did not)
        pa.field("epoch", pa.int32()),  # which sample (`--epochs`): 0 for the first or only one
    ]
)


def digest_paths(patterns: Iterable[str]) -> str:
    """sha256 (16 hex) over the files matching the globs, by relative path and content."""
    h = hashlib.sha256()
    files = sorted({p for pat in patterns for p in ROOT.glob(pat) if p.is_file()})
    for p in files:
        h.update(p.relative_to(ROOT).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def runs_folder(release: Path, system: str) -> Path:
    """data/releases/<name>/<version> -> data/generations/<name>/<version>/<system> (the data folder of
    tasks.release.place.release_data_folder)."""
    release = release.resolve()
    return release_data_folder(release) / "generations" / release.parent.name / release.name / system


def load_release_inputs(release: Path) -> tuple[pd.DataFrame, dict[str, list[dict]]]:
    """(instances sorted by id, grounding rows per grounding_set_id) of a release folder."""
    inst_path, docs_path = release / "instances.parquet", release / "grounding_documents.parquet"
    for p in (inst_path, docs_path):
        if not p.is_file():
            raise FrameInputError(p, "missing: not a frame release folder")
    instances = pd.read_parquet(inst_path).sort_values("instance_id").reset_index(drop=True)
    docs = pd.read_parquet(docs_path)
    by_set = {str(k): g.to_dict("records") for k, g in docs.groupby("grounding_set_id")}
    return instances, by_set


def instance_digest(instance: dict, grounding: list[dict]) -> str:
    """sha256 of what a system sees of one instance (S, G and the metadata; never Y)."""
    seen = {k: v for k, v in instance.items() if k not in ("target_markdown", "target_report_id")}
    docs = [(str(d["doc_id"]), str(d.get("title") or ""), str(d.get("markdown") or "")) for d in grounding]
    blob = json.dumps([seen, docs], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def write_generations(
    release: Path, system: str, generations: list[Generation], *, keep_others: bool = False
) -> Path:
    """Write reports/*.md (successful ones; sample k > 0 of `--epochs` in reports/epoch-k/) +
    generations.parquet (all, failures with their error), each file atomically; returns the folder.
    `keep_others` (a --limit / --instances run): the table keeps its rows of the instances this run did
    not generate, so a smoke run never truncates what a full run wrote (its reports/*.md stay too)."""
    out = runs_folder(release, system)
    rows = (
        _other_rows(out / "generations.parquet", {g.instance_id for g in generations}) if keep_others else []
    )
    for g in sorted(generations, key=lambda g: (g.instance_id, g.epoch)):
        if g.markdown is not None:
            folder = out / "reports" / (f"epoch-{g.epoch}" if g.epoch else "")
            atomic_write_text(folder / f"{report_file_name(g.instance_id)}.md", g.markdown)
        rows.append(
            {
                "instance_id": g.instance_id,
                "system": system,
                "markdown": g.markdown or "",
                "metadata_json": json.dumps(g.metadata, sort_keys=True, default=str),
                "error": g.error,
                "epoch": g.epoch,
            }
        )
    rows.sort(key=lambda r: (r["instance_id"], r["epoch"]))
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows, schema=GENERATIONS_SCHEMA), sink)
    atomic_write_bytes(out / "generations.parquet", sink.getvalue().to_pybytes())
    return out


def _other_rows(path: Path, done: set[str]) -> list[dict]:
    """The rows of an earlier generations.parquet for instances not in `done` (none when it is absent or
    not a generations table: this run's rows then stand alone)."""
    try:
        table = pq.read_table(path, schema=GENERATIONS_SCHEMA)
    except (OSError, ValueError, pa.ArrowException):
        return []
    return [r for r in table.to_pylist() if r["instance_id"] not in done]
