"""The `score` flow: reports generated for a release's instances -> FRAME's three metrics -> leaderboard.

For every system a cached `generate` task produces one report per instance (the pseudo-system `gold`
is the gold report Y itself: the reference ceiling). Then one cached task per instance x system x metric
computes structural similarity (Algorithm 1 over the two structure trees), coverage (information-unit
recall of Y's units in R') or faithfulness (claim support of R' against G). A task's cache key is its
inputs (the sha256 of the texts it reads, the scoring settings, the judge's endpoint and model) plus the
digest of the scoring code and prompts, so a rerun with nothing changed recomputes nothing and a rerun
after a failure computes only what is missing.

Outputs, each written atomically, in data/scores/<release name>/<version>/ (a release is immutable, so
scores live beside it, never inside it):

* `scores.parquet`: instance_id, category, system, metric, value, judge, population, sampled, detail_json
* `evidence.parquet`: one row per graded unit / claim: item_id, score, stage, text, source, evidence...
* `leaderboard.md`, `leaderboard.csv`: means with seeded 95% bootstrap CIs, overall and per category
* `plots/<metric>_vs_buckets.png`: each metric against gold length, grounding length and table-count buckets
* `manifest.json`: settings, judges, systems with their generation digests, code version, row counts
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import threading
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from prefect import flow, get_run_logger, task
from prefect.task_runners import ThreadPoolTaskRunner

from flows.caching import STABLE
from flows.generate import LLM_SYSTEMS, check_system, generate_reports, load_release_inputs, write_generations
from schemas.config import LLMSettings, RunSettings
from schemas.scoring import FAMILIES, METRICS, PAIRWISE, SELECTABLE, MetricResult, ScoreSettings, families_for
from tasks.atomic import atomic_write_bytes, atomic_write_text
from tasks.errors import FrameInputError
from tasks.ground.tokens import count_tokens
from tasks.score.judges import GroundingDoc

ROOT = Path(__file__).resolve().parents[1]
GOLD = "gold"  # pseudo-system: the gold report Y scored against itself / G (the ceiling)
# What the metric values depend on (globs under the repo root): a change here invalidates the score
# caches; edits elsewhere (the leaderboard, plots, the CLI) do not.
SCORING_CODE = (
    "tasks/score/coverage.py",
    "tasks/score/faithfulness.py",
    "tasks/score/judges.py",
    "tasks/score/numbers.py",
    "tasks/score/structure.py",
    "tasks/score/tree.py",
    "tasks/score/tree_llm.py",
    "tasks/score/embed.py",
    "tasks/score/fidelity.py",
    "tasks/score/tables.py",
    "tasks/score/scaffold.py",
    "tasks/score/rubric.py",
    "tasks/score/holistic.py",
    "tasks/score/pairwise.py",
    "schemas/scaffold.py",
    "schemas/rubric.py",
    "schemas/rubric.toml",
    "tasks/llm/*.py",
    "tasks/synthesize/retrieve.py",
    "tasks/generate/baselines.py",  # grounding_set_from_rows (faithfulness builds G's index with it)
    "tasks/ground/load.py",
    "schemas/scoring.py",
    "prompts/score_*.md",
)
GENERATION_CODE = (
    "tasks/generate/*.py",
    "tasks/synthesize/retrieve.py",
    "tasks/llm/*.py",
    "prompts/generate_*.md",
)

SCORES_SCHEMA = pa.schema(
    [
        pa.field("instance_id", pa.string(), nullable=False),
        pa.field("category", pa.string(), nullable=False),
        pa.field("system", pa.string(), nullable=False),
        pa.field("metric", pa.string(), nullable=False),
        pa.field("value", pa.float64()),  # null when undefined (e.g. a report without any claim)
        pa.field("judge", pa.string(), nullable=False),
        pa.field("population", pa.int64()),  # units / claims before sampling (0 for structure)
        pa.field("sampled", pa.int64()),  # items graded
        pa.field("detail_json", pa.string()),
    ]
)
EVIDENCE_SCHEMA = pa.schema(
    [
        pa.field("item_id", pa.string(), nullable=False),  # "<instance_id>|<system>|<metric>|<index>"
        pa.field("instance_id", pa.string(), nullable=False),
        pa.field("system", pa.string(), nullable=False),
        pa.field("metric", pa.string(), nullable=False),
        pa.field("index", pa.int64(), nullable=False),
        pa.field("kind", pa.string()),
        pa.field("text", pa.string()),
        pa.field("source", pa.string()),
        pa.field("score", pa.float64(), nullable=False),
        pa.field("stage", pa.int32()),
        pa.field("evidence", pa.string()),
        pa.field("evidence_ref", pa.string()),
        pa.field("rationale", pa.string()),
        pa.field("judge", pa.string(), nullable=False),
    ]
)

SCAFFOLDS_SCHEMA = pa.schema(
    [
        pa.field("instance_id", pa.string(), nullable=False),
        pa.field("extractor", pa.string()),
        pa.field("facts", pa.int64()),
        pa.field("questions", pa.int64()),
        pa.field("attributes", pa.int64()),
        pa.field("scaffold_json", pa.string()),  # schemas.scaffold.Scaffold
    ]
)
PAIRWISE_SCHEMA = pa.schema(
    [
        pa.field("instance_id", pa.string(), nullable=False),
        pa.field("system_a", pa.string(), nullable=False),  # canonical order: sorted names
        pa.field("system_b", pa.string(), nullable=False),
        pa.field("order", pa.string(), nullable=False),  # "ab": A shown first, "ba": B shown first
        pa.field("raw_vote", pa.string()),  # as displayed: "1" | "2" | "tie"
        pa.field("vote", pa.string(), nullable=False),  # canonical: "A" | "B" | "tie"
        pa.field("judge", pa.string()),
        pa.field("rationale", pa.string()),
    ]
)

# Progress for the CLI bar (the flow runs in a worker thread): tasks done / total.
PROGRESS: dict[str, int] = {"done": 0, "total": 0}
_PROGRESS_LOCK = threading.Lock()


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def digest_paths(patterns: tuple[str, ...]) -> str:
    """sha256 (16 hex) over the files matching the globs, by relative path and content."""
    h = hashlib.sha256()
    files = sorted({p for pat in patterns for p in ROOT.glob(pat) if p.is_file()})
    for p in files:
        h.update(p.relative_to(ROOT).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def scores_folder(release: Path) -> Path:
    """data/releases/<name>/<version> -> data/scores/<name>/<version>."""
    release = release.resolve()
    return release.parents[2] / "scores" / release.parent.name / release.name


def instance_seed(seed: int, instance_id: str) -> int:
    """Per-instance sampling seed: every system of an instance is graded on the same gold units."""
    return int(sha(f"{seed}|{instance_id}")[:8], 16)


def llm_identity(llm: LLMSettings | None) -> dict[str, Any]:
    """What of the endpoint settings changes a judge's output (never the key)."""
    if llm is None:
        return {}
    return {
        "backend": llm.backend,
        "base_url": llm.base_url,
        "model": llm.model,
        "temperature": llm.temperature,
    }


