"""Release column types (schema version 2): structs, lists and dates instead of JSON text, and releases
of schema version 1 (written before) still verify, diff against new ones and read in the current shape."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from schemas.release import (
    RELEASE_SCHEMA_VERSION,
    TABLE_SCHEMAS,
    TABLE_SCHEMAS_V1,
    ReleaseManifest,
    schema_fingerprint,
)
from schemas.release_rows import (
    document_metadata,
    fact_columns,
    metadata_columns,
    structure_columns,
    structure_from_row,
)
from schemas.structure import structure_json
from tasks.errors import FrameInputError
from tasks.ground.load import grounding_set_from_rows
from tasks.release.diff import diff_releases, format_diff_markdown
from tasks.release.evalkit import export_eval_kit
from tasks.release.read import read_release_table
from tasks.release.verify import verify_release
from tasks.release.write import PARQUET_OPTIONS, write_release
from tests.test_release import _domain, _structure, card, make_tables, manifest_fields, sha, write

# The schema fingerprints in the manifest of the demo release 0.1.0, written before schema versions:
# TABLE_SCHEMAS_V1 must stay exactly what those releases hold.
V1_FINGERPRINTS = {
    "facts": "dca41c3ad0af854e445f0d0d5f920466311de59b008864cc769f5b108bacc315",
    "grounding_documents": "097d55f004f4830f0a1e6a4aa3a2d744480ec1e4c27371b3475c0d6ae71cd7f6",
    "instances": "c5d0d97c3ab6c9ca4c031d1f840cf2dae35473f5c9d7896e73dc3554bf1775fc",
    "reports": "e82888d11ac51a7792dd96af2f683df7db60227affa1dbe9faedc13487d1cb20",
    "stats": "6d80b0268693c839828f0fba1ae2d2445edf172efc3d03b30f297b29f2ea3631",
    "structures": "d84775fb5c051524342cfcd8635c3938ec6b9bc908fb5956b10ea8e6820f2304",
}
METADATA = {
    "form": "10-Q",
    "order": 3,
    "part": None,
    "source_span": [4, 9],
    "authors": ["A. Author"],
    "flavor": "latexml",  # not a typed key: kept as JSON
    "sections": "many",  # a typed key with a value of another type: kept as JSON too
}


def v1_row(name: str, row: dict) -> dict:
    """A row of the current schema as the writer before schema versions made it (JSON text, text dates)."""
    out = {k: v for k, v in row.items() if not k.endswith("_date") or k == "first_version_date"}
    if name == "grounding_documents":
        out["metadata_json"] = json.dumps(document_metadata(out), sort_keys=True, default=str)
        out.pop("metadata"), out.pop("metadata_extra_json")
    elif name == "reports":
        out["unsupported_json"] = json.dumps(out.pop("unsupported"), sort_keys=True)
    elif name == "structures":
        out["structure_json"] = structure_json(structure_from_row(row))
        hashes = out.pop("prompt_hashes")
        out["prompt_hashes_json"] = json.dumps(sorted([h["role"], h["prompt_sha256"]] for h in hashes))
        for k in ("title", "nodes", "provenance"):
            out.pop(k)
    elif name == "facts":
        for k in ("period_start", "period_end", "period_instant"):
            out[k] = out[k].isoformat() if out[k] else None
        out["dimensions"] = json.dumps({d["axis"]: d["member"] for d in out["dimensions"]})
        inf = out.pop("decimals_inf")
        out["decimals"] = "INF" if inf else (None if out["decimals"] is None else str(out["decimals"]))
    return out


def write_v1(root: Path, tables: dict[str, list[dict]], version: str = "1.0.0") -> Path:
    """A release as frame wrote it before schema versions: schema 1 tables, no schema_version."""
    folder = root / "frame-test" / version
    folder.mkdir(parents=True)
    files, entries = {}, {}
    for name, rows in sorted(tables.items()):
        schema = TABLE_SCHEMAS_V1[name]
        table = pa.Table.from_pylist([v1_row(name, r) for r in rows], schema=schema)
        pq.write_table(table, folder / f"{name}.parquet", **PARQUET_OPTIONS)
        files[f"{name}.parquet"] = sha(folder / f"{name}.parquet")
        entries[name] = {
            "file": f"{name}.parquet",
            "rows": table.num_rows,
            "sha256": files[f"{name}.parquet"],
            "schema_fingerprint": schema_fingerprint(schema),
        }
    (folder / "README.md").write_text("an old card\n", encoding="utf-8")
    files["README.md"] = sha(folder / "README.md")
    fields = {**manifest_fields(), "name": "frame-test", "version": version, "writer": "pyarrow 16.0.0"}
    manifest = {**fields, "tables": entries, "files": files}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True), encoding="utf-8")
    assert "schema_version" not in manifest and ReleaseManifest.model_validate(manifest).schema_version == 1
    return folder


def tables_with_types() -> dict[str, list[dict]]:
    """make_tables() with values that exercise every conversion: metadata beyond the typed keys, an
    unsupported number, a fact with dimensions and decimals INF, a duration fact."""
    tables = make_tables()
    target_doc(tables).update(metadata_columns(METADATA))
    tables["reports"][1]["unsupported"] = [{"number": "1,234", "node_id": "s1.t1", "context": "was 1,234"}]
    fact = dict(tables["facts"][0], fact_id="f-dim", decimals=None, decimals_inf=True)
    fact.update(period_instant=None, period_start=dt.date(2023, 1, 1), period_end=dt.date(2023, 7, 1))
    fact["dimensions"] = [{"axis": "us-gaap:AxisA", "member": "us-gaap:MemberB"}]
    tables["facts"].append(fact)
    return tables


def target_doc(tables: dict[str, list[dict]]) -> dict:
    """doc-0 of the grounding set of the last snapshot: part of an instance's G (so in the kit)."""
    return next(d for d in tables["grounding_documents"] if d["grounding_set_id"] == "CO0-10-Q/2025-03-29")


