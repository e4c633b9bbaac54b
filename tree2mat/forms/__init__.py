"""Forms: functions from the IR to an ONNX graph. ``FORMS`` is the one registry of them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import onnx

from tree2mat.forms import _exact, bitvector, sign, traverse
from tree2mat.forms._graph import DEFAULT_OPSET, MIN_OPSET, GraphOptions
from tree2mat.ir.core import Ensemble


@dataclass(frozen=True)
class FormSpec:
    name: str
    build: Callable[[Ensemble, GraphOptions], onnx.ModelProto]
    exact: bool
    summary: str
    constant_bytes: Callable[[Ensemble], int]
    bytes_per_row: Callable[[Ensemble], int]


FORMS: dict[str, FormSpec] = {
    spec.name: spec
    for spec in (
        FormSpec(
            name="sign",
            build=sign.build,
            exact=True,
            summary="Decision Machines eq. 5: ArgMax(B sgn(Sx - t) - depth), all trees in one MatMul",
            constant_bytes=_exact.dense_constant_bytes,
            bytes_per_row=_exact.dense_bytes_per_row,
        ),
        FormSpec(
            name="bitvector",
            build=bitvector.build,
            exact=True,
            summary="QuickScorer as a matrix (Rethink Traversal Alg. 2): leftmost ArgMax(Q z), all trees in one MatMul",
            constant_bytes=_exact.dense_constant_bytes,
            bytes_per_row=_exact.dense_bytes_per_row,
        ),
        FormSpec(
            name="traverse",
            build=traverse.build,
            exact=True,
            summary="root-to-leaf walk, one level per step for all trees at once (GatherElements); memory grows with nodes, not nodes x leaves",
            constant_bytes=traverse.constant_bytes,
            bytes_per_row=traverse.bytes_per_row,
        ),
    )
}

DEFAULT_FORM = "sign"

__all__ = ["DEFAULT_FORM", "DEFAULT_OPSET", "FORMS", "MIN_OPSET", "FormSpec", "GraphOptions"]