# ---------------------------------------------------------------- judges (one per process and settings)

_JUDGES: dict[str, Any] = {}
_JUDGES_LOCK = threading.Lock()


def _embedder(settings: ScoreSettings, llm: LLMSettings | None, cache_dir: Path):
    from tasks.score.embed import CachedEmbedder, LocalMiniLM, OpenAIEmbedder, make_embed_fn

    if settings.embedder == "minilm":
        inner = LocalMiniLM()
    elif settings.embedder.startswith("openai:"):
        if llm is None or not llm.base_url:
            raise FrameInputError(
                "--embedder", f"{settings.embedder} needs FRAME_LLM_BASE_URL / [llm] base_url"
            )
        inner = OpenAIEmbedder(llm, cache_dir, settings.embedder.split(":", 1)[1])
    else:
        raise FrameInputError(
            "--embedder", f"must be 'minilm' or 'openai:<model>' (got {settings.embedder!r})"
        )
    emb = CachedEmbedder(inner, cache_dir)
    return make_embed_fn(emb), emb.name


def judges(settings: ScoreSettings, llm: LLMSettings | None, cache_dir: Path) -> dict[str, Any]:
    """{"embed", "embedder", "coverage", "faithfulness", "client"} for these settings (built once)."""
    key = json.dumps([settings.model_dump(mode="json"), llm_identity(llm), str(cache_dir)], sort_keys=True)
    with _JUDGES_LOCK:
        if key in _JUDGES:
            return _JUDGES[key]
        from tasks.score.coverage import LLMCoverageJudge, OfflineCoverageJudge
        from tasks.score.faithfulness import LLMFaithfulnessJudge, OfflineFaithfulnessJudge

        embed, name = _embedder(settings, llm, cache_dir)
        out: dict[str, Any] = {"embed": embed, "embedder": name, "client": None}
        if settings.judge == "openai" or settings.tree == "llm":
            if llm is None or llm.backend != "openai" or not llm.base_url:
                raise FrameInputError(
                    "--judge",
                    "the openai judge / llm trees need FRAME_LLM_BACKEND=openai and FRAME_LLM_BASE_URL",
                )
            from tasks.llm.client import LLMClient

            out["client"] = LLMClient(llm, cache_dir)
        from tasks.score.holistic import LLMHolisticJudge, OfflineHolisticJudge
        from tasks.score.pairwise import LLMPairwiseJudge
        from tasks.score.rubric import LLMRubricJudge, OfflineRubricJudge
        from tasks.score.scaffold import (
            LLMScaffoldExtractor,
            LLMScaffoldJudge,
            OfflineScaffoldExtractor,
            OfflineScaffoldJudge,
        )

        offline_coverage = OfflineCoverageJudge(embed, name)
        if settings.judge == "openai":
            c = out["client"]
            out["coverage"] = LLMCoverageJudge(c, llm)
            out["faithfulness"] = LLMFaithfulnessJudge(c, llm)
            out["scaffold_extractor"] = LLMScaffoldExtractor(c, llm)
            out["scaffold_judge"] = LLMScaffoldJudge(
                c, llm, max_sentences=settings.max_items, seed=settings.seed
            )
            out["rubric"] = LLMRubricJudge(c, llm)
            out["holistic"] = LLMHolisticJudge(c, llm)
            out["pairwise"] = LLMPairwiseJudge(c, llm)
        else:
            out["coverage"] = offline_coverage
            out["faithfulness"] = OfflineFaithfulnessJudge(embed, name)
            out["scaffold_extractor"] = OfflineScaffoldExtractor(offline_coverage)
            out["scaffold_judge"] = OfflineScaffoldJudge(
                offline_coverage, max_sentences=settings.max_items, seed=settings.seed
            )
            out["rubric"] = OfflineRubricJudge()
            out["holistic"] = OfflineHolisticJudge()
            out["pairwise"] = None  # offline votes come from the metric values (flow, not a judge call)
        _JUDGES[key] = out
        return out


