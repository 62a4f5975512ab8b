"""The dataset card of a release: every code snippet of "How to load" runs as written from the release
folder (pandas/pyarrow, DuckDB, Hugging Face `datasets`), every table loads as one config with the single
split `test`, and what the card says about domains, snapshots and instances is what the tables hold.

Checked on a small demo-like release (filing and arXiv domains with 2 and 3 snapshots) and on the demo
release itself (the session's `demo_release`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from schemas.config import CATEGORY_LABELS
from tasks.instances import category_stats
from tasks.release.card import SPLIT, render_card
from tasks.release.write import write_release
from tests.test_release import _domain, manifest_fields

DOMAINS = [
    ("financial_quarterly", "CO0-10-Q", ["2023-07-01", "2024-03-30", "2025-03-29"]),
    ("financial_annual", "CO1-10-K", ["2023-12-31", "2024-12-31"]),
    ("academic_simple", "gw", ["W1", "W2", "W3"]),
    ("academic_complex", "exo", ["W1", "W2"]),
]


@pytest.fixture(scope="module")
def small_release(tmp_path_factory) -> Path:
    """A release written as `flows.release.publish` writes one: stats from the rows, the card told the
    instances."""
    tables: dict[str, list[dict]] = {}
    for category, domain, snaps in DOMAINS:
        for name, rows in _domain(category, domain, snaps).items():
            tables.setdefault(name, []).extend(rows)
    reports = {r["report_id"]: r for r in tables["reports"]}
    gsets: dict[str, list[dict]] = {}
    for d in tables["grounding_documents"]:
        gsets.setdefault(d["grounding_set_id"], []).append(d)
    stats = tables["stats"] = category_stats(tables["instances"], reports, gsets)
    instances = tables["instances"]
    root = tmp_path_factory.mktemp("card")
    return write_release(
        root,
        "demo-like",
        "0.1.0",
        tables,
        manifest_fields(),
        lambda m: render_card(m, stats, {}, instances=instances),
    )


def blocks(card: str) -> list[tuple[str, str]]:
    """(language, code) of every fenced block of the card."""
    return re.findall(r"^```(\w+)\n(.*?)^```$", card, flags=re.M | re.S)


def run_python(code: str, cwd: Path, tmp_path: Path) -> str:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),
        "HF_DATASETS_CACHE": str(tmp_path / "hf-datasets"),
    }
    res = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, f"snippet failed:\n{code}\n{res.stderr[-3000:]}"
    return res.stdout


def check_pandas_and_duckdb_snippets(release: Path, tmp_path: Path, monkeypatch) -> None:
    duckdb = pytest.importorskip("duckdb")
    card = (release / "README.md").read_text(encoding="utf-8")
    found = blocks(card)
    assert [lang for lang, _ in found] == ["python", "sql", "python"]
    pandas_code = found[0][1]
    # the snippet runs as written; what it made is printed after it
    out = run_python(
        pandas_code + "\nprint(len(instances), reports.num_rows, sections, len(totals))", release, tmp_path
    )
    n_instances, n_reports = out.split()[:2]
    assert int(n_instances) == pq.read_metadata(release / "instances.parquet").num_rows
    assert int(n_reports) == pq.read_metadata(release / "reports.parquet").num_rows
    monkeypatch.chdir(release)  # the SQL names the files relative to the release folder
    con = duckdb.connect()
    statements = [s for s in found[1][1].split(";") if s.strip()]
    assert len(statements) == 4
    counts = [len(con.sql(s).fetchall()) for s in statements]
    assert counts[0] == int(n_instances) and min(counts[:3]) > 0, counts


def check_datasets_snippet(release: Path, tmp_path: Path) -> None:
    pytest.importorskip("datasets")
    card = (release / "README.md").read_text(encoding="utf-8")
    code = blocks(card)[2][1]
    assert f'split="{SPLIT}"' in code and SPLIT == "test"
    # the snippet as written, then: every config of the card loads with exactly the split `test`
    check = (
        "\nimport json\nfrom datasets import get_dataset_config_names\n"
        "splits = {c: {s: d.num_rows for s, d in load_dataset(release, c).items()}"
        " for c in get_dataset_config_names(release)}\n"
        "print(json.dumps({'instances': instances.num_rows, 'docs': docs.num_rows, 'splits': splits}))\n"
    )
    out = json.loads(run_python(code + check, release, tmp_path).strip().splitlines()[-1])
    rows = {p.stem: pq.read_metadata(p).num_rows for p in release.glob("*.parquet")}
    assert out["splits"] == {name: {"test": n} for name, n in rows.items()}
    assert (out["instances"], out["docs"]) == (rows["instances"], rows["grounding_documents"])


def check_statements(release: Path) -> None:
    """The card's domain table and summary sentence against instances.parquet and reports.parquet."""
    card = (release / "README.md").read_text(encoding="utf-8")
    instances = pq.read_table(release / "instances.parquet").to_pylist()
    reports = pq.read_table(release / "reports.parquet").to_pylist()
    snaps: dict[str, set[str]] = {}
    for r in reports:
        snaps.setdefault(r["domain"], set()).add(r["snapshot"])
    per_domain = Counter(i["domain"] for i in instances)
    assert "three snapshots" not in card and "two instances" not in card

    head = "| Domain | Category | Snapshots | Instances |\n|---|---|---|---:|\n"
    assert head in card
    lines = card.split(head, 1)[1].split("\n\n", 1)[0].splitlines()
    rows = [re.fullmatch(r"\| (\S+) \| ([^|]+) \| ([^|]+) \| (\d+) \|", ln).groups() for ln in lines]
    table = {d: (cat.strip(), s.strip().split(", "), int(n)) for d, cat, s, n in rows}
    assert set(table) == set(snaps)
    category = {i["domain"]: i["category"] for i in instances}
    for domain, (label, listed, n) in table.items():
        assert set(listed) == snaps[domain] and len(listed) == len(snaps[domain]), domain
        assert n == per_domain[domain] == len(snaps[domain]) - 1, domain  # 2 snapshots: 1 instance
        assert label == CATEGORY_LABELS[category[domain]]

    shapes = Counter((len(s), per_domain[d]) for d, s in snaps.items())
    m = re.search(r"^This release has (\d+) instances? from (\d+) domains?: (.*)\.$", card, flags=re.M)
    assert m, "summary sentence missing"
    assert (int(m.group(1)), int(m.group(2))) == (len(instances), len(snaps))
    said = {}
    for part in m.group(3).split("; "):
        k, n, i = map(
            int,
            re.fullmatch(
                r"(\d+) domains? ha(?:s|ve) (\d+) snapshots? and (\d+) instances?(?: each)?", part
            ).groups(),
        )
        said[(n, i)] = k
    assert said == dict(shapes)


