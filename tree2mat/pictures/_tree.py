"""The tree half of a tree's picture: the levels drawn (a large tree cut where at most
:data:`MAX_BOXES` boxes fit side by side), where each box goes, and the boxes and edges drawn."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from tree2mat.ir.core import Tree
from tree2mat.pictures._labels import FONT, LEFT, RIGHT, _text_width

if TYPE_CHECKING:
    from matplotlib.axes import Axes

#: Most boxes side by side at the bottom of the drawn tree; deeper subtrees become one box each.
MAX_BOXES = 16
#: Most levels of the tree drawn (the root is level 0).
MAX_LEVELS = 6
YES_NO = ("yes", "no")


@dataclass(frozen=True)
class _Box:
    x: float
    level: int
    text: str
    kind: str  # "node", "leaf", or "more" (a subtree not drawn)


def _cut_level(t: Tree) -> int:
    """The level the drawing stops at: the deepest with at most MAX_BOXES boxes at the bottom
    (the leaves down to it and the subtrees rooted on it) and at most MAX_LEVELS levels."""
    node_level = np.zeros(max(t.n_internal, 1), np.int64)
    for i in range(t.n_internal):  # breadth-first: parents first
        for child in (t.left[i], t.right[i]):
            if child >= 0:
                node_level[child] = node_level[i] + 1
    leaf_level = t.leaf_depths()
    best = 1
    for level in range(1, MAX_LEVELS):
        boxes = np.count_nonzero(leaf_level <= level) + np.count_nonzero(node_level[: t.n_internal] == level)
        if boxes > MAX_BOXES:
            break
        best = level
    return best


def _tree_layout(t: Tree, nodes: list[str], leaves: list[str]) -> tuple[list[_Box], list[tuple[int, int, int]], int]:
    """Boxes in the order children, then their parent (x is set by :func:`_spread`), edges (parent
    box, child box, 0 left / 1 right) and the level the drawing was cut at (0: drawn whole)."""
    boxes: list[_Box] = []
    edges: list[tuple[int, int, int]] = []
    if t.n_internal == 0:
        return [_Box(0.0, 0, f"v1\n{leaves[0]}", "leaf")], edges, 0
    cut = _cut_level(t)

    def place(ref: int, level: int) -> int:
        if ref < 0:
            boxes.append(_Box(0.0, level, f"v{-ref}\n{leaves[-1 - ref]}", "leaf"))
        elif level == cut:
            first, last = _leaf_range(t, ref)
            boxes.append(_Box(0.0, level, f"n{ref + 1} …\n{last - first + 1} leaves\nv{first + 1}–v{last + 1}", "more"))
        else:
            kids = [place(int(t.left[ref]), level + 1), place(int(t.right[ref]), level + 1)]
            boxes.append(_Box(0.0, level, f"n{ref + 1}\n{nodes[ref]}", "node"))
            edges.extend((len(boxes) - 1, kid, side) for side, kid in enumerate(kids))
        return len(boxes) - 1

    place(0, 0)
    return boxes, edges, cut if any(b.kind == "more" for b in boxes) else 0


def _leaf_range(t: Tree, node: int) -> tuple[int, int]:
    """First and last leaf (left to right) under internal node ``node``: a contiguous range."""
    first, last = node, node
    while first >= 0:
        first = int(t.left[first])
    while last >= 0:
        last = int(t.right[last])
    return -1 - first, -1 - last


_BOX_STYLE = {
    "node": {"fc": "#eef2f8", "ec": "#5a7297", "ls": "-"},
    "leaf": {"fc": "#e9f5e9", "ec": "#4d8a4d", "ls": "-"},
    "more": {"fc": "#fdf5e2", "ec": "#b08a2e", "ls": "--"},
}


def _box_width(b: _Box) -> float:
    """Inches a box takes, its padding included."""
    return _text_width(b.text) + 0.15


def _spread(boxes: list[_Box], edges: list[tuple[int, int, int]]) -> list[_Box]:
    """The boxes with x in inches: the bottom ones side by side, each as wide as its text plus a
    margin, a node over the middle of its children; the margins widened until no two boxes on a
    level overlap."""
    kids: dict[int, list[int]] = {}
    for parent, child, _ in edges:
        kids.setdefault(parent, []).append(child)
    xs: list[float] = []
    for margin in np.arange(0.15, 6.0, 0.05):
        xs, right = [], 0.1
        for i, b in enumerate(boxes):  # children come before their parent
            if i in kids:
                xs.append((xs[kids[i][0]] + xs[kids[i][1]]) / 2)
            else:
                xs.append(right + _box_width(b) / 2 + margin / 2)
                right += _box_width(b) + margin
        if _apart(boxes, xs):
            break
    return [replace(b, x=float(x)) for b, x in zip(boxes, xs)]


def _apart(boxes: list[_Box], xs: list[float]) -> bool:
    """Whether boxes on the same level keep 0.1 inch apart."""
    by_level: dict[int, list[int]] = {}
    for i, b in enumerate(boxes):
        by_level.setdefault(b.level, []).append(i)
    for row in by_level.values():
        row.sort(key=lambda i: xs[i])
        for i, j in zip(row, row[1:]):
            if xs[j] - xs[i] < (_box_width(boxes[i]) + _box_width(boxes[j])) / 2 + 0.1:
                return False
    return True


def _draw_tree(ax: Axes, boxes: list[_Box], edges: list[tuple[int, int, int]], levels: int, width: float) -> None:
    ax.set_xlim(0, width)
    ax.set_ylim(-(levels - 1) - 0.45, 0.45)
    ax.axis("off")
    for parent, child, side in edges:
        p, c = boxes[parent], boxes[child]
        ax.plot([p.x, c.x], [-p.level, -c.level], color=(LEFT, RIGHT)[side], lw=0.9, zorder=1)
        ax.text(p.x + 0.4 * (c.x - p.x), -p.level - 0.4, YES_NO[side], color=(LEFT, RIGHT)[side],
                fontsize=FONT - 1, ha="right" if side == 0 else "left", va="center", zorder=2)
    for b in boxes:
        style = _BOX_STYLE[b.kind]
        ax.text(b.x, -b.level, b.text, ha="center", va="center", zorder=3, linespacing=1.15,
                bbox={"boxstyle": "round,pad=0.35", "fc": style["fc"], "ec": style["ec"], "ls": style["ls"], "lw": 0.8})
