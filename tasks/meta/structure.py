"""`frame meta structure`: how the settings of structural similarity move its agreement with human rankings
(paper 000 Tables 2-4). One factor varies at a time around the default setting: the projection function
(Table 2), the type weight w (Table 3), the depth weight gamma (Table 4). Every distinct node text is
embedded once for the whole grid; the settings then only project the cached cosines (numpy) and run
Algorithm 1's dynamic programme, all of them in one batched pass. Rankings file, report lookup, output
and cost: docs/meta.md.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from schemas.evaluation import BUILTIN_NAMES
from schemas.scoring import ScoreSettings
from tasks.errors import FrameInputError
from tasks.generate.runs import load_release_inputs, runs_folder
from tasks.generate.systems import builtin_systems, make_system
from tasks.meta.reports import Generations, check_system
from tasks.score.align import group_agreement, ranking_rows, shown
from tasks.score.structural_similarity import FlatTree, batched_similarity, node_fields, project_array
from tasks.score.tree import report_tree

__all__ = [
    "CSV_COLUMNS",
    "GAMMAS",
    "GOLD",
    "PROJECTION_GRID",
    "TABLES",
    "TYPE_WEIGHTS",
    "GridResult",
    "GridRow",
    "Prepared",
    "Ranked",
    "Setting",
    "agreement",
    "batched_similarity",
    "default_setting",
    "evaluate_grid",
    "grid_csv",
    "grid_json",
    "grid_scores",
    "load_rankings",
    "load_reports",
    "prepare_pairs",
    "project",
    "setting_scores",
    "structure_grid",
]

GOLD = "gold"  # the pseudo-system whose report is the release's target report Y
# The grid of paper 000 §4.4.1: (projection, its parameter) for Table 2, w for Table 3, gamma for Table 4.
PROJECTION_GRID: tuple[tuple[str, float | None], ...] = (
    ("linear", None),
    ("power", 3),
    ("power", 5),
    ("power", 7),
    ("rbf", 0.05),
    ("rbf", 0.10),
    ("rbf", 0.20),
    ("rbf", 0.30),
)
TYPE_WEIGHTS: tuple[float, ...] = (0.1, 0.2, 0.3, 0.5, 0.7)
GAMMAS: tuple[float, ...] = (0.0, 0.3, 0.5, 1.0, 2.0)
TABLES: dict[str, str] = {"projection": "Table 2", "type_weight": "Table 3", "depth": "Table 4"}


# ------------------------------------------------------------------------------------------- the grid


@dataclass(frozen=True)
class Setting:
    """One setting of the node similarity and of Algorithm 1 (the knobs of ScoreSettings)."""

    proj: str = "rbf"
    delta: float = 0.10
    power_n: int = 2
    type_weight: float = 0.2
    gamma: float = 0.0

    def key(self) -> tuple[Any, ...]:
        """Identity with the parameters the projection does not read left out (rbf reads delta, power n)."""
        delta = self.delta if self.proj == "rbf" else None
        n = self.power_n if self.proj == "power" else None
        return (self.proj, delta, n, self.type_weight, self.gamma)

    @property
    def name(self) -> str:
        param = {"rbf": f" delta={self.delta:g}", "power": f" n={self.power_n}"}.get(self.proj, "")
        return f"{self.proj}{param} w={self.type_weight:g} gamma={self.gamma:g}"

    def param(self) -> str:
        """The projection's parameter as Table 2 prints it."""
        return {"rbf": f"δ = {self.delta:.2f}", "power": f"n = {self.power_n}"}.get(self.proj, "–")


def default_setting(settings: ScoreSettings | None = None) -> Setting:
    """The setting `frame score` grades with (ScoreSettings' defaults unless given)."""
    s = settings or ScoreSettings()
    return Setting(s.proj, s.delta, s.power_n, s.type_weight, s.gamma)