def test_card_statements_match_the_data(small_release):
    check_statements(small_release)
    card = (small_release / "README.md").read_text(encoding="utf-8")
    assert (
        "2 domains have 3 snapshots and 2 instances each; 2 domains have 2 snapshots and 1 instance each"
        in card
    )


def test_pandas_and_duckdb_snippets_run(small_release, tmp_path, monkeypatch):
    check_pandas_and_duckdb_snippets(small_release, tmp_path, monkeypatch)


def test_datasets_snippet_runs_and_every_config_has_the_split_test(small_release, tmp_path):
    check_datasets_snippet(small_release, tmp_path)


def test_card_header_declares_the_split(small_release):
    card = (small_release / "README.md").read_text(encoding="utf-8")
    header = card.split("---\n")[1]
    configs = re.findall(
        r"^- config_name: (\S+)\n  data_files:\n  - split: (\S+)\n    path: (\S+)$", header, re.M
    )
    assert sorted(configs) == sorted((p.stem, "test", p.name) for p in small_release.glob("*.parquet"))
    default = "- config_name: instances\n  data_files:\n  - split: test\n    path: instances.parquet\n"
    assert default + "  default: true" in header


def test_card_without_instances_states_only_the_rule(small_release):
    from schemas.release import ReleaseManifest

    m = ReleaseManifest.model_validate_json((small_release / "manifest.json").read_bytes())
    text = render_card(m, [], {})
    assert "a domain with n snapshots has n - 1 instances" in text and "This release has" not in text


def test_demo_card_statements_and_snippets(demo_release, tmp_path, monkeypatch):
    check_statements(demo_release)
    check_pandas_and_duckdb_snippets(demo_release, tmp_path, monkeypatch)


def test_demo_card_datasets_snippet(demo_release, tmp_path):
    check_datasets_snippet(demo_release, tmp_path)
