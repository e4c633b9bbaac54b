"""The ``oblivious`` form (tree2mat/forms/oblivious.py): oblivious trees (every node of a level
the same test) found by their levels, other trees as the sign form finds them, in one graph;
against the reference evaluator on every row kind, with NaN directions, +-inf thresholds, the
``<`` comparison, mixed ensembles and scikit-learn's own trees. CatBoost's symmetric trees are
tested against CatBoost in tests/frontends/test_catboost.py (every exact form)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from sklearn.datasets import make_regression
from sklearn.ensemble import GradientBoostingRegressor

import tree2mat
from tree2mat.cli import main
from tree2mat.forms import oblivious
from tree2mat.ir import evaluate, matrices
from tree2mat.ir.core import Aggregation, Comparison, Ensemble, Link, Task, Tree, leaf_ref
from tree2mat.ir.io import dumps
from tree2mat.ir.matrices import oblivious_levels
from tree2mat.verify import synthesize

from conftest import run_onnx


def oblivious_tree(depth: int, n_features: int, rng: np.random.Generator, K: int = 1) -> Tree:
    """A random oblivious tree: per level one feature, threshold (some +-inf) and NaN direction,
    repeated at every node of the level (breadth-first, leaves left to right)."""
    I = 2**depth - 1
    feature, threshold, left_nan = np.zeros(I, np.int64), np.zeros(I), np.zeros(I, bool)
    left, right = np.zeros(I, np.int64), np.zeros(I, np.int64)
    for d in range(depth):
        f, t = int(rng.integers(n_features)), float(np.float32(rng.normal()))
        t = [t, t, t, np.inf, -np.inf][int(rng.integers(5))] if depth > 2 else t
        level = np.arange(2**d - 1, 2 ** (d + 1) - 1)
        feature[level], threshold[level], left_nan[level] = f, t, bool(rng.random() < 0.5)
    for i in range(I):
        for child, side in ((2 * i + 1, left), (2 * i + 2, right)):
            side[i] = child if child < I else leaf_ref(child - I)
    return Tree(feature, threshold, left_nan, left, right, rng.normal(size=(2**depth, K)))


def ensemble(trees: tuple[Tree, ...], n_features: int, comparison: Comparison = Comparison.LE, K: int = 1) -> Ensemble:
    return Ensemble(
        trees=trees, n_features=n_features, n_outputs=K, output_index=np.full(len(trees), -1), comparison=comparison,
        source_dtype=np.dtype(np.float32), aggregation=Aggregation.SUM, base_score=np.zeros(K), link=Link.IDENTITY,
        task=Task.REGRESSION,
    ).validate()


@pytest.fixture(scope="module")
def catboost_like():
    """40 oblivious trees of depth 0 to 8 (CatBoost's default is 6) over 6 features, 2 outputs."""
    rng = np.random.default_rng(0)
    return ensemble(tuple(oblivious_tree(int(rng.integers(0, 9)), 6, rng, K=2) for _ in range(40)), 6, K=2)


def test_oblivious_levels_finds_the_level_tests_and_nothing_else(catboost_like):
    rng = np.random.default_rng(1)
    tree = oblivious_tree(4, 3, rng)
    assert oblivious_levels(tree).tolist() == [0, 1, 3, 7]
    assert oblivious_levels(oblivious_tree(0, 3, rng)).size == 0
    other = tree.threshold.copy()
    other[5] = np.nextafter(other[5], np.inf)  # one node of level 2 tests another threshold
    assert oblivious_levels(dataclasses.replace(tree, threshold=other)) is None
    flipped = tree.default_left.copy()
    flipped[4] = ~flipped[4]
    assert oblivious_levels(dataclasses.replace(tree, default_left=flipped)) is None
    model = GradientBoostingRegressor(n_estimators=5, max_depth=3, random_state=0).fit(*make_regression(300, 4, random_state=0))
    assert all(oblivious_levels(t) is None for t in tree2mat.load(model).trees if t.n_leaves == 8)


@pytest.mark.parametrize("comparison", [Comparison.LE, Comparison.LT])
def test_oblivious_ensembles_route_as_the_reference(comparison, catboost_like):
    """Every row kind verify synthesizes (on and around every threshold, NaN, +-inf, extreme):
    leaves exact, values within tolerance; the leaf index is sum_d 2^(D-1-d) r_d."""
    ens = dataclasses.replace(catboost_like, comparison=comparison).validate() if comparison is Comparison.LE else ensemble(
        tuple(dataclasses.replace(t, threshold=np.where(np.isneginf(t.threshold), 0.0, t.threshold)) for t in catboost_like.trees), 6,
        comparison, K=2,
    )
    onx = tree2mat.convert(ens, "oblivious")
    report = tree2mat.verify(ens, onx, rows=1000)
    assert report.passed, report.summary()
    ops = [n.op_type for n in onx.graph.node]
    assert "ArgMax" not in ops and "MatMul" not in ops  # (every tree by its levels: bits times powers, summed)
    X, _ = synthesize(ens, 300)
    leaves = run_onnx(tree2mat.convert(ens, "oblivious", leaves=True), X)["leaves"]
    assert (leaves == evaluate.apply(ens, X)).all()


def test_mixed_ensembles_take_each_tree_its_way(catboost_like):
    """scikit-learn's trees (not oblivious) beside oblivious ones, in any order: the levels' exit
    and the sign form's, concatenated; every form agrees with the reference."""
    model = GradientBoostingRegressor(n_estimators=8, max_depth=4, random_state=0).fit(*make_regression(300, 6, random_state=0))
    sk = tree2mat.load(model)
    trees = catboost_like.trees[:7] + sk.trees + catboost_like.trees[7:20]
    mixed = dataclasses.replace(
        ensemble(tuple(dataclasses.replace(t, value=t.value[:, :1]) for t in trees), 6), source_dtype=sk.source_dtype,
    ).validate()
    levelled, other = oblivious.split(mixed)
    assert levelled.size == 20 and other.size == 8
    report = tree2mat.verify(mixed, tree2mat.convert(mixed, "oblivious"), rows=500)
    assert report.passed, report.summary()
    report = tree2mat.verify(model, tree2mat.convert(model, "oblivious"), rows=300)  # (no oblivious tree: the sign form's way)
    assert report.passed, report.summary()


def test_inspect_shows_an_oblivious_tree_s_levels_and_powers(catboost_like, tmp_path, capsys):
    path = tmp_path / "oblivious.json"
    path.write_text(dumps(catboost_like))
    deep = next(k for k, t in enumerate(catboost_like.trees) if t.n_leaves >= 16)
    t = catboost_like.trees[deep]
    D = int(np.log2(t.n_leaves))
    assert main(["inspect", str(path), "--tree", str(deep), "--format", "npz", "-o", str(tmp_path / "m.npz")]) == 0
    mats = np.load(tmp_path / "m.npz")
    assert mats["level_power"].tolist() == [2 ** (D - 1 - d) for d in range(D)]
    assert mats["level_feature"].tolist() == t.feature[2 ** np.arange(D) - 1].tolist()
    assert main(["inspect", str(path), "--tree", str(deep)]) == 0
    assert "levels (an oblivious tree" in capsys.readouterr().out
    assert main(["inspect", str(path), "--format", "json"]) == 0
    assert '"oblivious_trees": ' + str(sum(t.n_internal > 0 for t in catboost_like.trees)) in capsys.readouterr().out


def test_a_tree_deeper_than_the_matmul_holds_is_taken_as_any_tree(catboost_like, monkeypatch):
    """Past MAX_LEVELS the leaf index would pass float32's integers: such a tree goes the sign
    form's way (here the limit lowered to 3 levels)."""
    monkeypatch.setattr(matrices, "MAX_LEVELS", 3)
    levelled, other = oblivious.split(catboost_like)
    assert other.size and all(catboost_like.trees[t].n_leaves > 8 for t in other)
    report = tree2mat.verify(catboost_like, tree2mat.convert(catboost_like, "oblivious"), rows=300)
    assert report.passed, report.summary()
