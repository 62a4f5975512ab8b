"""What a `frame score` run writes: score and evidence tables, leaderboard, plots, family files, manifest.

Every file is written atomically into the output folder (data/scores/<release name>/<version>/ by
default: a release is immutable, so scores live beside it, never inside it).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from schemas.scoring import EVIDENCE_SCHEMA, SCORES_SCHEMA, MetricResult, ScoreSettings
from tasks.atomic import atomic_write_bytes, atomic_write_text
from tasks.errors import FrameInputError
from tasks.release import members
from tasks.score.metric import parquet_bytes
from tasks.tokens import count_tokens

__all__ = [
    "ScoreRun",
    "baselines",
    "instance_features",
    "now_utc",
    "release_id",
    "scores_folder",
    "values_text",
    "write_outputs",
]

ROOT = Path(__file__).resolve().parents[2]
# the code the plots are drawn with: plots.py and the leaderboard module it takes its CIs and orders from
PLOT_CODE = ("tasks/score/plots.py", "tasks/score/leaderboard/core.py")


@dataclass
class ScoreRun:
    """What one scoring run produced and with which settings (everything the outputs are made of)."""

    release: Path
    instances: pd.DataFrame
    results: list[tuple[dict, str, MetricResult]]  # (instance row, system, result)
    systems: list[str]
    selection: list[str]
    settings: ScoreSettings
    generations_sha256: dict[str, str]
    scoring_code: dict[str, str]  # family -> code digest
    llm: dict[str, Any]
    files: dict[str, bytes] = field(default_factory=dict)  # extra files of the families
    notes: dict[str, str] = field(default_factory=dict)  # system -> flag beside its name ("self-judged")
    extra: dict[str, Any] = field(default_factory=dict)  # their manifest entries
    pairs: str = "next"  # the paired tests: each system vs the next best, or every pair
    config_sha256: str | None = None  # of the evaluation config used (results.json)


def scores_folder(release: Path) -> Path:
    """data/releases/<name>/<version> -> data/scores/<name>/<version>."""
    release = release.resolve()
    return release.parents[2] / "scores" / release.parent.name / release.name


def score_rows(results: list[tuple[dict, str, MetricResult]]) -> tuple[list[dict], list[dict]]:
    """(scores rows, evidence rows) in (instance, system, metric) order."""
    scores, evidence = [], []
    for inst, system, r in sorted(
        results, key=lambda x: (x[0]["instance_id"], x[1], x[2].metric, x[0].get("epoch", 0))
    ):
        iid, epoch = inst["instance_id"], int(inst.get("epoch", 0))  # `--epochs`: sample of the report
        scores.append(
            {
                "instance_id": iid,
                "category": inst["category"],
                "system": system,
                "metric": r.metric,
                "value": r.value,
                "judge": r.judge,
                "population": r.population,
                "sampled": len(r.items),
                "detail_json": json.dumps(r.detail, sort_keys=True, default=str),
                "periods_skipped": _int_or_none(inst.get("periods_skipped")),
                "epoch": epoch,
            }
        )
        for it in r.items:
            evidence.append(
                {
                    "item_id": f"{iid}|{system}|{r.metric}|{it.index}" + (f"|epoch-{epoch}" if epoch else ""),
                    "instance_id": iid,
                    "system": system,
                    "metric": r.metric,
                    **it.model_dump(exclude={"index"}),
                    "index": it.index,
                    "judge": r.judge,
                }
            )
    return scores, evidence


def _int_or_none(v: Any) -> int | None:
    """An int cell of an instance row read through pandas (NaN/NA for a missing value)."""
    return None if v is None or pd.isna(v) else int(v)


def values_text(results: list[MetricResult]) -> str:
    """The values of one scoring task for a log line: "coverage=0.06195, faithfulness=n/a" (4
    significant digits: a log reader wants the figure, not the float's last bits)."""
    return ", ".join(f"{r.metric}={'n/a' if r.value is None else format(r.value, '.4g')}" for r in results)


def write_outputs(out: Path, run: ScoreRun) -> None:
    from tasks.score.leaderboard import leaderboard_files
    from tasks.score.leaderboard.epochs import per_instance, sampling, sampling_markdown
    from tasks.score.leaderboard.files import leaderboard_tables
    from tasks.score.results_file import build_results

    rows, evidence = score_rows(run.results)
    atomic_write_bytes(out / "scores.parquet", parquet_bytes(rows, SCORES_SCHEMA))
    atomic_write_bytes(out / "evidence.parquet", parquet_bytes(evidence, EVIDENCE_SCHEMA))
    # no row at all when every requested system's generations failed (tasks.score.unscored): the tables
    # keep their columns, the leaderboard says "No scores", and there is nothing to plot
    scores = (
        pd.DataFrame(rows) if rows else pd.DataFrame({f.name: pd.Series(dtype=object) for f in SCORES_SCHEMA})
    )
    release = release_id(run.release)
    # `--epochs`: the board reads one row per instance (the mean of its samples), the samples' spread apart
    repeats = sampling(scores, seed=run.settings.seed, n_resamples=run.settings.bootstrap)
    scores = per_instance(scores)
    tables = leaderboard_tables(
        scores, seed=run.settings.seed, n_resamples=run.settings.bootstrap, pairs=run.pairs
    )
    base = baselines(run.extra.get("system_identities"), run.systems)
    # the board orders systems by their primary score, not by the order they were asked for
    boards = leaderboard_files(
        scores,
        notes=run.notes,
        release=release,
        baselines=base,
        generation=run.extra.get("generation"),
        tables=tables,
    )
    boards["leaderboard.md"] += sampling_markdown(repeats)
    if run.extra.get("subset"):  # a --limit / --instances run says so under the board's summary line
        boards["leaderboard.md"] = subset_line(boards["leaderboard.md"], run.extra["subset"]["note"])
    for name, text in boards.items():  # leaderboard.md/.csv, paired_tests.csv, win_matrix.csv
        atomic_write_text(out / name, text)
    for name, data in run.files.items():
        atomic_write_bytes(out / name, data)
    plots: list[Path] = []
    if rows:
        features = instance_features(run.release, run.instances)
        plots = _plots(
            scores, features, out / "plots", seed=run.settings.seed, n_resamples=run.settings.bootstrap
        )
    manifest = {
        "release": release,
        "scored_at": now_utc(),  # when this run wrote its outputs (UTC): the report's "Scores computed"
        "release_manifest_sha256": _file_sha(run.release / "manifest.json"),
        "systems": run.systems,
        "metrics": run.selection,
        "generations_sha256": run.generations_sha256,
        "settings": run.settings.model_dump(mode="json"),
        "judges": sorted({r["judge"] for r in rows}),
        "llm": run.llm,
        "scoring_code": run.scoring_code,
        "rows": {"scores": len(rows), "evidence": len(evidence)},
        "plots": [p.name for p in plots],
        "notes": run.notes,
        **run.extra,
    }
    buf = io.StringIO()
    json.dump(manifest, buf, indent=2, sort_keys=True)
    atomic_write_text(out / "manifest.json", buf.getvalue() + "\n")
    from tasks.score.leaderboard import BASELINES

    names = base if base is not None else [s for s in run.systems if s in BASELINES]
    results = build_results(
        run, tables[:2], manifest, names, repeats
    )  # no machine path (tests/test_portable_paths)
    atomic_write_text(out / "results.json", results.model_dump_json(indent=2) + "\n")


def subset_line(board: str, note: str) -> str:
    """leaderboard.md with `note` (tasks.select.Subset.note) as a paragraph after its summary line."""
    lines = board.split("\n")
    at = next((i + 1 for i, ln in enumerate(lines) if i > 0 and ln.strip()), len(lines))
    return "\n".join([*lines[:at], "", note, *lines[at:]])


def instance_features(release: Path, instances: pd.DataFrame) -> pd.DataFrame:
    """Per instance: gold length (o200k tokens), grounding length (tokens of G), gold table count."""
    from tasks.instances import report_shape

    docs = members.read_table(
        release, "grounding_documents", columns=["grounding_set_id", "tokens"], required=[]
    ).to_pandas()
    g_tokens = docs.groupby("grounding_set_id")["tokens"].sum()
    rows = []
    for inst in instances.to_dict("records"):
        y = str(inst["target_markdown"])
        rows.append(
            {
                "instance_id": inst["instance_id"],
                "category": inst["category"],
                "gold_tokens": count_tokens(y),
                "grounding_tokens": int(g_tokens.get(inst["grounding_set_id"], 0)),
                "gold_tables": int(report_shape(y)["tables"]),
            }
        )
    return pd.DataFrame(rows)


def _plots(
    scores: pd.DataFrame, features: pd.DataFrame, folder: Path, *, seed: int, n_resamples: int
) -> list[Path]:
    """The bucket plots, redrawn only when their inputs, their CI settings or the plotting code changed
    (a rerun with nothing new reuses them: drawing ~20 figures is the slowest part of writing the outputs)."""
    from tasks.score.plots import plot_metric_vs_buckets

    h = hashlib.sha256()
    h.update(json.dumps({"seed": seed, "n_resamples": n_resamples}).encode())
    for rel in PLOT_CODE:
        h.update(rel.encode())
        h.update((ROOT / rel).read_bytes())
    h.update(scores.sort_values(["instance_id", "system", "metric"]).to_csv(index=False).encode())
    h.update(features.sort_values("instance_id").to_csv(index=False).encode())
    stamp = folder / ".inputs.json"
    try:
        seen = json.loads(stamp.read_text(encoding="utf-8"))
        if seen["sha256"] == h.hexdigest() and all((folder / n).is_file() for n in seen["files"]):
            return [folder / n for n in seen["files"]]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    plots = plot_metric_vs_buckets(scores, features, folder, seed=seed, n_resamples=n_resamples)
    atomic_write_text(stamp, json.dumps({"sha256": h.hexdigest(), "files": [p.name for p in plots]}) + "\n")
    return plots


def baselines(identities: dict[str, Any] | None, systems: list[str]) -> list[str] | None:
    """The systems that are builtin non-LLM baselines (copy-sample, extractive, under any name), from
    their identities; None (the leaderboard's defaults, by name) when the run recorded none."""
    if not identities:
        return None
    return [
        s
        for s in systems
        if isinstance(identities.get(s), dict)
        and identities[s].get("kind") == "builtin"
        and identities[s].get("builtin") not in (None, "gold")
    ]


def now_utc() -> str:
    """Now (UTC) to the second, ISO 8601 with a Z."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def release_id(release: Path) -> str:
    """The release scored, named portably: `<name>/<version>` (never its folder on this machine). The
    manifest is read as any release member (tasks.release.members: a regular file inside the release, at
    most MAX_MANIFEST_BYTES); its folder's names when it has no usable name and version."""
    try:
        m = members.read_json(release, members.MANIFEST)
    except FrameInputError:
        m = None
    name, version = (m.get("name"), m.get("version")) if isinstance(m, dict) else (None, None)
    if not (isinstance(name, str) and isinstance(version, str)):
        name, version = release.parent.name, release.name
    return f"{members.shown(name, 64)}/{members.shown(version, 64)}"


def _file_sha(path: Path) -> str | None:
    """sha256 of a release's member `path` (a regular file inside the release); None when there is none."""
    try:
        return members.sha256_member(path.parent, path.name)
    except FrameInputError:
        return None
