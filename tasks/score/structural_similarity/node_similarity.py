"""The default node similarity of Algorithm 1 (SPEC §4): a node's (type, objective) fields, the
projections of a cosine (rbf, linear, power) and the embedding similarity `make_node_similarity`."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["PROJECTIONS", "NodeSimilarity", "make_node_similarity", "node_fields", "project_array"]

NodeSimilarity = Callable[[Any, Any], float]


def node_fields(node: Any) -> tuple[str, str]:
    """(type, objective text) of a node; the objective falls back to the title when empty."""
    if isinstance(node, dict):
        ntype = node.get("type") or ("report" if "children" not in node else "")
        return str(ntype), str(node.get("objective") or node.get("title") or "")
    ntype = getattr(node, "type", None)
    if ntype is None:  # ReportStructure / StructureOutput root
        return "report", str(getattr(node, "title", "") or "")
    return str(ntype), str(getattr(node, "objective", "") or getattr(node, "title", "") or "")


def _proj_rbf(x: float, delta: float, n: int) -> float:
    return math.exp(-((1.0 - x) ** 2) / (2.0 * delta * delta))


def _proj_linear(x: float, delta: float, n: int) -> float:
    return (x + 1.0) / 2.0


def _proj_power(x: float, delta: float, n: int) -> float:
    return ((x + 1.0) / 2.0) ** n


PROJECTIONS = {"rbf": _proj_rbf, "linear": _proj_linear, "power": _proj_power}


def project_array(x: np.ndarray, proj: str, delta: float, n: int) -> np.ndarray:
    """`PROJECTIONS[proj]` elementwise on an array of cosines."""
    if proj == "rbf":
        return np.exp(-((1.0 - x) ** 2) / (2.0 * delta * delta))
    if proj == "linear":
        return (x + 1.0) / 2.0
    if proj == "power":
        return ((x + 1.0) / 2.0) ** n
    raise ValueError(f"proj must be one of {sorted(PROJECTIONS)} (got {proj!r})")


def make_node_similarity(
    embed: Callable[[list[str]], np.ndarray],
    w: float = 0.2,
    proj: str = "rbf",
    delta: float = 0.10,
    n: int = 2,
) -> NodeSimilarity:
    """sim(r, s) = w * proj(cos(e_type)) + (1 - w) * proj(cos(e_obj)) (SPEC §4).

    ``embed(texts) -> array (len(texts), dim)``. Each distinct text is embedded once; the returned callable
    has ``prepare(nodes)``, which :func:`structural_similarity` calls with all nodes of both trees so the
    embeddings are fetched in one batched call.
    """
    if proj not in PROJECTIONS:
        raise ValueError(f"proj must be one of {sorted(PROJECTIONS)} (got {proj!r})")
    pfun = PROJECTIONS[proj]
    vectors: dict[str, np.ndarray] = {}

    def _ensure(texts: Sequence[str]) -> None:
        missing = sorted({t for t in texts if t not in vectors})
        if not missing:
            return
        arr = np.asarray(embed(missing), dtype=float)
        if arr.shape[0] != len(missing):
            raise ValueError(f"embed returned {arr.shape[0]} vectors for {len(missing)} texts")
        norms = np.linalg.norm(arr, axis=1, keepdims=True)
        arr = np.divide(arr, norms, out=np.zeros_like(arr), where=norms > 0)
        for text, vec in zip(missing, arr, strict=True):
            vectors[text] = vec

    def _cos(a: str, b: str) -> float:
        return float(np.clip(np.dot(vectors[a], vectors[b]), -1.0, 1.0))

    def sim(r: Any, s: Any) -> float:
        (tr, orr), (ts, os_) = node_fields(r), node_fields(s)
        _ensure([tr, orr, ts, os_])
        return w * pfun(_cos(tr, ts), delta, n) + (1.0 - w) * pfun(_cos(orr, os_), delta, n)

    def prepare(nodes: Sequence[Any]) -> None:
        texts: list[str] = []
        for node in nodes:
            texts.extend(node_fields(node))
        _ensure(texts)

    def matrix(nodes_a: Sequence[Any], nodes_b: Sequence[Any]) -> np.ndarray:
        """sim(r, s) for every r of `nodes_a` and s of `nodes_b` at once: (len(a), len(b))."""
        fa, fb = [node_fields(x) for x in nodes_a], [node_fields(x) for x in nodes_b]
        _ensure([t for pair in fa + fb for t in pair])

        def cos(i: int) -> np.ndarray:
            va = np.stack([vectors[f[i]] for f in fa])
            vb = np.stack([vectors[f[i]] for f in fb])
            return np.clip(va @ vb.T, -1.0, 1.0)

        return w * project_array(cos(0), proj, delta, n) + (1.0 - w) * project_array(cos(1), proj, delta, n)

    sim.prepare = prepare  # type: ignore[attr-defined]
    sim.matrix = matrix  # type: ignore[attr-defined]
    return sim
