"""Judge-human alignment metrics (SPEC §4, paper 000 §4.4): score agreement (pa@0, pa@25, qwk, icc3_1,
icc_a1) and ranking agreement (Spearman r, Kendall tau-b) between an automated judge and human annotators.

Input files are what a user brings (docs/security.md): a CSV is read only when it is a regular file of at
most MAX_CSV_BYTES (a link the user gives is followed; a FIFO or device is refused before it is opened),
with at most MAX_CSV_ROWS data rows, and an error never shows more of it than a few column names or
values, each cut to SHOWN_CHARS characters, escaped, and scrubbed of known keys.

Specification: docs/metrics/alignment.md
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tasks.errors import FrameInputError
from tasks.files import NotRegularFile, read_regular
from tasks.llm.redact import scrub

__all__ = [
    "GRID",
    "MAX_CSV_BYTES",
    "MAX_CSV_ROWS",
    "group_agreement",
    "ranking_rows",
    "number",
    "read_rows",
    "read_table",
    "scores_of",
    "shown",
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
MAX_CSV_BYTES = 64 * 1024 * 1024  # an input CSV larger than this is refused before it is read
MAX_CSV_ROWS = 1_000_000  # data rows of one input CSV
SHOWN_CHARS = 100  # characters of one value (an item id, a system) an error message shows
SHOWN_NAME_CHARS = 40  # characters of one column name an error message shows
SHOWN_COLUMNS = 5  # column names an error message shows


# --------------------------------------------------------------------------------------------- CSV input


def shown(value: str, quoted: bool = True, limit: int = SHOWN_CHARS) -> str:
    """A value read from an input file as an error message shows it: known keys scrubbed, escaped like
    repr (no control character or line break reaches the terminal), cut to `limit` characters."""
    text = scrub(str(value))
    cut = text[:limit]
    out = repr(cut) if quoted else repr(cut)[1:-1]
    return out + (f"... ({len(text):,} characters)" if len(text) > limit else "")


def _plain_name(name: str) -> bool:
    """A column name an error may show: short, printable, not `KEY=value` / `Name: value` text."""
    return len(name) <= SHOWN_NAME_CHARS and name.isprintable() and not any(c in name for c in "=:")


def _columns(header: Sequence[str]) -> str:
    """The header as an error describes it: its size and at most SHOWN_COLUMNS plain names; anything
    else (a line of a key file, of /proc/self/environ, of megabytes) only by its length."""
    names = [shown(h) if _plain_name(h) else f"<{len(h):,} characters, not shown>" for h in header]
    more = f" and {len(header) - SHOWN_COLUMNS:,} more" if len(header) > SHOWN_COLUMNS else ""
    return f"{len(header):,} column(s): {', '.join(names[:SHOWN_COLUMNS])}{more}"


def _text(p: Path) -> str:
    """The text of the CSV file `p`: a regular file (a link is followed) of at most MAX_CSV_BYTES."""
    try:
        target = p.resolve(strict=True)
    except FileNotFoundError:
        raise FrameInputError(p, "file not found") from None
    except (OSError, RuntimeError) as exc:  # RuntimeError: a loop of links
        raise FrameInputError(p, f"cannot read file ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        size = os.stat(target).st_size
        if size > MAX_CSV_BYTES:
            raise FrameInputError(p, f"{size:,} bytes: over the {MAX_CSV_BYTES:,}-byte limit of an input CSV")
        data = read_regular(target, MAX_CSV_BYTES + 1)
    except NotRegularFile as exc:
        raise FrameInputError(p, f"{exc}: refused") from None
    except OSError as exc:
        raise FrameInputError(p, f"cannot read file ({exc.strerror or exc})") from None
    if len(data) > MAX_CSV_BYTES:  # a file that grew, or one whose size stat does not know (/proc)
        raise FrameInputError(p, f"more than {MAX_CSV_BYTES:,} bytes: over the limit of an input CSV")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FrameInputError(p, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_table(
    path: str | Path, required: tuple[str, ...], optional: tuple[str, ...] = ()
) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """(header, [(line number, row)]) of a CSV with a header; each row holds the `required` columns and
    those of `optional` the header has (values stripped). FrameInputError (one line naming the file) for
    a file that is missing, not a regular file, over MAX_CSV_BYTES or MAX_CSV_ROWS, not UTF-8, without a
    required column or with one twice, or with a row of another width."""
    p = Path(path)
    reader = csv.reader(io.StringIO(_text(p), newline=""))  # lines end at \n, \r\n or \r only
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
            f"missing column(s) {','.join(missing)}; expected {','.join(required)}, the header has "
            f"{_columns(header)}",
        )
    for c in (*required, *optional):
        at = [k + 1 for k, h in enumerate(header) if h == c]
        if len(at) > 1:
            raise FrameInputError(
                p, f"column {shown(c)} appears {len(at)} times in the header (columns {at[0]} and {at[1]})"
            )
    keep = [(k, h) for k, h in enumerate(header) if h in required or h in optional]
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
            if len(rows) >= MAX_CSV_ROWS:
                raise FrameInputError(
                    p, f"more than {MAX_CSV_ROWS:,} data rows: over the limit of an input CSV"
                )
            rows.append((line, {h: fields[k].strip() for k, h in keep}))
    except csv.Error as exc:
        raise FrameInputError(p, f"malformed CSV at line {reader.line_num} ({exc})") from None
    if not rows:
        raise FrameInputError(p, "no data rows")
    return header, rows


def read_rows(path: str | Path, required: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    """(line number, row) pairs of a CSV with a header (read_table, the `required` columns only)."""
    return read_table(path, required)[1]


def number(path: str | Path, line: int, column: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise FrameInputError(path, f"row at line {line}: {column} {shown(raw)} is not a finite number")
    return value


def scores_of(path: str | Path, rows: Sequence[tuple[int, dict[str, str]]]) -> dict[str, float]:
    """``{item_id: score}`` of rows read with columns item_id, score (load_scores' checks)."""
    scores: dict[str, float] = {}
    first_line: dict[str, int] = {}
    for line, row in rows:
        item = row["item_id"]
        if not item:
            raise FrameInputError(path, f"row at line {line}: empty item_id")
        value = number(path, line, "score", row["score"])
        if not 0.0 <= value <= 100.0:
            raise FrameInputError(
                path,
                f"row at line {line} (item_id={shown(item, quoted=False)}): score {value:g} outside 0-100",
            )
        if item in scores:
            raise FrameInputError(
                path,
                f"row at line {line}: duplicate item_id {shown(item)} (first at line {first_line[item]})",
            )
        scores[item] = value
        first_line[item] = line
    return scores


def load_scores(path: str | Path) -> dict[str, float]:
    """Load ``item_id,score`` rows (score on the 0-100 scale) into ``{item_id: score}``.

    Extra columns are ignored. Raises :class:`FrameInputError` (one line, naming the file and the row by
    its line number) for a missing file, missing columns, an empty item_id, a non-numeric or
    out-of-range score, or a duplicate item_id.
    """
    return scores_of(path, read_rows(path, ("item_id", "score")))


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
    undefined; ``qwk`` too with fewer than two items) and ``n``. Raises :class:`FrameInputError` when no
    item_id is shared.
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
        "qwk": quadratic_weighted_kappa(bin_score(h), bin_score(j)) if len(items) >= 2 else None,
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


