"""treeple's oblique trees and forests (tree2mat.frontends.treeple) against treeple itself: every
exact form's graph against treeple's predict / predict_proba and apply, on synthesized rows (on
and around every hyperplane) and held-out rows, for models loaded from a file (which sum their
terms in ascending feature order, as the IR does) and for models still in memory after fit
(which sum them in the order they were drawn: a row within float32 rounding of a hyperplane may
go the other way there, and verify must count every such mismatch as near a hyperplane).

treeple 0.10.3 imports only with scikit-learn 1.6 (docs/models.md): ``make test`` runs this
module in build/treeple-venv (``make treeple``); elsewhere it is skipped.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import joblib
import numpy as np
import pytest
import sklearn
from sklearn.datasets import load_breast_cancer, load_diabetes, load_wine

import tree2mat
from tree2mat.errors import UnsupportedModelError
from tree2mat.ir import evaluate
from tree2mat.verify import synthesize

try:
    import treeple
    from treeple._lib.sklearn.ensemble._forest import ForestRegressor
except Exception as exc:  # ImportError, or the ValueError of a binary-incompatible scikit-learn
    pytest.skip(
        f"treeple not importable with scikit-learn {sklearn.__version__} ({type(exc).__name__}: {exc}); "
        "make test runs this module in build/treeple-venv",
        allow_module_level=True,
    )

from treeple import ensemble as te
from treeple import tree as tt

EXACT = [name for name, spec in tree2mat.FORMS.items() if spec.exact]
# (scikit-learn's finite check sums the extreme rows: inf - inf in numpy's reduce)
pytestmark = pytest.mark.filterwarnings(
    "ignore::FutureWarning", "ignore::DeprecationWarning", "ignore::UserWarning", "ignore:invalid value encountered in reduce:RuntimeWarning"
)


@pytest.fixture(scope="module", autouse=True)
def forest_regressor_tags():
    """treeple 0.10.3's ``ForestRegressor.__sklearn_tags__`` sets ``regressor_tags.multi_label``,
    which scikit-learn 1.6's ``RegressorTags`` does not have: every treeple forest regressor fails
    in fit and in predict (AttributeError). Its forest regressors are tested with that line left out."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ForestRegressor, "__sklearn_tags__", lambda self: super(ForestRegressor, self).__sklearn_tags__())
        yield


def _data(task: str) -> tuple[np.ndarray, np.ndarray]:
    if task == "wine":
        return load_wine(return_X_y=True)
    if task == "wine-2-str":  # two targets of string labels
        X, y = load_wine(return_X_y=True)
        return X, np.stack([np.array(["a", "b", "c"])[y], np.where(X[:, 0] > 13, "high", "low")], axis=1)
    if task == "cancer":
        return load_breast_cancer(return_X_y=True)
    X, y = load_diabetes(return_X_y=True)
    return (X, np.stack([y, -2 * y], axis=1)) if task == "diabetes-2" else (X, y)


#: name -> (estimator, data set): trees of several depths, forests, each kind of oblique splitter;
#: feature_combinations > 1, so most nodes test a combination of several features.
CASES = {
    "tree-wine-depth4": (lambda: tt.ObliqueDecisionTreeClassifier(max_depth=4, feature_combinations=3, random_state=0), "wine"),
    "tree-cancer-full": (lambda: tt.ObliqueDecisionTreeClassifier(feature_combinations=4, max_features=20, random_state=1), "cancer"),
    "tree-diabetes-depth8": (lambda: tt.ObliqueDecisionTreeRegressor(max_depth=8, feature_combinations=3, random_state=2), "diabetes"),
    "patch-tree-wine": (lambda: tt.PatchObliqueDecisionTreeClassifier(max_depth=6, min_patch_dims=np.array([1, 2]), max_patch_dims=np.array([1, 4]),
                                                                      random_state=3), "wine"),
    "extra-tree-diabetes": (lambda: tt.ExtraObliqueDecisionTreeRegressor(max_depth=6, feature_combinations=2.5, random_state=4), "diabetes"),
    "forest-wine": (lambda: te.ObliqueRandomForestClassifier(n_estimators=6, max_depth=6, feature_combinations=3, random_state=5), "wine"),
    "forest-diabetes": (lambda: te.ObliqueRandomForestRegressor(n_estimators=6, max_depth=5, feature_combinations=3, random_state=6), "diabetes"),
    "extra-forest-cancer": (lambda: te.ExtraObliqueRandomForestClassifier(n_estimators=6, max_depth=6, feature_combinations=3, random_state=7), "cancer"),
    "forest-wine-2-str": (lambda: te.ObliqueRandomForestClassifier(n_estimators=4, max_depth=5, feature_combinations=3, random_state=8), "wine-2-str"),
    "tree-diabetes-2": (lambda: tt.ObliqueDecisionTreeRegressor(max_depth=6, feature_combinations=3, random_state=9), "diabetes-2"),
}


def _fit(case: str):
    make, data = CASES[case]
    X, y = _data(data)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(y))
    cut = int(0.7 * len(y))
    model = make().fit(X[order[:cut]], y[order[:cut]])
    return model, X[order[cut:]].astype(np.float32)


@pytest.fixture(scope="module")
def fitted():
    """Every case fitted once: (live model, the same model after a pickle round trip, held-out rows)."""
    out = {}
    for case in CASES:
        model, held_out = _fit(case)
        out[case] = (model, pickle.loads(pickle.dumps(model)), held_out)
    return out