@dataclass(frozen=True)
class GridRow:
    """One row of Table 2, 3 or 4: its table, its leading cells and the setting it evaluates."""

    table: str  # a key of TABLES
    cells: tuple[str, ...]
    setting: Setting
    default: bool


def structure_grid(default: Setting | None = None) -> list[GridRow]:
    """Tables 2-4 in print order: each varies one factor and keeps the others at `default`."""
    d = default or default_setting()
    rows: list[GridRow] = []
    grid = list(PROJECTION_GRID)
    if d.proj == "rbf" and ("rbf", d.delta) not in grid:  # a calibrated δ: its row beside the paper's four
        at = next(
            (k for k, (p, x) in enumerate(grid) if p == "rbf" and x is not None and x > d.delta), len(grid)
        )
        grid.insert(at, ("rbf", d.delta))
    for proj, param in grid:
        s = replace(d, proj=proj)
        if param is not None:
            s = replace(s, delta=float(param)) if proj == "rbf" else replace(s, power_n=int(param))
        rows.append(GridRow("projection", ({"rbf": "RBF"}.get(proj, proj.title()), s.param()), s, False))
    rows += [GridRow("type_weight", (f"{w:g}",), replace(d, type_weight=w), False) for w in TYPE_WEIGHTS]
    for g in GAMMAS:
        cells = ("no depth adjustment", "–") if g == 0 else ("depth adjustment", f"{g:g}")
        rows.append(GridRow("depth", cells, replace(d, gamma=g), False))
    return [replace(r, default=r.setting.key() == d.key()) for r in rows]


# ------------------------------------------------------------------------------------------ inputs


@dataclass(frozen=True)
class Ranked:
    """One row of the rankings file: a system's report of one instance and its human rank (1 = best)."""

    group_id: str
    system: str
    human_rank: float
    line: int


def load_rankings(path: str | Path) -> list[Ranked]:
    """Rows of a CSV ``group_id,system,human_rank[,score]`` (the format of `frame align --rankings`; the
    score column, when present, is ignored). FrameInputError (one line, naming the row) for a missing
    file or column, an empty group_id/system, a system that is not a system name (a path), a
    non-numeric rank or a repeated (group_id, system)."""
    rows = ranking_rows(path, with_score=False)
    for line, _, system, _, _ in rows:
        check_system(system, path, f"row at line {line}: ")
    return [Ranked(g, s, rank, line) for line, g, s, rank, _ in rows]


def load_reports(
    release: Path, rankings: Sequence[Ranked], generations: Path | None = None, where: str | Path = "rankings"
) -> tuple[dict[str, str], dict[tuple[str, str], str]]:
    """(gold report Y per group_id, report per (group_id, system)) for the rankings' rows.

    `gold` is the release's target report. Any other system's report is read from
    ``<generations>/<system>/`` (default: the release's `data/generations/<name>/<version>/`): its
    generations.parquet (failed rows left out), else its reports/<stem>.md; only that file is read, and
    only inside the generations folder (tasks.meta.reports). A builtin (copy-sample, extractive) with no
    report there is generated in-process. `where` names the rankings file in errors (a system that is
    not a system name, a group_id that is no instance of the release, a report that cannot be found)."""
    for r in rankings:
        check_system(r.system, where, f"row at line {r.line}: ")
    instances, by_set = load_release_inputs(release)
    rows = {str(r["instance_id"]): r for r in instances.to_dict("records")}
    root = generations if generations is not None else runs_folder(release, GOLD).parent
    stored = Generations(root)
    gold: dict[str, str] = {}
    reports: dict[tuple[str, str], str] = {}
    for r in rankings:
        inst = rows.get(r.group_id)
        if inst is None:
            raise FrameInputError(
                where, f"row at line {r.line}: group_id {shown(r.group_id)} is no instance of {release}"
            )
        gold[r.group_id] = str(inst["target_markdown"])
        if r.system == GOLD:
            reports[(r.group_id, r.system)] = gold[r.group_id]
            continue
        table = stored.table(r.system)
        if table is not None:
            markdown, error = table.get(r.group_id, (None, None))
            text = markdown if error is None else None
        else:
            text = stored.report_file(r.system, r.group_id)
        if text is None and r.system in BUILTIN_NAMES:
            system = make_system(r.system, builtin_systems()[r.system], cache_dir=root)
            text = system.generate(inst, by_set.get(str(inst["grounding_set_id"]), [])).markdown
        if text is None:
            raise FrameInputError(
                where,
                f"row at line {r.line}: no report of system {r.system!r} for {shown(r.group_id)} in "
                f"{root / r.system} (run `frame generate --system {r.system}` or give --generations)",
            )
        reports[(r.group_id, r.system)] = text
    return gold, reports


