"""The ``sign`` form (Decision Machines, eq. 5, 8, 9): exact.

Per tree: h = sgn(Sx - t) in {-1, +1}^I with sgn(0) = -1 (built from a comparison, never from
``Sign``), template scores B h, and the exit leaf is the unique one with B h = depth, found as
``ArgMax(B h - depth)``. With h = 2r - 1 (r: 1 where the row goes right) that is
``ArgMax(2 B r - (B 1 + depth))``, all trees as one batched MatMul: 2B is [T, L, I], r [T, I, N].
Only integers (entries of h and B, sums bounded by the depth) pass through MatMul, so the result is
exact in fp32, TF32 and fp16 alike; ``--matmul float16`` / ``int8`` (MatMulInteger) run it so.
"""

from __future__ import annotations

import onnx

from tree2mat.forms import _exact, _templates
from tree2mat.forms._graph import GraphOptions
from tree2mat.ir.core import Ensemble


def build(ens: Ensemble, opts: GraphOptions) -> onnx.ModelProto:
    return _exact.build(ens, opts, "sign", _templates.exit_leaf)


FORM = _exact.dense_form(
    "sign", build, "Decision Machines eq. 5: ArgMax(B sgn(Sx - t) - depth), all trees in one MatMul", _templates.COST,
)
