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

Here the figure is put together; ``_tree`` lays out and draws the tree, ``_matrices`` the
heatmaps, and ``_labels`` holds the text both write and the measures they share.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tree2mat.errors import require
from tree2mat.inspect import matrices_of
from tree2mat.ir.core import Ensemble
from tree2mat.pictures._labels import CHAR, DETAIL_LEAVES, FONT, LEFT, RIGHT, _text_width, _title, feature_labels, node_labels
from tree2mat.pictures._matrices import _NOTE, _NOTE_TITLE, _draw_matrix, _matrix_rects
from tree2mat.pictures._tree import MAX_BOXES, MAX_LEVELS, YES_NO, _box_width, _draw_tree, _spread, _tree_layout

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "draw_tree", "tree_figure", "feature_labels", "node_labels", "require_matplotlib",
    "DETAIL_LEAVES", "MAX_BOXES", "MAX_LEVELS", "FONT", "CHAR", "DPI", "LEFT", "RIGHT", "YES_NO",
]

DPI = 110


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


def _style() -> Any:
    """matplotlib's default style (not the user's matplotlibrc) at our font size; a '$' in a
    feature name is just a character (no mathtext)."""
    import matplotlib.style

    return matplotlib.style.context(["default", {"font.size": FONT, "axes.titlesize": FONT, "text.parse_math": False}])


def _fraction(rect: tuple[float, float, float, float], width: float, height: float) -> tuple[float, float, float, float]:
    """(x, y from the top, w, h) in inches -> matplotlib's figure fractions."""
    x, y, w, h = rect
    return x / width, 1 - (y + h) / height, w / width, h / height
