"""ABRF-1 (tree2mat.attention) against independent computations: leaf means from scikit-learn's
own ``apply``, the forest's own predictions at the limits of the contamination model, each
tree's own predictions, and the solvers' answers against the constraints and other points of
the simplex."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.datasets import make_friedman1
from sklearn.ensemble import ExtraTreesRegressor, GradientBoostingRegressor, RandomForestClassifier, RandomForestRegressor

import tree2mat
from tree2mat import attention
from tree2mat.attention import gradient
from tree2mat.errors import DataError, ModelFileError, OptionError, Tree2MatError, UnsupportedModelError
from tree2mat.ir import evaluate

X, Y = make_friedman1(n_samples=300, n_features=6, noise=1.0, random_state=0)
HOLES = X.copy()
HOLES[np.random.default_rng(0).random(X.shape) < 0.05] = np.nan


@pytest.fixture(scope="module")
def forest():
    return RandomForestRegressor(n_estimators=12, max_depth=5, random_state=0).fit(X[:200], Y[:200])


def _sklearn_means(model, X_fit, X_rows):
    """A_k(x) for every row of X_rows and tree k, from scikit-learn's node ids: the nan-mean of
    the fitting rows in the same node. NaN where no fitting row is there."""
    fit_nodes, row_nodes = model.apply(X_fit), model.apply(X_rows)
    out = np.full((X_rows.shape[0], fit_nodes.shape[1], X_fit.shape[1]), np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # nanmean of an all-NaN column
        for k in range(fit_nodes.shape[1]):
            for i, node in enumerate(row_nodes[:, k]):
                same = X_fit[fit_nodes[:, k] == node]
                if len(same):
                    out[i, k] = np.nanmean(same, axis=0)
    return out


def test_leaf_means_are_the_fitting_rows_means_in_scikit_learn_s_leaves(forest):
    abrf = attention.fit(forest, HOLES[:200], Y[:200], epsilon=0.0)
    rows = HOLES[200:]
    leaves = evaluate.apply(abrf.ensemble, rows)
    ours = np.stack([abrf.leaf_means[k][leaves[:, k]] for k in range(abrf.n_trees)], axis=1)
    np.testing.assert_allclose(ours, _sklearn_means(forest, HOLES[:200], rows), rtol=1e-12, equal_nan=True)


def test_softmax_weighs_nearer_leaf_means_more(forest):
    abrf = attention.fit(forest, X[:200], Y[:200], epsilon=0.0, tau=2.0)
    rows = X[200:]
    A = _sklearn_means(forest, X[:200], rows)
    logits = -np.sum((rows[:, None, :] - A) ** 2, axis=2) / (2 * 2.0)
    expected = np.exp(logits - logits.max(axis=1, keepdims=True))
    expected /= expected.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(abrf.softmax_weights(rows), expected, rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(abrf.attention(rows).sum(axis=1), 1.0, rtol=1e-12)


def test_no_contamination_and_a_hot_softmax_is_the_forest(forest):
    abrf = attention.fit(forest, X[:200], Y[:200], epsilon=0.0, tau=1e12)
    np.testing.assert_allclose(abrf.predict(X[200:]), forest.predict(X[200:]), rtol=1e-9)


@pytest.mark.parametrize("loss", attention.LOSSES)
def test_full_contamination_is_the_trees_weighted_by_w(forest, loss):
    abrf = attention.fit(forest, X[:200], Y[:200], epsilon=1.0, loss=loss)
    trees = np.stack([t.predict(X[200:]) for t in forest.estimators_], axis=1)
    np.testing.assert_allclose(abrf.predict(X[200:]), trees @ abrf.weights, rtol=1e-9)


@pytest.mark.parametrize("loss", attention.LOSSES)
@pytest.mark.parametrize("epsilon", [0.3, 1.0])
def test_the_solved_weights_are_on_the_simplex_and_beat_other_points_of_it(forest, loss, epsilon):
    abrf = attention.fit(forest, X[:200], Y[:200], epsilon=epsilon, tau=1.0, loss=loss)
    w = abrf.weights
    assert abrf.get_params() == {"variant": 1, "epsilon": epsilon, "tau": 1.0, "loss": loss}
    assert (w >= 0).all() and abs(w.sum() - 1.0) < 1e-12
    best = attention.objective(abrf, X[:200], Y[:200])
    uniform = attention.objective(abrf, X[:200], Y[:200], np.full(abrf.n_trees, 1 / abrf.n_trees))
    assert best < uniform
    for other in np.random.default_rng(1).dirichlet(np.ones(abrf.n_trees), size=200):
        assert best <= attention.objective(abrf, X[:200], Y[:200], other) * (1 + 1e-9)


def test_a_leaf_no_fitting_row_reached_leaves_its_tree_out_of_the_softmax(forest):
    few = X[:20]  # most leaves get no fitting row
    abrf = attention.fit(forest, few, Y[:20], epsilon=0.0, tau=5.0)
    rows = X[200:]
    leaves = evaluate.apply(abrf.ensemble, rows)
    empty = np.stack([abrf.leaf_counts[k][leaves[:, k]] == 0 for k in range(abrf.n_trees)], axis=1)
    assert empty.any() and not empty.all(axis=1).all()
    D = abrf.softmax_weights(rows)
    some = ~empty.all(axis=1)
    assert (D[some][empty[some]] == 0).all() and (D[some][~empty[some]] > 0).all()
    np.testing.assert_allclose(D[~some], 1 / abrf.n_trees)


def test_extra_trees_fit_too():
    model = ExtraTreesRegressor(n_estimators=6, max_depth=4, random_state=0).fit(X, Y)
    abrf = attention.fit(model, X, Y, epsilon=0.5, tau=1.0)
    assert attention.objective(abrf, X, Y) < attention.objective(abrf, X, Y, np.full(6, 1 / 6))


@pytest.mark.parametrize(
    "model",
    [
        GradientBoostingRegressor(n_estimators=3).fit(X, Y),
        RandomForestRegressor(n_estimators=3, random_state=0).fit(X, np.stack([Y, -Y], axis=1)),
        RandomForestClassifier(n_estimators=3, random_state=0).fit(X, np.stack([Y > Y.mean(), Y > 10], axis=1)),
    ],
    ids=["boosting", "two outputs", "two targets"],
)
def test_models_that_are_not_averaging_forests_of_one_target_are_refused(model):
    with pytest.raises(UnsupportedModelError, match="averages one output or one target's class probabilities"):
        attention.fit(model, X, Y)


# ------------------------------------------------------------------------------------ classifiers

LABELS = np.array(["low", "mid", "high"])[np.digitize(Y, np.quantile(Y, [1 / 3, 2 / 3]))]


@pytest.fixture(scope="module")
def classifier():
    return RandomForestClassifier(n_estimators=12, max_depth=5, random_state=0).fit(X[:200], LABELS[:200])


def test_a_classifier_s_limits_are_the_forest_and_its_trees_weighted_by_w(classifier):
    hot = attention.fit(classifier, X[:200], LABELS[:200], epsilon=0.0, tau=1e30)
    proba = classifier.predict_proba(X[200:])
    np.testing.assert_allclose(hot.predict_proba(X[200:]), proba, rtol=1e-9, atol=1e-12)
    top = np.sort(proba, axis=1)
    clear = top[:, -1] - top[:, -2] > 1e-9  # (a tie is decided by the sums' rounding)
    assert clear.mean() > 0.8
    np.testing.assert_array_equal(hot.predict(X[200:])[clear], classifier.predict(X[200:])[clear])
    full = attention.fit(classifier, X[:200], LABELS[:200], epsilon=1.0)
    trees = np.stack([t.predict_proba(X[200:]) for t in classifier.estimators_], axis=1)  # [N, T, C]
    np.testing.assert_allclose(full.predict_proba(X[200:]), np.einsum("t,ntc->nc", full.weights, trees), rtol=1e-9, atol=1e-12)
    assert full.classes.tolist() == classifier.classes_.tolist() and full.predict(X[:3]).dtype.kind == "U"


@pytest.mark.parametrize("loss", attention.LOSSES)
def test_a_classifier_s_weights_solve_the_one_hot_program(classifier, loss):
    """eq. (30): the squared (or absolute) distance of the one-hot labels from the weighted
    class probabilities, summed over rows and classes, computed here from the trees' own
    predict_proba; the solved w beats uniform and random points of the simplex."""
    abrf = attention.fit(classifier, X[:200], LABELS[:200], epsilon=0.5, tau=1.0, loss=loss)
    hot = (LABELS[:200, None] == classifier.classes_[None, :]).astype(float)
    trees = np.stack([t.predict_proba(X[:200]) for t in classifier.estimators_], axis=1)
    D = abrf.softmax_weights(X[:200])

    def loss_of(w):
        error = hot - np.einsum("nt,ntc->nc", 0.5 * D + 0.5 * w[None, :], trees)
        return np.sum(error**2) if loss == "l2" else np.sum(np.abs(error))

    best = loss_of(abrf.weights)
    assert best == pytest.approx(attention.objective(abrf, X[:200], LABELS[:200]), rel=1e-9)
    assert best < loss_of(np.full(abrf.n_trees, 1 / abrf.n_trees))
    for other in np.random.default_rng(1).dirichlet(np.ones(abrf.n_trees), size=100):
        assert best <= loss_of(other) * (1 + 1e-9)


def test_a_classifier_s_selection_scores_one_hot_errors_and_its_scores_are_scikit_learn_s(classifier):
    from sklearn.metrics import accuracy_score, log_loss

    chosen = attention.select(classifier, X[:200], LABELS[:200], epsilon=0.5, folds=3)
    hot = (LABELS[:200, None] == classifier.classes_[None, :]).astype(float)
    assert chosen.held_out.shape == (200, 3)
    assert chosen.scores[(chosen.epsilon, chosen.tau)] == pytest.approx(np.mean(np.sum((hot - chosen.held_out) ** 2, axis=1)), rel=1e-12)
    np.testing.assert_allclose(chosen.forest_predictions, classifier.predict_proba(X[:200]), rtol=1e-12)
    ours = attention.scores(LABELS[:200], chosen.held_out, classifier.classes_)
    assert ours["accuracy"] == pytest.approx(accuracy_score(LABELS[:200], classifier.classes_[np.argmax(chosen.held_out, axis=1)]))
    assert ours["log_loss"] == pytest.approx(log_loss(LABELS[:200], chosen.held_out, labels=classifier.classes_), rel=1e-9)


def test_a_classifier_refuses_labels_it_does_not_know_and_a_regressor_has_no_probabilities(classifier, forest):
    with pytest.raises(DataError, match="'other', which is none of the forest's classes"):
        attention.fit(classifier, X[:3], np.array(["low", "other", "mid"]), epsilon=0.5, tau=1.0)
    with pytest.raises(UnsupportedModelError, match="no class probabilities"):
        attention.fit(forest, X[:200], Y[:200], epsilon=0.5, tau=1.0).predict_proba(X[:2])


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [({"epsilon": 1.5}, "--epsilon"), ({"tau": 0.0}, "--tau"), ({"tau": float("nan")}, "--tau"), ({"loss": "l3"}, "--loss")],
)
def test_bad_options_are_refused(forest, kwargs, needle):
    with pytest.raises(OptionError, match=needle):
        attention.fit(forest, X[:200], Y[:200], **kwargs)


# ------------------------------------------------------------------------------- the saved file


def test_a_saved_model_loads_and_predicts_the_same(forest, tmp_path):
    abrf = attention.fit(forest, HOLES[:60], Y[:60], epsilon=0.4, tau=3.0)  # NaN means and leaves no row reached
    path = tmp_path / "forest.abrf.json"
    assert abrf.save(path) == path.stat().st_size
    again = attention.load(path)
    np.testing.assert_array_equal(again.weights, abrf.weights)
    for a, b in zip(again.leaf_means, abrf.leaf_means):
        np.testing.assert_array_equal(a, b)  # (NaN where NaN)
    assert any(np.isnan(m).any() for m in again.leaf_means) and any((c == 0).any() for c in again.leaf_counts)
    np.testing.assert_array_equal(again.predict(HOLES[200:]), abrf.predict(HOLES[200:]))


def _edited(forest, tmp_path, edit):
    doc = attention.fit(forest, X[:200], Y[:200], epsilon=0.5).to_dict()
    edit(doc)
    path = tmp_path / "edited.json"
    path.write_text(__import__("json").dumps(doc))
    return path


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda d: d.update(tree2mat_attention=2), "not a tree2mat attention forest of format 1"),
        (lambda d: d.update(variant=4), "variant 4 is none of ABRF-1, ABRF-2, ABRF-3"),
        (lambda d: d.update(variant=2), "tree_scales must have the shape"),
        (lambda d: d.update(tree_scales=[1.0] + [0.0] * 11), "ABRF-1 has no tree_scales"),
        (lambda d: d.update(variant=3, tree_scales=[0.5] * 12, feature_weights=[1.0] * 6), "tree_scales must be >= 0 and sum to 1"),
        (lambda d: d.update(variant=2, tree_scales=[1 / 12] * 12, feature_weights=[1.0] * 6), "ABRF-2 has no contamination"),
        (lambda d: d.update(epsilon=-0.1), "epsilon must be a number in"),
        (lambda d: d.update(tau=float("inf")), "tau must be a finite number"),
        (lambda d: d.update(loss="l3"), "loss must be one of"),
        (lambda d: d.update(weights=d["weights"][:-1]), "weights must have the shape"),
        (lambda d: d["weights"].__setitem__(0, d["weights"][0] + 0.5), "sum to 1"),
        (lambda d: d["weights"].__setitem__(0, float("nan")), "finite numbers"),
        (lambda d: d["leaf_means"][0].pop(), r"leaf_means\[0\] must have the shape"),
        (lambda d: d["leaf_means"][1][0].__setitem__(0, "x"), r"leaf_means\[1\] must hold finite numbers or null"),
        (lambda d: d["leaf_counts"][2].__setitem__(0, -1), r"leaf_counts\[2\] must be"),
        (lambda d: d.pop("forest"), "ill-formed attention forest file: 'forest'"),
    ],
)
def test_an_edited_file_is_refused_naming_what_is_wrong(forest, tmp_path, edit, needle):
    path = _edited(forest, tmp_path, edit)
    with pytest.raises(Tree2MatError, match=needle) as info:
        attention.load(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_files_that_are_not_attention_forests_are_refused(tmp_path):
    path = tmp_path / "x.json"
    for content in ("{not json", "[1, 2]", '{"tree2mat_ir": 1}'):
        path.write_text(content)
        with pytest.raises(ModelFileError, match=str(path)):
            attention.load(path)
    with pytest.raises(ModelFileError, match="not a readable"):
        attention.load(tmp_path / "missing.json")


# ------------------------------------------------------------------ epsilon and tau by cross-validation


def test_auto_picks_the_pair_with_the_lowest_held_out_error(forest):
    Xf, yf = X[:200], Y[:200]
    chosen = attention.select(forest, Xf, yf, folds=4, seed=3)
    assert len(chosen.scores) == len(attention.EPSILON_GRID) * len(attention.TAU_FACTORS)
    assert chosen.scores[(chosen.epsilon, chosen.tau)] == min(chosen.scores.values())
    # one pair's score, recomputed here: the rows shuffled by the seed, split in 4, each held out once
    e, t = 0.5, sorted({t for _, t in chosen.scores})[2]
    held = np.array_split(np.random.default_rng(3).permutation(200), 4)
    errors = [yf[out] - attention.fit(forest, np.delete(Xf, out, 0), np.delete(yf, out), epsilon=e, tau=t).predict(Xf[out]) for out in held]
    assert chosen.scores[(e, t)] == pytest.approx(np.mean(np.concatenate(errors) ** 2), rel=1e-9)
    # the forest is not refitted: its held-out error is its error on every row
    assert chosen.forest_score == pytest.approx(np.mean((yf - forest.predict(Xf)) ** 2), rel=1e-9)
    fitted = attention.fit(forest, Xf, yf, folds=4, seed=3)
    assert (fitted.epsilon, fitted.tau) == (chosen.epsilon, chosen.tau)


def test_a_value_given_for_one_of_them_is_kept(forest):
    chosen = attention.select(forest, X[:200], Y[:200], epsilon=0.25, folds=3)
    assert chosen.epsilon == 0.25 and {e for e, _ in chosen.scores} == {0.25} and len(chosen.scores) == len(attention.TAU_FACTORS)
    chosen = attention.select(forest, X[:200], Y[:200], tau=2.0, folds=3, loss="l1")
    assert chosen.tau == 2.0 and len(chosen.scores) == len(attention.EPSILON_GRID)


@pytest.mark.parametrize("folds", [1, 201, 2.5])
def test_bad_fold_counts_are_refused(forest, folds):
    with pytest.raises(OptionError, match="--folds"):
        attention.select(forest, X[:200], Y[:200], folds=folds)


def test_other_commands_than_convert_and_verify_refuse_an_attention_forest_by_name(forest, tmp_path):
    path = tmp_path / "forest.abrf.json"
    attention.fit(forest, X[:200], Y[:200], epsilon=0.5, tau=1.0).save(path)
    with pytest.raises(UnsupportedModelError, match="an attention-based forest .*convert and verify take it"):
        tree2mat.load(path)


def test_the_held_out_predictions_are_the_chosen_pair_s(forest):
    chosen = attention.select(forest, X[:200], Y[:200], epsilon=0.5, folds=3)
    assert np.mean((Y[:200] - chosen.held_out) ** 2) == pytest.approx(chosen.scores[(chosen.epsilon, chosen.tau)], rel=1e-12)
    np.testing.assert_allclose(chosen.forest_predictions, forest.predict(X[:200]), rtol=1e-12)
    ours = attention.scores(Y[:200], chosen.held_out)
    from sklearn.metrics import mean_absolute_error, r2_score

    assert ours["r2"] == pytest.approx(r2_score(Y[:200], chosen.held_out), rel=1e-12)
    assert ours["mae"] == pytest.approx(mean_absolute_error(Y[:200], chosen.held_out), rel=1e-12)


def test_a_tree_infinitely_far_from_the_row_takes_no_part(forest):
    """A squared distance beyond float32's largest number (an infinite coordinate, or float32's
    largest) leaves the tree out of the softmax, as the float32 graph's overflow does; with
    every tree out, all weigh alike."""
    abrf = attention.fit(forest, X[:200], Y[:200], epsilon=0.0, tau=1.0)
    rows = np.repeat(X[200:201], 3, axis=0)
    rows[0, 0], rows[1, 0] = np.finfo(np.float32).max, -np.inf
    rows[2, 0] = 1e18  # (1e36 per tree: within float32, and no tree out)
    D = abrf.softmax_weights(rows)
    np.testing.assert_allclose(D[:2], 1 / abrf.n_trees, rtol=1e-12)
    assert np.isfinite(D[2]).all() and abrf.nearest(rows)[2] > 1e35  # (taken part, every tree)
    np.testing.assert_allclose(abrf.nearest(rows)[:2], 0.0)


def test_values_to_choose_from_replace_a_grid(forest):
    chosen = attention.select(forest, X[:200], Y[:200], epsilon=[0.0, 1 / 3, 1 / 3], tau=[0.5, 2.0], folds=3)
    assert set(chosen.scores) == {(e, t) for e in (0.0, 1 / 3) for t in (0.5, 2.0)}
    one = attention.select(forest, X[:200], Y[:200], epsilon=1 / 3, tau=2.0, folds=3)
    assert one.scores[(1 / 3, 2.0)] == pytest.approx(chosen.scores[(1 / 3, 2.0)], rel=1e-12)
    fitted = attention.fit(forest, X[:200], Y[:200], epsilon=[0.0, 1 / 3], tau=[0.5, 2.0], folds=3)
    assert (fitted.epsilon, fitted.tau) == (chosen.epsilon, chosen.tau)
    with pytest.raises(OptionError, match="--epsilon"):
        attention.select(forest, X[:200], Y[:200], epsilon=[0.5, 2.0])
    with pytest.raises(OptionError, match="at least one value"):
        attention.select(forest, X[:200], Y[:200], tau=[])


# ------------------------------------------------------------------------------------ ABRF-2 and ABRF-3


def test_abrf_2_is_eq_23_on_scikit_learn_s_means_and_trees(forest):
    """softmax_k(-||(x - A_k(x)) o z||^2 v_k / 2) weights the trees' own predictions."""
    abrf = attention.fit(forest, X[:200], Y[:200], variant=2, tau=1.0)
    assert abrf.variant == 2 and abrf.epsilon == 0.0 and abrf.get_params()["variant"] == 2
    v, z = abrf.tree_scales, abrf.feature_weights
    assert (v >= 0).all() and abs(v.sum() - 1) < 1e-12 and (z > 0).all()
    alpha, trees = _eq_23(forest, abrf, X[200:])
    np.testing.assert_allclose(abrf.predict(X[200:]), np.sum(alpha * trees, axis=1), rtol=1e-9)