def canonical(rows: list[dict]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)


@pytest.fixture
def both(tmp_path) -> tuple[Path, Path]:
    """The same content as a schema 1 release (1.0.0) and a current one (1.1.0)."""
    tables = tables_with_types()
    return write_v1(tmp_path, tables), write(tmp_path, tables, version="1.1.0")


# ---------------------------------------------------------------- the schemas


def test_schema_1_is_what_old_releases_hold():
    assert {n: schema_fingerprint(s) for n, s in TABLE_SCHEMAS_V1.items()} == V1_FINGERPRINTS


def test_no_json_text_and_no_text_dates_in_the_current_schema():
    assert RELEASE_SCHEMA_VERSION == 3
    names = {(t, f.name) for t, s in TABLE_SCHEMAS.items() for f in s}
    # the one JSON column left: document metadata keys no column names (arXiv pages vary)
    assert {x for x in names if x[1].endswith("_json")} == {("grounding_documents", "metadata_extra_json")}
    types = {(t, f.name): f.type for t, s in TABLE_SCHEMAS.items() for f in s}
    for col in ("period_start", "period_end", "period_instant", "snapshot_date"):
        assert types[("facts", col)] == pa.date32()
    assert types[("instances", "t_target_date")] == pa.date32()
    assert types[("instances", "periods_skipped")] == pa.int32()
    assert pa.types.is_struct(types[("grounding_documents", "metadata")])
    assert types[("facts", "decimals")] == pa.int32() and types[("facts", "decimals_inf")] == pa.bool_()
    for t, col in [("structures", "nodes"), ("structures", "prompt_hashes"), ("reports", "unsupported")]:
        assert pa.types.is_list(types[(t, col)]) and pa.types.is_struct(types[(t, col)].value_type)
    assert types[("facts", "dimensions")].value_type.names == ["axis", "member"]


def test_written_release_has_typed_columns(tmp_path):
    path = write(tmp_path, tables_with_types())
    assert json.loads((path / "manifest.json").read_text())["schema_version"] == RELEASE_SCHEMA_VERSION
    facts = pq.read_table(path / "facts.parquet").to_pylist()
    dim = next(f for f in facts if f["fact_id"] == "f-dim")
    assert dim["dimensions"] == [{"axis": "us-gaap:AxisA", "member": "us-gaap:MemberB"}]
    assert (dim["decimals"], dim["decimals_inf"], dim["period_end"]) == (None, True, dt.date(2023, 7, 1))
    assert next(f for f in facts if f["fact_id"] == "f0")["decimals"] == -6
    s = pq.read_table(path / "structures.parquet").to_pylist()[0]
    assert [(n["id"], n["parent_id"], n["depth"]) for n in s["nodes"]] == [
        ("s1", None, 0),
        ("s1.t1", "s1", 1),
    ]
    assert s["prompt_hashes"] == [{"role": "structure", "prompt_sha256": "ef" * 32}]
    docs = pq.read_table(path / "grounding_documents.parquet").to_pylist()
    doc = next(d for d in docs if d["grounding_set_id"] == "CO0-10-Q/2025-03-29" and d["doc_id"] == "doc-0")
    assert doc["metadata"]["source_span"] == [4, 9] and doc["metadata"]["authors"] == ["A. Author"]
    assert json.loads(doc["metadata_extra_json"]) == {"flavor": "latexml", "sections": "many"}


