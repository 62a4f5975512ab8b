"""A huge skill file given to `frame evolve` (issue 32, point 10): refused up front in one short line naming
the file, its size and the word budget, nothing evolved or evaluated; and no error ever prints a flow run's
parameters (Prefect's server refuses parameters over 512 KiB and quotes them all in its reply)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from flows.results import bounded_parameters, short_error
from tasks.evolve.skill import MAX_RULE_LINE, max_skill_file_bytes, parse_skill, read_skill
from tests.conftest import frame_env
from tests.test_evolve_flow import FRAME, write_release

RULE = (
    "- When a section of the report needs figures: copy them from the table with unit and scale. "
    "Check: each figure matches its table cell.\n"
)
CONFIG = '[systems.extractive]\nkind = "builtin"\n\n[evolve]\nrounds = 1\nsupport = 1\nbootstrap = 100\n'


def _files(root: Path) -> set[Path]:
    return {p.relative_to(root) for p in root.rglob("*") if p.is_file()}


def test_a_5_mb_skill_is_refused_up_front_in_one_short_line_and_nothing_is_written(tmp_path):
    rel = write_release(tmp_path, set())
    env = frame_env(tmp_path / "ph")
    split = [FRAME, "split", "--release", str(rel), "--discovery", "2", "--validation", "1"]
    assert subprocess.run(split, capture_output=True, env=env, timeout=120).returncode == 0
    cfg = tmp_path / "eval.toml"
    cfg.write_text(CONFIG, encoding="utf-8")
    big = tmp_path / "big.md"
    big.write_text(
        "# Report-writing skill\n\n## Write\n\n" + RULE * (5_000_000 // len(RULE)), encoding="utf-8"
    )
    assert big.stat().st_size >= 4_900_000
    data = tmp_path / "data"
    before = _files(data)
    args = [FRAME, "evolve", "--release", str(rel), "--config", str(cfg), "--systems", "extractive"]
    for flag in ("--evaluate", "--skill"):  # the locked evaluation of K*, and the loop from K0
        res = subprocess.run([*args, flag, str(big)], capture_output=True, text=True, env=env, timeout=300)
        assert res.returncode == 2, res.stderr[-2000:]
        assert len(res.stderr) < 2000 and res.stderr.count("\n") == 1, res.stderr[-2000:]
        line = res.stderr.strip()
        assert line.startswith(f"frame: error: {big}: skill of {big.stat().st_size:,} bytes"), line
        assert "over the skill budget of 350 words ([evolve] budget_words" in line, line
        assert not res.stdout.strip(), res.stdout[-2000:]
        # nothing evolved, generated, scored or evaluated (only the command's log file)
        assert {p for p in _files(data) - before if p.parts[0] != "logs"} == set()


def test_a_skill_over_the_budget_is_refused_by_its_size_unread_or_by_its_words_once_parsed(tmp_path):
    big = tmp_path / "big.md"
    big.write_text("## Write\n" + RULE * 40_000, encoding="utf-8")  # 5.5 MB
    size = big.stat().st_size
    assert size > max_skill_file_bytes(350)
    with pytest.raises(
        ValueError, match=rf"^{re.escape(str(big))}: skill of {size:,} bytes: over the skill budget"
    ):
        read_skill(big, budget_words=350)
    assert parse_skill("## Write\n" + RULE, "k.md", budget_words=350).words == 22
    with pytest.raises(
        ValueError, match=r"^k\.md: skill of 144 bytes, 22 words: over the skill budget of 20 words"
    ):
        parse_skill("## Write\n" + RULE, "k.md", budget_words=20)  # the rules' own words, once parsed
    # a line longer than any rule can be: refused before the (quadratic) rule pattern runs
    with pytest.raises(
        ValueError, match=rf"k\.md:2: a rule line of 5,000,00\d characters \(at most {MAX_RULE_LINE:,}\)"
    ):
        parse_skill("## Write\n- When " + "a: b " * 1_000_000, "k.md")


def test_flow_parameters_stay_under_the_server_limit_and_errors_never_quote_them():
    skill = "x" * 2_000_000
    stored = bounded_parameters(
        {"job": {"name": "r1"}, "skill": skill, "k": 3}, {"skill": skill}, limit=524_288
    )
    assert stored["job"] == {"name": "r1"} and stored["k"] == 3
    assert stored["skill"] == "<str: 2,000,002 bytes as JSON, too large to store with the flow run>"
    small = {"job": {"name": "r1"}}
    assert bounded_parameters(small, small, limit=524_288) is small
    refusal = RuntimeError(
        "Client error '422 Unprocessable Entity' for url 'http://127.0.0.1:1/api/flow_runs/' - Response: "
        "{'msg': 'Value error, Flow run parameters must be less than 524,288 bytes when serialized (got "
        f"6,334,955 bytes).', 'input': {{'skill': '{skill}'}}}}"
    )
    short = short_error(refusal)
    assert short is not None and len(str(short)) < 300 and "x" * 50 not in str(short)
    assert "less than 524,288 bytes when serialized (got 6,334,955 bytes)" in str(short)
    long = short_error(ValueError("y" * 100_000))
    assert long is not None and len(str(long)) < 600 and "99,500 more characters not shown" in str(long)
    assert short_error(ValueError("a short message")) is None
