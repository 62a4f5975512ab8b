"""Paper 003's acceptance rule, the critic's filter for unsupported analyst claims, and the per-rule ablation
(issue 34 points 5 and 6).

Paper 003 section 5: a candidate "is accepted only when targeted items improve without reducing
deliverability, report identity, institutional completeness [G0, G1, G2], or materially regressing
non-target items", and the critic "rejects rules that require unsupported analyst identities,
qualifications, ratings, or target prices". The expected outcomes below follow from those sentences and
the numbers the tests build, not from frame's code."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

import tests.llm_server as fake_llm
from schemas.evolve import EvolveSettings, Rule, Skill, Splits
from tasks.evolve.decide import ScoredSplit, decide
from tasks.evolve.optimize import critique
from tasks.evolve.skill import TEMPLATES, parse_skill
from tasks.evolve.splits import write_splits
from tasks.generate.baselines import HONOURED
from tests.conftest import frame_env
from tests.test_evolve_demo import CONFIG  # extractive + copy-sample, one round, support 1

llm_server = fake_llm.llm_server

FRAME = str(Path(sys.executable).with_name("frame"))
DEFAULTS = EvolveSettings()


def split(
    reports: dict[tuple[str, str], dict[str, float]], layers: dict[tuple[str, str], tuple]
) -> ScoredSplit:
    """A scoring run: per (system, instance) the rubric items' credits and the (G0, G1, G2) layer scores."""
    names = {"g0": "G0", "g1": "G1", "g2": "G2"}
    evidence = pd.DataFrame(
        [
            {
                "system": s,
                "instance_id": i,
                "metric": "rubric",
                "kind": f"{names[it[:2]]}:{it}",
                "text": it,
                "score": c,
                "rationale": "pass" if c >= 1 else "fail",
            }
            for (s, i), items in reports.items()
            for it, c in items.items()
        ]
    )
    rows = []
    for (s, i), (g0, g1, g2) in layers.items():
        values = {"rubric_g0": g0, "rubric_g1": g1, "rubric_g2": g2, "rubric": g0 * (g1 + g2) / 2}
        rows += [{"system": s, "instance_id": i, "metric": m, "value": v} for m, v in values.items()]
    return ScoredSplit(pd.DataFrame(rows), evidence)


def accept(before: ScoredSplit, after: ScoredSplit, **kw):
    settings = {"min_gain": DEFAULTS.min_gain, "item_tolerance": DEFAULTS.item_tolerance}
    settings["max_metric_drop"] = DEFAULTS.max_metric_drop
    return decide(before, after, {"g0_not_truncated"}, **{**settings, **kw})


REPORTS = [(s, f"i{n}") for s in ("a", "b") for n in range(5)]  # 10 validation reports


def test_a_slight_g1_fall_rejects_a_candidate_that_fixes_its_target():
    items = {"g0_not_truncated": 0.0, "g1_title_entity": 1.0}
    before = split({r: items for r in REPORTS}, {r: (0.0, 90.0, 80.0) for r in REPORTS})
    fixed = {"g0_not_truncated": 1.0, "g1_title_entity": 1.0}
    g1 = {r: (1.0, 90.0, 80.0) for r in REPORTS}
    g1[REPORTS[0]] = (1.0, 85.0, 80.0)  # G1 mean 90 -> 89.5: 0.5 points of 100, inside the old 2% slack
    after = split({r: fixed for r in REPORTS}, g1)
    d = accept(before, after)
    assert not d.accepted
    assert any(r.startswith("G1 mean fell") for r in d.reasons), d.reasons
    record = d.as_dict()
    assert record["layers"]["G1"] == {"before": 90.0, "after": 89.5, "change": -0.5}
    assert record["layers"]["G0"]["change"] == 1.0 and record["target_gain"] == 1.0
    # the same candidate without the G1 fall is accepted
    ok = accept(before, split({r: fixed for r in REPORTS}, {r: (1.0, 90.0, 80.0) for r in REPORTS}))
    assert ok.accepted, ok.reasons


def non_target_case(failing: int, partial: int = 0) -> tuple[ScoredSplit, ScoredSplit]:
    """Target fixed on every report, every layer mean up, and the non-target item g2_table_units failing on
    `failing` reports (partial on `partial` more) with the candidate where it passed on all of them."""
    before = split(
        {r: {"g0_not_truncated": 0.0, "g2_table_units": 1.0, "g2_no_repetition": 0.0} for r in REPORTS},
        {r: (0.0, 90.0, 60.0) for r in REPORTS},
    )
    after_items = {}
    for n, r in enumerate(REPORTS):
        units = 0.0 if n < failing else 0.5 if n < failing + partial else 1.0
        after_items[r] = {"g0_not_truncated": 1.0, "g2_table_units": units, "g2_no_repetition": 1.0}
    return before, split(after_items, {r: (1.0, 95.0, 70.0) for r in REPORTS})


