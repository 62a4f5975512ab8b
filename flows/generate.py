"""`frame generate`: one report per instance of a release by one named system, written to
data/generations/<release name>/<version>/<system>/ (tasks.generate.runs). The systems themselves
(builtin, openai, command, submission) live in tasks.generate.systems. A system whose `epochs` is K > 1
(`--epochs`, tasks.generate.systems.with_epochs) writes K samples per instance, each its own cached
generation; the score flow scores each (`score_epochs`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task

from flows.caching import PUBLIC_INPUTS
from flows.settings import SAID_BY_FRAME
from flows.steps import run_name_template
from schemas.config import LLMSettings
from schemas.evaluation import EvalConfig
from tasks.generate.identity import epoch_identity
from tasks.generate.runs import (
    GENERATION_CODE,
    digest_paths,
    instance_digest,
    load_release_inputs,
    write_generations,
)
from tasks.generate.systems import Generation, ReportSystem, make_system, select_systems
from tasks.llm import redact

__all__ = [
    "check_submissions",
    "kit_withheld",
    "generate_all",
    "generate_for_scoring",
    "generate_reports",
    "generate_task",
    "first_samples",
    "score_epochs",
    "systems_for",
]


class Generated(dict):
    """{system: {instance_id: report}} of the first sample, as the score flow reads it, and `later`:
    {epoch: {system: {instance_id: report}}} of the further samples of systems with epochs > 1."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.later: dict[int, dict[str, dict[str, str]]] = {}


def _sample(system: ReportSystem, inst: dict, grounding: list, epoch: int) -> Generation:
    """Sample `epoch` of a system's report (only a system with epochs > 1 is asked for epoch > 0)."""
    if epoch:
        return system.generate(inst, grounding, epoch=epoch)  # type: ignore[call-arg]
    return system.generate(inst, grounding)


def systems_for(
    names: Iterable[str] | None, config: EvalConfig | None, llm: LLMSettings | None, cache_dir: Path
) -> dict[str, ReportSystem]:
    """The ReportSystems `--systems` names (None: every system of the config), gold excluded."""
    chosen = select_systems(list(names) if names is not None else None, config, llm=llm)
    return {n: make_system(n, cfg, cache_dir=cache_dir) for n, cfg in chosen.items() if n != "gold"}


def release_inputs(release: Path, only: Collection[str] | None):
    """load_release_inputs, kept to the instance ids `only` (None: every instance)."""
    instances, by_set = load_release_inputs(release)
    if only is not None:
        instances = instances[instances["instance_id"].isin(set(only))].reset_index(drop=True)
    return instances, by_set


def check_submissions(
    systems: dict[str, ReportSystem],
    instance_ids: list[str],
    *,
    allow_missing: bool = False,
    withheld: Iterable[str] = (),
) -> list[str]:
    """Every problem of every submission system against the release (one line each; empty = usable).

    `withheld`: the instances a blind kit of the release withholds (`kit_withheld`): a submission
    lacking one is not missing it; the ids it lacks are set on the system (`system.withheld`) and the
    score flow neither asks it for them nor counts them as failures."""
    problems: list[str] = []
    for system in systems.values():
        check = getattr(system, "check", None)
        if check is None:
            continue
        found = check(instance_ids, allow_missing=allow_missing)
        absent = sorted(set(withheld) - set(getattr(system, "reports", None) or {}))
        expected = tuple(f": instance {i}: missing (no report for this instance)" for i in absent)
        problems += [p for p in found if not p.endswith(expected)]
        system.withheld = absent  # type: ignore[attr-defined]
    return problems


def kit_withheld(release: Path) -> list[str]:
    """The instances `frame export-eval` withholds from the release's blind kit (tasks.release.evalkit
    select_blind, the same rule over the same rows): an instance whose gold report is the sample of a
    kept one."""
    from tasks.release import members
    from tasks.release.evalkit import select_blind

    cols = ["instance_id", "sample_report_id", "target_report_id", "sample_markdown", "target_markdown"]
    rows = members.read_table(release, "instances", columns=cols).to_pylist()
    return select_blind(rows)[1]


