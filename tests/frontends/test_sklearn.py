"""scikit-learn end to end: the converted graph in onnxruntime against the estimator's own
predict / predict_proba / decision_function / score_samples, on random, threshold (on, next
float32 up and down), NaN and +-inf rows (where the estimator accepts them), with routing (leaf
ids) checked exactly against the reference evaluator; and the evaluator's leaves against sklearn's
own ``apply``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn import datasets
from sklearn import ensemble as E
from sklearn import tree as T

import tree2mat
from tree2mat.errors import DataError, UnsupportedModelError
from tree2mat.ir.evaluate import source_leaf_ids
from tree2mat.verify import run_graph, synthesize

from conftest import assert_standard_graph

warnings.filterwarnings("ignore", category=UserWarning)

CLS_DATA = ("iris", "wine", "breast_cancer", "digits")
REG_DATA = ("diabetes", "linnerud")


def load(name: str) -> tuple[np.ndarray, np.ndarray]:
    X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
    return X.astype(np.float64), y


def with_nan(X: np.ndarray, seed: int = 0, rate: float = 0.1) -> np.ndarray:
    X = X.copy()
    X[np.random.default_rng(seed).random(X.shape) < rate] = np.nan
    return X


CLASSIFIERS = {
    "DecisionTreeClassifier": lambda: T.DecisionTreeClassifier(random_state=0),
    "ExtraTreeClassifier": lambda: T.ExtraTreeClassifier(random_state=0),
    "RandomForestClassifier": lambda: E.RandomForestClassifier(n_estimators=8, random_state=0),
    "ExtraTreesClassifier": lambda: E.ExtraTreesClassifier(n_estimators=8, random_state=0),
    "GradientBoostingClassifier": lambda: E.GradientBoostingClassifier(n_estimators=8, random_state=0),
    "HistGradientBoostingClassifier": lambda: E.HistGradientBoostingClassifier(max_iter=10, random_state=0),
}
REGRESSORS = {
    "DecisionTreeRegressor": lambda: T.DecisionTreeRegressor(random_state=0),
    "ExtraTreeRegressor": lambda: T.ExtraTreeRegressor(random_state=0),
    "RandomForestRegressor": lambda: E.RandomForestRegressor(n_estimators=8, random_state=0),
    "ExtraTreesRegressor": lambda: E.ExtraTreesRegressor(n_estimators=8, random_state=0),
    "GradientBoostingRegressor": lambda: E.GradientBoostingRegressor(n_estimators=8, random_state=0),
    "HistGradientBoostingRegressor": lambda: E.HistGradientBoostingRegressor(max_iter=10, random_state=0),
}
MULTI_OUTPUT = ("DecisionTree", "ExtraTree", "RandomForest", "ExtraTrees")


def check(model, rows: int = 200, raw: bool = True, data=None) -> None:
    """Convert and verify against the estimator itself (and with --raw), requiring the
    threshold rows and, where accepted, NaN and inf rows to be part of the check."""
    ens = tree2mat.load(model)
    for is_raw in (False, True) if raw else (False,):
        onx = tree2mat.convert(model, raw=is_raw)
        assert_standard_graph(onx)
        report = tree2mat.verify(model, onx, data, rows=rows)
        assert report.passed, report.summary()
        assert any(o.name == "routing" and o.compared for o in report.outputs)
        if data is None:
            assert report.row_kinds["threshold"] > 0 or all(t.n_internal == 0 for t in ens.trees)
            assert ("nan" in report.row_kinds) == ens.accepts_nan
            assert ("inf" in report.row_kinds) == ens.accepts_inf


def sklearn_leaf_ids(model, X: np.ndarray) -> np.ndarray:
    """sklearn's own leaf node ids [N, T], in the IR's tree order."""
    X = X.astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):  # sklearn's finiteness pre-check sums rows at +-max float32
        return _sklearn_leaf_ids(model, X)


def _sklearn_leaf_ids(model, X: np.ndarray) -> np.ndarray:
    if isinstance(model, E.IsolationForest):
        sub = model._max_features != X.shape[1]
        # As IsolationForest itself does: no input check (it accepts inf, the trees alone do not).
        return np.stack(
            [e.apply(X[:, f] if sub else X, check_input=False) for e, f in zip(model.estimators_, model.estimators_features_)], 1
        )
    ids = model.apply(X)
    return ids.reshape(X.shape[0], -1) if ids.ndim > 1 else ids[:, None]


def assert_reference_leaves_are_sklearns(model, X: np.ndarray) -> None:
    ens = tree2mat.load(model)
    X = np.concatenate([X, synthesize(ens, 200)[0].astype(np.float64)])
    if not ens.accepts_nan:
        X = X[~np.isnan(X).any(axis=1)]
    if not ens.accepts_inf:
        X = X[~np.isinf(X).any(axis=1)]
    np.testing.assert_array_equal(source_leaf_ids(ens, X), sklearn_leaf_ids(model, X))


# ------------------------------------------------------------------------------ the matrix


@pytest.mark.slow
@pytest.mark.parametrize("data", CLS_DATA)
@pytest.mark.parametrize("name", CLASSIFIERS)
def test_classifier_on_bundled_data(name, data):
    X, y = load(data)
    model = CLASSIFIERS[name]().fit(X, y)
    check(model)
    if not name.startswith("Hist"):
        assert_reference_leaves_are_sklearns(model, X)


@pytest.mark.parametrize("data", REG_DATA)
@pytest.mark.parametrize("name", REGRESSORS)
def test_regressor_on_bundled_data(name, data):
    X, y = load(data)
    if y.ndim > 1 and not name.startswith(MULTI_OUTPUT):
        y = y[:, 0]  # sklearn fits one target only here
    model = REGRESSORS[name]().fit(X, y)
    check(model)
    if not name.startswith("Hist"):
        assert_reference_leaves_are_sklearns(model, X)


@pytest.mark.parametrize("data", CLS_DATA + REG_DATA)
def test_isolation_forest_on_bundled_data(data):
    X, _ = load(data)
    model = E.IsolationForest(n_estimators=10, max_features=0.7, contamination=0.1, random_state=0).fit(X)
    check(model)
    assert_reference_leaves_are_sklearns(model, X)


def test_isolation_forest_with_nan_and_auto_contamination():
    X, _ = load("breast_cancer")
    model = E.IsolationForest(n_estimators=10, random_state=0).fit(with_nan(X))
    check(model)
    assert_reference_leaves_are_sklearns(model, with_nan(X, seed=1))


# ------------------------------------------------------------------------ missing values


@pytest.mark.parametrize(
    "name", [n for n in list(CLASSIFIERS) + list(REGRESSORS) if not n.startswith("Gradient")]
)
def test_nan_routing_learned_from_missing_values(name):
    X, y = load("wine") if name in CLASSIFIERS else load("diabetes")
    model = {**CLASSIFIERS, **REGRESSORS}[name]().fit(with_nan(X), y)
    ens = tree2mat.load(model)
    assert ens.accepts_nan
    assert any(t.default_left.any() for t in ens.trees) and any((~t.default_left).any() for t in ens.trees)
    check(model)
    if not name.startswith("Hist"):
        assert_reference_leaves_are_sklearns(model, with_nan(X, seed=2))


def test_nan_split_with_infinite_threshold():
    # A split that separates NaN from everything else has threshold +inf in sklearn.
    X = np.r_[np.arange(20.0), [np.nan] * 20][:, None]
    y = np.r_[np.zeros(20), np.ones(20)]
    model = T.DecisionTreeClassifier(random_state=0).fit(X, y)
    ens = tree2mat.load(model)
    assert np.isinf(ens.trees[0].threshold).any()
    check(model)
    probe = np.asarray([[np.nan], [3.4e38], [-3.4e38], [3.0]])
    assert tree2mat.verify(model, tree2mat.convert(model), probe).passed
    # sklearn refuses inf here; verify says so instead of failing or crashing.
    with pytest.raises(DataError, match="rejects the data.*infinity"):
        tree2mat.verify(model, tree2mat.convert(model), np.asarray([[np.inf]]))


# --------------------------------------------------------------------------------- losses


@pytest.mark.parametrize("loss", ["squared_error", "absolute_error", "huber", "quantile"])
@pytest.mark.parametrize("init", [None, "zero"])
def test_gradient_boosting_regressor_losses(loss, init):
    X, y = load("diabetes")
    check(E.GradientBoostingRegressor(loss=loss, init=init, n_estimators=8, random_state=0).fit(X, y))


@pytest.mark.parametrize(
    "loss,data", [("log_loss", "breast_cancer"), ("log_loss", "iris"), ("exponential", "breast_cancer")]
)
@pytest.mark.parametrize("init", [None, "zero"])
def test_gradient_boosting_classifier_losses(loss, data, init):
    X, y = load(data)
    check(E.GradientBoostingClassifier(loss=loss, init=init, n_estimators=8, random_state=0).fit(X, y))


def test_gradient_boosting_custom_init_is_refused():
    X, y = load("diabetes")
    model = E.GradientBoostingRegressor(init=T.DecisionTreeRegressor(max_depth=2), n_estimators=3).fit(X, y)
    with pytest.raises(UnsupportedModelError, match="custom init estimator.*DecisionTreeRegressor"):
        tree2mat.convert(model)


@pytest.mark.parametrize("loss", ["squared_error", "absolute_error", "gamma", "poisson", "quantile"])
def test_hist_gradient_boosting_regressor_losses(loss):
    X, y = load("diabetes")
    extra = {"quantile": 0.3} if loss == "quantile" else {}
    check(E.HistGradientBoostingRegressor(loss=loss, max_iter=10, random_state=0, **extra).fit(with_nan(X), y))


@pytest.mark.parametrize("data", ["breast_cancer", "wine"])
def test_hist_gradient_boosting_classifier_with_nan(data):
    X, y = load(data)
    check(E.HistGradientBoostingClassifier(max_iter=10, random_state=0).fit(with_nan(X), y))


# ----------------------------------------------------------------------------- categorical


def categorical_data(seed: int = 0, n: int = 600):
    rng = np.random.default_rng(seed)
    cats = np.asarray([1.5, 3.0, 10.0, 11.0, 250.0, 0.1])  # arbitrary, non-contiguous values
    c = rng.choice(cats, n)
    c[rng.random(n) < 0.05] = np.nan
    X = np.column_stack([rng.normal(size=n), c, rng.integers(0, 4, n).astype(float), rng.normal(size=n)])
    y = (np.isin(c, [3.0, 250.0]) ^ (X[:, 0] > 0.3) ^ (X[:, 2] == 2)).astype(int)
    return X, y


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["classifier", "regressor"])
def test_hist_gradient_boosting_categorical_features(kind):
    X, y = categorical_data()
    cls = E.HistGradientBoostingClassifier if kind == "classifier" else E.HistGradientBoostingRegressor
    model = cls(max_iter=15, categorical_features=[1, 2], random_state=0).fit(X, y)
    ens = tree2mat.load(model)
    assert sum(t.cat_nodes.size for t in ens.trees) > 0
    check(model)
    # Unseen categories, negative values, non-integers and NaN at predict time.
    probe, _ = categorical_data(seed=1, n=300)
    probe[:50, 1] = np.random.default_rng(2).choice([7.0, -1.0, 2.5, 1e9, -0.0], 50)
    probe[50:60, 2] = [-3, 9, 0.5, np.nan, 1, 2, 3, 3.0000002, -1e30, 4]
    probe[60:70, 0] = np.inf  # numeric columns take inf
    check(model, data=probe, raw=False)


def test_hist_gradient_boosting_categorical_from_pandas():
    pd = pytest.importorskip("pandas")
    X, y = categorical_data()
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"]).astype({"b": "category"})
    model = E.HistGradientBoostingClassifier(max_iter=10, random_state=0).fit(frame, y)
    ens = tree2mat.load(model)
    assert ens.feature_names == ("a", "b", "c", "d")
    assert sum(t.cat_nodes.size for t in ens.trees) > 0
    onx = tree2mat.convert(model)
    # The graph takes the columns in the frame's order; sklearn sees a frame of the same rows.
    rows, _ = synthesize(ens, 300)
    from conftest import run_onnx

    got = run_onnx(onx, rows)
    ref_frame = pd.DataFrame(rows.astype(np.float64), columns=frame.columns)
    known = frame["b"].cat.categories
    # Values the frame's category dtype does not know become missing, as pandas would make them.
    ref_frame["b"] = pd.Categorical(ref_frame["b"].where(ref_frame["b"].isin(known)), categories=known)
    np.testing.assert_array_equal(got["label"], model.predict(ref_frame))
    np.testing.assert_allclose(got["probabilities"], model.predict_proba(ref_frame), rtol=1e-6, atol=1e-9)


# ------------------------------------------------------------------ labels and multi-output


@pytest.mark.parametrize("name", list(CLASSIFIERS))
def test_string_labels(name):
    X, y = load("iris")
    names = np.asarray(["setosa", "versicolor", "virginica"])[y]
    model = CLASSIFIERS[name]().fit(X, names)
    check(model, raw=False)


@pytest.mark.parametrize("name", list(CLASSIFIERS))
def test_non_contiguous_integer_labels(name):
    X, y = load("breast_cancer")
    model = CLASSIFIERS[name]().fit(X, np.asarray([-7, 40])[y])
    check(model, raw=False)


@pytest.mark.parametrize("name", [n for n in CLASSIFIERS if n.startswith(MULTI_OUTPUT)])
@pytest.mark.parametrize("labels", ["int", "str"])
def test_multi_output_classifiers(name, labels):
    X, y = load("wine")
    Y = np.column_stack([y, (X[:, 0] > 13).astype(int), np.digitize(X[:, 1], [1.5, 2.5, 4])])
    if labels == "str":
        Y = np.char.add("c", Y.astype(str))
    model = CLASSIFIERS[name]().fit(X, Y)
    onx = tree2mat.convert(model)
    label = [o for o in onx.graph.output if o.name == "label"][0]
    assert len(label.type.tensor_type.shape.dim) == 2
    check(model)
    assert_reference_leaves_are_sklearns(model, X)


# -------------------------------------------------------------------------- refusals


def test_pipeline_is_refused_by_load_naming_its_steps():
    """``load`` (and inspect, bench) take a tree model; convert and verify take whole pipelines
    (tests/e2e/test_pipelines.py)."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = load("iris")
    pipe = make_pipeline(StandardScaler(), E.RandomForestClassifier(n_estimators=2)).fit(X, y)
    with pytest.raises(UnsupportedModelError, match="Pipeline.*StandardScaler.*RandomForestClassifier.*pipeline.-1."):
        tree2mat.load(pipe)