# ---------------------------------------------------------------- metric computation (pure of the flow)


def _tree(
    markdown: str, settings: ScoreSettings, j: dict[str, Any], llm: LLMSettings | None, cache_dir: Path
):
    if settings.tree == "llm":
        from tasks.score.tree_llm import llm_report_tree

        return llm_report_tree(markdown, llm, cache_dir, client=j["client"])[0]
    from tasks.score.tree import report_tree

    return report_tree(markdown)


def compute_metric(
    metric: str,
    gold_md: str,
    gen_md: str,
    grounding: list[GroundingDoc],
    seed: int,
    settings: ScoreSettings,
    llm: LLMSettings | None,
    cache_dir: Path,
) -> MetricResult:
    j = judges(settings, llm, cache_dir)
    if metric == "structure":
        from tasks.score.structure import make_node_similarity, structural_similarity
        from tasks.score.tree import tree_size

        a = _tree(gold_md, settings, j, llm, cache_dir)
        b = _tree(gen_md, settings, j, llm, cache_dir)
        sim = make_node_similarity(
            j["embed"], w=settings.type_weight, proj=settings.proj, delta=settings.delta, n=settings.power_n
        )
        value = structural_similarity(a, b, sim, gamma=settings.gamma)
        judge = f"{settings.tree}-tree+{j['embedder']}"
        if settings.tree == "llm":
            judge = f"llm-tree:{llm.model if llm else ''}+{j['embedder']}"
        return MetricResult(
            metric="structure",
            value=float(value),
            judge=judge,
            detail={"gold_nodes": tree_size(a), "generated_nodes": tree_size(b), "proj": settings.proj},
        )
    if metric == "coverage":
        from tasks.score.coverage import coverage

        return coverage(gold_md, gen_md, j["coverage"], max_items=settings.max_items, seed=seed)
    if metric == "faithfulness":
        from tasks.score.faithfulness import faithfulness

        return faithfulness(gen_md, grounding, j["faithfulness"], max_items=settings.max_items, seed=seed)
    if metric in ("teds", "teds_s"):
        return table_metric(metric, gold_md, gen_md)
    if metric == "text_edit_distance":
        from tasks.score.fidelity import text_edit_distance

        return MetricResult(metric=metric, value=text_edit_distance(gold_md, gen_md), judge="deterministic")
    raise ValueError(f"unknown metric {metric!r}")


