"""``tree2mat inspect --tree K --png FILE``: one tree drawn beside its matrices.

On the left the tree: internal nodes ``n1..`` (breadth-first) with their tests, leaves ``v1..``
(left to right) with their values, as ``inspect --tree K`` numbers them. On the right the papers'
matrices as heatmaps: ``S`` with the thresholds ``t``, ``B`` with the leaf values ``v``, and
QuickScorer's bitvector. A tree of up to :data:`DETAIL_LEAVES` leaves is drawn in full with each
matrix cell's value written in it; a larger one is summarized: the tree down to the depth where at
most :data:`MAX_BOXES` boxes fit side by side (each deeper subtree one box naming its leaves), the
heatmaps without cell text and with thinned tick labels. Numbers are shown to 4 significant digits
(``inspect --tree K`` prints them in full). The PNG's bytes depend only on the tree and the
matplotlib version: matplotlib's default style, no timestamp or software name in the file.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from tree2mat.errors import OptionError, require
from tree2mat.inspect import matrices_of
from tree2mat.ir.core import Comparison, Ensemble, Tree

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: Trees with up to this many leaves are drawn in full, every matrix cell labelled.
DETAIL_LEAVES = 16
#: Most boxes side by side at the bottom of the drawn tree; deeper subtrees become one box each.
MAX_BOXES = 16
#: Most levels of the tree drawn (the root is level 0).
MAX_LEVELS = 6
FONT = 7.5  # points
CHAR = 0.058  # inches: a character of DejaVu Sans at FONT points, on average
DPI = 110
LEFT, RIGHT, YES_NO = "#4575b4", "#d73027", ("yes", "no")


def require_matplotlib(what: str) -> Any:
    """The matplotlib module, or a MissingDependencyError naming the extra that installs it."""
    return require("matplotlib", what)


def draw_tree(ens: Ensemble, tree: int, feature_names: Sequence[str] | None = None, model_name: str | None = None) -> bytes:
    """A PNG of tree ``tree`` of ``ens`` beside its matrices. ``feature_names``: default the
    model's, else ``x1..``; ``model_name`` (e.g. the file name) goes into the title."""
    fig = tree_figure(ens, tree, feature_names, model_name)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)  # the Agg renderer, whatever backend pyplot uses
    buf = io.BytesIO()
    with _style():
        fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def tree_figure(ens: Ensemble, tree: int, feature_names: Sequence[str] | None = None, model_name: str | None = None) -> Figure:
    """The matplotlib figure :func:`draw_tree` saves (for tests and notebooks)."""
    require_matplotlib("drawing a tree")
    from matplotlib.figure import Figure

    mats = matrices_of(ens, tree)
    names = feature_labels(ens, feature_names)
    t = ens.trees[tree]
    nodes, leaves = node_labels(ens, tree, names)
    boxes, edges, cut = _tree_layout(t, nodes, leaves)
    boxes = _spread(boxes, edges)
    mat_w, mat_h, rects = _matrix_rects(mats, names)
    levels = 1 + max(b.level for b in boxes)
    tree_w = max(2.0, max(b.x + _box_width(b) / 2 for b in boxes) + 0.1)
    body_h = max(mat_h, 0.85 * levels + 0.2)
    title = _title(ens, tree, t, mats, model_name, cut)
    width = max(0.25 + tree_w + 0.35 + mat_w, _text_width(title) * (FONT + 1.5) / FONT + 0.3)
    height = 0.55 + body_h
    with _style():
        fig = Figure(figsize=(width, height), dpi=DPI)
        fig.text(0.12 / width, 1 - 0.12 / height, title, va="top", fontsize=FONT + 1.5)
        ax = fig.add_axes(_fraction((0.25, 0.55, tree_w, body_h - 0.1), width, height))
        _draw_tree(ax, boxes, edges, levels, tree_w)
        ox = 0.25 + tree_w + 0.35
        if t.n_internal == 0:
            fig.text((ox + 0.2) / width, 1 - 1.0 / height, "a single leaf: S, t, B and the bitvector are empty", va="top")
            return fig
        for name, (x, y, w, h) in rects.items():
            if name == "note":
                fig.text((ox + x) / width, 1 - (0.55 + y) / height, _NOTE_TITLE, va="top", fontweight="bold")
                fig.text((ox + x) / width, 1 - (0.75 + y) / height, _NOTE, va="top", fontsize=FONT - 0.5, linespacing=1.25)
                continue
            _draw_matrix(fig.add_axes(_fraction((ox + x, 0.55 + y, w, h), width, height)), name, mats, names, ens, t)
    return fig


def feature_labels(ens: Ensemble, feature_names: Sequence[str] | None = None) -> list[str]:
    """``feature_names``, else the model's feature names, else ``x1..`` (as ``inspect`` prints)."""
    names = feature_names if feature_names is not None else ens.feature_names
    if names is None:
        return [f"x{f + 1}" for f in range(ens.n_features)]
    if len(names) != ens.n_features:
        raise OptionError(f"{len(names)} feature names for a model of {ens.n_features} features")
    return [str(n) for n in names]


