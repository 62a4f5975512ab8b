"""Rubric item analysis (paper 003 Fig. 8): per rubric item its pass rate (mean credit: pass 1, partial
0.5, fail 0) overall and per system, how well it separates the systems (between-system SD of their
pass rates), and which failures occur together on the same report (counts, P(fail b | fail a), phi).

Input: the evidence rows of a `frame score` run with the rubric family (`evidence.parquet`, metric
"rubric": one row per decided item per report, kind "<layer>:<item id>", score = the credit; items not
applicable to a report have no row). `items_plot` draws both panels of Fig. 8 as PNG or SVG.
"""

from __future__ import annotations

import io
import itertools
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from tasks.errors import FrameInputError
from tasks.files import NotRegularFile, open_regular, within
from tasks.meta.reports import PARQUET_LIMIT
from tasks.score.align import shown
from tasks.score.rubric import rubric_items

__all__ = [
    "DECISION_COLUMNS",
    "cooccurrence",
    "item_table",
    "items_json",
    "items_plot",
    "load_decisions",
    "rubric_decisions",
    "system_table",
]

DECISION_COLUMNS = ("instance_id", "system", "layer", "item", "title", "credit")
_LAYER_COLOURS = {"G0": "#4c72b0", "G1": "#dd8452", "G2": "#55a868"}


# ---------------------------------------------------------------- decisions


def rubric_decisions(
    evidence: pd.DataFrame, *, metric: str = "rubric", systems: Sequence[str] | None = None
) -> pd.DataFrame:
    """One row per decided (report, item) of `metric`: DECISION_COLUMNS, in rubric order per report.

    `systems` keeps (and orders) those systems; naming one without decisions is a ValueError."""
    missing = [c for c in ("instance_id", "system", "metric", "kind", "text", "score") if c not in evidence]
    if missing:
        raise ValueError(f"not an evidence table: missing column(s) {', '.join(missing)}")
    rows = evidence[evidence["metric"] == metric]
    if systems:
        unknown = [s for s in systems if s not in set(rows["system"])]
        if unknown:
            raise ValueError(f"no {metric} decisions of system(s) {', '.join(unknown)}")
        rows = rows[rows["system"].isin(list(systems))]
    if rows.empty:
        raise ValueError(f"no {metric} decisions in the evidence table (score with --metrics rubric)")
    credit = pd.to_numeric(rows["score"], errors="coerce").astype(float)
    bad = ~credit.between(0.0, 1.0)  # NaN is not between
    if bad.any():
        at = rows[bad.values].iloc[0]
        raw = rows["score"][bad.values].iloc[0]
        raise ValueError(
            f"column score: {int(bad.sum()):,} of {len(rows):,} {metric} credit(s) not a number in 0-1 "
            f"(first: {shown(str(raw))} for {shown(str(at['instance_id']))}, {shown(str(at['system']))}, "
            f"{shown(str(at['kind']))})"
        )
    layer, _, item = rows["kind"].astype(str).str.partition(":").T.values
    out = pd.DataFrame(
        {
            "instance_id": rows["instance_id"].astype(str).values,
            "system": rows["system"].astype(str).values,
            "layer": layer,
            "item": np.where(item == "", layer, item),  # a kind without a layer prefix: the item itself
            "title": rows["text"].astype(str).values,
            "credit": credit.values,
        }
    )
    out["layer"] = np.where(out["item"] == out["layer"], "", out["layer"])
    out["_rank"] = out["item"].map(_rank())
    out = out.sort_values(["system", "instance_id", "_rank", "item"], kind="stable")
    return out.drop(columns="_rank").reset_index(drop=True)


def _rank() -> Any:
    """Item id -> its position in schemas/rubric.toml (items not in it after every item of it)."""
    rank = {it.id: i for i, it in enumerate(rubric_items())}
    return lambda item: rank.get(item, len(rank))


def load_decisions(
    scores: str | Path, *, metric: str = "rubric", systems: Sequence[str] | None = None
) -> pd.DataFrame:
    """`rubric_decisions` of a `frame score` output folder; input errors name the file or option. The
    evidence table is read only when it is a regular file inside the folder (a link out of it, a FIFO
    or a device is refused before it is opened) of at most PARQUET_LIMIT bytes."""
    path = Path(scores) / "evidence.parquet"
    if not os.path.lexists(path):
        raise FrameInputError(path, "missing: not a `frame score` output folder")
    try:
        return rubric_decisions(_evidence(path), metric=metric, systems=systems)
    except ValueError as exc:
        raise FrameInputError("--systems" if "system(s)" in str(exc) else path, str(exc)) from None


