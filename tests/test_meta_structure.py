"""`frame meta structure` (tasks/meta/structure.py, flows/meta.py) on demo instances: the grid of paper 000
Tables 2-4; its default row against StructureFamily scores fed to `frame align --rankings`; every
setting against a direct computation; one embedding pass for the whole grid; the CLI's outputs and
one-line errors. Embeddings come from the local OpenAI-compatible test server (fast, deterministic)."""

from __future__ import annotations

import csv
import io
import json
import random
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from flows.meta import meta_app
from schemas.projection import projection_for
from schemas.scoring import ScoreSettings
from tasks.generate.runs import GENERATIONS_SCHEMA
from tasks.meta import structure as ms
from tasks.score.align import ranking_agreement
from tasks.score.metric import Inputs, JudgeEnv
from tasks.score.structural_similarity import (
    PROJECTIONS,
    StructureFamily,
    flatten,
    make_node_similarity,
    node_fields,
    structural_similarity,
)
from tasks.score.tree import report_tree
from tests.llm_server import LLMTestServer, fast_settings

KEY_ENV = "FRAME_TEST_META_KEY"
EMBEDDER = "openai:meta-embed"
# Made-up human ranks of gold / copy-sample / extractive in four groups (1 = best; the last has a tie).
RANKS = ((1, 3, 2), (1, 2, 3), (2, 3, 1), (1, 2, 2))
SYSTEMS = ("gold", "copy-sample", "extractive")


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def release(demo_release) -> Path:
    """The demo release the session built from the current code (conftest), never the checkout's data/."""
    return demo_release


@pytest.fixture(scope="module")
def server():
    with LLMTestServer() as srv, pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY_ENV, "test-key")
        yield srv


def rankings_text(groups: list[str], systems=SYSTEMS, scores: dict | None = None) -> str:
    head = "group_id,system,human_rank" + (",score" if scores is not None else "")
    lines = [head]
    for g, ranks in zip(groups, RANKS, strict=True):
        for system, rank in zip(systems, ranks, strict=True):
            tail = f",{scores[(g, system)]!r}" if scores is not None else ""
            lines.append(f"{g},{system},{rank}{tail}")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def case(release, server, tmp_path_factory):
    """One demo instance per category x gold / copy-sample / extractive, ranked by RANKS; the grid run
    in-process with the embedder `frame score --embedder openai:...` would use, embed calls counted."""
    tmp = tmp_path_factory.mktemp("meta-structure")
    instances = pd.read_parquet(release / "instances.parquet").sort_values("instance_id")
    groups = list(instances.groupby("category").head(1)["instance_id"])[: len(RANKS)]
    path = tmp / "rankings.csv"
    path.write_text(rankings_text(groups), encoding="utf-8")
    rows = ms.load_rankings(path)
    gold, reports = ms.load_reports(release, rows, tmp / "no-generations", where=path)
    settings = fast_settings(server, KEY_ENV)
    env = JudgeEnv(ScoreSettings(embedder=EMBEDDER), None, tmp / "grid-cache", embed_llm=settings)
    calls: list[list[str]] = []

    def embed(texts):
        calls.append(list(texts))
        return env.embed(texts)

    before = len(server.embedding_requests)
    prepared = ms.prepare_pairs(rows, gold, reports, embed, StructureFamily(env).tree)
    after_prepare = len(server.embedding_requests)
    results = ms.evaluate_grid(prepared, ms.structure_grid(ms.default_setting(env.settings)))
    return SimpleNamespace(
        tmp=tmp, groups=groups, path=path, rows=rows, gold=gold, reports=reports, env=env, settings=settings,
        calls=calls, prepared=prepared, results=results, requests=server.embedding_requests[before:],
        after_prepare=after_prepare, after_grid=len(server.embedding_requests),
    )  # fmt: skip


# ---------------------------------------------------------------- the grid