def generate_reports(
    release: Path,
    system: ReportSystem,
    on_done: Callable[[str], None] | None = None,
    only: Collection[str] | None = None,
) -> list[Generation]:
    """One Generation per instance of `release` and sample (`system.epochs`; nothing written); a failed
    instance does not stop the others. `only`: these instance ids (--limit / --instances, tasks.select),
    else every one."""
    instances, by_set = release_inputs(release, only)
    out = []
    for inst in instances.to_dict("records"):
        for epoch in range(getattr(system, "epochs", 1)):
            out.append(_sample(system, inst, by_set.get(str(inst["grounding_set_id"]), []), epoch))
            if on_done is not None:
                on_done(str(inst["instance_id"]))
    return out


def generate_all(
    release: Path,
    system: ReportSystem,
    on_done: Callable[[str], None] | None = None,
    only: Collection[str] | None = None,
) -> tuple[Path, list[Generation]]:
    """Generate and write the reports of `system`; returns (folder, generations). Check submissions
    first (check_submissions): a submission system refuses to generate before."""
    generations = generate_reports(release, system, on_done, only)
    return write_generations(release, system.name, generations, keep_others=only is not None), generations


@task(name="generate", cache_policy=PUBLIC_INPUTS, persist_result=True)
def generate_task(
    system: str,
    identity: dict,
    instance_id: str,
    instance_sha: str,
    code: str,
    _system: ReportSystem | None = None,
    _instance: dict | None = None,
    _grounding: list | None = None,
) -> dict:
    """One report of one system, keyed by the system's identity and what it sees of the instance. A
    failed generation raises, so it is not cached: a rerun tries that instance again."""
    assert _system is not None and _instance is not None
    got = _sample(_system, _instance, list(_grounding or []), int(identity.get("epoch", 0)))
    # whatever the system wrote (a program's stdout, an endpoint's reply) never carries a key frame knows
    if got.error is not None:
        raise RuntimeError(redact.scrub(got.error))
    markdown = redact.scrub(got.markdown) if got.markdown is not None else None
    return {"markdown": markdown, "metadata": redact.scrub_data(got.metadata)}


# Runs read "generate · <system> · <instance>". Set here, not in the decorator: the decorator is part
# of the task's source, hence of its cache key (flows.caching.task_source).
generate_task = generate_task.with_options(
    task_run_name=run_name_template("generate", "system", "instance_id")
)


