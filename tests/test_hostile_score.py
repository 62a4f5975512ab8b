"""`frame score` when a requested system produces nothing (issue 32, point 8), through the CLI as a user runs
it: every generation of the system fails, its failures are recorded per instance, the other systems are
scored, every output and the manifest are written, leaderboard.md says which system is left out and why, and
the command exits 1 with a last line naming the system and its first error. A submission larger than
Prefect's 512 KiB flow-parameter limit is scored like any other (its reports are a flow parameter)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

from tests.conftest import frame_env
from tests.test_score_openai_flow import FRAME, S, write_release

IID = "financial_quarterly/ACME-10-Q/t1->t2"
OUTPUTS = ("scores.parquet", "evidence.parquet", "leaderboard.md", "leaderboard.csv", "manifest.json")


def _score(tmp_path: Path, config: str) -> tuple[subprocess.CompletedProcess, Path]:
    rel = write_release(tmp_path)
    cfg = tmp_path / "eval.toml"
    cfg.write_text(config, encoding="utf-8")
    args = [FRAME, "score", "--release", str(rel), "--config", str(cfg), "--metrics", "structure"]
    res = subprocess.run(args, capture_output=True, text=True, env=frame_env(tmp_path / "ph"), timeout=600)
    return res, tmp_path / "data" / "scores" / "tiny" / "1.0.0"


def _last_line(res: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    return res.stderr.strip().splitlines()[-1]


def test_a_system_whose_every_generation_fails_is_named_left_out_and_the_others_are_scored(tmp_path):
    (tmp_path / "boom.py").write_text(
        "import sys\nprint('model server unreachable', file=sys.stderr)\nsys.exit(1)\n", encoding="utf-8"
    )
    # a submission over Prefect's parameter limit (the reports travel with the systems): scored all the same
    big = S + "\n## Appendix\n\n" + "The quarter's filings were reviewed in full. " * 16000
    assert len(big) > 600_000
    (tmp_path / "big.jsonl").write_text(json.dumps({"instance_id": IID, "markdown": big}) + "\n")
    py = Path(sys.executable).as_posix()
    res, out = _score(
        tmp_path,
        '[systems.copy-sample]\nkind = "builtin"\n\n'
        '[systems.big]\nkind = "submission"\npath = "big.jsonl"\n\n'
        f'[systems.boom]\nkind = "command"\ncommand = ["{py}", "boom.py"]\n',
    )
    assert res.returncode == 1, res.stderr[-3000:]
    last = _last_line(res)
    assert last.startswith(f"frame: error: boom: generated 0/1: {IID}: "), last
    assert "exited with code 1" in last and "model server unreachable" in last, last
    assert f"scores: {out}" in res.stdout
    # every output and the manifest are written; the other systems are scored
    assert all((out / f).is_file() for f in OUTPUTS)
    scores = pd.read_parquet(out / "scores.parquet")
    assert set(scores.system) == {"copy-sample", "big"} and scores.value.notna().all()
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["systems"] == ["copy-sample", "big", "boom"]
    assert manifest["unscored_systems"]["boom"]["failed"] == 1
    assert manifest["unscored_systems"]["boom"]["first_instance"] == IID
    (failure,) = manifest["generation_failures"]
    assert failure["system"] == "boom" and failure["instance_id"] == IID
    assert "model server unreachable" in failure["error"]
    gens = pd.read_parquet(
        tmp_path / "data" / "generations" / "tiny" / "1.0.0" / "boom" / "generations.parquet"
    )
    assert gens.set_index("instance_id").loc[IID, "error"] == failure["error"]
    # the leaderboard says which system is left out and why, and ranks the others
    board = (out / "leaderboard.md").read_text(encoding="utf-8")
    assert "**Not scored**" in board and f"- boom: 1 of 1 generation(s) failed, first: {IID}:" in board
    table = [ln for ln in board.splitlines() if ln.startswith("|")]
    assert "copy-sample" in table[0] and "big" in table[0] and "boom" in table[0]  # its column, no scores
    assert set(pd.read_csv(out / "leaderboard.csv").system) == {"copy-sample", "big"}


def test_when_no_system_produces_a_report_the_outputs_are_still_written(tmp_path):
    """The case that used to stop with "scores lacks column(s)" and no manifest: the only system, a program
    that prints nothing, fails every generation."""
    (tmp_path / "quiet.py").write_text("pass\n", encoding="utf-8")
    py = Path(sys.executable).as_posix()
    res, out = _score(tmp_path, f'[systems.quiet]\nkind = "command"\ncommand = ["{py}", "quiet.py"]\n')
    assert res.returncode == 1, res.stderr[-3000:]
    last = _last_line(res)
    assert last.startswith(f"frame: error: quiet: generated 0/1: {IID}: "), last
    assert "printed nothing" in last and "lacks column" not in res.stderr
    assert all((out / f).is_file() for f in OUTPUTS)
    assert pd.read_parquet(out / "scores.parquet").empty
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert set(manifest["unscored_systems"]) == {"quiet"} and manifest["rows"] == {"scores": 0, "evidence": 0}
    assert [f["system"] for f in manifest["generation_failures"]] == ["quiet"]
    board = (out / "leaderboard.md").read_text(encoding="utf-8")
    assert "_No scores._" in board and "- quiet: 1 of 1 generation(s) failed" in board