def _evidence(path: Path) -> pd.DataFrame:
    """The columns rubric_decisions reads of an evidence.parquet (ValueError when unreadable)."""
    try:
        folder, target = path.parent.resolve(), path.resolve()
        if not within(target, folder):
            raise FrameInputError(path, f"leads outside its folder {path.parent} (to {target}): refused")
        fd = open_regular(target, folder)
    except NotRegularFile as exc:
        raise FrameInputError(path, f"{exc}: refused") from None
    except (OSError, RuntimeError) as exc:
        raise FrameInputError(path, f"cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > PARQUET_LIMIT:
            raise FrameInputError(path, f"{size:,} bytes: over the {PARQUET_LIMIT:,}-byte limit of a table")
        try:
            parquet = pq.ParquetFile(f)
            wanted = ("instance_id", "system", "metric", "kind", "text", "score")
            columns = [c for c in wanted if c in parquet.schema_arrow.names]
            return parquet.read(columns=columns).to_pandas()
        except (pa.ArrowException, OSError) as exc:
            line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ValueError(f"not a readable parquet file ({line[:200]})") from None


def _item_order(decisions: pd.DataFrame) -> list[str]:
    """The decided items in rubric order (then by id)."""
    rank = _rank()
    return sorted(set(decisions["item"]), key=lambda i: (rank(i), i))


# ---------------------------------------------------------------- pass rate and discrimination


def system_table(decisions: pd.DataFrame) -> pd.DataFrame:
    """Per item and system: reports (decided), pass_rate (mean credit), passed (share decided pass)."""
    g = decisions.groupby(["item", "system"], sort=False)["credit"]
    out = pd.DataFrame(
        {"reports": g.size(), "pass_rate": g.mean(), "passed": g.apply(lambda c: float((c >= 1.0).mean()))}
    ).reset_index()
    order = {i: k for k, i in enumerate(_item_order(decisions))}
    systems = {s: k for k, s in enumerate(dict.fromkeys(decisions["system"]))}
    out = out.sort_values(["item", "system"], key=lambda s: s.map(order if s.name == "item" else systems))
    return out.reset_index(drop=True)


def item_table(decisions: pd.DataFrame) -> pd.DataFrame:
    """Per item (rubric order): layer, title, reports, pass_rate (mean credit), passed / partial / failed
    (shares of decisions), systems (how many decided it) and discrimination: the population SD (ddof 0)
    of the per-system pass rates (NaN with fewer than two systems)."""
    per_system = system_table(decisions)
    rows = []
    for item in _item_order(decisions):
        d = decisions[decisions["item"] == item]
        c = d["credit"].to_numpy(dtype=float)
        rates = per_system.loc[per_system["item"] == item, "pass_rate"].to_numpy(dtype=float)
        rows.append(
            {
                "item": item,
                "layer": d["layer"].iloc[0],
                "title": d["title"].iloc[0],
                "reports": len(c),
                "pass_rate": float(c.mean()),
                "passed": float((c >= 1.0).mean()),
                "partial": float(((c > 0.0) & (c < 1.0)).mean()),
                "failed": float((c <= 0.0).mean()),
                "systems": len(rates),
                "discrimination": float(rates.std(ddof=0)) if len(rates) >= 2 else math.nan,
            }
        )
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- failure co-occurrence


def _failures(decisions: pd.DataFrame, fail_below: float, by: str) -> pd.DataFrame:
    """A reports x units table: 1.0 failed, 0.0 decided and not failed, NaN not decided. A unit is an
    item, or with by="layer" a layer (failed when any of its decided items failed on the report)."""
    if by not in ("item", "layer"):
        raise ValueError(f"by must be 'item' or 'layer' (got {by!r})")
    d = decisions.assign(fail=(decisions["credit"] < fail_below).astype(float))
    units = _item_order(d) if by == "item" else list(dict.fromkeys(sorted(d["layer"])))
    wide = d.pivot_table(index=["instance_id", "system"], columns=by, values="fail", aggfunc="max")
    return wide.reindex(columns=units)


def _phi(n: int, fa: int, fb: int, both: int) -> float:
    den = fa * (n - fa) * fb * (n - fb)
    return (n * both - fa * fb) / math.sqrt(den) if den > 0 else math.nan


def cooccurrence(
    decisions: pd.DataFrame, *, fail_below: float = 1.0, by: Literal["item", "layer"] = "item"
) -> pd.DataFrame:
    """Failure co-occurrence over reports for every ordered pair (a, b), a != b, decided together on at
    least one report. An item fails on a report when its credit is below `fail_below` (1.0: partial and
    fail; 0.5: fail only). Columns: a, b, reports (both decided), fail_a, fail_b, both (both failed),
    p_b_given_a = both / fail_a, phi (the correlation of the two failure indicators); NaN undefined."""
    wide = _failures(decisions, fail_below, by)
    decided = wide.notna().to_numpy(dtype=float)
    failed = wide.fillna(0.0).to_numpy(dtype=float)
    # over the reports deciding both: reports, a failed, b failed, both failed (units x units)
    reports, fail_a, fail_b, both = (
        decided.T @ decided,
        failed.T @ decided,
        decided.T @ failed,
        failed.T @ failed,
    )
    units = list(wide.columns)
    rows = []
    for i, j in itertools.permutations(range(len(units)), 2):
        n, fa, fb, ab = (int(round(m[i, j])) for m in (reports, fail_a, fail_b, both))
        if n:
            rows.append(
                {
                    "a": units[i],
                    "b": units[j],
                    "reports": n,
                    "fail_a": fa,
                    "fail_b": fb,
                    "both": ab,
                    "p_b_given_a": ab / fa if fa else math.nan,
                    "phi": _phi(n, fa, fb, ab),
                }
            )
    cols = ["a", "b", "reports", "fail_a", "fail_b", "both", "p_b_given_a", "phi"]
    return pd.DataFrame(rows, columns=cols)


# ---------------------------------------------------------------- outputs


def items_json(items: pd.DataFrame, by_system: pd.DataFrame, pairs: pd.DataFrame) -> str:
    """JSON text {"items", "by_system", "cooccurrence"}: lists of rows, floats to 6 places, NaN null."""
    out = {
        name: json.loads(df.to_json(orient="records", double_precision=6))
        for name, df in (("items", items), ("by_system", by_system), ("cooccurrence", pairs))
    }
    return json.dumps(out, indent=2, sort_keys=True)


def _scatter(ax: Any, items: pd.DataFrame) -> None:
    """Left panel: pass rate (x) against discrimination (y), one labelled point per item."""
    for layer, sub in items.groupby("layer", sort=True):
        y = sub["discrimination"].fillna(0.0)
        ax.scatter(sub["pass_rate"], y, s=28, label=layer or "items", color=_LAYER_COLOURS.get(layer))
        for x, yy, name in zip(sub["pass_rate"], y, sub["item"], strict=True):
            if x < 1.0 or yy > 0.0:  # the items every report passes share one point: counted below
                ax.annotate(name, (x, yy), fontsize=6, xytext=(3, 2), textcoords="offset points")
    always = int(((items["pass_rate"] >= 1.0) & (items["discrimination"].fillna(0.0) <= 0.0)).sum())
    if always:
        ax.annotate(
            f"{always} item(s) always pass",
            (1.0, 0.0),
            fontsize=7,
            ha="right",
            xytext=(-6, 6),
            textcoords="offset points",
        )
    ax.set_xlim(-0.05, 1.05)
    ax.set_xlabel("pass rate (mean credit)")
    ax.set_ylabel("discrimination (between-system SD)")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize=8, frameon=False)