_PAIRWISE_MAX = 256  # up to this many members tau-b counts the pairs directly (exact, no scipy import)


def kendall_tau_b(x: np.ndarray, y: np.ndarray) -> float | None:
    """Kendall tau-b (tie-corrected); ``None`` if undefined (fewer than two members, or every x or every
    y tied). Up to _PAIRWISE_MAX members it counts the n(n-1)/2 pairs (sign matrices); above, scipy's
    O(n log n) tau-b, so that memory stays linear in n (a group of 20,000 members: milliseconds)."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    n = len(x)
    if n < 2:
        return None
    if n > _PAIRWISE_MAX:
        from scipy.stats import kendalltau

        tau = float(kendalltau(x, y, variant="b", method="asymptotic").statistic)
        return tau if math.isfinite(tau) else None
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
                f"row at line {line}: duplicate system {shown(system)} in group {shown(group)} "
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


def _stderr_warning(text: str) -> None:
    print(f"frame: warning: {text}", file=sys.stderr)


def _first(ids: Sequence[str], k: int = 3) -> str:
    return ", ".join(shown(i) for i in ids[:k]) + (", ..." if len(ids) > k else "")


def main_json(
    human_csv: str | Path,
    judge_csv: str | Path,
    allow_partial: bool = False,
    warn: Callable[[str], None] = _stderr_warning,
) -> str:
    """JSON text (sorted keys, floats rounded to 6 places, undefined -> null) of :func:`alignment`.

    What the join leaves out is said through `warn` (default: a `frame: warning:` line on stderr): how
    many items and the first ids. An error: no shared item, or fewer than half of the human items with a
    judge score (unless `allow_partial`). A side whose every score is <= 1 while the other's go above 1
    is warned about (a 0-1 scale where 0-100 is expected)."""
    human, judge = load_scores(human_csv), load_scores(judge_csv)
    shared = set(human) & set(judge)
    if not shared:
        raise FrameInputError(judge_csv, f"no item_id in common with the human scores in {human_csv}")
    unjudged = sorted(set(human) - shared)
    if 2 * len(shared) < len(human) and not allow_partial:
        raise FrameInputError(
            judge_csv,
            f"scores only {len(shared):,} of the {len(human):,} human items of {human_csv} (first missing: "
            f"{_first(unjudged)}): fewer than half match; check the files, or pass --allow-partial",
        )
    if unjudged:
        warn(
            f"{judge_csv}: no score for {len(unjudged):,} of the {len(human):,} human items of {human_csv} "
            f"(first: {_first(unjudged)}): left out, n = {len(shared):,}"
        )
    unrated = sorted(set(judge) - shared)
    if unrated:
        warn(
            f"{human_csv}: no human score for {len(unrated):,} of the {len(judge):,} items of {judge_csv} "
            f"(first: {_first(unrated)}): left out"
        )
    sides = ((human_csv, max(human.values())), (judge_csv, max(judge.values())))
    for (path, top), (other, other_top) in (sides, sides[::-1]):
        if top <= 1.0 < other_top:
            warn(
                f"{path}: every score is <= 1 while those of {other} reach {other_top:g}: both must be on "
                f"the 0-100 scale (a 0-1 score times 100)"
            )
    return _dumps(alignment(human, judge))


def rankings_json(path: str | Path) -> str:
    """JSON text (sorted keys, floats rounded to 6 places, undefined -> null) of :func:`ranking_agreement`."""
    return _dumps(ranking_agreement(path))