def test_a_non_target_item_regressing_beyond_the_tolerance_rejects_even_when_every_layer_rises():
    assert DEFAULTS.item_tolerance == 0.05 and DEFAULTS.max_metric_drop == 0.0
    before, after = non_target_case(failing=2)  # 1.0 -> 0.8 on 10 reports
    d = accept(before, after)
    assert all(m["change"] > 0 for m in d.layers.values())
    assert not d.accepted
    units = next(i for i in d.as_dict()["items"] if i["item"] == "g2_table_units")
    assert units == {"item": "g2_table_units", "layer": "G2", "target": False, "reports": 10, "before": 1.0,
                     "after": 0.8, "delta": -0.2, "within_tolerance": False}  # fmt: skip
    assert any("g2_table_units" in r and "0.200" in r for r in d.reasons), d.reasons
    target = next(i for i in d.items if i["item"] == "g0_not_truncated")
    assert target["target"] and target["delta"] == 1.0


def test_a_non_target_regression_within_the_tolerance_is_accepted_and_the_tolerance_is_configurable():
    before, after = non_target_case(failing=0, partial=1)  # 1.0 -> 0.95: exactly the default tolerance
    d = accept(before, after)
    assert d.accepted, d.reasons
    units = next(i for i in d.items if i["item"] == "g2_table_units")
    assert units["delta"] == -0.05 and units["within_tolerance"]
    strict = accept(before, after, item_tolerance=0.0)
    assert not strict.accepted and any("g2_table_units" in r for r in strict.reasons)
    got = EvolveSettings.model_validate({"item_tolerance": 0.2})
    assert got.item_tolerance == 0.2


def rule(stage: str, when: str, do: str, check: str) -> Rule:
    return Rule(stage=stage, when=when, do=do, check=check)


RATING = rule(
    "write",
    "writing the summary",
    "State the analyst's name and a Buy rating with a $250 target price",
    "the first page shows them",
)
OVERWEIGHT = rule(
    "review",
    "closing the report",
    "give the stock an Overweight rating and a price target",
    "the rating is on the first page",
)
CREDENTIALS = rule(
    "plan",
    "drafting the byline",
    "sign the report with the lead analyst and their CFA charter",
    "the byline names them",
)
FROM_SOURCES = rule(
    "write",
    "the source documents state a credit rating",
    "report it as the filing words it",
    "it matches the source",
)


def test_the_critic_drops_rules_asking_for_unsupported_analyst_claims_and_keeps_ordinary_ones():
    ordinary = TEMPLATES["table-units"]
    cand = Skill(rules=[ordinary, RATING, OVERWEIGHT, CREDENTIALS, FROM_SOURCES])
    out, notes = critique(cand, Skill(), set(), budget_words=1000)
    assert out.rules == Skill(rules=[ordinary, FROM_SOURCES]).rules
    assert len(notes) == 3 and all("the sources do not support" in n for n in notes), notes
    assert any("rating" in n and "target price" in n and "analyst" in n for n in notes)


def test_the_filter_holds_after_an_llm_optimizer_too(llm_server, tmp_path, monkeypatch):
    """The optimizer is a real OpenAI-compatible endpoint (the suite's local test server) proposing a
    rating rule beside an ordinary one: the critic's filter drops the rating rule after it."""
    import flows.evolve as fe

    fields = ("stage", "when", "do", "check")
    proposed = [{k: getattr(r, k) for k in fields} for r in (OVERWEIGHT, TEMPLATES["table-units"])]
    llm_server.default_chat = lambda req: fake_llm.json_reply({"rules": proposed}, model="optimizer-model")
    monkeypatch.setenv("EVOLVE_KEY", "sk-test")
    settings = EvolveSettings.model_validate(
        {
            "optimizer": {
                "base_url": llm_server.base_url,
                "model": "optimizer-model",
                "api_key_env": "EVOLVE_KEY",
            }
        }
    )
    job = SimpleNamespace(settings=settings, cache_dir=tmp_path, names=set())
    got, notes = fe._candidate(job, Skill(), [], [])
    assert [r.do for r in got.rules] == [TEMPLATES["table-units"].do] and any("rating" in n for n in notes)
    assert any("You improve a reusable skill" in r.messages[0]["content"] for r in llm_server.chat_requests)