def test_grid_is_paper_tables_2_to_4_one_factor_at_a_time():
    # an embedder without calibrated values grades with paper 000's choice
    d = ms.default_setting(ScoreSettings(embedder=EMBEDDER))
    assert (d.proj, d.delta, d.type_weight, d.gamma) == ("rbf", 0.10, 0.2, 0.0)
    grid = ms.structure_grid(d)
    by_table = {t: [r for r in grid if r.table == t] for t in ms.TABLES}
    assert [len(v) for v in by_table.values()] == [8, 5, 5]
    assert len({r.setting.key() for r in grid}) == 16  # the default is shared by the three tables
    for rows in by_table.values():
        assert [r.default for r in rows].count(True) == 1
    proj = [(r.setting.proj, r.setting.delta, r.setting.power_n) for r in by_table["projection"]]
    assert [p for p, _, _ in proj] == ["linear"] + ["power"] * 3 + ["rbf"] * 4
    assert [n for p, _, n in proj if p == "power"] == [3, 5, 7]
    assert [x for p, x, _ in proj if p == "rbf"] == [0.05, 0.10, 0.20, 0.30]
    assert {(r.setting.type_weight, r.setting.gamma) for r in by_table["projection"]} == {(0.2, 0.0)}
    assert [r.setting.type_weight for r in by_table["type_weight"]] == [0.1, 0.2, 0.3, 0.5, 0.7]
    assert {(r.setting.proj, r.setting.delta, r.setting.gamma) for r in by_table["type_weight"]} == {
        ("rbf", 0.10, 0.0)
    }
    assert [r.setting.gamma for r in by_table["depth"]] == [0.0, 0.3, 0.5, 1.0, 2.0]
    assert {(r.setting.proj, r.setting.type_weight) for r in by_table["depth"]} == {("rbf", 0.2)}
    assert by_table["projection"][5].cells == ("RBF", "δ = 0.10") and by_table["projection"][5].default


def test_grid_adds_the_calibrated_delta_beside_the_paper_s():
    calibrated = projection_for("minilm").delta  # schemas/projection.toml
    d = ms.default_setting()  # ScoreSettings' default embedder: MiniLM, with its calibrated delta
    assert (d.delta, d.type_weight) == (calibrated, 0.2) and calibrated not in (0.05, 0.10, 0.20, 0.30)
    rows = [r for r in ms.structure_grid(d) if r.table == "projection" and r.setting.proj == "rbf"]
    assert [r.setting.delta for r in rows] == sorted([0.05, 0.10, 0.20, 0.30, calibrated])
    assert [r.setting.delta for r in rows if r.default] == [calibrated]


def test_vector_projections_are_the_metric_s_projections():
    x = np.linspace(-1.0, 1.0, 81)
    for row in ms.structure_grid():
        s = row.setting
        scalar = [PROJECTIONS[s.proj](float(v), s.delta, s.power_n) for v in x]
        assert ms.project(x, s) == pytest.approx(scalar, abs=1e-14), s.name


# ---------------------------------------------------------------- acceptance: default row = frame align


def test_default_row_reproduces_frame_align_on_structure_family_scores(case, tmp_path):
    # the structure family as `frame score` runs it, with its own (empty) embedding cache
    env = JudgeEnv(ScoreSettings(embedder=EMBEDDER), None, tmp_path / "family-cache", embed_llm=case.settings)
    family = StructureFamily(env)
    scores = {}
    for r in case.rows:
        result = family.score(
            Inputs(r.group_id, case.reports[(r.group_id, r.system)], gold=case.gold[r.group_id])
        )
        scores[(r.group_id, r.system)] = result[0].value
    scored = tmp_path / "rankings-with-scores.csv"
    scored.write_text(rankings_text(case.groups, scores=scores), encoding="utf-8")
    expected = ranking_agreement(scored)  # what `frame align --rankings` prints
    assert expected["groups"] == len(RANKS) and expected["spearman_r"] is not None

    defaults = [r for r in case.results if r.row.default]
    assert [r.row.table for r in defaults] == list(ms.TABLES)
    for r in defaults:
        assert r.spearman_r == pytest.approx(expected["spearman_r"], abs=1e-12)
        assert r.kendall_tau == pytest.approx(expected["kendall_tau"], abs=1e-12)
        assert (r.groups, r.n) == (expected["groups"], expected["n"])
    grid_scores = ms.setting_scores(case.prepared, ms.default_setting(case.env.settings))
    assert grid_scores == pytest.approx([scores[(r.group_id, r.system)] for r in case.rows], abs=1e-12)
    # the score column of an align file is read and ignored
    assert ms.load_rankings(scored) == case.rows