def generate_for_scoring(
    rel: Path,
    systems: dict[str, ReportSystem | None],
    gold: dict[str, str],
    outcome: Callable[[Any, str, list[str]], Any],
    only: Collection[str] | None = None,
) -> tuple[dict[str, dict[str, str]], dict[str, str], list[dict[str, Any]]]:
    """Inside the score flow: one cached `generate` task per (system, instance, sample); `None` systems
    (gold) take `gold`. Returns (Generated: {system: {instance_id: report}} and the further samples,
    sha256 of each system's reports, failed generations); `outcome(future, label, failures)` waits for a
    task (flows.score); `only` as in generate_reports."""
    instances, by_set = release_inputs(rel, only)
    code = digest_paths(GENERATION_CODE)
    futures = []
    for name, system in systems.items():
        if system is None:
            continue
        identity = system.identity()  # once per system: it may hash a submission's or program's files
        skip = set(getattr(system, "withheld", None) or ())  # a kit submission's withheld instances
        for inst in instances.to_dict("records"):
            if inst["instance_id"] in skip:
                continue
            g = by_set.get(str(inst["grounding_set_id"]), [])
            for epoch in range(getattr(system, "epochs", 1)):  # a ReportSystem need not define it
                key = (
                    name,
                    epoch_identity(identity, epoch),
                    inst["instance_id"],
                    instance_digest(inst, g),
                    code,
                )
                fut = generate_task.submit(*key, _system=system, _instance=inst, _grounding=g)
                futures.append((name, inst["instance_id"], epoch, fut))
    made: dict[str, list[Generation]] = {n: [] for n, s in systems.items() if s is not None}
    for name, iid, epoch, fut in futures:
        errors: list[str] = []
        got = outcome(fut, f"{iid} {name} generate" + (f" (epoch {epoch})" if epoch else ""), errors)
        made[name].append(
            Generation(iid, got["markdown"], got["metadata"], None, epoch)
            if got is not None
            else Generation(iid, None, {}, errors[0].split(": ", 1)[-1], epoch)
        )
    generated = Generated({n: dict(gold) for n, s in systems.items() if s is None})
    digests: dict[str, str] = {}
    failed = []
    for name, gens in made.items():
        folder = write_generations(rel, name, gens, keep_others=only is not None)
        generated[name] = {g.instance_id: g.markdown for g in gens if g.markdown is not None and not g.epoch}
        for g in gens:
            if g.epoch and g.markdown is not None:
                generated.later.setdefault(g.epoch, {}).setdefault(name, {})[g.instance_id] = g.markdown
        # the first sample's digest as before epochs; later samples are keyed apart
        digests[name] = hashlib.sha256(json.dumps(generated[name], sort_keys=True).encode()).hexdigest()
        for k, later in sorted(generated.later.items()):
            if name in later:
                digests[f"{name}#epoch-{k}"] = hashlib.sha256(
                    json.dumps(later[name], sort_keys=True).encode()
                ).hexdigest()
        failed += [
            {
                "system": name,
                "instance_id": g.instance_id,
                "error": g.error,
                **({"epoch": g.epoch} if g.epoch else {}),
            }
            for g in gens
            if g.error
        ]
        get_run_logger().info("%s: %d report(s) in %s", name, len(generated[name]), folder)
    for f in failed:  # said by the command too, in its own line (flows.settings.SAID_BY_FRAME)
        msg = f"generation failed: {f['system']} {f['instance_id']}: {f['error']}"
        get_run_logger().warning(msg, extra=SAID_BY_FRAME)
    return generated, digests, failed


def score_epochs(
    score: Callable[..., list[tuple[dict, str, Any]]],
    families: list[str],
    generated: dict[str, dict[str, str]],
    prepared: dict,
    failures: list[str],
) -> list[tuple[dict, str, Any]]:
    """Inside the score flow: `score` (flows.score._Job.score) over the first samples, then over each
    further epoch's samples of the systems that have them; a later sample's rows carry its `epoch` in
    their instance row (tasks.score.outputs writes it; tasks.score.leaderboard.epochs folds them)."""
    results = score(families, generated, prepared, failures)
    for epoch, later in sorted(getattr(generated, "later", {}).items()):
        reports = {s: later.get(s, {}) for s in generated}
        rows = score(families, reports, prepared, failures)
        results += [({**inst, "epoch": epoch}, system, r) for inst, system, r in rows]
    return results


def first_samples(results: list[tuple[dict, str, Any]]) -> list[tuple[dict, str, Any]]:
    """The rows of the first samples (what comparison families compare: the reports of `generated`)."""
    return [x for x in results if not x[0].get("epoch")]


def _one_shot_messages(cfg: Any, instance: Any, grounding: Any, llm: LLMSettings) -> list[list[dict]]:
    from tasks.generate.llm import PROMPT, build_messages
    from tasks.llm.prompts import prompt_file_or

    docs = [
        (str(d["doc_id"]), str(d.get("title") or d["doc_id"]), str(d.get("markdown") or ""))
        for d in grounding
    ]
    prompt = prompt_file_or(getattr(cfg, "prompt", None), PROMPT)
    return [build_messages(str(instance["sample_markdown"]), docs, llm, prompt)[0]]


def _section_messages(cfg: Any, instance: Any, grounding: Any, llm: LLMSettings) -> list[list[dict]]:
    from tasks.generate.sections import PROMPT, plan_sections
    from tasks.llm.prompts import prompt_file_or

    _, requests = plan_sections(
        instance, grounding, llm, prompt_file_or(getattr(cfg, "prompt", None), PROMPT)
    )
    return [[dict(m) for m in r.messages] for r in requests if r is not None]


# The requests each generation strategy would send, for `frame score --dry-run` (tasks.score.estimate).
ESTIMATE_GENERATORS = {"one-shot": _one_shot_messages, "section-by-section": _section_messages}
