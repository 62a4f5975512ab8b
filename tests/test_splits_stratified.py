"""`frame split` stratifies its tuning splits (issue 34 point 7): on the demo's domains (configs/demo.toml:
4 categories in 2 rubric families) `--discovery 2 --validation 2` gives each tuning split one academic and
one financial domain, so a failure found on one family is validated on the same family; the locked split
keeps a domain of every category; a request that cannot be stratified is refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasks.errors import FrameInputError
from tasks.evolve.splits import assign_splits, splits_path, write_splits
from tests.conftest import ROOT, frame_env

FRAME = str(Path(sys.executable).with_name("frame"))


def demo_domains() -> dict[str, str]:
    """domain -> category, as the demo config lists them (the oracle below reads the category's prefix)."""
    cfg = tomllib.loads((ROOT / "configs" / "demo.toml").read_text(encoding="utf-8"))
    return {d["name"]: d["category"] for d in cfg["domains"]}


def family(category: str) -> str:
    return category.split("_")[0]  # academic_simple -> academic, financial_annual -> financial


def demo_instances(domains: dict[str, str] | None = None) -> pd.DataFrame:
    domains = domains or demo_domains()
    rows = [
        {"instance_id": f"{cat}/{dom}/t{i}->t{i + 1}", "domain": dom, "category": cat}
        for dom, cat in domains.items()
        for i in range(2)
    ]
    return pd.DataFrame(rows)


def test_the_demo_has_four_categories_in_two_families():
    cats = set(demo_domains().values())
    assert cats == {"academic_simple", "academic_complex", "financial_quarterly", "financial_annual"}
    assert list(demo_domains().values()).count("academic_complex") == 1  # it can only be locked


@pytest.mark.parametrize("seed", range(8))
def test_each_tuning_split_of_two_gets_one_academic_and_one_financial_domain(seed, tmp_path):
    cat = demo_domains()
    rel = tmp_path / "releases" / "demo" / "0.1.0"
    s = assign_splits(demo_instances(), rel, 2, 2, seed)
    assert s == assign_splits(demo_instances(), rel, 2, 2, seed)  # deterministic by seed
    for split in ("discovery", "validation"):
        assert sorted(family(cat[d]) for d in s.domains[split]) == ["academic", "financial"], s.domains
    assert {cat[d] for d in s.domains["locked"]} == set(cat.values())  # every category stays testable
    assert "exoplanets-and-host-stars" in s.domains["locked"]
    assert sorted(d for v in s.domains.values() for d in v) == sorted(cat)
    # what each split covers is recorded in splits.json
    written = json.loads(write_splits(rel, s).read_text(encoding="utf-8"))
    for split, doms in written["domains"].items():
        assert written["categories"][split] == sorted({cat[d] for d in doms})
        assert written["families"][split] == sorted({family(cat[d]) for d in doms})


def test_splits_large_enough_cover_every_category_that_can_spare_a_domain(tmp_path):
    cat = demo_domains()
    s = assign_splits(demo_instances(), tmp_path / "r" / "1", 3, 3, seed=5)
    # academic_complex has one domain (locked); each other category has three: one per split
    for split in ("discovery", "validation", "locked"):
        spare = {c for c in cat.values() if c != "academic_complex"} | (
            {"academic_complex"} if split == "locked" else set()
        )
        assert {cat[d] for d in s.domains[split]} == spare, (split, s.domains)


def test_one_family_release_may_tune_on_one_domain(tmp_path):
    one = {d: c for d, c in demo_domains().items() if c.startswith("financial")}
    s = assign_splits(demo_instances(one), tmp_path / "r" / "1", 1, 1, seed=0)
    assert len(s.domains["discovery"]) == len(s.domains["validation"]) == 1
    assert {one[d] for d in s.domains["locked"]} == {"financial_quarterly", "financial_annual"}


@pytest.mark.parametrize(
    ("d", "v", "flag", "words"),
    [
        (1, 2, "--discovery", "2 rubric families"),
        (2, 1, "--validation", "2 rubric families"),
        (3, 4, "--discovery/--validation", "one domain of each of the release's 4 categories"),
    ],
)
def test_impossible_requests_are_refused(d, v, flag, words, tmp_path):
    with pytest.raises(FrameInputError, match=words) as err:
        assign_splits(demo_instances(), tmp_path / "r" / "1", d, v, seed=0)
    assert err.value.where == flag


def test_a_family_too_small_to_feed_both_tuning_splits_is_refused(tmp_path):
    # academic: one simple domain and one complex one; both stay locked (one per category)
    few = {d: c for d, c in demo_domains().items() if c.startswith("financial")}
    few |= {"large-language-models": "academic_simple", "exoplanets-and-host-stars": "academic_complex"}
    with pytest.raises(FrameInputError, match="family academic has 2 domain"):
        assign_splits(demo_instances(few), tmp_path / "r" / "1", 2, 2, seed=0)


def write_release(root: Path) -> Path:
    rel = root / "releases" / "demo" / "0.1.0"
    rel.mkdir(parents=True)
    pq.write_table(pa.Table.from_pandas(demo_instances(), preserve_index=False), rel / "instances.parquet")
    return rel


def test_cli_refuses_in_one_line_and_prints_what_each_split_covers(tmp_path):
    rel = write_release(tmp_path)
    env = frame_env(tmp_path / "ph")
    base = [FRAME, "split", "--release", str(rel)]
    res = subprocess.run([*base, "--discovery", "1"], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 2 and res.stderr.strip().count("\n") == 0, res.stderr
    assert "--discovery" in res.stderr and "academic, financial" in res.stderr
    assert not splits_path(rel).exists()
    res = subprocess.run([*base, "--seed", "3"], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    lines = {ln.split(":", 1)[0]: ln for ln in res.stdout.splitlines()}
    assert "academic_simple" in lines["discovery"] and "financial_" in lines["discovery"]
    assert "academic_complex" in lines["locked"]
    assert json.loads(splits_path(rel).read_text())["families"]["validation"] == ["academic", "financial"]
