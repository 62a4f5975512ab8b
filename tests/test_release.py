"""Releases (SPEC §6): deterministic immutable writes, verification, diff and the dataset card."""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from schemas.release import TABLE_SCHEMAS, ReleaseManifest, schema_fingerprint, snapshot_date
from schemas.release_rows import metadata_columns, structure_columns
from schemas.structure import ReportStructure
from tasks.errors import FrameInputError
from tasks.release import write as write_mod
from tasks.release.card import render_card
from tasks.release.diff import diff_releases, format_diff_markdown
from tasks.release.verify import verify_release
from tasks.release.write import IdenticalReleaseError, ReleaseExistsError, write_release

SHA = "ab" * 32
CREATED = "2025-05-01T12:00:00+00:00"


def _structure(domain: str, t: str, form_restricted: bool) -> ReportStructure:
    return ReportStructure.model_validate(
        {
            "title": f"{domain} {t}",
            "form_restricted": form_restricted,
            "nodes": [
                {
                    "id": "s1",
                    "type": "section",
                    "title": "Overview",
                    "questions": ["What was revenue?"],
                    "children": [
                        {"id": "s1.t1", "type": "text", "objective": "revenue", "sources": ["doc-0"]}
                    ],
                }
            ],
            "provenance": [
                {
                    "backend": "offline",
                    "model": "extractive-v1",
                    "role": "structure",
                    "prompt_sha256": "ef" * 32,
                }
            ],
        }
    )


def _domain(category: str, domain: str, snaps: list[str], docs_per_snap: int = 2) -> dict[str, list[dict]]:
    """Rows of the current schema (the writer fills the snapshot date columns)."""
    reports, structures, docs, facts, instances = [], [], [], [], []
    for i, t in enumerate(snaps):
        md = f"# {domain} {t}\n\n## Overview\n\nRevenue was {100 + i} million.\n"
        reports.append(
            {
                "report_id": f"{domain}/{t}",
                "domain": domain,
                "category": category,
                "snapshot": t,
                "markdown": md,
                "outline": "# x\n\n## Overview\n\n{{s1.t1}}\n",
                "tokens": 20 + i,
                "sections": 1,
                "tables": 0,
                "backend": "offline",
                "model": "extractive-v1",
                "form_restricted": i > 0,
                "numbers_total": 1,
                "numbers_supported": 1,
                "support_rate": 1.0,
                "unsupported": [],
                "placeholders_left": 0,
                "skeleton_equal": True,
            }
        )
        structures.append(
            {
                "report_id": f"{domain}/{t}",
                "domain": domain,
                "snapshot": t,
                "form_restricted": i > 0,
                "backend": "offline",
                "model": "extractive-v1",
                **structure_columns(_structure(domain, t, i > 0)),
            }
        )
        for j in range(docs_per_snap):
            docs.append(
                {
                    "grounding_set_id": f"{domain}/{t}",
                    "domain": domain,
                    "snapshot": t,
                    "doc_id": f"doc-{j}",
                    "title": f"Doc {j}",
                    "kind": "prose",
                    "tokens": 100 * (j + 1),
                    "tables": j,
                    "images": 0,
                    "source_sha256": SHA,
                    "source_kind": "edgar",
                    "markdown": f"Revenue was {100 + i} million (doc {j}).",
                    **metadata_columns({"form": "10-Q", "order": j, "source_span": [j, j + 1]}),
                }
            )
        if snapshot_date(t) is None:  # an arXiv window: no facts
            continue
        facts.append(
            {
                "domain": domain,
                "snapshot": t,
                "fact_id": f"f{i}",
                "concept": "us-gaap:Revenues",
                "fact_type": "nonFraction",
                "context_id": "c1",
                "period_start": None,
                "period_end": None,
                "period_instant": dt.date.fromisoformat(t),
                "dimensions": [],
                "unit": "iso4217:USD",
                "decimals": -6,
                "decimals_inf": False,
                "scale": 6,
                "sign": None,
                "format": "ixt:num-dot-decimal",
                "displayed_text": str(100 + i),
                "value": (100.0 + i) * 1e6,
                "hidden": False,
            }
        )
    for t, t_next in zip(snaps, snaps[1:], strict=False):
        instances.append(
            {
                "instance_id": f"{category}/{domain}/{t}->{t_next}",
                "category": category,
                "domain": domain,
                "t_sample": t,
                "t_target": t_next,
                "sample_report_id": f"{domain}/{t}",
                "target_report_id": f"{domain}/{t_next}",
                "grounding_set_id": f"{domain}/{t_next}",
                "grounding_doc_ids": [d["doc_id"] for d in docs if d["snapshot"] == t_next],
                "sample_markdown": next(r["markdown"] for r in reports if r["snapshot"] == t),
                "target_markdown": next(r["markdown"] for r in reports if r["snapshot"] == t_next),
            }
        )
    return {
        "instances": instances,
        "grounding_documents": docs,
        "reports": reports,
        "structures": structures,
        "facts": facts,
    }


