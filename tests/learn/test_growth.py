"""Greedy growth (tree2mat.learn's ``grow``, the paper's section 2.5): the grown trees' depth and
leaves against the limits; the deterministic training loss, written out here from the hardened
IR's routing (the reference evaluator), never rising as a tree grows split by split; the grown
leaves against the class frequencies (a regressor's target means) of the rows the IR routes to
them; the very steep probabilistic model against the hardened one; the graphs (verify, exact);
the start's split kept; failed stumps; and the refusals, through the library and the CLI."""

from __future__ import annotations

import json

import joblib
import numpy as np
import pytest
from sklearn.datasets import make_classification, make_friedman1
from sklearn.ensemble import RandomForestClassifier
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

import tree2mat
from tree2mat import learn
from tree2mat.errors import OptionError
from tree2mat.ir import evaluate
from tree2mat.ir.io import ensemble_from_dict

from tree2mat.cli import main  # isort: skip

EXACT = [name for name, spec in tree2mat.FORMS.items() if spec.exact]


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(300, 6, n_informative=4, n_classes=3, random_state=0)
    return X * np.array([1.0, 10.0, 0.1, 100.0, 1.0, 3.0]) + np.array([0.0, 50.0, -2.0, 7.0, 0.0, 1.0]), y


def _root(X, y, regression=False):
    """A single leaf (the paper's start): a tree that may not split its rows."""
    cls = DecisionTreeRegressor if regression else DecisionTreeClassifier
    return cls(min_samples_split=len(X) + 1).fit(X, y)


def _leaves(ens, X):
    return evaluate.apply(ens, X)


def _loss(ens, X, y):
    """Per tree: the mean of -log p[y] over the rows with p the class frequencies of the rows each
    leaf receives (by the IR's routing): the best leaves for that routing."""
    out = []
    for leaf in _leaves(ens, X).T:
        total = 0.0
        for j in np.unique(leaf):
            counts = np.bincount(y[leaf == j], minlength=3)
            total -= np.sum(counts[counts > 0] * np.log(counts[counts > 0] / counts.sum()))
        out.append(total / len(y))
    return out


def test_each_split_lowers_the_loss_of_the_grown_tree(data):
    """Growing to 2, 3, ..., 8 leaves (one seed: each run the next one's first steps) refines the
    routing: the loss never rises; the leaves the IR holds are its rows' class frequencies."""
    X, y = data
    losses = []
    for leaves in range(2, 9):
        result = learn.learn(_root(X, y), X, y, epochs=0, grow=learn.Growth(max_leaves=leaves, epochs=3), seed=4)
        (tree,) = result.ensemble.trees
        assert tree.n_leaves == leaves and sum(s.split for s in result.growth) == leaves - 1
        assert tree.leaf_depths().max() <= int(np.ceil(np.log2(leaves)))  # (breadth-first)
        leaf = _leaves(result.ensemble, X)[:, 0]
        for j in range(leaves):
            assert np.allclose(tree.value[j], np.bincount(y[leaf == j], minlength=3) / np.sum(leaf == j))
        losses.append(_loss(result.ensemble, X, y)[0])
        assert result.growth[-1].objective == pytest.approx(losses[-1], rel=1e-9)
        assert all(a.objective >= b.objective for a, b in zip(result.growth, result.growth[1:]))
    assert all(a >= b for a, b in zip(losses, losses[1:])) and losses[-1] < 0.8 * losses[0], losses


