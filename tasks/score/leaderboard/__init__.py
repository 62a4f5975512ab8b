"""Leaderboard of scored systems (paper 000 Table 6): bootstrap CIs, paired tests, win matrices.

From the long score table (one row per instance, system, metric; NaN = undefined): ``leaderboard`` (mean
and seeded percentile bootstrap CI per system, scope and metric, plus the FRAME score that orders the
systems), ``leaderboard_markdown`` (title, systems best first, gold marked as the ceiling, baselines
marked), ``paired_tests`` (each system vs the next best) and ``win_matrix`` (per-instance wins). The
output is the same bytes whatever the row order of the input. Definitions: docs/metrics/leaderboard.md.
The package: core (constants, bootstrap CI, orders), board, paired (tests, win matrices), render
(Markdown), files (CSV and the files written).
"""

from __future__ import annotations

from schemas.config import CATEGORY_ORDER
from tasks.score.leaderboard.board import leaderboard, primary_scores, ranking_metrics
from tasks.score.leaderboard.core import (
    BASELINES,
    BOARD_COLUMNS,
    OVERALL,
    PAIRED_COLUMNS,
    PRIMARY,
    PRIMARY_COLUMNS,
    REFERENCE,
    SCOPE_LABELS,
    SKIPPED,
    WIN_COLUMNS,
    bootstrap_ci,
    cell_seed,
    metric_order,
    scope_order,
)
from tasks.score.leaderboard.core import CI_METHOD as CI_METHOD
from tasks.score.leaderboard.core import PAIRED_METHOD as PAIRED_METHOD
from tasks.score.leaderboard.core import PRIMARY_LABEL as PRIMARY_LABEL
from tasks.score.leaderboard.core import PRIMARY_METHOD as PRIMARY_METHOD
from tasks.score.leaderboard.core import REQUIRED_SCORE_COLUMNS as REQUIRED_SCORE_COLUMNS
from tasks.score.leaderboard.core import TIE_TOLERANCE as TIE_TOLERANCE
from tasks.score.leaderboard.files import leaderboard_csv, leaderboard_files, paired_tests_csv, win_matrix_csv
from tasks.score.leaderboard.paired import (
    pair_seed,
    paired_tests,
    primary_metrics,
    ranking,
    win_matrices,
    win_matrix,
)
from tasks.score.leaderboard.render import BASELINE as BASELINE
from tasks.score.leaderboard.render import CEILING as CEILING
from tasks.score.leaderboard.render import SELF_JUDGED as SELF_JUDGED
from tasks.score.leaderboard.render import leaderboard_markdown, self_judged_notes

__all__ = [
    "BASELINES",
    "BOARD_COLUMNS",
    "CATEGORY_ORDER",
    "OVERALL",
    "PAIRED_COLUMNS",
    "PRIMARY",
    "PRIMARY_COLUMNS",
    "REFERENCE",
    "SCOPE_LABELS",
    "SKIPPED",
    "WIN_COLUMNS",
    "bootstrap_ci",
    "cell_seed",
    "leaderboard",
    "leaderboard_csv",
    "leaderboard_files",
    "leaderboard_markdown",
    "metric_order",
    "pair_seed",
    "paired_tests",
    "paired_tests_csv",
    "primary_metrics",
    "primary_scores",
    "ranking",
    "ranking_metrics",
    "scope_order",
    "self_judged_notes",
    "win_matrices",
    "win_matrix",
    "win_matrix_csv",
]
