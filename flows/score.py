"""The `score` flow: a release -> each system's reports (cached `generate`) -> per family: a cached `prepare`
task per instance when the family prepares, a cached `score` task per (instance, system), then comparison
families across the systems of each instance -> outputs (tasks.score.outputs). Cache keys hold the sha256
of what a family reads, the settings, the endpoint identity and the family's code digest: a rerun
recomputes only what changed or failed. The families themselves live in tasks.score.registry.
Every requested system is on the board with "generated k/n" (tasks.score.unscored); one whose every
generation failed has no scores and ends the run with `UnscoredSystems` once every output is written.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger
from prefect.task_runners import ThreadPoolTaskRunner

from flows.generate import first_samples, generate_for_scoring, release_inputs, score_epochs, systems_for
from flows.results import install_bounded_flow_parameters, short_error
from flows.score_tasks import (
    GOLD,
    cache_dir,
    compare_task,
    embed_task,
    judge_env,
    prepare_task,
    score_task,
    sha,
)
from flows.settings import SAID_BY_FRAME
from flows.steps import score_run_name
from schemas.config import LLMSettings, RunSettings
from schemas.scoring import MetricResult, ScoreSettings
from tasks.errors import FrameInputError
from tasks.generate.systems import ReportSystem
from tasks.score import registry
from tasks.score.inputs import available_inputs
from tasks.score.metric import Inputs, JudgeEnv, instance_seed
from tasks.score.outputs import ScoreRun, now_utc, release_id, scores_folder, write_outputs
from tasks.score.unscored import (
    UnscoredSystems,
    generation_summary,
    read_unscored,
    say_unscored,
    unscored_text,
)
from tasks.score.unscored import unscored as unscored_systems

__all__ = ["GOLD", "PROGRESS", "UnscoredSystems", "instance_seed", "release_id", "score_release"]
__all__ += ["score_release_flow"]

install_bounded_flow_parameters()  # a submission's reports are a parameter: the run starts at any size


# Progress for the CLI bar (the flow runs in a worker thread): tasks done / total.
PROGRESS: dict[str, int] = {"done": 0, "total": 0}
_PROGRESS_LOCK = threading.Lock()


def _advance() -> None:
    with _PROGRESS_LOCK:
        PROGRESS["done"] += 1


def _start_progress(total: int) -> None:
    # Not inline in the flow: a Dask task carries the flow (by value) and a lock does not pickle.
    with _PROGRESS_LOCK:
        PROGRESS.update(done=0, total=total)


def _outcome(fut: Any, label: str, failures: list[str]) -> Any:
    """The future's result, or None with a one-line failure recorded."""
    fut.wait()
    _advance()
    if fut.state.is_completed():
        return fut.result()
    exc = fut.state.result(raise_on_failure=False)
    failures.append(f"{label}: {str(exc).splitlines()[0] if str(exc) else repr(exc)}")
    return None


# ---------------------------------------------------------------- the flow