def test_depth_limit_forest_and_the_steep_model_is_the_hardened_one(data):
    X, y = data
    model = RandomForestClassifier(n_estimators=3, min_samples_split=len(X) + 1, random_state=0).fit(X, y)
    result = learn.learn(model, X, y, epochs=4, grow=learn.Growth(max_depth=3, epochs=3), seed=1)
    ens = result.ensemble
    for k, tree in enumerate(ens.trees):
        assert tree.leaf_depths().max() == 3 and 4 < tree.n_leaves <= 8
        assert sum(s.split for s in result.growth if s.tree == k) == tree.n_leaves - 1
    assert {s.depth for s in result.growth} == {0, 1, 2}
    assert result.initial.trees[0].n_leaves == 1 and result.initial_train < 0.5 < result.final.train_deterministic
    mean, scale = learn.standardization(X)
    Z = (X - mean) / scale
    margin = np.min([np.abs(Z @ t.weight.T - t.offset).min(axis=1) for t in result.soft], axis=0)
    away = margin > 1e-2  # sigma(gamma f) within e^-100 of 0 or 1 at every node
    assert away.sum() > 250
    assert np.allclose(learn.forest_proba(list(result.soft), Z[away], 1e4), evaluate.margin(ens, X[away]), atol=1e-9)


@pytest.mark.slow
def test_the_grown_model_s_graphs_are_exact(data):
    X, y = data
    model = RandomForestClassifier(n_estimators=2, max_depth=1, random_state=0).fit(X, y)
    ens = learn.learn(model, X, y, epochs=2, grow=learn.Growth(max_depth=4, epochs=2), features_per_split=3, seed=0).ensemble
    assert ens.is_oblique and max(t.leaf_depths().max() for t in ens.trees) == 4
    assert all(ens.projections.terms(p)[0].size <= 3 for p in range(ens.projections.n_projections))
    reports = [tree2mat.verify(ens, tree2mat.convert(ens, form), rows, rows=300) for form in EXACT for rows in (None, X)]
    assert len(reports) == 2 * len(EXACT) >= 8 and all(r.passed for r in reports), [r.summary() for r in reports if not r.passed]


def test_the_start_s_splits_stay_and_its_leaves_are_grown(data):
    """From scikit-learn's stump: the grown tree's root, untuned (epochs=0), is the stump's test."""
    X, y = data
    stump = DecisionTreeClassifier(max_depth=1, random_state=0).fit(X, y)
    result = learn.learn(stump, X, y, epochs=0, grow=learn.Growth(max_depth=3, epochs=2), seed=0)
    tree = result.ensemble.trees[0]
    assert tree.leaf_depths().max() == 3 and tree.n_leaves > 4
    f, c = stump.tree_.feature[0], stump.tree_.threshold[0]
    root_left = evaluate.columns(result.ensemble, X)[:, tree.feature[0]] <= tree.threshold[0]
    assert (root_left == (X[:, f] <= c)).all()


def test_regression_leaves_are_the_target_means_and_the_error_falls():
    X, y = make_friedman1(300, 5, noise=0.5, random_state=0)
    errors = []
    for depth in (1, 2, 3):
        result = learn.learn(_root(X, y, True), X, y, epochs=0, grow=learn.Growth(max_depth=depth, epochs=3), seed=2)
        (tree,) = result.ensemble.trees
        assert tree.leaf_depths().max() == depth and tree.n_leaves == 2**depth
        leaf = _leaves(result.ensemble, X)[:, 0]
        assert np.allclose(tree.value[:, 0], [y[leaf == j].mean() for j in range(tree.n_leaves)])
        errors.append(float(np.mean((evaluate.predict(result.ensemble, X)["variable"].ravel() - y) ** 2)))
        assert result.growth[-1].objective == pytest.approx(errors[-1], rel=1e-9)
    assert errors[0] < np.var(y) and errors[0] > errors[1] > errors[2], errors
    tuned = learn.learn(_root(X, y, True), X, y, epochs=5, grow=learn.Growth(max_depth=3, epochs=3), seed=2)
    assert tuned.final.train_deterministic < errors[2]


def test_a_leaf_no_stump_can_split_stays_a_leaf_after_its_attempts():
    X = np.ones((40, 3))
    y = np.arange(40) % 2
    result = learn.learn(_root(X, y), X, y, epochs=1, grow=learn.Growth(max_depth=2, epochs=2, attempts=2))
    assert result.ensemble.trees[0].n_leaves == 1
    assert [(s.depth, s.rows, s.attempts, s.split) for s in result.growth] == [(0, 40, 2, False)]


