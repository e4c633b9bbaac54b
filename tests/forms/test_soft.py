"""The soft forms (``soft``, ``softmax``): approximations that must approach the library's own
predictions as the temperature falls, and be differentiable from input to output.

- Convergence: on the bundled datasets' rows (with the NaN holes the models were fitted with),
  the share of rows whose every output agrees with the library (labels equal, values within
  verify's tolerance) rises, as the temperature falls, to 100 %.
- Gradient: no ArgMax, Sign, comparison or rounding on the data path from the input to the float
  outputs (a graph walk), and central finite differences through onnxruntime are finite and agree
  between two step sizes (the graph is smooth there).
"""

from __future__ import annotations

import lightgbm as lgb
import numpy as np
import onnx
import pytest
import xgboost as xgb
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris
from sklearn.ensemble import GradientBoostingRegressor, HistGradientBoostingClassifier, IsolationForest, RandomForestClassifier

import tree2mat
from tree2mat.errors import OptionError, UnsupportedModelError
from tree2mat.frontends import frontend_for
from tree2mat.verify import default_atol

from conftest import assert_standard_graph, run_onnx, with_holes

SOFT = [name for name, spec in tree2mat.FORMS.items() if not spec.exact]
RNG = np.random.default_rng(1)
XB, YB = load_breast_cancer(return_X_y=True)
XI, YI = load_iris(return_X_y=True)
XD, YD = load_diabetes(return_X_y=True)


XI_NAN, XD_NAN = with_holes(XI, RNG), with_holes(XD, RNG)
X_CAT = np.c_[XB[:, :5], RNG.integers(0, 8, XB.shape[0])]
Y_CAT = ((X_CAT[:, 5] % 3 == 0) ^ (XB[:, 0] > 14)).astype(int)

# name: (fit, bundled rows)
MODELS = {
    "sklearn RF classifier, NaN": (lambda: RandomForestClassifier(n_estimators=10, max_depth=6, random_state=0).fit(XI_NAN, YI), XI_NAN),
    "sklearn GBR": (lambda: GradientBoostingRegressor(n_estimators=30, max_depth=3, random_state=0).fit(XD, YD), XD),
    "sklearn HGB classifier": (lambda: HistGradientBoostingClassifier(max_iter=15, random_state=0).fit(XB, YB), XB),
    "sklearn IsolationForest": (lambda: IsolationForest(n_estimators=10, random_state=0).fit(XD), XD),
    "xgboost multiclass, NaN": (lambda: xgb.XGBClassifier(n_estimators=10, max_depth=3).fit(XI_NAN, YI), XI_NAN),
    "xgboost regressor": (lambda: xgb.XGBRegressor(n_estimators=20, max_depth=4).fit(XD_NAN, YD), XD_NAN),
    "lightgbm categorical": (lambda: lgb.LGBMClassifier(n_estimators=10, num_leaves=7, min_data_per_group=5, verbose=-1).fit(
        X_CAT, Y_CAT, categorical_feature=[5]), X_CAT),
    "lightgbm regressor, NaN": (lambda: lgb.LGBMRegressor(n_estimators=15, num_leaves=7, verbose=-1).fit(XD_NAN, YD), XD_NAN),
}
# Down to where half a float32 step of the smallest features (diabetes: ~1e-9 near 0.05, and
# XGBoost's split values are data values) is many temperatures wide.
TEMPERATURES = [100.0, 10.0, 1.0, 0.1, 1e-2, 1e-3, 1e-5, 1e-8, 1e-12, 1e-16]


def _agreement(model, ens, onx: onnx.ModelProto, X: np.ndarray) -> float:
    """Share of rows where every output of the graph agrees with the library's."""
    expected = frontend_for(model).reference_outputs(model, X, False, ens)
    got = run_onnx(onx, X)
    ok = np.ones(X.shape[0], bool)
    for name, exp in expected.items():
        exp, out = np.asarray(exp), got[name]
        if name == "label":
            same = out == exp
        else:
            same = np.isclose(out.astype(np.float64), exp.astype(np.float64), rtol=1e-5, atol=default_atol(ens, np.dtype(X.dtype).name))
        ok &= same.reshape(X.shape[0], -1).all(axis=1)
    return float(ok.mean())


@pytest.mark.slow
@pytest.mark.parametrize("form", SOFT)
@pytest.mark.parametrize("name", list(MODELS))
def test_agreement_rises_to_all_rows_as_the_temperature_falls(form, name):
    fit, X = MODELS[name]
    model = fit()
    ens = tree2mat.load(model)
    X = X.astype(np.float32)
    shares = []
    for tau in TEMPERATURES:
        onx = tree2mat.convert(model, form=form, temperature=tau)
        shares.append(_agreement(model, ens, onx, X))
    assert shares[-1] == 1.0, f"agreement by temperature {dict(zip(TEMPERATURES, shares))}"
    assert shares[0] < 1.0, f"at temperature {TEMPERATURES[0]} the graph should not yet be the model: {shares}"
    # Rising: no temperature agrees on fewer rows than a hotter one (up to one row of slack).
    slack = 1.0 / X.shape[0]
    assert all(b >= a - slack for a, b in zip(shares, shares[1:])), shares


