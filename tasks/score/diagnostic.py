"""Per-system diagnostic pages of a scores folder: where a system stands, on which axes, and why; an index
with the systems in leaderboard order and the trend plots (embedded in the HTML, linked to the PNGs).

Specification: docs/diagnostics.md, section "System pages"
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import json
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import markdown as markdown_lib
import numpy as np
import pandas as pd

from tasks.atomic import atomic_write_bytes, atomic_write_text
from tasks.errors import FrameInputError
from tasks.score import registry
from tasks.score.leaderboard import (
    OVERALL,
    PRIMARY_LABEL,
    SCOPE_LABELS,
    bootstrap_ci,
    cell_seed,
    metric_order,
    primary_scores,
    scope_order,
)

__all__ = [
    "GOLD",
    "SATURATION_SPREAD",
    "render_index",
    "render_system_reports",
    "safe_name",
]

GOLD = "gold"  # pseudo-system: the gold report scored against itself (reference, not a competitor)
SATURATION_SPREAD = 0.05  # relative spread below which a metric does not separate systems
SATURATED = "saturated: does not separate systems"
MISS_BELOW = 0.5  # a gold unit / claim scoring below this is missed / unsupported
TEXT_CUT = 200
WORST_N = 5
REQUIRED_SCORES: tuple[str, ...] = ("instance_id", "category", "system", "metric", "value")
REQUIRED_EVIDENCE: tuple[str, ...] = ("instance_id", "system", "metric", "kind", "text", "score")
REQUIRED_PAIRWISE: tuple[str, ...] = ("system_a", "system_b", "vote")
REQUIRED_BT: tuple[str, ...] = ("system", "score")
# manifest keys that may record when the scores were computed (`frame score` writes scored_at)
DATE_KEYS: tuple[str, ...] = ("scored_at", "generated_at", "created_at", "date", "timestamp")
PLOT_SUFFIX = "_vs_buckets.png"
_RUBRIC_KIND = re.compile(r"^G\d+\s*:")
_MD_BACKSLASH = re.compile(r"\\(?=[\\`*_{}\[\]()#+\-.!|<>])")
_LOCAL_MD_LINK = re.compile(r'href="([^":/?#]+)\.md(#[^"]*)?"')
_IMG_SRC = re.compile(r'(<img\b[^>]*\bsrc=")([^"]+)(")')
_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2rem auto;max-width:1280px;
padding:0 1rem;color:#1d1d1f;line-height:1.45;font-size:15px}
h1{font-size:1.6rem;border-bottom:2px solid #ddd;padding-bottom:.3rem}h2{margin-top:2rem;font-size:1.25rem}
h3{font-size:1.05rem}table{border-collapse:collapse;margin:.6rem 0 1rem;display:block;overflow-x:auto}
th,td{border:1px solid #d8d8d8;padding:3px 8px;vertical-align:top;font-size:.88rem}
th{background:#f2f2f4}tbody tr:nth-child(even){background:#fafafa}code{background:#f2f2f4;padding:0 3px}
a{color:#0a58ca}em{color:#555}img{max-width:100%;height:auto;border:1px solid #eee}
""".strip()


# ---------------------------------------------------------------------------------------------- loading


@dataclass
class _Folder:
    path: Path
    scores: pd.DataFrame
    evidence: pd.DataFrame | None
    manifest: dict[str, Any]
    bt: pd.DataFrame | None
    pairwise: pd.DataFrame | None
    written: str = ""  # when the pages are written (UTC)


def _one_line(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}"


def _check_columns(path: Path, df: pd.DataFrame, required: Sequence[str]) -> None:
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise FrameInputError(
            path, f"lacks column(s) {', '.join(missing)} (has: {', '.join(map(str, df.columns))})"
        )


def _read_parquet(path: Path, required: Sequence[str]) -> pd.DataFrame:
    try:
        df = pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several types for a bad file
        raise FrameInputError(path, f"cannot be read as parquet ({_one_line(exc)})") from exc
    _check_columns(path, df, required)
    return df


