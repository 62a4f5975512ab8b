"""The `frame` command line (typer).

Bad input ends with exit code 2 and one line on stderr naming the file/field and the problem.
Prefect is imported only by the commands that run flows, so `frame ground` starts fast.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from tasks.errors import FrameInputError

app = typer.Typer(no_args_is_help=True, add_completion=False, help="frame: FRAME benchmark builder.")
qa_app = typer.Typer(no_args_is_help=True, help="Construction quality checks.")
app.add_typer(qa_app, name="qa")

console = Console(stderr=True)
KIND_CHOICES = ("edgar", "arxiv")


def _fail(exc: FrameInputError) -> None:
    # One line, no traceback: the message already names the file and the problem.
    print(f"frame: error: {exc}".replace("\n", " "), file=sys.stderr)
    raise typer.Exit(2)


def _read_input(path: Path) -> bytes:
    if not path.exists():
        raise FrameInputError(path, "no such file")
    if not path.is_file():
        raise FrameInputError(path, "not a file")
    return path.read_bytes()


@app.command()
def ground(
    path: Annotated[Path, typer.Argument(help="raw iXBRL filing or arXiv LaTeXML HTML")],
    out: Annotated[Path, typer.Option("--out", help="output folder (replaced atomically)")],
    kind: Annotated[str | None, typer.Option(help="edgar|arxiv (detected when omitted)")] = None,
    form: Annotated[str | None, typer.Option(help="expected form, e.g. 10-Q (filings)")] = None,
) -> None:
    """Turn one raw source into Markdown grounding documents + documents.json (+ facts.parquet)."""
    from tasks.ground.documents import ground_source, write_grounding

    try:
        if kind is not None and kind not in KIND_CHOICES:
            raise FrameInputError("--kind", f"must be one of {', '.join(KIND_CHOICES)} (got {kind!r})")
        data = _read_input(path)
        result = ground_source(data, str(path), kind=kind, expected_form=form)  # type: ignore[arg-type]
        write_grounding(result, out)
    except FrameInputError as exc:
        _fail(exc)
    tokens = sum(d.tokens for d in result.documents)
    tables = sum(d.tables for d in result.documents)
    facts = f", {len(result.facts)} facts" if result.facts is not None else ""
    print(f"{out}: {len(result.documents)} documents, {tables} tables, {tokens} tokens{facts}")


@qa_app.command("ground")
def qa_ground_cmd(
    path: Annotated[Path, typer.Argument(help="the raw source that was grounded")],
    out_dir: Annotated[Path, typer.Argument(help="the grounding folder written by `frame ground`")],
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    kind: Annotated[str | None, typer.Option(help="edgar|arxiv (detected when omitted)")] = None,
) -> None:
    """Construction QA: fact recall, table counts, mean TEDS, visible text kept."""
    from tasks.ground.qa import qa_ground

    try:
        _read_input(path)
        figures = qa_ground(path, out_dir, kind)
    except FrameInputError as exc:
        _fail(exc)
    if as_json:
        print(json.dumps(figures, indent=2))
        return
    table = Table(title=f"QA {path.name}")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for k, v in figures.items():
        table.add_row(k, str(v))
    Console().print(table)


@app.command("ground-domains")
def ground_domains(
    config: Annotated[Path, typer.Option("--config", help="TOML build config")],
    domain: Annotated[list[str] | None, typer.Option("--domain", help="only these domains")] = None,
) -> None:
    """Fetch and ground every snapshot of every domain (Prefect flow; cached, resumable)."""
    from schemas.config import load_config

    try:
        cfg = load_config(config)
        selected = [cfg.domain(d).name for d in domain] if domain else [d.name for d in cfg.domains]
    except FrameInputError as exc:
        _fail(exc)
    from flows.settings import configure_prefect

    configure_prefect(cfg.build.data_dir)
    import datetime as dt

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from flows.ground import run_domains
    from flows.settings import route_prefect_console

    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    route_prefect_console(cfg.build.data_dir / "logs" / f"ground-{stamp}.log")

    with Progress(
        TextColumn("[bold]ground[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,  # logs only when not on a terminal (CI, pipes)
    ) as progress:
        bar = progress.add_task(selected[0], total=len(selected))

        def done(row: dict) -> None:
            nxt = selected[min(progress.tasks[0].completed + 1, len(selected) - 1)]
            progress.update(bar, advance=1, description=f"{row['domain']} {row['status']} -> {nxt}")

        summary = run_domains(cfg, selected, on_done=done)
    _print_summary(summary)
    failed = [s for s in summary if s["status"] != "ok"]
    for s in failed:
        print(f"frame: error: domain {s['domain']}: {s['error']}", file=sys.stderr)
    if failed:
        # 2 = bad input (a file or field named in the message); 1 = anything else failed.
        raise typer.Exit(2 if all(s.get("input_error") for s in failed) else 1)


def _print_summary(rows: list[dict]) -> None:
    table = Table(title="Grounding documents per snapshot")
    for col in (
        "domain",
        "category",
        "snapshot",
        "sources",
        "documents",
        "tables",
        "images",
        "tokens",
        "status",
    ):
        table.add_column(
            col, justify="right" if col in ("sources", "documents", "tables", "images", "tokens") else "left"
        )
    for r in rows:
        for snap in r.get("snapshots", []) or [{}]:
            table.add_row(
                r["domain"],
                r["category"],
                snap.get("snapshot", "-"),
                str(snap.get("sources", "-")),
                str(snap.get("documents", "-")),
                str(snap.get("tables", "-")),
                str(snap.get("images", "-")),
                str(snap.get("tokens", "-")),
                r["status"],
            )
    # Wide enough for the table when output goes to a pipe or a log (rich defaults to 80 there).
    Console(width=None if sys.stdout.isatty() else 160).print(table)


def main() -> None:  # pragma: no cover - entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