def _eq_23(forest, abrf, rows):
    """ABRF-2's softmax (eq. 23) from scikit-learn's leaf means and the model's v and z, and
    the trees' own predictions, [N, T] each."""
    A = _sklearn_means(forest, X[:200], rows)
    logits = -np.sum(((rows[:, None, :] - A) * abrf.feature_weights) ** 2, axis=2) * abrf.tree_scales[None, :] / 2
    soft = np.exp(logits - logits.max(axis=1, keepdims=True))
    return soft / soft.sum(axis=1, keepdims=True), np.stack([t.predict(rows) for t in forest.estimators_], axis=1)


@pytest.mark.parametrize("variant", [2, 3])
def test_the_gradient_fit_improves_on_its_abrf_1_start(forest, variant):
    start = attention.fit(forest, X[:200], Y[:200], epsilon=0.0 if variant == 2 else 0.5, tau=1.0)
    fitted = attention.fit(forest, X[:200], Y[:200], epsilon=start.epsilon, tau=1.0, variant=variant)
    assert attention.objective(fitted, X[:200], Y[:200]) < attention.objective(start, X[:200], Y[:200])
    if variant == 3:
        assert fitted.epsilon == 0.5 and (fitted.weights >= 0).all() and abs(fitted.weights.sum() - 1) < 1e-12


