"""`frame evolve`: benchmark-guided skill evolution (paper 003 section 5) and its locked evaluation.

Each round is a Prefect subflow: score the systems with K_t on the discovery split, keep the recurrent
failures, let the optimizer and critic write K_{t+1}, score K_t and K_{t+1} on the validation split,
accept or reject. Scoring goes through the score flow (cached tasks), so a killed run resumes with what
was done; a round's record (data/evolve/<release>/<run>/round-<k>/decision.json, written last) makes a
rerun skip it. The locked split is only read by `evaluate_locked`. docs/evolve.md describes the loop.

`evolve` and `evaluate_locked` check the skill they are given against `[evolve] budget_words` before any
flow runs (FrameInputError: one line naming the file, its size and the budget), and never let an error
print a flow run's parameters (flows.results.short_error)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from prefect import flow, get_run_logger

from flows.results import install_bounded_flow_parameters, short_error
from schemas.config import LLMSettings
from schemas.evolve import EvolveSettings, Skill, Splits
from schemas.scoring import ScoreSettings
from tasks.atomic import atomic_write_bytes, atomic_write_text
from tasks.errors import FrameInputError
from tasks.evolve.decide import (
    Decision,
    ScoredSplit,
    decide,
    item_changes,
    layer_means,
    objective,
    paired_differences,
    what_is_worse,
)
from tasks.evolve.failures import recurrent_failures
from tasks.evolve.locked import locked_entry, record_locked, refuse_repeat
from tasks.evolve.optimize import critique, llm_critique, llm_propose, propose
from tasks.evolve.skill import over_budget, with_skill
from tasks.evolve.splits import split_view, tuning_instances
from tasks.generate.systems import ReportSystem

install_bounded_flow_parameters()  # a job with large parameters (a submission's reports) still runs

__all__ = ["EvolveJob", "evaluate_locked", "evaluate_locked_flow", "evolve", "evolve_flow", "evolve_folder"]


def evolve_folder(release: Path, data_dir: Path, run: str) -> Path:
    release = Path(release).resolve()
    return Path(data_dir) / "evolve" / release.parent.name / release.name / run


def _json(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n"


@dataclass
class EvolveJob:
    """What every step of one evolve run shares: the release, its splits, the systems and the judges."""

    release: Path
    splits: Splits
    systems: dict[str, ReportSystem]
    settings: EvolveSettings
    score: ScoreSettings
    folder: Path
    cache_dir: Path
    judge_llm: LLMSettings | None = None
    embed_llm: LLMSettings | None = None
    names: set[str] = field(default_factory=set)  # domain names the critic and anonymiser remove
    data_dir: Path = Path("data")
    run_settings: Any = None  # the config's [run] (task runner, result storage)

    def key(self, *parts: Any) -> str:
        """Digest of what a round's outcome depends on (systems, settings, splits, and `parts`)."""
        base = [
            {n: s.identity() for n, s in sorted(self.systems.items())},
            self.settings.model_dump(mode="json", exclude={"rounds", "patience"}),
            self.score.model_dump(mode="json"),
            self.splits.instances,
            (self.judge_llm.model or "") if self.judge_llm else "",
        ]
        return hashlib.sha256(json.dumps([base, parts], sort_keys=True, default=str).encode()).hexdigest()

    def view(self, split: str, ids: list[str] | None = None) -> Path:
        ids = ids if ids is not None else tuning_instances(self.splits, split)
        # named <release>/<version>-<split>, so the scoring manifest names the release and the split
        view = self.folder / "views" / self.splits.release / f"{self.splits.version}-{split}"
        return split_view(self.release, ids, view)

    def scored(self, skill: Skill, split: str, ids: list[str] | None = None) -> ScoredSplit:
        """Every system generating with `skill` on `split`, scored by the score flow (cached tasks)."""
        from flows.score import score_release_flow

        view = self.view(split, ids)
        made = {n: with_skill(s, skill, self.folder / "prompts") for n, s in self.systems.items()}
        out = self.folder / "scores" / split / (skill.sha256[:12] if skill.rules else "no-skill")
        score_release_flow(
            str(view), made, self.score, self.judge_llm, str(out), list(self.settings.metrics), self.embed_llm
        )
        return ScoredSplit(pd.read_parquet(out / "scores.parquet"), pd.read_parquet(out / "evidence.parquet"))


