"""Calibrate the structure metric's node-similarity projection for an embedder (docs/metrics/structure.md,
Calibration): fit the RBF width δ on labelled pairs of real section headings and print the figures.

Data (tasks/score/calibration.py): the Form items of every filing of ../shared/corpus/edgar-wide (the
peer parser's expected sections confirm each item), the notes of those filings labelled by their iXBRL
text-block concept, and the sections of the arXiv papers of ../shared/corpus/arxiv labelled by kind. Each
filing and paper is grounded by `frame ground`'s code (`tasks.sources.ground_source`); every node
is built by `tasks.score.tree.report_tree`. Criterion: the δ that maximises, averaged over the three
sources, the mean projected similarity of positive pairs minus that of negative pairs. w stays the
paper's: every pair is section against section, so the type term is the same constant for all of them.

    .venv/bin/python benchmarks/calibrate_structure.py [--embedder minilm] [--nodes headings|sections]
        [--write] [--limit N]

`--write` stores δ and the figures for the embedder in schemas/projection.toml (never for
openai:text-embedding-3-small, whose δ is the paper's). MiniLM runs in fp32 (the tests' precision).
Corpus: $FRAME_CORPUS, else ../shared/corpus beside the repo. Embeddings are cached in $FRAME_CACHE_DIR,
else data/cache.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.qa_wide import corpus_dir, load_filings, peer_items  # noqa: E402

PAPER_EMBEDDER = "openai:text-embedding-3-small"  # the paper's δ stays for it (fitted on human rankings)
SOURCES = ("items", "notes", "papers")
CRITERION = "max over delta of the mean over sources of (mean proj(positive) - mean proj(negative))"


@dataclass
class Result:
    """Everything one calibration run measured."""

    embedder: str
    embedder_name: str
    nodes: str
    type_weight: float
    delta: float
    filings: int
    papers: int
    skipped: list[str]
    per_source: dict[str, dict] = field(default_factory=dict)
    pooled: dict = field(default_factory=dict)
    fit: object = None


def load_units(limit: int | None = None) -> tuple[list, int, int, list[str]]:
    """(units, filings used, papers used, skipped files with the reason)."""
    from tasks.errors import FrameInputError
    from tasks.ground.ixbrl import parse_ixbrl
    from tasks.ground.textblocks import note_blocks
    from tasks.score.calibration import item_units, note_units, paper_units
    from tasks.sources import ground_source

    units, skipped, filings, papers = [], [], 0, 0
    for row in load_filings("wide")[:limit]:
        data = Path(row["path"]).read_bytes()
        name = Path(row["path"]).name
        try:
            grounded = ground_source(data, name)
            concepts = [b.concept for b in note_blocks(parse_ixbrl(data, name))]
        except FrameInputError as exc:
            skipped.append(f"{row['name']}: {exc.problem}")
            continue
        docs = [d.model_dump(mode="json") for d in grounded.documents]
        _, sizes = peer_items(row["form"], row["expected"])
        found = [k for k, v in sizes.items() if v > 0]
        units += item_units(row["name"], row["form"], docs, grounded.markdown, found)
        units += note_units(row["name"], docs, grounded.markdown, concepts)
        filings += 1
    arxiv = corpus_dir() / "arxiv"
    with (arxiv / "MANIFEST.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows[:limit]:
        grounded = ground_source((arxiv / row["path"]).read_bytes(), Path(row["path"]).name)
        units += paper_units(row["arxiv_id"], "\n".join(grounded.markdown.values()))
        papers += 1
    return units, filings, papers, skipped


def judge_env(embedder: str, cache_dir: Path):
    """The JudgeEnv `frame score --embedder <embedder>` would embed with (MiniLM in fp32)."""
    from schemas.config import LLMSettings
    from schemas.scoring import ScoreSettings
    from tasks.score.metric import JudgeEnv

    embed_llm = LLMSettings().resolved() if embedder != "minilm" else None
    return JudgeEnv(ScoreSettings(embedder=embedder, embed_precision="fp32"), None, cache_dir, embed_llm)


def calibrate(units: list, embed, nodes: str = "headings", type_weight: float = 0.2) -> tuple:
    """(Fit, per-source figures, pooled figures) of `units` with the embedding function `embed`."""
    from schemas.projection import PAPER_DELTA
    from tasks.score.calibration import cosine_matrix, fit_delta, labelled_pairs, pair_values, roc_auc
    from tasks.score.structural_similarity import make_node_similarity, project_array

    pairs = {p.source: p for p in labelled_pairs(units, nodes)}
    cos = {s: pair_values(p, cosine_matrix(embed)) for s, p in pairs.items()}
    fit = fit_delta(cos)
    per: dict[str, dict] = {}
    pooled_cos: tuple[list, list] = ([], [])
    pooled_sim: tuple[list, list] = ([], [])
    for source, p in pairs.items():
        sim = make_node_similarity(embed, w=type_weight, proj="rbf", delta=fit.delta)
        sp, sn = pair_values(p, sim.matrix)
        cp, cn = cos[source]
        pooled_cos[0].extend(cp), pooled_cos[1].extend(cn), pooled_sim[0].extend(sp), pooled_sim[1].extend(sn)

        def half(x: np.ndarray, d: float) -> float:
            return float((project_array(x, "rbf", d, 2) >= 0.5).mean())

        per[source] = {
            "units": sum(u.source == source for u in units),
            "labels": len({u.label for u in units if u.source == source}),
            "positive_pairs": len(p.positive),
            "negative_pairs": len(p.negative),
            "auc_cosine": roc_auc(cp, cn),
            "auc_projected": roc_auc(sp, sn),
            "best_delta": fit.best(source),
            "gap_paper": fit.gaps[source][fit.grid.index(PAPER_DELTA)],
            "gap": fit.gaps[source][fit.grid.index(fit.delta)],
            "pos_half_paper": half(cp, PAPER_DELTA),
            "pos_half": half(cp, fit.delta),
            "neg_half_paper": half(cn, PAPER_DELTA),
            "neg_half": half(cn, fit.delta),
            "cos_pos": np.percentile(cp, [10, 50, 90]).round(3).tolist(),
            "cos_neg": np.percentile(cn, [10, 50, 90]).round(3).tolist(),
            "hardest_positive": _examples(p, cp, p.positive, low=True),
            "hardest_negative": _examples(p, cn, p.negative, low=False),
        }
    pooled = {
        "positive_pairs": len(pooled_cos[0]),
        "negative_pairs": len(pooled_cos[1]),
        "auc_cosine": roc_auc(*pooled_cos),
        "auc_projected": roc_auc(*pooled_sim),
    }
    return fit, per, pooled


def _examples(p, values: np.ndarray, index: list[tuple[int, int]], low: bool, k: int = 3) -> list[str]:
    order = np.argsort(values)[:k] if low else np.argsort(values)[::-1][:k]

    def side(i: int) -> str:
        return f"{p.nodes[i]['title']!r} ({p.labels[i].removeprefix('us-gaap:')})"

    return [f"{side(index[o][0])} / {side(index[o][1])}: {values[o]:.3f}" for o in order]


def run(embedder: str, nodes: str, limit: int | None, cache_dir: Path) -> Result:
    from schemas.projection import PAPER_TYPE_WEIGHT

    units, filings, papers, skipped = load_units(limit)
    env = judge_env(embedder, cache_dir)
    fit, per, pooled = calibrate(units, env.embed, nodes, PAPER_TYPE_WEIGHT)
    r = Result(embedder, env.embedder, nodes, PAPER_TYPE_WEIGHT, fit.delta, filings, papers, skipped)
    r.per_source, r.pooled, r.fit = per, pooled, fit
    return r


def print_result(r: Result) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    from schemas.projection import PAPER_DELTA

    out = Console(width=160)
    out.print(
        f"embedder {r.embedder} ({r.embedder_name}), nodes: {r.nodes}; {r.filings} filings, {r.papers} papers"
    )
    for s in r.skipped:
        out.print(f"  skipped {s}")
    t = Table(
        box=box.SIMPLE_HEAVY,
        title=f"pairs and separation (δ = {r.delta:.2f} chosen, paper {PAPER_DELTA:.2f})",
    )
    cols = ["source", "units", "labels", "pos", "neg", "AUC cos", "AUC proj", "best δ", "gap@0.10", "gap@δ"]
    cols += [
        "pos≥.5 @0.10",
        "pos≥.5 @δ",
        "neg≥.5 @0.10",
        "neg≥.5 @δ",
        "cos pos p10/50/90",
        "cos neg p10/50/90",
    ]
    for c in cols:
        t.add_column(c, justify="left" if c == "source" else "right")
    for source, f in r.per_source.items():
        t.add_row(
            source, str(f["units"]), str(f["labels"]), str(f["positive_pairs"]), str(f["negative_pairs"]),
            f"{f['auc_cosine']:.3f}", f"{f['auc_projected']:.3f}", f"{f['best_delta']:.2f}",
            f"{f['gap_paper']:.3f}", f"{f['gap']:.3f}", f"{f['pos_half_paper']:.2f}", f"{f['pos_half']:.2f}",
            f"{f['neg_half_paper']:.2f}", f"{f['neg_half']:.2f}",
            " ".join(f"{x:.2f}" for x in f["cos_pos"]), " ".join(f"{x:.2f}" for x in f["cos_neg"]),
        )  # fmt: skip
    p = r.pooled
    gaps = (f"{r.fit.at(PAPER_DELTA):.3f}", f"{r.fit.at(r.delta):.3f}")
    aucs = (f"{p['auc_cosine']:.3f}", f"{p['auc_projected']:.3f}")
    t.add_row(
        "all", "", "", str(p["positive_pairs"]), str(p["negative_pairs"]), *aucs, f"{r.delta:.2f}", *gaps
    )
    out.print(t)
    curve = "  ".join(
        f"{d:.2f}:{r.fit.at(d):.3f}"
        for d in (0.05, 0.10, 0.15, 0.20, 0.25, 0.30, 0.35, 0.40, 0.50, 0.70, 1.00)
    )
    out.print(f"criterion (mean over sources of the gap) by δ: {curve}")
    for source, f in r.per_source.items():
        out.print(f"{source}: lowest positives  " + "; ".join(f["hardest_positive"]))
        out.print(f"{source}: highest negatives " + "; ".join(f["hardest_negative"]))


# ------------------------------------------------------------------------------------------ the file


def entry_text(r: Result) -> str:
    """The TOML table of one calibrated embedder (what --write stores)."""
    lines = [
        f'[embedders."{r.embedder}"]',
        f"# {r.embedder_name}; benchmarks/calibrate_structure.py --embedder {r.embedder} --nodes {r.nodes}",
        f"delta = {r.delta:.2f}",
        f"type_weight = {r.type_weight:g}",
        'delta_source = "calibrated"',
        'type_weight_source = "paper"  # every pair is section against section: the data cannot fit w',
        f'nodes = "{r.nodes}"',
        f'criterion = "{CRITERION}"',
        f"filings = {r.filings}",
        f"papers = {r.papers}",
        f"positive_pairs = {r.pooled['positive_pairs']}",
        f"negative_pairs = {r.pooled['negative_pairs']}",
        f"auc_cosine = {r.pooled['auc_cosine']:.4f}",
        f"auc_projected = {r.pooled['auc_projected']:.4f}",
    ]
    for source, f in r.per_source.items():
        lines += [
            "",
            f'[embedders."{r.embedder}".sources.{source}]',
            f"positive_pairs = {f['positive_pairs']}",
            f"negative_pairs = {f['negative_pairs']}",
            f"auc_cosine = {f['auc_cosine']:.4f}",
            f"best_delta = {f['best_delta']:.2f}",
        ]
    return "\n".join(lines) + "\n"


def write_entry(path: Path, r: Result) -> None:
    """Replace (or append) the embedder's table in the projection file, keeping every other line."""
    if r.embedder == PAPER_EMBEDDER:
        raise SystemExit(f"{PAPER_EMBEDDER} keeps the paper's δ (fitted against human rankings): not written")
    text = path.read_text(encoding="utf-8")
    head = f'[embedders."{r.embedder}"]'
    lines = text.splitlines()
    if head in lines:
        start = lines.index(head)
        own = f'[embedders."{r.embedder}".'
        tables = [k for k in range(start + 1, len(lines)) if lines[k].startswith("[embedders.")]
        end = next((k for k in tables if not lines[k].startswith(own)), len(lines))
        while (
            end > start
            and (not lines[end - 1].strip() or lines[end - 1].startswith("#"))
            and end < len(lines)
        ):
            end -= 1  # keep the comment block of the next table with it
        kept = lines[:start] + entry_text(r).rstrip("\n").splitlines() + [""] + lines[end:]
    else:
        kept = [*lines, "", *entry_text(r).rstrip("\n").splitlines()]
    new = "\n".join(kept).rstrip("\n") + "\n"
    tomllib.loads(new)  # never leave a file scoring cannot read
    path.write_text(new, encoding="utf-8")


