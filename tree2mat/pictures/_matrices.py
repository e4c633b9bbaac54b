"""The matrices half of a tree's picture: where each heatmap goes (S or W and t on top, with a note
on how the matrices route a row; B, v and the bitvector below) and each heatmap drawn."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tree2mat.ir.core import Ensemble, Tree
from tree2mat.pictures._labels import CHAR, DETAIL_LEAVES, FONT, LEFT, RIGHT, _num, _output_names, _short, _text_width

if TYPE_CHECKING:
    from matplotlib.axes import Axes


_TITLES = {"S": "S: node × feature", "W": "W: node × feature", "t": "t", "B": "B: leaf × node", "v": "v", "bitvector": "bitvector: leaf × node"}
_CAPTIONS = {
    "S": "1: the feature\nthe node tests",
    "W": "the weights of the\nfeatures a node sums\n(W x <= t)",
    "t": "thresholds",
    "B": "-1: leaf in the node's\nleft subtree, +1: right,\n0: off the leaf's path",
    "v": "leaf\nvalues",
    "bitvector": "QuickScorer: 0 iff\nthe leaf is in the node's\nleft subtree",
    "note": "",
}
_NOTE_TITLE = "How the matrices route a row x"
_NOTE = """h: -1 at a node whose test holds, +1 if not
exit leaf: the row of B with B h = depth
    (its number of nodes on the path)
