"""The ``bitvector`` form (QuickScorer in matrix form: Rethink Decision Tree Traversal, Alg. 2;
Decision Trees as Binary Network, eq. 1-3): exact.

Per tree: z in {0, 1}^I with 1 where the node's test fails (the row goes right), and the
bit-vector matrix Q [L, I] with Q[l, i] = 0 iff leaf l lies in node i's left subtree. A false
node rules out every leaf of its left subtree, so (Q z)[l] = sum(z) exactly for the leaves no
false node rules out, and the exit leaf is the leftmost of them (any leaf left of it is in the
left subtree of a node where the row went right). ``ArgMax`` returns the first maximum, so the
exit leaf is ``ArgMax(Q z)``: no bias, no depth. Only integers pass through the batched MatMul
(z [T, N, I] times Q^T [T, I, L]), exact in fp32, TF32 and fp16 (``--matmul float16`` / ``int8`` run it so).
"""

from __future__ import annotations

import onnx

from tree2mat.forms import _exact, _layout
from tree2mat.forms._graph import GraphBuilder, GraphOptions
from tree2mat.ir.core import Ensemble
from tree2mat.ir.matrices import bitvector_matrix


def exit_leaf(g: GraphBuilder, ens: Ensemble, st: _layout.Stacked, x: str, opts: GraphOptions) -> str:
    left = _layout.decision_bits(g, ens, st, x)
    # z = 1 where the test fails. Padding leaves score 0 (never above a real exit leaf's sum(z),
    # and after it on a tie); padding nodes are columns of 0.
    z = g.op("Cast", [g.op("Not", [left], "go_right")], "z", to=onnx.TensorProto.FLOAT)
    qt = _exact.padded_matrices(ens, st, bitvector_matrix, 0.0)
    scores = _exact.path_scores(g, st, z, qt, opts.matmul, st.n_internal, "bitvector")
    return g.op("ArgMax", [scores], out=_layout.LEAF_TENSOR, axis=2, keepdims=0)


def build(ens: Ensemble, opts: GraphOptions) -> onnx.ModelProto:
    return _exact.build(ens, opts, "bitvector", exit_leaf)