def compute_family(
    family: str,
    texts: dict[str, str],
    grounding: list[GroundingDoc],
    context: dict[str, str],
    scaffold: dict | None,
    seed: int,
    settings: ScoreSettings,
    llm: LLMSettings | None,
    cache_dir: Path,
) -> list[MetricResult]:
    """Every metric of one family for one (Y, R') pair: one result for the single-metric families, all
    of the scaffold's / rubric's / holistic judge's metrics from one judgment for the others."""
    gold_md, gen_md = texts.get("gold", ""), texts["generated"]
    if family not in FAMILIES:
        raise ValueError(f"unknown metric family {family!r}")
    if family == "tables":
        return [table_metric("teds", gold_md, gen_md), table_metric("teds_s", gold_md, gen_md)]
    if len(FAMILIES[family]) == 1:
        return [compute_metric(family, gold_md, gen_md, grounding, seed, settings, llm, cache_dir)]
    j = judges(settings, llm, cache_dir)
    if family == "scaffold":
        from schemas.scaffold import Scaffold
        from tasks.score.scaffold import scaffold_metrics

        if scaffold is None:
            raise ValueError("the scaffold family needs the instance's scaffold")
        sc = Scaffold.model_validate(scaffold)
        return scaffold_metrics(sc, j["scaffold_judge"].judge(sc, gen_md))
    if family == "rubric":
        from tasks.score.rubric import RubricContext, score_rubric

        ctx = RubricContext(
            category=context.get("category", ""),
            domain=context.get("domain", ""),
            sample_markdown=texts.get("sample", ""),
            target_period=context.get("t_target", ""),
        )
        return score_rubric(gen_md, ctx, j["rubric"])
    if family == "holistic":
        from tasks.score.holistic import holistic

        return holistic(gold_md, gen_md, grounding, j["holistic"])
    raise ValueError(f"unknown metric family {family!r}")


@functools.lru_cache(maxsize=32)
def _table_fidelity(gold_md: str, gen_md: str):
    """One table matching per (Y, R') pair, shared by the teds and teds_s tasks of this process."""
    from tasks.score.fidelity import table_fidelity

    return table_fidelity(gold_md, gen_md)


def table_metric(metric: str, gold_md: str, gen_md: str) -> MetricResult:
    """TEDS or TEDS-S over the Hungarian-matched tables; one item per gold table and per spurious table."""
    from schemas.scoring import ItemScore
    from tasks.score.fidelity import markdown_tables

    fid = _table_fidelity(gold_md, gen_md)
    gold_t, gen_t = markdown_tables(gold_md), markdown_tables(gen_md)

    def head(t) -> str:
        return " | ".join(c.text for c in t.rows[0])[:300] if t.rows else ""

    by_gold = {m.gold: m for m in fid.matches}
    items = []
    for i, t in enumerate(gold_t):
        m = by_gold.get(i)
        value = (m.teds if metric == "teds" else m.teds_s) if m else 0.0
        items.append(
            ItemScore(
                index=i,
                kind="table",
                text=head(t),
                score=value,
                evidence=head(gen_t[m.generated]) if m else "",
                evidence_ref=f"generated table {m.generated}" if m else "",
                rationale=f"matched, candidate score {m.score:.3f}"
                if m
                else "no generated table scores >= 0.40",
            )
        )
    matched = {m.generated for m in fid.matches}
    for j, t in enumerate(gen_t):
        if j not in matched:
            items.append(
                ItemScore(
                    index=len(gold_t) + j,
                    kind="spurious_table",
                    text=head(t),
                    score=0.0,
                    evidence_ref=f"generated table {j}",
                    rationale="generated table without a gold counterpart",
                )
            )
    return MetricResult(
        metric=metric,
        value=fid.teds if metric == "teds" else fid.teds_s,
        judge="deterministic",
        population=len(gold_t),
        items=items if gold_t else [],
        detail={"gold_tables": fid.n_gold, "generated_tables": fid.n_generated, "matched": len(fid.matches)},
    )


@functools.lru_cache(maxsize=4)
def _grounding(release: str, mtime: float) -> dict[str, list[GroundingDoc]]:
    _, by_set = load_release_inputs(Path(release))
    return {
        k: [
            GroundingDoc(str(r["doc_id"]), str(r.get("title") or r["doc_id"]), str(r["markdown"]))
            for r in rows
        ]
        for k, rows in by_set.items()
    }


def grounding_of(release: Path, grounding_set_id: str) -> list[GroundingDoc]:
    path = release / "grounding_documents.parquet"
    return _grounding(str(release.resolve()), path.stat().st_mtime)[grounding_set_id]


# ---------------------------------------------------------------- Prefect tasks


@task(name="generate", cache_policy=STABLE, persist_result=True)
def generate_task(
    release: str, system: str, instances_sha: str, llm: dict, code: str, _llm: LLMSettings | None = None
) -> list[dict]:
    """All reports of one system (cached: a rerun reuses them without calling the generator)."""
    rows = generate_reports(Path(release), system, llm=_llm, cache_dir=_cache_dir())
    get_run_logger().info("generated %d report(s) with %s", len(rows), system)
    return rows


def _cache_dir() -> Path:
    import os

    return Path(os.environ.get("FRAME_CACHE_DIR") or "data/cache")