@pytest.mark.parametrize("eps", [0.0, 0.4])
def test_the_analytic_gradient_is_the_loss_s_slope(forest, eps):
    """The gradient L-BFGS follows, against central differences of the loss, whose value is
    the objective of the model at those parameters (computed on another path)."""
    start = attention.fit(forest, HOLES[:200], Y[:200], epsilon=eps, tau=3.0)
    leaves = evaluate.apply(start.ensemble, HOLES[:200])
    Yk = Y[:200, None]
    loss_and_gradient = gradient._gradient_problem(start, HOLES[:200], Yk, leaves, eps)[0]
    problem = lambda params: loss_and_gradient(params, start.weights)  # noqa: E731
    rng = np.random.default_rng(0)
    params = np.concatenate([rng.normal(0, 0.5, start.n_trees), rng.normal(0, 0.5, start.ensemble.n_features)])
    value, grad = problem(params)
    model = gradient._gradient_model(start, params, start.weights, 3)
    assert value == pytest.approx(attention.objective(model, HOLES[:200], Y[:200]), rel=1e-9)
    h = 1e-6
    numeric = np.array([(problem(params + h * e)[0] - problem(params - h * e)[0]) / (2 * h) for e in np.eye(params.size)])
    np.testing.assert_allclose(grad, numeric, rtol=1e-4, atol=1e-4 * np.abs(numeric).max())


