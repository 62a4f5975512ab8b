"""Dated titles in form-restricted reports (issue 42, point 5): the offline backend's adapted structures,
the extractive and section-by-section systems and `frame qa gold`.

Expected headings come from the filings themselves: the next filing's cover ("For the quarterly period
ended July 27, 2025"), its MD&A ("Second Quarter of Fiscal Year 2026 Summary") and its income statement
header ("Three Months Ended | Jul 27, 2025 | Jul 28, 2024")."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from datetime import date
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tests.llm_server as fake_llm
from schemas.release import RELEASE_SCHEMA_VERSION
from schemas.structure import ReportStructure
from tasks.generate.baselines import extractive, sample_sections
from tasks.generate.sections import section_by_section
from tasks.llm.backend import StepContext
from tasks.synthesize.offline.structure import adapt_structure, propose_structure
from tasks.synthesize.outline import render_outline
from tests.llm_server import fast_settings
from tests.test_periods import header_dates

llm_server = fake_llm.llm_server
FRAME = str(Path(sys.executable).with_name("frame"))
DOMAIN = "NVDA-10-Q"
QUARTER_SUMMARY = re.compile(r"^## (\w+ Quarter of Fiscal Year \d{4} Summary)$", re.M)
dates = header_dates


def cover_date(gset) -> str:
    """The period end as the filing's cover page writes it."""
    m = re.search(r"^## For the quarterly period ended (.+)$", gset.texts["cover-page"], re.M | re.I)
    assert m, "no period line on the cover page"
    return m.group(1).strip()


def three_months(gset) -> list[date]:
    """The dates under "Three Months Ended" in the filing's income statement header."""
    rows = [ln for ln in gset.texts["statement-of-operations"].splitlines() if ln.startswith("|")][:4]
    row = next(r for r in rows if len(dates(r)) >= 2)
    return dates(row)[:2]


def ctx(snapshot: str) -> StepContext:
    return StepContext(DOMAIN, snapshot, "financial_quarterly", "edgar")


def heading_lines(markdown: str) -> list[str]:
    return [s.line for s in sample_sections(markdown)[1]]


@pytest.fixture(scope="module")
def nvda(grounding_sets):
    return {s: grounding_sets(DOMAIN, s) for s in ("2025-04-27", "2025-07-27", "2025-10-26")}


# ---------------------------------------------------------------- offline adapted structures


def test_offline_chain_renews_the_quarter_summary_and_keeps_its_id(nvda):
    snaps = sorted(nvda)
    chain = [propose_structure(nvda[snaps[0]], ctx(snaps[0]))]
    for s in snaps[1:]:
        chain.append(adapt_structure(chain[-1], nvda[s], ctx(s)))
    for k in range(1, len(snaps)):
        old, prev, new, cur = snaps[k - 1], chain[k - 1], snaps[k], chain[k]
        (before,) = [
            n for n in prev.walk() if n.type == "subsection" and QUARTER_SUMMARY.match("## " + n.title)
        ]
        assert before.title == QUARTER_SUMMARY.search(nvda[old].texts["part-1-item-2-mdna"]).group(1)
        after = cur.find(before.id)  # the id is kept
        assert after.type == "subsection"
        assert after.title == QUARTER_SUMMARY.search(nvda[new].texts["part-1-item-2-mdna"]).group(1)
        assert [(n.id, n.type) for n in cur.nodes] == [(n.id, n.type) for n in prev.nodes]
        # no heading of the new edition names the old quarter or the old period end
        heads = [ln for ln in render_outline(cur).splitlines() if ln.startswith("#")]
        assert not [h for h in heads if before.title in h or cover_date(nvda[old]) in h], heads
        assert cover_date(nvda[new]) in heads[0]