@task(name="score", cache_policy=STABLE, persist_result=True)
def score_task(
    family: str,
    release: str,
    instance_id: str,
    system: str,
    grounding_set_id: str,
    texts_sha: dict,
    settings: ScoreSettings,
    llm: dict,
    code: str,
    _texts: dict | None = None,
    _llm: LLMSettings | None = None,
    _context: dict | None = None,
    _scaffold: dict | None = None,
) -> list[dict]:
    """One metric family for one (instance, system). Inputs starting with "_" are the data their sha256
    names in `texts_sha` (the cache key), so an edit of any text the family reads invalidates it."""
    texts = _texts or {}
    if any(sha(texts[k]) != v for k, v in texts_sha.items() if k in texts):
        raise FrameInputError(f"{instance_id} ({system})", "report text changed while scoring")
    grounding = grounding_of(Path(release), grounding_set_id) if "grounding" in texts_sha else []
    results = compute_family(
        family,
        texts,
        grounding,
        _context or {},
        _scaffold,
        instance_seed(settings.seed, instance_id),
        settings,
        _llm,
        _cache_dir(),
    )
    get_run_logger().info(
        "%s %s %s: %s", instance_id, system, family, ", ".join(f"{r.metric}={r.value}" for r in results)
    )
    return [r.model_dump(mode="json") for r in results]


@task(name="scaffold", cache_policy=STABLE, persist_result=True)
def scaffold_task(
    release: str,
    instance_id: str,
    gold_sha: str,
    settings: ScoreSettings,
    llm: dict,
    code: str,
    _gold: str = "",
    _llm: LLMSettings | None = None,
) -> dict:
    """The semantic scaffold of one gold report: extracted once, reused for every system."""
    if sha(_gold) != gold_sha:
        raise FrameInputError(instance_id, "gold report changed while scoring")
    sc = judges(settings, _llm, _cache_dir())["scaffold_extractor"].extract(_gold)
    get_run_logger().info("%s scaffold: %s", instance_id, sc.counts())
    return sc.model_dump(mode="json")


@task(name="pairwise", cache_policy=STABLE, persist_result=True)
def pairwise_task(
    release: str,
    instance_id: str,
    texts_sha: dict,
    settings: ScoreSettings,
    llm: dict,
    code: str,
    _texts: dict | None = None,
    _llm: LLMSettings | None = None,
) -> list[dict]:
    """LLM A/B/tie votes for every pair of systems of one instance, both display orders."""
    from tasks.score.pairwise import pairwise_instance

    texts = dict(_texts or {})  # a copy: the caller's dict stays intact for a retry
    gold = texts.pop("gold")
    judge = judges(settings, _llm, _cache_dir())["pairwise"]
    return pairwise_instance(instance_id, sorted(texts), gold, texts, judge)


def _advance() -> None:
    with _PROGRESS_LOCK:
        PROGRESS["done"] += 1


def _start_progress(total: int) -> None:
    # Not inline in the flow: a Dask task carries the flow (by value) and a lock does not pickle.
    with _PROGRESS_LOCK:
        PROGRESS.update(done=0, total=total)


class _ExcludePrivate(type(STABLE)):
    """STABLE, minus inputs whose name starts with "_" (the data is keyed by its sha256 instead)."""

    def compute_key(self, task_ctx, inputs, flow_parameters, **kwargs: Any) -> str | None:
        public = {k: v for k, v in (inputs or {}).items() if not k.startswith("_")}
        return super().compute_key(task_ctx, public, flow_parameters, **kwargs)


_KEY = _ExcludePrivate()
generate_task = generate_task.with_options(cache_policy=_KEY)
score_task = score_task.with_options(cache_policy=_KEY)
scaffold_task = scaffold_task.with_options(cache_policy=_KEY)
pairwise_task = pairwise_task.with_options(cache_policy=_KEY)


# ---------------------------------------------------------------- the flow


def score_release(
    release: str,
    systems: list[str],
    settings: ScoreSettings,
    llm: LLMSettings | None = None,
    out_dir: str | None = None,
    metrics: list[str] | None = None,
    run: RunSettings | None = None,
) -> str:
    """The score flow on the task runner that `run` (a config's `[run]`; default: threads) selects, with
    the FRAME_TASK_RUNNER / FRAME_DASK_ADDRESS overrides. Where tasks run is not part of any cache key."""
    from flows.runners import make_task_runner

    flow_on_runner = score_release_flow.with_options(task_runner=make_task_runner(run or RunSettings()))
    return flow_on_runner(release, systems, settings, llm, out_dir, metrics)


