"""The float32 graph's exact sums (tree2mat.forms._digits): leaf values as integer digits on
power-of-two grids, summed exactly in any order, and the labels decided on them.

- the digits of random float64 values add up, in exact (rational) arithmetic, to within the
  documented bound of the values' sum, and every partial sum is an integer float32 holds;
- on ensembles built so that margins land exactly on a label cutoff, a few grid steps of the last
  digit around it, and far from it, and with classes tied exactly or a grid step apart, the
  graph's labels (onnxruntime) equal the reference evaluator's (float64), for every exact form.
  The leaf values are dyadic, so that float64 sums them exactly too: away from exact sums, a
  margin within the digits' bound of a boundary is where the library's own rounding decides.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tree2mat
from tree2mat.forms import _digits
from tree2mat.ir import Aggregation, Comparison, Ensemble, Link, Task, evaluate
from tree2mat.ir.build import tree_from_nodes
from tree2mat.ir.core import LabelRule

from conftest import assert_matches, run_onnx

EXACT_FORMS = [name for name, spec in tree2mat.FORMS.items() if spec.exact]


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.floats(-1e3, 1e3, allow_nan=False, allow_subnormal=False), min_size=1, max_size=400),
    order=st.randoms(use_true_random=False),
)
def test_digit_sums_are_exact_in_any_order_and_within_the_bound(values, order):
    v = np.asarray(values)
    scale = max(float(np.abs(v).sum()), 2.0**-99)
    p = _digits.plan(scale, v.size)
    digits = _digits.split(v, p)
    exact = sum(Fraction(float(x)) for x in v)
    represented = Fraction(0)
    for k, d in enumerate(digits):
        assert np.all(d == np.rint(d)) and np.all(np.abs(d) < 2.0**23), "digits are integers float32 holds"
        shuffled = list(d.astype(np.float64))
        order.shuffle(shuffled)
        acc = np.float32(0)
        for x in shuffled:  # float32, in a random order: every partial sum is exact
            acc = np.float32(acc + np.float32(x))
        assert Fraction(float(acc)) == sum(Fraction(float(x)) for x in d)
        represented += Fraction(float(acc)) * Fraction(2) ** p.exponents[k]
    bound = v.size * 2.0 ** (p.exponents[-1] - 1)
    assert abs(represented - exact) <= Fraction(bound)
    assert bound <= max(_digits.DROPPED, 2.0**-43 * scale)


def _stump_ensemble(values: list[tuple[float, float]], task: Task, link: Link, classes: int = 2, rule: LabelRule | None = None,
                    cutoff: float = 0.0) -> Ensemble:
    """Trees of one split (x0 <= 0.5) each, leaf values as given (per output column)."""
    trees = []
    for left_value, right_value in values:
        leaf = np.asarray([[left_value], [right_value]]) if not isinstance(left_value, tuple) else np.asarray([left_value, right_value])
        trees.append(tree_from_nodes(
            np.asarray([1, -1, -1]), np.asarray([2, -1, -1]), np.asarray([False, True, True]), np.asarray([0, -1, -1]),
            np.asarray([0.5, 0, 0]), np.asarray([True, False, False]), np.vstack([[0.0] * leaf.shape[1], leaf]),
        ))
    K = trees[0].n_outputs
    extra = {}
    if task is Task.CLASSIFICATION:
        extra = {"classes": (np.arange(classes),), "label_rule": rule or LabelRule.ARGMAX, "label_cutoff": cutoff}
    return Ensemble(
        trees=tuple(trees), n_features=1, n_outputs=K, output_index=np.full(len(trees), -1), comparison=Comparison.LE,
        source_dtype=np.dtype(np.float64), aggregation=Aggregation.SUM, base_score=np.zeros(K), link=link, task=task, **extra,
    ).validate()


ROWS = np.asarray([[0.0], [1.0]], np.float32)  # left leaves, right leaves


def _last_step(ens: Ensemble) -> float:
    from tree2mat.forms._stack import stack
    from tree2mat.forms._sums import digit_plan

    return 2.0 ** digit_plan(ens, stack(ens, np.dtype(np.float32))).exponents[-1]


@pytest.mark.parametrize("form", EXACT_FORMS)
@pytest.mark.parametrize("offset", [0.0, 1.0, -1.0, 3.0, -3.0, 1e6])
@pytest.mark.parametrize("rule", [LabelRule.POSITIVE, LabelRule.NON_NEGATIVE])
def test_binary_labels_on_and_around_the_cutoff(form, offset, rule):
    """Margins exactly on the cutoff, a few grid steps of the last digit away, and far away."""
    cutoff = 0.125
    base = [(0.375, -0.75), (0.25, 0.5), (-0.5, 0.25)]  # left margin 0.125 = the cutoff; right 0.0
    step = _last_step(_stump_ensemble(base + [(1.0, 0.0)], Task.CLASSIFICATION, Link.LOGISTIC, rule=rule, cutoff=cutoff))
    ens = _stump_ensemble(base + [(offset * step, 0.0)], Task.CLASSIFICATION, Link.LOGISTIC, rule=rule, cutoff=cutoff)
    expected = evaluate.predict(ens, ROWS)
    got = run_onnx(tree2mat.convert(ens, form), ROWS)
    np.testing.assert_array_equal(got["label"], expected["label"])
    assert_matches(got, expected, ROWS, ens)


@pytest.mark.parametrize("form", EXACT_FORMS)
@pytest.mark.parametrize("classes", [2, 3, 5])
def test_argmax_ties_pick_the_first_class_and_a_grid_step_decides(form, classes):
    """The first and last classes' sums tied exactly (the same values in another tree order: the
    first wins), then apart by a grid step of the last digit either way."""
    rng = np.random.default_rng(classes)
    v = rng.integers(0, 1024, (6, classes)) / 1024.0
    v[:, 0] += 1.0  # the first (and last) class the largest
    v[:, -1] = v[::-1, 0]
    tied = [(tuple(row), tuple(row[::-1])) for row in v]
    step = _last_step(_stump_ensemble(tied, Task.CLASSIFICATION, Link.IDENTITY, classes=classes))
    for bump in (0.0, step, -step, 2 * step):
        extra = np.zeros(classes)
        extra[-1] = bump
        ens = _stump_ensemble(tied + [(tuple(extra), tuple(extra))], Task.CLASSIFICATION, Link.IDENTITY, classes=classes)
        expected = evaluate.predict(ens, ROWS)
        got = run_onnx(tree2mat.convert(ens, form), ROWS)
        np.testing.assert_array_equal(got["label"], expected["label"], err_msg=f"bump {bump}")
    assert evaluate.predict(_stump_ensemble(tied, Task.CLASSIFICATION, Link.IDENTITY, classes=classes), ROWS)["label"][0] == 0
