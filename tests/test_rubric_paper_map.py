"""Frame's rubric named for what it is (issue 41, item 5): docs/metrics/rubric.md maps every one of paper
003's 35 rubric items to frame's items (and frame's 21 items back to 003's), and nothing the demo's scoring
writes calls frame's rubric total a FinReportBench score."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow.parquet as pq

from schemas.rubric import load_rubric

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "metrics" / "rubric.md"

# Paper 003 (FinReportBench), Table 1 header, transcribed from the paper: four G0 deliverability items,
# four G1 report-identity items, 27 G2 institutional-completeness items.
PAPER_003_ITEMS = {
    **{f"D{i:02d}": "G0" for i in range(1, 5)},
    **{f"R{i:02d}": "G1" for i in range(1, 5)},
    **{f"C{i:02d}": "G2" for i in range(1, 28)},
}
STATUSES = {"implemented", "proxied", "not applicable", "unmapped"}
# "FinReportBench", "Fin-Report Bench", "fin_report_bench", "Fin-Report": the name of 003's benchmark
CLAIM = re.compile(r"fin[\s_-]*report[\s_-]*bench|fin-report", re.I)


def _table(text: str, first_header: str) -> list[dict[str, str]]:
    """The rows of the Markdown pipe table whose header row starts with `first_header`, as dicts."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(f"| {first_header} |"))
    header = [c.strip() for c in lines[start].strip().strip("|").split("|")]
    assert re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", lines[start + 1].strip()), lines[start + 1]
    rows = []
    for ln in lines[start + 2 :]:
        if not ln.startswith("|"):
            break
        cells = [c.strip() for c in ln.strip().strip("|").split("|")]
        assert len(cells) == len(header), ln
        rows.append(dict(zip(header, cells, strict=True)))
    return rows


def _frame_ids(cell: str) -> set[str]:
    return set(re.findall(r"\bg[0-2]_[a-z0-9_]+\b", cell))


def test_docs_map_all_35_items_of_paper_003():
    rows = _table(DOC.read_text(encoding="utf-8"), "003 item")
    ids = [r["003 item"] for r in rows]
    assert ids == list(PAPER_003_ITEMS), ids  # exactly the paper's 35, in its order, each once
    known = {it.id for it in load_rubric()}
    for r in rows:
        assert r["003 layer"] == PAPER_003_ITEMS[r["003 item"]], r
        assert r["frame status"] in STATUSES, r
        named = _frame_ids(r["frame item(s)"])
        assert named <= known, (r["003 item"], named - known)  # only items frame really has
        if r["frame status"] in ("implemented", "proxied"):
            assert named and r["how / why"], r  # says which of frame's items, and how
        else:
            assert r["how / why"], r  # says why not


def test_docs_map_every_frame_item_to_paper_003():
    rows = _table(DOC.read_text(encoding="utf-8"), "frame item")
    items = load_rubric()
    assert [r["frame item"].strip("`") for r in rows] == [it.id for it in items]
    judged = {it.id for it in items if it.mode == "judged"}
    for r in rows:
        counterpart = r["003 counterpart"]
        assert counterpart, r
        # a counterpart names 003 ids, a 003 component, or says there is none
        assert re.search(r"\b[DRC]\d\d\b|none|component", counterpart, re.I), r
        assert (r["reaches the LLM"] == "yes") == (r["frame item"].strip("`") in judged), r


def test_demo_scoring_never_calls_the_rubric_a_finreportbench_score(demo_scored):
    out = demo_scored["out"]
    files = sorted(p for p in out.rglob("*") if p.is_file())
    names = {p.name for p in files}
    assert {"scores.parquet", "evidence.parquet", "leaderboard.md", "leaderboard.csv"} <= names, names
    run = demo_scored["first"]
    texts = {"frame score stdout": run.stdout, "frame score stderr": run.stderr}
    for p in files:
        if p.suffix == ".parquet":
            texts[p.name] = "\n".join(map(str, pq.read_table(p).to_pylist()))
        else:
            texts[p.name] = p.read_bytes().decode("utf-8", errors="replace")
    # the scan reads the rubric's own outputs: its scores, evidence rows and leaderboard column
    assert "'metric': 'rubric'" in texts["scores.parquet"]
    assert "G2:g2_no_artifacts" in texts["evidence.parquet"]
    assert "rubric" in texts["leaderboard.md"] and "rubric" in texts["leaderboard.csv"]
    claims = {name: CLAIM.findall(text) for name, text in texts.items()}
    assert not any(claims.values()), {k: v for k, v in claims.items() if v}
