"""`--limit` and `--instances`, the options of a smoke run on a few instances (tasks.select), declared once
outside flows.cli: `frame meta` (flows.meta, which flows.cli imports) takes them too."""

from __future__ import annotations

from typing import Annotated

import typer

# A smoke run on a few instances (tasks.select: stratified by category, deterministic)
Limit = Annotated[
    int | None,
    typer.Option("--limit", help="only N instances, chosen round-robin over categories (docs/evaluate.md)"),
]
InstanceIds = Annotated[
    str | None, typer.Option("--instances", help="only these comma-separated instance ids")
]
