"""Generate one report per instance of a release with a named system (baselines or an LLM)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tasks.atomic import atomic_write_text
from tasks.errors import FrameInputError

GENERATIONS_SCHEMA = pa.schema(
    [
        pa.field("instance_id", pa.string(), nullable=False),
        pa.field("system", pa.string(), nullable=False),
        pa.field("markdown", pa.string(), nullable=False),
    ]
)


def runs_folder(release: Path, system: str) -> Path:
    """data/releases/<name>/<version> -> data/generations/<name>/<version>/<system>."""
    release = release.resolve()
    return release.parents[2] / "generations" / release.parent.name / release.name / system


def _safe(instance_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", instance_id.replace("->", "__"))


def generate_all(release: Path, system: str, on_done=None) -> Path:
    from tasks.generate.baselines import GENERATORS, generate_report

    if system not in GENERATORS:
        raise FrameInputError(
            "--system", f"unknown system {system!r} (one of {', '.join(sorted(GENERATORS))})"
        )
    inst_path, docs_path = release / "instances.parquet", release / "grounding_documents.parquet"
    for p in (inst_path, docs_path):
        if not p.is_file():
            raise FrameInputError(p, "missing: not a frame release folder")
    instances = pd.read_parquet(inst_path).sort_values("instance_id")
    docs = pd.read_parquet(docs_path)
    by_set = {k: g.to_dict("records") for k, g in docs.groupby("grounding_set_id")}
    out = runs_folder(release, system)
    rows = []
    for inst in instances.to_dict("records"):
        md = generate_report(system, inst, by_set[inst["grounding_set_id"]])
        atomic_write_text(out / "reports" / f"{_safe(inst['instance_id'])}.md", md)
        rows.append({"instance_id": inst["instance_id"], "system": system, "markdown": md})
        if on_done is not None:
            on_done(inst["instance_id"])
    table = pa.Table.from_pylist(rows, schema=GENERATIONS_SCHEMA)
    tmp = out / ".generations.parquet.tmp"
    pq.write_table(table, tmp)
    tmp.replace(out / "generations.parquet")
    return out