def _run_name(kind: str) -> Callable[[], str]:
    """A flow run name "<kind> <release> <version>[ round <k>]" from the run's EvolveJob."""

    def name() -> str:
        from prefect.runtime import flow_run

        p = flow_run.parameters
        job = p.get("job")
        splits = getattr(job, "splits", None)
        parts = [kind, getattr(splits, "release", ""), getattr(splits, "version", "")]
        if p.get("k") is not None:
            parts += ["round", str(p["k"])]
        return " ".join(x for x in parts if x)

    return name


def _candidate(job: EvolveJob, current: Skill, failures: list, rejected: list) -> tuple[Skill, list[str]]:
    s = job.settings
    tags = {r.tag for r in rejected if r.tag}
    if s.optimizer is not None:
        cand, notes = llm_propose(current, failures, rejected, s.budget_words, s.optimizer, job.cache_dir)
    else:
        cand, notes = propose(current, failures, tags, s.max_new_rules)
    if s.critic is not None:
        cand, more = llm_critique(cand, s.budget_words, s.critic, job.cache_dir)
        notes += more
    cand, more = critique(cand, current, job.names, s.budget_words)  # hard guarantees, always
    return cand, notes + more


def _means(base: ScoredSplit, run: ScoredSplit) -> dict[str, float]:
    """The rubric total and layer means of `run` (over the reports scored in `base` too), for the record."""
    layers = {k: round(m["after"], 6) for k, m in layer_means(base, run).items()}
    return {"rubric": round(objective(run), 6), **layers}


def _ablate(
    job: EvolveJob, current: Skill, candidate: Skill, before: ScoredSplit, after: ScoredSplit
) -> tuple[Skill, ScoredSplit, list[dict]]:
    """An accepted candidate of k > 1 rules without each of its rules in turn, re-validated: a rule whose
    removal leaves nothing worse (tasks.evolve.decide.what_is_worse) is dropped, so a rule that changes
    nothing is not frozen into K*. Variants are scored like any skill (cached tasks and generations), so
    only a variant never scored before costs anything; one equal to K_t reuses K_t's scores."""
    kept, best, record = candidate, after, []
    if len(candidate.rules) < 2:
        return kept, best, record
    for rule in candidate.rules:
        rest = list(kept.rules)
        rest.remove(rule)
        variant = Skill(rules=rest)
        scored = before if variant.sha256 == current.sha256 else job.scored(variant, "validation")
        worse = what_is_worse(best, scored)
        record.append(
            {
                "rule": rule.model_dump(),
                "with": _means(scored, best),
                "without": _means(best, scored),
                "worse_without": worse,
                "kept": bool(worse),
            }
        )
        if not worse:
            kept, best = variant, scored
    return kept, best, record


@flow(name="evolve-round", flow_run_name=_run_name("evolve"), log_prints=True)
def evolve_round(job: EvolveJob, k: int, current: Skill, rejected: list) -> dict:
    """Round k: failures on discovery -> candidate -> K_t and candidate scored on validation -> decision."""
    log = get_run_logger()
    s = job.settings
    disc = job.scored(current, "discovery")
    failures = recurrent_failures(
        disc.evidence, support=s.support, min_fail_rate=s.min_fail_rate, names=job.names
    )
    candidate, notes = _candidate(job, current, failures, rejected)
    before = job.scored(current, "validation")
    accepted, ablation = candidate, []
    if candidate.sha256 == current.sha256:
        decision = Decision(False, ["the optimizer proposed no change"])
        after = kept = before
    else:
        after = job.scored(candidate, "validation")
        targets = {f.item for f in failures}
        decision = decide(
            before,
            after,
            targets,
            min_gain=s.min_gain,
            item_tolerance=s.item_tolerance,
            max_metric_drop=s.max_metric_drop,
        )
        kept = after
        if decision.accepted:
            accepted, kept, ablation = _ablate(job, current, candidate, before, after)
    log.info("round %d: %s (%s)", k, "accepted" if decision.accepted else "rejected", decision.reasons[0])
    return {
        "round": k,
        "current_sha256": current.sha256,
        "candidate": candidate.render(),
        "candidate_rules": [r.model_dump() for r in candidate.rules],
        "critique": notes,
        "failures": [f.brief() for f in failures],
        "validation": {
            "current": objective(before),
            "candidate": objective(after),
            "accepted": objective(kept),
        },
        "decision": decision.as_dict(),
        "ablation": ablation,  # each rule of an accepted candidate, dropped when it changed nothing
        "accepted_rules": [r.model_dump() for r in accepted.rules],  # what becomes K_{t+1} when accepted
    }


