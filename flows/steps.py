"""The build's steps and what depends on what (no Prefect import: the CLI uses it before setup)."""

from __future__ import annotations

from schemas.domains import DomainBase
from tasks.sources import ground_steps

SYNTH_STEPS = ("structure", "questions", "outline", "fill", "validate")


def all_steps() -> tuple[str, ...]:
    """fetch and the grounding steps of every registered source kind (clean, split, convert for the
    built-in ones), then synthesis."""
    return ground_steps() + SYNTH_STEPS


def refresh_keys(domain: DomainBase, snapshot: str, step: str) -> list[str]:
    """The (domain|snapshot|step) keys to recompute when `step` of `snapshot` is rerun."""
    steps = all_steps()
    if step not in steps:
        raise ValueError(f"unknown step {step!r}; steps: {', '.join(steps)}")
    snaps = domain.snapshots
    keys = [f"{domain.name}|{snapshot}|{s}" for s in steps[steps.index(step) :]]
    # Steps whose output feeds the next snapshot (the form-restricted structure adapts R_t's structure).
    if step in set(ground_steps()) | {"structure", "questions"}:
        for later in snaps[snaps.index(snapshot) + 1 :]:
            keys += [f"{domain.name}|{later}|{s}" for s in SYNTH_STEPS]
    return keys


# Prefect run names: "fill · aapl-10q · 2024-06-29". A run's name is for people reading the UI and the
# log; the cache keys (flows.caching) use the task's name, its source and its inputs, never the run name.
RUN_NAME_SEP = " · "


def run_name(*parts: object) -> str:
    """A literal Prefect task/flow run name from its parts (step, domain, snapshot, ...; empty parts
    left out). Prefect formats a string run name with the call's parameters (`str.format`): braces are
    doubled so that a name is always taken literally."""
    text = RUN_NAME_SEP.join(str(p) for p in parts if p not in (None, ""))
    return text.replace("{", "{{").replace("}", "}}")


def score_run_name() -> str:
    """The score flow's run name, as builds are named ("build demo 0.1.0"): "score demo 0.1.0: gold,
    copy-sample" (release, version, the systems; more than three counted)."""
    from pathlib import Path

    from prefect.runtime import flow_run

    p = flow_run.parameters
    rel = Path(str(p.get("release") or ""))
    names = list(p.get("systems") or [])
    more = f" +{len(names) - 3}" if len(names) > 3 else ""
    systems = f": {', '.join(names[:3])}{more}" if names else ""
    return f"score {rel.parent.name} {rel.name}{systems}".replace("  ", " ")


def run_name_template(step: str, *params: str) -> str:
    """A Prefect `task_run_name` template naming `step` and the values of the task's parameters
    `params`: run_name_template("score", "family", "system", "instance_id") ->
    "score · {family} · {system} · {instance_id}"."""
    return RUN_NAME_SEP.join([step.replace("{", "{{").replace("}", "}}"), *(f"{{{p}}}" for p in params)])


def snapshot_span(snapshots: list[str] | tuple[str, ...]) -> str:
    """The snapshots of a domain-level run in one name part: "W1", "W1..W3"."""
    if not snapshots:
        return ""
    return snapshots[0] if len(snapshots) == 1 else f"{snapshots[0]}..{snapshots[-1]}"