def test_offline_adapt_rewrites_dated_titles_without_counterpart(nvda):
    """Titles the new filing has no counterpart for (as an LLM-made plan might write them) are rewritten:
    the section's period end becomes the new cover's, a table's dates those of the new income statement."""
    old, new = "2025-04-27", "2025-07-27"
    data = propose_structure(nvda[old], ctx(old)).model_dump()
    section = data["nodes"][0]
    leaf = next(c for c in section["children"] if "statement-of-operations" in c["sources"])
    old_dates = [f"{d:%B} {d.day}, {d.year}" for d in three_months(nvda[old])]
    section["title"] = f"Financial Highlights for the Quarter Ended {cover_date(nvda[old])}"
    leaf["title"] = f"Income statement, three months ended {old_dates[0]} and {old_dates[1]}"
    prev = ReportStructure.model_validate(data)

    cur = adapt_structure(prev, nvda[new], ctx(new))
    assert [(n.id, n.type) for n in cur.nodes] == [(n.id, n.type) for n in prev.nodes]
    assert cur.nodes[0].title == f"Financial Highlights for the Quarter Ended {cover_date(nvda[new])}"
    renewed = cur.find(leaf["id"])
    assert renewed.title.startswith("Income statement, three months ended ")
    assert dates(renewed.title) == three_months(nvda[new])


# ---------------------------------------------------------------- the systems that copy S's headings


def rows_of(gset, gid: str) -> list[dict]:
    return [
        {
            "grounding_set_id": gid,
            "doc_id": d.doc_id,
            "title": d.title,
            "kind": d.kind,
            "tokens": d.tokens,
            "tables": d.tables,
            "images": d.images,
            "source_kind": "edgar",
            "markdown": gset.texts[d.doc_id],
        }
        for d in gset.documents
    ]


def nvda_instance(nvda, old: str, new: str) -> tuple[dict, list[dict], list[str]]:
    """An instance whose S has NVDA's real headings of `old`, and the headings its target should have,
    each read from the `new` filing."""
    g_old, g_new = nvda[old], nvda[new]
    od = [f"{d:%B} {d.day}, {d.year}" for d in three_months(g_old)]
    nd = three_months(g_new)
    sample = (
        f"# NVIDIA CORP 10-Q report for the period ended {cover_date(g_old)}\n\n"
        f"## {QUARTER_SUMMARY.search(g_old.texts['part-1-item-2-mdna']).group(1)}\n\n"
        "Revenue grew on data center demand.\n\n"
        "## Revenue by Reportable Segments\n\nCompute & Networking revenue rose.\n\n"
        f"## Three Months Ended {od[0]} and {od[1]}\n\n| Revenue | 1 |\n|---|---|\n| Total | 2 |\n"
    )
    want = [
        f"# NVIDIA CORP 10-Q report for the period ended {cover_date(g_new)}",
        f"## {QUARTER_SUMMARY.search(g_new.texts['part-1-item-2-mdna']).group(1)}",
        "## Revenue by Reportable Segments",
        "## Three Months Ended " + " and ".join(f"{d:%B} {d.day}, {d.year}" for d in nd),
    ]
    gid = f"{DOMAIN}/{new}"
    rows = rows_of(g_new, gid)
    instance = {
        "instance_id": f"financial_quarterly/{DOMAIN}/{old}->{new}",
        "category": "financial_quarterly",
        "domain": DOMAIN,
        "t_sample": old,
        "t_target": new,
        "grounding_set_id": gid,
        "grounding_doc_ids": [r["doc_id"] for r in rows],
        "sample_markdown": sample,
    }
    return instance, rows, want


@pytest.mark.parametrize("old, new", [("2025-04-27", "2025-07-27"), ("2025-07-27", "2025-10-26")])
def test_extractive_names_the_target_period(nvda, old, new):
    instance, rows, want = nvda_instance(nvda, old, new)
    out = extractive(instance, rows)
    assert heading_lines(out) == want
    # without t_sample / t_target S's headings stay byte-identical
    bare = {k: v for k, v in instance.items() if k not in ("t_sample", "t_target")}
    assert heading_lines(extractive(bare, rows)) == heading_lines(instance["sample_markdown"])


