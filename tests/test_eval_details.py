"""Details of the evaluation commands that a user meets between the big points of issue 35: a smoke run
never truncates what a full run wrote, a model's report wrapped in chatter is still its report, the
repeat command of a written config survives a shell, and the viewer shows the samples a run scored."""

from __future__ import annotations

import shlex
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from tasks.generate.generation import Generation
from tasks.generate.runs import runs_folder, write_generations
from tasks.llm.replies import plain_markdown


def _release(tmp_path: Path) -> Path:
    rel = tmp_path / "data" / "releases" / "demo" / "0.1.0"
    rel.mkdir(parents=True)
    return rel


def test_a_limited_run_keeps_the_rows_of_the_instances_it_did_not_generate(tmp_path):
    rel = _release(tmp_path)
    full = [Generation(f"i{k}", f"# R{k}\n", {}, None) for k in range(4)]
    write_generations(rel, "sys", full)
    # a --limit run regenerates i1 (now failing) and i2: i0 and i3 keep their rows
    write_generations(
        rel,
        "sys",
        [Generation("i1", None, {}, "boom"), Generation("i2", "# new\n", {}, None)],
        keep_others=True,
    )
    rows = pq.read_table(runs_folder(rel, "sys") / "generations.parquet").to_pylist()
    got = {r["instance_id"]: (r["markdown"], r["error"]) for r in rows}
    assert got == {
        "i0": ("# R0\n", None),
        "i1": ("", "boom"),
        "i2": ("# new\n", None),
        "i3": ("# R3\n", None),
    }
    assert [r["instance_id"] for r in rows] == ["i0", "i1", "i2", "i3"]
    # a full run replaces the table whole, as before
    write_generations(rel, "sys", [Generation("i0", "# only\n", {}, None)])
    assert pq.read_table(runs_folder(rel, "sys") / "generations.parquet").num_rows == 1


def test_a_report_with_chatter_around_one_markdown_block_is_the_block():
    report = "# Quarterly report\n\n## Revenue\n\nRevenue rose 4% to $1.2 billion."
    for reply in (
        f"Here is the report:\n\n```markdown\n{report}\n```\n\nLet me know if you need changes.",
        f"```md\n{report}\n```",
        report,
    ):
        assert plain_markdown(reply, "report_markdown") == report
    # a report that itself shows a Markdown block keeps it: its own heading is outside the block
    own = "# Notes\n\nThe template:\n\n```markdown\n## Item\n```"
    assert plain_markdown(own, "report_markdown") == own
    # two blocks: no way to tell which is the report, the reply stays as it is
    two = "Draft A:\n```markdown\n# A\n```\nDraft B:\n```markdown\n# B\n```"
    assert plain_markdown(two, "report_markdown") == two


def test_the_repeat_command_of_a_written_config_survives_a_shell(tmp_path, monkeypatch):
    from flows.cli.models import repeat_command

    monkeypatch.chdir(tmp_path)
    ids = "financial_quarterly/GOOGL-10-Q/2023-09-30->2024-03-31,academic_simple/x/W1->W2"
    line = repeat_command(
        "score", tmp_path / "data" / "releases" / "demo" / "0.1.0", (None, ids), " --epochs 3"
    )
    words = shlex.split(line.format(config="config.toml"))
    assert words[words.index("--instances") + 1] == ids  # '->' is not a redirection
    assert words[words.index("--release") + 1] == "data/releases/demo/0.1.0"  # relative: no machine path
    assert words[words.index("--epochs") + 1] == "3"


def test_the_viewer_shows_the_first_sample_of_the_instances_the_run_scored():
    from tasks.view.load import _this_run

    gens = pd.DataFrame(
        {
            "instance_id": ["a", "a", "b", "c"],
            "epoch": [0, 1, 0, 0],
            "markdown": ["# a0", "# a1", "# b0", "# c0"],
        }
    )
    assert list(gens[_this_run(gens, {})]["markdown"]) == ["# a0", "# b0", "# c0"]
    subset = {"subset": {"instance_ids": ["a", "c"]}}
    assert list(gens[_this_run(gens, subset)]["markdown"]) == ["# a0", "# c0"]
    old = gens.drop(columns="epoch")  # a table written before --epochs existed
    assert list(old[_this_run(old, {})]["markdown"]) == ["# a0", "# a1", "# b0", "# c0"]