def make_tables(domains: int = 1) -> dict[str, list[dict]]:
    snaps = ["2023-07-01", "2024-03-30", "2025-03-29"]
    tables: dict[str, list[dict]] = {}
    for k in range(domains):
        for name, rows in _domain("financial_quarterly", f"CO{k}-10-Q", snaps).items():
            tables.setdefault(name, []).extend(rows)
    n = len(tables["instances"])
    tables["stats"] = [
        {
            "category": "financial_quarterly",
            "instances": n,
            "g_files_mean": 2.0,
            "g_tokens_mean": 300.0,
            "g_tokens_max": 300.0,
            "g_tables_mean": 1.0,
            "g_images_mean": 0.0,
            "s_tokens_mean": 20.5,
            "s_tokens_max": 21.0,
            "s_sections_mean": 1.0,
            "s_tables_mean": 0.0,
            "y_tokens_mean": 21.5,
            "y_tokens_max": 22.0,
            "y_sections_mean": 1.0,
            "y_tables_mean": 0.0,
        }
    ]
    return tables


def manifest_fields(**over) -> dict:
    fields = {
        "created_at": CREATED,
        "config_sha256": "cd" * 32,
        "code_version": "abc1234",
        "prompt_hashes": {"fill": "ef" * 32},
        "backends": [{"backend": "offline", "model": "extractive-v1"}],
        "sources": [{"path_or_url": "edgar/0000320193/10-Q/a.htm", "sha256": SHA}],
    }
    fields.update(over)
    return fields


def card(stats: list[dict], notes: dict | None = None):
    return lambda m: render_card(m, stats, notes or {"limits": ["tiny test release"]})


