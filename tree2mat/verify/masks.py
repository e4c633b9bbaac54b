"""A graph with a tree mask (``convert --tree-mask``): its second input read and checked
(:func:`tree_mask`), fed with every tree kept for the model's own outputs, and with each row's
trees cut after a random count for the staged check (:class:`TreeMask`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx

from tree2mat.errors import VerificationError
from tree2mat.forms._graph import TREE_MASK, TREE_MASK_SHAPES
from tree2mat.ir.core import Ensemble
from tree2mat.runtimes import graph_inputs


@dataclass(frozen=True)
class TreeMask:
    """The graph's tree mask: ``kind`` (``request``: [T]; ``rows``: [N, T]) over ``n_trees``."""

    kind: str
    n_trees: int

    def every_tree(self, n_rows: int) -> dict[str, np.ndarray]:
        """The feed that keeps every tree: the graph is then the model."""
        return {TREE_MASK: np.ones(self._shape(n_rows), bool)}

    def staged(self, n_rows: int, seed: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """A feed of the first k trees (``request``: one k for the rows; ``rows``: a k per row),
        k drawn from 1..T by ``seed``, and the trees each row keeps, bool [N, T]."""
        rng = np.random.default_rng(seed)
        cuts = rng.integers(1, self.n_trees + 1, 1 if self.kind == "request" else n_rows)
        keep = np.arange(self.n_trees)[None, :] < cuts[:, None]
        feed = keep[0] if self.kind == "request" else keep
        return {TREE_MASK: feed}, np.broadcast_to(keep, (n_rows, self.n_trees))

    def _shape(self, n_rows: int) -> tuple[int, ...]:
        return (self.n_trees,) if self.kind == "request" else (n_rows, self.n_trees)


def tree_mask(model: onnx.ModelProto, ens: Ensemble) -> TreeMask | None:
    """The graph's tree mask, None without one; a VerificationError where the graph's second
    input is no tree mask of this model's trees. (A graph of one input per column, a pipeline's
    with string columns, has none.)"""
    if len(model.graph.input) < 2 or graph_inputs(model)[0] is None:
        return None
    second = model.graph.input[1]
    tt = second.type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else d.dim_param or None for d in tt.shape.dim]
    kinds = {kind: shape(ens.n_trees) for kind, shape in TREE_MASK_SHAPES.items()}
    kind = next((k for k, shape in kinds.items() if shape == dims), None)
    if second.name != TREE_MASK or tt.elem_type != onnx.TensorProto.BOOL or kind is None:
        raise VerificationError(
            f"the ONNX graph's second input {second.name!r} is no tree mask of this model's {ens.n_trees} trees "
            f"(a tree2mat graph's is {TREE_MASK!r}, bool, [{ens.n_trees}] or [N, {ens.n_trees}])"
        )
    return TreeMask(kind, ens.n_trees)
