"""A thread-safe LRU bounded by entry count and by a size per entry (e.g. characters of text indexed)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class BoundedLRU(Generic[V]):
    """Keeps at most `count` entries whose sizes sum to at most `size` (the newest entry always stays).
    `get_or_make(key, make, size_of)` builds a missing value outside the lock: two threads missing the same
    key may both build it, and the later one is kept (values are deterministic)."""

    def __init__(self, count: int, size: int | None = None) -> None:
        self.count, self.size = count, size
        self._items: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self._total = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            got = self._items.get(key)
            if got is None:
                return None
            self._items.move_to_end(key)
            return got[0]

    def put(self, key: Hashable, value: V, size: int = 0) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._total -= old[1]
            self._items[key] = (value, size)
            self._total += size
            while len(self._items) > 1 and (
                len(self._items) > self.count or (self.size is not None and self._total > self.size)
            ):
                _, (_, dropped) = self._items.popitem(last=False)
                self._total -= dropped

    def get_or_make(
        self, key: Hashable, make: Callable[[], V], size_of: Callable[[V], int] = lambda v: 0
    ) -> V:
        got = self.get(key)
        if got is None:
            got = make()
            self.put(key, got, size_of(got))
        return got

    def __len__(self) -> int:
        return len(self._items)
