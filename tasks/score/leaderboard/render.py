"""The board as Markdown (``leaderboard_markdown``): title, flags and legend, Table 6 or one table per
metric, then the paired tests and the win matrices.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from tasks.score import registry
from tasks.score.leaderboard.board import ranking_metrics
from tasks.score.leaderboard.core import (
    BASELINES,
    CI_METHOD,
    OVERALL,
    PRIMARY,
    PRIMARY_COLUMNS,
    PRIMARY_LABEL,
    REFERENCE,
    SCOPE_LABELS,
    SKIPPED,
    TIE_TOLERANCE,
    metric_order,
    scope_order,
)


def self_judged_notes(judge_model: str | None, system_models: Mapping[str, str | None]) -> dict[str, str]:
    """{system: "self-judged"} for each system whose model is the judge's model (names compared after
    stripping surrounding blanks); pass the result as ``notes`` to ``leaderboard_markdown``."""
    judge = (judge_model or "").strip()
    if not judge:
        return {}
    return {s: "self-judged" for s, m in sorted(system_models.items()) if (m or "").strip() == judge}


CEILING, BASELINE, SELF_JUDGED = "ceiling", "baseline", "self-judged"
_LEGEND = {
    CEILING: (
        f"_{CEILING}: `{REFERENCE}` is the gold report scored against itself: the ceiling each metric "
        "reaches, shown for reference, never ranked or bold._"
    ),
    BASELINE: (
        f"_{BASELINE}: a builtin non-LLM reference system (copy-sample returns the sample report S "
        "unchanged, extractive fills S's headings with passages of the grounding documents): a floor to "
        "beat, ranked like the others._"
    ),
    SELF_JUDGED: "_self-judged: the judge model is the system's own model; its judged scores may favour it._",
}


def _fmt(x: float) -> str:
    return "nan" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def _fmt_diff(x: float, *, signed: bool = False) -> str:
    """3 decimals; a value that rounds to zero prints as 0.000 (never -0.000)."""
    if x is None or math.isnan(x):
        return "nan"
    r = round(float(x), 3) or 0.0
    return f"{r:+.3f}" if signed else f"{r:.3f}"


def _fmt_p(p: float) -> str:
    if p is None or math.isnan(p):
        return "n/a"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _flags(
    present: Iterable[str], notes: Mapping[str, str] | None, baselines: Iterable[str] | None
) -> dict[str, list[str]]:
    """Per system, the flags shown beside its name: "ceiling" (gold), "baseline", then its note."""
    base = set(BASELINES if baselines is None else baselines)
    out = {}
    for s in present:
        flags = [CEILING] if s == REFERENCE else [BASELINE] if s in base else []
        if notes and notes.get(s):
            flags.append(str(notes[s]))
        out[s] = flags
    return out


def _label(system: str, flags: Mapping[str, list[str]]) -> str:
    """A system's name with its flag(s) beside it, e.g. ``gold _(ceiling)_``."""
    text = _md_escape(system)
    shown = flags.get(system) or []
    return f"{text} _({_md_escape('; '.join(shown))})_" if shown else text


def _legend(flags: Mapping[str, list[str]], order: Iterable[str]) -> list[str]:
    """The footnotes of the flags shown on the board (reference rows first), one line each."""
    shown = {f for s in order for f in flags.get(s, [])}
    return [x for f in (CEILING, BASELINE, SELF_JUDGED) if f in shown for x in (_LEGEND[f], "")]


def _metric_label(metric: str) -> str:
    return f"{metric} (lower is better)" if metric in registry.lower_is_better() else metric


def _primary(board: pd.DataFrame) -> dict:
    """The primary score of the board: {metrics, composite, label, rows}. Read from ``attrs`` (set by
    ``leaderboard``); a board without them (e.g. read back from CSV) gets the means of its cells and no CI."""
    info = dict(board.attrs.get("primary") or {})
    if info.get("metrics") is not None and "rows" in info:
        return info
    metrics = ranking_metrics(board["metric"].unique())
    composite = len(metrics) >= 2
    rows = []
    if composite:
        sub = board[board["metric"].isin(metrics)]
        for (system, scope), g in sub.groupby(["system", "scope"], sort=True):
            means = g.set_index("metric")["mean"].reindex(metrics).to_numpy(dtype=float)
            mean = float(means.mean()) if not np.isnan(means).any() else math.nan
            rows.append(
                {"system": system, "scope": scope, "n": int(g["n"].max())}
                | {"mean": mean, "ci_low": math.nan, "ci_high": math.nan}
            )
    label = PRIMARY_LABEL if composite else (metrics[0] if metrics else "")
    return {"metrics": metrics, "composite": composite, "label": label, "method": "", "rows": rows}