output: the exit leaf's row of v
QuickScorer: AND the bitvector columns
    of the nodes whose test fails; the exit
    leaf is the leftmost 1 left"""


def _matrix_rects(mats: dict[str, np.ndarray], names: list[str]) -> tuple[float, float, dict[str, tuple[float, float, float, float]]]:
    """Where each heatmap goes, in inches from the top left of the matrix area (S and t on top;
    B, v and the bitvector below, each with its title above and caption below); and the area's
    width and height."""
    n_leaf, n_int = mats["B"].shape
    sel = "W" if "W" in mats else "S"
    n_feat, k = mats[sel].shape[1], mats["v"].shape[1]
    detail = n_leaf <= DETAIL_LEAVES
    cell = (0.3 if n_leaf <= 8 else 0.25) if detail else 4.6 / n_leaf
    label = 0.45 if detail else 0.5  # room for the row labels n1.., v1..
    s_w = max(n_feat * min(cell, 5.0 / n_feat), 0.4) if detail else min(max(n_feat * 0.15, 0.8), 3.0)
    digits = 4 if k == 1 else 3
    v_cell = max(0.45, max(len(_num(x, digits)) for x in mats["v"].ravel()) * CHAR + 0.1)
    v_w = min(k * v_cell, 6.0) if detail else min(k * 0.15, 1.5)
    rows = [
        (0.3 + min(max(len(n) for n in names), 24) * CHAR + 0.1, n_int * cell,
         [(sel, label, s_w)] + ([("t", 0.1, 0.6)] if detail else [])),
        (0.3 + 0.25, n_leaf * cell, [("B", label, n_int * cell), ("v", 0.12, v_w), ("bitvector", 0.15 + label, n_int * cell)]),
    ]
    rects: dict[str, tuple[float, float, float, float]] = {}
    y = width = 0.0
    for row, (head, h, blocks) in enumerate(rows):
        x = 0.0
        for name, gap, w in blocks:
            x += gap
            rects[name] = (x, y + head, w, h)
            x += max(w, _text_width(_TITLES[name]) + 0.1, _text_width(_CAPTIONS[name]) + 0.1)
        bottom = head + h + 0.2 + 0.13 * max(_CAPTIONS[name].count("\n") + 1 for name, _, _ in blocks) + 0.15
        if row == 0:  # the note beside S and t
            note_w, note_h = max(_text_width(_NOTE), _text_width(_NOTE_TITLE)) + 0.1, 0.35 + 0.14 * (_NOTE.count("\n") + 1)
            rects["note"] = (x + 0.35, y, note_w, note_h)
            x, bottom = x + 0.35 + note_w, max(bottom, note_h + 0.2)
        width, y = max(width, x), y + bottom
    return width + 0.1, y, rects


def _draw_matrix(ax: Axes, name: str, mats: dict[str, np.ndarray], names: list[str], ens: Ensemble, t: Tree) -> None:
    from matplotlib.colors import BoundaryNorm, ListedColormap, Normalize

    n_leaf, n_int = mats["B"].shape
    nodes, leaves = [f"n{i + 1}" for i in range(n_int)], [f"v{j + 1}" for j in range(n_leaf)]
    detail = n_leaf <= DETAIL_LEAVES
    if name == "S":
        _heatmap(ax, mats["S"], ListedColormap(["white", "#3a7d44"]), BoundaryNorm([-0.5, 0.5, 1.5], 2),
                 nodes, names, "S", detail, rotate=True)
    elif name == "W":
        top = float(np.abs(mats["W"]).max()) or 1.0
        _heatmap(ax, mats["W"], "RdBu", Normalize(-top, top), nodes, names, "W", detail, rotate=True,
                 texts=[[_num(x, 2) if x else "" for x in row] for row in mats["W"]] if detail else None)
    elif name == "t":
        _heatmap(ax, np.zeros((n_int, 1)), ListedColormap(["#f7f7f7"]), Normalize(0, 1), [], [], "t", detail,
                 texts=[["cat" if i in t.cat_nodes else _num(v)] for i, v in enumerate(mats["t"])])
    elif name in ("B", "bitvector"):
        b = name == "B"
        cmap = ListedColormap([LEFT, "white", RIGHT] if b else [LEFT, "#e6e6e6"])
        norm = BoundaryNorm([-1.5, -0.5, 0.5, 1.5] if b else [-0.5, 0.5, 1.5], 3 if b else 2)
        _heatmap(ax, mats[name], cmap, norm, leaves, nodes, name, detail, signed=b)
    else:
        v = mats["v"]
        lo, hi = float(v.min()), float(v.max())
        outputs = [_short(o, 6) for o in _output_names(ens, v.shape[1])]
        _heatmap(ax, v, "YlGn", Normalize(lo, hi if hi > lo else lo + 1), [], outputs, "v", detail,
                 texts=[[_num(x, 4 if v.shape[1] == 1 else 3) for x in row] for row in v])


def _heatmap(ax: Axes, m: np.ndarray, cmap: Any, norm: Any, rows: list[str], cols: list[str], name: str, detail: bool, *,
             rotate: bool = False, signed: bool = False, texts: list[list[str]] | None = None) -> None:
    """``m`` as coloured cells; on a small matrix each cell's value written in it and a white grid."""
    n_rows, n_cols = m.shape
    ax.imshow(m, cmap=cmap, norm=norm, aspect="auto", interpolation="nearest")
    ax.set_title(_TITLES[name], loc="left", fontsize=FONT, fontweight="bold", pad=4)
    ax.annotate(_CAPTIONS[name], (0, 0), xycoords="axes fraction", xytext=(0, -4), textcoords="offset points",
                va="top", fontsize=FONT - 0.5, color="#444444", linespacing=1.1)
    ax.xaxis.tick_top()
    ax.tick_params(length=2, pad=1.5, labelsize=FONT - 0.5)
    fig_w, fig_h = ax.get_figure().get_size_inches()  # type: ignore[union-attr]
    width, height = ax.get_position().width * fig_w, ax.get_position().height * fig_h
    x_gap = 0.14 if rotate or not cols else 0.9 * CHAR * max(len(c) for c in cols) + 0.05  # inches a label needs
    ticks = _ticks(n_cols, int(width / x_gap)) if cols else []
    ax.set_xticks(ticks, [cols[i] for i in ticks], rotation=90 if rotate else 0)
    ticks = _ticks(n_rows, int(height / (0.14 if detail else 0.28))) if rows else []
    ax.set_yticks(ticks, [rows[i] for i in ticks])
    for side in ax.spines.values():
        side.set_linewidth(0.6)
    if not detail or min(width / n_cols, height / n_rows) < 0.15:  # no room for the values
        return
    ax.set_xticks(np.arange(n_cols + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(n_rows + 1) - 0.5, minor=True)
    ax.grid(which="minor", color="white", lw=1.2)
    ax.tick_params(which="minor", length=0)
    rgba = ax.images[0].to_rgba(m)  # the cells' colours
    for (r, c), value in np.ndenumerate(m):
        text = texts[r][c] if texts is not None else ("+1" if signed and value == 1 else f"{value:g}")
        dark = float(np.dot(np.asarray(rgba[r, c, :3]), [0.299, 0.587, 0.114])) < 0.55
        faint = texts is None and value == 0 and not dark
        ax.text(c, r, text, ha="center", va="center", fontsize=FONT - 0.5,
                color="white" if dark else ("#b0b0b0" if faint else "black"))


def _ticks(n: int, most: int) -> list[int]:
    """Tick positions: all of 0..n-1 if at most ``most``, else every step-th (1, 2, 5, 10, ..)."""
    if n <= most:
        return list(range(n))
    steps = [s * 10**p for p in range(8) for s in (1, 2, 5)]
    step = next((s for s in steps if n / s <= max(most, 1)), steps[-1])
    return list(range(0, n, step)) if step <= 2 else [0] + list(range(step - 1, n, step))  # n1, n5, n10, ..
