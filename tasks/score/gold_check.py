"""Gold passes frame's own gates (issue 34 point 4): every gold report of a release (each snapshot's
R_t, so each instance's S and Y) is read with the rubric's G0 gates and its repetition item, and with
two gold checks (a heading glued to its text, an image link to no file). `frame qa gold` lists the
failures; `frame build` refuses to publish a release whose gold fails unless `--allow-failed-gold`.
Specification: docs/releases.md, "Gold check"."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasks.markdown.document import parse
from tasks.release.members import check_release_folder
from tasks.release.read import read_release_table, release_schema_version
from tasks.score.rubric import CHECKS, Finding, RubricContext, rubric_items
from tasks.synthesize.tidy import glued_heading, image_link, is_file_target

__all__ = ["GoldFailure", "gold_failures", "gold_failures_of_release"]

REPETITION_ITEM = "g2_no_repetition"
REPORT_COLUMNS = ("report_id", "domain", "category", "markdown")


@dataclass(frozen=True)
class GoldFailure:
    """One item a gold report fails, with the rubric's evidence."""

    report_id: str
    item: str  # the rubric item id (g0_*, g2_no_repetition) or gold_glued_heading / gold_figure_link
    where: str  # "line 12"
    rationale: str
    evidence: str

    def line(self) -> str:
        """One line for the terminal: report, item, where, why and the evidence."""
        return f"gold {self.report_id}: {self.item} ({self.where}): {self.rationale}: {self.evidence!r}"


def _glued(markdown: str) -> Finding:
    for b in parse(markdown).blocks:
        if b.kind == "paragraph" and (phrase := glued_heading(b.lines[0])) is not None:
            why = f"heading {phrase!r} glued to its text"
            return Finding("fail", b.lines[0][:240], f"line {b.start}", why)
    return Finding("pass")


def _figure_link(markdown: str) -> Finding:
    for i, line in enumerate(markdown.splitlines(), 1):
        img = image_link(line)
        if img is not None and not is_file_target(img[1]):
            return Finding("fail", line.strip()[:240], f"line {i}", f"image link to {img[1]!r}, not a file")
    return Finding("pass")


_GOLD_CHECKS = {"gold_glued_heading": _glued, "gold_figure_link": _figure_link}


def gold_failures(reports: Iterable[Mapping[str, Any]]) -> list[GoldFailure]:
    """The failed items of each report row (report_id, domain, category, markdown), in report order."""
    items = [it for it in rubric_items() if it.layer == "G0" or it.id == REPETITION_ITEM]
    out: list[GoldFailure] = []
    for r in sorted(reports, key=lambda r: str(r["report_id"])):
        rid, md = str(r["report_id"]), str(r.get("markdown") or "")
        ctx = RubricContext(category=str(r.get("category") or ""), domain=str(r.get("domain") or ""))
        found = [(it.id, CHECKS[it.check](md, ctx)) for it in items if it.applies(ctx.category)]
        found += [(name, check(md)) for name, check in _GOLD_CHECKS.items()]
        out += [
            GoldFailure(rid, item, f.evidence_ref, f.rationale, f.evidence)
            for item, f in found
            if f.decision == "fail"
        ]
    return out


def gold_failures_of_release(folder: str | Path) -> list[GoldFailure]:
    """`gold_failures` of every gold report of the release in `folder` (its reports.parquet). A table
    without domain/category columns (a hand-made release) is read too: with no category, no rubric item
    applies (as in the rubric) and only the gold checks run."""
    folder = Path(folder)
    check_release_folder(folder)  # only regular files: nothing read through a link
    table = read_release_table(folder, "reports", release_schema_version(folder), ("report_id", "markdown"))
    return gold_failures(table.select([c for c in REPORT_COLUMNS if c in table.column_names]).to_pylist())