@flow(name="score", log_prints=True, task_runner=ThreadPoolTaskRunner(max_workers=2))
def score_release_flow(
    release: str,
    systems: list[str],
    settings: ScoreSettings,
    llm: LLMSettings | None = None,
    out_dir: str | None = None,
    metrics: list[str] | None = None,
) -> str:
    """Score every instance of `release` for every system and metric; returns the output folder.

    `metrics` names families or metrics of schemas.scoring.SELECTABLE (a metric of a multi-metric family
    selects the whole family); "pairwise" adds A/B/tie votes between the systems (gold excluded) and a
    Bradley-Terry fit (offline: the vote of the other selected families, the FRAME three by default)."""
    selection = list(metrics or METRICS)
    unknown = sorted(set(selection) - set(SELECTABLE))
    if unknown:
        raise FrameInputError(
            "--metrics", f"unknown metric(s) {', '.join(unknown)} (known: {', '.join(SELECTABLE)})"
        )
    families = families_for(selection)
    pairwise = PAIRWISE in selection
    if pairwise and not families:
        families = list(METRICS)  # the offline pairwise judge votes with these
    logger = get_run_logger()
    rel = Path(release).resolve()
    instances, _ = load_release_inputs(rel)
    for s in systems:
        if s != GOLD:
            check_system(s, llm)
    contenders = [s for s in systems if s != GOLD]
    if pairwise and len(contenders) < 2:
        raise FrameInputError("--systems", "pairwise ranking needs at least two systems besides gold")
    llm_id = llm_identity(llm)
    gen_code, score_code = digest_paths(GENERATION_CODE), digest_paths(SCORING_CODE)
    # generations depend on S and G: key them on the bytes of the release tables that hold them
    inst_sha = hashlib.sha256(
        (rel / "instances.parquet").read_bytes() + (rel / "grounding_documents.parquet").read_bytes()
    ).hexdigest()
    gold = dict(zip(instances["instance_id"], instances["target_markdown"], strict=True))

    generated: dict[str, dict[str, str]] = {}
    gen_digest: dict[str, str] = {}
    for system in systems:
        if system == GOLD:
            generated[system] = dict(gold)
            continue
        gen_llm = llm_id if system in LLM_SYSTEMS else {}
        rows = generate_task(str(rel), system, inst_sha, gen_llm, gen_code, _llm=llm)
        folder = write_generations(rel, system, rows)
        generated[system] = {r["instance_id"]: r["markdown"] for r in rows}
        gen_digest[system] = sha(json.dumps(generated[system], sort_keys=True))
        logger.info("%s: %d report(s) in %s", system, len(rows), folder)

    uses_llm = settings.judge == "openai" or settings.tree == "llm" or settings.embedder != "minilm"
    judge_llm = llm_id if uses_llm else {}
    records = instances.to_dict("records")
    n_llm_pairwise = len(records) if pairwise and settings.judge == "openai" else 0
    n_scaffold = len(records) if "scaffold" in families else 0
    _start_progress(len(records) * len(systems) * len(families) + n_scaffold + n_llm_pairwise)

    # the scaffold of each gold report first: one extraction per instance, reused by every system
    scaffolds: dict[str, dict] = {}
    if n_scaffold:
        sc_futures = [
            (
                inst["instance_id"],
                scaffold_task.submit(
                    str(rel),
                    inst["instance_id"],
                    sha(gold[inst["instance_id"]]),
                    settings,
                    judge_llm,
                    score_code,
                    _gold=gold[inst["instance_id"]],
                    _llm=llm,
                ),
            )
            for inst in records
        ]
        for iid, fut in sc_futures:
            scaffolds[iid] = fut.result()
            _advance()

    futures = []
    for inst in records:
        iid = inst["instance_id"]
        g_sha = inst_grounding_sha(rel, str(inst["grounding_set_id"]))
        context = {k: str(inst[k]) for k in ("category", "domain", "t_target")}
        for system in systems:
            for family in families:
                texts = {"gold": gold[iid], "generated": generated[system][iid]}
                # the key names exactly what the family reads
                texts_sha = {"generated": sha(texts["generated"])}
                if family in ("faithfulness", "holistic"):
                    texts_sha["grounding"] = g_sha
                if family != "faithfulness":
                    texts_sha["gold"] = sha(texts["gold"])
                if family == "rubric":
                    texts["sample"] = str(inst["sample_markdown"])
                    texts_sha["sample"] = sha(texts["sample"])
                    texts_sha["context"] = sha(json.dumps(context, sort_keys=True))
                if family == "scaffold":
                    texts_sha["scaffold"] = sha(json.dumps(scaffolds[iid], sort_keys=True))
                fut = score_task.submit(
                    family,
                    str(rel),
                    iid,
                    system,
                    str(inst["grounding_set_id"]),
                    texts_sha,
                    settings,
                    judge_llm,
                    score_code,
                    _texts=texts,
                    _llm=llm,
                    _context=context,
                    _scaffold=scaffolds.get(iid) if family == "scaffold" else None,
                )
                futures.append((inst, system, family, fut))
    results = []
    failures = []
    for inst, system, family, fut in futures:
        fut.wait()
        _advance()
        if fut.state.is_completed():
            results.extend((inst, system, MetricResult.model_validate(r)) for r in fut.result())
        else:
            exc = fut.state.result(raise_on_failure=False)
            first = str(exc).splitlines()[0] if str(exc) else repr(exc)
            failures.append(f"{inst['instance_id']} {system} {family}: {first}")
    votes: list[dict] = []
    if pairwise and not failures:
        votes = _pairwise_votes(
            rel, records, contenders, gold, generated, results, settings, judge_llm, score_code, llm, failures
        )
    if failures:
        for f in failures:
            logger.error("failed: %s", f)
        raise RuntimeError(f"{len(failures)} score task(s) failed; first: {failures[0]} (rerun resumes)")
    out = Path(out_dir) if out_dir else scores_folder(rel)
    write_outputs(
        out,
        rel,
        instances,
        results,
        systems,
        settings,
        gen_digest,
        score_code,
        llm_id,
        selection,
        scaffolds=scaffolds,
        votes=votes,
        contenders=contenders,
    )
    logger.info("scores written to %s", out)
    return str(out)


