"""The source kinds frame knows, by name. A new kind is one `SourceKind` subclass with its domain shape
and one `register(...)` call (or an entry point of the group `frame.source_kinds`): docs/extending.md."""

from __future__ import annotations

import threading

from schemas.domains import domain_shapes, register_domain, unregister_domain
from tasks.errors import FrameInputError
from tasks.plugins import plugin_classes
from tasks.sources.base import SourceKind

ENTRY_POINTS = "frame.source_kinds"
_BUILTIN = ("tasks.sources.edgar:EdgarKind", "tasks.sources.arxiv:ArxivKind")
_KINDS: dict[str, SourceKind] = {}
_LOADED = False
_LOCK = threading.RLock()


def register(cls: type[SourceKind]) -> type[SourceKind]:
    """Add a kind (usable as a class decorator): its domains become valid in configs."""
    with _LOCK:
        _load()
        _add(cls)
    return cls


def unregister(name: str) -> None:
    """Remove a kind added with `register` (tests, interactive sessions)."""
    with _LOCK:
        if _KINDS.pop(name, None) is not None:
            unregister_domain(name)


def _add(cls: type[SourceKind]) -> None:
    name = cls.name()
    if name in _KINDS:
        if type(_KINDS[name]) is cls:
            return
        raise ValueError(f"source kind {name!r} is already registered")
    if not cls.ground_steps or "fetch" in cls.ground_steps:
        raise ValueError(f"source kind {name!r}: ground_steps must name its steps after fetch")
    if domain_shapes().get(name) not in (None, cls.shape):
        raise ValueError(f"source kind {name!r}: another domain shape is registered under that name")
    register_domain(cls.shape)
    _KINDS[name] = cls()


def _load() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    for cls in plugin_classes(_BUILTIN, ENTRY_POINTS):
        _add(cls)


def source_kinds() -> dict[str, SourceKind]:
    """Every kind, built-ins first."""
    with _LOCK:
        _load()
        return dict(_KINDS)


def source_kind(name: str, where: str = "kind") -> SourceKind:
    """The kind named `name`; a one-line input error naming `where` and the known kinds otherwise."""
    kinds = source_kinds()
    if name not in kinds:
        raise FrameInputError(where, f"unknown source kind {name!r} (known: {', '.join(kinds)})")
    return kinds[name]


def ground_steps() -> tuple[str, ...]:
    """fetch, then every kind's grounding steps in the order the kinds run them (`frame rerun --step`)."""
    steps = ["fetch"]
    for kind in source_kinds().values():
        for i, step in enumerate(kind.ground_steps):
            if step not in steps:
                before = next((s for s in kind.ground_steps[i + 1 :] if s in steps), None)
                steps.insert(steps.index(before) if before else len(steps), step)
    return tuple(steps)
