"""Deployable Prefect flows (JSON-able parameters) and the refresh schedules.

A deployment passes its parameters as JSON, so these flows take the config's *path* (not a
FrameConfig) and load it themselves. `prefect.yaml` at the repo root registers them on the `frame`
work pool (`prefect --no-prompt deploy --all`, done by `docker/worker-entrypoint.sh`); `serve()` runs
the two refresh schedules in this process instead (no work pool), with the same cron strings and
timezone, read from prefect.yaml: one source of truth.

Prefect's settings (PREFECT_API_URL, PREFECT_LOCAL_STORAGE_PATH, PREFECT_RESULTS_PERSIST_BY_DEFAULT,
FRAME_CACHE_DIR, ...) come from the worker's environment (Dockerfile, docker-compose.yml, the
entrypoint's defaults), not from `configure_prefect`.
"""

from __future__ import annotations

import logging
from pathlib import Path

from prefect import flow

log = logging.getLogger(__name__)

PREFECT_YAML = Path(__file__).resolve().parents[1] / "prefect.yaml"
REFRESH_DEPLOYMENTS = ("frame-refresh-filings", "frame-refresh-arxiv")


@flow(name="build-release", log_prints=True)
def build_release_flow(
    config: str,
    release: str,
    version: str,
    domains: list[str] | None = None,
    allow_partial: bool = False,
) -> dict:
    """Build `domains` (default: all of the config's) and write data/releases/<release>/<version>/."""
    from flows.release import build_and_publish
    from tasks.config import load_config

    cfg = load_config(config)
    names = [cfg.domain(d).name for d in domains] if domains else [d.name for d in cfg.domains]
    out = build_and_publish(cfg, names, release, version, allow_partial=allow_partial)
    failed = [{"domain": r.domain, "error": r.error} for r in out["failed"]]
    if out["path"] is None:
        lines = [f"domain {f['domain']}: {f['error']}" for f in failed]
        raise RuntimeError(
            f"release {release} {version} not written: {len(failed)} domain(s) failed\n" + "\n".join(lines)
        )
    print(f"release: {out['path']}")  # log_prints: to the flow run's log
    return {"release": str(out["path"]), "domains": names, "failed": failed}


@flow(name="refresh-release", log_prints=True)
def refresh_release_flow(config: str, release: str, kinds: list[str] | None = None) -> dict:
    """Build the next version of `release` if the sources have new snapshots (`flows.refresh`).

    `kinds`: ["edgar"] (the quarterly filing schedule), ["arxiv"] (the monthly paper schedule), None = all.
    A refresh in which a domain failed writes no version and ends the flow run Failed.
    """
    from flows.refresh import format_summary, refresh_release

    summary = refresh_release(config, release, kinds=kinds)
    print(format_summary(summary))
    if summary.get("status") == "failed":
        lines = [f"domain {f['domain']}: {f['error']}" for f in summary.get("failed", [])]
        raise RuntimeError(f"refresh {release} wrote no version: a domain failed\n" + "\n".join(lines))
    return summary


def _is_template(value: object) -> bool:
    return isinstance(value, str) and value.strip().startswith("{{") and value.strip().endswith("}}")


def schedules(path: Path = PREFECT_YAML) -> list[dict]:
    """The refresh deployments' schedules as prefect.yaml defines them:
    [{"name", "cron", "timezone", "parameters"}] (parameters without the env-templated ones,
    `config` and `release`, which every environment supplies)."""
    import yaml

    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    by_name = {d["name"]: d for d in doc.get("deployments") or []}
    out = []
    for name in REFRESH_DEPLOYMENTS:
        dep = by_name.get(name)
        if dep is None or not dep.get("schedules"):
            raise ValueError(f"{path}: deployment {name!r} with a schedule not found")
        (sched,) = dep["schedules"]  # one schedule per refresh deployment
        params = {k: v for k, v in (dep.get("parameters") or {}).items() if not _is_template(v)}
        out.append({"name": name, "cron": sched["cron"], "timezone": sched["timezone"], "parameters": params})
    return out


def serve(config: str, release: str, *, tz: str = "America/New_York") -> None:
    """Serve the two refresh schedules from this process (`frame serve`): no work pool needed, only a
    Prefect API (PREFECT_API_URL, or a local ephemeral one). Blocks until interrupted."""
    import prefect
    from prefect.schedules import Cron

    deployments = []
    for s in schedules():
        if s["timezone"] != tz:
            log.warning("%s: prefect.yaml says timezone %s; serving in %s", s["name"], s["timezone"], tz)
        deployments.append(
            refresh_release_flow.to_deployment(
                name=s["name"],
                schedules=[Cron(s["cron"], timezone=tz)],
                parameters={"config": str(Path(config).resolve()), "release": release, **s["parameters"]},
                tags=["frame", "refresh"],
            )
        )
    prefect.serve(*deployments)
