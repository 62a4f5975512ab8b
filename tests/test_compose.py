"""The self-hosted stack's files, checked without a Docker engine: docker-compose.yml against the
compose spec (PyPI `compose-spec`) plus what the stack must have, prefect.yaml's deployments and
schedules, the Dockerfile, .dockerignore and .env.example."""

from __future__ import annotations

import datetime as dt
import importlib
import inspect
import os
import re
import subprocess
from pathlib import Path
from zoneinfo import ZoneInfo

import compose_spec
import pytest
import yaml

from tests.conftest import ROOT, SMALL_DOMAINS

COMPOSE = ROOT / "docker-compose.yml"
PREFECT_YAML = ROOT / "prefect.yaml"
ENV_EXAMPLE = ROOT / ".env.example"
ENTRYPOINT = ROOT / "docker" / "worker-entrypoint.sh"

# ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:?error}, ${NAME?error}; $$ is a literal $.
_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}")


def env_example() -> dict[str, str]:
    """The variables .env.example sets (uncommented lines)."""
    out = {}
    for line in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def env_example_names() -> set[str]:
    """Every variable .env.example lists, set or commented out (`# NAME=...`)."""
    return set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]*)=", ENV_EXAMPLE.read_text(encoding="utf-8"), re.M))


def interpolate(text: str, env: dict[str, str]) -> str:
    """What `docker compose` does to the file before parsing it (the validator does not interpolate)."""

    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name, op, arg = m.group(1), m.group(2) or "", m.group(3) or ""
        value = env.get(name)
        if value is None or (op.startswith(":") and value == ""):
            if op.endswith("-"):
                return arg
            if op.endswith("?"):
                raise ValueError(f"{name}: {arg}")
            return ""
        return value

    return _VAR.sub(sub, text)


@pytest.fixture(scope="module")
def compose() -> dict:
    text = interpolate(COMPOSE.read_text(encoding="utf-8"), env_example())
    parsed = compose_spec.PyCompose.from_yaml(text)
    parsed.validate()  # raises on anything the compose spec rejects
    return parsed.to_dict()


def test_compose_validates_against_the_spec(compose):
    assert set(compose["services"]) == {"postgres", "prefect-server", "worker", "llm"}
    # A required variable without a value is an error, as with `docker compose config`.
    with pytest.raises(ValueError, match="POSTGRES_PASSWORD"):
        interpolate(COMPOSE.read_text(encoding="utf-8"), {})


