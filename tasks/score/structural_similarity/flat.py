"""Trees numbered in preorder (`FlatTree`): the shape Algorithm 1 and its batched form walk, built from a
`tasks.score.tree` dict, a `ReportStructure` / `StructureOutput` or any node with children."""

from __future__ import annotations

from typing import Any

__all__ = ["FlatTree", "flatten"]


def _children_of(node: Any) -> list[Any]:
    if isinstance(node, dict):
        if "children" in node:
            return list(node.get("children") or [])
        if "type" not in node:  # a serialised ReportStructure / StructureOutput
            return list(node.get("nodes") or node.get("sections") or [])
        return []
    for attr in ("children", "nodes", "sections"):
        kids = getattr(node, attr, None)
        if kids is not None:
            return list(kids)
    return []


class FlatTree:
    """A tree numbered in preorder: ``objs[i]`` the original node, ``end[i]`` one past its subtree,
    ``depth[i]`` (root 0) and ``children[i]`` (preorder indices)."""

    __slots__ = ("objs", "end", "depth", "children")

    def __init__(self, root: Any):
        self.objs: list[Any] = []
        self.depth: list[int] = []
        self.children: list[list[int]] = []
        parent: list[int] = []
        stack: list[tuple[Any, int, int]] = [(root, 0, -1)]
        while stack:
            node, d, par = stack.pop()
            idx = len(self.objs)
            self.objs.append(node)
            self.depth.append(d)
            self.children.append([])
            parent.append(par)
            if par >= 0:
                self.children[par].append(idx)
            for kid in reversed(_children_of(node)):
                stack.append((kid, d + 1, idx))
        n = len(self.objs)
        self.end = list(range(1, n + 1))
        for idx in range(n - 1, 0, -1):  # children have larger indices than their parent
            p = parent[idx]
            if self.end[idx] > self.end[p]:
                self.end[p] = self.end[idx]

    def __len__(self) -> int:
        return len(self.objs)


def flatten(tree: Any) -> FlatTree:
    return tree if isinstance(tree, FlatTree) else FlatTree(tree)