def _pairwise_votes(
    rel: Path,
    records: list[dict],
    contenders: list[str],
    gold: dict[str, str],
    generated: dict[str, dict[str, str]],
    results: list[tuple[dict, str, MetricResult]],
    settings: ScoreSettings,
    judge_llm: dict,
    score_code: str,
    llm: LLMSettings | None,
    failures: list[str],
) -> list[dict]:
    """A/B/tie votes for every pair of contenders on every instance, both display orders.

    Offline: the vote of the computed metric families (no judge call, so no task). LLM: one cached task
    per instance."""
    from tasks.score.pairwise import OfflinePairwiseJudge, pairwise_instance

    votes: list[dict] = []
    if settings.judge != "openai":
        from schemas.scoring import HOLISTIC_METRICS

        values: dict[str, dict[str, dict[str, float | None]]] = {}
        for inst, system, r in results:
            if r.metric in HOLISTIC_METRICS:
                continue  # the holistic proxy is the saturation baseline, not a voter
            values.setdefault(inst["instance_id"], {}).setdefault(system, {})[r.metric] = r.value
        for inst in records:
            iid = inst["instance_id"]
            judge = OfflinePairwiseJudge(values.get(iid, {}))
            reports = {s: generated[s][iid] for s in contenders}
            votes.extend(pairwise_instance(iid, contenders, gold[iid], reports, judge))
        return votes
    futs = []
    for inst in records:
        iid = inst["instance_id"]
        texts = {"gold": gold[iid], **{s: generated[s][iid] for s in contenders}}
        texts_sha = {k: sha(v) for k, v in texts.items()}
        futs.append(
            (
                iid,
                pairwise_task.submit(
                    str(rel), iid, texts_sha, settings, judge_llm, score_code, _texts=texts, _llm=llm
                ),
            )
        )
    for iid, fut in futs:
        fut.wait()
        _advance()
        if fut.state.is_completed():
            votes.extend(fut.result())
        else:
            exc = fut.state.result(raise_on_failure=False)
            failures.append(f"{iid} pairwise: {str(exc).splitlines()[0] if str(exc) else repr(exc)}")
    return votes


def inst_grounding_sha(release: Path, grounding_set_id: str) -> str:
    docs = grounding_of(release, grounding_set_id)
    return sha(json.dumps([list(d) for d in docs]))


# ---------------------------------------------------------------- outputs


def _parquet_bytes(rows: list[dict], schema: pa.Schema) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), sink)
    return sink.getvalue().to_pybytes()


def instance_features(release: Path, instances: pd.DataFrame) -> pd.DataFrame:
    """Per instance: gold length (o200k tokens), grounding length (tokens of G), gold table count."""
    from tasks.instances import report_shape

    docs = pd.read_parquet(release / "grounding_documents.parquet", columns=["grounding_set_id", "tokens"])
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


