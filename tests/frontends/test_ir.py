"""The IR: validate() names what is wrong; the IR JSON round-trips; the builder renumbers."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tree2mat
from tree2mat.errors import InvalidTreeError, ModelFileError
from tree2mat.ir import Aggregation, Comparison, Ensemble, Link, Task, Tree, apply
from tree2mat.ir.build import tree_from_nodes
from tree2mat.ir.io import dumps, ensemble_from_dict

from conftest import ROOT

FIXTURE = ROOT / "fixtures" / "paper_tree.json"


def paper_tree(**changes) -> Tree:
    arrays = dict(
        feature=np.array([0, 1, 2, 1, 3]), threshold=np.array([1.0, 4, 3, 2, 5]),
        default_left=np.ones(5, bool), left=np.array([1, 3, -5, -1, -2]),
        right=np.array([2, -4, -6, 4, -3]), value=np.arange(6.0)[:, None],
    )
    arrays.update(changes)
    return Tree(**arrays)


def ensemble(tree: Tree, **changes) -> Ensemble:
    args = dict(trees=(tree,), n_features=4, n_outputs=1, output_index=np.array([-1]),
                comparison=Comparison.LE, source_dtype=np.dtype(np.float32), aggregation=Aggregation.SUM,
                base_score=np.zeros(1), link=Link.IDENTITY, task=Task.REGRESSION)
    args.update(changes)
    return Ensemble(**args)


def test_paper_tree_is_valid():
    ensemble(paper_tree()).validate()


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"feature": np.array([0, 1, 2, 1, 9])}, "node 4 tests feature 9"),
        ({"threshold": np.array([1.0, np.nan, 3, 2, 5])}, "node 1 has a NaN threshold"),
        ({"left": np.array([1, 1, -5, -1, -2])}, "internal child references must be distinct"),  # shared child
        ({"right": np.array([2, -4, -6, 0, -3])}, "never the root"),  # cycle to the root
        ({"left": np.array([1, 3, -5, -1, -1])}, "every leaf must be referenced exactly once"),
        ({"value": np.zeros((5, 1))}, "value has shape (5, 1), expected (6, K>=1)"),
        ({"value": np.full((6, 1), np.inf)}, "leaf values must be finite"),
        ({"left": np.array([2, 3, -5, -1, -2]), "right": np.array([1, -4, -6, 4, -3])}, "breadth-first"),
        ({"left": np.array([1, 3, -5, -2, -1])}, "left to right"),
        ({"feature": np.array([0.0, 1, 2, 1, 3])}, "feature must be a numpy array of integer"),
    ],
)
def test_validate_names_the_problem(changes, message):
    with pytest.raises(InvalidTreeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ensemble(paper_tree(**changes)).validate()


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"trees": ()}, "no trees"),
        ({"base_score": np.zeros(2)}, "base_score must be 1 finite numbers"),
        ({"output_index": np.array([3])}, "output_index 3"),
        ({"task": Task.CLASSIFICATION}, "at least two classes"),
        ({"link": Link.SOFTMAX}, "regressor cannot use the softmax link"),
        ({"comparison": Comparison.LT}, None),
    ],
)
def test_ensemble_validate(changes, message):
    ens = ensemble(paper_tree(), **changes)
    if message is None:
        ens.validate()
    else:
        with pytest.raises(InvalidTreeError, match=message):
            ens.validate()


def test_less_than_with_minus_inf_threshold_is_refused():
    with pytest.raises(InvalidTreeError, match="-inf with '<'"):
        ensemble(paper_tree(threshold=np.array([1.0, -np.inf, 3, 2, 5])), comparison=Comparison.LT).validate()


def test_builder_renumbers_any_node_order_and_refuses_cycles():
    # The paper tree in depth-first order with shuffled ids: 0=n1, 5=n2, 2=n3, 7=n4, 3=n5.
    n = 11
    left, right = np.full(n, -1), np.full(n, -1)
    is_leaf = np.ones(n, bool)
    feature, threshold = np.zeros(n, int), np.zeros(n)
    for node, (lc, rc, f, t) in {0: (5, 2, 0, 1), 5: (7, 9, 1, 4), 2: (10, 6, 2, 3), 7: (1, 3, 1, 2), 3: (4, 8, 3, 5)}.items():
        left[node], right[node], is_leaf[node], feature[node], threshold[node] = lc, rc, False, f, t
    leaf_value = {1: 1, 4: 2, 8: 3, 9: 4, 10: 5, 6: 6}
    values = np.array([leaf_value.get(i, 0) for i in range(n)], float)
    tree = tree_from_nodes(left, right, is_leaf, feature, threshold, np.ones(n, bool), values)
    ref = paper_tree()
    for name in ("feature", "threshold", "left", "right"):
        np.testing.assert_array_equal(getattr(tree, name), getattr(ref, name))
    np.testing.assert_array_equal(tree.value[:, 0], [1, 2, 3, 4, 5, 6])
    np.testing.assert_array_equal(tree.leaf_source_id, [1, 4, 8, 9, 10, 6])
    left[3] = 0  # a cycle back to the root
    with pytest.raises(InvalidTreeError, match="reached twice"):
        tree_from_nodes(left, right, is_leaf, feature, threshold, np.ones(n, bool), values)


def test_ir_json_round_trip_keeps_predictions(tmp_path):
    ens = tree2mat.load(FIXTURE)
    again = ensemble_from_dict(json.loads(dumps(ens)))
    X = np.random.default_rng(0).uniform(0, 6, size=(200, 4)).astype(np.float32)
    np.testing.assert_array_equal(apply(again, X), apply(ens, X))


def test_ir_json_errors_name_the_field(tmp_path):
    doc = json.loads(FIXTURE.read_text())
    doc["trees"][0]["feature"] = [0, 1, 2, 1, 7]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InvalidTreeError, match="tree 0: node 4 tests feature 7"):
        tree2mat.load(path)
    doc["tree2mat_ir"] = 99
    path.write_text(json.dumps(doc))
    with pytest.raises(ModelFileError, match="unsupported tree2mat_ir version 99"):
        tree2mat.load(path)
