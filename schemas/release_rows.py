"""Release rows to and from Python objects, for both table schema versions (`schemas/release.py`).

Writers turn what the build made into rows of the current schema (`structure_columns`,
`metadata_columns`, `fact_columns`, `unsupported_list`); readers get the objects back from a row of
either schema (`structure_from_row`, `document_metadata`). Rows may come from pyarrow (`to_pylist`) or
pandas (`to_dict("records")`, where lists inside structs are numpy arrays). `upgrade_row` turns a row of
schema version 1 into one of the current version (`tasks/release/read.py` applies it to whole tables).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import date
from typing import Any

import pyarrow as pa

from schemas.release import DOCUMENT_METADATA, RELEASE_SCHEMA_VERSION, SNAPSHOT_DATES, snapshot_date
from schemas.structure import ReportStructure

_DATE_PREFIX = re.compile(r"^(\d{4}-\d{2}-\d{2})")
_INT = re.compile(r"^[+-]?\d+$")


def _plain(v: Any) -> Any:
    """numpy arrays (pandas' lists) and tuples as lists, recursively; everything else as is."""
    if hasattr(v, "tolist") and not isinstance(v, str | bytes):
        v = v.tolist()
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    if isinstance(v, Mapping):
        return {k: _plain(x) for k, x in v.items()}
    return v


# ---------------------------------------------------------------- structures


def structure_columns(structure: ReportStructure) -> dict[str, Any]:
    """The columns title, nodes (the tree in pre-order, parent_id/depth to rebuild it), provenance and
    prompt_hashes of a structures row."""
    nodes: list[dict[str, Any]] = []

    def walk(node, parent: str | None, depth: int) -> None:
        nodes.append(
            {
                "id": node.id,
                "parent_id": parent,
                "depth": depth,
                "type": node.type,
                "title": node.title,
                "objective": node.objective,
                "questions": list(node.questions),
                "sources": list(node.sources),
            }
        )
        for child in node.children:
            walk(child, node.id, depth + 1)

    for top in structure.nodes:
        walk(top, None, 0)
    hashes = {p.role: p.prompt_sha256 for p in structure.provenance if p.prompt_sha256}
    return {
        "title": structure.title,
        "nodes": nodes,
        "provenance": [p.model_dump() for p in structure.provenance],
        "prompt_hashes": [{"role": r, "prompt_sha256": h} for r, h in sorted(hashes.items())],
    }


def structure_from_row(row: Mapping[str, Any]) -> ReportStructure:
    """The ReportStructure of a structures row (schema 1: structure_json; schema 2: nodes etc.)."""
    if row.get("structure_json") is not None:
        return ReportStructure.model_validate_json(row["structure_json"])
    nodes = [_plain(n) for n in _plain(row["nodes"]) or []]
    trees: dict[str, dict[str, Any]] = {}
    top: list[dict[str, Any]] = []
    for n in nodes:
        tree = {k: n.get(k) for k in ("id", "type", "title", "objective")}
        tree.update(questions=n.get("questions") or [], sources=n.get("sources") or [], children=[])
        tree["title"], tree["objective"] = tree["title"] or "", tree["objective"] or ""
        trees[n["id"]] = tree
        parent = n.get("parent_id")
        (trees[parent]["children"] if parent is not None else top).append(tree)
    provenance = [
        {k: v for k, v in _plain(p).items() if v is not None} for p in _plain(row.get("provenance")) or []
    ]
    return ReportStructure.model_validate(
        {
            "title": row.get("title") or "",
            "form_restricted": bool(row.get("form_restricted")),
            "nodes": top,
            "provenance": provenance,
        }
    )


def _prompt_hashes_v1(text: str | None) -> list[dict[str, str]]:
    data = json.loads(text) if text else []
    pairs = data.items() if isinstance(data, dict) else [tuple(p) for p in data]
    return [{"role": str(r), "prompt_sha256": str(h)} for r, h in sorted(pairs)]


# ---------------------------------------------------------------- grounding document metadata


def _fits(v: Any, t: pa.DataType) -> bool:
    if v is None:
        return True
    if pa.types.is_string(t):
        return isinstance(v, str)
    if pa.types.is_integer(t):
        return isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v < 2**63
    if pa.types.is_list(t):
        return isinstance(v, list | tuple) and all(x is not None and _fits(x, t.value_type) for x in v)
    return False


def metadata_columns(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A document's metadata dict as the columns metadata (the typed keys of DOCUMENT_METADATA) and
    metadata_extra_json (every other key, or a typed key whose value has another type; None if none)."""
    typed = {f.name: f.type for f in DOCUMENT_METADATA}
    struct: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in sorted(_plain(dict(metadata)).items()):
        if key in typed and _fits(value, typed[key]):
            struct[key] = value
        else:
            extra[key] = value
    text = json.dumps(extra, sort_keys=True, ensure_ascii=False, default=str) if extra else None
    return {"metadata": struct, "metadata_extra_json": text}


def document_metadata(row: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata dict of a grounding_documents row (schema 1: metadata_json; schema 2: metadata and
    metadata_extra_json). Keys whose value is null are left out."""
    if "metadata_json" in row and "metadata" not in row:
        try:
            data = json.loads(row["metadata_json"]) if row["metadata_json"] else {}
        except ValueError:
            data = {}
        return data if isinstance(data, dict) else {}
    struct = _plain(row.get("metadata")) or {}
    out = {k: v for k, v in struct.items() if v is not None}
    extra = row.get("metadata_extra_json")
    if isinstance(extra, str) and extra:
        out.update(json.loads(extra))
    return out


# ---------------------------------------------------------------- reports


def unsupported_list(value: Any) -> list[dict[str, Any]]:
    """The unsupported numbers of a gold report ({number, node_id, context}) from a list or JSON text."""
    items = json.loads(value) if isinstance(value, str) else _plain(value) or []
    return [
        {
            "number": str(u.get("number")),
            "node_id": None if u.get("node_id") is None else str(u["node_id"]),
            "context": None if u.get("context") is None else str(u["context"]),
        }
        for u in items
    ]


# ---------------------------------------------------------------- facts


def _date(v: Any) -> date | None:
    """An xs:date or xs:dateTime of an XBRL context as a date (its day); None when absent or invalid."""
    if isinstance(v, date):
        return v
    m = _DATE_PREFIX.match(v.strip()) if isinstance(v, str) else None
    return snapshot_date(m.group(1)) if m else None


def fact_columns(fact: Mapping[str, Any]) -> dict[str, Any]:
    """A facts.parquet row of a grounding folder (schemas.facts: dates, dimensions and decimals as
    text) with those columns typed: period_* dates, dimensions [{axis, member}] sorted by axis,
    decimals an integer (None when absent or INF) and decimals_inf."""
    out = dict(fact)
    for col in ("period_start", "period_end", "period_instant"):
        out[col] = _date(fact.get(col))
    dims = fact.get("dimensions")
    if isinstance(dims, str):
        dims = json.loads(dims) if dims.strip() else {}
    if isinstance(dims, Mapping):
        dims = [{"axis": str(a), "member": str(m)} for a, m in sorted(dims.items())]
    out["dimensions"] = sorted(_plain(dims) or [], key=lambda d: (d["axis"], d["member"]))
    dec = fact.get("decimals")
    if isinstance(dec, str):
        text = dec.strip()
        out["decimals_inf"] = text.upper() == "INF"
        out["decimals"] = int(text) if _INT.fullmatch(text) and -(2**31) <= int(text) < 2**31 else None
    else:
        out["decimals_inf"] = bool(fact.get("decimals_inf"))
        out["decimals"] = dec
    return out


# ---------------------------------------------------------------- schema 1 -> current


def with_snapshot_dates(table: str, row: Mapping[str, Any]) -> dict[str, Any]:
    """The row with its snapshot date columns (SNAPSHOT_DATES) filled from the snapshot columns."""
    out = dict(row)
    for date_col, snap_col in SNAPSHOT_DATES.get(table, {}).items():
        out[date_col] = snapshot_date(out.get(snap_col))
    return out


def upgrade_row(table: str, row: Mapping[str, Any], version: int) -> dict[str, Any]:
    """A row of `table` in schema `version` as a row of the current schema."""
    if version == RELEASE_SCHEMA_VERSION:
        return dict(row)
    if version not in (1, 2):
        raise ValueError(f"no upgrade from release schema version {version}")
    if version == 2:  # only instances changed: periods_skipped was not recorded
        return {**row, "periods_skipped": None} if table == "instances" else dict(row)
    out = with_snapshot_dates(table, row)
    if table == "grounding_documents":
        out.update(metadata_columns(document_metadata({"metadata_json": out.pop("metadata_json", None)})))
    elif table == "reports":
        out["unsupported"] = unsupported_list(out.pop("unsupported_json", None) or "[]")
    elif table == "structures":
        structure = structure_from_row({"structure_json": out.pop("structure_json")})
        hashes = _prompt_hashes_v1(out.pop("prompt_hashes_json", None))
        out.update(structure_columns(structure), prompt_hashes=hashes)
    elif table == "facts":
        out = fact_columns(out)
    return out