def node_labels(ens: Ensemble, tree: int, feature_names: Sequence[str] | None = None) -> tuple[list[str], list[str]]:
    """The labels :func:`draw_tree` writes into tree ``tree``'s boxes (below the names ``n1``,
    ``v1``): per internal node, breadth-first, its test as two lines, the feature name then
    ``≤ 0.8`` (``<`` for XGBoost), or ``in {..}`` / ``not in {..}`` (categories that go left)
    for a categorical node; per leaf, left to right, its value (up to three: ``[1, 0, 0]``; more:
    ``argmax <class or output>: <its value>``)."""
    matrices_of(ens, tree)  # checks the index
    t = ens.trees[tree]
    names = feature_labels(ens, feature_names)
    cat_row = {int(node): m for m, node in enumerate(t.cat_nodes)}
    op = "≤" if ens.comparison is Comparison.LE else "<"
    nodes = [
        f"{_short(names[int(t.feature[i])]) if t.feature[i] < ens.n_features else 'W x'}\n"
        + (_categorical_test(t, cat_row[i]) if i in cat_row else f"{op} {_num(t.threshold[i])}")
        for i in range(t.n_internal)
    ]
    outputs = _output_names(ens, t.n_outputs)
    return nodes, [_leaf_text(t, j, outputs) for j in range(t.n_leaves)]


def _style() -> Any:
    """matplotlib's default style (not the user's matplotlibrc) at our font size; a '$' in a
    feature name is just a character (no mathtext)."""
    import matplotlib.style

    return matplotlib.style.context(["default", {"font.size": FONT, "axes.titlesize": FONT, "text.parse_math": False}])


# ------------------------------------------------------------------------------------- labels


def _num(v: float, digits: int = 4) -> str:
    text = f"{v:.{digits}g}"
    return f"{v:.0f}" if "e+" in text and abs(v) < 1e6 else text  # 16384, not 1.638e+04


def _short(name: str, most: int = 24) -> str:
    return name if len(name) <= most else name[: most - 1] + "…"


def _categorical_test(t: Tree, m: int) -> str:
    """A categorical node's test for going left (NaN goes as default_left says, not shown)."""
    vals, left = t.cat_values[m], t.cat_left[m]
    listed = ~np.isnan(vals)
    if t.other_left[m]:  # left unless listed as going right
        return f"not in {_set(vals[listed & ~left])}"
    return f"in {_set(vals[listed & left])}"


def _set(vals: np.ndarray, most: int = 5) -> str:
    items = [_num(v) for v in np.sort(vals)]
    if len(items) > most:
        items = items[: most - 1] + [f"+{len(items) - most + 1} more"]
    return "{" + ", ".join(items) + "}"


def _leaf_text(t: Tree, j: int, outputs: list[str]) -> str:
    if t.linear_const is not None and t.linear_feature is not None:
        terms = int(np.count_nonzero(t.linear_feature[j] >= 0))
        return f"{_num(t.linear_const[j])}\n+ {terms} linear terms" if terms else _num(t.linear_const[j])
    row = t.value[j]
    if row.size == 1:
        return _num(row[0])
    if row.size <= 3:
        return "[" + ", ".join(_num(v, 3) for v in row) + "]"
    top = int(np.argmax(row))
    return f"argmax {outputs[top]}: {_num(row[top], 3)}"


def _output_names(ens: Ensemble, k: int) -> list[str]:
    if len(ens.classes) == 1 and len(ens.classes[0]) == k:
        return [str(c) for c in ens.classes[0].tolist()]
    return [f"k{i}" for i in range(k)]


def _title(ens: Ensemble, index: int, t: Tree, mats: dict[str, np.ndarray], model_name: str | None, cut: int) -> str:
    depth = int(mats["depth"].max(initial=0))
    head = f"{model_name} ({ens.source})" if model_name else ens.source or "model"
    line = (f"{head}: tree {index} (0-based, of {ens.n_trees}) · {t.n_internal} internal nodes (n1.. breadth-first), "
            f"{t.n_leaves} leaves (v1.. left to right), depth {depth}, {ens.n_features} features")
    notes = [f"tree drawn down to level {cut}, each deeper subtree one box"] if cut else []
    if t.n_leaves > DETAIL_LEAVES:
        notes.append("matrices without cell values, labels thinned")
    return line + ("\n" + "; ".join(notes) if notes else "")


def _text_width(text: str) -> float:
    return CHAR * max(len(line) for line in text.split("\n"))


# --------------------------------------------------------------------------------------- tree


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


# ----------------------------------------------------------------------------------- matrices


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


def _fraction(rect: tuple[float, float, float, float], width: float, height: float) -> tuple[float, float, float, float]:
    """(x, y from the top, w, h) in inches -> matplotlib's figure fractions."""
    x, y, w, h = rect
    return x / width, 1 - (y + h) / height, w / width, h / height


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
