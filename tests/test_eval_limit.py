"""A smoke run on a few instances (issue 35, point 2): `--limit N` / `--instances ID,...` choose instances
deterministically and stratified by category (tasks/select.py); only those are generated, scored and
checked in a submission, and the leaderboard and manifest.json state the subset. Oracles: the category
counts and per-category hash order computed here from the demo release's instances.parquet."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from flows.cli import app
from schemas.config import CATEGORY_ORDER
from tasks.errors import FrameInputError
from tasks.release.evalkit import report_file_name
from tasks.select import select_instances
from tests.conftest import frame_env
from tests.test_score_openai_flow import FRAME


@pytest.fixture(scope="module")
def release(demo_release, tmp_path_factory) -> Path:
    """A copy of the demo release in a data folder of its own (generations and scores written beside it)."""
    rel = tmp_path_factory.mktemp("limit") / "data" / "releases" / "demo" / "0.1.0"
    shutil.copytree(demo_release, rel)
    return rel


def _rows(release: Path) -> list[tuple[str, str]]:
    df = pd.read_parquet(release / "instances.parquet", columns=["instance_id", "category"])
    return list(zip(df.instance_id, df.category, strict=True))


def _rank(instance_id: str) -> str:
    return hashlib.sha256(f"frame-select:{instance_id}".encode()).hexdigest()


def _expected_counts(sizes: Counter, order: list[str], n: int) -> Counter:
    """Round-robin counts in closed form: the highest level L every category fills up to (or holds all it
    has) within n, then one more for the first categories in CATEGORY_ORDER that still have instances."""
    level = max(k for k in range(max(sizes.values()) + 1) if sum(min(s, k) for s in sizes.values()) <= n)
    counts = Counter({c: min(sizes[c], level) for c in order})
    for c in [c for c in order if sizes[c] > level][: n - sum(counts.values())]:
        counts[c] += 1
    return +counts


def test_selection_is_stratified_deterministic_and_hash_ordered(release):
    rows = _rows(release)
    sizes = Counter(c for _, c in rows)
    order = [c for c in CATEGORY_ORDER if c in sizes]
    assert len(order) >= 3  # the demo has several categories: stratification is visible
    for n in range(1, len(rows)):
        got = select_instances(rows, n)
        assert got is not None and len(got.ids) == n and len(set(got.ids)) == n
        counts = Counter(dict(rows)[i] for i in got.ids)
        assert counts == _expected_counts(sizes, order, n)
        # within a category: the instances with the lowest sha256("frame-select:<id>")
        for cat, k in counts.items():
            mine = sorted(
                (i for i, c in rows if c == cat),
                key=_rank,
            )
            assert set(mine[:k]) <= set(got.ids)
        shuffled = rows[:]
        random.Random(n).shuffle(shuffled)
        assert select_instances(shuffled, n) == got  # no dependence on the table's order
    assert select_instances(rows, len(order)).ids == tuple(sorted(_first_of(rows, order)))
    assert select_instances(rows, len(rows)) is None and select_instances(rows) is None
    named = [rows[3][0], rows[0][0]]
    assert select_instances(rows, ids=named).ids == tuple(sorted(named))
    with pytest.raises(FrameInputError, match="--instances.*no/such"):
        select_instances(rows, ids=["no/such"])
    with pytest.raises(FrameInputError, match="--limit"):
        select_instances(rows, 0)


def _run(args: list[str], home: Path) -> subprocess.CompletedProcess:
    return subprocess.run([FRAME, *args], capture_output=True, text=True, env=frame_env(home), timeout=600)


def _first_of(rows: list[tuple[str, str]], categories: list[str]) -> set[str]:
    """Per category, the instance of the lowest selection hash (the oracle of --limit len(categories))."""
    return {min((i for i, c in rows if c == cat), key=_rank) for cat in categories}


def test_score_limit_generates_scores_checks_and_states_only_the_subset(release, tmp_path):
    rows = _rows(release)
    chosen = _first_of(rows, list(CATEGORY_ORDER[:2]))  # --limit 2: one of each of the first two categories
    sub = tmp_path / "submission"
    sub.mkdir()
    for iid in chosen:  # a submission of the chosen instances only
        (sub / f"{report_file_name(iid)}.md").write_text("# A report\n\nSubmitted.\n", encoding="utf-8")
    config = tmp_path / "eval.toml"
    config.write_text(
        '[systems.gold]\nkind = "builtin"\n[systems.copy-sample]\nkind = "builtin"\n'
        '[systems.outside]\nkind = "submission"\npath = "submission"\n',
        encoding="utf-8",
    )
    base = ["score", "--release", str(release), "--config", str(config), "--metrics", "text_edit_distance"]
    whole = CliRunner().invoke(app, [*base, "--dry-run"])  # the submission check runs before any estimate
    assert whole.exit_code == 2 and "missing" in whole.stderr  # without a subset: the others are missing
    out = tmp_path / "scores"
    res = _run([*base, "--limit", "2", "--bootstrap", "100", "--out", str(out)], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    scores = pd.read_parquet(out / "scores.parquet")
    assert set(scores.instance_id) == chosen and set(scores.system) == {"gold", "copy-sample", "outside"}
    gens = pd.read_parquet(
        release.parents[2] / "generations" / "demo" / "0.1.0" / "copy-sample" / "generations.parquet"
    )
    assert set(gens.instance_id) == chosen  # nothing generated for the others
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["subset"]["instance_ids"] == sorted(chosen)
    assert manifest["subset"]["limit"] == 2 and manifest["subset"]["of"] == len(rows)
    board = (out / "leaderboard.md").read_text(encoding="utf-8")
    line = f"Subset: 2 of {len(rows)} instances (--limit 2, stratified by category): ids "
    assert line + ", ".join(sorted(chosen)) in board


def test_generate_limit_and_bad_instance_ids(release):
    res = CliRunner().invoke(
        app, ["generate", "--release", str(release), "--system", "extractive", "--limit", "3"]
    )
    assert res.exit_code == 0, res.output
    gens = pd.read_parquet(
        release.parents[2] / "generations" / "demo" / "0.1.0" / "extractive" / "generations.parquet"
    )
    assert len(gens) == 3 and set(gens.instance_id) == set(select_instances(_rows(release), 3).ids)
    dry = ["score", "--release", str(release), "--systems", "gold,extractive", "--limit", "2", "--dry-run"]
    res = CliRunner().invoke(app, dry)
    assert res.exit_code == 0 and "demo/0.1.0, 2 instance(s)" in res.stdout, res.output  # the estimate too
    for cmd in (["generate", "--system", "extractive"], ["score", "--systems", "extractive"]):
        bad = CliRunner().invoke(app, [cmd[0], "--release", str(release), *cmd[1:], "--instances", "x/y"])
        assert bad.exit_code == 2 and bad.stderr.strip().splitlines() == [
            "frame: error: --instances: not an instance of the release: x/y"
        ], bad.stderr


def test_evolve_splits_keep_a_stratified_few_and_meta_judge_takes_the_flags(release):
    from flows.configs import split_subsets
    from tasks.evolve.splits import assign_splits

    columns = ["instance_id", "domain", "category"]
    instances = pd.read_parquet(release / "instances.parquet", columns=columns)
    splits = assign_splits(instances, release, 2, 2, 0)
    limited = split_subsets(splits, instances, 2, None)
    cat = dict(zip(instances.instance_id, instances.category, strict=True))
    for name, members in splits.instances.items():
        kept = limited.instances[name]
        assert set(kept) <= set(members) and len(kept) == min(2, len(members))
        # two categories in the split: one of each (stratified), else the two first by hash
        assert len({cat[i] for i in kept}) == min(2, len({cat[i] for i in members}))
    firsts = {name: members[0] for name, members in splits.instances.items()}
    assert split_subsets(splits, instances, None, ",".join(firsts.values())).instances == {
        name: [first] for name, first in firsts.items()
    }
    one = firsts["locked"]
    with pytest.raises(FrameInputError, match="--instances: none of the named instances is in the discovery"):
        split_subsets(splits, instances, None, one)  # the tuning splits would be left empty
    human = (
        Path(__file__).resolve().parents[1] / "data" / "annotations" / "demo-0.1.0" / "coverage" / "human.csv"
    )
    bad = CliRunner().invoke(
        app, ["meta", "judge", str(human), "--release", str(release), "--instances", "x/y"]
    )
    assert bad.exit_code == 2 and bad.stderr.startswith("frame: error: --instances: not an instance"), (
        bad.stderr
    )