def test_unsupported_and_unfitted_models_are_refused():
    from sklearn.linear_model import LogisticRegression

    with pytest.raises(UnsupportedModelError, match="LogisticRegression is not supported; supported: DecisionTreeClassifier"):
        tree2mat.convert(LogisticRegression(max_iter=2000).fit(*load("iris")))
    with pytest.raises(UnsupportedModelError, match="not fitted"):
        tree2mat.convert(E.RandomForestClassifier())
    with pytest.raises(UnsupportedModelError, match="not a supported model"):
        tree2mat.convert(object())


# ------------------------------------------------------------ cases found in review

_XB, _YB = datasets.load_breast_cancer(return_X_y=True)
_XD, _YD = datasets.load_diabetes(return_X_y=True)


@pytest.mark.parametrize(
    "name,model,raw",
    [
        ("gb_binary", lambda: E.GradientBoostingClassifier(n_estimators=60).fit(_XB, _YB), lambda m, X: m.decision_function(X)),
        ("gb_multi", lambda: E.GradientBoostingClassifier(n_estimators=10).fit(*datasets.load_digits(return_X_y=True)), lambda m, X: m.decision_function(X)),
        ("hgb", lambda: E.HistGradientBoostingRegressor(max_iter=100).fit(_XD, _YD), lambda m, X: m._raw_predict(X)),
        ("rf_proba", lambda: E.RandomForestClassifier(60, random_state=0).fit(_XB, _YB), lambda m, X: m.predict_proba(X)),
        ("rf_reg", lambda: E.RandomForestRegressor(60, max_depth=8, random_state=0).fit(_XD, _YD), lambda m, X: m.predict(X)),
    ],
)
@pytest.mark.slow
def test_float64_margins_are_bit_identical_to_sklearn(name, model, raw):
    """The base score is folded into the first tree and the trees are summed in order, so the
    float64 margin repeats scikit-learn's additions exactly: ties break the same way."""
    m = model()
    ens = tree2mat.load(m)
    X, _ = synthesize(ens, 500, dtype=np.float64, max_nodes=2000)
    X = X[~np.isnan(X).any(axis=1) & ~np.isinf(X.astype(np.float32)).any(axis=1)]
    got = run_graph(tree2mat.convert(m, dtype="float64", raw=True), X, rows_per_chunk=2000)["variable"]
    with np.errstate(over="ignore", invalid="ignore"):
        expected = np.asarray(raw(m, X)).reshape(X.shape[0], -1)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(tree2mat.ir.margin(ens, X), expected)