def _load(scores_dir: Path) -> _Folder:
    scores_dir = Path(scores_dir)
    path = scores_dir / "scores.parquet"
    if not path.is_file():
        raise FrameInputError(path, "not found: point --scores at a folder written by `frame score`")
    scores = _read_parquet(path, REQUIRED_SCORES)
    if scores.empty:
        raise FrameInputError(path, "has no rows")
    scores = scores.copy()
    for c in ("instance_id", "system", "metric"):
        scores[c] = scores[c].astype(str)
    scores["category"] = scores["category"].fillna("").astype(str)
    scores["judge"] = scores["judge"].fillna("").astype(str) if "judge" in scores.columns else ""
    scores["value"] = pd.to_numeric(scores["value"], errors="coerce").astype(float)
    dup = scores.duplicated(["instance_id", "system", "metric"], keep=False)
    if dup.any():
        ex = scores.loc[dup, ["instance_id", "system", "metric"]].iloc[0].tolist()
        raise FrameInputError(
            path, f"{int(dup.sum())} duplicate (instance_id, system, metric) rows, e.g. {ex}"
        )

    manifest: dict[str, Any] = {}
    mpath = scores_dir / "manifest.json"
    if mpath.is_file():
        try:
            manifest = json.loads(mpath.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise FrameInputError(mpath, f"cannot be read as JSON ({_one_line(exc)})") from exc
        if not isinstance(manifest, dict):
            raise FrameInputError(mpath, "is not a JSON object")

    evidence = None
    epath = scores_dir / "evidence.parquet"
    if epath.is_file():
        evidence = _read_parquet(epath, REQUIRED_EVIDENCE).copy()
        for c in ("instance_id", "system", "metric", "kind", "text"):
            evidence[c] = evidence[c].fillna("").astype(str)
        for c in ("evidence", "evidence_ref", "rationale", "source"):
            evidence[c] = evidence[c].fillna("").astype(str) if c in evidence.columns else ""
        if "index" not in evidence.columns:
            evidence["index"] = range(len(evidence))
        evidence["score"] = pd.to_numeric(evidence["score"], errors="coerce").astype(float)

    bt = None
    bpath = scores_dir / "bradley_terry.csv"
    if bpath.is_file():
        try:
            bt = pd.read_csv(bpath)
        except Exception as exc:
            raise FrameInputError(bpath, f"cannot be read as CSV ({_one_line(exc)})") from exc
        _check_columns(bpath, bt, REQUIRED_BT)
        bt["system"] = bt["system"].astype(str)

    pairwise = None
    ppath = scores_dir / "pairwise.parquet"
    if ppath.is_file():
        pairwise = _read_parquet(ppath, REQUIRED_PAIRWISE).copy()
        for c in ("system_a", "system_b"):
            pairwise[c] = pairwise[c].astype(str)
        pairwise["vote"] = pairwise["vote"].fillna("").astype(str).str.strip().str.lower()
    return _Folder(scores_dir, scores, evidence, manifest, bt, pairwise, _iso(dt.datetime.now(dt.UTC)))


# ---------------------------------------------------------------------------------------------- statistics


def _family(metric: str) -> str:
    return registry.group_of(metric)


def _metric_key(metric: str) -> tuple[int, int, str]:
    groups, order = registry.group_order(), registry.metric_order()
    pos = order.index(metric) if metric in order else len(order)
    return (groups.index(_family(metric)) if _family(metric) in groups else len(groups), pos, metric)


def _with_evidence(kind: str) -> tuple[str, ...]:
    """Metrics whose evidence items are of `kind` (MetricSpec.evidence): recall, support, checks."""
    return tuple(m for m, s in registry.specs().items() if s.evidence == kind)


def _baseline(metric: str) -> bool:
    return registry.spec(metric).saturation_baseline


def _width(metric: str) -> float:
    lo, hi = registry.metric_range(metric)
    return (hi - lo) or 1.0


@dataclass(frozen=True)
class _Cell:
    mean: float
    low: float
    high: float
    n: int


@dataclass(frozen=True)
class _Spread:
    metric: str
    spread: float  # relative to the range width; nan with fewer than two systems
    low_system: str
    low_mean: float
    high_system: str
    high_mean: float
    n_systems: int

    @property
    def saturated(self) -> bool:
        return not math.isnan(self.spread) and self.spread < SATURATION_SPREAD


@dataclass
class _Stats:
    systems: list[str]
    competitors: list[str]  # systems ranked (gold excluded)
    metrics: list[str]
    categories: list[str]
    cells: dict[tuple[str, str], _Cell]
    ranks: dict[tuple[str, str], int]
    spreads: dict[str, _Spread]
    cat_means: dict[tuple[str, str, str], float]  # (system, category, metric)
    seed: int
    n_resamples: int

    def mean(self, system: str, metric: str) -> float:
        cell = self.cells.get((system, metric))
        return cell.mean if cell else math.nan

    def best_other(self, system: str, metric: str, category: str | None = None) -> tuple[str, float]:
        """Best competitor other than ``system`` (overall or in a category), or ("", nan)."""
        pool = []
        for s in self.competitors:
            if s == system:
                continue
            v = (
                self.mean(s, metric)
                if category is None
                else self.cat_means.get((s, category, metric), math.nan)
            )
            if not math.isnan(v):
                pool.append((v, s))
        if not pool:
            return ("", math.nan)
        lower = metric in registry.lower_is_better()
        v, s = sorted(pool, key=lambda t: (t[0] if lower else -t[0], t[1]))[0]
        return (s, v)


def _system_order(scores: pd.DataFrame, manifest: dict[str, Any]) -> list[str]:
    present = set(scores["system"])
    listed = [str(s) for s in manifest.get("systems") or [] if str(s) in present]
    return list(dict.fromkeys(listed)) + sorted(present - set(listed))


def _ranks(values: dict[str, float], lower: bool) -> dict[str, int]:
    """Competition ranks (1 = best; ties share the best rank) of the defined values."""
    defined = {s: v for s, v in values.items() if not math.isnan(v)}
    out = {}
    for s, v in defined.items():
        better = sum(
            1
            for w in defined.values()
            if (w < v if lower else w > v) and not math.isclose(w, v, rel_tol=1e-12, abs_tol=1e-12)
        )
        out[s] = 1 + better
    return out


def _stats(folder: _Folder, seed: int | None, n_resamples: int | None) -> _Stats:
    settings = folder.manifest.get("settings") or {}
    seed = int(settings.get("seed", 0)) if seed is None else int(seed)
    n_resamples = int(settings.get("bootstrap", 2000)) if n_resamples is None else int(n_resamples)
    df = folder.scores
    systems = _system_order(df, folder.manifest)
    competitors = [s for s in systems if s != GOLD] or list(systems)
    metrics = sorted(set(df["metric"]), key=_metric_key)
    categories = [c for c in scope_order(set(df["category"]) - {""}) if c != OVERALL]

    cells: dict[tuple[str, str], _Cell] = {}
    for (system, metric), g in df.groupby(["system", "metric"], sort=False):
        vals = g.sort_values("instance_id", kind="mergesort")["value"].to_numpy(dtype=float)
        vals = vals[~np.isnan(vals)]
        mean, low, high = bootstrap_ci(
            vals, n_resamples=n_resamples, seed=cell_seed(seed, str(system), OVERALL, str(metric))
        )
        cells[(str(system), str(metric))] = _Cell(mean, low, high, int(vals.size))

    ranks: dict[tuple[str, str], int] = {}
    spreads: dict[str, _Spread] = {}
    for metric in metrics:
        means = {s: cells[(s, metric)].mean for s in competitors if (s, metric) in cells}
        for s, r in _ranks(means, metric in registry.lower_is_better()).items():
            ranks[(s, metric)] = r
        defined = sorted(((v, s) for s, v in means.items() if not math.isnan(v)), key=lambda t: (t[0], t[1]))
        if len(defined) >= 2:
            (lo_v, lo_s), (hi_v, hi_s) = defined[0], defined[-1]
            spreads[metric] = _Spread(
                metric, (hi_v - lo_v) / _width(metric), lo_s, lo_v, hi_s, hi_v, len(defined)
            )
        elif defined:
            v, s = defined[0]
            spreads[metric] = _Spread(metric, math.nan, s, v, s, v, 1)
        else:
            spreads[metric] = _Spread(metric, math.nan, "", math.nan, "", math.nan, 0)

    cat = df[df["category"] != ""].groupby(["system", "category", "metric"])["value"].mean()
    cat_means = {(str(s), str(c), str(m)): float(v) for (s, c, m), v in cat.items()}
    return _Stats(
        systems, competitors, metrics, categories, cells, ranks, spreads, cat_means, seed, n_resamples
    )


# ---------------------------------------------------------------------------------------------- formatting


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


def _iso(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


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


# ---------------------------------------------------------------------------------------------- sections


def _header(folder: _Folder, st: _Stats, system: str) -> list[str]:
    df = folder.scores
    mine = df[df["system"] == system]
    judges = sorted({j for j in mine["judge"] if j}) or [str(j) for j in folder.manifest.get("judges") or []]
    n_all = df["instance_id"].nunique()
    n_mine = mine["instance_id"].nunique()
    others = [s for s in st.competitors if s != system]
    role = " (reference: the gold report scored against itself)" if system == GOLD else ""
    ref = f" (+ `{GOLD}` as reference)" if GOLD in st.systems and system != GOLD else ""
    return [
        f"# {_txt(system, None)}: diagnostic report",
        "",
        "[← all systems](index.md)",
        "",
        f"- Release: {_release_label(folder)}",
        f"- System: `{_txt(system, None)}`{role}",
        f"- Judges: {'; '.join(f'`{_txt(j, None)}`' for j in judges) or '–'}",
        f"- Instances: {n_mine} of {n_all} ({len(st.categories)} categories), metrics: {len(st.metrics)}",
        f"- Compared with: {', '.join(f'`{_txt(s, None)}`' for s in others) or 'no other system'}{ref}",
        *_dates(folder),
        f"- {_ci_note(st)}",
        "- Trend plots of every metric, all systems: [index](index.md#trend-plots)",
        "",
    ]


def _spread_text(sp: _Spread) -> str:
    if math.isnan(sp.spread):
        return "n/a"
    return f"{sp.spread:.3f}"


def _families_section(st: _Stats, system: str) -> list[str]:
    show_gold = GOLD in st.systems and system != GOLD
    n_comp = len(st.competitors)
    headers = ["Family", "Metric", f"`{_txt(system, None)}` mean [95% CI]", "Rank", "Best other (mean)"]
    headers += [f"`{GOLD}`"] if show_gold else []
    headers += ["Spread", "Separates?"]
    rows = []
    last = None
    for metric in st.metrics:
        fam = _family(metric)
        rank = st.ranks.get((system, metric))
        rank_txt = (
            "ref" if system == GOLD and GOLD not in st.competitors else f"{rank}/{n_comp}" if rank else "–"
        )
        bo_s, bo_v = st.best_other(system, metric)
        sp = st.spreads[metric]
        row = [
            f"**{fam}**" if fam != last else "",
            _metric_label(metric),
            _ci(metric, st.cells.get((system, metric))),
        ]
        row += [rank_txt, f"`{_txt(bo_s, None)}` {_num(metric, bo_v)}" if bo_s else "–"]
        row += [_num(metric, st.mean(GOLD, metric))] if show_gold else []
        row += [
            _spread_text(sp),
            f"⚠ {SATURATED}" if sp.saturated else ("yes" if not math.isnan(sp.spread) else "–"),
        ]
        rows.append(row)
        last = fam
    gold_note = f" (`{GOLD}` excluded: it is the reference column)" if GOLD in st.systems else ""
    intro = (
        f"Rank among {n_comp} system(s){gold_note}; 1 = best, lower-is-better metrics ranked ascending. "
        f"Spread = (max − min of the system means) / width of the metric's range; below {SATURATION_SPREAD} "
        "the metric does not separate the systems."
    )
    return [
        "## All families side by side",
        "",
        intro,
        "",
        *_table(headers, rows, "llrrlrrl" if show_gold else "llrrlrl"),
    ]


def _separation_section(st: _Stats, system: str | None) -> list[str]:
    def by_spread(m: str) -> tuple[int, float, tuple[int, int, str]]:
        spread = st.spreads[m].spread
        return (1, 0.0, _metric_key(m)) if math.isnan(spread) else (0, -spread, _metric_key(m))

    order = sorted(st.metrics, key=by_spread)  # most separating first; undefined spreads last
    holistic = [
        st.spreads[m].spread for m in st.metrics if _baseline(m) and not math.isnan(st.spreads[m].spread)
    ]
    headers = ["#", "Metric", "Family", "Spread", "Lowest system (mean)", "Highest system (mean)"]
    headers += [f"`{_txt(system, None)}` rank"] if system else []
    headers += ["Note"]
    rows = []
    for i, m in enumerate(order, 1):
        sp = st.spreads[m]
        notes = []
        if _baseline(m):
            notes.append("holistic 1–10: saturation baseline")
        if sp.saturated:
            notes.append(f"⚠ {SATURATED}")
        row = [str(i), _metric_label(m), _family(m), _spread_text(sp)]
        row += [f"`{_txt(sp.low_system, None)}` {_num(m, sp.low_mean)}" if sp.low_system else "–"]
        row += [f"`{_txt(sp.high_system, None)}` {_num(m, sp.high_mean)}" if sp.high_system else "–"]
        if system:
            r = st.ranks.get((system, m))
            row.append(f"{r}/{len(st.competitors)}" if r else "–")
        row.append("; ".join(notes))
        rows.append(row)
    out = ["## Which axes separate systems", ""]
    if holistic:
        base = max(holistic)
        above = sum(1 for m in st.metrics if not _baseline(m) and st.spreads[m].spread > base)
        out += [
            f"Holistic 1–10 scores are the saturation baseline: their largest spread is {base:.3f}; "
            f"{above} other metric(s) separate the systems more than that.",
            "",
        ]
    else:
        out += ["Metrics by relative spread across systems, most separating first.", ""]
    return out + _table(headers, rows, "rllrll" + ("r" if system else "") + "l")


def _category_section(st: _Stats, system: str) -> list[str]:
    if not st.categories:
        return ["## Per category", "", "_No categories in scores.parquet._", ""]
    headers = ["Metric", "Overall", *[_category(c) for c in st.categories]]
    rows = []
    for m in st.metrics:
        row = [_metric_label(m), _num(m, st.mean(system, m))]
        for c in st.categories:
            v = st.cat_means.get((system, c, m), math.nan)
            text = _num(m, v)
            if system in st.competitors and not math.isnan(v):
                _, bo = st.best_other(system, m, c)
                better = math.isnan(bo) or (v <= bo if m in registry.lower_is_better() else v >= bo)
                text = f"**{text}**" if better and len(st.competitors) > 1 else text
            row.append(text)
        rows.append(row)
    note = (
        "Mean over the category's instances; bold = best system in that category."
        if len(st.competitors) > 1
        else "Mean over the category's instances."
    )
    return ["## Per category", "", note, "", *_table(headers, rows, "l" + "r" * (len(headers) - 1))]


def _rubric_table(ev: pd.DataFrame, st: _Stats, system: str, top_n: int) -> list[str]:
    rub = ev[ev["kind"].str.match(_RUBRIC_KIND) | ev["metric"].isin(_with_evidence("checks"))]
    if rub.empty or not (rub["system"] == system).any():
        return []
    # one verdict per (system, instance, item): the lowest if an item is stored under several metrics
    per = rub.sort_values("score", kind="mergesort").drop_duplicates(["system", "instance_id", "kind"])
    per = per.assign(failed=per["score"] < 1.0)
    mine = per[per["system"] == system]
    others = per[per["system"].isin([s for s in st.competitors if s != system])]
    o_fail = others.groupby("kind")["failed"].agg(["sum", "count"])
    agg = mine.groupby("kind").agg(failed=("failed", "sum"), graded=("failed", "count")).reset_index()
    agg = agg[agg["failed"] > 0]
    total = int(mine["failed"].sum())
    out = [
        "### Rubric items",
        "",
        f"{total} failed verdict(s) (score < 1) over {len(mine)} graded item(s).",
        "",
    ]
    if agg.empty:
        return out + ["_No rubric item failed._", ""]
    agg = agg.assign(rate=agg["failed"] / agg["graded"]).sort_values(
        ["failed", "rate", "kind"], ascending=[False, False, True], kind="mergesort"
    )
    rows = []
    for r in agg.head(top_n).itertuples(index=False):
        fails = mine[(mine["kind"] == r.kind) & mine["failed"]].sort_values(
            ["score", "instance_id"], kind="mergesort"
        )
        ex = fails.iloc[0]
        example = " — ".join(x for x in (ex["evidence"], ex["rationale"]) if x) or ex["text"]
        other = (
            f"{int(o_fail.loc[r.kind, 'sum'])}/{int(o_fail.loc[r.kind, 'count'])}"
            if r.kind in o_fail.index
            else "–"
        )
        rows.append(
            [
                f"`{_txt(r.kind, None)}`",
                str(int(r.failed)),
                str(int(r.graded)),
                other,
                _txt(ex["instance_id"], 80),
                _txt(example),
            ]
        )
    headers = [
        "Rubric item",
        "Failed",
        "Graded",
        "Other systems failed",
        "Example instance",
        "Example evidence / rationale",
    ]
    return out + _table(headers, rows, "lrrrll")


def _coverage_table(ev: pd.DataFrame, st: _Stats, system: str, top_n: int) -> list[str]:
    cov = ev[ev["metric"].isin(_with_evidence("recall")) & ~ev["kind"].str.match(_RUBRIC_KIND)]
    mine = cov[cov["system"] == system]
    if mine.empty:
        return []
    missed = mine[mine["score"] < MISS_BELOW]
    summary = []
    for m in [x for x in _with_evidence("recall") if x in set(mine["metric"])]:
        g = mine[mine["metric"] == m]
        miss = g["score"] < MISS_BELOW
        by_kind = (
            g.assign(miss=miss)
            .groupby("kind")["miss"]
            .agg(["sum", "count"])
            .sort_values("sum", ascending=False)
        )
        kinds = ", ".join(
            f"{_txt(k, 40)} {int(r['sum'])}/{int(r['count'])}" for k, r in by_kind.head(8).iterrows()
        )
        summary.append(f"- `{m}`: {int(miss.sum())}/{len(g)} missed; by type: {kinds}")
    out = ["### Gold units most often missed", "", f"Missed = score < {MISS_BELOW}.", "", *summary, ""]
    if missed.empty:
        return out + ["_No gold unit missed._", ""]
    key = ["instance_id", "metric", "index"]
    comp = [s for s in st.competitors if s != system]
    o = cov[cov["system"].isin(comp)].assign(miss=lambda d: d["score"] < MISS_BELOW)
    o_miss = o.groupby(key)["miss"].agg(o_missed="sum", o_graded="count").reset_index()
    gold_ref = (
        cov.loc[cov["system"] == GOLD, [*key, "evidence_ref"]]
        .drop_duplicates(key)
        .rename(columns={"evidence_ref": "gold_section"})
    )
    # "most often": the same unit text missed in several instances counts once per instance
    missed = missed.assign(norm=missed["text"].str.lower().str.split().str.join(" "))
    missed = missed.sort_values(["score", "instance_id", "index"], kind="mergesort")
    missed = missed.merge(o_miss, on=key, how="left")
    missed[["o_missed", "o_graded"]] = missed[["o_missed", "o_graded"]].fillna(0).astype(int)
    agg = missed.groupby(["metric", "norm"], sort=False).agg(
        times=("instance_id", "nunique"),
        mean=("score", "mean"),
        all_o_missed=("o_missed", "sum"),
        all_o_graded=("o_graded", "sum"),
    )
    first = missed.drop_duplicates(["metric", "norm"]).drop(columns=["o_missed", "o_graded"])
    first = first.join(agg, on=["metric", "norm"]).merge(gold_ref, on=key, how="left")
    first = first.rename(columns={"all_o_missed": "o_missed", "all_o_graded": "o_graded"})
    first = first.sort_values(
        ["times", "mean", "o_missed", "instance_id", "index"],
        ascending=[False, True, True, True, True],
        kind="mergesort",
    ).head(top_n)
    rows = [
        [
            f"`{r.metric}`",
            str(int(r.times)),
            f"{r.mean:.2f}",
            f"{r.o_missed}/{r.o_graded}" if r.o_graded else "–",
            _txt(r.kind, 40),
            _txt(r.text),
            _txt(r.gold_section if isinstance(r.gold_section, str) and r.gold_section else "–", 120),
            _txt(r.instance_id, 80),
        ]
        for r in first.itertuples(index=False)
    ]
    headers = [
        "Metric",
        "Times missed",
        "Score",
        "Missed by others",
        "Type",
        "Gold unit",
        "Section (in gold)",
        "Instance",
    ]
    return out + _table(headers, rows, "lrrrllll")


def _faithfulness_table(ev: pd.DataFrame, system: str, top_n: int) -> list[str]:
    mine = ev[(ev["system"] == system) & ev["metric"].isin(_with_evidence("support"))]
    if mine.empty:
        return []
    summary = [
        f"- `{m}`: {int((g['score'] < MISS_BELOW).sum())}/{len(g)} claims unsupported (score < {MISS_BELOW})"
        for m, g in mine.groupby("metric", sort=True)
    ]
    low = mine[mine["score"] < 1.0].sort_values(["score", "metric", "instance_id", "index"], kind="mergesort")
    if low.empty:
        return ["### Lowest-supported claims", "", *summary, "", "_Every claim is fully supported._", ""]
    low = low.head(top_n)
    rows = [
        [
            f"`{r.metric}`",
            f"{r.score:.2f}",
            _txt(r.text),
            _txt(r.rationale),
            _txt(r.evidence_ref or "–", 80),
            _txt(r.instance_id, 80),
        ]
        for r in low.itertuples(index=False)
    ]
    headers = ["Metric", "Support", "Claim", "Rationale", "Evidence from", "Instance"]
    return ["### Lowest-supported claims", "", *summary, "", *_table(headers, rows, "lrllll")]


def _other_items_table(ev: pd.DataFrame, system: str, top_n: int) -> list[str]:
    handled = {*_with_evidence("recall"), *_with_evidence("support"), *_with_evidence("checks")}
    mine = ev[(ev["system"] == system) & ~ev["metric"].isin(handled) & ~ev["kind"].str.match(_RUBRIC_KIND)]
    if mine.empty:
        return []
    low = mine[mine["score"] < 1.0].sort_values(["score", "metric", "instance_id", "index"], kind="mergesort")
    if low.empty:
        return []
    low = low.head(top_n)
    rows = [
        [
            f"`{r.metric}`",
            _txt(r.kind, 40),
            f"{r.score:.2f}",
            _txt(r.text),
            _txt(r.rationale),
            _txt(r.instance_id, 80),
        ]
        for r in low.itertuples(index=False)
    ]
    headers = ["Metric", "Kind", "Score", "Item", "Rationale", "Instance"]
    return ["### Lowest-scored items of other metrics", "", *_table(headers, rows, "llrlll")]


def _failures_section(folder: _Folder, st: _Stats, system: str, top_n: int) -> list[str]:
    out = ["## Items it failed most", ""]
    ev = folder.evidence
    if ev is None:
        return out + ["_No evidence.parquet in the scores folder._", ""]
    ev = ev[ev["score"].notna()]
    parts = (
        _rubric_table(ev, st, system, top_n)
        + _coverage_table(ev, st, system, top_n)
        + _faithfulness_table(ev, system, top_n)
        + _other_items_table(ev, system, top_n)
    )
    return out + (parts or ["_No graded items for this system._", ""])


def _fmt_cell(value: Any) -> str:
    if isinstance(value, float | np.floating):
        if math.isnan(value):
            return "–"
        return str(int(value)) if float(value).is_integer() else f"{value:.3f}"
    return _txt(value, 80)


def _pairwise_section(folder: _Folder, st: _Stats, system: str) -> list[str]:
    if folder.bt is None and folder.pairwise is None:
        return []
    out = ["## Pairwise preference (Bradley–Terry)", ""]
    bt = folder.bt
    if bt is not None:
        row = bt[bt["system"] == system]
        if row.empty:
            out += [f"`{_txt(system, None)}` is not in bradley_terry.csv.", ""]
        else:
            r = row.iloc[0]

            def get(c: str) -> str:
                return _fmt_cell(r[c]) if c in r.index else "–"

            out += [
                f"- Score {get('score')} [{get('ci_low')}, {get('ci_high')}]; rank {get('rank')} "
                f"(rank CI {get('rank_low')}–{get('rank_high')}); "
                f"record {get('wins')}–{get('losses')}–{get('ties')} (W–L–T) in {get('games')} game(s)",
                "",
            ]
        sort_cols = ["rank", "system"] if "rank" in bt.columns else ["system"]
        table = bt.sort_values(sort_cols, kind="mergesort")
        rows = []
        for rec in table.itertuples(index=False):
            cells = [_fmt_cell(v) for v in rec]
            if rec.system == system:
                cells = [f"**{c}**" for c in cells]
            rows.append(cells)
        out += _table([_txt(c, None) for c in table.columns], rows, "l" + "r" * (len(table.columns) - 1))
    pw = folder.pairwise
    if pw is not None:
        out += ["### Pairwise record", ""]
        games = []
        for r in pw.itertuples(index=False):
            if r.system_a == system:
                opp, win, loss = r.system_b, r.vote == "a", r.vote == "b"
            elif r.system_b == system:
                opp, win, loss = r.system_a, r.vote == "b", r.vote == "a"
            else:
                continue
            tie = r.vote == "tie"
            if win or loss or tie:
                games.append((opp, int(win), int(loss), int(tie)))
        if not games:
            out += ["_No pairwise vote involves this system._", ""]
        else:
            g = pd.DataFrame(games, columns=["opp", "w", "l", "t"]).groupby("opp").sum()
            rows = []
            for opp, r in g.iterrows():
                n = int(r["w"] + r["l"] + r["t"])
                rate = (r["w"] + 0.5 * r["t"]) / n
                rows.append(
                    [
                        f"`{_txt(opp, None)}`",
                        str(int(r["w"])),
                        str(int(r["l"])),
                        str(int(r["t"])),
                        str(n),
                        f"{rate:.2f}",
                    ]
                )
            out += _table(
                ["Opponent", "Wins", "Losses", "Ties", "Votes", "Win rate (ties ½)"], rows, "lrrrrr"
            )
    return out


def _worst_section(folder: _Folder, st: _Stats, system: str) -> list[str]:
    out = ["## Worst instances", ""]
    others = [s for s in st.competitors if s != system]
    if not others and GOLD in st.systems and system != GOLD:
        others = [GOLD]
    frame = [m for m in registry.DEFAULT if m in st.metrics] or list(st.metrics)
    if not others:
        return out + ["_No other system to compare with._", ""]
    df = folder.scores
    sub = df[df["metric"].isin(frame) & df["system"].isin([system, *others])]
    piv = sub.pivot(index=["instance_id", "metric"], columns="system", values="value")
    if system not in piv.columns:
        return out + ["_No FRAME scores for this system._", ""]
    opp = piv[[s for s in others if s in piv.columns]]
    records = []
    for (iid, metric), own in piv[system].items():
        vals = opp.loc[(iid, metric)].dropna()
        if math.isnan(own) or vals.empty:
            continue
        lower = metric in registry.lower_is_better()
        best_s = str(vals.idxmin() if lower else vals.idxmax())
        best = float(vals[best_s])
        gap = (own - best if lower else best - own) / _width(metric)
        records.append((iid, metric, float(own), best, best_s, gap))
    if not records:
        return out + ["_No instance scored for both this system and another._", ""]
    r = pd.DataFrame(records, columns=["iid", "metric", "own", "best", "best_s", "gap"])
    # shortfall only: being above the best on one metric does not hide a miss on another
    gaps = r.assign(gap=r["gap"].clip(lower=0.0)).groupby("iid")["gap"].mean()
    gaps = gaps.sort_index().sort_values(ascending=False, kind="mergesort")
    gaps = gaps[gaps > 0].head(WORST_N)
    label = "the best other system" if others != [GOLD] else f"`{GOLD}`"
    out += [
        f"The {WORST_N} instances where `{_txt(system, None)}` is furthest below {label}: mean shortfall "
        f"max(best − own, 0) / range width over {', '.join(f'`{m}`' for m in frame)}; "
        "cells read own vs best (who).",
        "",
    ]
    if gaps.empty:
        return out + ["_No instance where this system is below the best other system._", ""]
    cat = df.drop_duplicates("instance_id").set_index("instance_id")["category"]
    rows = []
    for iid, gap in gaps.items():
        row = [_txt(iid, 100), _category(cat.get(iid, "")) if cat.get(iid) else "–", f"{gap:.3f}"]
        for m in frame:
            hit = r[(r["iid"] == iid) & (r["metric"] == m)]
            if hit.empty:
                row.append("–")
            else:
                h = hit.iloc[0]
                row.append(f"{_num(m, h['own'])} vs {_num(m, h['best'])} (`{_txt(h['best_s'], None)}`)")
        rows.append(row)
    return out + _table(
        ["Instance", "Category", "Mean shortfall", *[f"`{m}`" for m in frame]], rows, "llr" + "l" * len(frame)
    )


# ---------------------------------------------------------------------------------------------- pages


def _system_markdown(folder: _Folder, st: _Stats, system: str, top_n: int) -> str:
    lines = (
        _header(folder, st, system)
        + _families_section(st, system)
        + _separation_section(st, system)
        + _category_section(st, system)
        + _failures_section(folder, st, system, top_n)
        + _pairwise_section(folder, st, system)
        + _worst_section(folder, st, system)
    )
    return "\n".join(lines).rstrip() + "\n"


def _leaderboard_order(folder: _Folder, st: _Stats) -> tuple[list[str], dict[str, str], str]:
    """The systems as the leaderboard orders them (gold first, then by primary score, best first), each
    one's primary score as "mean [low, high]", and the name of that score."""
    try:
        ps = primary_scores(folder.scores, seed=st.seed, n_resamples=st.n_resamples)
    except ValueError:  # values outside a metric's range: the leaderboard refuses them too
        return list(st.systems), {}, ""
    info = ps.attrs["primary"]
    if info["composite"]:
        ov = ps[ps["scope"] == OVERALL]
        cells = {str(r.system): _Cell(r.mean, r.ci_low, r.ci_high, int(r.n)) for r in ov.itertuples()}
        lower, fmt = False, info["metrics"][0]  # FRAME's metrics all lie in [0, 1]: format as any
    else:
        metric = info["metrics"][0] if info["metrics"] else ""
        cells = {s: c for (s, m), c in st.cells.items() if m == metric}
        lower, fmt = metric in registry.lower_is_better(), metric

    def key(s: str) -> tuple[bool, bool, float, str]:
        v = cells[s].mean if s in cells else math.nan
        return (s != GOLD, math.isnan(v), 0.0 if math.isnan(v) else (v if lower else -v), s)

    text = {s: _ci(fmt, c) for s, c in cells.items() if not math.isnan(c.mean)}
    return sorted(st.systems, key=key), text, str(info["label"])


def _plot_files(folder: _Folder) -> list[Path]:
    """The trend plots of the scores folder in metric order (the manifest's list when it has one)."""
    plots = folder.path / "plots"
    listed = [str(n) for n in folder.manifest.get("plots") or []]
    names = [n for n in listed if (plots / n).is_file() and "/" not in n and "\\" not in n]
    if not names and plots.is_dir():
        by_metric = {p.name[: -len(PLOT_SUFFIX)]: p.name for p in plots.glob(f"*{PLOT_SUFFIX}")}
        names = [by_metric[m] for m in metric_order(by_metric)]
    return [plots / n for n in names]


def _plot_links(folder: _Folder, out: Path) -> dict[str, Path]:
    """{link as written in the pages: PNG file} of the trend plots. Pages inside the scores folder link
    to its plots/ folder; pages elsewhere get a copy of the PNGs in their own plots/ folder, so a link
    never climbs out of the output folder (nor names a folder of the machine)."""
    out_abs, scores_abs = out.resolve(), folder.path.resolve()
    links = {}
    for png in _plot_files(folder):
        if out_abs.is_relative_to(scores_abs):
            links[Path(os.path.relpath(png.resolve(), out_abs)).as_posix()] = png
        else:
            copy = atomic_write_bytes(out / "plots" / png.name, png.read_bytes())
            links[f"plots/{png.name}"] = copy
    return links


def _plots_section(links: dict[str, Path]) -> list[str]:
    out = ["## Trend plots", ""]
    if not links:
        return out + ["_No trend plots in the scores folder (plots/)._", ""]
    out += [
        "Per metric, the mean of each system against buckets of gold report length, grounding length "
        "and table count, with bands of the 95% bootstrap CI. The HTML page embeds the images; each "
        "links to its PNG file.",
        "",
    ]
    for link, png in links.items():
        metric = png.name[: -len(PLOT_SUFFIX)] if png.name.endswith(PLOT_SUFFIX) else png.stem
        out += [f"### {_txt(metric, None)}", "", f"[![{_txt(metric, None)} trend plot]({link})]({link})", ""]
    return out


def _index_markdown(folder: _Folder, st: _Stats, names: dict[str, str], links: dict[str, Path]) -> str:
    df = folder.scores
    cats = ", ".join(_category(c) for c in st.categories)
    lines = [
        "# FRAME diagnostic reports",
        "",
        f"- Release: {_release_label(folder)}",
        f"- Instances: {df['instance_id'].nunique()} ({len(st.categories)} categories"
        + (f": {cats}" if cats else "")
        + f"), metrics: {len(st.metrics)}",
        *_dates(folder),
        f"- {_ci_note(st)}",
        "",
        "## Systems",
        "",
    ]
    order, primary, label = _leaderboard_order(folder, st)
    if label:
        what = f"{label} (mean of the FRAME metrics scored)" if label == PRIMARY_LABEL else f"`{label}`"
        lines += [f"In leaderboard order: `{GOLD}` (the ceiling) first, then by {what}, best first.", ""]
    bt = folder.bt.set_index("system") if folder.bt is not None else None
    rows = []
    for s in order:
        first = sum(1 for m in st.metrics if st.ranks.get((s, m)) == 1)
        best_on = "reference" if s == GOLD and s not in st.competitors else f"{first}/{len(st.metrics)}"
        row = [
            f"[{_txt(s, None)}]({names[s]}.md)",
            primary.get(s, "–"),
            str(df.loc[df["system"] == s, "instance_id"].nunique()),
            best_on,
        ]
        if bt is not None:
            row.append(_fmt_cell(bt.loc[s, "rank"]) if s in bt.index and "rank" in bt.columns else "–")
        rows.append(row)
    headers = ["System", f"{label or 'Primary score'} [95% CI]", "Instances", "Ranked first on"]
    headers += ["Bradley–Terry rank"] if bt is not None else []
    lines += _table(headers, rows, "lrrrr")
    lines += _separation_section(st, None)
    lines += _plots_section(links)
    return "\n".join(lines).rstrip() + "\n"


def _data_uri(png: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode("ascii")


def _html_page(title: str, markdown_text: str, images: dict[str, Path] | None = None) -> str:
    """The page as self-contained HTML: links between pages point to the .html files, and each image
    whose src is a key of ``images`` is embedded as a data: URI (its link still points to the file)."""
    body = markdown_lib.markdown(markdown_text, extensions=["tables", "toc"], output_format="html")
    body = _LOCAL_MD_LINK.sub(r'href="\1.html\2"', body)  # the HTML pages link to each other
    embedded = {html.escape(k, quote=True): v for k, v in (images or {}).items()}

    def embed(m: re.Match) -> str:
        png = embedded.get(m.group(2))
        return m.group(0) if png is None else m.group(1) + _data_uri(png) + m.group(3)

    body = _IMG_SRC.sub(embed, body)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n<style>\n{_CSS}\n</style>\n</head>\n<body>\n"
        f"{body}\n</body>\n</html>\n"
    )


def _write_pair(
    out_dir: Path, stem: str, title: str, text: str, images: dict[str, Path] | None = None
) -> list[Path]:
    md_path = atomic_write_text(out_dir / f"{stem}.md", text)
    html_path = atomic_write_text(out_dir / f"{stem}.html", _html_page(title, text, images))
    return [md_path, html_path]


def _write_index(folder: _Folder, st: _Stats, out: Path, names: dict[str, str]) -> list[Path]:
    links = _plot_links(folder, out)
    text = _index_markdown(folder, st, names, links)
    return _write_pair(out, "index", "FRAME diagnostic reports", text, links)


def _check_top_n(top_n: int) -> None:
    if int(top_n) < 1:
        raise FrameInputError("top_n", f"must be >= 1, got {top_n}")


def render_index(
    scores_dir: Path,
    out_dir: Path | None = None,
    *,
    seed: int | None = None,
    n_resamples: int | None = None,
) -> list[Path]:
    """Write ``index.md`` and ``index.html`` (systems with links to their pages, and the axes that
    separate systems) into ``out_dir`` (default ``scores_dir/report``); returns the two paths."""
    folder = _load(Path(scores_dir))
    st = _stats(folder, seed, n_resamples)
    out = Path(out_dir) if out_dir is not None else folder.path / "report"
    return _write_index(folder, st, out, _page_names(st.systems))


def render_system_reports(
    scores_dir: Path,
    out_dir: Path | None = None,
    top_n: int = 10,
    *,
    seed: int | None = None,
    n_resamples: int | None = None,
) -> list[Path]:
    """Write ``<system>.md`` / ``<system>.html`` per system of ``scores_dir/scores.parquet`` and
    ``index.md`` / ``index.html`` into ``out_dir`` (default ``scores_dir/report``); returns the paths
    written (system pages in system order, then the index).

    ``top_n`` bounds each table of failed items; ``seed`` and ``n_resamples`` default to the manifest's
    settings (seed, bootstrap), else 0 and 2000. Raises FrameInputError when scores.parquet is missing,
    unreadable or lacks columns (or another present file is malformed)."""
    _check_top_n(top_n)
    folder = _load(Path(scores_dir))
    st = _stats(folder, seed, n_resamples)
    out = Path(out_dir) if out_dir is not None else folder.path / "report"
    names = _page_names(st.systems)
    written: list[Path] = []
    for system in st.systems:
        text = _system_markdown(folder, st, system, int(top_n))
        written += _write_pair(out, names[system], f"{system}: diagnostic report", text)
    written += _write_index(folder, st, out, names)
    return written