def test_variants_refuse_what_they_do_not_have(forest):
    with pytest.raises(OptionError, match="ABRF-2 has no contamination"):
        attention.fit(forest, X[:200], Y[:200], variant=2, epsilon=0.5)
    with pytest.raises(OptionError, match="fitted by gradients on the L2 loss"):
        attention.fit(forest, X[:200], Y[:200], variant=3, loss="l1")
    with pytest.raises(OptionError, match="--variant 4"):
        attention.fit(forest, X[:200], Y[:200], variant=4)


def test_an_abrf_3_file_loads_and_predicts_the_same(forest, tmp_path):
    abrf = attention.fit(forest, HOLES[:200], Y[:200], variant=3, epsilon=0.5, tau=2.0)
    abrf.save(tmp_path / "m.json")
    back = attention.load(tmp_path / "m.json")
    assert back.variant == 3 and back.tree_scales is not None and back.feature_weights is not None
    np.testing.assert_array_equal(back.predict(HOLES[200:]), abrf.predict(HOLES[200:]))


def test_abrf_3_is_eq_24_on_scikit_learn_s_means_and_trees(forest):
    abrf = attention.fit(forest, X[:200], Y[:200], variant=3, epsilon=0.5, tau=1.0)
    soft, trees = _eq_23(forest, abrf, X[200:])
    np.testing.assert_allclose(abrf.predict(X[200:]), np.sum((0.5 * soft + 0.5 * abrf.weights[None, :]) * trees, axis=1), rtol=1e-9)
    # the objective with other weights keeps v and z
    other = np.full(abrf.n_trees, 1 / abrf.n_trees)
    expected = np.sum((Y[:200] - np.sum((0.5 * abrf.softmax_weights(X[:200]) + 0.5 * other[None, :]) * np.stack(
        [t.predict(X[:200]) for t in forest.estimators_], axis=1), axis=1)) ** 2)
    assert attention.objective(abrf, X[:200], Y[:200], other) == pytest.approx(expected, rel=1e-9)


