"""`frame ground`, `frame qa ground` and `frame ground-domains`: raw sources to grounding documents."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from flows.cli.common import _fail, _output_folder, _read_input, _stderr_console, _writing
from flows.cli.options import AsJson, BuildConfig, Domains, Kind
from flows.cli.running import _start_temporary_server
from flows.terminal import print_table, progress_bar
from tasks.errors import FrameInputError


def ground(
    path: Annotated[Path, typer.Argument(help="raw iXBRL filing or arXiv LaTeXML HTML")],
    out: Annotated[Path, typer.Option("--out", help="output folder (replaced atomically)")],
    kind: Kind = None,
    form: Annotated[str | None, typer.Option(help="expected form, e.g. 10-Q (filings)")] = None,
) -> None:
    """Turn one raw source into Markdown grounding documents + documents.json (+ facts.parquet)."""
    from tasks.ground.documents import write_grounding
    from tasks.sources import ground_source, source_kind

    try:
        if kind is not None:
            source_kind(kind, "--kind")  # a kind nobody registered: one line naming the known ones
        _output_folder(out)
        data = _read_input(path)
        # errors name the path given; the documents record only the file name (no machine path)
        result = ground_source(
            data,
            str(path),
            kind=kind,  # type: ignore[arg-type]
            expected_form=form,
            source_ref=path.name,
        )
        with _writing(out):
            write_grounding(result, out)
    except FrameInputError as exc:
        _fail(exc)
    tokens = sum(d.tokens for d in result.documents)
    tables = sum(d.tables for d in result.documents)
    facts = f", {len(result.facts)} facts" if result.facts is not None else ""
    print(f"{out}: {len(result.documents)} documents, {tables} tables, {tokens} tokens{facts}")


def qa_ground_cmd(
    path: Annotated[Path, typer.Argument(help="the raw source that was grounded")],
    out_dir: Annotated[Path, typer.Argument(help="the grounding folder written by `frame ground`")],
    as_json: AsJson = False,
    kind: Kind = None,
) -> None:
    """Construction QA: fact recall, table counts, mean TEDS, visible text kept."""
    from tasks.sources import qa_ground

    try:
        _read_input(path)
        figures = qa_ground(path, out_dir, kind)
    except FrameInputError as exc:
        _fail(exc)
    if as_json:
        print(json.dumps(figures, indent=2))
        return
    print_table(f"QA {path.name}", [("figure", False), ("value", True)], [(k, v) for k, v in figures.items()])


def ground_domains(
    config: BuildConfig,
    domain: Domains = None,
) -> None:
    """Fetch and ground every snapshot of every domain (Prefect flow; cached, resumable)."""
    from tasks.config import load_config

    try:
        cfg = load_config(config)
        selected = [cfg.domain(d).name for d in domain] if domain else [d.name for d in cfg.domains]
    except FrameInputError as exc:
        _fail(exc)
    from flows.settings import configure_prefect

    configure_prefect(cfg.build.data_dir)
    _start_temporary_server(cfg.build.data_dir)
    import datetime as dt

    from flows.ground import run_domains
    from flows.server import temporary_server_ready
    from flows.settings import route_prefect_console

    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    route_prefect_console(cfg.build.data_dir / "logs" / f"ground-{stamp}.log")

    with progress_bar(_stderr_console(), "[bold]ground[/]", "{task.description}") as progress:
        bar = progress.add_task(selected[0], total=len(selected))

        def done(row: dict) -> None:
            nxt = selected[min(progress.tasks[0].completed + 1, len(selected) - 1)]
            progress.update(bar, advance=1, description=f"{row.domain} {row.status} -> {nxt}")

        temporary_server_ready()
        summary = run_domains(cfg, selected, on_done=done)
    _print_summary(summary)
    failed = [s for s in summary if not s.ok]
    for s in failed:
        print(f"frame: error: domain {s.domain}: {s.error}", file=sys.stderr)
    if failed:
        # 2 = bad input (a file or field named in the message); 1 = anything else failed.
        raise typer.Exit(2 if all(s.input_error for s in failed) else 1)


def _print_summary(rows: list) -> None:
    numeric = ("sources", "documents", "tables", "images", "tokens")
    columns = [(c, c in numeric) for c in ("domain", "category", "snapshot", *numeric, "status")]
    table_rows = []
    for r in rows:  # tasks.synthesize.outcome.DomainOutcome of SnapshotGrounding
        for snap in [s.counts() for s in r.snapshots] or [{}]:
            table_rows.append(
                [r.domain, r.category, snap.get("snapshot", "-")]
                + [snap.get(c, "-") for c in numeric]
                + [r.status]
            )
    # Wide enough for the table when output goes to a pipe or a log (rich defaults to 80 there).
    print_table("Grounding documents per snapshot", columns, table_rows)
