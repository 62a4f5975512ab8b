"""What every report system returns for one instance, and what of an instance it may see. Kept apart
from tasks.generate.systems so that the system kinds (a command, a submission) import it without a cycle."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Generation", "without_target"]


@dataclass(frozen=True)
class Generation:
    """One system's outcome for one instance: a report, or a one-line error (exactly one of them)."""

    instance_id: str
    markdown: str | None
    metadata: dict[str, Any]
    error: str | None
    epoch: int = 0  # which sample of the instance's report (`--epochs`), 0 for the first or only one

    def __post_init__(self) -> None:
        if (self.markdown is None) == (self.error is None):
            raise ValueError(f"{self.instance_id}: a Generation has either markdown or an error")

    @property
    def ok(self) -> bool:
        return self.error is None


def without_target(instance: Mapping[str, Any]) -> dict[str, Any]:
    """The instance as a system may see it: no target report (no *_markdown field but S)."""
    return {k: v for k, v in instance.items() if not (k.endswith("_markdown") and k != "sample_markdown")}
