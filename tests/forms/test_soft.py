"""The soft forms (``soft``, ``softmax``): approximations that must approach the library's own
predictions as the temperature falls, and be differentiable from input to output.

- Convergence: on the bundled datasets' rows (with the NaN holes the models were fitted with),
  the share of rows whose every output agrees with the library (labels equal, values within
  verify's tolerance) rises, as the temperature falls, to 100 %.
- Gradient: no ArgMax, Sign, comparison or rounding on the data path from the input to the float
  outputs (a graph walk), and central finite differences through onnxruntime are finite and agree
  between two step sizes (the graph is smooth there).
- Finite temperatures (0.1, 1, 10): each form's graph equals its formula (the product of sigmoids
  along each path, Hehn et al. eq. 1-5; the softmax of the template scores), written here and
  evaluated on scikit-learn's and XGBoost's own tree arrays, on data rows (NaN included) and rows
  at and beside the thresholds, in float64 and float32 graphs.
"""

from __future__ import annotations

import json

import lightgbm as lgb
import numpy as np
import onnx
import pytest
import xgboost as xgb
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris
from sklearn.ensemble import GradientBoostingRegressor, HistGradientBoostingClassifier, IsolationForest, RandomForestClassifier, RandomForestRegressor

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


# ------------------------------------------------------------------ finite temperatures
# Above, the soft forms are held to the model only as tau -> 0. Here, at tau = 0.1, 1 and 10, to
# the formulas themselves, written below from the papers and evaluated on each library's own
# tree arrays (scikit-learn's tree_, XGBoost's JSON model; not tree2mat's IR):
#
# - soft: Hehn et al. eq. 1-5 (Decision Machines eq. 12-13): a row goes right at a node with
#   probability sigma(gamma f(x)), f(x) = x - b, gamma = 1/tau; a leaf's weight is the product
#   along its path, the tree's output sum_l mu_l v_l.
# - softmax: soft.py's own formula (its reading of Decision Machines eq. 11 and Rethink Traversal
#   Alg. 5, whose soft attention softmax(D^-1 S t) has no temperature): per tree, the softmax over
#   the leaves of (B h - depth) / tau, h = tanh((x - b) / tau), B = -1 left, +1 right on the path.
#
# b is where the soft split is even. The papers' b is the split's threshold t; soft.py puts it
# halfway between the last value of the library's compare dtype (float32 here) that the hard
# test sends left and the next one, so that no input sits on it: within half a float32 step of
# t. Both are checked: to float64 rounding with that b; with b = t, to 1e-5 (what half a float32
# step of the thresholds moves the outputs here, at most 2e-6). A missing value goes
# where the model sends it, with probability 1 (h = -1 left, +1 right). tree_proba in
# tree2mat.learn.soft is not the oracle: it works in standardized space and normalizes the
# leaves into class distributions.

FINITE_TEMPERATURES = [0.1, 1.0, 10.0]
XS = np.random.default_rng(5).normal(size=(400, 4)) * [1.0, 1.0, 3.0, 0.3]
XS_NAN = with_holes(XS, np.random.default_rng(6))
YS = XS[:, 0] + np.sin(2 * XS[:, 1]) + 0.3 * XS[:, 2] * XS[:, 3]


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def _even_le32(t: np.ndarray) -> np.ndarray:
    """float32(x) <= t (scikit-learn, t float64): halfway from the largest float32 <= t to the next."""
    lo = t.astype(np.float32)
    lo = np.where(lo.astype(np.float64) > t, np.nextafter(lo, np.float32(-np.inf)), lo)
    return (lo.astype(np.float64) + np.nextafter(lo, np.float32(np.inf)).astype(np.float64)) / 2


def _even_lt32(t: np.ndarray) -> np.ndarray:
    """float32(x) < t (XGBoost, t float32): halfway from the float32 below t to t."""
    hi = t.astype(np.float32)
    return (np.nextafter(hi, np.float32(-np.inf)).astype(np.float64) + hi.astype(np.float64)) / 2


def _soft_tree(nodes: dict[str, np.ndarray], X: np.ndarray, tau: float, form: str) -> np.ndarray:
    """One tree's output [N, K] at temperature tau; ``nodes``: the library's arrays by node id
    (``left``/``right`` -1 at leaves, ``feature``, ``b``, ``nan_left``, ``value`` [n, K])."""
    leaves, accs = [], []

    def walk(node: int, acc: np.ndarray) -> None:  # acc: the path's probability (soft) or score (softmax)
        if nodes["left"][node] < 0:
            leaves.append(node)
            accs.append(acc)
            return
        x = X[:, nodes["feature"][node]]
        missing = np.isnan(x)
        z = (np.where(missing, 0.0, x) - nodes["b"][node]) / tau
        to_left = bool(nodes["nan_left"][node])
        if form == "soft":
            walk(nodes["left"][node], acc * np.where(missing, float(to_left), _sigmoid(-z)))
            walk(nodes["right"][node], acc * np.where(missing, float(not to_left), _sigmoid(z)))
        else:  # B h - depth, an edge at a time: B = -1 left, +1 right
            h = np.where(missing, -1.0 if to_left else 1.0, np.tanh(z))
            walk(nodes["left"][node], acc - h - 1)
            walk(nodes["right"][node], acc + h - 1)

    walk(0, np.ones(X.shape[0]) if form == "soft" else np.zeros(X.shape[0]))
    w = np.stack(accs, axis=1)
    if form == "softmax":
        w = np.exp(w / tau - (w / tau).max(axis=1, keepdims=True))
        w /= w.sum(axis=1, keepdims=True)
    return w @ nodes["value"][leaves]