def _primary_means(board: pd.DataFrame, primary: dict) -> dict[str, float]:
    """Each system's overall primary score: the composite's, else its single metric's overall mean."""
    if primary["composite"]:
        return {str(r["system"]): float(r["mean"]) for r in primary["rows"] if r["scope"] == OVERALL}
    if not primary["metrics"]:
        return {}
    cells = board[(board["scope"] == OVERALL) & (board["metric"] == primary["metrics"][0])]
    return {str(r["system"]): float(r["mean"]) for r in cells.to_dict("records")}


def _system_order(
    present: Iterable[str], systems: Sequence[str] | None, means: Mapping[str, float], lower: bool
) -> list[str]:
    """gold (the ceiling) first; then ``systems`` in the order given (those present), then every other
    system by its primary score, best first (ties and systems without a score by name, the latter last)."""
    present = set(present)
    rest = present - {REFERENCE}
    fixed = [s for s in dict.fromkeys(systems or ()) if s in rest]

    def key(s: str) -> tuple[bool, float, str]:
        v = means.get(s, math.nan)
        return (math.isnan(v), 0.0 if math.isnan(v) else (v if lower else -v), s)

    return ([REFERENCE] if REFERENCE in present else []) + fixed + sorted(rest - set(fixed), key=key)


def _ci_text(board: pd.DataFrame) -> str:
    bs = board.attrs.get("bootstrap") or {}
    if not bs:
        return f"CI by {CI_METHOD} (level, resamples and seed not recorded on this board)"
    return (
        f"{round(100 * float(bs['confidence']), 2):g}% CI by {bs.get('method', CI_METHOD)}, "
        f"{bs['n_resamples']} resamples, seed {bs['seed']} (per-cell seed = sha256 of "
        "(seed, system, scope, metric))"
    )


def _order_text(primary: dict, order: list[str], *, fixed: bool) -> str:
    """The sentence that says how the systems are ordered and what the primary score is."""
    metrics = primary["metrics"]
    if primary["composite"]:
        names = ", ".join(metrics[:-1]) + f" and {metrics[-1]}"
        ci = (
            f"its CI by percentile bootstrap over instances resampled jointly for the {len(metrics)} metrics"
            if primary.get("method")
            else "no CI (this board holds no per-instance values)"
        )
        what = (
            f"the {PRIMARY_LABEL} (Overall): the unweighted mean of the system's {names} means, shown in "
            f"the first rows, {ci}"
        )
    elif metrics:
        what = f"their Overall {_md_escape(_metric_label(metrics[0]))} mean"
    else:
        what = "name"
    lead = f"`{REFERENCE}` (the ceiling) first, then " if REFERENCE in order else ""
    how = "in the order asked for, the others" if fixed else "systems"
    return f"Order: {lead}{how} by {what}, best first."


def _caption(board: pd.DataFrame, scopes: list[str], order_text: str, *, wide: bool = False) -> str:
    """The table caption: how the systems are ordered first, then what a cell holds."""
    n_scope = (board["n"] + board["n_undefined"]).groupby(board["scope"]).max()
    counts = ", ".join(f"{SCOPE_LABELS.get(s, s)} {int(n_scope[s])}" for s in scopes if s in n_scope.index)
    n_undef = int(board.loc[board["scope"] == OVERALL, "n_undefined"].sum())
    parts = [order_text]
    if wide:
        parts.append(
            "Columns = systems, rows = metric x scope (Overall, then categories), as in paper 000 Table 6."
        )
    parts += [
        f"Cells: mean [CI low, CI high] over instances; {_ci_text(board)}.",
        f"n = instances per scope: {counts}.",
    ]
    if wide:
        parts.append(
            "Best system per row in bold (lowest where lower is better; the ceiling never); a cell with "
            "fewer defined values than its row shows its own n."
        )
    else:
        parts.append("A cell with fewer defined values than its column shows its own n.")
    if n_undef:
        parts.append(f"{n_undef} undefined (instance, system, metric) value(s) excluded.")
    common = board.attrs.get("common") or {}
    if common.get("left_out"):
        parts.append(
            f"Ranked on the {common['instances']} of {common['of']} instances every scored system has "
            f"({len(common['left_out'])} left out, some system has no report for them); a system's own mean "
            "over all its instances follows as (own mean, n)."
        )
    return " ".join(parts)


