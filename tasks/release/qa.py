"""`frame qa gold`: gold report headings that name an earlier snapshot's period (issue 42, point 5).

A form-restricted gold report keeps the earlier edition's form, never its period. For every instance,
every heading line of its target report Y (`reports.markdown` of `target_report_id`, the H1 title
included) is read with `tasks.markdown.periods`. A heading that does not name its own snapshot's period
(t_target) but names the period of the instance's sample (t_sample: `previous`), or of a snapshot before
that in the domain's chain of instances (`earlier`: a heading carried over two editions), is listed.
"Fiscal Year 2025 Compared to Fiscal Year 2024" in the fiscal 2025 edition names its own period and is
right; "First Quarter of Fiscal Year 2026 Summary" in the second quarter's edition is not.

Periods (`tasks.markdown.periods.snapshot_period`): a filing snapshot's end date with its fiscal year
and quarter from the release's dei facts (`facts.parquet`), else from the text of the snapshot's
grounding documents (read only then); an arXiv window's label ("W2": the survey title names it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from tasks.markdown.document import parse
from tasks.markdown.periods import Period, names_period, snapshot_period, stale_mentions
from tasks.release.members import check_release_folder
from tasks.release.read import read_release_table, release_schema_version

__all__ = ["DEI", "StaleHeading", "check_gold", "stale_headings"]

DEI = ("dei:DocumentFiscalYearFocus", "dei:DocumentFiscalPeriodFocus")
INSTANCE_COLUMNS = ("instance_id", "category", "domain", "t_sample", "t_target", "target_report_id")


@dataclass(frozen=True)
class StaleHeading:
    """One heading of a gold report that names an earlier snapshot's period."""

    domain: str
    snapshot: str  # the gold report's snapshot (the instance's t_target)
    instance_id: str
    line: int  # 1-based line of the heading in the report's Markdown
    heading: str  # the heading line as written
    names: str  # the earlier snapshot whose period it names
    which: Literal["previous", "earlier"]  # the instance's t_sample, or a snapshot before it
    phrases: tuple[str, ...]  # the period phrases that name it


def stale_headings(
    instances: Iterable[Mapping[str, Any]],
    reports: Iterable[Mapping[str, Any]],
    facts: Iterable[Mapping[str, Any]] = (),
    texts: Callable[[str, str], Iterable[str]] | None = None,
) -> list[StaleHeading]:
    """The stale headings of the target reports of `instances` (module docstring). Rows as in the release
    tables; `facts` needs only the dei rows (domain, snapshot, concept, displayed_text); `texts(domain,
    snapshot)` gives a snapshot's grounding Markdown, asked only for a filing snapshot without them."""
    instances = list(instances)
    markdown = {str(r["report_id"]): str(r.get("markdown") or "") for r in reports}
    dei: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for f in facts:
        dei.setdefault((str(f["domain"]), str(f["snapshot"])), []).append(f)
    annual = {str(i["domain"]): i.get("category") == "financial_annual" for i in instances}
    sample_of = {(str(i["domain"]), str(i["t_target"])): str(i["t_sample"]) for i in instances}
    periods: dict[tuple[str, str], Period] = {}

    def period(domain: str, snapshot: str) -> Period:
        key = (domain, snapshot)
        if key not in periods:
            rows = dei.get(key, [])

            def lazy() -> Iterable[str]:  # read only when the facts give no fiscal labels
                if texts is not None:
                    yield from texts(domain, snapshot)

            periods[key] = snapshot_period(
                snapshot, annual=annual.get(domain, False), facts=rows, texts=lazy()
            )
        return periods[key]

    out: list[StaleHeading] = []
    for inst in sorted(instances, key=lambda i: str(i["instance_id"])):
        domain, target = str(inst["domain"]), str(inst["t_target"])
        chain, seen = [], {target}
        at = sample_of.get((domain, target))
        while at is not None and at not in seen:
            chain.append(at)
            seen.add(at)
            at = sample_of.get((domain, at))
        if not chain:
            continue
        own = period(domain, target)
        for block in parse(markdown.get(str(inst["target_report_id"]), "")).headings:
            if names_period(block.title, own):
                continue
            for k, earlier in enumerate(chain):
                hits = stale_mentions(block.title, period(domain, earlier), own)
                if hits:
                    out.append(
                        StaleHeading(
                            domain,
                            target,
                            str(inst["instance_id"]),
                            block.start,
                            block.lines[0].strip(),
                            earlier,
                            "previous" if k == 0 else "earlier",
                            tuple(m.text for m in hits),
                        )
                    )
                    break
    return out


def check_gold(folder: str | Path) -> list[StaleHeading]:
    """`stale_headings` of the release in `folder` (its instances, reports, dei facts and, only for a
    filing snapshot without dei facts, its grounding documents)."""
    folder = Path(folder)
    check_release_folder(folder)  # only regular files: nothing read through a link, no FIFO opened
    version = release_schema_version(folder)
    # the columns read below: a table without them is one line naming it, never a KeyError
    instances = read_release_table(folder, "instances", version, INSTANCE_COLUMNS).to_pylist()
    reports = read_release_table(folder, "reports", version, ["report_id", "markdown"])
    reports = reports.select(["report_id", "markdown"]).to_pylist()
    facts: list[dict] = []
    if (folder / "facts.parquet").is_file():
        columns = ["domain", "snapshot", "concept", "displayed_text"]
        table = read_release_table(folder, "facts", version, columns).select(columns)
        wanted = pa.array(DEI).cast(table["concept"].type)
        facts = table.filter(pc.is_in(table["concept"], value_set=wanted)).to_pylist()
    grounding: dict[tuple[str, str], list[str]] | None = None

    def texts(domain: str, snapshot: str) -> list[str]:
        nonlocal grounding
        if grounding is None:
            grounding = {}
            if (folder / "grounding_documents.parquet").is_file():
                columns = ["domain", "snapshot", "markdown"]
                rows = read_release_table(folder, "grounding_documents", version, columns).select(columns)
                for r in rows.to_pylist():
                    grounding.setdefault((str(r["domain"]), str(r["snapshot"])), []).append(
                        str(r["markdown"])
                    )
        return grounding.get((domain, snapshot), [])

    return stale_headings(instances, reports, facts, texts)
