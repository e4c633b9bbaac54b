"""Graphs with inputs besides the rows (a mask over the trees, ``tree_mask``: bool, [N, T] one per
row or [T] one for all), on every runtime: a small graph built here, ``Where(mask, X[:, :T], 0)``
and its ``ReduceSum`` over the trees, against the same formula in numpy, run whole and in chunks
of rows by GraphRunner (a per-row mask cut with the rows, a shared one passed whole). An extra
input missing, unknown or of the wrong length is a one-line VerificationError naming it.

The rows are multiples of 1/4 in [-4, 4): every sum of them is exact in float32, so the runtimes'
sums in any order equal numpy's."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tree2mat.errors import VerificationError
from tree2mat.runtimes import RUNTIMES, WEBGPU_IMPORTS, feeds, graph_inputs
from tree2mat.verify import GraphRunner
from tree2mat.verify.runners import run_graph

F, T, N = 5, 3, 10
#: Every runtime but WebGPU's (a browser: tests/runtimes/test_webgpu.py, make test-webgpu).
LOCAL = [name for name in RUNTIMES if name not in {n for n, _, _ in WEBGPU_IMPORTS}]
#: Runtimes in Node.js: skipped where node or their npm package is missing (as in test_runtimes.py).
NODE = ("onnxruntime-node", "onnxruntime-web")
#: Runtimes whose test here takes about a second or more (IREE compiles the graph; Node.js starts a
#: process a chunk): over tests/tiers.py's SLOW_S.
SLOW = ("iree", *NODE)


def masked_graph(mask_shape: list[str | int], row_input: str = "input") -> onnx.ModelProto:
    """Outputs ``masked`` = Where(tree_mask, X[:, :T], 0), [N, T], and ``total``, its sum over
    the trees, [N]; the rows ``row_input`` float32 [N, F], ``tree_mask`` bool of ``mask_shape``."""
    consts = {"starts": [0], "ends": [T], "axes": [1], "axis": [1]}
    inits = [numpy_helper.from_array(np.array(v, dtype=np.int64), n) for n, v in consts.items()]
    inits.append(numpy_helper.from_array(np.array(0.0, dtype=np.float32), "zero"))
    nodes = [
        helper.make_node("Slice", [row_input, "starts", "ends", "axes"], ["head"]),
        helper.make_node("Where", ["tree_mask", "head", "zero"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", "axis"], ["total"], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes, "masked",
        [helper.make_tensor_value_info(row_input, TensorProto.FLOAT, ["N", F]), helper.make_tensor_value_info("tree_mask", TensorProto.BOOL, mask_shape)],
        [helper.make_tensor_value_info("masked", TensorProto.FLOAT, ["N", T]), helper.make_tensor_value_info("total", TensorProto.FLOAT, ["N"])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    onnx.checker.check_model(model, full_check=True)
    return model


def rows_and_masks(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = (rng.integers(-16, 16, size=(N, F)) / 4).astype(np.float32)
    masks = rng.random((N, T)) < 0.5
    masks[0], masks[1], masks[2] = True, False, [True, False, True]  # (every tree on in one row, none in another; the one mask: row 2's)
    return X, masks


def expected(X: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    masked = np.where(mask, X[:, :T], np.float32(0))
    return masked, masked.sum(axis=1, dtype=np.float32)


def needs(runtime: str) -> None:
    if runtime in NODE and not RUNTIMES[runtime].available():
        pytest.skip(f"{runtime}: no node on the PATH or no npm package (make test installs it when node is present)")


@pytest.mark.parametrize("per_row", [True, False], ids=["mask-per-row", "one-mask"])
@pytest.mark.parametrize("runtime", [pytest.param(r, marks=pytest.mark.slow) if r in SLOW else r for r in LOCAL])
def test_extra_inputs_run_on_every_runtime(runtime, per_row):
    """Whole and in chunks of 4 rows (the last of 2): each chunk's rows with their own masks."""
    needs(runtime)
    X, masks = rows_and_masks()
    mask = masks if per_row else masks[2]
    runner = GraphRunner(masked_graph(["N", T] if per_row else [T]), "cpu", runtime)
    want_masked, want_total = expected(X, mask)
    for rows_per_chunk in (N, 4):
        got = runner.run(X, rows_per_chunk, {"tree_mask": mask})
        assert got["masked"].dtype == np.float32 and got["total"].dtype == np.float32
        np.testing.assert_array_equal(got["masked"], want_masked)
        np.testing.assert_array_equal(got["total"], want_total)
    assert 0 < np.count_nonzero(want_masked) < N * T and (not per_row or (want_total[0] == X[0, :T].sum() and want_total[1] == 0))
    with pytest.raises(VerificationError, match="input 'tree_mask' was not given") as missing:
        runner.run(X, 4)
    with pytest.raises(VerificationError, match="no extra input 'other'") as unknown:
        runner.run(X, 4, {"tree_mask": mask, "other": mask})
    assert "\n" not in str(missing.value) + str(unknown.value)


def test_a_per_row_mask_must_have_a_row_each():
    runner = GraphRunner(masked_graph(["N", T]), "cpu")
    X, masks = rows_and_masks()
    with pytest.raises(VerificationError, match=r"extra input 'tree_mask' is one per row: shape \(9, 3\) for 10 rows"):
        runner.run(X, 4, {"tree_mask": masks[:9]})


def test_run_graph_passes_extra_inputs_and_the_rows_alone_still_run():
    """run_graph takes the extra inputs; a graph of the rows alone runs as before, and refuses
    an extra input it has not."""
    X, masks = rows_and_masks(1)
    got = run_graph(masked_graph(["N", T]), X, rows_per_chunk=3, extra={"tree_mask": masks})
    np.testing.assert_array_equal(got["total"], expected(X, masks)[1])
    alone = helper.make_graph(
        [helper.make_node("Neg", ["input"], ["y"])], "alone", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", F])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", F])],
    )
    model = helper.make_model(alone, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    np.testing.assert_array_equal(run_graph(model, X, rows_per_chunk=3)["y"], -X)
    with pytest.raises(VerificationError, match=r"no extra input 'tree_mask' \(its extra inputs are none\)"):
        run_graph(model, X, extra={"tree_mask": masks})


def test_which_input_holds_the_rows():
    """The rows: the first input, named "input" and of rank 2, or the only one; several inputs
    otherwise are one per column (feeds cuts the rows' columns among them)."""
    row, extras = graph_inputs(masked_graph(["N", T]))
    assert row == "input" and [i.name for i in extras] == ["tree_mask"]
    columns = masked_graph([T], row_input="age")
    assert graph_inputs(columns) == (None, [])
    X = np.arange(2 * 2, dtype=np.float64).reshape(2, 2)
    fed = feeds(columns)(X, None)
    np.testing.assert_array_equal(fed["age"], X[:, :1].astype(np.float32))
    np.testing.assert_array_equal(fed["tree_mask"], X[:, 1:2].astype(bool))
