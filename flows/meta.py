"""`frame meta ...`: meta-evaluation of the metrics against human judgement (paper 000 Tables 2-5).

`frame meta structure` recomputes structural similarity over the grid of paper 000 Tables 2-4 for the
reports a rankings file names and prints Spearman r / Kendall tau against the human ranks per setting
(tasks.meta.structure; file formats and an example: docs/meta.md). Registered by flows/cli/ as `meta`.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from flows.configs import instance_subset
from flows.places import not_in_release, release_tables
from flows.subset_options import InstanceIds, Limit
from flows.terminal import FrameTyper
from tasks.errors import FrameInputError

meta_app = FrameTyper(
    no_args_is_help=True,
    help="Meta-evaluation: how well the metrics agree with human judgement (paper 000 Tables 2-5).",
)

CSV_NAME = "structure.csv"


# where the reports of the systems named by the items / rankings are read from (both commands)
GenerationsOption = Annotated[
    Path | None,
    typer.Option(
        "--generations",
        help="folder of <system>/generations.parquet or <system>/reports/*.md "
        "(default: data/generations/<name>/<version> beside the release)",
    ),
]


@meta_app.callback()
def _meta() -> None:
    # A callback keeps `meta` a command group while it holds a single command (typer collapses it).
    pass


def _fail(exc: FrameInputError) -> None:
    # One line, no traceback: the message already names the file and the problem (as the CLI does).
    print(f"frame: error: {exc}".replace("\n", " "), file=sys.stderr)
    raise typer.Exit(2)


def _judge_env(release: Path, embedder: str) -> Any:
    """The JudgeEnv `frame score` would grade with: default ScoreSettings but `embedder`, the same
    embedding cache (FRAME_CACHE_DIR, else the release's data/cache), the FRAME_LLM_* endpoint."""
    from schemas.config import LLMSettings
    from schemas.scoring import ScoreSettings
    from tasks.score.metric import JudgeEnv

    parents = release.resolve().parents  # data/releases/<name>/<version> -> data
    data = parents[2] if len(parents) > 2 else release
    cache_dir = Path(os.environ.get("FRAME_CACHE_DIR") or data / "cache")
    embed_llm = LLMSettings().resolved() if embedder != "minilm" else None
    return JudgeEnv(ScoreSettings(embedder=embedder), None, cache_dir, embed_llm)


def _release_input(release: Path) -> None:
    """`--release` is a release folder holding only regular files (no link out of it, no FIFO: as for
    every command on a release, tasks.release.members.check_release_folder)."""
    if not release.is_dir():
        raise FrameInputError(release, "not a folder (give data/releases/<name>/<version>)")
    release_tables(release)


def _run_structure(
    rankings: Path, release: Path, generations: Path | None, embedder: str, pick: tuple = (None, None)
):
    """(grid results, run info, seconds): load, embed once, evaluate every setting."""
    from tasks.meta import structure as ms
    from tasks.score.structural_similarity import StructureFamily

    started = time.perf_counter()
    rows = ms.load_rankings(rankings)
    _release_input(release)
    subset = instance_subset(release, *pick, {r.group_id for r in rows}) if pick != (None, None) else None
    if subset is not None:  # a smoke run: the ranked groups of a few instances
        rows = [r for r in rows if r.group_id in set(subset.ids)]
    if generations is not None and not generations.is_dir():
        raise FrameInputError(generations, "not a folder (give data/generations/<name>/<version>)")
    env = _judge_env(release, embedder)
    family = StructureFamily(env)  # its trees and its embedder (checked here): what `frame score` uses
    gold, reports = ms.load_reports(release, rows, generations, where=rankings)
    prepared = ms.prepare_pairs(rows, gold, reports, env.embed, family.tree)
    embedded = time.perf_counter()
    results = ms.evaluate_grid(prepared, ms.structure_grid(ms.default_setting(env.settings)))
    info = {
        "embedder": env.embedder,
        "groups": len({r.group_id for r in rows}),
        "reports": len(rows),
        "texts": prepared.texts,
        "default": ms.default_setting(env.settings).name,
        "settings": len({r.row.setting.key() for r in results}),
    }
    return results, info, {"inputs": embedded - started, "grid": time.perf_counter() - embedded}


def _cell(x: float | None, best: float | None) -> str:
    if x is None:
        return "n/a"
    text = f"{round(x, 3) + 0.0:.3f}"  # + 0.0: a mean of -1e-17 prints 0.000, not -0.000
    return f"[bold]{text}[/]" if best is not None and round(x, 3) == round(best, 3) else text


def _print_tables(results: list[Any], info: dict[str, Any], seconds: dict[str, float]) -> None:
    """Tables 2, 3 and 4 of paper 000 (best value of each column in bold, the default marked *)."""
    from rich.console import Console
    from rich.table import Table

    from tasks.meta.structure import TABLES

    d = next(r.row.setting for r in results if r.row.default)
    heads = {
        "projection": ("projection function", f"w = {d.type_weight:g}, γ = {d.gamma:g}", ("type", "param")),
        "type_weight": ("type weight", f"{d.proj} {d.param()}, γ = {d.gamma:g}", ("w",)),
        "depth": ("depth adjustment", f"{d.proj} {d.param()}, w = {d.type_weight:g}", ("setting", "γ")),
    }
    out = Console()
    for table, label in TABLES.items():
        rows = [r for r in results if r.row.table == table]
        title, fixed, cols = heads[table]
        t = Table(title=f"{label}: {title}", caption=fixed)
        for c in cols:
            t.add_column(c)
        t.add_column("Spearman r", justify="right")
        t.add_column("Kendall τ", justify="right")
        best_r = max((r.spearman_r for r in rows if r.spearman_r is not None), default=None)
        best_t = max((r.kendall_tau for r in rows if r.kendall_tau is not None), default=None)
        for r in rows:
            cells = list(r.row.cells)
            cells[-1] += " *" if r.row.default else ""
            t.add_row(*cells, _cell(r.spearman_r, best_r), _cell(r.kendall_tau, best_t))
        out.print(t)
    groups = results[0].groups if results else 0
    print(
        f"* default setting ({info['default']}); best of each column in bold. Agreement with the human "
        f"ranks of {groups} of {info['groups']} group(s) ({info['reports']} report(s)); {info['texts']} node "
        f"texts embedded once ({info['embedder']}); inputs {seconds['inputs']:.1f} s, "
        f"{info['settings']} settings {seconds['grid']:.1f} s."
    )


@meta_app.command("structure")
def structure_cmd(
    rankings: Annotated[
        Path, typer.Option("--rankings", help="CSV group_id,system,human_rank (a score column is ignored)")
    ],
    release: Annotated[
        Path, typer.Option("--release", help="data/releases/<name>/<version> whose instances group_id names")
    ],
    generations: GenerationsOption = None,
    embedder: Annotated[str, typer.Option("--embedder", help="minilm | openai:<model>")] = "minilm",
    limit: Limit = None,
    instances: InstanceIds = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of the tables")] = False,
    out: Annotated[Path | None, typer.Option("--out", help=f"folder for {CSV_NAME}")] = None,
) -> None:
    """Structural similarity over the projection / type-weight / depth grid (paper 000 Tables 2-4): Spearman
    r and Kendall tau against the human ranks for each setting; embeddings are computed once."""
    from tasks.atomic import atomic_write_text
    from tasks.meta.structure import grid_csv, grid_json

    try:
        if out is not None:
            not_in_release(out)
        results, info, seconds = _run_structure(rankings, release, generations, embedder, (limit, instances))
    except FrameInputError as exc:
        _fail(exc)
    except Exception as exc:  # e.g. the embedding endpoint failed after its retries: one line, exit 1
        print(
            f"frame: error: meta structure: {str(exc).splitlines()[0] if str(exc) else repr(exc)}",
            file=sys.stderr,
        )
        raise typer.Exit(1) from None
    if out is not None:
        atomic_write_text(out / CSV_NAME, grid_csv(results))
    if as_json:
        print(grid_json(results, info))
    else:
        _print_tables(results, info, seconds)
    if out is not None and not as_json:
        print(f"{out / CSV_NAME}: {len(results)} rows")


# ---------------------------------------------------------------- frame meta judge


def _judges_for(release: Path, kinds: str | None, config: Path | None, embedder: str):
    """{kind: ItemJudge}: `kinds` (default: offline, plus openai when an endpoint is configured by
    --config's [judge] / [llm] or FRAME_LLM_*), on `frame score`'s embedding cache."""
    from flows.configs import eval_or_build_config
    from schemas.config import LLMSettings
    from schemas.scoring import ScoreSettings
    from tasks.meta.judge import JUDGE_KINDS, make_judges
    from tasks.release.place import release_data_folder
    from tasks.score.metric import JudgeEnv

    ev, llm, data_dir, _ = eval_or_build_config(config)
    judge_llm = ev.judge_settings() if ev is not None and ev.judge is not None else llm
    if judge_llm is not None and (judge_llm.backend != "openai" or not judge_llm.base_url):
        judge_llm = None
    names = [k.strip() for k in kinds.split(",") if k.strip()] if kinds else None
    if names is None:
        names = ["offline", "openai"] if judge_llm is not None else ["offline"]
    if len(set(names)) != len(names) or not set(names) <= set(JUDGE_KINDS):
        raise FrameInputError(
            "--judges", f"give distinct names among {', '.join(JUDGE_KINDS)} (got {kinds!r})"
        )
    if "openai" in names and judge_llm is None:
        raise FrameInputError(
            "--judges",
            "openai needs an endpoint: FRAME_LLM_BACKEND=openai and FRAME_LLM_BASE_URL, or --config",
        )
    cache_dir = Path(os.environ.get("FRAME_CACHE_DIR") or release_data_folder(release, data_dir) / "cache")
    embed_llm = LLMSettings().resolved() if embedder != "minilm" else None
    env = JudgeEnv(ScoreSettings(embedder=embedder), judge_llm, cache_dir, embed_llm)
    return make_judges(env, names)


def _print_judge_table(table: Any, judged: Any) -> None:
    """Paper 000 Table 5, one row per (metric, judge, against), and the judges' names below."""
    from rich.console import Console
    from rich.table import Table

    t = Table(title="Judge alignment (paper 000 Table 5)")
    for col in ("metric", "judge", "against", "n", "PA@0", "PA@25", "QWK", "ICC(3,1)", "ICC(A,1)"):
        t.add_column(col, justify="right" if col not in ("metric", "judge", "against") else "left")

    def num(x: Any, pct: bool = False) -> str:
        if x is None or x != x:  # NaN: undefined
            return "n/a"
        return f"{100 * x:.1f}%" if pct else f"{x:.3f}"

    for r in table.to_dict("records"):
        t.add_row(
            r["metric"], r["judge"], r["against"], str(r["n"]), num(r["pa0"], True), num(r["pa25"], True),
            num(r["qwk"]), num(r["icc"]), num(r["icc_a1"]),
        )  # fmt: skip
    Console().print(t)
    for r in judged[["judge", "metric", "judge_name"]].drop_duplicates().to_dict("records"):
        print(f"{r['judge']} ({r['metric']}): {r['judge_name']}")


def _write_judge_outputs(out: Path, table: Any, judged: Any) -> list[Path]:
    """judge_table.csv, judged.csv (every item x judge, with rationale) and <judge>.csv per judge
    (item_id,score: the JUDGE.csv of `frame align`)."""
    from tasks.atomic import atomic_write_text

    paths = [
        atomic_write_text(out / "judge_table.csv", table.to_csv(index=False, lineterminator="\n")),
        atomic_write_text(out / "judged.csv", judged.to_csv(index=False, lineterminator="\n")),
    ]
    for judge, rows in judged.groupby("judge", sort=False):
        text = rows[["item_id", "score"]].to_csv(index=False, lineterminator="\n")
        paths.append(atomic_write_text(out / f"{judge}.csv", text))
    return paths


@meta_app.command("judge")
def judge_cmd(
    human: Annotated[
        Path, typer.Argument(help="human scores: item_id,score (0-100), or items.csv with a score")
    ],
    release: Annotated[
        Path, typer.Option("--release", help="data/releases/<name>/<version> the items come from")
    ],
    items: Annotated[
        Path | None, typer.Option("--items", help="the annotation sheet (default: items.csv beside HUMAN)")
    ] = None,
    generations: GenerationsOption = None,
    judges: Annotated[
        str | None,
        typer.Option(
            "--judges", help="offline,openai (default: offline, plus openai when an endpoint is set)"
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", help="evaluation config (\\[judge]) or build config (\\[llm]) of the LLM judge"
        ),
    ] = None,
    embedder: Annotated[str, typer.Option("--embedder", help="minilm | openai:<model>")] = "minilm",
    limit: Limit = None,
    instances: InstanceIds = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of the table")] = False,
    out: Annotated[
        Path | None, typer.Option("--out", help="folder for judge_table.csv, judged.csv, <judge>.csv")
    ] = None,
) -> None:
    """Re-judge human-annotated coverage / faithfulness items with the offline judge and, when configured,
    the LLM judge: PA@0, PA@25, QWK, ICC per judge (paper 000 Table 5), plus judge-vs-judge agreement."""
    from tasks.meta.judge import ReleaseSource, judge_items, judge_json, judge_table, load_annotations

    try:
        if out is not None:
            not_in_release(out)
        annotations = load_annotations(human, items)
        if limit is not None or instances is not None:  # a smoke run: the items of a few instances
            _release_input(release)
            subset = instance_subset(release, limit, instances, set(annotations["instance_id"]))
            if subset is not None:
                annotations = annotations[annotations["instance_id"].isin(subset.ids)].reset_index(drop=True)
        if generations is not None and not generations.is_dir():
            raise FrameInputError(generations, "not a folder (give data/generations/<name>/<version>)")
        _release_input(release)
        source = ReleaseSource(release, generations)
        chosen = _judges_for(release, judges, config, embedder)
        judged = judge_items(annotations, chosen, source)
        table = judge_table(annotations, judged)
    except FrameInputError as exc:
        _fail(exc)
    except Exception as exc:  # e.g. the LLM endpoint failed after its retries: one line, exit 1
        print(
            f"frame: error: meta judge: {str(exc).splitlines()[0] if str(exc) else repr(exc)}",
            file=sys.stderr,
        )
        raise typer.Exit(1) from None
    written = _write_judge_outputs(out, table, judged) if out is not None else []
    if as_json:
        print(judge_json(table, judged))
        return
    _print_judge_table(table, judged)
    for p in written:
        print(p)


# ---------------------------------------------------------------- frame meta items


def _print_items(items: Any, by_system: Any, pairs: Any, top: int) -> None:
    """The item table (pass rate overall and per system, discrimination) and the most frequent failure
    pairs (each unordered pair once, by how often both fail)."""
    from rich.console import Console
    from rich.table import Table

    systems = list(dict.fromkeys(by_system["system"]))
    rates = by_system.pivot(index="item", columns="system", values="pass_rate")
    t = Table(title="Rubric items: pass rate (mean credit) and discrimination (paper 003 Fig. 8)")
    for col in (
        "item",
        "layer",
        "reports",
        "pass rate",
        "passed",
        "partial",
        "failed",
        *systems,
        "SD between",
    ):
        t.add_column(col, justify="left" if col in ("item", "layer") else "right")
    for r in items.to_dict("records"):
        per = [
            f"{rates.at[r['item'], s]:.2f}" if rates.at[r["item"], s] == rates.at[r["item"], s] else "-"
            for s in systems
        ]
        sd = "n/a" if r["discrimination"] != r["discrimination"] else f"{r['discrimination']:.3f}"
        t.add_row(
            r["item"], r["layer"], str(r["reports"]), f"{r['pass_rate']:.2f}", f"{r['passed']:.2f}",
            f"{r['partial']:.2f}", f"{r['failed']:.2f}", *per, sd,
        )  # fmt: skip
    out = Console()
    out.print(t)
    order = {u: k for k, u in enumerate(dict.fromkeys(pairs["a"]))}  # items (or layers) in rubric order
    once = pairs[[order[a] < order[b] for a, b in zip(pairs["a"], pairs["b"], strict=True)]]
    once = once[once["both"] > 0].sort_values(["both", "phi"], ascending=False).head(top)
    p = Table(title=f"Failures that co-occur on the same report (top {top})")
    for col in ("a", "b", "reports", "fail a", "fail b", "both", "P(b|a)", "P(a|b)", "phi"):
        p.add_column(col, justify="left" if col in ("a", "b") else "right")
    for r in once.to_dict("records"):
        p.add_row(
            r["a"], r["b"], str(r["reports"]), str(r["fail_a"]), str(r["fail_b"]), str(r["both"]),
            f"{r['both'] / r['fail_a']:.2f}", f"{r['both'] / r['fail_b']:.2f}",
            "n/a" if r["phi"] != r["phi"] else f"{r['phi']:.2f}",
        )  # fmt: skip
    out.print(p)


@meta_app.command("items")
def items_cmd(
    scores: Annotated[
        Path, typer.Option("--scores", help="a `frame score` output folder (scored with rubric)")
    ],
    systems: Annotated[
        str | None, typer.Option("--systems", help="comma-separated systems (default: every scored system)")
    ] = None,
    fail_below: Annotated[
        float,
        typer.Option("--fail-below", help="an item fails when its credit is below this (1: partial fails)"),
    ] = 1.0,
    by: Annotated[
        str, typer.Option("--by", help="co-occurrence of items or of layers (G0/G1/G2): item | layer")
    ] = "item",
    value: Annotated[str, typer.Option("--value", help="heatmap: phi | p_b_given_a")] = "phi",
    top: Annotated[int, typer.Option("--top", help="co-occurring failure pairs printed")] = 15,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of the tables")] = False,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="folder for items.csv, items_by_system.csv, cooccurrence.csv, items.png/.svg "
            "(default <scores>/meta)",
        ),
    ] = None,
) -> None:
    """Per rubric item: pass rate overall and per system, discrimination between systems (SD of their pass
    rates) and failure co-occurrence on the same report (paper 003 Fig. 8), as tables and a plot."""
    from tasks.atomic import atomic_write_bytes, atomic_write_text
    from tasks.meta import items as mi

    try:
        if not 0.0 < fail_below <= 1.0:
            raise FrameInputError("--fail-below", f"must be in (0, 1] (got {fail_below:g})")
        if by not in ("item", "layer"):
            raise FrameInputError("--by", f"must be item or layer (got {by!r})")
        if value not in ("phi", "p_b_given_a"):
            raise FrameInputError("--value", f"must be phi or p_b_given_a (got {value!r})")
        if top < 1:
            raise FrameInputError("--top", f"must be >= 1 (got {top})")
        folder = not_in_release(out) if out is not None else not_in_release(scores / "meta", "--scores")
        chosen = [s.strip() for s in systems.split(",") if s.strip()] if systems else None
        decisions = mi.load_decisions(scores, systems=chosen)
    except FrameInputError as exc:
        _fail(exc)
    items, by_system = mi.item_table(decisions), mi.system_table(decisions)
    pairs = mi.cooccurrence(decisions, fail_below=fail_below, by=by)
    plots = {fmt: mi.items_plot(items, pairs, value=value, fmt=fmt) for fmt in ("png", "svg")}  # all first
    for name, df in (("items", items), ("items_by_system", by_system), ("cooccurrence", pairs)):
        atomic_write_text(folder / f"{name}.csv", df.to_csv(index=False, lineterminator="\n"))
    for fmt, data in plots.items():
        atomic_write_bytes(folder / f"items.{fmt}", data)
    if as_json:
        print(mi.items_json(items, by_system, pairs))
        return
    _print_items(items, by_system, pairs, top)
    print(f"{folder}: items.csv, items_by_system.csv, cooccurrence.csv, items.png, items.svg")