def test_every_service_has_a_healthcheck_and_known_dependencies(compose):
    services = compose["services"]
    for name, svc in services.items():
        hc = svc.get("healthcheck")
        assert hc and hc.get("test") and not hc.get("disable"), f"{name} has no healthcheck"
        for dep in svc.get("depends_on") or {}:
            assert dep in services, f"{name} depends on undefined service {dep}"
    assert "pg_isready" in str(services["postgres"]["healthcheck"]["test"])
    assert "/api/health" in str(services["prefect-server"]["healthcheck"]["test"])
    assert "/health" in str(services["llm"]["healthcheck"]["test"])
    assert services["prefect-server"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert services["worker"]["depends_on"]["prefect-server"]["condition"] == "service_healthy"
    # The worker waits for the LLM only when the llm profile runs it.
    assert services["worker"]["depends_on"]["llm"] == {"condition": "service_healthy", "required": False}


def test_llm_only_under_its_profile_with_a_gpu(compose):
    services = compose["services"]
    assert services["llm"]["profiles"] == ["llm"]
    assert all(not svc.get("profiles") for name, svc in services.items() if name != "llm")
    llm = services["llm"]
    assert llm["image"].startswith("vllm/vllm-openai:")
    (device,) = llm["deploy"]["resources"]["reservations"]["devices"]
    assert device["capabilities"] == ["gpu"] and device["driver"] == "nvidia"
    assert "--model" in llm["command"]
    assert llm["command"][llm["command"].index("--model") + 1] == env_example()["VLLM_MODEL"]


def test_postgres_and_prefect_server(compose):
    pg, server = compose["services"]["postgres"], compose["services"]["prefect-server"]
    assert pg["image"] == "postgres:16"
    assert pg["env_file"] == ".env"
    assert {"POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB"} <= set(env_example())
    assert any(v.endswith(":/var/lib/postgresql/data") for v in pg["volumes"])
    # Prefect needs pg_trgm: enabled by an init script at the database's first start.
    init = [v for v in pg["volumes"] if ":/docker-entrypoint-initdb.d" in v]
    assert len(init) == 1
    folder = ROOT / init[0].split(":")[0]
    assert "CREATE EXTENSION IF NOT EXISTS pg_trgm" in "".join(p.read_text() for p in folder.glob("*.sql"))
    import prefect

    assert server["image"] == f"prefecthq/prefect:{prefect.__version__}-python3.11"
    assert server["command"] == ["prefect", "server", "start", "--host", "0.0.0.0"]
    env = env_example()
    url = server["environment"]["PREFECT_API_DATABASE_CONNECTION_URL"]
    assert url == (
        f"postgresql+asyncpg://{env['POSTGRES_USER']}:{env['POSTGRES_PASSWORD']}@postgres:5432/"
        f"{env['POSTGRES_DB']}"
    )
    assert server["environment"]["PREFECT_SERVER_ANALYTICS_ENABLED"] == "false"


def test_worker_service(compose):
    top_volumes = set(compose["volumes"])
    w = compose["services"]["worker"]
    assert w["build"] == {"context": ".", "dockerfile": "Dockerfile"}
    assert w["command"] == ["bash", "docker/worker-entrypoint.sh"]
    assert w["env_file"] == ".env"
    env = w["environment"]
    assert env["PREFECT_API_URL"] == "http://prefect-server:4200/api"
    assert env["FRAME_HOME"] == "/app"
    mounts = {v.split(":")[1]: v for v in w["volumes"]}
    # data/ and the caches on named volumes; the corpus read-only where configs/demo.toml expects it.
    assert mounts["/app/data"].split(":")[0] in top_volumes
    assert mounts["/data/cache"].split(":")[0] in top_volumes
    assert env["FRAME_CACHE_DIR"] == "/data/cache"
    assert env["PREFECT_LOCAL_STORAGE_PATH"].startswith("/data/cache/")
    assert mounts["/shared/corpus"].endswith(":ro")
    demo = (ROOT / "configs" / "demo.toml").read_text()
    assert 'mirror = "../../shared/corpus"' in demo and 'data_dir = "../data"' in demo  # /app/configs/..
    assert env["FRAME_CONFIG"] == "/app/configs/demo.toml"


def test_env_example_lists_every_variable_without_secrets():
    names = env_example_names()
    used = {m.group(1) for m in _VAR.finditer(COMPOSE.read_text()) if m.group(1)}
    assert used <= names, f"not in .env.example: {sorted(used - names)}"
    # What frame and the entrypoint read from the environment (secrets, LLM, EDGAR identity, worker).
    assert {
        "OPENAI_API_KEY",
        "FRAME_EDGAR_NAME",
        "FRAME_EDGAR_EMAIL",
        "FRAME_LLM_BACKEND",
        "FRAME_LLM_BASE_URL",
        "FRAME_LLM_MODEL",
        "FRAME_CONFIG",
        "FRAME_RELEASE",
        "FRAME_WORKER_LIMIT",
    } <= names
    text = ENV_EXAMPLE.read_text()
    assert not re.search(r"sk-[A-Za-z0-9]{20,}|hf_[A-Za-z0-9]{20,}", text), "a real-looking key"
    assert "FRAME_LLM_BASE_URL=http://llm:8000/v1" in text


# ---- prefect.yaml ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def prefect_yaml() -> dict:
    return yaml.safe_load(PREFECT_YAML.read_text(encoding="utf-8"))


def test_prefect_yaml_schema_and_entrypoints(prefect_yaml):
    from prefect import Flow
    from prefect.cli.deploy._models import PrefectYamlModel

    PrefectYamlModel.model_validate(prefect_yaml)  # what `prefect deploy` parses the file with
    deployments = {d["name"]: d for d in prefect_yaml["deployments"]}
    assert set(deployments) == {"frame-refresh-filings", "frame-refresh-arxiv", "frame-build"}
    (pull,) = prefect_yaml["pull"]
    assert pull == {"prefect.deployments.steps.set_working_directory": {"directory": "{{ $FRAME_HOME }}"}}
    for name, dep in deployments.items():
        path, func = dep["entrypoint"].split(":")
        assert (ROOT / path).is_file()
        obj = getattr(importlib.import_module(path.removesuffix(".py").replace("/", ".")), func)
        assert isinstance(obj, Flow), f"{name}: {dep['entrypoint']} is not a Prefect flow"
        params = inspect.signature(obj.fn).parameters
        assert set(dep["parameters"]) <= set(params), name
        assert dep["parameters"]["config"] == "{{ $FRAME_CONFIG }}"
        assert dep["parameters"]["release"] == "{{ $FRAME_RELEASE }}"
        assert dep["work_pool"]["name"] == "frame"
    assert deployments["frame-build"]["entrypoint"] == "flows/deploy.py:build_release_flow"
    assert not deployments["frame-build"].get("schedules")
    assert deployments["frame-refresh-filings"]["parameters"]["kinds"] == ["edgar"]
    assert deployments["frame-refresh-arxiv"]["parameters"]["kinds"] == ["arxiv"]


def test_schedules_parse_with_explicit_timezones(prefect_yaml):
    # Prefect 3.9 computes cron schedules with cronsim (its dependency; croniter no longer is one).
    from cronsim import CronSim
    from prefect.client.schemas.schedules import CronSchedule

    deployments = {d["name"]: d for d in prefect_yaml["deployments"]}
    year = {}
    for name in ("frame-refresh-filings", "frame-refresh-arxiv"):
        (sched,) = deployments[name]["schedules"]
        assert sched.get("active", True) is True
        CronSchedule(cron=sched["cron"], timezone=sched["timezone"])  # Prefect's own validation
        tz = ZoneInfo(sched["timezone"])  # explicit and a real zone
        runs = []
        for when in CronSim(sched["cron"], dt.datetime(2026, 1, 1, tzinfo=tz)):
            if when.year > 2026:
                break
            runs.append(when)
        year[name] = runs
    # Quarterly filings (a few weeks after each quarter-end), monthly papers; 06:00 local time.
    assert [(r.month, r.day) for r in year["frame-refresh-filings"]] == [(3, 15), (5, 15), (8, 15), (11, 15)]
    assert [(r.month, r.day) for r in year["frame-refresh-arxiv"]] == [(m, 2) for m in range(1, 13)]
    assert {r.hour for runs in year.values() for r in runs} == {6}


def test_deploy_schedules_match_prefect_yaml(prefect_yaml, monkeypatch):
    import prefect

    from flows import deploy

    by_name = {d["name"]: d for d in prefect_yaml["deployments"]}
    got = deploy.schedules()
    assert [s["name"] for s in got] == ["frame-refresh-filings", "frame-refresh-arxiv"]
    for s in got:
        (sched,) = by_name[s["name"]]["schedules"]
        assert (s["cron"], s["timezone"]) == (sched["cron"], sched["timezone"])
        assert s["parameters"] == {"kinds": by_name[s["name"]]["parameters"]["kinds"]}
    # serve() registers the same two schedules (captured instead of served).
    served = []
    monkeypatch.setattr(prefect, "serve", lambda *deps, **kw: served.extend(deps))
    deploy.serve(str(ROOT / "configs" / "demo.toml"), "demo")
    assert [d.name for d in served] == ["frame-refresh-filings", "frame-refresh-arxiv"]
    for d, s in zip(served, got, strict=True):
        (sch,) = d.schedules
        assert (sch.schedule.cron, sch.schedule.timezone) == (s["cron"], s["timezone"])
        assert d.parameters == {
            "config": str(ROOT / "configs" / "demo.toml"),
            "release": "demo",
            **s["parameters"],
        }
        assert d.entrypoint == "flows/deploy.py:refresh_release_flow"


# ---- image and entry script --------------------------------------------------------------------


def test_dockerfile_and_dockerignore():
    text = (ROOT / "Dockerfile").read_text()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert lines[0] == "FROM python:3.11-slim"
    assert '"torch==2.13.0"' in text and '"torch==2.13.0"' in (ROOT / "pyproject.toml").read_text()
    assert "https://download.pytorch.org/whl/cpu" in text  # the documented fallback for torch
    assert re.search(r"python -m pip install -e \"\.", text), "installs the repo's pyproject"
    assert "WORKDIR /app" in lines
    users = [ln.split()[1] for ln in lines if ln.startswith("USER ")]
    assert users and users[-1] not in ("root", "0")
    for key, value in {
        "PREFECT_LOCAL_STORAGE_PATH": "/data/cache/prefect-results",
        "FRAME_CACHE_DIR": "/data/cache",
        "HF_HUB_OFFLINE": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "FRAME_HOME": "/app",
    }.items():
        assert re.search(rf"\b{key}={re.escape(value)}(\s|$)", text), key
    assert re.search(r"\bPREFECT_HOME=/\S+", text)
    ignore = {ln.strip().rstrip("/") for ln in (ROOT / ".dockerignore").read_text().splitlines()}
    assert {".venv", "data", ".git", ".env", ".prefect", ".pytest_cache", ".ruff_cache"} <= ignore
    assert "**/__pycache__" in ignore


def test_entrypoint_script_is_strict_bash():
    assert os.access(ENTRYPOINT, os.X_OK)
    text = ENTRYPOINT.read_text()
    assert text.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in text
    assert "deploy --all" in text and "exec " in text and "worker start --pool" in text
    subprocess.run(["bash", "-n", str(ENTRYPOINT)], check=True)
    # Without an API to talk to it stops at once, in one line.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    res = subprocess.run(["bash", str(ENTRYPOINT)], env=env, capture_output=True, text=True, timeout=30)
    assert res.returncode != 0 and "PREFECT_API_URL" in res.stderr


# ---- the deployable flows' own logic (the build/refresh work stubbed; `.fn` runs no Prefect) ------


def _write_config(tmp_path: Path) -> Path:
    cfg = tmp_path / "small.toml"
    cfg.write_text(
        f'[build]\ndata_dir = "{tmp_path / "data"}"\n[source]\nmode = "mirror"\nmirror = "{tmp_path}"\n'
        + SMALL_DOMAINS.format(),
        encoding="utf-8",
    )
    return cfg


def test_build_release_flow_loads_the_config_and_reports_failures(tmp_path, monkeypatch):
    import flows.release
    from flows.deploy import build_release_flow

    calls = []

    def fake(cfg, names, release, version, *, allow_partial=False):
        calls.append((cfg.build.data_dir, names, release, version, allow_partial))
        from tasks.synthesize.outcome import DomainOutcome

        failed = (
            [DomainOutcome("gw", "academic_simple", "arxiv", "failed", error="boom")] if "gw" in names else []
        )
        path = None if failed and not allow_partial else Path(cfg.build.data_dir) / release / version
        return {"results": [], "failed": failed, "path": path, "stats": []}

    monkeypatch.setattr(flows.release, "build_and_publish", fake)
    cfg = _write_config(tmp_path)
    out = build_release_flow.fn(str(cfg), "small", "1.0.0", domains=["NVDA-10-Q"])
    assert out == {
        "release": str(tmp_path / "data" / "small" / "1.0.0"),
        "domains": ["NVDA-10-Q"],
        "failed": [],
    }
    assert calls[-1] == (tmp_path / "data", ["NVDA-10-Q"], "small", "1.0.0", False)
    with pytest.raises(RuntimeError, match=r"1 domain\(s\) failed\ndomain gw: boom$"):
        build_release_flow.fn(str(cfg), "small", "1.0.1")
    assert calls[-1][1] == ["NVDA-10-Q", "gw"]  # no domains = all of the config's
    out = build_release_flow.fn(str(cfg), "small", "1.0.2", allow_partial=True)
    assert out["failed"] == [{"domain": "gw", "error": "boom"}]


def test_refresh_release_flow_passes_kinds_and_fails_on_a_failed_domain(monkeypatch):
    import flows.refresh
    from flows.deploy import refresh_release_flow

    seen = []

    def fake(config, release, *, kinds=None):
        seen.append((config, release, kinds))
        status = "failed" if kinds == ["arxiv"] else "built"
        failed = [{"domain": "gw", "error": "boom"}] if status == "failed" else []
        return {"release": release, "status": status, "version": "0.2.0", "previous": "0.1.0",
                "new_snapshots": {}, "path": None, "failed": failed}  # fmt: skip

    monkeypatch.setattr(flows.refresh, "refresh_release", fake)
    assert refresh_release_flow.fn("c.toml", "demo", kinds=["edgar"])["status"] == "built"
    assert seen[-1] == ("c.toml", "demo", ["edgar"])
    with pytest.raises(RuntimeError, match="domain gw: boom"):
        refresh_release_flow.fn("c.toml", "demo", kinds=["arxiv"])
    refresh_release_flow.fn("c.toml", "demo")
    assert seen[-1] == ("c.toml", "demo", None)