def _title(
    board: pd.DataFrame, release: str | None, order: list[str], flags: Mapping[str, list[str]]
) -> list[str]:
    """The title line (release) and one line saying what is scored."""
    head = f"# Leaderboard: {_md_escape(release)}" if release else "# Leaderboard"
    if board.empty:
        return [head, ""]
    overall = board[board["scope"] == OVERALL]
    n_inst = int((overall["n"] + overall["n_undefined"]).max()) if len(overall) else 0
    held = board.assign(k=board["n"] + board["n_undefined"]).groupby("scope")["k"].max()
    # the categories that hold an instance of this run (a --limit run may not reach every one)
    cats = [s for s in scope_order(board["scope"].unique()) if s not in (OVERALL, SKIPPED) and held[s] > 0]
    n_apart = int(held.get(SKIPPED, 0))
    metrics = metric_order(board["metric"].unique())
    scored = [s for s in order if (board.loc[board["system"] == s, "n"] > 0).any()]  # k/n = 0/n: no score
    ceiling = [s for s in scored if CEILING in flags.get(s, [])]
    floors = [s for s in scored if BASELINE in flags.get(s, [])]
    cat_text = f" in {len(cats)} categor{'y' if len(cats) == 1 else 'ies'}" if cats else ""
    line = (
        f"Scored: {len(scored)} system(s)"
        + (f" of {len(order)} asked for" if len(scored) < len(order) else "")
        + f" ({len(scored) - len(ceiling)} ranked"
        + (f"; ceiling: {', '.join(_md_escape(s) for s in ceiling)}" if ceiling else "")
        + (f"; baselines: {', '.join(_md_escape(s) for s in floors)}" if floors else "")
        + f") on {n_inst} instance(s){cat_text}"
        + (f" (and {n_apart} that skip source periods, scored apart)" if n_apart else "")
        + f", by {len(metrics)} metric(s): "
        + ", ".join(_md_escape(m) for m in metrics)
        + "."
    )
    return [head, "", line, ""]


def _generated_line(generation: Mapping[str, Mapping] | None, order: list[str]) -> list[str]:
    """'Generated: a 22/22, b 0/22 (reports of instances).' for the systems that generate."""
    shown = [s for s in order if generation and s in generation]
    if not shown:
        return []
    parts = [
        f"{_md_escape(s)} {int(generation[s]['generated'])}/{int(generation[s]['instances'])}" for s in shown
    ]
    return [f"Generated (reports / instances): {', '.join(parts)}.", ""]


def _cells(board: pd.DataFrame) -> dict[tuple[str, str, str], dict]:
    return {(str(r["system"]), str(r["scope"]), str(r["metric"])): r for r in board.to_dict("records")}


def _primary_cells(primary: dict) -> dict[tuple[str, str, str], dict]:
    if not primary["composite"]:
        return {}
    return {(str(r["system"]), str(r["scope"]), PRIMARY): r for r in primary["rows"]}


def _best(cells: Sequence[dict | None], metric: str) -> float:
    means = np.array([float(c["mean"]) for c in cells if c is not None], dtype=float)
    if not np.isfinite(means).any():
        return math.nan
    pick = np.nanmin if metric in registry.lower_is_better() else np.nanmax
    return float(pick(means))