def write_outputs(
    out: Path,
    release: Path,
    instances: pd.DataFrame,
    results: list[tuple[dict, str, MetricResult]],
    systems: list[str],
    settings: ScoreSettings,
    gen_digest: dict[str, str],
    score_code: str,
    llm_id: dict,
    metrics: list[str],
    *,
    scaffolds: dict[str, dict] | None = None,
    votes: list[dict] | None = None,
    contenders: list[str] | None = None,
) -> None:
    from tasks.score.leaderboard import leaderboard, leaderboard_csv, leaderboard_markdown

    score_rows, evidence_rows = [], []
    for inst, system, r in sorted(results, key=lambda x: (x[0]["instance_id"], x[1], x[2].metric)):
        iid = inst["instance_id"]
        score_rows.append(
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
            }
        )
        for it in r.items:
            evidence_rows.append(
                {
                    "item_id": f"{iid}|{system}|{r.metric}|{it.index}",
                    "instance_id": iid,
                    "system": system,
                    "metric": r.metric,
                    **it.model_dump(exclude={"index"}),
                    "index": it.index,
                    "judge": r.judge,
                }
            )
    atomic_write_bytes(out / "scores.parquet", _parquet_bytes(score_rows, SCORES_SCHEMA))
    atomic_write_bytes(out / "evidence.parquet", _parquet_bytes(evidence_rows, EVIDENCE_SCHEMA))
    scores = pd.DataFrame(score_rows)
    board = leaderboard(scores, seed=settings.seed, n_resamples=settings.bootstrap)
    atomic_write_text(out / "leaderboard.md", leaderboard_markdown(board))
    atomic_write_text(out / "leaderboard.csv", leaderboard_csv(board))
    extra: dict[str, Any] = {}
    if scaffolds:
        rows = [
            {
                "instance_id": iid,
                "extractor": sc.get("extractor", ""),
                "facts": len(sc.get("facts", [])),
                "questions": len(sc.get("questions", [])),
                "attributes": sum(len(e.get("attributes", [])) for e in sc.get("entities", [])),
                "scaffold_json": json.dumps(sc, sort_keys=True),
            }
            for iid, sc in sorted(scaffolds.items())
        ]
        atomic_write_bytes(out / "scaffolds.parquet", _parquet_bytes(rows, SCAFFOLDS_SCHEMA))
        extra["scaffolds"] = len(rows)
    if votes:
        from tasks.score.pairwise import bradley_terry, bt_markdown

        vdf = pd.DataFrame(votes)
        atomic_write_bytes(out / "pairwise.parquet", _parquet_bytes(vdf.to_dict("records"), PAIRWISE_SCHEMA))
        bt = bradley_terry(vdf, contenders, n_boot=min(settings.bootstrap, 1000), seed=settings.seed)
        atomic_write_text(out / "bradley_terry.csv", bt.to_csv(index=False))
        atomic_write_text(out / "bradley_terry.md", bt_markdown(bt))
        extra["pairwise"] = {"votes": len(vdf), "judges": sorted(vdf["judge"].astype(str).unique())}
    features = instance_features(release, instances)
    plots = _plots(scores, features, out / "plots")
    buf = io.StringIO()
    manifest = {
        "release": release_id(release),
        "release_manifest_sha256": _file_sha(release / "manifest.json"),
        "systems": systems,
        "metrics": metrics,
        "generations_sha256": gen_digest,
        "settings": settings.model_dump(mode="json"),
        "judges": sorted({r["judge"] for r in score_rows}),
        "llm": llm_id,
        "scoring_code": score_code,
        "rows": {"scores": len(score_rows), "evidence": len(evidence_rows)},
        "plots": [p.name for p in plots],
        **extra,
    }
    json.dump(manifest, buf, indent=2, sort_keys=True)
    atomic_write_text(out / "manifest.json", buf.getvalue() + "\n")


def _plots(scores: pd.DataFrame, features: pd.DataFrame, folder: Path) -> list[Path]:
    """The bucket plots, redrawn only when their inputs or the plotting code changed (a rerun with
    nothing new reuses them: drawing ~20 figures is the slowest part of writing the outputs)."""
    from tasks.score.plots import plot_metric_vs_buckets

    h = hashlib.sha256()
    h.update(digest_paths(("tasks/score/plots.py", "tasks/score/leaderboard.py")).encode())
    h.update(scores.sort_values(["instance_id", "system", "metric"]).to_csv(index=False).encode())
    h.update(features.sort_values("instance_id").to_csv(index=False).encode())
    stamp = folder / ".inputs.json"
    try:
        seen = json.loads(stamp.read_text(encoding="utf-8"))
        if seen["sha256"] == h.hexdigest() and all((folder / n).is_file() for n in seen["files"]):
            return [folder / n for n in seen["files"]]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    plots = plot_metric_vs_buckets(scores, features, folder)
    atomic_write_text(stamp, json.dumps({"sha256": h.hexdigest(), "files": [p.name for p in plots]}) + "\n")
    return plots


def release_id(release: Path) -> str:
    """The release scored, named portably: `<name>/<version>` (never its folder on this machine)."""
    try:
        m = json.loads((release / "manifest.json").read_text(encoding="utf-8"))
        return f"{m['name']}/{m['version']}"
    except (OSError, ValueError, KeyError, TypeError):
        return f"{release.parent.name}/{release.name}"


def _file_sha(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
