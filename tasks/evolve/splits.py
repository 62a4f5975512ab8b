"""Discovery / validation / locked splits of a release, by domain (no domain crosses splits), seeded and
stratified: each tuning split covers every rubric family of the release (refused when it cannot) and every
category it can; the locked split keeps a domain of every category.

The assignment is a small JSON file next to the release folder (`<release>/../<version>.splits.json`):
the release itself stays immutable. `tuning_instances` is the one way the evolve loop reads a split, and
it refuses `locked`."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pandas as pd

from schemas.evolve import SPLITS, Splits
from schemas.rubric import category_family
from tasks.atomic import atomic_write_text
from tasks.errors import FrameInputError

__all__ = ["assign_splits", "read_splits", "split_view", "splits_path", "tuning_instances", "write_splits"]

TUNING: tuple[str, ...] = ("discovery", "validation")


def splits_path(release: Path) -> Path:
    """Where the splits of data/releases/<name>/<version> live: data/releases/<name>/<version>.splits.json."""
    release = Path(release)
    return release.parent / f"{release.name}.splits.json"


def _family(category: str) -> str:
    # a failure found on filings is validated on filings too: the rubric family is what transfer is about;
    # a category of a kind with no family stands for itself
    return category_family(category) or category


def _refuse_sizes(sizes: dict[str, int], by_cat: dict[str, list[str]]) -> None:
    """One line naming the flag when the requested sizes cannot be stratified on this release."""
    n = sum(len(d) for d in by_cat.values())
    families = sorted({_family(c) for c in by_cat})
    if min(sizes.values()) < 1:
        raise FrameInputError("--discovery/--validation", "each split needs at least one domain")
    for split, size in sizes.items():
        if size < len(families):
            raise FrameInputError(
                f"--{split}",
                f"{size} domain(s) cannot cover the release's {len(families)} rubric families "
                f"({', '.join(families)}): give it at least {len(families)}",
            )
    tuning = sum(sizes.values())
    if tuning >= n:
        raise FrameInputError(
            "--discovery/--validation",
            f"{sizes['discovery']} + {sizes['validation']} domains leave none of the release's {n} "
            "for the locked split",
        )
    if tuning > n - len(by_cat):
        raise FrameInputError(
            "--discovery/--validation",
            f"{sizes['discovery']} + {sizes['validation']} domains: the locked split keeps one domain of "
            f"each of the release's {len(by_cat)} categories, so at most {n - len(by_cat)} of its {n} "
            "domains can tune",
        )
    for fam in families:
        cats = [c for c in by_cat if _family(c) == fam]
        spare = sum(len(by_cat[c]) - 1 for c in cats)
        if spare < len(TUNING):
            raise FrameInputError(
                "--discovery/--validation",
                f"family {fam} has {spare + len(cats)} domain(s) in {len(cats)} category(ies): with one "
                "of each category kept locked, it cannot give each tuning split a domain",
            )


def _stratify(
    sizes: dict[str, int], spare: dict[str, list[str]], rank: dict[str, int]
) -> dict[str, list[str]]:
    """Tuning domains drawn from `spare` (each category's shuffled domains, the locked one removed):
    every family in each split, then every category each split can still take (the splits taking turns),
    then the rest; a draw always takes from the category with the most spare domains (ties: `rank`)."""
    chosen: dict[str, list[str]] = {s: [] for s in TUNING}
    covered: dict[str, set[str]] = {s: set() for s in TUNING}

    def take(split: str, options: list[str]) -> None:
        cat = max(options, key=lambda c: (len(spare[c]), -rank[c]))
        chosen[split].append(spare[cat].pop())
        covered[split].add(cat)

    for fam in sorted({_family(c) for c in spare}):
        for split in TUNING:  # _refuse_sizes made sure every family has a spare domain for each split
            take(split, [c for c in spare if _family(c) == fam and spare[c]])
    more = True
    while more:
        more = False
        for split in TUNING:
            options = [c for c in spare if spare[c] and c not in covered[split]]
            if options and len(chosen[split]) < sizes[split]:
                take(split, options)
                more = True
    for split in TUNING:
        while len(chosen[split]) < sizes[split]:
            take(split, [c for c in spare if spare[c]])
    return chosen


def assign_splits(
    instances: pd.DataFrame, release: Path, discovery: int, validation: int, seed: int
) -> Splits:
    """`discovery` and `validation` domains drawn (seeded, stratified: see the module docstring) from the
    release's domains; the rest is the locked test split. Refused (FrameInputError, one line naming the
    flag) when a tuning split cannot cover every family or the locked split every category."""
    pairs = sorted(set(zip(instances.domain, instances.category, strict=True)))
    by_cat: dict[str, list[str]] = {}
    for dom, cat in pairs:
        by_cat.setdefault(cat, []).append(dom)
    cat_of = dict(pairs)
    if len(cat_of) != len(pairs):
        twice = next(d for d, c in pairs if cat_of[d] != c)
        raise FrameInputError("instances.parquet", f"domain {twice!r} has instances of two categories")
    sizes = {"discovery": discovery, "validation": validation}
    _refuse_sizes(sizes, by_cat)
    rng = random.Random(seed)
    spare = {c: rng.sample(doms, len(doms)) for c, doms in sorted(by_cat.items())}
    rank = {c: i for i, c in enumerate(rng.sample(sorted(spare), len(spare)))}
    locked = [spare[c].pop() for c in sorted(spare)]  # one domain of every category stays locked
    chosen = {
        **_stratify(sizes, spare, rank),
        "locked": locked + [d for doms in spare.values() for d in doms],
    }
    ids = {
        split: sorted(instances[instances.domain.isin(doms)].instance_id) for split, doms in chosen.items()
    }
    release = Path(release)
    return Splits(
        release=release.parent.name,
        version=release.name,
        seed=seed,
        domains={k: sorted(v) for k, v in chosen.items()},
        instances=ids,
        categories={k: sorted({cat_of[d] for d in v}) for k, v in chosen.items()},
        families={k: sorted({_family(cat_of[d]) for d in v}) for k, v in chosen.items()},
    )


def write_splits(release: Path, splits: Splits) -> Path:
    path = splits_path(release)
    atomic_write_text(path, json.dumps(splits.model_dump(), indent=2, sort_keys=True) + "\n")
    return path


def read_splits(release: Path, instance_ids: list[str]) -> Splits:
    """The release's splits, checked against its instances (a stale file names what is wrong)."""
    path = splits_path(release)
    if not path.is_file():
        raise FrameInputError(path, "no splits for this release: run `frame split --release ...` first")
    try:
        splits = Splits.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise FrameInputError(path, f"not a splits file: {str(exc).splitlines()[0]}") from None
    listed = [i for s in SPLITS for i in splits.instances[s]]
    unknown = sorted(set(listed) - set(instance_ids))
    if unknown or len(listed) != len(set(listed)):
        what = f"unknown instance {unknown[0]!r}" if unknown else "an instance in two splits"
        raise FrameInputError(path, f"{what}: the splits were made for another release")
    return splits


