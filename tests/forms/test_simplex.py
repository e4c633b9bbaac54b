"""Decision Machines (Zhang), eq. 7, solved as the program it states:

    h = B̄ sgn(Sx - t),   p = argmax_{d in Δ} <d, h>,   T(x) = sum_i p[i] v[i],

Δ the probability simplex {d >= 0, 1ᵀd = 1} over the leaves, B̄ the template matrix with each
row divided by its squared norm (the leaf's depth), so that h holds the logical similarities of
eq. 3. The paper says the optimum is the one-hot vector of the exit leaf. Here HiGHS
(scipy.optimize.linprog) solves it as a linear program, for every row at once (one block per
row: the rows' programs are independent, so the joint optimum is theirs side by side), and the
optimum p is checked to be the one-hot vector of the leaf the library itself reaches
(scikit-learn's ``apply``, XGBoost's ``pred_leaf``), its value 1 (Thm. 2), and T the library's
own leaf value (scikit-learn's per-tree ``predict`` / ``predict_proba``, XGBoost's leaf from
``trees_to_dataframe``).

B and the depths come from test_theorems.py's ``paths_by_parents`` (each leaf's path walked up
through the parents), h from each node's feature and threshold: tree2mat's matrices are not used.
sgn(0) = -1 for scikit-learn's x <= t; XGBoost's test is x < t, so there sgn(0) = +1 (a row on
the threshold goes right). The rows are verify's synthesized ones (random, on and beside every
threshold, extreme values) without those holding NaN: sgn(NaN) is neither -1 nor +1, and the
paper has no missing values.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import xgboost as xgb
from scipy import sparse
from scipy.optimize import linprog
from sklearn.datasets import load_diabetes, load_iris
from sklearn.ensemble import RandomForestClassifier
from sklearn.tree import DecisionTreeRegressor

import tree2mat
from tree2mat.ir import Comparison, Tree
from tree2mat.ir.evaluate import prepare_input
from tree2mat.verify import synthesize

from conftest import with_holes
from test_proximity import library_leaves
from test_theorems import paths_by_parents

XI, YI = load_iris(return_X_y=True)
XD, YD = load_diabetes(return_X_y=True)

MODELS = {
    "DecisionTreeRegressor": lambda: DecisionTreeRegressor(max_depth=5, random_state=0).fit(XD, YD),
    "RandomForestClassifier": lambda: RandomForestClassifier(n_estimators=3, max_depth=4, random_state=0).fit(XI, YI),
    "XGBRegressor, trained with NaN": lambda: xgb.XGBRegressor(n_estimators=3, max_depth=3, n_jobs=1).fit(
        with_holes(XI, np.random.default_rng(0)), XI[:, 0]),
}


@functools.cache
def fitted(name: str):
    return MODELS[name]()


def similarities(tree: Tree, X: np.ndarray, comparison: Comparison) -> np.ndarray:
    """h = B̄ sgn(Sx - t) [N, L]: each leaf's logical similarity to each row (prepared input)."""
    B, depth = paths_by_parents(tree)
    x = X[:, tree.feature].astype(np.float64)
    left = x <= tree.threshold if comparison is Comparison.LE else x < tree.threshold
    return (np.where(left, -1.0, 1.0) @ B.T) / depth


def solve_eq_7(h: np.ndarray) -> tuple[np.ndarray, float]:
    """argmax of <d_n, h_n> over the simplex for every row n, by HiGHS: p [N, L] and the optimum."""
    N, L = h.shape
    one_each = sparse.kron(sparse.eye(N), np.ones((1, L)))  # row n's d sums to 1
    res = linprog(-h.ravel(), A_eq=one_each, b_eq=np.ones(N), bounds=(0, None), method="highs")
    assert res.status == 0, res.message
    return res.x.reshape(N, L), -float(res.fun)


def leaf_values(model, k: int, X: np.ndarray, leaves: np.ndarray) -> np.ndarray:
    """The library's own value [N, K] of tree k at each row (its exit leaf ``leaves``, numbered as
    the library numbers them)."""
    if isinstance(model, xgb.XGBModel):
        frame = model.get_booster().trees_to_dataframe()
        frame = frame[frame.Tree == k].set_index("Node")
        return frame.loc[leaves, "Gain"].to_numpy(np.float64)[:, None]
    tree = model if not hasattr(model, "estimators_") else model.estimators_[k]
    with np.errstate(over="ignore", invalid="ignore"):  # (scikit-learn's finiteness check sums the extreme rows)
        return tree.predict_proba(X) if hasattr(tree, "classes_") else tree.predict(X)[:, None]


@pytest.mark.parametrize("name", list(MODELS))
def test_eq_7_solved_as_a_linear_program_is_the_exit_leaf_s_one_hot(name):
    model = fitted(name)
    ens = tree2mat.load(model)
    X, kinds = synthesize(ens, 120, seed=0)
    X = X[~np.isnan(X).any(axis=1)]
    assert kinds["threshold"] and X.shape[0] >= 60
    library = library_leaves(model, X)
    prepared = prepare_input(ens, X)
    for k, tree in enumerate(ens.trees):
        h = similarities(tree, prepared, ens.comparison)
        p, optimum = solve_eq_7(h)
        assert tree.leaf_source_id is not None
        exit_leaf = np.flatnonzero(tree.leaf_source_id[None, :] == library[:, k, None]) % tree.n_leaves
        np.testing.assert_allclose(p, np.eye(tree.n_leaves)[exit_leaf], rtol=0, atol=1e-9)
        assert optimum == pytest.approx(X.shape[0], rel=1e-12)  # LS = 1 at every row's exit leaf (Thm. 2) ...
        runner_up = np.sort(h, axis=1)[:, -2]
        assert (runner_up < 1 - 1e-9).all()  # ... and below 1 elsewhere: the optimum is unique
        T = p @ tree.value  # sum_i p[i] v[i] over the IR's leaves
        np.testing.assert_allclose(T, leaf_values(model, k, X, library[:, k]), rtol=1e-6, atol=1e-9)
        assert len(np.unique(exit_leaf)) > 1