def score_release(
    release: str,
    systems: list[str] | dict[str, ReportSystem],
    settings: ScoreSettings,
    llm: LLMSettings | None = None,
    out_dir: str | None = None,
    metrics: list[str] | None = None,
    run: RunSettings | None = None,
    embed_llm: LLMSettings | None = None,
    pairs: str = "next",
    config_sha256: str | None = None,
    subset: dict | None = None,
) -> str:
    """The score flow on the task runner that `run` (a config's `[run]`; default: threads) selects, with
    the FRAME_TASK_RUNNER / FRAME_DASK_ADDRESS overrides. Where tasks run is not part of any cache key.
    `systems` names builtins (or `one-shot` on `llm`) or maps names to ReportSystems; `llm` is the
    judge role's endpoint, `embed_llm` the embedder's (default: the judge's). `pairs`: the paired tests
    ("next" or "all"); `config_sha256`: the digest of the evaluation config used, for results.json
    (default: of the run's request, tasks.score.results_file); `subset` the instances of a --limit /
    --instances run (tasks.select.Subset.record: generated, scored and stated, the rest not)."""
    from flows.runners import make_task_runner
    from flows.server import temporary_server_ready

    if not isinstance(systems, dict):
        names = list(systems)
        made = systems_for([n for n in names if n != GOLD], None, llm, cache_dir())
        systems = {n: made.get(n) for n in names}  # gold -> None, in the order given
    runner = make_task_runner(run or RunSettings())
    warm = _warm_up(
        runner, judge_env(settings, llm, embed_llm), metrics, len([n for n in systems if n != GOLD])
    )
    try:
        temporary_server_ready()  # a command's early server (flows.server): the model loads meanwhile
        flow_on_runner = score_release_flow.with_options(task_runner=runner)
        folder = flow_on_runner(
            release, systems, settings, llm, out_dir, metrics, embed_llm, pairs, config_sha256, subset
        )
    except FrameInputError:
        raise
    except Exception as exc:
        short = short_error(exc)  # never a parameter's value (a server's refusal quotes them all)
        if short is None:
            raise
        raise short from None
    finally:
        if warm is not None:
            warm.join()
    unscored = read_unscored(Path(folder))
    if unscored:
        raise UnscoredSystems(folder, unscored)
    return folder


def _warm_up(runner: Any, env: JudgeEnv, metrics: list[str] | None, contenders: int) -> Any:
    """Start loading MiniLM now when this process's threads will embed with it: the load (~5 s) then
    overlaps the flow's start (Prefect's temporary server, generation) instead of the first embedding."""
    if not isinstance(runner, ThreadPoolTaskRunner) or env.settings.embedder != "minilm":
        return None
    try:
        _, families, _ = registry.plan(metrics, contenders)
    except Exception:  # noqa: BLE001 (the flow reports a bad selection itself)
        return None
    if not any(registry.build(f, env).embeds_ahead() for f in families):
        return None
    from tasks.score.embed import warm_up_minilm

    return warm_up_minilm()


def _notes(systems: dict[str, ReportSystem | None], llm: LLMSettings | None, env: JudgeEnv) -> dict[str, str]:
    """{system: "self-judged"} for each system whose model is the LLM judge's model."""
    if llm is None or env.offline:
        return {}
    models = {n: s.identity().get("model") for n, s in systems.items() if s is not None}
    return {n: "self-judged" for n, m in models.items() if m == llm.model}