def test_labels_in_object_arrays_are_text(classifier):
    labels = LABELS[:200].astype(object)
    abrf = attention.fit(classifier, X[:200], labels, epsilon=0.5, tau=1.0)
    expected = attention.fit(classifier, X[:200], LABELS[:200], epsilon=0.5, tau=1.0)
    np.testing.assert_array_equal(abrf.weights, expected.weights)


def test_infinite_fitting_rows_are_refused(forest):
    rows = X[:200].copy()
    rows[3, 1] = np.inf
    with pytest.raises(DataError, match=r"X holds \+-inf"):
        attention.fit(forest, rows, Y[:200], epsilon=0.5, tau=1.0)


def test_held_out_predictions_come_from_fits_without_the_row(forest):
    """held_out: the rows shuffled by the seed, split in 3; each fold predicted by an ABRF whose
    epsilon and tau were chosen (and w fitted) on the other two folds alone (nested)."""
    rows, targets = X[:120], Y[:120]
    got = attention.held_out(forest, rows, targets, folds=3, seed=4)
    for out in np.array_split(np.random.default_rng(4).permutation(120), 3):
        keep = np.setdiff1d(np.arange(120), out)
        inner = attention.select(forest, rows[keep], targets[keep], folds=3, seed=4)
        alone = attention.fit(forest, rows[keep], targets[keep], epsilon=inner.epsilon, tau=inner.tau)
        np.testing.assert_allclose(got[out], alone.predict(rows[out]), rtol=1e-12)
