"""Per-split feature subsets (tree2mat.learn's ``features_per_split``, the paper's section 2.7):
the subsets' draw against its definition (k features, the node's own among them, the others
uniform), the weights outside them after fine-tuning (exactly 0, in the probabilistic trees and
in the hardened IR's projections) against an unrestricted run, and the refusals."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.tree import DecisionTreeClassifier

import tree2mat
from tree2mat import learn
from tree2mat.errors import OptionError


@pytest.fixture(scope="module")
def data():
    return make_classification(300, 8, n_informative=5, n_classes=3, random_state=0)


def test_each_split_draws_its_own_feature_and_k_minus_1_others_uniformly():
    F, k, nodes = 5, 3, 4000
    tree = learn.SoftTree(np.zeros((nodes, F)), np.zeros(nodes), np.ones((1, 1)), np.zeros((1, nodes), bool), np.zeros((1, nodes), bool),
                          np.arange(nodes) % 2)
    allowed = learn.feature_subsets(tree, k, np.random.default_rng(0))
    assert (allowed.sum(axis=1) == k).all() and allowed[np.arange(nodes), tree.feature].all()
    for own in (0, 1):  # each other feature: chosen with probability (k - 1) / (F - 1), sd sqrt(n p (1 - p))
        rows = allowed[tree.feature == own]
        others = [f for f in range(F) if f != own]
        p = (k - 1) / (F - 1)
        assert np.abs(rows[:, others].sum(axis=0) - len(rows) * p).max() < 5 * np.sqrt(len(rows) * p * (1 - p))


def _used(ens):
    """Per tree, per internal node: the set of input features its test reads."""
    F = ens.n_features
    out = []
    for tree in ens.trees:
        out.append([set(ens.projections.terms(int(f) - F)[0].tolist()) if f >= F else {int(f)} for f in tree.feature])
    return out


@pytest.mark.parametrize("model", [RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0),
                                   RandomForestRegressor(n_estimators=3, max_depth=3, random_state=0),
                                   DecisionTreeClassifier(max_depth=3, random_state=0)], ids=["forest", "regressor", "tree"])
def test_weights_outside_a_split_s_subset_stay_zero(data, model):
    X, y = data
    model.fit(X, y)
    free = learn.learn(model, X, y, epochs=6, seed=1)
    kept = learn.learn(model, X, y, epochs=6, seed=1, features_per_split=2)
    assert any((t.weight != 0).sum(axis=1).max() > 2 for t in free.soft)  # (unrestricted, the splits weigh more features)
    for soft, start in zip(kept.soft, tree2mat.load(model).trees):
        assert soft.allowed is not None and (soft.allowed.sum(axis=1) == 2).all()
        assert soft.allowed[np.arange(soft.n_internal), start.feature].all()
        assert (soft.weight[~soft.allowed] == 0).all()
        assert (soft.weight[soft.allowed] != 0).mean() > 0.9  # (inside, the weights did move)
    for soft, nodes in zip(kept.soft, _used(kept.ensemble)):
        for i, features in enumerate(nodes):
            assert features <= set(np.flatnonzero(soft.allowed[i]).tolist())
    again = learn.learn(model, X, y, epochs=6, seed=1, features_per_split=2)
    assert all((a.allowed == b.allowed).all() for a, b in zip(kept.soft, again.soft))  # (seeded)
    other = learn.learn(model, X, y, epochs=0, seed=2, features_per_split=2)
    assert any((a.allowed != b.allowed).any() for a, b in zip(kept.soft, other.soft))


def test_every_feature_is_no_restriction(data):
    X, y = data
    model = RandomForestClassifier(n_estimators=2, max_depth=3, random_state=0).fit(X, y)
    kept = learn.learn(model, X, y, epochs=2, features_per_split=X.shape[1])
    assert all(t.allowed.all() for t in kept.soft)


def test_what_is_refused(data):
    X, y = data
    model = RandomForestClassifier(n_estimators=2, max_depth=2, random_state=0).fit(X, y)
    for kwargs, needle in (({"features_per_split": 0}, "must be an integer >= 1"), ({"features_per_split": 2.5}, "must be an integer"),
                           ({"features_per_split": True}, "must be an integer"), ({"features_per_split": 9}, "the model has 8 features"),
                           ({"features_per_split": 2, "oblique": False}, "axis-aligned split weighs its own feature alone")):
        with pytest.raises(OptionError, match=needle):
            learn.learn(model, X, y, epochs=1, **kwargs)
