"""tasks.lru.BoundedLRU: the cache of grounding sets, retrieval indexes and extracted claims."""

from __future__ import annotations

from tasks.lru import BoundedLRU


def test_evicts_least_recently_used_by_count_and_by_size():
    lru: BoundedLRU[str] = BoundedLRU(count=3, size=10)
    for k in "abc":
        lru.put(k, k.upper(), size=3)
    assert lru.get("a") == "A"  # a is now the most recent
    lru.put("d", "D", size=3)  # 4 entries > 3: b (least recent) goes
    assert lru.get("b") is None and len(lru) == 3
    lru.put("e", "E", size=8)  # size 3+3+3+8 > 10: c, a, d go; the newest stays alone
    assert [lru.get(k) for k in "acde"] == [None, None, None, "E"]
    lru.put("f", "F", size=50)  # larger than the bound on its own: still kept (the newest always stays)
    assert lru.get("f") == "F" and len(lru) == 1


def test_get_or_make_builds_once_per_key():
    lru: BoundedLRU[list] = BoundedLRU(count=2)
    made: list[str] = []
    for key in ("x", "x", "y", "x"):
        lru.get_or_make(key, lambda k=key: made.append(k) or [k])
    assert made == ["x", "y"]