# one setting of each kind off the default (the default itself: the test above)
CHECKED = (
    "linear w=0.2 gamma=0",
    "power n=7 w=0.2 gamma=0",
    "rbf delta=0.05 w=0.2 gamma=0",
    "rbf delta=0.1 w=0.7 gamma=0",
    "rbf delta=0.1 w=0.2 gamma=2",
)


def test_grid_settings_match_a_direct_computation(case):
    embed = case.env.embed  # the grid's cache: no new request
    trees = {md: report_tree(md) for md in {*case.gold.values(), *case.reports.values()}}
    grid = ms.structure_grid(ms.default_setting(case.env.settings))
    batched = ms.grid_scores(case.prepared, [row.setting for row in grid])
    by_name = {row.setting.name: got for row, got in zip(grid, batched, strict=True)}
    for name in CHECKED:
        s = next(row.setting for row in grid if row.setting.name == name)
        sim = make_node_similarity(embed, w=s.type_weight, proj=s.proj, delta=s.delta, n=s.power_n)
        direct = [
            structural_similarity(
                trees[case.gold[r.group_id]], trees[case.reports[(r.group_id, r.system)]], sim, s.gamma
            )
            for r in case.rows
        ]
        assert by_name[name].tolist() == pytest.approx(direct, abs=1e-12), name
    # the settings move the scores (else the tables would say nothing)
    assert np.ptp(batched, axis=0).max() > 0.01


def random_tree(rng: random.Random, size: int) -> dict:
    """A random ordered tree of `size` nodes (deep chains and wide fans both occur)."""
    nodes = [{"type": "report", "children": []}]
    for _ in range(size - 1):
        child = {"type": "text", "children": []}
        parent = nodes[-1] if rng.random() < 0.3 else rng.choice(nodes)
        parent["children"].append(child)
        nodes.append(child)
    return nodes[0]


def lookup(a, b, table: np.ndarray):
    """A node similarity reading `table` by the nodes' preorder positions in the flat trees a and b."""
    pos_a = {id(o): i for i, o in enumerate(a.objs)}
    pos_b = {id(o): j for j, o in enumerate(b.objs)}
    return lambda x, y: float(table[pos_a[id(x)], pos_b[id(y)]])


def test_batched_programme_equals_algorithm_1_on_random_trees():
    rng, nrng = random.Random(15), np.random.default_rng(15)
    gammas = np.array([0.0, 0.3, 2.0])
    for _ in range(40):
        a, b = flatten(random_tree(rng, rng.randint(1, 30))), flatten(random_tree(rng, rng.randint(1, 30)))
        sims = nrng.random((len(gammas), len(a), len(b)))
        got = ms.batched_similarity(a, b, sims, gammas)
        want = [structural_similarity(a, b, lookup(a, b, sims[k]), g) for k, g in enumerate(gammas)]
        assert got.tolist() == pytest.approx(want, abs=1e-12)


def test_embeddings_are_computed_once_for_the_whole_grid(case):
    assert len(case.calls) == 1  # one embed call, before any setting
    texts = case.calls[0]
    assert len(texts) == len(set(texts)) == case.prepared.texts
    expected = {
        t
        for md in {*case.gold.values(), *case.reports.values()}
        for node in flatten(report_tree(md)).objs
        for t in node_fields(node)
    }
    assert set(texts) == expected
    sent = [t for req in case.requests for t in req.body["input"]]
    assert sorted(sent) == sorted(texts)  # each distinct node text reached the endpoint once
    assert case.after_grid == case.after_prepare  # the 16 settings asked for nothing


# ---------------------------------------------------------------- the command


def write_generations(folder: Path, system: str, reports: dict[str, str]) -> None:
    rows = [
        {"instance_id": i, "system": system, "markdown": md, "metadata_json": "{}", "error": None}
        for i, md in sorted(reports.items())
    ]
    (folder / system).mkdir(parents=True)
    pq.write_table(
        pa.Table.from_pylist(rows, schema=GENERATIONS_SCHEMA), folder / system / "generations.parquet"
    )


def cli_env(case, tmp_path: Path, server) -> dict[str, str]:
    return {
        "FRAME_LLM_BASE_URL": server.base_url,
        "OPENAI_API_KEY": "test-key",  # the default api_key_env of the FRAME_LLM_* endpoint
        "FRAME_CACHE_DIR": str(tmp_path / "cache"),
    }


