"""The Prefect tasks of the `score` flow (flows/score.py): `score` per (instance, system, family),
`prepare` per (instance, family), `compare` per (instance, comparison family) and `embed` per family (its
texts embedded ahead in one batch). Each is cached on the sha256 of what it reads, the settings, the
endpoint identity and the family's code digest (PUBLIC_INPUTS: `_`-prefixed data is keyed by its digest).
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

from prefect import get_run_logger, task

from flows.caching import PUBLIC_INPUTS, STABLE
from flows.steps import run_name_template
from schemas.config import LLMSettings
from schemas.scoring import ScoreSettings
from tasks.errors import FrameInputError
from tasks.score import registry
from tasks.score.embed import resolve_precision
from tasks.score.metric import Inputs, JudgeEnv
from tasks.score.outputs import values_text

GOLD = "gold"  # pseudo-system: the gold report Y scored against itself / G (the ceiling)

_ENVS: dict[str, JudgeEnv] = {}
_ENVS_LOCK = threading.Lock()


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def judge_env(
    settings: ScoreSettings, llm: LLMSettings | None, embed_llm: LLMSettings | None = None
) -> JudgeEnv:
    """One env per settings in this process: its embedder and client are shared by every family."""
    # the precision `auto` stands for is resolved now, so the env (and its key) names the one in use
    settings = settings.model_copy(update={"embed_precision": resolve_precision(settings.embed_precision)})
    env = JudgeEnv(settings, llm, cache_dir(), embed_llm)
    with _ENVS_LOCK:
        return _ENVS.setdefault(env.key(), env)


def cache_dir() -> Path:
    return Path(os.environ.get("FRAME_CACHE_DIR") or "data/cache")


# ---------------------------------------------------------------- Prefect tasks


@task(name="score", cache_policy=STABLE, persist_result=True)
def score_task(
    family: str,
    release: str,
    instance_id: str,
    system: str,
    digests: dict,
    settings: ScoreSettings,
    llm: dict,
    code: str,
    _inputs: Inputs | None = None,
    _llm: LLMSettings | None = None,
    _embed_llm: LLMSettings | None = None,
) -> list[dict]:
    """One metric family for one (instance, system). `_inputs` is the data `digests` names (the cache key
    holds the digests), so an edit of any text the family reads invalidates it."""
    fam = registry.build(family, judge_env(settings, _llm, _embed_llm))
    if _inputs is None or type(fam).input_digests(_inputs) != digests:
        raise FrameInputError(f"{instance_id} ({system})", "report text changed while scoring")
    results = fam.score(_inputs)
    get_run_logger().info("%s %s %s: %s", instance_id, system, family, values_text(results))
    return [r.model_dump(mode="json") for r in results]


@task(name="prepare", cache_policy=STABLE, persist_result=True)
def prepare_task(
    family: str,
    release: str,
    instance_id: str,
    gold_sha: str,
    settings: ScoreSettings,
    llm: dict,
    code: str,
    _gold: str = "",
    _llm: LLMSettings | None = None,
    _embed_llm: LLMSettings | None = None,
) -> dict:
    """A family's per-instance preparation from the gold report (e.g. the scaffold), for every system."""
    if sha(_gold) != gold_sha:
        raise FrameInputError(instance_id, "gold report changed while scoring")
    prepared = registry.build(family, judge_env(settings, _llm, _embed_llm)).prepare(_gold)
    get_run_logger().info("%s %s: prepared", instance_id, family)
    return prepared


@task(name="compare", cache_policy=STABLE, persist_result=True)
def compare_task(
    family: str,
    release: str,
    instance_id: str,
    digests: dict,
    settings: ScoreSettings,
    llm: dict,
    code: str,
    _texts: dict | None = None,
    _llm: LLMSettings | None = None,
    _embed_llm: LLMSettings | None = None,
) -> list[dict]:
    """A comparison family's judgment of every system of one instance (`_texts`: gold + reports)."""
    texts = dict(_texts or {})  # a copy: the caller's dict stays intact for a retry
    gold = texts.pop(GOLD)
    return registry.build(family, judge_env(settings, _llm, _embed_llm)).compare(instance_id, gold, texts, {})


@task(name="embed", cache_policy=STABLE, persist_result=True)
def embed_task(
    family: str,
    release: str,
    instance_id: str,
    digests: list,
    settings: ScoreSettings,
    llm: dict,
    code: str,
    _inputs: list | None = None,
    _llm: LLMSettings | None = None,
    _embed_llm: LLMSettings | None = None,
) -> int:
    """Embed every text the family's score tasks of this run will embed, each distinct text once, in
    one batch (`_inputs`: their Inputs; `digests` keys them). Only a speed-up, so it never fails the run:
    the score tasks embed what it missed on demand and report real failures themselves."""
    fam = registry.build(family, judge_env(settings, _llm, _embed_llm))
    try:
        n = fam.embed_ahead(_inputs or [])
    except Exception as exc:  # noqa: BLE001
        get_run_logger().warning("%s: embedding ahead failed (%s); score tasks embed on demand", family, exc)
        return 0
    get_run_logger().info("%s: %d distinct texts embedded ahead for %d tasks", family, n, len(digests))
    return n


_KEY = PUBLIC_INPUTS
# Run names label runs in the UI (step, family, system, instance); they are not part of any cache key.
score_task = score_task.with_options(
    cache_policy=_KEY, task_run_name=run_name_template("score", "family", "system", "instance_id")
)
prepare_task = prepare_task.with_options(
    cache_policy=_KEY, task_run_name=run_name_template("prepare", "family", "instance_id")
)
compare_task = compare_task.with_options(
    cache_policy=_KEY, task_run_name=run_name_template("compare", "family", "instance_id")
)
embed_task = embed_task.with_options(cache_policy=_KEY, task_run_name=run_name_template("embed", "family"))
