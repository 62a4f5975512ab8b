"""Judge-human alignment metrics (SPEC §4, paper 000 §4.4): score agreement (pa@0, pa@25, qwk, icc3_1,
icc_a1) and ranking agreement (Spearman r, Kendall tau-b) between an automated judge and human annotators.

Specification: docs/metrics/alignment.md
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from tasks.errors import FrameInputError

__all__ = [
    "GRID",
    "group_agreement",
    "ranking_rows",
    "number",
    "read_rows",
    "alignment",
    "bin_score",
    "icc",
    "kendall_tau_b",
    "load_scores",
    "main_json",
    "percentage_agreement",
    "quadratic_weighted_kappa",
    "ranking_agreement",
    "rankings_json",
    "spearman_r",
]

GRID: tuple[float, ...] = (0.0, 25.0, 50.0, 75.0, 100.0)
_PA_TOL = 1e-9


# --------------------------------------------------------------------------------------------- CSV input


def read_rows(path: str | Path, required: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    """Read a CSV with a header; return (line number, row) pairs. Raises FrameInputError on bad shape."""
    p = Path(path)
    if not p.exists():
        raise FrameInputError(p, "file not found")
    if not p.is_file():
        raise FrameInputError(p, "not a regular file")
    try:
        text = p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FrameInputError(p, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise FrameInputError(p, f"cannot read file ({exc.strerror})") from None
    reader = csv.reader(text.splitlines())
    try:
        header = next(reader)
    except StopIteration:
        raise FrameInputError(p, f"empty file; expected a header with columns {','.join(required)}") from None
    except csv.Error as exc:
        raise FrameInputError(p, f"malformed CSV header ({exc})") from None
    header = [h.strip() for h in header]
    missing = [c for c in required if c not in header]
    if missing:
        raise FrameInputError(
            p,
            f"missing column(s) {','.join(missing)}; header is {','.join(header) or '(empty)'}"
            f", expected {','.join(required)}",
        )
    rows: list[tuple[int, dict[str, str]]] = []
    try:
        for fields in reader:
            line = reader.line_num
            if not fields or all(not f.strip() for f in fields):
                continue  # blank line
            if len(fields) != len(header):
                raise FrameInputError(
                    p, f"row at line {line} has {len(fields)} fields, header has {len(header)}"
                )
            rows.append((line, {h: f.strip() for h, f in zip(header, fields, strict=True)}))
    except csv.Error as exc:
        raise FrameInputError(p, f"malformed CSV at line {reader.line_num} ({exc})") from None
    if not rows:
        raise FrameInputError(p, "no data rows")
    return rows


def number(path: str | Path, line: int, column: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise FrameInputError(path, f"row at line {line}: {column} {raw!r} is not a finite number")
    return value


def load_scores(path: str | Path) -> dict[str, float]:
    """Load ``item_id,score`` rows (score on the 0-100 scale) into ``{item_id: score}``.

    Extra columns are ignored. Raises :class:`FrameInputError` (one line, naming the file and the row by
    its line number) for a missing file, missing columns, an empty item_id, a non-numeric or
    out-of-range score, or a duplicate item_id.
    """
    scores: dict[str, float] = {}
    first_line: dict[str, int] = {}
    for line, row in read_rows(path, ("item_id", "score")):
        item = row["item_id"]
        if not item:
            raise FrameInputError(path, f"row at line {line}: empty item_id")
        value = number(path, line, "score", row["score"])
        if not 0.0 <= value <= 100.0:
            raise FrameInputError(path, f"row at line {line} (item_id={item}): score {value:g} outside 0-100")
        if item in scores:
            raise FrameInputError(
                path, f"row at line {line}: duplicate item_id {item!r} (first at line {first_line[item]})"
            )
        scores[item] = value
        first_line[item] = line
    return scores


# ------------------------------------------------------------------------------------------ score metrics


def bin_score(x: float | np.ndarray) -> np.ndarray:
    """Index (0..4) of the nearest level of 0/25/50/75/100, rounding halves up, clipped to the grid."""
    arr = np.asarray(x, dtype=float)
    return np.clip(np.floor(arr / 25.0 + 0.5), 0, 4).astype(int)


def percentage_agreement(human: np.ndarray, judge: np.ndarray, k: float) -> float:
    """Share of items with ``|human - judge| <= k`` (fraction in [0, 1])."""
    diff = np.abs(np.asarray(human, dtype=float) - np.asarray(judge, dtype=float))
    return float(np.mean(diff <= k + _PA_TOL))


def quadratic_weighted_kappa(a: np.ndarray, b: np.ndarray, n_levels: int = 5) -> float:
    """Cohen's quadratic weighted kappa of two integer level arrays in ``0..n_levels-1``.

    Returns 1.0 when the expected weighted disagreement is zero (both raters use one and the same level).
    """
    a = np.asarray(a, dtype=int)
    b = np.asarray(b, dtype=int)
    observed = np.zeros((n_levels, n_levels))
    np.add.at(observed, (a, b), 1.0)
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / observed.sum()
    idx = np.arange(n_levels)
    weights = (idx[:, None] - idx[None, :]) ** 2 / float((n_levels - 1) ** 2)
    denom = float((weights * expected).sum())
    if denom <= 0.0:
        return 1.0
    return 1.0 - float((weights * observed).sum()) / denom


def icc(human: np.ndarray, judge: np.ndarray) -> tuple[float | None, float | None]:
    """(ICC(3,1) consistency, ICC(A,1) absolute agreement) for two raters; ``None`` where undefined."""
    y = np.column_stack([np.asarray(human, dtype=float), np.asarray(judge, dtype=float)])
    n, k = y.shape
    if n < 2:
        return None, None
    grand = y.mean()
    ss_total = float(((y - grand) ** 2).sum())
    ss_rows = k * float(((y.mean(axis=1) - grand) ** 2).sum())
    ss_cols = n * float(((y.mean(axis=0) - grand) ** 2).sum())
    ss_err = max(ss_total - ss_rows - ss_cols, 0.0)
    msr = ss_rows / (n - 1)
    msc = ss_cols / (k - 1)
    mse = ss_err / ((n - 1) * (k - 1))
    # Treat denominators that are zero up to round-off (relative to the data's magnitude) as zero.
    eps = 1e-12 * max(1.0, float((y**2).mean()))

    def ratio(num: float, den: float) -> float | None:
        if not math.isfinite(den) or abs(den) <= eps:
            return None
        value = num / den
        return value if math.isfinite(value) else None

    icc3 = ratio(msr - mse, msr + (k - 1) * mse)
    icca = ratio(msr - mse, msr + (k - 1) * mse + k / n * (msc - mse))
    return icc3, icca


def alignment(human: dict[str, float], judge: dict[str, float]) -> dict[str, Any]:
    """Agreement metrics of judge vs human scores (0-100), inner-joined on item_id.

    Keys: ``pa@0``, ``pa@25`` (fractions), ``qwk`` (judge *and* human rounded half-up to the nearest of
    0/25/50/75/100; human scores should already be on that grid), ``icc3_1``, ``icc_a1`` (``None`` when
    undefined) and ``n``. Raises :class:`FrameInputError` when no item_id is shared.
    """
    items = sorted(set(human) & set(judge))
    if not items:
        raise FrameInputError(
            "alignment",
            f"no item_id in common between human ({len(human)} items) and judge ({len(judge)} items) scores",
        )
    h = np.array([human[i] for i in items], dtype=float)
    j = np.array([judge[i] for i in items], dtype=float)
    icc3, icca = icc(h, j)
    return {
        "pa@0": percentage_agreement(h, j, 0.0),
        "pa@25": percentage_agreement(h, j, 25.0),
        "qwk": quadratic_weighted_kappa(bin_score(h), bin_score(j)),
        "icc3_1": icc3,
        "icc_a1": icca,
        "n": len(items),
    }


# ---------------------------------------------------------------------------------------- ranking metrics


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks with ties given the mean of their positions."""
    x = np.asarray(x, dtype=float)
    order = np.argsort(x, kind="mergesort")
    sorted_x = x[order]
    ranks = np.empty(len(x))
    start = 0
    while start < len(x):
        end = start
        while end + 1 < len(x) and sorted_x[end + 1] == sorted_x[start]:
            end += 1
        ranks[order[start : end + 1]] = (start + end) / 2.0 + 1.0
        start = end + 1
    return ranks