# --------------------------------------------------------------------------------- embeddings, once


@dataclass(frozen=True)
class _Tree:
    flat: FlatTree
    types: np.ndarray  # text index of each node's type, in preorder
    objectives: np.ndarray  # text index of each node's objective


@dataclass(frozen=True)
class _Pair:
    gold: _Tree
    generated: _Tree
    cos_type: np.ndarray  # (gold nodes, generated nodes) cosine of the type embeddings
    cos_objective: np.ndarray


@dataclass(frozen=True)
class Prepared:
    """The rankings' (gold, generated) tree pairs with their node cosines: all a setting needs."""

    rankings: tuple[Ranked, ...]
    pairs: tuple[_Pair, ...]  # one per ranking row, in order
    texts: int  # distinct node texts embedded


def _tree(markdown: str, tree: Callable[[str], Any], texts: dict[str, int]) -> _Tree:
    flat = FlatTree(tree(markdown))
    fields = [node_fields(o) for o in flat.objs]
    ids = [[texts.setdefault(t, len(texts)) for t in pair] for pair in fields]
    arr = np.array(ids, dtype=np.intp).reshape(len(ids), 2)
    return _Tree(flat, arr[:, 0], arr[:, 1])


def prepare_pairs(
    rankings: Sequence[Ranked],
    gold: Mapping[str, str],
    reports: Mapping[tuple[str, str], str],
    embed: Callable[[list[str]], Any],
    tree: Callable[[str], Any] = report_tree,
) -> Prepared:
    """Trees of every report (each distinct Markdown once), ONE `embed` call with every distinct node text
    (type and objective, as `make_node_similarity` reads them), and per ranking row the cosine matrices of
    its (gold, generated) pair."""
    texts: dict[str, int] = {}
    trees: dict[str, _Tree] = {}
    for r in rankings:
        for md in (gold[r.group_id], reports[(r.group_id, r.system)]):
            if md not in trees:
                trees[md] = _tree(md, tree, texts)
    vectors = np.asarray(embed(list(texts)), dtype=float) if texts else np.zeros((0, 1))
    if vectors.shape[0] != len(texts):
        raise ValueError(f"embed returned {vectors.shape[0]} vectors for {len(texts)} texts")
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)  # as make_node_similarity: unit rows, 0 stays 0
    vectors = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)

    def cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.clip(vectors[a] @ vectors[b].T, -1.0, 1.0)

    pairs = []
    for r in rankings:
        g, s = trees[gold[r.group_id]], trees[reports[(r.group_id, r.system)]]
        pairs.append(_Pair(g, s, cos(g.types, s.types), cos(g.objectives, s.objectives)))
    return Prepared(tuple(rankings), tuple(pairs), len(texts))


# ------------------------------------------------------------------------------------- per setting


def project(x: np.ndarray, setting: Setting) -> np.ndarray:
    """The projection of `structural_similarity.PROJECTIONS`, elementwise on an array of cosines."""
    return project_array(x, setting.proj, setting.delta, setting.power_n)