def test_extractive_renames_the_window_of_a_survey():
    sample = "# Literature survey: mixed sciences (W1)\n\n## Overview\n\nStars form in clouds.\n"
    row = {
        "grounding_set_id": "mixed-sciences/W2",
        "doc_id": "paper-1",
        "title": "A paper",
        "kind": "prose",
        "source_kind": "arxiv",
        "markdown": "# A paper\n\n## Abstract\n\nStars form in molecular clouds (W1 region).\n",
    }
    instance = {"t_sample": "W1", "t_target": "W2", "category": "academic_simple", "sample_markdown": sample}
    out = extractive(instance, [row])
    assert heading_lines(out) == ["# Literature survey: mixed sciences (W2)", "## Overview"]


KEY_ENV = "FRAME_TEST_DATED_TITLES_KEY"
OUTLINE = re.compile(
    r"Outline of the report \(the section to write is marked with >>\):\n\n(.*?)\n\nSection", re.S
)


def test_section_by_section_outline_names_the_target_period(nvda, llm_server, monkeypatch, tmp_path):
    monkeypatch.setenv(KEY_ENV, "sk-test-dated")
    instance, rows, want = nvda_instance(nvda, "2025-04-27", "2025-07-27")
    llm_server.default_chat = lambda req: fake_llm.json_reply({"section_markdown": "Body."})
    settings = fast_settings(llm_server, KEY_ENV, transient_retries=1, invalid_retries=1)
    md, meta = section_by_section(instance, rows, settings, tmp_path / "cache")
    assert heading_lines(md) == want
    assert meta["requests"] == len(llm_server.chat_requests) > 0
    for req in llm_server.chat_requests:  # the outline the model is shown is the target's
        outline = OUTLINE.search(req.messages[1]["content"]).group(1)
        assert [ln[3:] for ln in outline.splitlines() if ln[3:].startswith("#")] == want


# ---------------------------------------------------------------- frame qa gold