def _cell_text(c: dict | None, best: float, max_n: int) -> str:
    """'0.812 [0.774, 0.850]', bold when its mean is ``best``, '(n=k)' when k < ``max_n``."""
    if c is None:
        return "–"
    mean = float(c["mean"])
    if math.isnan(mean):
        return "n/a (n=0)" if int(c["n"]) == 0 else "n/a"
    low, high = float(c["ci_low"]), float(c["ci_high"])
    text = _fmt(mean) if math.isnan(low) else f"{_fmt(mean)} [{_fmt(low)}, {_fmt(high)}]"
    if not math.isnan(best) and math.isclose(mean, best, rel_tol=1e-12, abs_tol=0):
        text = f"**{text}**"
    if int(c["n"]) < max_n:
        text += f" (n={int(c['n'])})"
    return text + _own_text(c)


def _own_text(c: dict) -> str:
    """' (own 0.480, n=21)' when the system has values on instances the common set leaves out (its own
    full-n mean, beside the mean over the instances every system has)."""
    own_n = c.get("own_n")
    if own_n is None or (isinstance(own_n, float) and math.isnan(own_n)) or int(own_n) == int(c["n"]):
        return ""
    return f" (own {_fmt(float(c['own_mean']))}, n={int(own_n)})"


def _judges_line(board: pd.DataFrame, metrics: list[str]) -> str:
    parts = []
    for metric in metrics:
        js = board.loc[board["metric"] == metric, "judges"].dropna()
        judges = sorted({j for x in js for j in str(x).split(";") if j})
        if judges:
            parts.append(f"{_md_escape(metric)}: {_md_escape(', '.join(judges))}")
    return f"_Judges: {'; '.join(parts)}._" if parts else ""


_LLM_TREE = re.compile(r"^llm-tree:([^+]*)\+(.+)$")  # StructureFamily's judge names
_OWN_TREE = re.compile(r"^(\w+)-tree\+(.+)$")


def _structure_line(board: pd.DataFrame) -> str:
    """Who built the structure trees and which embedder compared their nodes, read from the structure
    judges' names ("" without structure rows)."""
    js = board.loc[board["metric"] == "structure", "judges"].dropna()
    parts = []
    for judge in sorted({j for x in js for j in str(x).split(";") if j}):
        if m := _LLM_TREE.match(judge):
            parts.append(f"LLM-extracted by {m.group(1)} (paper 000 §4.1); node embedder: {m.group(2)}")
        elif m := _OWN_TREE.match(judge):
            parts.append(f"{m.group(1)} (frame's Markdown reader); node embedder: {m.group(2)}")
    return f"_Structure trees: {_md_escape('; '.join(parts))}._" if parts else ""


def _wide_board(
    board: pd.DataFrame, order: list[str], flags: Mapping[str, list[str]], primary: dict, order_text: str
) -> list[str]:
    """Table 6: systems as columns (gold first, then by primary score), one row per metric x scope, the
    primary score's rows first; bold = best non-reference system of the row."""
    scopes = scope_order(board["scope"].unique())
    metrics = metric_order(board["metric"].unique())
    cells = {**_cells(board), **_primary_cells(primary)}
    out = [f"_{_caption(board, scopes, order_text, wide=True)}_", "", *_legend(flags, order)]
    out.append("| Metric | Data | " + " | ".join(_label(s, flags) for s in order) + " |")
    out.append("|---|---|" + "---:|" * len(order))
    for metric in ([PRIMARY] if primary["composite"] else []) + metrics:
        first = True
        for scope in scopes:
            row = [cells.get((s, scope, metric)) for s in order]
            if all(c is None for c in row):
                continue
            best = _best([c for s, c in zip(order, row, strict=True) if s != REFERENCE], metric)
            max_n = max(int(c["n"]) for c in row if c is not None)
            texts = [
                _cell_text(c, math.nan if s == REFERENCE else best, max_n)
                for s, c in zip(order, row, strict=True)
            ]
            name = f"**{PRIMARY_LABEL}**" if metric == PRIMARY else _md_escape(_metric_label(metric))
            label = name if first else ""
            out.append(
                f"| {label} | {SCOPE_LABELS.get(scope, _md_escape(scope))} | " + " | ".join(texts) + " |"
            )
            first = False
    out.append("")
    judges = _judges_line(board, metrics)
    return out + ([judges, ""] if judges else [])


