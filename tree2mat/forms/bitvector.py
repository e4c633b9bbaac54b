"""The ``bitvector`` form (QuickScorer in matrix form: Rethink Decision Tree Traversal, Alg. 2;
Decision Trees as Binary Network, eq. 1-3): exact.

Per tree: z in {0, 1}^I with 1 where the node's test fails (the row goes right), and the
bit-vector matrix Q [L, I] with Q[l, i] = 0 iff leaf l lies in node i's left subtree. A false
node rules out every leaf of its left subtree, so (Q z)[l] = sum(z) exactly for the leaves no
false node rules out, and the exit leaf is the leftmost of them (any leaf left of it is in the
left subtree of a node where the row went right). ``ArgMax`` returns the first maximum, so the
exit leaf is ``ArgMax(Q z)``: no bias, no depth. Only integers pass through the batched MatMul
(Q [T, L, I] times z [T, I, N]), exact in fp32, TF32 and fp16 (``--matmul float16`` / ``int8`` run it so).
"""

from __future__ import annotations

import numpy as np
import onnx

from tree2mat.forms import _exact, _exit, _nodes, _stack, costs
from tree2mat.forms._graph import GraphBuilder, GraphOptions
from tree2mat.ir.core import Ensemble, Tree
from tree2mat.ir.matrices import bitvector_matrix


def bitvector_scores(tree: Tree) -> tuple[np.ndarray, np.ndarray]:
    """Q and no bias. Padding leaves score 0 (never above a real exit leaf's sum(z), and after it
    on a tie)."""
    q = bitvector_matrix(tree)
    return q, np.zeros(q.shape[0], np.float32)


def exit_leaf(g: GraphBuilder, ens: Ensemble, st: _stack.Stacked, x: _nodes.Compared, opts: GraphOptions) -> _exit.Exit:
    return _exact.exit_by_scores(g, ens, st, x, bitvector_scores, 0.0, opts.matmul, "bitvector")


def build(ens: Ensemble, opts: GraphOptions) -> onnx.ModelProto:
    return _exact.build(ens, opts, "bitvector", exit_leaf)


#: Cost model (microseconds per padded node and leaf, per matrix entry; benchmarks/form_speed.py
#: fits them; one row's run: benchmarks/latency_fit.json, within 26 % on 13 models).
FORM = _exact.dense_form(
    "bitvector", build, "QuickScorer as a matrix (Rethink Traversal Alg. 2): leftmost ArgMax(Q z), all trees in one MatMul",
    costs.dense("bitvector"),
    hummingbird=("gemm",),
)