def test_float64_graph_of_a_model_trained_with_nan():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    X[rng.random(X.shape) < 0.1] = np.nan
    model = E.RandomForestRegressor(5, random_state=0).fit(X, np.nan_to_num(X[:, 0]))
    report = tree2mat.verify(model, tree2mat.convert(model, dtype="float64"))
    assert report.passed, report.summary()


def test_isolation_forest_rows_on_the_offset_keep_their_label():
    rng = np.random.default_rng(21)
    X = rng.normal(size=(21, 3))
    model = E.IsolationForest(n_estimators=94, max_samples=16, contamination=0.1, random_state=21).fit(X)
    report = tree2mat.verify(model, tree2mat.convert(model), data=X)
    assert report.passed, report.summary()


@pytest.mark.slow
def test_high_cardinality_categorical_verifies_in_bounded_memory():
    rng = np.random.default_rng(0)
    c = rng.integers(0, 200, 3000) * 1.5 - 40
    X = np.column_stack([c, rng.normal(size=3000)])
    model = E.HistGradientBoostingClassifier(max_iter=20, categorical_features=[0]).fit(X, np.sin(c) > 0)
    ens = tree2mat.load(model)
    assert tree2mat.FORMS["sign"].bytes_per_row(ens) < 100_000
    report = tree2mat.verify(model, tree2mat.convert(model))
    assert report.passed, report.summary()


def test_labels_that_do_not_fit_are_refused():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    y = np.array([0, 2**63 + 5, 5], dtype=np.uint64)[rng.integers(0, 3, 60)]
    with pytest.raises(UnsupportedModelError, match="does not fit int64"):
        tree2mat.convert(T.DecisionTreeClassifier().fit(X, y))
    with pytest.raises(UnsupportedModelError, match="single class"):
        tree2mat.convert(T.DecisionTreeClassifier().fit(X, np.zeros(60)))
