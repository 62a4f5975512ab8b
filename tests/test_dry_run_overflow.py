"""`--dry-run` names the requests whose expected reply would pass their role's output budget (issue 42,
point 2): output tokens are estimated uncapped. The oracle is the reference release itself: a structure
reply is the stored plan as JSON, a one-shot report is Y, counted here with o200k_base."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from schemas.release_rows import structure_from_row
from tasks.tokens import count_tokens
from tests.conftest import CORPUS, frame_env

pytestmark = pytest.mark.skipif(not (CORPUS / "edgar").is_dir(), reason="shared corpus not found")

FRAME = str(Path(sys.executable).with_name("frame"))
DOMAINS = ("AAPL-10-K", "NVDA-10-Q", "GOOGL-10-K")


def _frame(args: list[str], tmp: Path) -> str:
    res = subprocess.run(
        [FRAME, *args], capture_output=True, text=True, env=frame_env(tmp / "ph"), timeout=600
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


def _without_questions(node: dict) -> dict:
    return {
        k: [_without_questions(c) for c in v] if k == "children" else v
        for k, v in node.items()
        if k != "questions"
    }


def _plan_tokens(release: Path) -> dict[str, int]:
    """Tokens of each first-snapshot plan of DOMAINS as a structure reply holds it (no questions)."""
    reports = {r["report_id"]: r for r in pq.read_table(release / "reports.parquet").to_pylist()}
    out = {}
    for row in pq.read_table(release / "structures.parquet").to_pylist():
        rid = row["report_id"]
        if rid.split("/")[0] not in DOMAINS:
            continue
        s = structure_from_row(row)
        # a structure reply holds no questions (they are the next role's): no "questions" key at all
        data = {
            "title": s.title,
            "sections": [n.model_dump(mode="json", exclude={"questions"}) for n in s.nodes],
        }
        data["sections"] = [_without_questions(n) for n in data["sections"]]
        out[rid] = count_tokens(json.dumps(data, ensure_ascii=False, indent=2))
        assert rid in reports
    return out


def test_build_dry_run_names_the_structure_calls_that_would_overflow(demo_release, tmp_path):
    tmp = tmp_path
    sizes = _plan_tokens(demo_release)
    budget = int(statistics.median(sizes.values()))
    config = (Path(__file__).parents[1] / "configs" / "demo.toml").read_text()
    config = config.replace('data_dir = "../data"', f'data_dir = "{tmp / "data"}"')
    config = config.replace('mirror = "../../shared/corpus"', f'mirror = "{CORPUS}"')
    budgets = f"{{ structure_free = {budget}, structure_restricted = {budget} }}"
    llm = '[llm]\nbackend = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
    llm += f"max_output_tokens_by_role = {budgets}\n\n"
    (tmp / "c.toml").write_text(config.replace("[source]", llm + "[source]", 1))
    args = ["build", "--config", str(tmp / "c.toml"), "--release", "x", "--version", "1.0.0", "--dry-run"]
    for d in DOMAINS:
        args += ["--domain", d]
    out = _frame([*args, "--reference", str(demo_release)], tmp)
    named = set()
    for role in ("structure_free", "structure_restricted"):
        line = next((ln for ln in out.splitlines() if f"{role} request(s) expected past" in ln), "")
        named |= {m.group(1) for m in re.finditer(r"([\w.-]+/[\w.-]+) \(\d", line)}
    largest, smallest = max(sizes, key=sizes.get), min(sizes, key=sizes.get)
    # the estimate's replies are these plans with sources mapped onto G: within a few tokens of them
    assert largest in named and smallest not in named, (named, sizes, budget)
    assert {r for r, n in sizes.items() if n > 1.05 * budget} <= named
    assert not {r for r, n in sizes.items() if n < 0.95 * budget} & named
    assert f"structure_free {budget:,}" in out  # the budgets are stated


def test_build_dry_run_with_the_role_budgets_expects_no_overflow(demo_release, tmp_path):
    tmp = tmp_path
    sizes = _plan_tokens(demo_release)
    config = (Path(__file__).parents[1] / "configs" / "demo.toml").read_text()
    config = config.replace('data_dir = "../data"', f'data_dir = "{tmp / "data"}"')
    config = config.replace('mirror = "../../shared/corpus"', f'mirror = "{CORPUS}"')
    llm = '[llm]\nbackend = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n\n'
    (tmp / "c.toml").write_text(config.replace("[source]", llm + "[source]", 1))
    args = ["build", "--config", str(tmp / "c.toml"), "--release", "x", "--version", "1.0.0", "--dry-run"]
    out = _frame([*args, "--domain", "GOOGL-10-K", "--reference", str(demo_release)], tmp)
    assert max(sizes.values()) < 8192  # the default structure budget holds every demo plan
    assert "No request is expected to reply past its role's output budget." in out
    assert "o200k_base" in out and "llm.token_margin" in out  # the tokenizer assumption is stated


def test_score_dry_run_names_the_one_shot_reports_that_would_overflow(demo_release, tmp_path):
    tmp = tmp_path
    inst = pq.read_table(demo_release / "instances.parquet").to_pylist()
    sizes = {
        i["instance_id"]: count_tokens(
            json.dumps({"report_markdown": i["target_markdown"]}, ensure_ascii=False)
        )
        for i in inst
    }
    budget = int(statistics.median(sizes.values()))
    (tmp / "e.toml").write_text(
        '[systems.gold]\nkind = "builtin"\n'
        '[systems.oneshot]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
        f"max_output_tokens = {budget}\n"
    )
    out = _frame(
        [
            "score",
            "--release",
            str(demo_release),
            "--config",
            str(tmp / "e.toml"),
            "--metrics",
            "structure",
            "--dry-run",
        ],
        tmp,
    )
    line = next(ln for ln in out.splitlines() if "oneshot request(s) expected past" in ln)
    count = int(re.search(r"would overflow: (\d+) oneshot", line).group(1))
    assert count == sum(n > budget for n in sizes.values())
    assert max(sizes, key=sizes.get) in line
