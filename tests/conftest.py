"""Shared test helpers: one way to run a graph, one way to compare (``tree2mat.verify.compare``)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from tree2mat.verify import compare, default_atol, DEFAULT_RTOL


def run_onnx(model: onnx.ModelProto, X: np.ndarray) -> dict[str, np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    outs = sess.run(None, {sess.get_inputs()[0].name: X})
    return dict(zip([o.name for o in sess.get_outputs()], outs))


def assert_standard_graph(model: onnx.ModelProto) -> None:
    """Every emitted graph: full checker, standard domain only, no ai.onnx.ml."""
    onnx.checker.check_model(model, full_check=True)
    assert {n.domain for n in model.graph.node} <= {"", "ai.onnx"}
    assert all(o.domain in ("", "ai.onnx") for o in model.opset_import)


def assert_matches(got: dict[str, np.ndarray], expected: dict[str, np.ndarray], X: np.ndarray, ens, atol=None, rtol=DEFAULT_RTOL) -> None:
    """Each expected output present and equal (labels, leaves exactly; values within tolerance)."""
    atol = default_atol(ens) if atol is None else atol
    for name, exp in expected.items():
        assert name in got, f"output {name!r} missing; graph has {sorted(got)}"
        rep = compare(name, "cpu", got[name], np.asarray(exp), X, atol, rtol, exact=name in ("label", "leaves"))
        assert rep.passed, f"{name}: {rep.mismatches} mismatches, {rep.problem} first: {rep.first_mismatches[:2]}"


@pytest.fixture(scope="session")
def has_cuda() -> bool:
    return "CUDAExecutionProvider" in ort.get_available_providers()
