"""Forms: functions from the IR to an ONNX graph. ``FORMS`` is the one registry of them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx

from tree2mat.errors import OptionError
from tree2mat.forms import _exact, bitvector, sign, soft, traverse
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
    #: Element types its path-matching MatMul can run in (``--matmul``); exact forms only.
    matmul: tuple[str, ...] = ("float32",)
    #: Exact forms: ``exit_layout(ens, dtype)``, the ``(order, slots, index_dtype)`` of the exit
    #: index of the graph of input ``dtype`` (see :class:`_layout.Exit`), by which ``verify``
    #: reads it and maps it to leaf ids.
    exit_layout: Callable[[Ensemble, np.dtype], tuple[np.ndarray, np.ndarray, np.dtype]] | None = None


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
            matmul=tuple(_exact.MATMUL_DTYPES),
            exit_layout=_exact.exit_layout,
        ),
        FormSpec(
            name="bitvector",
            build=bitvector.build,
            exact=True,
            summary="QuickScorer as a matrix (Rethink Traversal Alg. 2): leftmost ArgMax(Q z), all trees in one MatMul",
            constant_bytes=_exact.dense_constant_bytes,
            bytes_per_row=_exact.dense_bytes_per_row,
            matmul=tuple(_exact.MATMUL_DTYPES),
            exit_layout=_exact.exit_layout,
        ),
        FormSpec(
            name="traverse",
            build=traverse.build,
            exact=True,
            summary="root-to-leaf walk, one level per step for all trees at once (GatherElements); memory grows with nodes, not nodes x leaves",
            constant_bytes=traverse.constant_bytes,
            bytes_per_row=traverse.bytes_per_row,
            exit_layout=traverse.exit_layout,
        ),
        FormSpec(
            name="soft",
            build=soft.build_soft,
            exact=False,
            summary="differentiable approximation (Decision Machines eq. 12-13): leaf probabilities as products of sigmoids at temperature tau; exact only as tau -> 0",
            constant_bytes=soft.constant_bytes,
            bytes_per_row=soft.bytes_per_row,
        ),
        FormSpec(
            name="softmax",
            build=soft.build_softmax,
            exact=False,
            summary="differentiable approximation (Decision Machines eq. 11, Rethink Traversal Alg. 5): softmax over the leaves' template scores at temperature tau; exact only as tau -> 0",
            constant_bytes=soft.constant_bytes,
            bytes_per_row=soft.bytes_per_row,
        ),
    )
}

#: Not a form: picks the fastest exact form within the memory budget (tree2mat.forms.auto).
AUTO = "auto"
DEFAULT_FORM: str = AUTO


def check_form(name: str) -> FormSpec:
    """The form called ``name``; an OptionError naming the choices for any other name."""
    if name not in FORMS:
        raise OptionError(f"unknown form {name!r}; choose one of {AUTO}, {', '.join(FORMS)}")
    return FORMS[name]

__all__ = ["AUTO", "DEFAULT_FORM", "check_form", "DEFAULT_OPSET", "FORMS", "MIN_OPSET", "FormSpec", "GraphOptions"]