def write(root: Path, tables: dict | None = None, version: str = "1.0.0", **over) -> Path:
    tables = tables if tables is not None else make_tables()
    return write_release(root, "frame-test", version, tables, manifest_fields(**over), card(tables["stats"]))


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def snapshot_files(folder: Path) -> dict[str, tuple[str, int]]:
    return {p.name: (sha(p), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def rewrite_table(folder: Path, name: str, table: pa.Table) -> None:
    """Replace one parquet and fix the manifest's checksums (simulates an inconsistent release)."""
    file = folder / f"{name}.parquet"
    pq.write_table(table, file)
    m = json.loads((folder / "manifest.json").read_text())
    m["files"][file.name] = sha(file)
    m["tables"][name].update(sha256=sha(file), rows=table.num_rows)
    (folder / "manifest.json").write_text(json.dumps(m, indent=2, sort_keys=True))


# ---------------------------------------------------------------- write + verify + load


def test_write_verify_and_load(tmp_path):
    path = write(tmp_path)
    assert path == tmp_path / "frame-test" / "1.0.0"
    assert sorted(p.name for p in path.iterdir()) == sorted(
        ["README.md", "manifest.json"] + [f"{n}.parquet" for n in TABLE_SCHEMAS]
    )
    report = verify_release(path)
    assert report.ok, report.problems
    assert report.rows == {
        "instances": 2,
        "grounding_documents": 6,
        "reports": 3,
        "structures": 3,
        "facts": 3,
        "stats": 1,
    }
    assert "README.md" in report.checked_files

    raw = (path / "manifest.json").read_text()
    data = json.loads(raw)
    assert raw == json.dumps(data, sort_keys=True, indent=2) + "\n"
    m = ReleaseManifest.model_validate(data)
    assert m.created_at == CREATED and m.name == "frame-test" and m.version == "1.0.0"
    assert set(m.files) == {p.name for p in path.iterdir()} - {"manifest.json"}
    assert m.tables["instances"].schema_fingerprint == schema_fingerprint(TABLE_SCHEMAS["instances"])

    df = pd.read_parquet(path / "instances.parquet")
    assert len(df) == 2 and list(df.columns) == TABLE_SCHEMAS["instances"].names
    assert list(df["grounding_doc_ids"].iloc[0]) == ["doc-0", "doc-1"]
    t = pq.read_table(path / "reports.parquet")
    assert t.schema.equals(TABLE_SCHEMAS["reports"]) and t.num_rows == 3
    assert t.column("report_id").to_pylist() == sorted(t.column("report_id").to_pylist())  # key order

    readme = (path / "README.md").read_text()
    assert "Financial, quarterly (10-Q)" in readme and "tiny test release" in readme
    assert CREATED not in readme  # the card must not change with created_at


def test_load_with_duckdb(tmp_path):
    duckdb = pytest.importorskip("duckdb")
    path = write(tmp_path)
    con = duckdb.connect()
    n = con.execute(f"SELECT count(*) FROM '{path / 'instances.parquet'}'").fetchone()[0]
    joined = con.execute(
        f"SELECT count(*) FROM '{path / 'instances.parquet'}' i "
        f"JOIN '{path / 'reports.parquet'}' r ON r.report_id = i.target_report_id"
    ).fetchone()[0]
    assert n == 2 and joined == 2


# ---------------------------------------------------------------- immutability and determinism


def test_same_content_twice_returns_existing_untouched(tmp_path):
    path = write(tmp_path)
    before = snapshot_files(path)
    again = write(tmp_path, created_at="2030-01-01T00:00:00+00:00")  # only created_at differs
    assert again == path
    assert snapshot_files(path) == before  # same bytes, same mtimes: nothing rewritten
    assert json.loads((path / "manifest.json").read_text())["created_at"] == CREATED
    assert [p.name for p in (tmp_path / "frame-test").iterdir()] == ["1.0.0"]  # no temp folder left


def test_same_version_different_content_is_refused(tmp_path):
    path = write(tmp_path)
    before = snapshot_files(path)
    tables = make_tables()
    tables["grounding_documents"][0]["markdown"] += " Edited."
    with pytest.raises(
        ReleaseExistsError, match="release frame-test 1.0.0 exists with different content; bump"
    ):
        write(tmp_path, tables)
    assert issubclass(ReleaseExistsError, FrameInputError)
    assert snapshot_files(path) == before
    assert [p.name for p in (tmp_path / "frame-test").iterdir()] == ["1.0.0"]
    # a different code version changes the card, so it is different content too
    with pytest.raises(ReleaseExistsError):
        write(tmp_path, code_version="def5678")
    # a new version is fine
    assert write(tmp_path, tables, version="1.0.1").name == "1.0.1"


def test_deterministic_bytes_across_roots_and_input_forms(tmp_path):
    a = write(tmp_path / "a")
    shuffled = make_tables()
    for rows in shuffled.values():
        rows.reverse()
    shuffled["reports"] = pa.Table.from_pylist(shuffled["reports"], schema=TABLE_SCHEMAS["reports"])
    shuffled["grounding_documents"] = pd.DataFrame(shuffled["grounding_documents"])
    b = write(tmp_path / "b", shuffled)
    files_a = {p.name: sha(p) for p in a.iterdir()}
    files_b = {p.name: sha(p) for p in b.iterdir()}
    assert files_a == files_b  # manifest.json included (same created_at)


def test_snapshot_dates_are_computed_from_the_snapshots(tmp_path):
    tables = make_tables()
    tables["instances"][0]["t_sample_date"] = dt.date(2023, 7, 1)  # a correct value given is fine
    path = write(tmp_path, tables)
    inst = pq.read_table(path / "instances.parquet").to_pylist()[0]
    assert (inst["t_sample"], inst["t_sample_date"]) == ("2023-07-01", dt.date(2023, 7, 1))
    assert inst["t_target_date"] == dt.date(2024, 3, 30)
    docs = pq.read_table(path / "grounding_documents.parquet").to_pylist()
    assert {(d["snapshot"], d["snapshot_date"]) for d in docs} >= {("2023-07-01", dt.date(2023, 7, 1))}
    gw = _domain("academic_simple", "gw", ["W1", "W2"])  # window labels are no dates
    assert {r["snapshot"]: snapshot_date(r["snapshot"]) for r in gw["reports"]} == {"W1": None, "W2": None}


def test_identical_new_version_is_refused_unless_allowed(tmp_path):
    """A new version whose tables equal the previous version's is refused in one line (nothing changed),
    even when the build differs (code version); --allow-identical writes it."""
    write(tmp_path)
    with pytest.raises(IdenticalReleaseError) as exc:
        write(tmp_path, version="1.1.0", code_version="def5678")
    assert issubclass(IdenticalReleaseError, FrameInputError)
    assert str(exc.value) == (
        "release frame-test 1.1.0: nothing changed since frame-test 1.0.0: every table is identical, so no "
        "new version was written (--allow-identical writes the copy anyway)"
    )
    assert [p.name for p in (tmp_path / "frame-test").iterdir()] == ["1.0.0"]  # nothing, no temp folder
    tables = make_tables()
    copy_ = write_release(
        tmp_path,
        "frame-test",
        "1.1.0",
        tables,
        manifest_fields(),
        card(tables["stats"]),
        allow_identical=True,
    )
    assert verify_release(copy_).ok
    # compared with the previous version (the highest below), not with every version: 1.0.5 is below
    # 1.1.0 but its previous is 1.0.0, whose tables it equals too
    with pytest.raises(IdenticalReleaseError, match="since frame-test 1.0.0"):
        write(tmp_path, version="1.0.5")
    # an existing version rebuilt identically is returned as before; changed tables are a new version
    assert write(tmp_path, version="1.1.0") == copy_
    tables["reports"][0]["markdown"] += "More.\n"
    tables["instances"][0]["sample_markdown"] = tables["reports"][0]["markdown"]
    assert write(tmp_path, tables, version="1.2.0").name == "1.2.0"
    assert write_mod.previous_version(tmp_path / "frame-test", "1.2.0-rc.1").name == "1.1.0"
    assert write_mod.previous_version(tmp_path / "frame-test", "1.0.0") is None


def test_created_at_defaults_to_now_utc(tmp_path):
    fields = manifest_fields()
    del fields["created_at"]
    tables = make_tables()
    path = write_release(tmp_path, "frame-test", "0.1.0", tables, fields, card(tables["stats"]))
    created = json.loads((path / "manifest.json").read_text())["created_at"]
    assert created.endswith("+00:00")


def test_crash_midway_leaves_nothing(tmp_path, monkeypatch):
    calls = []
    real = write_mod.write_parquet

    def flaky(table, path):
        calls.append(path.name)
        if len(calls) == 2:
            raise OSError("disk full (simulated)")
        real(table, path)

    monkeypatch.setattr(write_mod, "write_parquet", flaky)
    with pytest.raises(OSError, match="simulated"):
        write(tmp_path)
    assert len(calls) == 2
    assert list((tmp_path / "frame-test").iterdir()) == []  # no version folder, no temp folder
    monkeypatch.setattr(write_mod, "write_parquet", real)
    assert verify_release(write(tmp_path)).ok


def test_failing_card_leaves_nothing(tmp_path):
    def boom(manifest):
        raise RuntimeError("card failed")

    tables = make_tables()
    with pytest.raises(RuntimeError):
        write_release(tmp_path, "frame-test", "1.0.0", tables, manifest_fields(), boom)
    assert list((tmp_path / "frame-test").iterdir()) == []


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "table,column,value",
    [
        ("reports", "tokens", "many"),
        ("reports", "tokens", 5.5),  # pyarrow alone would truncate this to 5
        ("reports", "sections", 2**40),  # int32 overflow
        ("reports", "skeleton_equal", 1),
        ("instances", "grounding_doc_ids", "doc-0"),  # a str is not a list of str
        ("instances", "sample_markdown", None),  # required
        ("facts", "scale", "6"),
        # dates and nested values: pyarrow alone would convert these silently
        ("facts", "period_instant", "2023-07-01"),  # text is not a date
        ("facts", "period_instant", 19000),  # nor is a day number
        ("facts", "period_instant", dt.datetime(2023, 7, 1, 12)),  # nor a point in time
        ("facts", "dimensions", {"us-gaap:AxisA": "us-gaap:MemberB"}),  # a dict is not a list of pairs
        ("facts", "decimals", "INF"),  # decimals_inf says INF
        ("grounding_documents", "metadata", {"order": 5.5}),
        ("grounding_documents", "metadata", {"not_a_field": "x"}),  # would be dropped
        ("structures", "nodes", [{"id": "s1", "type": "section"}]),  # depth is required
        ("reports", "unsupported", [None]),
        ("instances", "t_sample_date", dt.date(1999, 1, 1)),  # not the date of t_sample
    ],
)
def test_bad_row_names_table_and_column(tmp_path, table, column, value):
    tables = make_tables()
    tables[table][0][column] = value
    with pytest.raises(FrameInputError) as exc:
        write(tmp_path, tables)
    assert f"'{table}'" in str(exc.value) and f"'{column}'" in str(exc.value)
    assert not (tmp_path / "frame-test" / "1.0.0").exists()


def test_bad_tables_and_names(tmp_path):
    tables = make_tables()
    tables["reports"][0]["extra"] = 1
    with pytest.raises(FrameInputError, match="'reports'.*'extra'"):
        write(tmp_path, tables)

    tables = make_tables()
    t = pa.Table.from_pylist(tables["reports"], schema=TABLE_SCHEMAS["reports"])
    tables["reports"] = t.set_column(
        t.schema.get_field_index("tokens"), "tokens", pa.array(["x"] * t.num_rows)
    )
    with pytest.raises(FrameInputError, match="'reports'.*'tokens'.*string"):
        write(tmp_path, tables)

    tables = make_tables()
    tables["reports"].append(dict(tables["reports"][0]))
    with pytest.raises(FrameInputError, match="duplicate report_id"):
        write(tmp_path, tables)

    tables = make_tables()
    del tables["reports"]
    with pytest.raises(FrameInputError, match="missing required tables"):
        write(tmp_path, tables)

    tables = make_tables()
    tables["scores"] = []
    with pytest.raises(FrameInputError, match="unknown table"):
        write(tmp_path, tables)

    for name, version in [("../escape", "1.0.0"), ("Frame", "1.0.0"), ("frame", "1.0"), ("frame", "v1.0.0")]:
        with pytest.raises(FrameInputError):
            write_release(tmp_path, name, version, make_tables(), manifest_fields(), "card")
    with pytest.raises(FrameInputError, match="config_sha256"):
        write(tmp_path, config_sha256="not-a-hash")
    with pytest.raises(FrameInputError, match="manifest_fields.version"):
        write_release(
            tmp_path, "frame-test", "1.0.0", make_tables(), {**manifest_fields(), "version": "2.0.0"}, "x"
        )
    assert not (tmp_path / "frame-test" / "1.0.0").exists()


def test_write_refuses_dangling_references(tmp_path):
    tables = make_tables()
    tables["instances"][0]["sample_report_id"] = "CO0-10-Q/1999-01-01"
    with pytest.raises(FrameInputError, match="sample_report_id 'CO0-10-Q/1999-01-01' is not in reports"):
        write(tmp_path, tables)


# ---------------------------------------------------------------- verify finds problems


def test_verify_reports_tampered_parquet(tmp_path):
    path = write(tmp_path)
    f = path / "instances.parquet"
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0xFF
    f.write_bytes(bytes(data))
    report = verify_release(path)
    assert not report.ok
    assert any(p.startswith("instances.parquet: sha256 mismatch") for p in report.problems), report.problems


def test_verify_reports_extra_and_missing_files(tmp_path):
    path = write(tmp_path)
    (path / "notes.txt").write_text("hello")
    (path / "stats.parquet").unlink()
    report = verify_release(path)
    assert not report.ok
    assert "notes.txt: unlisted file (not in manifest.json files)" in report.problems
    assert "stats.parquet: listed in manifest.json but missing" in report.problems


def test_verify_reports_missing_report_referenced_by_instance(tmp_path):
    path = write(tmp_path)
    reports = pq.read_table(path / "reports.parquet")
    keep = [r for r in reports.to_pylist() if r["report_id"] != "CO0-10-Q/2023-07-01"]
    rewrite_table(path, "reports", pa.Table.from_pylist(keep, schema=TABLE_SCHEMAS["reports"]))
    report = verify_release(path)
    assert not report.ok
    assert any("sample_report_id 'CO0-10-Q/2023-07-01' is not in reports" in p for p in report.problems), (
        report.problems
    )
    assert any("structures: report_id 'CO0-10-Q/2023-07-01' is not in reports" in p for p in report.problems)


def test_verify_reports_schema_and_row_count(tmp_path):
    path = write(tmp_path)
    stats = pq.read_table(path / "stats.parquet").drop_columns(["g_images_mean"])
    rewrite_table(path, "stats", stats)
    m = json.loads((path / "manifest.json").read_text())
    m["tables"]["facts"]["rows"] = 99
    (path / "manifest.json").write_text(json.dumps(m))
    report = verify_release(path)
    assert any("stats.parquet: schema differs" in p and "g_images_mean" in p for p in report.problems)
    assert "facts.parquet: 3 rows, manifest says 99" in report.problems


def test_verify_bad_manifest(tmp_path):
    path = write(tmp_path)
    (path / "manifest.json").write_text("{")
    report = verify_release(path)
    assert not report.ok and report.problems[0].startswith("manifest.json: invalid")


# ---------------------------------------------------------------- diff and card


def test_diff_added_removed_changed(tmp_path):
    a = write(tmp_path)
    tables = make_tables(domains=2)  # CO1 added
    tables["reports"][2]["markdown"] += "\nMore.\n"  # CO0 t3 changed
    tables["instances"][1]["target_markdown"] = tables["reports"][2]["markdown"]
    tables["grounding_documents"] = [
        d
        for d in tables["grounding_documents"]
        if (d["grounding_set_id"], d["doc_id"]) != ("CO0-10-Q/2023-07-01", "doc-1")
    ]  # removed (t1 is no instance's G)
    tables["facts"][0]["value"] = 1.0
    b = write(tmp_path, tables, version="1.1.0", code_version="def5678")
    d = diff_releases(a, b)
    assert d["a"]["version"] == "1.0.0" and d["b"]["version"] == "1.1.0"
    assert d["manifest"]["version"] == {"a": "1.0.0", "b": "1.1.0"}
    assert d["manifest"]["code_version"] == {"a": "abc1234", "b": "def5678"}
    assert "config_sha256" not in d["manifest"]
    r = d["tables"]["reports"]
    assert (r["rows_a"], r["rows_b"]) == (3, 6)
    assert r["added"] == ["CO1-10-Q/2023-07-01", "CO1-10-Q/2024-03-30", "CO1-10-Q/2025-03-29"]
    assert r["removed"] == [] and r["changed"] == 1 and r["changed_keys"] == ["CO0-10-Q/2025-03-29"]
    g = d["tables"]["grounding_documents"]
    assert g["removed"] == ["CO0-10-Q/2023-07-01 | doc-1"] and len(g["added"]) == 6 and g["changed"] == 0
    assert d["tables"]["instances"]["changed_keys"] == ["financial_quarterly/CO0-10-Q/2024-03-30->2025-03-29"]
    assert d["tables"]["facts"]["changed"] == 1
    assert d["tables_identical"] is False

    md = format_diff_markdown(d)
    assert "Changes from frame-test 1.0.0 to frame-test 1.1.0." in md
    assert "| reports | 3 | 6 | 3 | 0 | 1 |" in md
    assert "- code_version: abc1234 -> def5678" in md
    assert "`CO0-10-Q/2023-07-01 | doc-1`" in md

    same = diff_releases(a, a)
    assert same["tables_identical"] and same["manifest"] == {}
    assert "The tables are identical." in format_diff_markdown(same)


def test_card_content(tmp_path):
    path = write(tmp_path)
    m = ReleaseManifest.model_validate_json((path / "manifest.json").read_text())
    stats = make_tables()["stats"]
    stats2 = copy.deepcopy(stats) + [
        dict(stats[0], category="academic_simple", instances=4, g_tokens_max=900.0)
    ]
    notes = {
        "limits": ["Offline gold reports.", "Snapshots not consecutive."],
        "arxiv_licenses": {"2401.00001": "CC BY 4.0"},
        "changes": "Changes from x 0.9.0 to x 1.0.0.",
    }
    text = render_card(m, stats2, notes)
    assert text == render_card(m, stats2, notes)  # deterministic
    for needle in (
        "# FRAME benchmark release `frame-test` 1.0.0",
        "(S, G, Y)",
        "| Financial, quarterly (10-Q) | 2 |",
        "| Academic, simple | 4 |",
        "| **all** | 6 |",
        "| Academic, simple | 300 | 21 | 22 |".replace("300", "900"),
        "offline (`extractive-v1`)",
        f"Config sha256: `{'cd' * 32}`",
        "| fill | `" + "ef" * 32 + "` |",
        "| edgar/0000320193/10-Q/a.htm | `" + SHA + "` |",
        "public-domain US government filings",
        "| 2401.00001 | CC BY 4.0 |",
        "- Offline gold reports.",
        "## Changes",
        'pd.read_parquet("instances.parquet")',
        "SELECT * FROM 'instances.parquet';",
        'load_dataset(release, "instances", split="test")',
        "- config_name: instances\n  data_files:\n  - split: test\n"
        "    path: instances.parquet\n  default: true",
    ):
        assert needle in text, needle
    assert text.index("Financial, quarterly") < text.index("Academic, simple")
    empty = render_card(m, [], {})
    assert "No statistics recorded." in empty and "None recorded." in empty


def test_manifest_fields_may_repeat_name_and_version(tmp_path):
    tables = make_tables()
    fields = {
        **manifest_fields(),
        "name": "frame-test",
        "version": "1.0.0",
        "created_at": "2025-05-01T12:00:00Z",
    }
    path = write_release(tmp_path, "frame-test", "1.0.0", tables, fields, card(tables["stats"]))
    assert verify_release(path).ok
    assert json.loads((path / "manifest.json").read_text())["created_at"] == "2025-05-01T12:00:00Z"


def test_concurrent_writers_of_the_same_version(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        paths = list(pool.map(lambda _: write(tmp_path), range(4)))
    assert len(set(paths)) == 1 and verify_release(paths[0]).ok
    assert [p.name for p in (tmp_path / "frame-test").iterdir()] == ["1.0.0"]
