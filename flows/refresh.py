"""`frame refresh`: find the snapshots newer than a release's latest version, build only those, and
write the next version with the diff against the previous one in its card.

The plan is the config's domains extended by (1) every snapshot the latest release already holds (a
release only grows) and (2) what discovery finds at the source for domains that ask for it
(`discover = true` on a filing domain, `window_months` on an arXiv domain; `tasks.discover`). The
build then runs every domain, but a domain whose own config slice is unchanged is served from one
cache entry and a grown domain recomputes only its new snapshots (earlier snapshots' steps are cached
on their own inputs), so the new version costs what is new.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path

from schemas.config import FrameConfig
from schemas.release import release_id_problems
from tasks.atomic import atomic_write_text
from tasks.config import load_config
from tasks.discover import latest_release, next_version, released_snapshots
from tasks.errors import ConfigError
from tasks.sources import discover_domain, source_kind


@dataclass
class RefreshPlan:
    release: str
    previous: Path | None  # the latest release folder, None for a first build
    version: str  # the version the refresh writes
    config: FrameConfig  # the effective config: released + configured + discovered snapshots
    new: dict[str, list[str]] = field(default_factory=dict)  # domain -> snapshots not yet released

    @property
    def up_to_date(self) -> bool:
        return self.previous is not None and not any(self.new.values())


def plan_refresh(
    cfg: FrameConfig,
    release: str,
    *,
    kinds: list[str] | None = None,
    today: dt.date | None = None,
    bump: str = "minor",
) -> RefreshPlan:
    """What a refresh of `release` would build (no side effects but discovery's reads)."""
    # the name becomes folders (releases/NAME, refresh/NAME): checked before anything is read or written,
    # whichever way it came (frame refresh, frame serve, a deployment's parameters, FRAME_RELEASE)
    for where, problem in release_id_problems(release, "0.0.0"):
        raise ConfigError(where, problem)
    real_today = dt.date.today()
    if today is not None and today > real_today + dt.timedelta(days=2):
        # a date in the future would plan windows nobody has published yet (thousands, or an overflow)
        raise ConfigError("--today", f"{today} is after today's date ({real_today}): refreshes plan the past")
    for k in kinds or []:
        source_kind(k, "--only")
    today = today or real_today
    previous = latest_release(Path(cfg.build.data_dir) / "releases", release)
    known = released_snapshots(previous) if previous else {}
    configured = {d.name for d in cfg.domains}
    dropped = sorted(set(known) - configured)
    if dropped:
        raise ConfigError(
            "domains",
            f"release {release} {previous.name if previous else ''} holds domain(s) the config no longer "
            f"lists: {', '.join(dropped)} (a refresh never drops released data: add them back or use a "
            "new release name)",
        )
    domains = []
    for d in cfg.domains:
        wanted = kinds is None or d.kind in kinds
        grown = discover_domain(cfg, d if wanted else d.without_discovery(), known.get(d.name, []), today)
        domains.append(grown)
    effective = cfg.with_domains(domains)
    new = {d.name: [s for s in d.snapshots if s not in set(known.get(d.name, []))] for d in domains}
    version = next_version(previous.name, bump) if previous else "0.1.0"
    return RefreshPlan(release, previous, version, effective, {k: v for k, v in new.items() if v})


def refresh_release(
    config: str | Path | FrameConfig,
    release: str,
    *,
    kinds: list[str] | None = None,
    today: dt.date | None = None,
    bump: str = "minor",
    runner=None,
) -> dict:
    """Plan, build and publish; returns a JSON-able summary (also what the Prefect deployment returns).

    status: "up-to-date" (nothing new: no version written), "built", or "failed" (a domain failed:
    no version written; the finished steps stay cached, so the next refresh resumes)."""
    from flows.release import build_and_publish

    cfg = config if isinstance(config, FrameConfig) else load_config(config)
    plan = plan_refresh(cfg, release, kinds=kinds, today=today, bump=bump)
    summary = {
        "release": release,
        "previous": plan.previous.name if plan.previous else None,
        "version": plan.version,
        "new_snapshots": plan.new,
    }
    if plan.up_to_date:
        return {**summary, "status": "up-to-date", "path": str(plan.previous), "version": plan.previous.name}
    eff = plan.config
    # The effective config of each version is kept beside the releases: it is what was built.
    atomic_write_text(
        Path(eff.build.data_dir) / "refresh" / release / f"{plan.version}.json",
        eff.model_dump_json(indent=1, exclude={"run": True, "prices": True}) + "\n",
    )
    out = build_and_publish(
        eff, [d.name for d in eff.domains], release, plan.version, runner=runner, previous=plan.previous
    )
    failed = [{"domain": r.domain, "error": r.error} for r in out["failed"]]
    if out["path"] is None:
        return {**summary, "status": "failed", "path": None, "failed": failed}
    return {**summary, "status": "built", "path": str(out["path"]), "failed": failed, "stats": out["stats"]}


def format_summary(summary: dict) -> str:
    new = summary.get("new_snapshots") or {}
    head = f"refresh {summary['release']}: {summary['status']}"
    lines = [f"{head} ({summary.get('previous')} -> {summary['version']})"]
    for domain, snaps in sorted(new.items()):
        lines.append(f"  new: {domain} {', '.join(snaps)}")
    if summary.get("path"):
        lines.append(f"release: {summary['path']}")
    return "\n".join(lines)


def summary_json(summary: dict) -> str:
    return json.dumps({k: v for k, v in summary.items() if k != "stats"}, indent=2, default=str)
