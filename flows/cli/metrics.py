"""`frame metrics`, `annotate`, `report` and `align`: metric listing, human annotation sheets,
diagnostic pages, judge-human alignment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from flows.cli.common import _fail
from flows.cli.options import AsJson, ScoresFolder
from flows.terminal import print_table
from tasks.errors import FrameInputError


def metrics_cmd() -> None:
    """List the metric families `frame score --metrics` accepts: names, metrics, ranges, what each reads."""
    from tasks.score import registry

    for name, fam in registry.families().items():
        reads = ", ".join(["generated", *sorted(fam.reads)])
        print(f"{name}: {fam.summary} [reads {reads}]")
        for m in fam.metrics:
            arrow = "higher is better" if m.higher_is_better else "lower is better"
            print(f"  {m.name}  {m.low:g}..{m.high:g}  {arrow}")
    for name, comp in registry.comparisons().items():
        print(f"{name}: {comp.summary} [compares the systems of each instance]")


def annotate_cmd(
    scores: ScoresFolder,
    out: Annotated[Path, typer.Option("--out", help="folder for items.csv, judge.csv, GUIDELINES.md")],
    metric: Annotated[
        str | None, typer.Option("--metric", help="a metric with a guideline (default: the first)")
    ] = None,
    n: Annotated[int, typer.Option("--n", help="items to sample (spread over systems)")] = 40,
    seed: Annotated[int, typer.Option("--seed", help="sampling seed")] = 0,
    systems: Annotated[
        str | None, typer.Option("--systems", help="comma-separated systems to sample from (default: all)")
    ] = None,
) -> None:
    """Export a blind annotation sheet (items.csv, no judge scores) and the judge's scores (judge.csv)."""
    import pandas as pd

    from tasks.atomic import atomic_write_text
    from tasks.score.annotate import GUIDELINES, annotation_sheets

    try:
        path = scores / "evidence.parquet"
        if not path.is_file():
            raise FrameInputError(path, "missing: not a `frame score` output folder")
        try:
            chosen = [x.strip() for x in systems.split(",") if x.strip()] if systems else None
            metric = metric or next(iter(GUIDELINES))
            items, judge = annotation_sheets(pd.read_parquet(path), metric, n, seed, chosen)
        except ValueError as exc:
            raise FrameInputError("--systems" if "system" in str(exc) else "--metric", str(exc)) from None
    except FrameInputError as exc:
        _fail(exc)
    atomic_write_text(out / "items.csv", items.to_csv(index=False, lineterminator="\n"))
    atomic_write_text(out / "judge.csv", judge.to_csv(index=False, lineterminator="\n"))
    atomic_write_text(out / "GUIDELINES.md", f"# Annotation guideline: {metric}\n\n{GUIDELINES[metric]}\n")
    print(f"{out}: {len(items)} {metric} items (items.csv is blind; judge.csv holds the judge's scores)")


def report_cmd(
    scores: ScoresFolder,
    out: Annotated[Path | None, typer.Option("--out", help="output folder (default <scores>/report)")] = None,
    top: Annotated[int, typer.Option("--top", help="failed items listed per family")] = 10,
) -> None:
    """One diagnostic page per system (Markdown + HTML): all families side by side, the items it failed
    most, and how far each metric spreads across systems."""
    from tasks.score.diagnostic import render_system_reports

    try:
        if top < 1:
            raise FrameInputError("--top", f"must be >= 1 (got {top})")
        paths = render_system_reports(scores, out, top_n=top)
    except FrameInputError as exc:
        _fail(exc)
    for p in paths:
        print(p)


def align_cmd(
    human: Annotated[Path | None, typer.Argument(help="human scores CSV (item_id,score on 0-100)")] = None,
    judge: Annotated[Path | None, typer.Argument(help="judge scores CSV (item_id,score on 0-100)")] = None,
    rankings: Annotated[
        Path | None, typer.Option("--rankings", help="CSV group_id,system,human_rank,score")
    ] = None,
    as_json: AsJson = False,
    allow_partial: Annotated[
        bool,
        typer.Option("--allow-partial", help="align even if under half the human items have a judge score"),
    ] = False,
) -> None:
    """Judge-human alignment (PA@0, PA@25, QWK, ICC(3,1), ICC(A,1)) or ranking agreement."""
    from tasks.score.align import main_json, rankings_json

    try:
        if rankings is not None:
            text = rankings_json(rankings)
        elif human is not None and judge is not None:
            text = main_json(human, judge, allow_partial=allow_partial)
        else:
            raise FrameInputError("frame align", "give HUMAN.csv JUDGE.csv, or --rankings FILE")
    except FrameInputError as exc:
        _fail(exc)
    if as_json:
        print(text)
        return
    print_table("alignment", [("metric", False), ("value", True)], list(json.loads(text).items()))
