"""The pure parts of skill evolution: splits by domain, skills as Markdown, the offline optimizer and critic,
the acceptance rule, skills given to systems, `extractive` honouring the rules it can check."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from schemas.evaluation import BuiltinSystem, CommandSystem, OpenAISystem
from schemas.evolve import Rule, Skill
from tasks.errors import FrameInputError
from tasks.evolve.decide import ScoredSplit, decide, paired_differences
from tasks.evolve.failures import Failure, anonymise, recurrent_failures
from tasks.evolve.optimize import critique, propose
from tasks.evolve.skill import TEMPLATES, parse_skill, with_skill
from tasks.evolve.splits import assign_splits, read_splits, tuning_instances, write_splits
from tasks.generate.baselines import EMPTY_NOTE, extractive
from tasks.generate.systems import make_system


def instances(n_domains: int = 6, per_domain: int = 2) -> pd.DataFrame:
    rows = []
    for d in range(n_domains):
        cat = "financial_quarterly" if d % 2 else "academic_simple"
        for i in range(per_domain):
            rows.append({"instance_id": f"{cat}/dom{d}/t{i}", "domain": f"dom{d}", "category": cat})
    return pd.DataFrame(rows)


def test_splits_are_by_domain_seeded_and_the_locked_split_is_never_tuned_on(tmp_path):
    df = instances()
    rel = tmp_path / "releases" / "r" / "1.0.0"
    a = assign_splits(df, rel, 2, 2, seed=7)
    assert a == assign_splits(df, rel, 2, 2, seed=7)  # seeded
    assert a != assign_splits(df, rel, 2, 2, seed=8) or a.domains != assign_splits(df, rel, 2, 2, 9).domains
    doms = [d for s in ("discovery", "validation", "locked") for d in a.domains[s]]
    assert sorted(doms) == sorted(df.domain.unique())  # every domain once
    assert {len(a.domains["discovery"]), len(a.domains["validation"]), len(a.domains["locked"])} == {2}
    # both categories reach discovery (round-robin over categories)
    cats = set(df[df.domain.isin(a.domains["discovery"])].category)
    assert len(cats) == 2
    for split, ids in a.instances.items():
        assert set(df[df.instance_id.isin(ids)].domain) == set(a.domains[split])
    write_splits(rel, a)
    assert (rel.parent / "1.0.0.splits.json").is_file() and not rel.exists()  # beside, not inside
    assert read_splits(rel, list(df.instance_id)) == a
    assert tuning_instances(a, "discovery") == a.instances["discovery"]
    with pytest.raises(FrameInputError, match="locked split is for the final evaluation"):
        tuning_instances(a, "locked")
    with pytest.raises(FrameInputError, match="another release"):
        read_splits(rel, list(df.instance_id)[:-1])
    with pytest.raises(FrameInputError, match="leave none"):
        assign_splits(df, rel, 3, 3, seed=0)


def test_skill_markdown_round_trips_and_bad_lines_are_named():
    skill = Skill(rules=[TEMPLATES["complete-ending"], TEMPLATES["fill-empty"], TEMPLATES["no-repetition"]])
    text = skill.render()
    assert text.index("## Plan") < text.index("## Write") < text.index("## Review")
    assert parse_skill(text) == skill and parse_skill(text).sha256 == skill.sha256
    with pytest.raises(ValueError, match=r"k\.md:3: not a rule line"):
        parse_skill("# Skill\n## Plan\n- do things\n", "k.md")
    with pytest.raises(ValueError, match="unknown stage 'Polish'"):
        parse_skill("## Polish\n", "k.md")
    assert Skill().render() == ""


def failure(item: str, rate: float = 0.5) -> Failure:
    return Failure(item, "G0", item, "criterion", rate, 2, 10)


def test_offline_optimizer_adds_template_rules_skipping_rejected_and_present_ones():
    current = Skill(rules=[TEMPLATES["complete-ending"]])
    fails = [
        failure("g0_not_truncated", 0.9),
        failure("g2_no_repetition", 0.6),
        failure("g2_table_units", 0.4),
    ]
    cand, notes = propose(current, fails, rejected={"table-units"}, max_new=3)
    assert [r.tag for r in cand.rules] == ["no-repetition", "complete-ending"]  # by stage: write, review
    assert any("No repeated" in n or "g2_no_repetition" in n for n in notes)
    cand, _ = propose(current, [failure("g2_unknown_item")], set(), 3)
    assert cand == current


def test_offline_critic_removes_instance_facts_rubric_wording_duplicates_and_enforces_the_budget():
    good = TEMPLATES["complete-ending"]
    fact = Rule(
        stage="write", when="writing about revenue", do="say it rose 12%", check="the figure is there"
    )
    named = Rule(stage="write", when="writing about Acme", do="mention the new plant", check="it is there")
    rubric = Rule(
        stage="review",
        when="checking the end",
        do="make sure the last paragraph or list item stops mid-sentence never",
        check="done",
    )
    dup = good.model_copy(update={"tag": "", "when": "closing a section"})
    cand = Skill(rules=[good, fact, named, rubric, dup])
    out, notes = critique(cand, Skill(), {"Acme", "ACME-10-Q"}, budget_words=1000)
    assert out.rules == [good]
    assert len(notes) == 4 and any("instance fact" in n for n in notes) and any("rubric" in n for n in notes)
    many = Skill(rules=list(TEMPLATES.values()))
    kept, notes = critique(many, Skill(rules=[good]), set(), budget_words=good.words + 5)
    assert kept.rules == [good] and all("budget" in n for n in notes)  # the current rule stays, new ones go


def rubric_evidence(rows: list[tuple[str, str, str, float]]) -> pd.DataFrame:
    """(system, instance, item, credit) -> evidence rows as a scoring run writes them."""
    layer = {"g0": "G0", "g1": "G1", "g2": "G2"}
    return pd.DataFrame(
        [
            {"system": s, "instance_id": i, "metric": "rubric", "kind": f"{layer[it[:2]]}:{it}", "text": it,
             "score": c, "rationale": f"fail: 'Acme' line {n}" if c < 1 else "pass"}
            for n, (s, i, it, c) in enumerate(rows)
        ]
    )  # fmt: skip


def scores(values: dict[tuple[str, str, str], float]) -> pd.DataFrame:
    return pd.DataFrame(
        [{"system": s, "instance_id": i, "metric": m, "value": v} for (s, i, m), v in values.items()]
    )


def test_recurrent_failures_need_cross_system_support_and_are_anonymised():
    ev = rubric_evidence(
        [(s, f"i{n}", "g0_not_truncated", 0.0) for s in ("a", "b") for n in range(2)]
        + [("a", f"i{n}", "g2_no_repetition", 0.0) for n in range(2)]
        + [("b", f"i{n}", "g2_no_repetition", 1.0) for n in range(2)]
    )
    got = recurrent_failures(ev, support=2, min_fail_rate=0.5, names={"Acme"})
    assert [f.item for f in got] == ["g0_not_truncated"]
    brief = got[0].brief()
    assert "g0_not_truncated" not in str(brief) and brief["title"] == "Not truncated"
    assert all("Acme" not in e and not any(ch.isdigit() for ch in e) for e in brief["evidence"])
    assert (
        anonymise("fail: 'Acme Corp' said 12.5% at line 40 (ACME)", {"ACME"})
        == "fail: '...' said #% at line # (<entity>)"
    )


def test_decision_accepts_a_fix_and_rejects_a_g0_regression_or_a_metric_drop():
    base = [
        ("a", "i1", "g0_not_truncated", 0.0),
        ("a", "i1", "g0_nonempty", 1.0),
        ("a", "i1", "g2_table_units", 1.0),
    ]
    before = ScoredSplit(
        scores({("a", "i1", "rubric"): 0.0, ("a", "i1", "coverage"): 0.5}), rubric_evidence(base)
    )
    fixed = [("a", "i1", "g0_not_truncated", 1.0), *base[1:]]
    after = ScoredSplit(
        scores({("a", "i1", "rubric"): 80.0, ("a", "i1", "coverage"): 0.5}), rubric_evidence(fixed)
    )
    ok = decide(before, after, {"g0_not_truncated"}, min_gain=0.0, item_tolerance=0.05, max_metric_drop=0.02)
    assert ok.accepted and ok.target_gain == 1.0 and ok.g0_regressions == 0
    broke = [("a", "i1", "g0_not_truncated", 1.0), ("a", "i1", "g0_nonempty", 0.0), base[2]]
    bad = ScoredSplit(after.scores, rubric_evidence(broke))
    no = decide(before, bad, {"g0_not_truncated"}, min_gain=0.0, item_tolerance=0.05, max_metric_drop=0.02)
    assert not no.accepted and no.g0_regressions == 1
    dropped = ScoredSplit(scores({("a", "i1", "rubric"): 80.0, ("a", "i1", "coverage"): 0.4}), after.evidence)
    no = decide(
        before, dropped, {"g0_not_truncated"}, min_gain=0.0, item_tolerance=0.05, max_metric_drop=0.02
    )
    assert not no.accepted and any("coverage dropped by 0.100" in r for r in no.reasons)
    assert not decide(
        before, before, {"g0_not_truncated"}, min_gain=0.0, item_tolerance=0.05, max_metric_drop=0.02
    ).accepted
    paired = paired_differences(before, after, n_resamples=200)
    row = paired[paired.metric == "rubric"].iloc[0]
    assert (row["diff"], row.n, row.layer) == (80.0, 1, "rubric total")


def test_a_skill_changes_an_openai_or_command_systems_identity_and_extractive_only_by_honoured_rules(
    tmp_path,
):
    skill = Skill(rules=[TEMPLATES["complete-ending"], TEMPLATES["table-units"]])
    oa = make_system(
        "m", OpenAISystem(kind="openai", base_url="http://127.0.0.1:9/v1", model="x"), cache_dir=tmp_path
    )
    assert with_skill(oa, Skill(), tmp_path) is oa  # the empty skill: the same system, same cache
    skilled = with_skill(oa, skill, tmp_path)
    assert skilled.identity()["prompt_sha256"] != oa.identity()["prompt_sha256"]
    prompt = Path(skilled.config.prompt).read_text(encoding="utf-8")
    system_part = prompt.split("---user---")[0]
    assert "never end a section mid-sentence" in system_part and "{{sample_report}}" in prompt
    script = tmp_path / "agent.py"
    script.write_text("import pathlib; print(pathlib.Path('skill.md').read_text())", encoding="utf-8")
    cmd = make_system(
        "c",
        CommandSystem(kind="command", command=[__import__("sys").executable, str(script)]),
        cache_dir=tmp_path,
    )
    got = with_skill(cmd, skill, tmp_path)
    assert got.identity() != cmd.identity()
    inst = {
        "instance_id": "x/y/t1->t2",
        "sample_markdown": "# T\n\n## A\n\nText.\n",
        "target_markdown": "secret",
    }
    gen = got.generate(inst, [])
    assert gen.ok and "never end a section mid-sentence" in gen.markdown  # the program read skill.md
    ext = make_system("extractive", BuiltinSystem(kind="builtin", builtin="extractive"), cache_dir=tmp_path)
    assert with_skill(ext, Skill(rules=[TEMPLATES["table-units"]]), tmp_path) is ext  # nothing it can honour
    assert with_skill(ext, skill, tmp_path).identity()["honours"] == ["complete-ending"]


def test_extractive_honours_complete_endings_and_empty_sections():
    inst = {
        "instance_id": "x/y/t1->t2",
        "grounding_set_id": "g",
        "sample_markdown": "# Report\n\n## Revenue\n\nRevenue rose.\n\n## Zebra migration\n\nZebras moved.\n",
    }
    text = "## Revenue\n\nRevenue rose 10% to $5 million. Management expects the growth to continue into"
    doc = {"grounding_set_id": "g", "doc_id": "d", "title": "Results", "kind": "prose", "markdown": text}
    plain = extractive(inst, [doc])
    assert "continue into\n" in plain and plain.rstrip().endswith("## Zebra migration")  # verbatim; empty
    honoured = extractive(inst, [doc], honour={"complete-ending", "fill-empty", "table-units"})
    assert "to $5 million.\n" in honoured and "continue into" not in honoured
    assert honoured.rstrip().endswith("## Zebra migration\n\n" + EMPTY_NOTE)