def test_what_is_refused(data):
    X, y = data
    tree = DecisionTreeClassifier(max_depth=3, random_state=0).fit(X, y)
    for growth, kwargs, needle in (
        (learn.Growth(), {}, "needs a limit"), (learn.Growth(max_depth=0), {}, "--grow-depth must be an integer >= 1"),
        (learn.Growth(max_leaves=1), {}, "--grow-leaves must be an integer >= 2"), (learn.Growth(max_depth=2.5), {}, "--grow-depth must be an integer"),
        (learn.Growth(max_depth=4, epochs=0), {}, "--grow-epochs"), (learn.Growth(max_depth=4, attempts=0), {}, "--grow-attempts"),
        (learn.Growth(max_depth=4), {"oblique": False}, "trains oblique splits"),
        (learn.Growth(max_depth=2), {}, "--grow-depth 2: the model's trees reach depth 3"),
        (learn.Growth(max_leaves=4), {}, "--grow-leaves 4: the model's trees have up to 8 leaves"),
    ):
        with pytest.raises(OptionError, match=needle):
            learn.learn(tree, X, y, epochs=1, grow=growth, **kwargs)


# ------------------------------------------------------------------------------------------ CLI


@pytest.fixture(scope="module")
def files(tmp_path_factory, data):
    d = tmp_path_factory.mktemp("grow")
    X, y = data
    joblib.dump(DecisionTreeClassifier(max_depth=2, random_state=0).fit(X, y), d / "tree.joblib")
    np.savez(d / "rows.npz", X=X, y=y)
    return d


def test_learn_grows_then_convert_verify(files, capsys):
    out = files / "grown.json"
    args = ["learn", str(files / "tree.joblib"), "--data", str(files / "rows.npz"), "-o", str(out), "--epochs", "2", "--grow-depth", "4",
            "--grow-epochs", "2", "--json", "-", "--no-progress"]
    assert main(args) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["grow"] == {"max_depth": 4, "max_leaves": None, "epochs": 2, "attempts": learn.GROW_ATTEMPTS}
    ens = ensemble_from_dict(json.loads(out.read_text()))
    assert info["growth"]["depth"] == [int(ens.trees[0].leaf_depths().max())] == [4]
    assert info["growth"]["leaves"] == [ens.trees[0].n_leaves] and info["growth"]["splits"] == ens.trees[0].n_leaves - 4
    assert main(["learn", str(files / "tree.joblib"), "--data", str(files / "rows.npz"), "-o", str(files / "g2.json"), "--epochs", "1",
                 "--grow-leaves", "6", "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "grown greedily (deterministic)" in text and "grown: 2 stumps kept" in text
    assert main(["convert", str(out), "-o", str(files / "grown.onnx")]) == 0
    capsys.readouterr()
    assert main(["verify", str(out), str(files / "grown.onnx"), "--rows", "300"]) == 0
    assert "PASS" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--grow-epochs", "3"], "--grow-epochs sets greedy growth: give --grow-depth or --grow-leaves too"),
        (["--grow-attempts", "3"], "--grow-attempts sets greedy growth"),
        (["--grow-depth", "1"], "--grow-depth 1: the model's trees reach depth 2"),
        (["--grow-depth", "4", "--axis-aligned"], "trains oblique splits"),
        (["--grow-leaves", "1"], "--grow-leaves must be an integer >= 2"),
        (["--grow-depth", "4", "--grow-epochs", "0"], "--grow-epochs must be an integer >= 1"),
    ],
)
def test_growth_errors_are_one_line_and_write_nothing(files, capsys, args, needle):
    out = files / "never.json"
    assert main(["learn", str(files / "tree.joblib"), "--data", str(files / "rows.npz"), *args, "-o", str(out), "--epochs", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err, err
    assert not out.exists()
