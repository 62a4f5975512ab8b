"""Formatting helpers of the diagnostic pages: page names, numbers and CIs, escaped table cells,
Markdown tables, release and date lines.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from tasks.score import registry
from tasks.score.diagnostic.analysis import _Cell, _Spread, _Stats, _width
from tasks.score.diagnostic.load import _Folder, _iso
from tasks.score.leaderboard import (
    SCOPE_LABELS,
)

TEXT_CUT = 200


# manifest keys that may record when the scores were computed (`frame score` writes scored_at)
DATE_KEYS: tuple[str, ...] = ("scored_at", "generated_at", "created_at", "date", "timestamp")


_MD_BACKSLASH = re.compile(r"\\(?=[\\`*_{}\[\]()#+\-.!|<>])")


def safe_name(system: str) -> str:
    """File stem of a system's page: characters outside [A-Za-z0-9._-] become "_" (no leading dot)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", str(system)) or "_"
    return "_" + name[1:] if name.startswith(".") else name


def _page_names(systems: Sequence[str]) -> dict[str, str]:
    """Unique file stems per system ("index" is taken by the index page)."""
    used = {"index"}
    out = {}
    for s in systems:
        base = safe_name(s)
        name, k = base, 2
        while name.lower() in used:
            name, k = f"{base}-{k}", k + 1
        used.add(name.lower())
        out[s] = name
    return out


def _num(metric: str, x: float) -> str:
    if x is None or math.isnan(x):
        return "–"
    w = _width(metric)
    return f"{x:.1f}" if w >= 50 else f"{x:.2f}" if w >= 5 else f"{x:.3f}"


def _ci(metric: str, cell: _Cell | None) -> str:
    if cell is None or math.isnan(cell.mean):
        return "–"
    return f"{_num(metric, cell.mean)} [{_num(metric, cell.low)}, {_num(metric, cell.high)}]"


def _txt(value: Any, cut: int | None = TEXT_CUT) -> str:
    """One Markdown table cell: one line, cut to ``cut`` chars, pipes / backticks / '<' escaped."""
    text = " ".join(str("" if value is None else value).split())
    if cut is not None and len(text) > cut:
        text = text[: cut - 1].rstrip() + "…"
    text = _MD_BACKSLASH.sub(r"\\\\", text)  # a backslash that Markdown would read as an escape
    return text.replace("|", "\\|").replace("`", "\\`").replace("<", "&lt;")


def _metric_label(metric: str) -> str:
    label = f"`{metric}`"
    lo, hi = registry.metric_range(metric)
    if (lo, hi) != (0.0, 1.0):
        label += f" ({lo:g}–{hi:g})"
    if metric in registry.lower_is_better():
        label += " ↓ lower is better"
    return label


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> list[str]:
    """Markdown table lines; ``align`` has one "l"/"r" per column (default left)."""
    align = align[: len(headers)].ljust(len(headers), "l")
    out = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|",
    ]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out + [""]


def _release_label(folder: _Folder) -> str:
    """The release as name/version: a manifest written by older code may hold the release's folder (even
    an absolute path): only its last two parts are shown, never a folder of the machine."""
    rel = folder.manifest.get("release")
    if rel:
        parts = [p for p in re.split(r"[\\/]+", str(rel)) if p]
        return _txt("/".join(parts[-2:]))
    return _txt(f"{folder.path.parent.name}/{folder.path.name}") + " (no manifest.json)"


def _scored_at(folder: _Folder) -> str:
    """When the scores were computed: the manifest's record, else when scores.parquet was written."""
    for key in DATE_KEYS:
        if folder.manifest.get(key):
            return _txt(folder.manifest[key])
    mtime = dt.datetime.fromtimestamp((folder.path / "scores.parquet").stat().st_mtime, dt.UTC)
    return f"{_iso(mtime)} (when scores.parquet was written; manifest.json records no time)"


def _dates(folder: _Folder) -> list[str]:
    return [f"- Scores computed: {_scored_at(folder)}", f"- Report generated: {folder.written}"]


def _category(c: str) -> str:
    """A category's display label: the release card's and the leaderboard's (schemas.config)."""
    return _txt(SCOPE_LABELS.get(c, c), None)


def _ci_note(st: _Stats) -> str:
    return (
        f"95% CI: percentile bootstrap over instances, {st.n_resamples} resamples, seed {st.seed} "
        "(the leaderboard's per-cell seeds)"
    )


def _fmt_cell(value: Any) -> str:
    if isinstance(value, float | np.floating):
        if math.isnan(value):
            return "–"
        return str(int(value)) if float(value).is_integer() else f"{value:.3f}"
    return _txt(value, 80)


def _spread_text(sp: _Spread) -> str:
    if math.isnan(sp.spread):
        return "n/a"
    return f"{sp.spread:.3f}"