def _write_round(folder: Path, record: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / "candidate.md", record["candidate"] or "(empty skill)\n")
    atomic_write_text(folder / "critique.md", "".join(f"- {n}\n" for n in record["critique"]) or "- none\n")
    atomic_write_text(folder / "failures.json", _json(record["failures"]))
    atomic_write_text(folder / "validation.json", _json(record["validation"]))
    atomic_write_text(folder / "decision.json", _json(record))  # last: its presence marks the round done


def _recorded(folder: Path, key: str) -> dict | None:
    path = folder / "decision.json"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if record.get("key") == key else None


def _checked(skill: Skill, job: EvolveJob, flag: str) -> None:
    """FrameInputError (one line: the file, its size, the budget) for a skill over `[evolve] budget_words`:
    it would go into every generation request."""
    problem = over_budget(skill, job.settings.budget_words, flag)
    if problem is not None:
        raise FrameInputError(*problem)


def _run_flow(fl: Any, *args: Any) -> Any:
    """`fl(*args)`, an error that would print the flow run's parameters (or megabytes) made one short line."""
    try:
        return fl(*args)
    except FrameInputError:
        raise
    except Exception as exc:
        short = short_error(exc)
        if short is None:
            raise
        raise short from None


def evolve(job: EvolveJob, skill0: Skill, rounds: int, patience: int) -> dict:
    """The evolution loop (`evolve_flow`) from `skill0` (refused up front when over the word budget)."""
    _checked(skill0, job, "--skill")
    return _run_flow(evolve_flow, job, skill0, rounds, patience)


def locked_entry_of(job: EvolveJob, skill: Skill, out: Path) -> dict:
    """What a locked evaluation of `skill` by `job` is, as the release's record of them holds it."""
    identities = {n: s.identity() for n, s in job.systems.items()}
    return locked_entry(job.splits, skill.sha256, identities, list(job.settings.metrics), out)


def evaluate_locked(job: EvolveJob, skill: Skill, out: Path, again: bool = False) -> Path:
    """The locked evaluation (`evaluate_locked_flow`) of `skill` (refused up front when over the budget,
    or when already evaluated on this locked split unless `again`), recorded beside the release's splits."""
    _checked(skill, job, "--evaluate")
    entry = locked_entry_of(job, skill, out)
    refuse_repeat(job.release, entry, again)
    done = _run_flow(evaluate_locked_flow, job, skill, out)
    record_locked(job.release, entry, again)
    return done