def main() -> int:
    from schemas.projection import PROJECTION_PATH

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--embedder", default="minilm", help="minilm | openai:<model> (as `frame score --embedder`)"
    )
    ap.add_argument(
        "--nodes",
        choices=("headings", "sections"),
        default="headings",
        help="nodes of the heading alone (the fit) or of the heading with its content",
    )
    ap.add_argument("--limit", type=int, default=None, help="first N filings and first N papers only")
    ap.add_argument(
        "--write", action="store_true", help=f"store the result in {PROJECTION_PATH.relative_to(ROOT)}"
    )
    args = ap.parse_args()
    cache = Path(os.environ.get("FRAME_CACHE_DIR") or ROOT / "data" / "cache")
    os.environ.setdefault("FRAME_EMBED_PRECISION", "fp32")
    started = time.perf_counter()
    r = run(args.embedder, args.nodes, args.limit, cache)
    print_result(r)
    print(f"{time.perf_counter() - started:.1f} s")
    if args.write:
        if args.limit is not None or args.nodes != "headings":
            raise SystemExit("--write stores the full heading fit only (no --limit, --nodes headings)")
        write_entry(PROJECTION_PATH, r)
        print(
            f'written: {PROJECTION_PATH.relative_to(ROOT)} [embedders."{r.embedder}"] delta = {r.delta:.2f}'
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
