"""Commands on a written release: `frame release verify|diff`, `frame qa gold`, `frame export-eval`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from flows.cli.common import _data_folder, _fail
from flows.cli.options import AsJson, ReleaseFolder
from flows.places import not_in_release, release_folder
from flows.terminal import print_table
from tasks.errors import FrameInputError


def qa_gold_cmd(
    release: ReleaseFolder,
    as_json: AsJson = False,
) -> None:
    """Gold report headings that name an earlier snapshot's period, gold reports failing frame's own G0
    gates, repetition item or gold checks (tasks/score/gold_check.py), and guiding questions or titles
    naming entities absent from their snapshot's documents; exit 1 when any."""
    from dataclasses import asdict

    from tasks.release.members import line
    from tasks.release.qa import check_gold
    from tasks.release.qa_questions import check_questions
    from tasks.score.gold_check import gold_failures_of_release

    try:
        release_folder(release)
        found = check_gold(release)
        failed = gold_failures_of_release(release)
        absent = check_questions(release)
    except FrameInputError as exc:
        _fail(exc)
    if as_json:  # stale headings, then rubric failures (rows with "item"), then absent entities ("check")
        print(json.dumps([asdict(f) for f in [*found, *failed, *absent]], indent=2))
    elif found:
        columns = [("domain", False), ("snapshot", False), ("names", False), ("heading", False)]
        rows = [(f.domain, f.snapshot, f"{f.names} ({f.which})", f.heading) for f in found]
        print_table("Gold headings naming an earlier period", columns, rows, keys=2)
    if not as_json:
        for f in failed:  # one line per failed item, escaped and cut like every release value
            print(line(f.line()))
        _print_absent(absent)
        problems = [f"{len(found)} stale heading(s)"] if found else []
        if failed:
            problems.append(f"{len({f.report_id for f in failed})} gold report(s) fail frame's own gates")
        if absent:
            total = sum(a.questions + a.titles for a in absent)
            problems.append(f"{total} question(s)/title(s) naming entities absent from G")
        print(f"{release}: {'; '.join(problems) or 'ok'}")
    raise typer.Exit(1 if found or failed or absent else 0)


def _print_absent(absent: list) -> None:
    """The questions part of `frame qa gold` (tasks/release/qa_questions.py), one row per report."""
    if absent:
        columns = [("report", False), ("questions", True), ("titles", True), ("absent entities", False)]
        rows = [(a.report_id, a.questions, a.titles, "; ".join(a.entities[:4])) for a in absent]
        print_table("Questions and titles naming entities absent from G", columns, rows, keys=1)


def release_verify(
    path: Annotated[Path, typer.Argument(help="data/releases/<name>/<version>")],
    deep: Annotated[
        bool,
        typer.Option(
            "--deep",
            help="also check that the data folder still holds the grounding and reports it was built from",
        ),
    ] = False,
    data: Annotated[
        Path | None, typer.Option("--data", help="--deep: the data folder (default: the release's own)")
    ] = None,
) -> None:
    """Check checksums, schemas, row counts and references of a release (--deep: and its input folders)."""
    from tasks.release.verify import verify_deep, verify_release

    try:
        release_folder(path)
        report = verify_release(path)
        problems = list(report.problems)
        if deep:
            problems += verify_deep(path, _data_folder(path, data))
    except FrameInputError as exc:
        _fail(exc)
    from tasks.release.members import line

    for p in problems:  # escaped and cut: a name from the release never rewrites the terminal
        print(f"frame: error: {line(p)}", file=sys.stderr)
    print(f"{path}: {'ok' if not problems else 'FAILED'}")
    raise typer.Exit(0 if not problems else 1)


def release_diff(
    a: Annotated[Path, typer.Argument(help="older release folder")],
    b: Annotated[Path, typer.Argument(help="newer release folder")],
    as_json: AsJson = False,
) -> None:
    """What changed between two releases: rows added/removed/changed per table, manifest changes."""
    from tasks.release.diff import diff_releases, format_diff_markdown

    try:
        for folder in (a, b):
            release_folder(folder)
        d = diff_releases(a, b)
    except FrameInputError as exc:
        _fail(exc)
    # JSON escapes every control character; the Markdown quotes release values escaped and cut
    print(json.dumps(d, indent=2, default=str) if as_json else format_diff_markdown(d))


def export_eval_cmd(
    release: ReleaseFolder,
    out: Annotated[Path, typer.Option("--out", help="new (or empty) folder for the kit")],
    instances: Annotated[
        str, typer.Option("--instances", help="comma-separated instance ids (default: every blind one)")
    ] = "",
) -> None:
    """Write the blind evaluation kit of a release: per instance S, G and metadata, never the gold report.

    An instance whose gold report is the sample of another instance in the kit is withheld (its answer
    would be in the kit); `--instances` with the withheld ids makes a second kit for other participants."""
    from tasks.release.evalkit import export_eval_kit

    try:
        chosen = [x.strip() for x in instances.split(",") if x.strip()] or None
        summary = export_eval_kit(release, not_in_release(out), instances=chosen)
    except FrameInputError as exc:
        _fail(exc)
    print(f"{out}: {summary['instances']} instance(s), {summary['documents']} grounding document(s)")
    if summary.get("withheld"):
        print(
            f"withheld {len(summary['withheld'])} instance(s) whose gold report is the sample of another "
            f"instance in the kit: {', '.join(summary['withheld'])}"
        )
