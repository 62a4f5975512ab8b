"""Per-system diagnostic pages of a scores folder: where a system stands, on which axes, and why; an index
with the systems in leaderboard order and the trend plots (embedded in the HTML, linked to the PNGs).

Specification: docs/diagnostics.md, section "System pages"

The package: load (the scores folder), analysis (means, ranks, spreads), formatting, sections and failures
(a page's parts), pages (the files written).
"""

from __future__ import annotations

from tasks.score.diagnostic.analysis import GOLD, SATURATION_SPREAD
from tasks.score.diagnostic.failures import MISS_BELOW as MISS_BELOW
from tasks.score.diagnostic.formatting import DATE_KEYS as DATE_KEYS
from tasks.score.diagnostic.formatting import TEXT_CUT as TEXT_CUT
from tasks.score.diagnostic.formatting import safe_name
from tasks.score.diagnostic.load import REQUIRED_BT as REQUIRED_BT
from tasks.score.diagnostic.load import REQUIRED_EVIDENCE as REQUIRED_EVIDENCE
from tasks.score.diagnostic.load import REQUIRED_PAIRWISE as REQUIRED_PAIRWISE
from tasks.score.diagnostic.load import REQUIRED_SCORES as REQUIRED_SCORES
from tasks.score.diagnostic.pages import PLOT_SUFFIX as PLOT_SUFFIX
from tasks.score.diagnostic.pages import render_index, render_system_reports
from tasks.score.diagnostic.sections import SATURATED as SATURATED
from tasks.score.diagnostic.sections import WORST_N as WORST_N

__all__ = [
    "GOLD",
    "SATURATION_SPREAD",
    "render_index",
    "render_system_reports",
    "safe_name",
]
