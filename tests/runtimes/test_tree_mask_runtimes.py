"""The tree mask (``convert --tree-mask``) on the runtime matrix: each exact form's masked graph of
the matrix's boosted models (benchmarks/_cases.py) on every runtime it is proven on, fed a mask
per row (each row its own number of rounds, rows in runs of 64 so that the mask is cut with
them), against the library's own staged predictions on rows on every threshold and its float32
neighbours, NaN and +-inf; and ``verify --runtime`` of a masked graph (every tree kept, then
the staged check) passes there."""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest

import tree2mat
from benchmarks._cases import fitted
from tree2mat.verify import GraphRunner, default_atol, synthesize

from test_runtimes import PROVEN, needs, proven_opset

pytestmark = pytest.mark.slow  # every exact form on every runtime

#: The matrix's boosted models: their rounds, and the library's prediction after the first k.
STAGED = {
    "XGBClassifier, NaN": (lambda m: m.get_booster().num_boosted_rounds(), lambda m, X, k: m.predict_proba(X, iteration_range=(0, k))),
    "LGBMClassifier 3 classes, NaN": (lambda m: m.booster_.current_iteration(), lambda m, X, k: m.predict_proba(X, num_iteration=k)),
    "HistGradientBoostingClassifier, NaN": (lambda m: m.n_iter_, lambda m, X, k: list(m.staged_predict_proba(X))[k - 1]),
    "GradientBoostingRegressor": (lambda m: m.n_estimators_, lambda m, X, k: list(m.staged_predict(X))[k - 1]),
}


@functools.cache
def graph(name: str, form: str, kind: str, opset: int | None) -> onnx.ModelProto:
    return tree2mat.convert(fitted(name), form, tree_mask=kind, opset=opset)


@pytest.mark.parametrize(("form", "runtime"), PROVEN)
@pytest.mark.parametrize("name", ["XGBClassifier, NaN", "LGBMClassifier 3 classes, NaN"])
def test_masked_graphs_on_every_runtime(name, form, runtime):
    needs(runtime)
    assert_staged_on(name, form, runtime)


def assert_staged_on(name: str, form: str, runtime: str) -> None:
    """The masked graph (a mask per row) of model ``name`` and ``form`` on ``runtime`` gives the
    library's staged predictions (also tests/runtimes/test_webgpu.py's)."""
    model = fitted(name)
    ens = tree2mat.load(model)
    rounds, staged = STAGED[name][0](model), STAGED[name][1]
    per_round = ens.n_trees // rounds
    X = synthesize(ens, 200)[0]
    k = np.random.default_rng(0).integers(1, rounds + 1, X.shape[0])
    mask = np.arange(ens.n_trees)[None, :] // per_round < k[:, None]
    onx = graph(name, form, "rows", proven_opset(model, form, runtime))
    got = GraphRunner(onx, "cpu", runtime).run(X, 64, {"tree_mask": mask})
    assert np.unique(k).size > 5
    for j in np.unique(k):
        rows = k == j
        np.testing.assert_allclose(got["probabilities"][rows], staged(model, X[rows], j), rtol=1e-6, atol=default_atol(ens, "float32"),
                                   err_msg=f"{runtime} {form}: rows at {j} rounds")
        assert np.array_equal(got["label"][rows], model.classes_[np.argmax(staged(model, X[rows], j), axis=1)])


@pytest.mark.parametrize(("form", "runtime"), PROVEN)
def test_verify_proves_a_masked_graph_on_every_runtime(form, runtime):
    needs(runtime)
    name = "HistGradientBoostingClassifier, NaN"
    model = fitted(name)
    report = tree2mat.verify(model, graph(name, form, "request", proven_opset(model, form, runtime)), runtime=runtime, rows=200)
    assert report.passed, report.summary()
    masked = {o.name for o in report.outputs if o.name.endswith("(tree mask)")}
    assert masked == {"label (tree mask)", "probabilities (tree mask)"}
    assert all(o.compared == report.rows for o in report.outputs if o.name in masked and o.walk == "")