# ---------------------------------------------------------------- row readers (both schemas)


def test_structure_rows_round_trip_from_pyarrow_and_pandas(tmp_path):
    path = write(tmp_path, tables_with_types())
    want = _structure("CO0-10-Q", "2023-07-01", False)
    rows = [
        r for r in pq.read_table(path / "structures.parquet").to_pylist() if r["snapshot"] == "2023-07-01"
    ]
    assert structure_from_row(rows[0]) == want
    pd_rows = pd.read_parquet(path / "structures.parquet").to_dict("records")  # lists as numpy arrays
    assert structure_from_row(next(r for r in pd_rows if r["snapshot"] == "2023-07-01")) == want
    assert structure_from_row({"structure_json": structure_json(want)}) == want
    assert structure_columns(structure_from_row(rows[0])) == {k: rows[0][k] for k in structure_columns(want)}


def test_document_metadata_from_either_schema(tmp_path):
    want = {k: v for k, v in METADATA.items() if v is not None}  # a null value reads as absent
    row = metadata_columns(METADATA)
    assert document_metadata(row) == want
    assert document_metadata({"metadata_json": json.dumps(METADATA)}) == METADATA
    path = write(tmp_path, tables_with_types())
    pd_rows = pd.read_parquet(path / "grounding_documents.parquet").to_dict("records")
    assert document_metadata(target_doc({"grounding_documents": pd_rows})) == want
    # the grounding reader of generation and synthesis takes rows of the current schema as they are
    rows = pq.read_table(path / "grounding_documents.parquet").to_pylist()
    gset = grounding_set_from_rows([target_doc({"grounding_documents": rows})])
    assert gset.documents[0].metadata["form"] == "10-Q" and gset.documents[0].metadata["order"] == 3


def test_fact_columns_types_the_text_of_grounding_facts():
    text = {
        "fact_id": "f1",
        "period_start": "2023-01-01",
        "period_end": "2023-06-30T00:00:00",
        "period_instant": None,
        "dimensions": '{"b:Axis": "b:M", "a:Axis": "a:M"}',
        "decimals": "INF",
    }
    row = fact_columns(text)
    assert (row["period_start"], row["period_end"], row["period_instant"]) == (
        dt.date(2023, 1, 1),
        dt.date(2023, 6, 30),
        None,
    )
    assert [d["axis"] for d in row["dimensions"]] == ["a:Axis", "b:Axis"]
    assert (row["decimals"], row["decimals_inf"]) == (None, True)
    assert fact_columns({**text, "decimals": "-6", "dimensions": "{}"})["decimals"] == -6
    assert fact_columns({**text, "decimals": None})["decimals_inf"] is False


# ---------------------------------------------------------------- old releases


def test_old_release_verifies_and_reads_in_the_current_shape(both):
    old, new = both
    for path in both:
        report = verify_release(path)
        assert report.ok, report.problems
    for name in TABLE_SCHEMAS:
        a, b = read_release_table(old, name), read_release_table(new, name)
        assert a.schema.equals(TABLE_SCHEMAS[name]), name
        assert canonical(a.to_pylist()) == canonical(b.to_pylist()), name
    assert pq.read_schema(old / "structures.parquet").names != TABLE_SCHEMAS["structures"].names


def test_old_release_fails_verify_when_spoiled(both):
    old, _ = both
    m = json.loads((old / "manifest.json").read_text())
    m["tables"]["reports"]["schema_fingerprint"] = schema_fingerprint(TABLE_SCHEMAS["reports"])
    (old / "manifest.json").write_text(json.dumps(m))
    problems = verify_release(old).problems
    assert problems == ["reports.parquet: schema_fingerprint differs from the reports schema of version 1"]