@flow(
    name="score",
    flow_run_name=score_run_name,
    log_prints=True,
    task_runner=ThreadPoolTaskRunner(max_workers=2),
)
def score_release_flow(
    release: str,
    systems: dict[str, ReportSystem | None],
    settings: ScoreSettings,
    llm: LLMSettings | None = None,
    out_dir: str | None = None,
    metrics: list[str] | None = None,
    embed_llm: LLMSettings | None = None,
    pairs: str = "next",
    config_sha256: str | None = None,
    subset: dict | None = None,
) -> str:
    """Score every instance of `release` for every system and selected family; returns the output folder.

    `metrics` names families, metrics or comparison families (tasks.score.registry.selectable); a metric
    of a multi-metric family selects the whole family."""
    started = now_utc()
    names = list(systems)
    selection, families, comparisons = registry.plan(metrics, len([s for s in names if s != GOLD]))
    rel = Path(release).resolve()
    only = (
        subset["instance_ids"] if subset else None
    )  # --limit / --instances: no other is generated or scored
    instances, _ = release_inputs(rel, only)
    # the families' code digests (cache keys) first, before any task runs: parsing is not thread-safe
    codes = {f: registry.code_digest(f) for f in (*families, *comparisons)}
    env = judge_env(settings, llm, embed_llm)
    job = _Job(rel, instances.to_dict("records"), names, env, llm)
    in_flow = [c for c in comparisons if registry.build(c, env).in_flow()]
    per_instance = sum(registry.family(f).prepares for f in families) + len(comparisons) - len(in_flow)
    n_made = len([s for s in systems.values() if s is not None])
    _start_progress(len(job.records) * (n_made + len(names) * len(families) + per_instance))
    generated, gen_digest, gen_failed = generate_for_scoring(rel, systems, job.gold, _outcome, only)
    unscored = unscored_systems(systems, generated, gen_failed, len(job.records))
    withheld = {n: list(getattr(s, "withheld", None) or ()) for n, s in systems.items() if s is not None}
    summary = generation_summary(systems, generated, gen_failed, len(job.records), withheld)
    for name, u in unscored.items():
        msg = f"{name} produced no report ({unscored_text(u)}): left out of the scores"
        get_run_logger().error(msg, extra=SAID_BY_FRAME)
    failures: list[str] = []
    prepared = {f: job.prepare(f, failures) for f in families if registry.family(f).prepares}
    results = score_epochs(job.score, families, generated, prepared, failures) if not failures else []
    firsts = first_samples(results)  # `--epochs`: comparisons compare the first samples' reports
    votes = {c: job.compare(c, generated, firsts, failures) for c in comparisons} if not failures else {}
    if failures:
        for f in failures:
            get_run_logger().error("failed: %s", f)
        raise RuntimeError(f"{len(failures)} score task(s) failed; first: {failures[0]} (rerun resumes)")
    parts = [registry.build(f, env).prepared_outputs(p) for f, p in prepared.items()]
    # a system without any report has no vote to count (nor a Bradley-Terry strength to estimate)
    contenders = [s for s in names if s != GOLD and s not in unscored]
    parts += [registry.build(c, env).outputs(v, contenders) for c, v in votes.items()]
    out = Path(out_dir) if out_dir else scores_folder(rel)
    run = ScoreRun(rel, instances, results, names, selection, settings, gen_digest, codes, env.identity())
    run.notes = _notes(systems, llm, env)
    run.extra["system_identities"] = {
        n: (s.identity() if s is not None else {"kind": "builtin", "builtin": GOLD})
        for n, s in systems.items()
    }
    run.extra |= {"generation_failures": gen_failed, "unscored_systems": unscored, "generation": summary}
    run.extra["started_at"] = started
    run.pairs, run.config_sha256 = pairs, config_sha256
    if subset:
        run.extra["subset"] = subset  # manifest.json; the leaderboard states it (tasks.score.outputs)
    for files, extra in parts:
        run.files.update(files)
        run.extra.update(extra)
    write_outputs(out, run)
    if unscored:
        say_unscored(out / "leaderboard.md", unscored)
    get_run_logger().info("scores written to %s", out)
    return str(out)


