"""How `frame` looks on a terminal: help text, tables and progress bars.

- `FrameTyper` renders help the way the commands read: a flag shows no value placeholder, an option
  that repeats says so, usage lines name arguments in capitals (`PATH`, not `{path}`), and help text is
  shown as written (a `[llm]` in it is text, not rich markup).
- `print_table` never cuts a number: numeric columns keep their width, text columns fold, and a table
  too wide for the terminal is split into several that fit (the key columns repeated).
- `progress_bar` shows a rich bar on a terminal and prints the log lines written meanwhile above it.

Imports stay light (typer; rich where something is drawn): `frame --help` and `frame ground` load this module.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperCommand, TyperGroup

if TYPE_CHECKING:  # rich is imported where a table or a bar is drawn (~20 ms a `frame ground` skips)
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

REPEAT_NOTE = "(repeat for several)"


def _plain_help(text: str | None) -> str | None:
    """Help text as shown: paragraphs kept, single newlines joined (rich mode keeps them, mid-sentence),
    and every `[` that is not already escaped escaped (rich would read `[llm]` as markup and drop it)."""
    if not text:
        return text
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text.strip())]
    return re.sub(r"(?<!\\)\[", r"\\[", "\n\n".join(paragraphs))


def _tidy_param(param: Any, ctx: Any) -> None:
    if getattr(param, "_frame_tidy", False):
        return
    param._frame_tidy = True
    param.help = _plain_help(getattr(param, "help", None))
    if param.param_type_name == "argument":
        # usage and the Arguments panel say PATH, as errors do ("Missing argument 'PATH'")
        if param.metavar is None:
            param.metavar = (param.name or "arg").upper()
        return
    if getattr(param, "is_flag", False):
        param.metavar = ""  # a flag takes no value: no <bool> placeholder
    elif getattr(param, "multiple", False):
        shown = param.display_type_rich(ctx) or ""
        param.metavar = re.sub(r"^<list\[(.*)\]>$", r"<\1>", shown)
        if REPEAT_NOTE not in (param.help or ""):
            param.help = f"{param.help} {REPEAT_NOTE}" if param.help else REPEAT_NOTE


class _Tidy:
    """Shared by FrameCommand and FrameGroup (mixed in before the typer class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help = _plain_help(self.help)  # type: ignore[has-type]

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)  # type: ignore[misc]
        for p in params:  # the --help option is made on demand: tidy here, not in __init__
            _tidy_param(p, ctx)
        return params


class FrameCommand(_Tidy, TyperCommand):
    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        # click's `PATH` / `[PATH]` for arguments, where typer writes `{path}`
        pieces = [self.options_metavar] if self.options_metavar else []
        for p in self.get_params(ctx):
            if p.param_type_name != "argument":
                pieces.extend(p.get_usage_pieces(ctx))
                continue
            name = p.metavar + ("..." if p.nargs != 1 else "")
            pieces.append(name if p.required else f"[{name}]")
        return pieces


class FrameGroup(_Tidy, TyperGroup):
    pass


