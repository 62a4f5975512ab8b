"""Generate one report per instance of a release with a named system (offline baselines or an LLM).

Systems: `copy-sample` and `extractive` (offline baselines, `tasks.generate.baselines`) and `one-shot`
(an OpenAI-compatible model prompted with (S, G), `tasks.generate.llm`; needs an endpoint). Reports go
to data/generations/<release name>/<version>/<system>/: one Markdown file per instance under `reports/`
plus `generations.parquet` (instance_id, system, markdown, metadata_json), each written atomically.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from schemas.config import LLMSettings
from tasks.atomic import atomic_write_bytes, atomic_write_text
from tasks.errors import FrameInputError

LLM_SYSTEMS = ("one-shot",)
ROOT = Path(__file__).resolve().parents[1]
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
        pa.field("markdown", pa.string(), nullable=False),
        pa.field("metadata_json", pa.string()),  # provenance of LLM systems ({} for baselines)
    ]
)


def digest_paths(patterns: tuple[str, ...]) -> str:
    """sha256 (16 hex) over the files matching the globs, by relative path and content."""
    import hashlib

    h = hashlib.sha256()
    files = sorted({p for pat in patterns for p in ROOT.glob(pat) if p.is_file()})
    for p in files:
        h.update(p.relative_to(ROOT).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def known_systems() -> list[str]:
    from tasks.generate.baselines import GENERATORS

    return sorted([*GENERATORS, *LLM_SYSTEMS])


def runs_folder(release: Path, system: str) -> Path:
    """data/releases/<name>/<version> -> data/generations/<name>/<version>/<system>."""
    release = release.resolve()
    return release.parents[2] / "generations" / release.parent.name / release.name / system


def _safe(instance_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", instance_id.replace("->", "__"))


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


def check_system(system: str, llm: LLMSettings | None) -> None:
    if system not in known_systems():
        raise FrameInputError("--system", f"unknown system {system!r} (one of {', '.join(known_systems())})")
    if system in LLM_SYSTEMS and (llm is None or llm.backend != "openai" or not llm.base_url):
        raise FrameInputError(
            "--system",
            f"{system} needs an OpenAI-compatible endpoint: set FRAME_LLM_BACKEND=openai and "
            "FRAME_LLM_BASE_URL (and the key in the env var named by llm.api_key_env), or [llm] in --config",
        )


def generate_reports(
    release: Path,
    system: str,
    *,
    llm: LLMSettings | None = None,
    cache_dir: Path | None = None,
    on_done: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """One row {instance_id, system, markdown, metadata_json} per instance (nothing written)."""
    check_system(system, llm)
    instances, by_set = load_release_inputs(release)
    rows = []
    for inst in instances.to_dict("records"):
        grounding = by_set.get(str(inst["grounding_set_id"]), [])
        if system in LLM_SYSTEMS:
            from tasks.generate.llm import one_shot

            assert llm is not None and cache_dir is not None
            md, meta = one_shot(inst, grounding, llm, cache_dir)
        else:
            from tasks.generate.baselines import generate_report

            md, meta = generate_report(system, inst, grounding), {}
        rows.append(
            {
                "instance_id": inst["instance_id"],
                "system": system,
                "markdown": md,
                "metadata_json": json.dumps(meta, sort_keys=True, default=str),
            }
        )
        if on_done is not None:
            on_done(inst["instance_id"])
    return rows


def write_generations(release: Path, system: str, rows: list[dict[str, Any]]) -> Path:
    """Write the rows as reports/*.md + generations.parquet (atomic per file); returns the folder."""
    out = runs_folder(release, system)
    for r in rows:
        atomic_write_text(out / "reports" / f"{_safe(r['instance_id'])}.md", r["markdown"])
    table = pa.Table.from_pylist(rows, schema=GENERATIONS_SCHEMA)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    atomic_write_bytes(out / "generations.parquet", sink.getvalue().to_pybytes())
    return out


def generate_all(
    release: Path,
    system: str,
    on_done: Callable[[str], None] | None = None,
    *,
    llm: LLMSettings | None = None,
    cache_dir: Path | None = None,
) -> Path:
    rows = generate_reports(release, system, llm=llm, cache_dir=cache_dir, on_done=on_done)
    return write_generations(release, system, rows)