def test_cli_prints_tables_json_and_writes_csv(case, release, server, tmp_path):
    # extractive's reports stored under another name: only the generations folder can provide them;
    # copy-sample is not stored: a builtin, generated in-process
    gens = tmp_path / "generations"
    write_generations(gens, "stored", {g: case.reports[(g, "extractive")] for g in case.groups})
    rankings = tmp_path / "rankings.csv"
    rankings.write_text(rankings_text(case.groups, ("gold", "copy-sample", "stored")), encoding="utf-8")
    out = tmp_path / "out"
    args = ["structure", "--rankings", str(rankings), "--release", str(release), "--generations", str(gens)]
    args += ["--embedder", EMBEDDER]
    runner = CliRunner(env=cli_env(case, tmp_path, server))
    res = runner.invoke(meta_app, [*args, "--json", "--out", str(out)])
    assert res.exit_code == 0, res.stderr
    data = json.loads(res.stdout)
    assert {t: len(v) for t, v in data["tables"].items()} == {"projection": 8, "type_weight": 5, "depth": 5}
    assert (data["groups"], data["reports"], data["texts"], data["settings"]) == (
        4,
        12,
        case.prepared.texts,
        16,
    )
    want = {r.row.setting.name: r for r in case.results}
    for row in (row for rows in data["tables"].values() for row in rows):
        assert row["spearman_r"] == pytest.approx(want[row["setting"]].spearman_r, abs=1e-6)
        assert row["kendall_tau"] == pytest.approx(want[row["setting"]].kendall_tau, abs=1e-6)
    table = list(csv.DictReader(io.StringIO((out / "structure.csv").read_text(encoding="utf-8"))))
    assert len(table) == 18 and list(table[0]) == list(ms.CSV_COLUMNS)
    flat = [row for rows in data["tables"].values() for row in rows]
    assert [float(r["spearman_r"]) for r in table] == [r["spearman_r"] for r in flat]
    assert [r["delta"] for r in table[:2]] == ["", ""]  # linear and power read no delta

    res = runner.invoke(meta_app, args)
    assert res.exit_code == 0, res.stderr
    for label in ("Table 2: projection function", "Table 3: type weight", "Table 4: depth adjustment"):
        assert label in res.stdout
    assert "δ = 0.10 *" in res.stdout and "16 settings" in res.stdout


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "file not found"),
        ("group_id,system,score\ng,gold,1\n", "missing column(s) human_rank"),
        ("group_id,system,human_rank\n{g},gold,first\n", "human_rank 'first' is not a finite number"),
        ("group_id,system,human_rank\n{g},gold,1\n{g},gold,2\n", "row at line 3: duplicate system 'gold'"),
        (
            "group_id,system,human_rank\nno/such->instance,gold,1\n",
            "group_id 'no/such->instance' is no instance",
        ),
        ("group_id,system,human_rank\n{g},gold,1\n{g},mystery,2\n", "line 3: no report of system 'mystery'"),
    ],
)
def test_cli_bad_rankings_are_one_line(case, release, tmp_path, content, message):
    path = tmp_path / "rankings.csv"
    if content is not None:
        path.write_text(content.format(g=case.groups[0]), encoding="utf-8")
    args = ["structure", "--rankings", str(path), "--release", str(release), "--generations", str(tmp_path)]
    res = CliRunner().invoke(meta_app, args)
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("frame: error: ") and str(path) in lines[0]
    assert message in lines[0]


def test_cli_bad_embedder_is_one_line(case, release):
    args = ["structure", "--rankings", str(case.path), "--release", str(release), "--embedder", "word2vec"]
    res = CliRunner().invoke(meta_app, args)
    assert res.exit_code == 2
    assert (
        res.stderr.strip()
        == "frame: error: --embedder: must be 'minilm' or 'openai:<model>' (got 'word2vec')"
    )


def test_cli_not_a_release_is_one_line(case, tmp_path):
    res = CliRunner().invoke(
        meta_app, ["structure", "--rankings", str(case.path), "--release", str(tmp_path)]
    )
    assert res.exit_code == 2
    assert (
        res.stderr.strip()
        == f"frame: error: {tmp_path / 'instances.parquet'}: missing: not a frame release folder"
    )