@flow(name="evolve", flow_run_name=_run_name("evolve"), log_prints=True)
def evolve_flow(job: EvolveJob, skill0: Skill, rounds: int, patience: int) -> dict:
    """The loop (see the module docstring); returns the run's summary, with K* in <run>/skill.md."""
    log = get_run_logger()
    current, best, best_value = skill0, skill0, None
    rejected: list = []
    stale, history = 0, []
    for k in range(1, rounds + 1):
        key = job.key(k, current.sha256, [r.model_dump() for r in rejected])
        folder = job.folder / f"round-{k}"
        record = _recorded(folder, key)
        if record is None:
            record = {**evolve_round(job, k, current, rejected), "key": key}
            _write_round(folder, record)
        else:
            log.info("round %d: recorded in %s (skipped)", k, folder.name)
        decision = {n: v for n, v in record["decision"].items() if n != "items"}  # items: decision.json
        history.append({"round": k, **decision, "validation": record["validation"]})
        candidate = Skill.model_validate({"rules": record["candidate_rules"]})
        if best_value is None:
            best_value = record["validation"]["current"]
        if record["decision"]["accepted"]:
            rules = record.get("accepted_rules", record["candidate_rules"])
            current, stale = Skill.model_validate({"rules": rules}), 0
            # rules the ablation dropped changed nothing: not proposed again
            rejected += [r for r in candidate.rules if r not in current.rules]
            value = record["validation"].get("accepted", record["validation"]["candidate"])
            if value > best_value:
                best, best_value = current, value
        else:
            rejected += [r for r in candidate.rules if r not in current.rules]
            stale += 1
            if stale >= patience:
                log.info("stopping: %d round(s) without an accepted candidate", stale)
                break
    atomic_write_text(job.folder / "skill.md", best.render() or "")
    summary = {
        "release": f"{job.splits.release}/{job.splits.version}",
        "systems": sorted(job.systems),
        "rounds": history,
        "best_skill_sha256": best.sha256,
        "best_validation_rubric": best_value,
        "skill_words": best.words,
        "optimizer": job.settings.optimizer.model if job.settings.optimizer else "offline (template rules)",
        "critic": job.settings.critic.model if job.settings.critic else "offline (rule checks)",
    }
    atomic_write_text(job.folder / "summary.json", _json(summary))
    return summary


@flow(name="evolve-locked", flow_run_name=_run_name("evolve-locked"), log_prints=True)
def evaluate_locked_flow(job: EvolveJob, skill: Skill, out: Path) -> Path:
    """Each system with and without `skill` on the locked split: paired differences with 95% CIs per
    layer and family, item pass-rate changes, skill length; report.md + parquet in `out`."""
    ids = list(job.splits.instances["locked"])
    without = job.scored(Skill(), "locked", ids)
    with_k = job.scored(skill, "locked", ids)
    paired = paired_differences(without, with_k, n_resamples=job.settings.bootstrap)
    items = item_changes(without, with_k)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out / "paired.parquet", paired.to_parquet(index=False))
    atomic_write_bytes(out / "items.parquet", items.to_parquet(index=False))
    atomic_write_text(out / "report.md", locked_markdown(job, skill, paired, items, len(ids)))
    return out


def locked_markdown(job: EvolveJob, skill: Skill, paired: pd.DataFrame, items: pd.DataFrame, n: int) -> str:
    from tasks.tokens import count_tokens

    lines = [
        f"# Locked evaluation of a skill on {job.splits.release} {job.splits.version}",
        "",
        f"{n} locked instances; systems {', '.join(sorted(job.systems))}; skill {skill.sha256[:12]}: "
        f"{len(skill.rules)} rules, {skill.words} words, {count_tokens(skill.render())} prompt tokens added "
        "to each generation request of an LLM system.",
        "",
        "## Paired differences (with skill - without), mean [95% CI] over instances",
        "",
        "| System | Metric | Layer / family | n | Without | With | Difference [95% CI] |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for r in paired.itertuples():
        lines.append(
            f"| {r.system} | {r.metric} | {r.layer or r.family} | {r.n} | {r.without:.4f} | "
            f"{r.with_skill:.4f} | {r.diff:+.4f} [{r.ci_low:+.4f}, {r.ci_high:+.4f}] |"
        )
    changed = items[items.change.abs() > 1e-9]
    lines += ["", "## Rubric items whose pass rate changed", ""]
    if changed.empty:
        lines.append("None.")
    else:
        lines += ["| System | Layer | Item | Without | With | Change |", "|---|---|---|---:|---:|---:|"]
        for r in changed.itertuples():
            lines.append(
                f"| {r.system} | {r.layer} | {r.text} | {r.without:.2f} | {r.with_skill:.2f} | "
                f"{r.change:+.2f} |"
            )
    return "\n".join(lines) + "\n"
