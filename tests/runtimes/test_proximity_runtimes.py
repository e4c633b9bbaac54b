"""The runtime matrix of the ``proximity`` output: every exact form's proximity graph of the
runtime matrix's random forest and XGBoost model, on every runtime the form is proven on besides
onnxruntime (onnx's reference evaluator, OpenVINO, tract, IREE; onnxruntime-node and -web where
node is present), against the kernel written here from the library's own leaf numbers
(scikit-learn's ``apply``, XGBoost's ``pred_leaf``), and through ``verify --runtime``."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import xgboost as xgb

import tree2mat
from benchmarks._cases import fitted
from tree2mat.runtimes import RUNTIMES, WEBGPU_IMPORTS
from tree2mat.verify import GraphRunner, synthesize

pytestmark = pytest.mark.slow  # (the runtime matrix)

BROWSER = tuple(name for name, _, _ in WEBGPU_IMPORTS)
OTHERS = [name for name in RUNTIMES if name not in ("onnxruntime", *BROWSER)]
NODE = ("onnxruntime-node", "onnxruntime-web")
EXACT = [name for name, spec in tree2mat.FORMS.items() if spec.exact]
PROVEN = [(form, runtime) for form in EXACT for runtime in tree2mat.FORMS[form].proven_on if runtime in OTHERS]
NAMES = ["RandomForestClassifier", "XGBClassifier, NaN"]


def library_leaves(model, X: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        if isinstance(model, xgb.XGBModel):
            return model.get_booster().predict(xgb.DMatrix(X, missing=np.nan), pred_leaf=True).astype(np.int64)
        return model.apply(X)


@functools.cache
def case(name: str, form: str):
    """The model, its proximity graph of ``form``, rows (synthesized: every threshold, NaN and
    +-inf where the model takes them) and the kernel the library's leaves give them."""
    model = fitted(name)
    ens = tree2mat.load(model)
    X = synthesize(ens, 200, seed=0)[0]
    ref = synthesize(ens, 200, seed=1)[0][::97]
    a, b = library_leaves(model, X), library_leaves(model, ref)
    expected = (a[:, None, :] == b[None, :, :]).sum(axis=2).astype(np.float32) / np.float32(a.shape[1])
    return model, tree2mat.convert(model, form, proximity=ref), X, expected


@pytest.mark.parametrize(("form", "runtime"), PROVEN)
@pytest.mark.parametrize("name", NAMES)
def test_proximity_graphs_give_the_library_s_kernel_on_every_runtime(name, form, runtime):
    if runtime in NODE and not RUNTIMES[runtime].available():
        pytest.skip(f"{runtime}: no node on the PATH or no npm package (make test installs it when node is present)")
    assert_proximity_on(name, form, runtime)


def assert_proximity_on(name: str, form: str, runtime: str) -> None:
    """The proximity graph of model ``name`` and ``form`` on ``runtime``: the library's kernel in
    batches that take each walk, and verify passes it there (also tests/runtimes/test_webgpu.py's)."""
    model, onx, X, expected = case(name, form)
    runner = GraphRunner(onx, "cpu", runtime)
    small = int({p.key: p.value for p in onx.metadata_props}.get("tree2mat.walk_rows", X.shape[0]))
    for batch in {X.shape[0], min(small, X.shape[0]), 1}:  # (traverse: every walk)
        rows = X if batch > 1 else X[:: max(1, X.shape[0] // 4)]
        got = runner.run(rows, batch)["proximity"]
        assert np.array_equal(got, expected if batch > 1 else expected[:: max(1, X.shape[0] // 4)]), (batch, runtime)
    report = tree2mat.verify(model, onx, runtime=runtime, rows=200)
    assert report.passed, report.summary()
    assert [o for o in report.outputs if o.name == "proximity"]
