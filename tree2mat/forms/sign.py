"""The ``sign`` form (Decision Machines, eq. 5, 8, 9): exact.

Per tree: h = sgn(Sx - t) in {-1, +1}^I with sgn(0) = -1 (built from a comparison, never from
``Sign``), template scores B h, and the exit leaf is the unique one with B h = depth, found as
``ArgMax(B h - depth)``. All trees run as one batched MatMul: h is [T, N, I], B^T is [T, I, L].
Only integers (entries of h and B, sums bounded by the depth) pass through MatMul, so the result is
exact in fp32, TF32 and fp16 alike; ``--matmul float16`` / ``int8`` (MatMulInteger) run it so.
"""

from __future__ import annotations

import numpy as np
import onnx

from tree2mat.forms import _exact, _layout
from tree2mat.forms._graph import GraphBuilder, GraphOptions
from tree2mat.ir.core import Ensemble
from tree2mat.ir.matrices import template_matrix


def template_tensors(ens: Ensemble, st: _layout.Stacked) -> tuple[np.ndarray, np.ndarray]:
    """B^T stacked, float32 [T, I, L], and the depths [T, 1, L]; padding leaves get depth 1 and
    an all-zero row, so their score (-1) is never the maximum (0)."""
    bt = _exact.padded_matrices(ens, st, template_matrix, 0.0)
    depth = np.ones((st.n_trees, 1, st.n_leaves), np.float32)
    for t, tree in enumerate(ens.trees):
        depth[t, 0, : tree.n_leaves] = np.count_nonzero(template_matrix(tree), axis=1)
    return bt, depth


def exit_leaf(g: GraphBuilder, ens: Ensemble, st: _layout.Stacked, x: str, opts: GraphOptions) -> str:
    left = _layout.decision_bits(g, ens, st, x)
    # h = sgn(Sx - t) with sgn(0) = -1: -1 where x <= t holds (go left), +1 where it fails.
    h = g.op("Where", [left, g.const(np.float32(-1), "minus1"), g.const(np.float32(1), "plus1")], "h")
    bt, depth = template_tensors(ens, st)
    scores = _exact.path_scores(g, st, h, bt, opts.matmul, int(depth.max()), "template")
    delta = g.op("Sub", [scores, g.const(depth, "depth")], "score_minus_depth")
    return g.op("ArgMax", [delta], out=_layout.LEAF_TENSOR, axis=2, keepdims=0)


def build(ens: Ensemble, opts: GraphOptions) -> onnx.ModelProto:
    return _exact.build(ens, opts, "sign", exit_leaf)
