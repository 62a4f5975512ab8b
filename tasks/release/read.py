"""Read a release's tables in the current schema, whatever schema version the release was written in.

A release of schema version 1 (JSON text for nested values, text for dates) is upgraded row by row with
`schemas.release_rows.upgrade_row`, so readers (diff, the evaluation kit, scoring) see one shape. Row
readers below tasks.release (synthesis, grounding) use `schemas.release_rows` directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from schemas.release import RELEASE_SCHEMA_VERSION, SCHEMAS_BY_VERSION, TABLE_SCHEMAS
from schemas.release_rows import upgrade_row
from tasks.errors import FrameInputError
from tasks.release import members

__all__ = ["read_release_table", "release_schema_version", "upgrade_table"]


def release_schema_version(folder: str | Path) -> int:
    """The table schema version of a release folder (manifest.json; 1 when it records none). The
    manifest is read as every release member is (tasks.release.members: a regular file inside the
    folder, at most members.MAX_MANIFEST_BYTES)."""
    path = Path(folder) / members.MANIFEST
    data = members.read_json(folder, members.MANIFEST)
    version = data.get("schema_version", 1) if isinstance(data, dict) else None
    if not isinstance(version, int) or version not in SCHEMAS_BY_VERSION:
        raise FrameInputError(
            path,
            f"schema_version {members.shown(repr(version), 60)} is not one this frame reads "
            f"({', '.join(map(str, sorted(SCHEMAS_BY_VERSION)))}): update frame",
        )
    return version


def upgrade_table(name: str, table: pa.Table, version: int) -> pa.Table:
    """`table` (release table `name`, schema `version`) in the current schema; unchanged if current."""
    if version == RELEASE_SCHEMA_VERSION or name not in TABLE_SCHEMAS:
        return table
    if SCHEMAS_BY_VERSION[version].get(name) == TABLE_SCHEMAS[name]:  # this table did not change
        return table
    rows = [upgrade_row(name, r, version) for r in table.to_pylist()]
    schema = TABLE_SCHEMAS[name]
    return pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in rows], schema=schema)


def read_release_table(
    folder: str | Path, name: str, version: int | None = None, required: Sequence[str] = ()
) -> pa.Table:
    """Release table `name` of `folder` (its `<name>.parquet`) in the current schema: a regular file
    inside the folder holding the `required` columns, decoded within its budget (tasks.release.members);
    FrameInputError naming the file otherwise."""
    folder = Path(folder)
    version = release_schema_version(folder) if version is None else version
    table = members.read_table(folder, name, required=list(required))
    try:
        return upgrade_table(name, table, version)
    except (KeyError, TypeError, ValueError, RecursionError, pa.ArrowException) as e:
        raise FrameInputError(
            folder / f"{name}.parquet",
            f"not a {name} table of schema version {version} ({type(e).__name__}: {members.shown(e, 200)})",
        ) from None