class FrameTyper(typer.Typer):
    """typer.Typer whose groups and commands render their help as described at the top."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("cls", FrameGroup)
        super().__init__(**kwargs)

    def command(self, name: str | None = None, *, cls: Any = None, **kwargs: Any) -> Any:
        return super().command(name, cls=cls or FrameCommand, **kwargs)


# ---------------------------------------------------------------- tables


def _cell(value: Any) -> Text:
    # Text, not str: a str cell is rich markup, and an error message with "[run]" in it would lose it.
    from rich.text import Text

    return value if isinstance(value, Text) else Text(str(value))


TEXT_MIN = 8  # narrowest a text column gets before the table is split (longer words fold)


def fit_tables(
    title: str | None,
    columns: Sequence[tuple[str, bool]],
    rows: Sequence[Sequence[Any]],
    width: int,
    keys: int = 1,
) -> list[Table]:
    """Tables of `rows` under `columns` ((header, numeric) pairs) that fit in `width` columns.

    A numeric column never wraps and is as wide as its widest cell; a text column folds. A table too
    wide for its box is drawn without one (columns one space apart); when even that does not fit, its
    columns after the first `keys` are spread over several tables, each repeating the key columns."""
    from rich import box
    from rich.table import Table

    cells = [[_cell(v) for v in row] for row in rows]

    def need(i: int) -> int:
        head, numeric = columns[i]
        widths = [c[i].cell_len for c in cells]
        if numeric:
            return max([len(head), *widths])
        words = [len(w) for c in cells for w in c[i].plain.split()] + [len(w) for w in head.split()]
        return min(max(words, default=1), TEXT_MIN)

    mins = [need(i) for i in range(len(columns))]
    boxed = 1 + sum(m + 3 for m in mins) <= width  # a border and one space each side per column
    gap = 3 if boxed else 1

    def fits(idx: list[int]) -> bool:
        return sum(mins[i] + gap for i in idx) + (1 if boxed else -1) <= width

    key_idx = list(range(min(keys, len(columns))))
    rest = list(range(len(key_idx), len(columns)))
    groups: list[list[int]] = [key_idx[:]]
    for i in rest:
        if not fits(groups[-1] + [i]) and len(groups[-1]) > len(key_idx):
            groups.append(key_idx[:])
        groups[-1].append(i)
    if len(groups) > 1:  # as many tables, with the columns spread evenly (room for the key columns)
        per = sum(mins[i] + gap for i in rest) / len(groups)
        even: list[list[int]] = [[]]
        for i in rest:
            filled = sum(mins[j] + gap for j in even[-1])
            if even[-1] and filled + (mins[i] + gap) / 2 > per and len(even) < len(groups):
                even.append([])
            even[-1].append(i)
        if all(fits(key_idx + g) for g in even):
            groups = [key_idx + g for g in even]
    out = []
    for n, idx in enumerate(groups, 1):
        label = title if title is None or len(groups) == 1 else f"{title} ({n}/{len(groups)})"
        if boxed:
            t = Table(title=label)
        else:
            t = Table(title=label, box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 0), pad_edge=False)
        for i in idx:
            head, numeric = columns[i]
            if numeric:
                t.add_column(head, justify="right", no_wrap=True, min_width=mins[i])
            else:
                t.add_column(head, overflow="fold")
        for row in cells:
            t.add_row(*[row[i] for i in idx])
        out.append(t)
    return out


def stdout_console(pipe_width: int = 200) -> Console:
    """A console on stdout: the terminal's width (or $COLUMNS), else `pipe_width` when output goes to a
    pipe or a log (rich would assume 80 there)."""
    import os

    from rich.console import Console

    return Console(width=None if sys.stdout.isatty() or os.environ.get("COLUMNS") else pipe_width)


def print_table(
    title: str | None,
    columns: Sequence[tuple[str, bool]],
    rows: Sequence[Sequence[Any]],
    keys: int = 1,
    console: Console | None = None,
) -> None:
    out = console or stdout_console()
    for t in fit_tables(title, columns, rows, out.width, keys):
        out.print(t)


# ---------------------------------------------------------------- progress


def _stream_handlers() -> list[logging.StreamHandler]:
    loggers = [logging.getLogger()] + [
        lg for lg in list(logging.Logger.manager.loggerDict.values()) if isinstance(lg, logging.Logger)
    ]
    seen: dict[int, logging.StreamHandler] = {}
    for lg in loggers:
        for h in lg.handlers:
            if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler):
                seen.setdefault(id(h), h)
    return list(seen.values())


@contextmanager
def logs_above(console: Console) -> Iterator[None]:
    """While a live display runs on `console`: every log handler writing to a terminal (Prefect's
    console handler, plain StreamHandlers) writes through `console` instead, so its lines are printed
    above the bar rather than into it. Handlers writing to a pipe or a file are left alone."""
    from rich.console import Console
    from rich.file_proxy import FileProxy

    class LinesAbove(FileProxy):
        @property
        def rich_proxied_file(self) -> Any:
            # A rich Console unwraps a FileProxy to the file behind it (so a print() of rich output
            # is not redirected twice); Prefect's handler prints with rich and must write here.
            return self

    swapped: list[tuple[logging.StreamHandler, Any]] = []
    for h in _stream_handlers():
        stream = h.stream
        try:
            tty = not isinstance(stream, FileProxy) and stream.isatty()
        except (AttributeError, ValueError, OSError):
            tty = False
        if not tty:
            continue
        proxy = LinesAbove(console, stream)
        h.setStream(proxy)  # type: ignore[arg-type]
        if isinstance(getattr(h, "console", None), Console):  # Prefect's handler prints with rich
            h.console.file = proxy  # type: ignore[attr-defined]
        swapped.append((h, stream))
    try:
        yield
    finally:
        for h, stream in swapped:
            h.setStream(stream)
            if isinstance(getattr(h, "console", None), Console):
                h.console.file = stream  # type: ignore[attr-defined]


@contextmanager
def progress_bar(console: Console, label: str, *extra: Any, elapsed: bool = True) -> Iterator[Any]:
    """A transient rich Progress on `console` (label, bar, done/total, `extra` columns, elapsed time),
    disabled when `console` is no terminal (CI, pipes: the logs say enough); log lines go above it."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    columns = [label, BarColumn(), MofNCompleteColumn(), *extra] + ([TimeElapsedColumn()] if elapsed else [])
    with Progress(
        *columns,
        console=console,
        transient=True,
        disable=not console.is_terminal,
        redirect_stdout=sys.stdout.isatty(),  # a piped stdout stays a clean pipe
    ) as progress:
        if progress.disable:
            yield progress
            return
        with logs_above(progress.console):
            yield progress
