"""The settings a command resolves from --config: an evaluation config, or a build config's [llm] and
[run], with the FRAME_* environment overrides. Every key a config names is registered as a secret here,
before any step (tasks.llm.redact)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tasks.errors import FrameInputError

__all__ = [
    "eval_or_build_config",
    "instance_subset",
    "llm_settings",
    "missing_in_subset",
    "run_settings",
    "split_subsets",
]


def llm_settings(config: Path | None):
    """LLM settings from --config's [llm] (or the defaults), with the FRAME_LLM_* env overrides."""
    from schemas.config import LLMSettings
    from tasks.config import load_config

    if config is not None:
        cfg = load_config(config)
        return cfg.llm.resolved(), Path(cfg.build.data_dir)
    return LLMSettings().resolved(), None


def run_settings(config: Path | None):
    """Where tasks run: --config's [run] (or the defaults), with the FRAME_TASK_RUNNER overrides."""
    from schemas.config import RunSettings
    from tasks.config import load_config

    return (load_config(config).run if config is not None else RunSettings()).resolved()


def eval_or_build_config(config: Path | None):
    """(evaluation config or None, the build config's [llm] or the defaults, its data dir, its [run]).
    A TOML with [systems], [judge], [embedder] or [score] is an evaluation config (schemas.evaluation)."""
    from schemas.config import RunSettings
    from tasks.config import load_eval_config, read_toml
    from tasks.llm import redact

    if config is not None and config.is_file():
        keys = set(read_toml(config))  # bounded, one line when it is no TOML
        if keys & {"systems", "judge", "embedder", "score", "evolve"}:
            ev = load_eval_config(config)
            # every key the config names is a secret from now on, used by this command or not: never
            # passed to a program by a pass_env glob, scrubbed from whatever frame writes
            redact.register_env(redact.key_envs(ev.model_dump()))
            data_dir = Path(ev.build.data_dir) if ev.build is not None else None
            llm, _ = llm_settings(None)
            redact.register_env([llm.api_key_env])
            return ev, llm, data_dir, ev.run.resolved()
    llm, data_dir = llm_settings(config)
    redact.register_env([llm.api_key_env])
    return None, llm, data_dir, run_settings(config) if config is not None else RunSettings().resolved()


def instance_subset(
    release: Path, limit: int | None, instances: str | None, pool: Iterable[str] | None = None
):
    """The tasks.select.Subset that --limit / --instances choose of the release's instances (of those in
    `pool` only, when given: the annotated or ranked ones of `frame meta`); None: every instance."""
    from tasks.release import members
    from tasks.select import parse_ids, select_instances

    if limit is None and instances is None:
        return None
    table = members.read_table(release, "instances", columns=["instance_id", "category"])
    rows = zip(table.column("instance_id").to_pylist(), table.column("category").to_pylist(), strict=True)
    if pool is not None:
        keep = set(pool)
        rows = [r for r in rows if r[0] in keep]
    ids = parse_ids(instances)
    if instances is not None and ids is None:
        raise FrameInputError("--instances", "give comma-separated instance ids")
    return select_instances(rows, limit, ids)


def missing_in_subset(systems: dict, ids: Iterable[str]) -> list[str]:
    """One problem line per instance of a --limit / --instances subset that a checked submission lacks
    (tasks.generate.systems: `reports` after `check`); the instances outside the subset are not missing."""
    problems = []
    for system in systems.values():
        reports = getattr(system, "reports", None)
        if getattr(system, "check", None) is None or reports is None:
            continue
        where = getattr(getattr(system, "config", None), "path", system.name)
        problems += [
            f"{where}: instance {i}: missing (no report for this instance)" for i in ids if i not in reports
        ]
    return problems


def split_subsets(splits, instances, limit: int | None, named: str | None):
    """`frame evolve --limit N / --instances`: each split (discovery, validation, locked) keeps at most N
    of its instances, chosen as tasks.select chooses, or the named ones it holds. A split left empty is
    refused (it could accept or test nothing)."""
    from tasks.select import parse_ids, select_instances

    if limit is None and named is None:
        return splits
    ids = parse_ids(named)
    category = dict(zip(instances["instance_id"], instances["category"], strict=True))
    if ids is not None and (unknown := [i for i in ids if i not in category]):
        raise FrameInputError("--instances", f"not an instance of the release: {', '.join(unknown)}")
    kept = {}
    for split, members in splits.instances.items():
        mine = [i for i in ids if i in set(members)] if ids is not None else None
        if mine == []:
            raise FrameInputError("--instances", f"none of the named instances is in the {split} split")
        subset = select_instances([(i, category[i]) for i in members], limit, mine)
        kept[split] = list(subset.ids) if subset is not None else list(members)
    return splits.model_copy(update={"instances": kept})