# Ops that would cut the gradient: comparisons, selections by index, rounding, sign.
NOT_DIFFERENTIABLE = {
    "ArgMax", "ArgMin", "Sign", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Equal",
    "Floor", "Ceil", "Round", "IsNaN", "IsInf", "Not", "And", "Or", "TopK",
}
# Per op, the inputs a gradient flows through (the rest are indices, shapes, conditions).
DATA_INPUTS = {"Where": (1, 2), "Gather": (0,), "GatherElements": (0,), "Reshape": (0,), "Slice": (0,),
               "Unsqueeze": (0,), "Squeeze": (0,), "ReduceSum": (0,), "Clip": (0,), "Pad": (0,)}


def _data_path_ops(onx: onnx.ModelProto, output: str) -> set[str]:
    producer = {o: n for n in onx.graph.node for o in n.output}
    seen, ops, stack = set(), set(), [output]
    while stack:
        name = stack.pop()
        if name in seen or name not in producer:
            continue
        seen.add(name)
        node = producer[name]
        ops.add(node.op_type)
        keep = DATA_INPUTS.get(node.op_type, range(len(node.input)))
        stack.extend(node.input[i] for i in keep if i < len(node.input))
    return ops


@pytest.mark.parametrize("form", SOFT)
@pytest.mark.parametrize("name", ["sklearn RF classifier, NaN", "sklearn GBR", "xgboost multiclass, NaN", "lightgbm categorical"])
def test_gradient_exists_and_is_finite(form, name):
    fit, X = MODELS[name]
    model = fit()
    onx = tree2mat.convert(model, form=form, temperature=1.0, dtype="float64")
    assert_standard_graph(onx)
    float_outputs = [o.name for o in onx.graph.output if o.name != "label"]
    for out in float_outputs:
        path = _data_path_ops(onx, out)
        assert not path & NOT_DIFFERENTIABLE, f"{out}: {sorted(path & NOT_DIFFERENTIABLE)} on the path from the input"
    rows = np.where(np.isnan(X[:20]), np.nanmedian(X, axis=0), X[:20])
    main = float_outputs[0]
    # Categorical features are tested hard (a code has no neighbours): no gradient to check.
    categorical = {int(t.feature[n]) for t in tree2mat.load(model).trees for n in t.cat_nodes}
    numeric = [f for f in range(rows.shape[1]) if f not in categorical]
    grads = {}
    for step in (1e-5, 1e-6):
        g = np.zeros((rows.shape[0], rows.shape[1], int(np.prod(run_onnx(onx, rows[:1])[main].shape[1:]))))
        for f in numeric:
            h = step * (1.0 + np.abs(rows[:, f]))
            up, down = rows.copy(), rows.copy()
            up[:, f] += h
            down[:, f] -= h
            diff = run_onnx(onx, up)[main] - run_onnx(onx, down)[main]
            g[:, f, :] = diff.reshape(rows.shape[0], -1) / (2 * h)[:, None]
        assert np.all(np.isfinite(g)), f"step {step}: non-finite finite differences"
        grads[step] = g
    scale = np.abs(grads[1e-5]).max()
    assert scale > 0, "the output does not depend on the input at all"
    np.testing.assert_allclose(grads[1e-6], grads[1e-5], rtol=1e-3, atol=1e-6 * scale)


def test_soft_forms_refuse_what_they_cannot_do():
    lin = lgb.LGBMRegressor(n_estimators=3, num_leaves=4, linear_tree=True, verbose=-1).fit(XD, YD)
    with pytest.raises(UnsupportedModelError, match="linear leaves"):
        tree2mat.convert(lin, form="soft")
    rf = RandomForestClassifier(n_estimators=2, max_depth=3, random_state=0).fit(XI, YI)
    with pytest.raises(OptionError, match="no exit leaf"):
        tree2mat.convert(rf, form="softmax", leaves=True)
    with pytest.raises(OptionError, match="soft forms"):
        tree2mat.convert(rf, form="sign", temperature=0.5)
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(OptionError, match="finite number > 0"):
            tree2mat.convert(rf, form="soft", temperature=bad)
    with pytest.raises(OptionError, match="not available for the form soft"):
        tree2mat.convert(rf, form="soft", matmul="int8")


def test_verify_says_a_soft_graph_is_an_approximation():
    rf = RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0).fit(XI, YI)
    report = tree2mat.verify(rf, tree2mat.convert(rf, form="soft", temperature=0.5), rows=200)
    assert not report.passed  # threshold rows sit where a soft graph is not the model
    assert any("approximation" in n for n in report.notes)
