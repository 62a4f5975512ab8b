"""Compare two release folders: rows added / removed / changed per table (matched by key columns) and
the manifest fields that describe how each was built. Releases of different table schema versions
compare by content: the older one's tables are upgraded to the current schema first, and the tables
whose columns changed are reported as `schema_changed`."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pyarrow as pa

from schemas.release import SCHEMAS_BY_VERSION, TABLE_KEYS, ReleaseManifest
from tasks.errors import FrameInputError
from tasks.release import members
from tasks.release.members import shown
from tasks.release.read import upgrade_table
from tasks.release.write import row_digests

MANIFEST_FIELDS = (
    "version",
    "schema_version",
    "config_sha256",
    "code_version",
    "backends",
    "prompt_hashes",
    "sources",
    "writer",
)


def _manifest(folder: Path) -> ReleaseManifest:
    """The manifest of a release folder someone hands frame: the folder holds only regular files
    (members.check_release_folder), the manifest is read and validated by members.load_manifest."""
    members.check_release_folder(folder)
    m = members.load_manifest(folder)
    _known_schema(folder, m)
    return m


def _known_schema(folder: Path, m: ReleaseManifest) -> None:
    if m.schema_version not in SCHEMAS_BY_VERSION:
        raise FrameInputError(
            folder / "manifest.json",
            f"schema_version {m.schema_version} is newer than this frame reads "
            f"(up to {max(SCHEMAS_BY_VERSION)}): update frame",
        )


def _key_text(key: tuple) -> str:
    """A key as printed: its columns joined by " | ", control characters escaped, at most 120 characters."""
    return shown(" | ".join("" if v is None else str(v) for v in key))


def _key_id(key: tuple) -> str:
    """A key as compared: the digest of its full values (two keys that print alike stay two)."""
    return hashlib.sha256(json.dumps(key, default=str, ensure_ascii=False).encode()).hexdigest()


def _keyed(
    folder: Path, manifest: ReleaseManifest, name: str, budget: members.Budget | None = None
) -> tuple[pa.Table, dict[str, tuple[str, list[str]]], pa.Schema] | None:
    """(table in the current schema, key id -> (key text, sorted row hashes: a list, facts keys may
    repeat), the schema of the file as written). Only a table file the manifest lists is read, as a
    regular file inside the release, within its decoding budget (tasks.release.members)."""
    entry = manifest.tables.get(name)
    if entry is None:
        return None
    if entry.file not in manifest.files:
        raise FrameInputError(
            folder / entry.file, f"table {name}: its file is not listed in manifest.json files: refused"
        )
    written = members.read_table(folder, name, required=[], budget=budget)
    try:
        table = upgrade_table(name, written, manifest.schema_version)
    except (KeyError, TypeError, ValueError, RecursionError, pa.ArrowException) as e:
        raise FrameInputError(
            folder / entry.file,
            f"not a {name} table of schema version {manifest.schema_version} ({shown(e, 200)})",
        ) from None
    keys = TABLE_KEYS.get(name) or tuple(table.column_names)
    cols = [table.column(k).to_pylist() if k in table.column_names else [None] * table.num_rows for k in keys]
    out: dict[str, tuple[str, list[str]]] = {}
    for key, digest in zip(zip(*cols, strict=True), row_digests(table), strict=True):
        out.setdefault(_key_id(key), (_key_text(key), []))[1].append(digest)
    for _, v in out.values():
        v.sort()
    return table, out, written.schema


def diff_releases(
    a: str | Path, b: str | Path, *, b_manifest: ReleaseManifest | None = None
) -> dict[str, Any]:
    """What changed from release folder `a` to release folder `b`.

    Returns {"a": {name, version, created_at, path}, "b": {...}, "tables_identical": bool,
    "manifest": {field: {"a": .., "b": ..}} for differing build fields (schema_version included),
    "tables": {table: {rows_a, rows_b, added: [key], removed: [key], changed: int, changed_keys: [key],
    schema_changed: bool}}}. A key is the table's key columns joined by " | "; rows_* is None when the
    table is absent from that release. Keys appearing several times (facts) compare as multisets.
    Rows compare in the current schema (an older release's tables are upgraded), so a schema change
    alone changes no row; schema_changed says the written columns differ.
    `b_manifest` stands in for `b`'s manifest.json (a release still being written has none yet).
    """
    fa, fb = Path(a), Path(b)
    ma, mb = _manifest(fa), b_manifest or _manifest(fb)
    _known_schema(fb, mb)
    da, db = ma.model_dump(mode="json"), mb.model_dump(mode="json")
    manifest_diff = {f: {"a": da[f], "b": db[f]} for f in MANIFEST_FIELDS if da[f] != db[f]}

    tables: dict[str, Any] = {}
    for name in sorted(set(ma.tables) | set(mb.tables)):
        ka, kb = _keyed(fa, ma, name), _keyed(fb, mb, name)
        rows_a = ka[0].num_rows if ka else None
        rows_b = kb[0].num_rows if kb else None
        ha = ka[1] if ka else {}
        hb = kb[1] if kb else {}
        changed = sorted(ha[k][0] for k in ha.keys() & hb.keys() if ha[k][1] != hb[k][1])
        tables[name] = {
            "rows_a": rows_a,
            "rows_b": rows_b,
            "added": sorted(hb[k][0] for k in hb.keys() - ha.keys()),
            "removed": sorted(ha[k][0] for k in ha.keys() - hb.keys()),
            "changed": len(changed),
            "changed_keys": changed,
            "schema_changed": bool(ka and kb and not ka[2].equals(kb[2])),
        }
    identical = set(ma.tables) == set(mb.tables) and all(
        t["rows_a"] == t["rows_b"] and not (t["added"] or t["removed"] or t["changed"] or t["schema_changed"])
        for t in tables.values()
    )

    def side(m: ReleaseManifest, f: Path) -> dict[str, str]:
        return {"name": m.name, "version": m.version, "created_at": m.created_at, "path": str(f)}

    return {
        "a": side(ma, fa),
        "b": side(mb, fb),
        "tables_identical": identical,
        "manifest": manifest_diff,
        "tables": tables,
    }


def _short(v: Any) -> str:
    """A manifest value for the card: a sha256 cut to 12, backends by name, lists and maps by size; any
    text escaped and cut (`members.shown`)."""
    if isinstance(v, str):
        return v[:12] if len(v) == 64 and all(c in "0123456789abcdef" for c in v) else shown(v)
    if isinstance(v, list) and all(isinstance(x, dict) and set(x) == {"backend", "model"} for x in v):
        return shown(", ".join(f"{x['backend']}/{x['model']}" for x in v[:10]) or "none", 300) + (
            f" and {len(v) - 10} more" if len(v) > 10 else ""
        )
    if isinstance(v, list):
        return f"{len(v)} entries"
    if isinstance(v, dict):
        return f"{len(v)} entries"
    return shown(v)


def _code(key: str) -> str:
    return "`" + key.replace("`", "'") + "`"


def format_diff_markdown(d: dict[str, Any], max_keys: int = 10) -> str:
    """The diff as Markdown for a dataset card's "Changes" section."""
    a, b = d["a"], d["b"]
    lines = [f"Changes from {a['name']} {a['version']} to {b['name']} {b['version']}.", ""]
    if d["tables_identical"]:
        lines += ["The tables are identical.", ""]
    if d["manifest"]:
        lines.append("Build:")
        lines.append("")
        for field, v in d["manifest"].items():
            if field == "prompt_hashes":
                pa_, pb_ = v["a"] or {}, v["b"] or {}
                roles = sorted(r for r in set(pa_) | set(pb_) if pa_.get(r) != pb_.get(r))
                more = f" and {len(roles) - 10} more" if len(roles) > 10 else ""
                lines.append(f"- prompt_hashes: changed for {shown(', '.join(roles[:10]), 300)}{more}")
            elif field == "schema_version":
                lines.append(
                    f"- schema_version: {v['a']} -> {v['b']} (column types changed; rows compared by content)"
                )
            else:
                lines.append(f"- {field}: {_short(v['a'])} -> {_short(v['b'])}")
        lines.append("")
    lines += [
        "| Table | Rows before | Rows after | Added | Removed | Changed |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, t in d["tables"].items():
        ra = "-" if t["rows_a"] is None else f"{t['rows_a']:,}"
        rb = "-" if t["rows_b"] is None else f"{t['rows_b']:,}"
        lines.append(
            f"| {name} | {ra} | {rb} | {len(t['added']):,} | {len(t['removed']):,} | {t['changed']:,} |"
        )
    details = []
    for name, t in d["tables"].items():
        for label, keys in (("added", t["added"]), ("removed", t["removed"]), ("changed", t["changed_keys"])):
            if keys and name != "facts":
                listed = ", ".join(_code(k) for k in keys[:max_keys])
                more = f" and {len(keys) - max_keys:,} more" if len(keys) > max_keys else ""
                details.append(f"- {name} {label}: {listed}{more}")
        if t["schema_changed"]:
            details.append(f"- {name}: schema changed")
    if details:
        lines += [""] + details
    return "\n".join(lines) + "\n"