def test_diff_across_the_schema_change_reports_it_and_compares_content(both):
    old, new = both
    d = diff_releases(old, new)
    assert d["manifest"]["schema_version"] == {"a": 1, "b": RELEASE_SCHEMA_VERSION}
    changed_schema = {n for n, t in d["tables"].items() if t["schema_changed"]}
    assert changed_schema == {"instances", "grounding_documents", "reports", "structures", "facts"}
    for name, t in d["tables"].items():
        assert (t["added"], t["removed"], t["changed"], t["rows_a"]) == ([], [], 0, t["rows_b"]), name
    assert d["tables_identical"] is False  # the files differ, if not the content
    md = format_diff_markdown(d)
    assert (
        f"- schema_version: 1 -> {RELEASE_SCHEMA_VERSION} (column types changed; rows compared by content)"
        in md
    )
    assert "- structures: schema changed" in md and "- stats: schema changed" not in md
    back = diff_releases(new, old)
    assert (
        back["manifest"]["schema_version"] == {"a": RELEASE_SCHEMA_VERSION, "b": 1}
        and back["tables"]["facts"]["changed"] == 0
    )


def test_diff_across_the_schema_change_finds_changed_rows(tmp_path):
    tables = tables_with_types()
    old = write_v1(tmp_path, tables)
    tables["reports"][1]["unsupported"] = []
    target_doc(tables).update(metadata_columns({**METADATA, "flavor": "ar5iv"}))
    tables["facts"][-1]["decimals_inf"] = False
    new = write(tmp_path, tables, version="2.0.0")
    d = diff_releases(old, new)
    assert d["tables"]["reports"]["changed_keys"] == ["CO0-10-Q/2024-03-30"]
    assert d["tables"]["grounding_documents"]["changed_keys"] == ["CO0-10-Q/2025-03-29 | doc-0"]
    assert d["tables"]["facts"]["changed"] == 1 and d["tables"]["structures"]["changed"] == 0


def test_evaluation_kit_of_an_old_release_equals_the_new_ones(both, tmp_path):
    kits = [tmp_path / "kit-old", tmp_path / "kit-new"]
    for release, out in zip(both, kits, strict=True):
        export_eval_kit(release, out)
    for rel in ("instances.jsonl", "documents.jsonl"):
        assert (kits[0] / rel).read_text() == (kits[1] / rel).read_text(), rel
    docs = [json.loads(x) for x in (kits[0] / "documents.jsonl").read_text().splitlines()]
    doc = next(d for d in docs if d["grounding_set_id"] == "CO0-10-Q/2025-03-29" and d["doc_id"] == "doc-0")
    assert doc["metadata"]["flavor"] == "latexml" and doc["snapshot_date"] == "2025-03-29"


def test_a_newer_schema_version_is_refused_in_one_line(both):
    old, new = both
    m = json.loads((new / "manifest.json").read_text())
    m["schema_version"] = RELEASE_SCHEMA_VERSION + 1
    (new / "manifest.json").write_text(json.dumps(m))
    assert verify_release(new).problems == [
        f"manifest.json: schema_version {RELEASE_SCHEMA_VERSION + 1} is newer than this frame reads "
        f"(up to {RELEASE_SCHEMA_VERSION}): update frame"
    ]
    with pytest.raises(FrameInputError, match="is newer than this frame reads"):
        diff_releases(old, new)
    with pytest.raises(FrameInputError, match="not one this frame reads"):
        read_release_table(new, "instances")


def test_a_new_version_of_old_content_is_not_identical(tmp_path):
    """The identical-release check compares table bytes: the first release of the new schema after an old
    one is written even when its content is the same."""
    tables = make_tables()
    write_v1(tmp_path, tables)
    stats = tables["stats"]
    path = write_release(tmp_path, "frame-test", "1.0.1", tables, manifest_fields(), card(stats))
    assert verify_release(path).ok


def test_arxiv_windows_have_no_dates(tmp_path):
    tables = make_tables()
    for name, rows in _domain("academic_simple", "gw", ["W1", "W2"]).items():
        tables[name] += rows
    path = write(tmp_path, tables)
    inst = {r["domain"]: r for r in pq.read_table(path / "instances.parquet").to_pylist()}
    assert (inst["gw"]["t_sample_date"], inst["gw"]["t_target_date"]) == (None, None)
    assert verify_release(path).ok
