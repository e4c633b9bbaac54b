"""A form written as a new form is written: this one file and one entry in ``FORMS`` (the tests
in test_extending.py add the entry). It is the bitvector machine under its own name and cost
model: exact, so verify checks its routing as any exact form's."""

from __future__ import annotations

import onnx

from tree2mat.forms import _exact, bitvector
from tree2mat.forms._graph import GraphOptions
from tree2mat.forms._spec import FormSpec
from tree2mat.ir.core import Ensemble


def build(ens: Ensemble, opts: GraphOptions) -> onnx.ModelProto:
    return _exact.build(ens, opts, "toy", bitvector.exit_leaf)


def us_per_row(ens: Ensemble) -> float:
    return 1e-9  # cheaper than every built-in form: auto picks it for --target onnxruntime wherever it fits


FORM = FormSpec(
    name="toy",
    build=build,
    exact=True,
    summary="a toy form: the bitvector machine under another name",
    constant_bytes=_exact.dense_constant_bytes,
    bytes_per_row=_exact.dense_bytes_per_row,
    us_per_row=us_per_row,
    exit_layout=_exact.exit_layout,
    proven_on=("onnxruntime",),
)