def _apply(model, X: np.ndarray) -> np.ndarray:
    leaves = model.apply(X)
    return leaves[:, None] if leaves.ndim == 1 else leaves


@pytest.mark.parametrize("case", list(CASES))
def test_the_ir_routes_as_treeple_s_apply(case, fitted):
    """The IR's leaves (treeple node ids) are treeple's apply on held-out rows and on every
    finite synthesized row (on and around each hyperplane); most nodes are oblique, with 2 and more terms."""
    _, model, held_out = fitted[case]
    ens = tree2mat.load(model)
    assert ens.is_oblique and ens.source.startswith("treeple.")
    assert not ens.accepts_nan and not ens.accepts_inf
    if "patch" not in case:
        assert (ens.projections.feature >= 0).sum(axis=1).max() >= 3
    X, _ = synthesize(ens, 300)
    finite = np.isfinite(X).all(axis=1)
    for rows in (held_out, X[finite]):
        assert (evaluate.source_leaf_ids(ens, rows) == _apply(model, rows)).all()


@pytest.mark.parametrize("form", EXACT)
@pytest.mark.parametrize("case", list(CASES))
def test_every_exact_form_is_exact_on_a_model_loaded_from_a_file(case, form, fitted):
    """A pickled model (its terms summed in ascending feature order): no mismatch, on the rows
    verify synthesizes and on held-out rows, against treeple's predict and predict_proba."""
    _, model, held_out = fitted[case]
    onx = tree2mat.convert(model, form)
    for report in (tree2mat.verify(model, onx, rows=300), tree2mat.verify(model, onx, held_out)):
        assert report.passed, report.summary()
        assert {"label" if hasattr(model, "classes_") else "variable", "routing"} <= {o.name for o in report.outputs}


def test_a_model_in_memory_after_fit_mismatches_only_near_a_hyperplane(fitted):
    """A live model sums each node's terms in the order treeple drew them, which its API does not
    expose: rows within float32 rounding of a hyperplane of 3 terms or more may go the other way
    (here some do). verify never passes them, and counts every one as near a hyperplane;
    held-out rows match."""
    mismatched = 0
    for case, (live, _, held_out) in fitted.items():
        onx = tree2mat.convert(live, "traverse")
        report = tree2mat.verify(live, onx, rows=300)
        for out in report.outputs:
            assert out.near_boundary == out.mismatches, f"{case}: {report.summary()}"
        mismatched += report.outputs[0].mismatches
        assert tree2mat.verify(live, onx, held_out).passed, case
    assert mismatched > 0


def test_nan_past_predict_s_checks_goes_where_missing_go_to_left_says(fitted):
    """predict refuses NaN and +-inf; treeple's tree itself (``tree_.apply``) sends a NaN sum where
    ``missing_go_to_left`` says, as the IR and the graph do."""
    _, model, held_out = fitted["tree-cancer-full"]
    X = held_out.copy()
    X[np.random.default_rng(0).random(X.shape) < 0.02] = np.nan
    ens = tree2mat.load(model)
    assert (evaluate.source_leaf_ids(ens, X)[:, 0] == model.tree_.apply(X)).all()
    for bad in (np.nan, np.inf):
        with pytest.raises(ValueError):
            model.predict(np.where(np.arange(X.shape[1]) == 0, bad, held_out[:2]))


def test_the_command_line_converts_and_verifies_a_joblib_file(fitted, tmp_path):
    live, _, _ = fitted["forest-wine"]
    path = tmp_path / "model.joblib"
    joblib.dump(live, path)
    cli = [str(Path(sys.executable).with_name("tree2mat"))]  # the venv's console script
    for args in (["convert", str(path), "-o", str(tmp_path / "m.onnx")], ["verify", str(path), str(tmp_path / "m.onnx")]):
        done = subprocess.run(cli + args, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS" in done.stdout


@pytest.mark.parametrize(
    "make",
    [
        lambda: tt.HonestTreeClassifier(random_state=0),
        lambda: tt.UnsupervisedObliqueDecisionTree(random_state=0),
        lambda: tt.DecisionTreeClassifier(random_state=0),
        lambda: te.ExtendedIsolationForest(n_estimators=2, random_state=0),
        lambda: te.HonestForestClassifier(n_estimators=2, random_state=0),
    ],
)
def test_other_treeple_estimators_are_refused_by_name(make):
    X, y = load_wine(return_X_y=True)
    model = make()
    model.fit(X) if "Unsupervised" in type(model).__name__ or "Isolation" in type(model).__name__ else model.fit(X, y)
    with pytest.raises(UnsupportedModelError, match=f"^treeple {type(model).__name__} is not supported; supported: ObliqueDecisionTreeClassifier") as err:
        tree2mat.convert(model)
    assert "\n" not in str(err.value)


def test_a_forest_of_binned_input_is_refused(fitted):
    """treeple's forests bin the input before predicting when ``max_bins`` is set (no oblique
    forest takes it as a parameter in 0.10.3; their base class does)."""
    model = pickle.loads(pickle.dumps(fitted["forest-wine"][0]))
    model.max_bins = 32
    with pytest.raises(UnsupportedModelError, match="max_bins=32"):
        tree2mat.convert(model)


def test_treeple_version():
    assert treeple.__version__.startswith("0.10.") and sklearn.__version__.startswith("1.6.")