def run_qa(release: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [FRAME, "qa", "gold", "--release", str(release), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _write(folder: Path, name: str, rows: list[dict]) -> None:
    pq.write_table(pa.Table.from_pylist(rows), folder / f"{name}.parquet")


def _dei(domain: str, snapshot: str, year: str, period: str) -> list[dict]:
    return [
        {
            "domain": domain,
            "snapshot": snapshot,
            "concept": "dei:DocumentFiscalYearFocus",
            "displayed_text": year,
        },
        {
            "domain": domain,
            "snapshot": snapshot,
            "concept": "dei:DocumentFiscalPeriodFocus",
            "displayed_text": period,
        },
    ]


def test_qa_gold_lists_headings_of_an_earlier_period(tmp_path):
    """A hand-made release: a heading carried from the previous edition, one carried over two, an old
    window label, and a right comparison heading; the command lists exactly the three stale ones."""
    rel = tmp_path / "rel"
    rel.mkdir()
    (rel / "manifest.json").write_text(json.dumps({"schema_version": RELEASE_SCHEMA_VERSION}))
    reports = {
        "NVDA-10-Q/2025-07-27": "# NVIDIA CORP 10-Q report for the period ended July 27, 2025\n\n"
        "## First Quarter of Fiscal Year 2026 Summary\n\nText.\n\n## Risk Factors\n\nText.\n",
        "NVDA-10-Q/2025-10-26": "# NVIDIA CORP 10-Q report for the period ended October 26, 2025\n\n"
        "## Revenue\n\n### First Quarter of Fiscal Year 2026 Summary\n\nText.\n\n"
        "### Third Quarter of Fiscal Year 2026 Summary\n\nText.\n",
        "NVDA-10-K/2025-01-26": "# NVIDIA CORP 10-K report for the period ended January 26, 2025\n\n"
        "## Fiscal Year 2025 Compared to Fiscal Year 2024\n\nText.\n",
        "topic/W2": "# Literature survey: topic (W1)\n\n## Themes\n\nText.\n",
    }
    instances = [
        ("financial_quarterly", "NVDA-10-Q", "2025-04-27", "2025-07-27"),
        ("financial_quarterly", "NVDA-10-Q", "2025-07-27", "2025-10-26"),
        ("financial_annual", "NVDA-10-K", "2024-01-28", "2025-01-26"),
        ("academic_simple", "topic", "W1", "W2"),
    ]
    _write(
        rel,
        "instances",
        [
            {
                "instance_id": f"{c}/{d}/{s}->{t}",
                "category": c,
                "domain": d,
                "t_sample": s,
                "t_target": t,
                "target_report_id": f"{d}/{t}",
            }
            for c, d, s, t in instances
        ],
    )
    _write(rel, "reports", [{"report_id": k, "markdown": v} for k, v in reports.items()])
    facts = _dei("NVDA-10-Q", "2025-04-27", "2026", "Q1") + _dei("NVDA-10-Q", "2025-07-27", "2026", "Q2")
    facts += _dei("NVDA-10-Q", "2025-10-26", "2026", "Q3") + _dei("NVDA-10-K", "2024-01-28", "2024", "FY")
    facts += _dei("NVDA-10-K", "2025-01-26", "2025", "FY")
    _write(rel, "facts", facts)

    res = run_qa(rel)
    assert res.returncode == 1, res.stderr
    found = {
        (f["domain"], f["snapshot"], f["heading"], f["names"], f["which"]) for f in json.loads(res.stdout)
    }
    assert found == {
        ("NVDA-10-Q", "2025-07-27", "## First Quarter of Fiscal Year 2026 Summary", "2025-04-27", "previous"),
        ("NVDA-10-Q", "2025-10-26", "### First Quarter of Fiscal Year 2026 Summary", "2025-04-27", "earlier"),
        ("topic", "W2", "# Literature survey: topic (W1)", "W1", "previous"),
    }
    plain = subprocess.run(
        [FRAME, "qa", "gold", "--release", str(rel)], capture_output=True, text=True, timeout=120
    )
    assert plain.returncode == 1 and "3 stale heading(s)" in plain.stdout


def test_qa_gold_bad_release_is_one_line(tmp_path):
    res = run_qa(tmp_path / "missing")
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0 and "no such folder" in res.stderr


def test_qa_gold_on_the_demo_release(demo_release, tmp_path):
    """The demo's gold reports (offline backend) name no earlier period; a copy in which one target
    report's title is the sample's title is flagged for exactly that heading."""
    res = run_qa(demo_release)
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads(res.stdout) == []

    rel = tmp_path / "rel"
    shutil.copytree(demo_release, rel)
    instances = pq.read_table(rel / "instances.parquet").to_pylist()
    inst = next(i for i in instances if i["instance_id"].startswith("financial_quarterly/NVDA-10-Q/"))
    reports = pq.read_table(rel / "reports.parquet")
    rows = reports.to_pylist()
    by_id = {r["report_id"]: r for r in rows}
    sample_h1 = by_id[inst["sample_report_id"]]["markdown"].splitlines()[0]
    target = by_id[inst["target_report_id"]]
    lines = target["markdown"].splitlines()
    assert lines[0].startswith("# ") and lines[0] != sample_h1
    target["markdown"] = "\n".join([sample_h1, *lines[1:]]) + "\n"
    pq.write_table(pa.Table.from_pylist(rows, schema=reports.schema), rel / "reports.parquet")

    res = run_qa(rel)
    assert res.returncode == 1, res.stderr
    (found,) = json.loads(res.stdout)
    assert (found["domain"], found["snapshot"], found["instance_id"]) == (
        inst["domain"],
        inst["t_target"],
        inst["instance_id"],
    )
    assert (found["heading"], found["line"], found["names"], found["which"]) == (
        sample_h1,
        1,
        inst["t_sample"],
        "previous",
    )