def _heatmap(fig: Figure, ax: Any, pairs: pd.DataFrame, units: list[str], value: str) -> None:
    """Right panel: `value` (phi or p_b_given_a) for each pair; row a, column b; grey where undefined."""
    pos = {u: i for i, u in enumerate(units)}
    grid = np.full((len(units), len(units)), np.nan)
    for r in pairs.itertuples(index=False):
        grid[pos[r.a], pos[r.b]] = getattr(r, value)
    lo, cmap = (-1.0, "RdBu_r") if value == "phi" else (0.0, "Reds")
    shown = np.ma.masked_invalid(grid)
    image = ax.imshow(shown, vmin=lo, vmax=1.0, cmap=cmap, aspect="auto")
    ax.set_facecolor("#dddddd")
    ax.set_xticks(range(len(units)), units, rotation=90, fontsize=6)
    ax.set_yticks(range(len(units)), units, fontsize=6)
    ax.set_title("P(fail b | fail a)" if value == "p_b_given_a" else "failure correlation (phi)", fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)


def items_plot(
    items: pd.DataFrame,
    pairs: pd.DataFrame,
    *,
    value: Literal["phi", "p_b_given_a"] = "phi",
    fmt: Literal["png", "svg"] = "png",
    dpi: int = 100,
) -> bytes:
    """Paper 003 Fig. 8 as one figure (`fmt` bytes): pass rate against discrimination per item, and the
    failure co-occurrence matrix of `pairs` (items, or layers, in the order of `items` where they are)."""
    if value not in ("phi", "p_b_given_a") or fmt not in ("png", "svg"):
        raise ValueError(f"value must be phi or p_b_given_a and fmt png or svg (got {value!r}, {fmt!r})")
    named = list(dict.fromkeys([*pairs["a"], *pairs["b"]]))
    order = {u: k for k, u in enumerate(items["item"])}
    units = sorted(named, key=lambda u: (order.get(u, len(order)), u))
    fig = Figure(figsize=(14, 6.2), dpi=dpi)
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.1]})
    _scatter(left, items)
    _heatmap(fig, right, pairs, units, value)
    fig.suptitle("Rubric items: difficulty, discrimination and failure co-occurrence", fontsize=10)
    fig.tight_layout()
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    meta = {"Software": None} if fmt == "png" else {"Date": None, "Creator": None}
    fig.savefig(buf, format=fmt, dpi=dpi, metadata=meta)
    return buf.getvalue()