def spearman_r(x: np.ndarray, y: np.ndarray) -> float | None:
    """Spearman rank correlation (Pearson on average ranks); ``None`` if undefined."""
    rx, ry = _average_ranks(x), _average_ranks(y)
    if len(rx) < 2:
        return None
    dx, dy = rx - rx.mean(), ry - ry.mean()
    den = math.sqrt(float((dx * dx).sum()) * float((dy * dy).sum()))
    if den == 0.0:
        return None
    return float((dx * dy).sum()) / den


def kendall_tau_b(x: np.ndarray, y: np.ndarray) -> float | None:
    """Kendall tau-b (tie-corrected); ``None`` if undefined. O(n^2), fine for per-group system lists."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    n = len(x)
    if n < 2:
        return None
    iu = np.triu_indices(n, k=1)
    sx = np.sign(x[:, None] - x[None, :])[iu]
    sy = np.sign(y[:, None] - y[None, :])[iu]
    n0 = n * (n - 1) / 2
    untied_x = n0 - float((sx == 0).sum())
    untied_y = n0 - float((sy == 0).sum())
    den = math.sqrt(untied_x * untied_y)
    if den == 0.0:
        return None
    return float((sx * sy).sum()) / den


def ranking_agreement(path: str | Path) -> dict[str, Any]:
    """Mean per-group Spearman r and Kendall tau-b between human ranks and judge scores.

    CSV columns ``group_id,system,human_rank,score``. Human rank 1 is the best system while a higher judge
    score is better, so each group correlates ``-human_rank`` with ``score``: perfect agreement gives +1,
    a reversed order -1. Ties (equal ranks or scores) are allowed (average ranks / tau-b).

    Returns ``spearman_r``, ``kendall_tau`` (means over usable groups, ``None`` if none), ``groups``
    (number of usable groups) and ``n`` (systems in those groups). Groups with fewer than 2 systems or a
    constant ranking/score are skipped (correlation undefined). Raises :class:`FrameInputError` for a
    missing file or column, non-numeric rank/score, or a repeated (group_id, system).
    """
    groups: dict[str, list[tuple[float, float]]] = {}
    for _, group, _, rank, score in ranking_rows(path):
        groups.setdefault(group, []).append((rank, score))
    return group_agreement(groups)


RankingRow = tuple[int, str, str, float, float | None]  # line, group_id, system, human_rank, score


def ranking_rows(path: str | Path, with_score: bool = True) -> list[RankingRow]:
    """(line, group_id, system, human_rank, score) of a rankings CSV (score None when `with_score` is off:
    the column may then be absent). FrameInputError for a missing file or column, an empty group_id or
    system, a non-numeric value or a repeated (group_id, system)."""
    out: list[RankingRow] = []
    seen: dict[tuple[str, str], int] = {}
    columns = ("group_id", "system", "human_rank", *(("score",) if with_score else ()))
    for line, row in read_rows(path, columns):
        group, system = row["group_id"], row["system"]
        if not group or not system:
            raise FrameInputError(path, f"row at line {line}: empty group_id or system")
        rank = number(path, line, "human_rank", row["human_rank"])
        score = number(path, line, "score", row["score"]) if with_score else None
        if (group, system) in seen:
            raise FrameInputError(
                path,
                f"row at line {line}: duplicate system {system!r} in group {group!r} "
                f"(first at line {seen[(group, system)]})",
            )
        seen[(group, system)] = line
        out.append((line, group, system, rank, score))
    return out


def group_agreement(groups: dict[str, list[tuple[float, float]]]) -> dict[str, Any]:
    """Mean per-group Spearman r and Kendall tau-b of (-human_rank, score) pairs; a group where either is
    undefined (fewer than two members, or ties everywhere) is skipped."""
    rs: list[float] = []
    taus: list[float] = []
    n = 0
    for members in groups.values():
        arr = np.array(members, dtype=float)
        r = spearman_r(-arr[:, 0], arr[:, 1])
        tau = kendall_tau_b(-arr[:, 0], arr[:, 1])
        if r is None or tau is None:
            continue
        rs.append(r)
        taus.append(tau)
        n += len(members)
    return {
        "spearman_r": float(np.mean(rs)) if rs else None,
        "kendall_tau": float(np.mean(taus)) if taus else None,
        "groups": len(rs),
        "n": n,
    }


# ------------------------------------------------------------------------------------------------ JSON


def _rounded(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, float):
        return round(value, 6) if math.isfinite(value) else None
    return value


def _dumps(result: dict[str, Any]) -> str:
    return json.dumps(_rounded(result), sort_keys=True, indent=2, allow_nan=False)


def main_json(human_csv: str | Path, judge_csv: str | Path) -> str:
    """JSON text (sorted keys, floats rounded to 6 places, undefined -> null) of :func:`alignment`."""
    human, judge = load_scores(human_csv), load_scores(judge_csv)
    if not set(human) & set(judge):
        raise FrameInputError(judge_csv, f"no item_id in common with the human scores in {human_csv}")
    return _dumps(alignment(human, judge))


def rankings_json(path: str | Path) -> str:
    """JSON text (sorted keys, floats rounded to 6 places, undefined -> null) of :func:`ranking_agreement`."""
    return _dumps(ranking_agreement(path))