def _similarities(pair: _Pair, settings: Sequence[Setting]) -> np.ndarray:
    """(K, gold nodes, generated nodes) node similarities, one matrix per setting."""
    out = np.empty((len(settings), *pair.cos_type.shape))
    for k, s in enumerate(settings):
        w = s.type_weight
        out[k] = w * project(pair.cos_type, s) + (1.0 - w) * project(pair.cos_objective, s)
    return out


def grid_scores(prepared: Prepared, settings: Sequence[Setting]) -> np.ndarray:
    """(K settings, ranking rows) structural similarities; no embedding call."""
    gammas = np.array([s.gamma for s in settings], dtype=float)
    cols = [
        batched_similarity(p.gold.flat, p.generated.flat, _similarities(p, settings), gammas)
        for p in prepared.pairs
    ]
    return np.column_stack(cols) if cols else np.zeros((len(settings), 0))


def setting_scores(prepared: Prepared, setting: Setting) -> list[float]:
    """Structural similarity of every ranking row's pair under `setting` (no embedding call)."""
    return [float(x) for x in grid_scores(prepared, [setting])[0]]


def agreement(rankings: Sequence[Ranked], scores: Sequence[float]) -> dict[str, Any]:
    """Mean per-group Spearman r / Kendall tau-b of -human_rank vs score, exactly as `frame align
    --rankings` computes it (tasks.score.align.group_agreement); undefined groups are skipped."""
    groups: dict[str, list[tuple[float, float]]] = {}
    for r, score in zip(rankings, scores, strict=True):
        groups.setdefault(r.group_id, []).append((r.human_rank, score))
    return group_agreement(groups)


@dataclass(frozen=True)
class GridResult:
    row: GridRow
    spearman_r: float | None
    kendall_tau: float | None
    groups: int
    n: int


def evaluate_grid(prepared: Prepared, grid: Sequence[GridRow]) -> list[GridResult]:
    """Agreement of every grid row; all distinct settings in one batched pass over the pairs."""
    distinct = list({row.setting.key(): row.setting for row in grid}.values())
    scores = grid_scores(prepared, distinct)
    done = {s.key(): agreement(prepared.rankings, scores[k].tolist()) for k, s in enumerate(distinct)}
    out = []
    for row in grid:
        a = done[row.setting.key()]
        out.append(GridResult(row, a["spearman_r"], a["kendall_tau"], a["groups"], a["n"]))
    return out


# ----------------------------------------------------------------------------------------- output

CSV_COLUMNS = (
    "table", "setting", "proj", "delta", "power_n", "type_weight", "gamma",
    "spearman_r", "kendall_tau", "groups", "n", "default",
)  # fmt: skip


def _round(x: float | None) -> float | None:
    return round(x, 6) + 0.0 if x is not None and math.isfinite(x) else None  # + 0.0: no -0.0


def _record(res: GridResult) -> dict[str, Any]:
    s = res.row.setting
    return {
        "table": res.row.table,
        "setting": s.name,
        "proj": s.proj,
        "delta": s.delta if s.proj == "rbf" else None,
        "power_n": s.power_n if s.proj == "power" else None,
        "type_weight": s.type_weight,
        "gamma": s.gamma,
        "spearman_r": _round(res.spearman_r),
        "kendall_tau": _round(res.kendall_tau),
        "groups": res.groups,
        "n": res.n,
        "default": res.row.default,
    }


def grid_csv(results: Sequence[GridResult]) -> str:
    """One line per grid row (CSV_COLUMNS; empty cell = not applicable or undefined)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for res in results:
        writer.writerow({k: "" if v is None else v for k, v in _record(res).items()})
    return buf.getvalue()


def grid_json(results: Sequence[GridResult], info: Mapping[str, Any]) -> str:
    """``info`` plus ``tables``: {table: [row records]} (floats rounded to 6 places, undefined -> null)."""
    tables: dict[str, list[dict[str, Any]]] = {t: [] for t in TABLES}
    for res in results:
        tables[res.row.table].append(_record(res))
    return json.dumps({**info, "tables": tables}, indent=2, allow_nan=False)  # tables in paper order
