"""Embedding ahead (tasks.score.metric.MetricFamily.embed_ahead): after a family's embed task has run over
a run's inputs, its score tasks embed nothing more, faithfulness's stage-2 windows included; and the
scores are the ones the family computes without it."""

from __future__ import annotations

import pytest

from schemas.scoring import ScoreSettings
from tasks.score import registry
from tasks.score.embed import CachedEmbedder, make_embed_fn
from tasks.score.metric import JudgeEnv
from tests.test_score_embed import CountingFake
from tests.test_score_faithfulness import G_SMALL, MDNA, REPORT

GOLD = MDNA.replace("# Management's Discussion and Analysis", "# Acme Corp quarterly report (Q2)")
# reports that state figures G holds, figures G only implies (12.5% = 1,350 / 1,200 - 1) and figures it
# lacks: stage 2 has claims to look at, with combined-evidence windows
GENERATED = [
    GOLD,
    REPORT,
    "# Acme Q2\n\n## Results\n\nRevenue grew 12.5% in the second quarter of 2025 compared with the second "
    "quarter of 2024.\n\nWidgets revenue rose to $1,010 million while Gadgets reached $340 million.\n\n"
    "## Cash\n\nCash and cash equivalents were $455 million, and repurchases totalled $80 million.\n",
]


def _env(tmp_path) -> tuple[JudgeEnv, CountingFake]:
    fake = CountingFake()
    env = JudgeEnv(ScoreSettings(), None, tmp_path)
    env._embed = (make_embed_fn(CachedEmbedder(fake, tmp_path / "cache")), fake.name)
    return env, fake


def _inputs(family: str) -> list:
    cls = registry.family(family)
    available = {
        "gold": GOLD,
        "sample": REPORT,
        "grounding": tuple(G_SMALL),
        "context": {"category": "financial_quarterly", "domain": "ACME-10-Q", "t_target": "2025-06-28"},
        "prepared": None,
    }
    return [cls.inputs(f"acme/{i}", text, 1234 + i, **available) for i, text in enumerate(GENERATED)]


@pytest.mark.parametrize("family", ["structure", "coverage", "faithfulness"])
def test_score_tasks_embed_nothing_after_the_embed_task(tmp_path, family):
    env, fake = _env(tmp_path)
    fam = registry.family(family)(env)
    assert fam.embeds_ahead()
    inputs = _inputs(family)
    n = fam.embed_ahead(inputs)
    ahead_calls = len(fake.calls)
    assert n > 0 and ahead_calls >= 1
    scored = [fam.score(x) for x in inputs]
    assert fake.calls[ahead_calls:] == [], f"{family}: score tasks embedded {fake.calls[ahead_calls:]}"
    # the same values as a family that embeds on demand (a fresh env and cache)
    env2, _ = _env(tmp_path / "on-demand")
    fresh = registry.family(family)(env2)
    again = [fresh.score(x) for x in inputs]
    assert [[(r.metric, r.value) for r in rs] for rs in scored] == [
        [(r.metric, r.value) for r in rs] for rs in again
    ]
    if family == "faithfulness":
        # stage 1's texts in one call, then the stage-2 windows (known once stage 1's cosines are)
        assert ahead_calls == 2, fake.calls
        assert any(it.stage == 2 for rs in scored for r in rs for it in r.items)