def _per_metric_tables(
    board: pd.DataFrame, order: list[str], flags: Mapping[str, list[str]], primary: dict, order_text: str
) -> list[str]:
    """One system (with or without gold): one table per metric (the primary score first), rows =
    systems, columns = scopes. No bold: there is nothing to rank against."""
    scopes = scope_order(board["scope"].unique())
    cells = {**_cells(board), **_primary_cells(primary)}
    out = [f"_{_caption(board, scopes, order_text)}_", "", *_legend(flags, order)]
    for metric in ([PRIMARY] if primary["composite"] else []) + metric_order(board["metric"].unique()):
        if metric == PRIMARY:
            title = f"### {PRIMARY_LABEL} (mean of {', '.join(primary['metrics'])})"
            sub = pd.DataFrame(primary["rows"], columns=list(PRIMARY_COLUMNS))
        else:
            sub = board[board["metric"] == metric]
            judges = sorted({j for js in sub["judges"].dropna() for j in str(js).split(";") if j})
            title = f"### {_metric_label(metric)}" + (f" (judge: {', '.join(judges)})" if judges else "")
        out += [title, ""]
        out.append("| System | " + " | ".join(SCOPE_LABELS.get(s, _md_escape(s)) for s in scopes) + " |")
        out.append("|---|" + "---:|" * len(scopes))
        max_n = {
            sc: int(sub.loc[sub["scope"] == sc, "n"].max()) if (sub["scope"] == sc).any() else 0
            for sc in scopes
        }
        for system in order:
            texts = [_cell_text(cells.get((system, sc, metric)), math.nan, max_n[sc]) for sc in scopes]
            out.append(f"| {_label(system, flags)} | " + " | ".join(texts) + " |")
        out.append("")
    return out


def _paired_markdown(paired: pd.DataFrame, flags: Mapping[str, list[str]]) -> list[str]:
    st = paired.attrs.get("paired") or {}
    level = f"{round(100 * float(st.get('confidence', 0.95)), 2):g}%"
    settings = (
        f"{st['n_resamples']} resamples, seed {st['seed']} "
        "(per-pair seed = sha256 of (seed, system, next, metric))"
        if st
        else "resamples and seed not recorded"
    )
    every = st.get("pairs") == "all"
    caption = (
        "Per metric, systems ranked by overall mean (best first; gold not ranked); each is compared with "
        + ("every system ranked below it" if every else "the next one")
        + " over the instances both have defined. Difference = mean of (system - other) in the "
        f"metric's units (negative favours the system where lower is better); {level} CI by paired "
        "percentile bootstrap over instances; p = two-sided paired permutation test by sign flips of the "
        f"per-instance differences (exact when 2^n <= resamples); {settings}."
        + (
            " With every pair tested, read p_Holm: p adjusted by Holm's method over the pairs of the metric."
            if every
            else ""
        )
    )
    title = "every pair" if every else "each system vs the next best"
    out = [f"### Paired tests: {title} (overall)", "", f"_{caption}_", ""]
    holm_head, holm_rule = (" p_Holm |", "---:|") if every else ("", "")
    versus = "versus" if every else "vs next"
    out.append(f"| Metric | Rank | System | {versus} | n | Difference [{level} CI] | p |{holm_head}")
    out.append("|---|---:|---|---|---:|---:|---:|" + holm_rule)
    for r in paired.to_dict("records"):
        diff = (
            f"{_fmt_diff(r['mean_diff'], signed=True)} [{_fmt_diff(r['ci_low'])}, {_fmt_diff(r['ci_high'])}]"
            if int(r["n"])
            else "n/a (n=0)"
        )
        out.append(
            f"| {_md_escape(_metric_label(str(r['metric'])))} | {int(r['rank'])} "
            f"| {_label(str(r['system']), flags)} | {_label(str(r['versus']), flags)} | {int(r['n'])} "
            f"| {diff} | {_fmt_p(float(r['p_value']))} |"
            + (f" {_fmt_p(float(r.get('p_holm', math.nan)))} |" if every else "")
        )
    out.append("")
    return out


def _win_cell(wins: int, ties: int) -> str:
    return f"{wins} (+{ties} tie{'' if ties == 1 else 's'})" if ties else str(wins)


