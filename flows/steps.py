"""The build's steps and what depends on what (no Prefect import: the CLI uses it before setup)."""

from __future__ import annotations

from schemas.config import ArxivDomain, EdgarDomain

GROUND_STEPS = ("fetch", "clean", "split", "convert")
SYNTH_STEPS = ("structure", "questions", "outline", "fill", "validate")
STEPS = GROUND_STEPS + SYNTH_STEPS
# Steps whose output feeds the next snapshot (the form-restricted structure adapts R_t's structure).
_CARRIES_FORWARD = set(GROUND_STEPS) | {"structure", "questions"}


def refresh_keys(domain: EdgarDomain | ArxivDomain, snapshot: str, step: str) -> list[str]:
    """The (domain|snapshot|step) keys to recompute when `step` of `snapshot` is rerun."""
    if step not in STEPS:
        raise ValueError(f"unknown step {step!r}; steps: {', '.join(STEPS)}")
    snaps = domain.snapshots
    keys = [f"{domain.name}|{snapshot}|{s}" for s in STEPS[STEPS.index(step) :]]
    if step in _CARRIES_FORWARD:
        for later in snaps[snaps.index(snapshot) + 1 :]:
            keys += [f"{domain.name}|{later}|{s}" for s in SYNTH_STEPS]
    return keys