class _Job:
    """The submissions of one flow run: the release's instances, its systems and the judges' env."""

    def __init__(
        self, rel: Path, records: list[dict], systems: list[str], env: JudgeEnv, llm: LLMSettings | None
    ) -> None:
        self.rel, self.records, self.systems, self.env, self.llm = rel, records, systems, env, llm
        self.gold = {r["instance_id"]: str(r["target_markdown"]) for r in records}
        self.settings = env.settings
        # the resolved embedder (MiniLM fp32 or bf16, say) keys every task: one never serves the other
        self.judge_llm = {**(env.identity() if env.uses_llm else {}), "embedder": env.embedder}

    def _submit(self, task_: Any, family: str, instance_id: str, *keys: Any, **data: Any) -> Any:
        """Submit `task_` with the run's common key parts (release, settings, endpoint, family code)."""
        code = registry.code_digest(family)
        args = (family, str(self.rel), instance_id, *keys, self.settings, self.judge_llm, code)
        wait_for = data.pop("wait_for", None)
        return task_.submit(*args, _llm=self.llm, _embed_llm=self.env.embed_llm, wait_for=wait_for, **data)

    def _embed_ahead(self, family: str, inputs: list[Inputs]) -> Any:
        """The embed task of `family` over `inputs` (None when the family embeds nothing)."""
        if not inputs or not registry.build(family, self.env).embeds_ahead():
            return None
        cls = registry.family(family)
        digests = [[x.instance_id, cls.input_digests(x)] for x in inputs]
        return self._submit(embed_task, family, "*", digests, _inputs=inputs)

    def prepare(self, family: str, failures: list[str]) -> dict[str, dict]:
        futures = [
            (iid, self._submit(prepare_task, family, iid, sha(y), _gold=y)) for iid, y in self.gold.items()
        ]
        out = {iid: _outcome(fut, f"{iid} {family}", failures) for iid, fut in futures}
        return {iid: p for iid, p in out.items() if p is not None}

    def score(self, families, generated, prepared, failures) -> list[tuple[dict, str, MetricResult]]:
        todo: list[tuple[dict, str, str, Inputs]] = []
        for inst in self.records:
            iid = inst["instance_id"]
            seed = instance_seed(self.settings.seed, iid)
            for system in self.systems:
                if iid not in generated[system]:
                    continue  # its generation failed (recorded in the manifest)
                for family in families:
                    cls = registry.family(family)
                    available = available_inputs(self.rel, inst, prepared.get(family, {}).get(iid))
                    todo.append(
                        (inst, system, family, cls.inputs(iid, generated[system][iid], seed, **available))
                    )
        # Each family's texts are embedded ahead in one batch (a cached task: a rerun skips it). The pool
        # takes tasks in submission order, so they are submitted as a pipeline: two embed tasks first
        # (one prepares its texts while the other embeds), then each family's score tasks ahead of the
        # next embed task; a family's scoring (Python) then runs while the next family embeds.
        ahead: dict[str, Any] = {}
        futures: dict[int, Any] = {}

        def embed(i: int) -> None:
            if i < len(families):
                f = families[i]
                ahead[f] = self._embed_ahead(f, [x[3] for x in todo if x[2] == f])

        embed(0)
        embed(1)
        for i, family in enumerate(families):
            for k, (inst, system, fam, inputs) in enumerate(todo):
                if fam != family:
                    continue
                digests = registry.family(family).input_digests(inputs)
                wait = [ahead[family]] if ahead[family] is not None else None
                futures[k] = self._submit(
                    score_task, family, inst["instance_id"], system, digests, _inputs=inputs, wait_for=wait
                )
            embed(i + 2)
        results = []
        for k, (inst, system, family, _) in enumerate(todo):
            rows = _outcome(futures[k], f"{inst['instance_id']} {system} {family}", failures)
            results.extend((inst, system, MetricResult.model_validate(r)) for r in rows or [])
        return results

    def compare(self, name, generated, results, failures) -> list[dict]:
        """Every instance's comparison rows: offline in the flow from the texts and the other families'
        values (saturation baselines do not vote), else one cached task per instance."""
        fam = registry.build(name, self.env)
        contenders = [s for s in self.systems if s != GOLD]
        values: dict[str, dict[str, dict[str, float | None]]] = {}
        for inst, system, r in results:
            if not registry.spec(r.metric).saturation_baseline:
                values.setdefault(inst["instance_id"], {}).setdefault(system, {})[r.metric] = r.value
        rows: list[dict] = []
        futures = []
        for inst in self.records:
            iid = inst["instance_id"]
            reports = {s: generated[s][iid] for s in contenders if iid in generated[s]}
            if fam.in_flow():
                rows.extend(fam.compare(iid, self.gold[iid], reports, values.get(iid, {})))
                continue
            texts = {GOLD: self.gold[iid], **reports}
            fut = self._submit(compare_task, name, iid, {k: sha(v) for k, v in texts.items()}, _texts=texts)
            futures.append((iid, fut))
        for iid, fut in futures:
            rows.extend(_outcome(fut, f"{iid} {name}", failures) or [])
        return rows