def _win_markdown(metric: str, wins: pd.DataFrame, flags: Mapping[str, list[str]]) -> list[str]:
    order = [str(s) for s in wins.index]
    ties = wins.attrs.get("ties") or {}
    better = "lower" if metric in registry.lower_is_better() else "higher"
    caption = (
        f"Cell = instances on which the row system beats the column system on {_md_escape(metric)} (strictly "
        f"{better}; only instances both have defined). Ties (absolute difference <= {TIE_TOLERANCE:g}) are "
        "counted separately, never as half wins, and shown as (+k ties); the column system's wins are in the "
        "mirrored cell. Systems ranked by overall mean, best first."
    )
    out = [f"### Win matrix: {_md_escape(_metric_label(metric))}", "", f"_{caption}_", ""]
    out.append("| System | " + " | ".join(_label(s, flags) for s in order) + " |")
    out.append("|---|" + "---:|" * len(order))
    for a in order:
        texts = [
            "–" if a == b else _win_cell(int(wins.loc[a, b]), int(ties.get(a, {}).get(b, 0))) for b in order
        ]
        out.append(f"| {_label(a, flags)} | " + " | ".join(texts) + " |")
    out.append("")
    return out


def board_order(
    board: pd.DataFrame, systems: Sequence[str] | None = None, generation: Mapping | None = None
) -> list[str]:
    """The board's systems in the order it shows them: gold first, then ``systems`` as given, then by
    primary score, best first (systems with no score, e.g. none generated, last)."""
    present = sorted(set(board["system"].astype(str).unique()) | set(generation or {}))
    primary = _primary(board)
    lower = (
        not primary["composite"]
        and bool(primary["metrics"])
        and (primary["metrics"][0] in registry.lower_is_better())
    )
    return _system_order(present, systems, _primary_means(board, primary), lower)


def leaderboard_markdown(
    board: pd.DataFrame,
    *,
    systems: Sequence[str] | None = None,
    notes: Mapping[str, str] | None = None,
    paired: pd.DataFrame | None = None,
    wins: Mapping[str, pd.DataFrame] | None = None,
    release: str | None = None,
    baselines: Iterable[str] | None = None,
    generation: Mapping[str, Mapping] | None = None,
) -> str:
    """The board as Markdown: a title (``release``, e.g. "demo/0.1.0") and a line saying what is scored,
    then the board, then (when given) the paired tests and the win matrices.

    Systems are ordered by their primary score (``ranking_metrics``: the FRAME score, mean of
    structure, coverage and faithfulness; else the one metric), best first, gold (the ceiling) first;
    ``systems`` puts the ones it names first, in that order. Reference rows are flagged beside the name
    with a footnote: gold "ceiling" (never ranked or bold) and the ``baselines`` (default: the builtin
    copy-sample and extractive) "baseline"; ``notes`` adds a flag of its own (e.g. "self-judged").

    With >= 2 systems besides gold: paper 000 Table 6, systems as columns, rows = the FRAME score then
    metric x scope (Overall, then categories), cells "0.812 [0.774, 0.850]", the best non-gold mean of
    each row bold (lowest where lower is better; all of them on an exact tie), "(n=k)" on a cell with
    fewer defined values than its row, "–" for a missing cell. With one system: one table per metric,
    rows = systems, columns = scopes.

    ``generation`` ({system: {"generated": k, "instances": n, ...}}) adds the line "Generated: system k/n"
    under the title and gives every system it names a place on the board, one with no report included
    (its cells "–").
    """
    present = sorted(set(board["system"].astype(str).unique()) | set(generation or {}))
    primary = _primary(board)
    order = board_order(board, systems, generation)
    flags = _flags(order, notes, baselines)
    out = _title(board, release, order, flags) + _generated_line(generation, order)
    if board.empty:
        return "\n".join([*out, "_No scores._", ""])
    order_text = _order_text(primary, order, fixed=bool([s for s in systems or () if s in present]))
    contenders = [s for s in order if s != REFERENCE]
    render = _wide_board if len(contenders) >= 2 else _per_metric_tables
    out += render(board, order, flags, primary, order_text)
    trees = _structure_line(board)
    out += [trees, ""] if trees else []
    if paired is not None and not paired.empty:
        out += _paired_markdown(paired, flags)
    for metric in metric_order((wins or {}).keys()):
        if len(wins[metric]) >= 2:
            out += _win_markdown(metric, wins[metric], flags)
    return "\n".join(out)