def _sklearn_nodes(est, exact: bool) -> dict[str, np.ndarray]:
    tr = est.tree_
    value = tr.value[:, 0, :]
    if value.shape[1] > 1:  # a classifier's leaves: class fractions (predict_proba's)
        value = value / value.sum(axis=1, keepdims=True)
    return {"left": tr.children_left, "right": tr.children_right, "feature": tr.feature, "nan_left": tr.missing_go_to_left,
            "b": _even_le32(tr.threshold) if exact else tr.threshold, "value": value}


def _xgboost_trees(model, exact: bool) -> list[dict[str, np.ndarray]]:
    doc = json.loads(model.get_booster().save_raw("json"))
    trees = []
    for t in doc["learner"]["gradient_booster"]["model"]["trees"]:
        split = np.asarray(t["split_conditions"], np.float32).astype(np.float64)  # (a leaf's value there too)
        trees.append({"left": np.asarray(t["left_children"]), "right": np.asarray(t["right_children"]),
                      "feature": np.asarray(t["split_indices"]), "nan_left": np.asarray(t["default_left"], bool),
                      "b": _even_lt32(split) if exact else split, "value": split[:, None]})
    return trees


def _oracle(name: str, model, X: np.ndarray, tau: float, form: str, exact: bool) -> np.ndarray:
    if name.startswith("sklearn"):  # forests: the mean of the trees
        return np.mean([_soft_tree(_sklearn_nodes(e, exact), X, tau, form) for e in model.estimators_], axis=0)
    trees = _xgboost_trees(model, exact)
    # The base margin (squared error: the base score itself), as XGBoost's JSON holds it; XGBoost's
    # own margin, less its own leaves' values, agrees (to its float32 sums).
    base = float(np.float32(json.loads(model.get_booster().save_config())["learner"]["learner_model_param"]["base_score"].strip("[]")))
    leaves = model.get_booster().predict(xgb.DMatrix(X[:50]), pred_leaf=True).astype(int).reshape(50, -1)
    hard = sum(t["value"][leaves[:, i], 0] for i, t in enumerate(trees))
    np.testing.assert_allclose(model.predict(X[:50], output_margin=True) - hard, base, atol=1e-5)
    return sum(_soft_tree(t, X, tau, form) for t in trees) + base


FINITE_MODELS = {
    "sklearn RandomForestRegressor, NaN": (
        lambda: RandomForestRegressor(n_estimators=8, max_depth=5, random_state=0).fit(XS_NAN, YS), XS_NAN, "variable"),
    "sklearn RandomForestClassifier": (
        lambda: RandomForestClassifier(n_estimators=6, max_depth=4, random_state=0).fit(XS, np.digitize(YS, [-0.5, 0.7])),
        XS, "probabilities"),
    "xgboost regressor, NaN": (lambda: xgb.XGBRegressor(n_estimators=6, max_depth=3, n_jobs=1).fit(XS_NAN, YS), XS_NAN, "variable"),
}


def _rows_near_splits(model_rows: np.ndarray, name: str, model, tau: float) -> np.ndarray:
    """Data rows, and rows that put one feature at, and 0.001, 0.3 and 2 temperatures either
    side of, the thresholds of the first trees' nodes."""
    trees = [_sklearn_nodes(e, False) for e in model.estimators_[:2]] if name.startswith("sklearn") else _xgboost_trees(model, False)[:2]
    base = np.nanmedian(model_rows, axis=0)
    rows = [model_rows[:120]]
    for t in trees:
        # (scikit-learn's splits of missing values from the rest have t = +inf: no row is near)
        for node in np.flatnonzero((t["left"] >= 0) & np.isfinite(t["b"])):
            near = np.tile(base, (9, 1))
            near[:, t["feature"][node]] = t["b"][node] + tau * np.asarray([0, 1e-3, -1e-3, 0.3, -0.3, 2, -2, 1e-9, -1e-9])
            rows.append(near)
    return np.concatenate(rows)


@pytest.mark.parametrize("form", SOFT)
@pytest.mark.parametrize("name", list(FINITE_MODELS))
def test_soft_forms_at_finite_temperatures_are_the_papers_formulas(name, form):
    fit, data, output = FINITE_MODELS[name]
    model = fit()
    for tau in FINITE_TEMPERATURES:
        X = _rows_near_splits(data, name, model, tau)
        expected = _oracle(name, model, X, tau, form, exact=True)
        assert np.ptp(expected) > 1e-3  # (not flat: the temperature still leaves the rows apart)
        got = run_onnx(tree2mat.convert(model, form=form, temperature=tau, dtype="float64"), X)[output]
        # XGBoost adds in float32: the graph folds its base score into the first tree's leaves
        # as XGBoost's first addition rounds it, float32(base + v): within a float32 step.
        atol = np.finfo(np.float32).eps * np.abs(expected).max() if name.startswith("xgboost") else 1e-12
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=atol, err_msg=f"tau {tau}")
        # The papers' own b = t.
        np.testing.assert_allclose(got, _oracle(name, model, X, tau, form, exact=False), rtol=0, atol=1e-5, err_msg=f"tau {tau}")
        # The default float32 graph, on the same rows in float32.
        X32 = X.astype(np.float32)
        got32 = run_onnx(tree2mat.convert(model, form=form, temperature=tau), X32)[output]
        expected32 = _oracle(name, model, X32.astype(np.float64), tau, form, exact=True)
        np.testing.assert_allclose(got32, expected32, rtol=0, atol=2e-5 * np.abs(expected32).max(), err_msg=f"tau {tau}, float32")
