"""Read a release's tables in the current schema, whatever schema version the release was written in.

A release of schema version 1 (JSON text for nested values, text for dates) is upgraded row by row with
`schemas.release_rows.upgrade_row`, so readers (diff, the evaluation kit, scoring) see one shape. Row
readers below tasks.release (synthesis, grounding) use `schemas.release_rows` directly.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from schemas.release import RELEASE_SCHEMA_VERSION, SCHEMAS_BY_VERSION, TABLE_SCHEMAS
from schemas.release_rows import upgrade_row
from tasks.errors import FrameInputError

__all__ = ["read_release_table", "release_schema_version", "upgrade_table"]


def release_schema_version(folder: str | Path) -> int:
    """The table schema version of a release folder (manifest.json; 1 when it records none)."""
    path = Path(folder) / "manifest.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise FrameInputError(path, f"cannot read ({type(e).__name__})") from e
    version = data.get("schema_version", 1) if isinstance(data, dict) else None
    if not isinstance(version, int) or version not in SCHEMAS_BY_VERSION:
        raise FrameInputError(
            path,
            f"schema_version {version!r} is not one this frame reads "
            f"({', '.join(map(str, sorted(SCHEMAS_BY_VERSION)))}): update frame",
        )
    return version


def upgrade_table(name: str, table: pa.Table, version: int) -> pa.Table:
    """`table` (release table `name`, schema `version`) in the current schema; unchanged if current."""
    if version == RELEASE_SCHEMA_VERSION or name not in TABLE_SCHEMAS:
        return table
    rows = [upgrade_row(name, r, version) for r in table.to_pylist()]
    schema = TABLE_SCHEMAS[name]
    return pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in rows], schema=schema)


def read_release_table(folder: str | Path, name: str, version: int | None = None) -> pa.Table:
    """Release table `name` of `folder` (its `<name>.parquet`) in the current schema."""
    folder = Path(folder)
    version = release_schema_version(folder) if version is None else version
    path = folder / f"{name}.parquet"
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as e:
        raise FrameInputError(path, f"cannot read parquet ({type(e).__name__})") from e
    return upgrade_table(name, table, version)
