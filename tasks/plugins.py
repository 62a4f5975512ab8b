"""Loading plugin classes the way every frame registry does: the built-in ones by "module:Class", then
those installed packages declare as entry points of the registry's group."""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Iterator


def plugin_classes(builtins: tuple[str, ...], group: str) -> Iterator[type]:
    for ref in builtins:
        module, attr = ref.split(":")
        yield getattr(importlib.import_module(module), attr)
    # `[project.entry-points."<group>"] name = "pkg.mod:Class"` of any installed package
    for ep in importlib.metadata.entry_points(group=group):
        yield ep.load()
