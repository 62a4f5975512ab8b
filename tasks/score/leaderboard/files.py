"""The leaderboard's files: the board, paired tests and win matrices as CSV, and ``leaderboard_files``
(everything `frame score` writes for the leaderboard).
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping, Sequence

import pandas as pd

from tasks.score.leaderboard.board import leaderboard
from tasks.score.leaderboard.core import (
    BOARD_COLUMNS,
    PAIRED_COLUMNS,
    WIN_COLUMNS,
    _checked_scores,
    metric_order,
    on_common,
)
from tasks.score.leaderboard.paired import paired_tests, win_matrices
from tasks.score.leaderboard.render import leaderboard_markdown


def _csv(frame: pd.DataFrame, columns: Sequence[str]) -> str:
    cols = [c for c in columns if c in frame.columns] + [c for c in frame.columns if c not in columns]
    buf = io.StringIO()
    frame[cols].to_csv(buf, index=False, float_format="%.6f", na_rep="", lineterminator="\n")
    return buf.getvalue()


def leaderboard_csv(board: pd.DataFrame) -> str:
    """The long-form board as CSV, one row per (system, scope, metric), scope "overall" or a category:
    fixed column order, floats as %.6f, NaN as empty, "\\n" line ends."""
    return _csv(board, BOARD_COLUMNS)


def paired_tests_csv(paired: pd.DataFrame) -> str:
    """``paired_tests`` as CSV (PAIRED_COLUMNS, floats as %.6f, NaN as empty, "\\n" line ends)."""
    return _csv(paired, PAIRED_COLUMNS)


def win_matrix_csv(wins: Mapping[str, pd.DataFrame]) -> str:
    """Win matrices in long form, one row per (metric, system, versus), system != versus: n compared
    instances, wins (system better), losses (versus better), ties. Metrics in metric order, systems in
    each matrix's order."""
    rows = []
    for metric in metric_order(wins.keys()):
        m = wins[metric]
        ties, n = m.attrs.get("ties") or {}, m.attrs.get("n") or {}
        for a in m.index:
            for b in m.columns:
                if a != b:
                    rows.append(
                        {
                            "metric": metric,
                            "system": a,
                            "versus": b,
                            "n": int(n.get(a, {}).get(b, 0)),
                            "wins": int(m.loc[a, b]),
                            "losses": int(m.loc[b, a]),
                            "ties": int(ties.get(a, {}).get(b, 0)),
                        }
                    )
    return _csv(pd.DataFrame(rows, columns=list(WIN_COLUMNS)), WIN_COLUMNS)


def leaderboard_tables(
    scores: pd.DataFrame, *, seed: int = 0, n_resamples: int = 2000, pairs: str = "next"
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, pd.DataFrame]]:
    """(board, paired tests, win matrices) of ``scores``: the board as ``leaderboard``, the paired tests
    (``pairs`` as in ``paired_tests``) and win matrices, like the board, over the instances every scored
    system has (``on_common``)."""
    board = leaderboard(scores, seed=seed, n_resamples=n_resamples)
    common, _ = on_common(_checked_scores(scores))
    paired = paired_tests(common, seed=seed, n_resamples=n_resamples, pairs=pairs)
    return board, paired, win_matrices(common)


def leaderboard_files(
    scores: pd.DataFrame,
    *,
    seed: int = 0,
    n_resamples: int = 2000,
    systems: Sequence[str] | None = None,
    notes: Mapping[str, str] | None = None,
    release: str | None = None,
    baselines: Iterable[str] | None = None,
    pairs: str = "next",
    generation: Mapping[str, Mapping] | None = None,
    tables: tuple[pd.DataFrame, pd.DataFrame, dict[str, pd.DataFrame]] | None = None,
) -> dict[str, str]:
    """Everything the leaderboard writes, by file name: leaderboard.md (title naming ``release``,
    board ordered by the primary score, paired tests, win matrices of the primary metrics),
    leaderboard.csv, paired_tests.csv, win_matrix.csv. The bootstrap and the permutation tests use
    ``n_resamples`` and ``seed``; ``pairs`` as in ``paired_tests``; ``systems``, ``notes``, ``baselines``
    and ``generation`` as in ``leaderboard_markdown``; ``tables``: ``leaderboard_tables`` already made."""
    board, paired, wins = tables or leaderboard_tables(
        scores, seed=seed, n_resamples=n_resamples, pairs=pairs
    )
    return {
        "leaderboard.md": leaderboard_markdown(
            board,
            systems=systems,
            notes=notes,
            paired=paired,
            wins=wins,
            release=release,
            baselines=baselines,
            generation=generation,
        ),
        "leaderboard.csv": leaderboard_csv(board),
        "paired_tests.csv": paired_tests_csv(paired),
        "win_matrix.csv": win_matrix_csv(wins),
    }
