"""`frame refresh`, `frame status` and the data-folder lock, on small real configs (offline backend)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import CORPUS, SMALL_DOMAINS, frame_env

pytestmark = pytest.mark.skipif(not (CORPUS / "edgar").is_dir(), reason="shared corpus not found")

FRAME = str(Path(sys.executable).with_name("frame"))
HEAD = """
[build]
data_dir = "{data}"
[run]
lock_timeout_s = {lock_timeout}
[source]
mode = "mirror"
mirror = "{corpus}"
"""
W2 = '  {{ label = "W2", start = "2022-07-01", end = "2023-02-28" }},\n'
W3 = '  {{ label = "W3", start = "2023-03-01", end = "2024-04-30" }},\n'


def config(tmp: Path, name: str, *, extra_window: bool = False, lock_timeout: float = 3600) -> Path:
    domains = SMALL_DOMAINS.replace(W2, W2 + W3) if extra_window else SMALL_DOMAINS
    path = tmp / name
    path.write_text(
        (HEAD + domains).format(data=tmp / "data", corpus=CORPUS, lock_timeout=lock_timeout), encoding="utf-8"
    )
    return path


def frame(args: list[str], home: Path, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [FRAME, *args], capture_output=True, text=True, env=frame_env(home), timeout=900, **kw
    )


def run_json(data: Path) -> dict:
    return json.loads((data / "runs" / "latest.json").read_text(encoding="utf-8"))


def release_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def refreshed(tmp_path_factory) -> dict:
    """Build 0.1.0 of the two small domains, then refresh with one arXiv window more, then refresh again."""
    tmp = tmp_path_factory.mktemp("refresh")
    home = tmp / "prefect"
    base, grown = config(tmp, "base.toml"), config(tmp, "grown.toml", extra_window=True)
    out: dict = {"tmp": tmp, "data": tmp / "data", "home": home, "grown": grown}
    res = frame(["build", "--config", str(base), "--release", "small", "--version", "0.1.0"], home)
    assert res.returncode == 0, res.stderr[-3000:]
    t0 = time.monotonic()
    out["refresh"] = frame(["refresh", "--config", str(grown), "--release", "small", "--json"], home)
    out["refresh_s"] = time.monotonic() - t0
    out["refresh_run"] = run_json(tmp / "data")
    out["again"] = frame(["refresh", "--config", str(grown), "--release", "small", "--json"], home)
    return out


def _summary(res: subprocess.CompletedProcess) -> dict:
    assert res.returncode == 0, res.stderr[-3000:]
    return json.JSONDecoder().raw_decode(res.stdout, res.stdout.index("{\n"))[0]


def test_refresh_builds_only_the_new_snapshot(refreshed):
    s = _summary(refreshed["refresh"])
    assert s["status"] == "built" and (s["previous"], s["version"]) == ("0.1.0", "0.2.0")
    assert s["new_snapshots"] == {"gw": ["W3"]}
    run = refreshed["refresh_run"]
    ran = {(x["domain"], x["snapshot"]) for x in run["steps"] if x["status"] == "ran"}
    assert ran == {("gw", "W3")}, run["steps"]
    # The unchanged filing domain is served whole from one cache entry, the grown one step by step.
    domains = {d["domain"]: d for d in run["domains"]}
    assert domains["NVDA-10-Q"]["cached"] and not domains["gw"]["cached"]
    cached = {(x["domain"], x["snapshot"], x["step"]) for x in run["steps"] if x["status"] == "cached"}
    assert {
        ("gw", "W1", "structure"),
        ("gw", "W2", "fill"),
        ("NVDA-10-Q", "2025-07-27", "validate"),
    } <= cached
    assert run["totals"]["steps_failed"] == 0 and run["totals"]["llm_calls"] == 0
    print(f"refresh wall {refreshed['refresh_s']:.1f} s (flow {run['wall_s']:.1f} s)")


def test_refreshed_release_adds_one_instance_and_says_so_in_its_card(refreshed):
    rel = refreshed["data"] / "releases" / "small"
    verify = frame(["release", "verify", str(rel / "0.2.0")], refreshed["home"])
    assert verify.returncode == 0, verify.stdout + verify.stderr
    diff = frame(["release", "diff", str(rel / "0.1.0"), str(rel / "0.2.0"), "--json"], refreshed["home"])
    d = json.loads(diff.stdout)
    inst = d["tables"]["instances"]
    assert inst["added"] == ["academic_simple/gw/W2->W3"] and inst["removed"] == [] and inst["changed"] == 0
    assert d["tables"]["reports"]["added"] == ["gw/W3"] and d["tables"]["reports"]["changed"] == 0
    card = (rel / "0.2.0" / "README.md").read_text(encoding="utf-8")
    changes = card[card.index("## Changes") :]
    assert "Changes from small 0.1.0 to small 0.2.0" in changes and "`academic_simple/gw/W2->W3`" in changes
    # The effective config of the version is kept: what was built.
    eff = json.loads((refreshed["data"] / "refresh" / "small" / "0.2.0.json").read_text(encoding="utf-8"))
    gw = next(x for x in eff["domains"] if x["name"] == "gw")
    assert [w["label"] for w in gw["windows"]] == ["W1", "W2", "W3"]


def test_refresh_with_nothing_new_writes_no_version(refreshed):
    s = _summary(refreshed["again"])
    assert s["status"] == "up-to-date" and s["version"] == "0.2.0" and s["new_snapshots"] == {}
    assert sorted(p.name for p in (refreshed["data"] / "releases" / "small").iterdir() if p.is_dir()) == [
        "0.1.0",
        "0.2.0",
    ]


def test_refresh_never_drops_released_snapshots(refreshed):
    """A config that lost a released filing period still plans it (a release only grows); a lost arXiv
    window, whose dates the release cannot tell, and a lost domain are refused in one line."""
    grown = refreshed["grown"].read_text(encoding="utf-8")
    fewer = refreshed["tmp"] / "fewer-periods.toml"
    fewer.write_text(grown.replace('periods = ["2023-07-30", "2025-07-27"]', 'periods = ["2023-07-30"]'))
    res = frame(["refresh", "--config", str(fewer), "--release", "small", "--dry-run"], refreshed["home"])
    assert res.returncode == 0 and json.loads(res.stdout)["up_to_date"], res.stdout + res.stderr

    no_w3 = frame(
        [
            "refresh",
            "--config",
            str(config(refreshed["tmp"], "base.toml")),
            "--release",
            "small",
            "--dry-run",
        ],
        refreshed["home"],
    )
    assert no_w3.returncode == 2 and len(no_w3.stderr.strip().splitlines()) == 1, no_w3.stderr
    assert "'W3'" in no_w3.stderr and "domains.gw" in no_w3.stderr

    only_gw = refreshed["tmp"] / "only-gw.toml"
    only_gw.write_text(
        grown[: grown.index("[[domains]]")] + grown[grown.index('[[domains]]\nkind = "arxiv"') :]
    )
    res = frame(["refresh", "--config", str(only_gw), "--release", "small", "--dry-run"], refreshed["home"])
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert "NVDA-10-Q" in res.stderr and "no longer" in res.stderr


def test_status_prints_the_last_build(refreshed):
    res = frame(["status", "--config", str(refreshed["grown"])], refreshed["home"])
    assert res.returncode == 0, res.stderr
    assert "last build ok" in res.stdout and "W3" in res.stdout and "cached" in res.stdout
    as_json = json.loads(
        frame(["status", "--config", str(refreshed["grown"]), "--json"], refreshed["home"]).stdout
    )
    assert as_json["run_id"] == run_json(refreshed["data"])["run_id"]
    empty = frame(["status", "--data", str(refreshed["tmp"] / "nowhere")], refreshed["home"])
    assert empty.returncode == 1 and "no build has run" in empty.stderr


def test_discovery_dry_run_finds_the_next_window(tmp_path):
    """An arXiv domain with window_months finds the mirror's next full window; --today bounds it."""
    cfg = config(tmp_path, "disc.toml")
    text = cfg.read_text(encoding="utf-8").replace(W2.replace("{{", "{").replace("}}", "}"), "")
    text = text.replace("papers_per_window = 3\n", "papers_per_window = 3\nwindow_months = 8\n")
    cfg.write_text(text, encoding="utf-8")
    res = frame(
        ["refresh", "--config", str(cfg), "--release", "disc", "--dry-run", "--today", "2026-01-01"], tmp_path
    )
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    assert plan["version"] == "0.1.0" and plan["new_snapshots"]["gw"] == ["W1", "W2"]
    early = frame(
        ["refresh", "--config", str(cfg), "--release", "disc", "--dry-run", "--today", "2023-02-28"], tmp_path
    )
    assert json.loads(early.stdout)["new_snapshots"]["gw"] == ["W1"]  # W2 ends that day: not over yet
    bad = frame(["refresh", "--config", str(cfg), "--release", "disc", "--today", "yesterday"], tmp_path)
    assert bad.returncode == 2 and "--today" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_second_build_on_the_same_data_folder_waits_then_fails_clearly(tmp_path):
    """While the data folder's lock is held, a build waits; past lock_timeout_s it fails in one line
    naming the holder and writes nothing."""
    from tasks.locks import data_folder_lock

    cfg = config(tmp_path, "locked.toml", lock_timeout=2)
    with data_folder_lock(tmp_path / "data", 0):
        res = frame(["build", "--config", str(cfg), "--release", "lk", "--version", "0.1.0"], tmp_path / "ph")
    assert res.returncode == 2, res.stdout + res.stderr
    line = res.stderr.strip().splitlines()[-1]
    assert "frame: error:" in line and "build.lock" in line and f"pid {os.getpid()}" in line, res.stderr
    assert "waiting up to 2 s" in res.stderr
    assert not (tmp_path / "data" / "releases").exists() and not (tmp_path / "data" / "reports").exists()


def test_two_builds_at_once_give_one_intact_release(tmp_path):
    """Two `frame build` of the same version on one data folder started together: one waits for the
    other, both succeed, and the release verifies and equals a build made alone."""
    cfg = config(tmp_path, "pair.toml")
    args = [FRAME, "build", "--config", str(cfg), "--release", "pair", "--version", "0.1.0"]
    env = frame_env(tmp_path / "ph")
    procs = [subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)]
    time.sleep(1.0)
    procs.append(subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=900) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
    assert sum("waiting up to" in err for _, err in outs) == 1, [err[-500:] for _, err in outs]
    release = tmp_path / "data" / "releases" / "pair" / "0.1.0"
    verify = frame(["release", "verify", str(release)], tmp_path / "ph")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert not list((tmp_path / "data" / "releases" / "pair").glob(".tmp-*"))
    # The second build found everything cached and the identical release in place.
    assert run_json(tmp_path / "data")["totals"]["steps_ran"] == 0