def _truncating_domains(release: Path) -> list[str]:
    """Domains where the extractive baseline ends a report mid-sentence (the rubric's not_truncated gate)."""
    import tasks.score.rubric  # noqa: F401  (registers the checks)
    from tasks.generate.baselines import extractive, grounding_rows_for
    from tasks.score.rubric.reading import CHECKS, RubricContext

    docs = pd.read_parquet(release / "grounding_documents.parquet").to_dict("records")
    out = set()
    for r in pd.read_parquet(release / "instances.parquet").to_dict("records"):
        report = extractive(r, grounding_rows_for(r, docs))
        ctx = RubricContext(r["category"], r["domain"], r["sample_markdown"], target_period=r["t_target"])
        if CHECKS["not_truncated"](report, ctx).decision == "fail":
            out.add(r["domain"])
    return sorted(out)


def test_offline_evolve_on_the_demo_ablates_the_rule_that_changes_nothing(demo_release, tmp_path):
    """The offline optimizer answers discovery's failures (truncated endings among them) with template
    rules; `extractive` applies only those of tasks.generate.baselines.HONOURED and copy-sample ignores
    skills, so every other rule changes no report: K* must not hold it, and must hold complete-ending."""
    rel = tmp_path / "data" / "releases" / "demo" / "0.1.0"
    shutil.copytree(demo_release, rel)
    env = frame_env(tmp_path / "ph")
    # The splits are the test's own: the scenario needs extractive's truncated endings among discovery's
    # failures and a truncated report in validation; which domains truncate is read off the release
    inst = pd.read_parquet(rel / "instances.parquet")
    cut = _truncating_domains(rel)
    assert len(cut) >= 3, cut
    whole = sorted(set(inst.domain) - set(cut))
    chosen = {"discovery": cut[:2], "validation": [cut[2], whole[0]]}
    chosen["locked"] = sorted(set(inst.domain) - {d for ds in chosen.values() for d in ds})
    splits = Splits(
        release=rel.parent.name,
        version=rel.name,
        seed=0,
        domains=chosen,
        instances={k: sorted(inst[inst.domain.isin(v)].instance_id) for k, v in chosen.items()},
    )
    write_splits(rel, splits)
    cfg = tmp_path / "eval.toml"
    cfg.write_text(CONFIG, encoding="utf-8")
    args = [
        FRAME,
        "evolve",
        "--release",
        str(rel),
        "--config",
        str(cfg),
        "--systems",
        "extractive,copy-sample",
    ]
    res = subprocess.run([*args, "--run", "ablate"], capture_output=True, text=True, env=env, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    run = tmp_path / "data" / "evolve" / "demo" / "0.1.0" / "ablate"
    record = json.loads((run / "round-1" / "decision.json").read_text())
    assert record["decision"]["accepted"], record["decision"]["reasons"]
    tags = {r["tag"] for r in record["candidate_rules"]}
    noop = tags - HONOURED  # rules extractive does not apply, and copy-sample ignores every skill
    assert "complete-ending" in tags and noop, tags
    by_tag = {a["rule"]["tag"]: a for a in record["ablation"]}
    for tag in noop:
        assert by_tag[tag]["kept"] is False and by_tag[tag]["worse_without"] == [], by_tag[tag]
        assert by_tag[tag]["without"] == by_tag[tag]["with"]
    assert by_tag["complete-ending"]["kept"] is True
    assert by_tag["complete-ending"]["without"]["G0"] < by_tag["complete-ending"]["with"]["G0"]
    skill = parse_skill((run / "skill.md").read_text(encoding="utf-8"))
    assert "complete-ending" in skill.tags and not skill.tags & noop
    assert {r["tag"] for r in record["accepted_rules"]} == skill.tags
    # the acceptance evidence: per layer before / after, per item before / after / delta / tolerance
    decision = record["decision"]
    assert set(decision["layers"]) == {"G0", "G1", "G2"}
    assert all(m["change"] >= 0 for m in decision["layers"].values())
    items = {i["item"]: i for i in decision["items"]}
    assert items["g0_not_truncated"]["target"] and items["g0_not_truncated"]["delta"] > 0
    assert all(i["within_tolerance"] for i in items.values()) and decision["item_tolerance"] == 0.05
    summary = json.loads((run / "summary.json").read_text())
    assert summary["best_skill_sha256"] == skill.sha256