def tuning_instances(splits: Splits, split: str) -> list[str]:
    """Instance ids of a split the loop may tune on; `locked` is refused (held out for the final test)."""
    if split == "locked":
        raise FrameInputError(
            "split", "the locked split is for the final evaluation only: no step tunes on it"
        )
    if split not in splits.instances:
        raise FrameInputError("split", f"unknown split {split!r} (discovery, validation)")
    return list(splits.instances[split])


def split_view(release: Path, instance_ids: list[str], out: Path) -> Path:
    """A release-shaped folder holding only `instance_ids` and their grounding sets (for scoring)."""
    import pyarrow.parquet as pq

    release = Path(release)
    inst = pq.read_table(release / "instances.parquet")
    keep = inst.filter(pd.Series(inst.column("instance_id").to_pylist()).isin(instance_ids).to_numpy())
    sets = set(keep.column("grounding_set_id").to_pylist())
    docs = pq.read_table(release / "grounding_documents.parquet")
    docs = docs.filter(pd.Series(docs.column("grounding_set_id").to_pylist()).isin(sets).to_numpy())
    out.mkdir(parents=True, exist_ok=True)
    for name, table in (("instances", keep), ("grounding_documents", docs)):
        tmp = out / f".{name}.parquet.tmp"
        pq.write_table(table, tmp)
        tmp.replace(out / f"{name}.parquet")
    return out
