"""Discovery / validation / locked splits of a release, by domain (no domain crosses splits), seeded.

The assignment is a small JSON file next to the release folder (`<release>/../<version>.splits.json`):
the release itself stays immutable. `tuning_instances` is the one way the evolve loop reads a split, and
it refuses `locked`."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pandas as pd

from schemas.evolve import SPLITS, Splits
from tasks.atomic import atomic_write_text
from tasks.errors import FrameInputError

__all__ = ["assign_splits", "read_splits", "split_view", "splits_path", "tuning_instances", "write_splits"]


def splits_path(release: Path) -> Path:
    """Where the splits of data/releases/<name>/<version> live: data/releases/<name>/<version>.splits.json."""
    release = Path(release)
    return release.parent / f"{release.name}.splits.json"


def assign_splits(
    instances: pd.DataFrame, release: Path, discovery: int, validation: int, seed: int
) -> Splits:
    """`discovery` and `validation` domains drawn (seeded, within each category in turn so both splits
    see every category when they can) from the release's domains; the rest is the locked test split."""
    domains = sorted(instances.domain.unique())
    if discovery < 1 or validation < 1:
        raise FrameInputError("--discovery/--validation", "each split needs at least one domain")
    if discovery + validation >= len(domains):
        raise FrameInputError(
            "--discovery/--validation",
            f"{discovery} + {validation} domains leave none of the release's {len(domains)} "
            "for the locked split",
        )
    rng = random.Random(seed)
    by_cat: dict[str, list[str]] = {}
    for dom, cat in sorted(set(zip(instances.domain, instances.category, strict=True))):
        by_cat.setdefault(cat, []).append(dom)
    order: list[str] = []
    queues = [rng.sample(doms, len(doms)) for _, doms in sorted(by_cat.items())]
    while any(queues):  # round-robin over categories
        for q in queues:
            if q:
                order.append(q.pop())
    chosen = {"discovery": order[:discovery], "validation": order[discovery : discovery + validation]}
    chosen["locked"] = order[discovery + validation :]
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
