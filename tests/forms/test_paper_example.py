"""The papers' worked examples as fixtures: Decision Machines fig. 1 (the same tree as Binary
Network fig. 1), and Rethink Decision Tree Traversal's example tree (its figures 1 and 2)."""

import itertools
import json
from fractions import Fraction

import numpy as np
import pytest

import tree2mat
from tree2mat.cli import main
from tree2mat.ir import Aggregation, Comparison, Ensemble, Link, Task, apply
from tree2mat.ir.build import tree_from_nodes
from tree2mat.ir.io import dumps
from tree2mat.ir.matrices import paper_matrices

from conftest import ROOT, assert_standard_graph, run_onnx

FIXTURE = ROOT / "fixtures" / "paper_tree.json"

# As printed in the papers (docs/architecture.md, "The matrices").
PAPER = {
    "S": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 1]],
    "t": [1, 4, 3, 2, 5],
    "B": [[-1, -1, 0, -1, 0], [-1, -1, 0, 1, -1], [-1, -1, 0, 1, 1], [-1, 1, 0, 0, 0], [1, 0, -1, 0, 0], [1, 0, 1, 0, 0]],
    "bitvector": [[0, 0, 1, 0, 1], [0, 0, 1, 1, 0], [0, 0, 1, 1, 1], [0, 1, 1, 1, 1], [1, 1, 0, 1, 1], [1, 1, 1, 1, 1]],
    "depth": [3, 4, 4, 2, 2, 2],
}


def test_matrices_equal_the_papers():
    ens = tree2mat.load(FIXTURE)
    mats = paper_matrices(ens.trees[0], ens.n_features)
    for key, expected in PAPER.items():
        np.testing.assert_array_equal(mats[key], np.asarray(expected), err_msg=key)
    # Decision Machines 2.2: "the template matrix of the left subtree" (nodes 1, 3, 4; leaves 1-4), as printed.
    left_subtree = [[-1, -1, 0], [-1, 1, -1], [-1, 1, 1], [1, 0, 0]]
    np.testing.assert_array_equal(mats["B"][:4][:, [1, 3, 4]], left_subtree)


@pytest.mark.parametrize("fmt", ["json", "npz"])
def test_inspect_outputs_the_papers_matrices(tmp_path, fmt):
    out = tmp_path / f"m.{fmt}"
    assert main(["inspect", str(FIXTURE), "--tree", "0", "--format", fmt, "-o", str(out)]) == 0
    got = json.loads(out.read_text()) if fmt == "json" else dict(np.load(out))
    for key, expected in PAPER.items():
        np.testing.assert_array_equal(np.asarray(got[key]), np.asarray(expected), err_msg=key)
    np.testing.assert_array_equal(np.asarray(got["v"]).ravel(), [1, 2, 3, 4, 5, 6])


def test_inspect_text_shows_template(capsys):
    assert main(["inspect", str(FIXTURE), "--tree", "0"]) == 0
    text = capsys.readouterr().out
    assert "v5     1  0 -1  0  0" in text and "n4     0  1  0  0" in text


@pytest.mark.parametrize("form", [name for name, spec in tree2mat.FORMS.items() if spec.exact])
def test_worked_inputs_reach_the_papers_leaves(form):
    # x = (2,1,2,2) -> v5 and x = (1,1,2,3) -> v1 (leaf values 1..6 stand for v1..v6).
    ens = tree2mat.load(FIXTURE)
    X = np.asarray([[2, 1, 2, 2], [1, 1, 2, 3]], np.float32)
    np.testing.assert_array_equal(apply(ens, X)[:, 0], [4, 0])
    onx = tree2mat.convert(FIXTURE, leaves=True, form=form)
    assert_standard_graph(onx)
    got = run_onnx(onx, X)
    np.testing.assert_array_equal(got["leaves"][:, 0], [4, 0])
    np.testing.assert_array_equal(got["variable"][:, 0], [5.0, 1.0])


def test_verify_against_reference_evaluator_for_ir_files():
    report = tree2mat.verify(FIXTURE, tree2mat.convert(FIXTURE))
    assert report.passed
    assert any("reference evaluator" in n for n in report.notes)


# Rethink Decision Tree Traversal, as printed. Its tree (figures 1 and 2): root n0; n0's children
# n1 (leaves l0, l1) and n2; n2's children n3 (leaves l2, l3) and n4 (leaves l4, l5). Its names
# differ from tree2mat's: its signed matrix S (section 3.2, definition 7) is tree2mat's template
# matrix B, its bit-matrix B (section 2.1, definition 2) is tree2mat's bitvector matrix, and its
# depth matrix D (definition 8) is diag(depth).
RETHINK = {
    "S": [[-1, -1, 0, 0, 0], [-1, 1, 0, 0, 0], [1, 0, -1, -1, 0], [1, 0, -1, 1, 0], [1, 0, 1, 0, -1], [1, 0, 1, 0, 1]],
    "B": [[0, 0, 1, 1, 1], [0, 1, 1, 1, 1], [1, 1, 0, 0, 1], [1, 1, 0, 1, 1], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]],
    "D": np.diag([2, 2, 3, 3, 3, 3]),
    # Section 2.2's recursive pattern: the bit-matrix of the subtree under n2 (leaves l2-l5).
    "B of n2's subtree": [[0, 0, 1], [0, 1, 1], [1, 1, 0], [1, 1, 1]],
}
# Theorem 3's example: the signed test vector s (1: a false node, the row goes right; -1: true,
# left) and the result vector of SignQuickScorer (Alg. 3), whose maximum 1 marks the exit leaf l2.
RETHINK_S = [1, 1, -1, -1, 1]
RETHINK_D_INV_S_S = [Fraction(-1), Fraction(0), Fraction(1), Fraction(1, 3), Fraction(-1, 3), Fraction(1, 3)]


def _rethink_tree(root: int = 0):
    """The paper's tree given as a library would (node ids depth-first, leaves among them), so
    that tree2mat numbers it: internal nodes breadth-first, leaves left to right. Node n_i tests
    feature i against 0, so that the row x = s has the test vector s; leaf l_j holds j."""
    # ids:      0 n0, 1 n1, 2 l0, 3 l1, 4 n2, 5 n3, 6 l2, 7 l3, 8 n4, 9 l4, 10 l5
    left = np.asarray([1, 2, -1, -1, 5, 6, -1, -1, 9, -1, -1])
    right = np.asarray([4, 3, -1, -1, 8, 7, -1, -1, 10, -1, -1])
    is_leaf = left < 0
    feature = np.asarray([0, 1, 0, 0, 2, 3, 0, 0, 4, 0, 0])
    values = np.zeros((11, 1))
    values[[2, 3, 6, 7, 9, 10], 0] = np.arange(6)
    return tree_from_nodes(left, right, is_leaf, feature, np.zeros(11), np.zeros(11, bool), values, root=root)


@pytest.fixture(scope="module")
def rethink() -> Ensemble:
    return Ensemble(
        trees=(_rethink_tree(),), n_features=5, n_outputs=1, output_index=np.full(1, -1), comparison=Comparison.LE,
        source_dtype=np.dtype(np.float64), aggregation=Aggregation.SUM, base_score=np.zeros(1), link=Link.IDENTITY,
        task=Task.REGRESSION,
    ).validate()


def test_rethink_traversal_matrices_equal_the_papers(rethink):
    mats = paper_matrices(rethink.trees[0], rethink.n_features)
    np.testing.assert_array_equal(mats["B"], RETHINK["S"])
    np.testing.assert_array_equal(mats["bitvector"], RETHINK["B"])
    np.testing.assert_array_equal(np.diag(mats["depth"]), RETHINK["D"])
    np.testing.assert_array_equal(mats["bitvector"][2:, 2:], RETHINK["B of n2's subtree"])
    # "the structure of the subtree is determined by a submatrix of the bit-matrix": the subtree
    # as a tree of its own (rooted at n2, id 4) has that submatrix as its bit-matrix.
    sub = paper_matrices(_rethink_tree(root=4), rethink.n_features)
    np.testing.assert_array_equal(sub["bitvector"], RETHINK["B of n2's subtree"])


def test_rethink_traversal_result_vector_equals_the_papers(rethink):
    mats = paper_matrices(rethink.trees[0], rethink.n_features)
    x = np.asarray(RETHINK_S, np.float64)
    # The signed test vector from tree2mat's S and t: sgn(Sx - t), sgn(0) = -1 (+1 = false node, right).
    s = np.where(mats["S"] @ x - mats["t"] > 0, 1, -1)
    np.testing.assert_array_equal(s, RETHINK_S)
    result = [Fraction(int(r), int(d)) for r, d in zip(mats["B"] @ s, mats["depth"])]  # D^-1 S s, exactly
    assert result == RETHINK_D_INV_S_S
    # Its unique maximum, 1, is the exit leaf l2, which the reference evaluator and every exact
    # form's graph reach too.
    assert max(result) == 1 and result.count(1) == 1 and result.index(1) == 2
    np.testing.assert_array_equal(apply(rethink, x[None, :])[:, 0], [2])
    for form in (name for name, spec in tree2mat.FORMS.items() if spec.exact):
        got = run_onnx(tree2mat.convert(rethink, leaves=True, form=form), x[None, :].astype(np.float32))
        np.testing.assert_array_equal(got["leaves"][:, 0], [2], err_msg=form)


def test_rethink_traversal_scorers_find_the_exit_leaf_of_every_test_vector(rethink):
    """Rethink Traversal's Theorems 2 and 3 on its tree, for all 2^5 test vectors: the leftmost
    maximum of B t + 1 (Alg. 2; t = 1 for a false node, 0 for a true one) and the unique
    maximum, 1, of D^-1 S s (Alg. 3) are the leaf the reference evaluator reaches."""
    mats = paper_matrices(rethink.trees[0], rethink.n_features)
    S, B, depth = mats["B"].astype(int), mats["bitvector"].astype(int), mats["depth"]
    rows = np.asarray(list(itertools.product([-1.0, 1.0], repeat=5)))
    exits = apply(rethink, rows)[:, 0]
    assert sorted(set(exits)) == list(range(6))
    for s, exit_leaf in zip(rows.astype(int), exits):
        t = (s + 1) // 2
        v = B @ t + 1
        assert int(np.flatnonzero(v == v.max())[0]) == exit_leaf
        result = [Fraction(int(r), int(d)) for r, d in zip(S @ s, depth)]
        assert [i for i, r in enumerate(result) if r == max(result)] == [exit_leaf] and max(result) == 1


def test_inspect_outputs_rethink_traversals_matrices(rethink, tmp_path):
    ir = tmp_path / "rethink.json"
    ir.write_text(dumps(rethink))
    out = tmp_path / "m.json"
    assert main(["inspect", str(ir), "--tree", "0", "--format", "json", "-o", str(out)]) == 0
    got = json.loads(out.read_text())
    np.testing.assert_array_equal(got["B"], RETHINK["S"])
    np.testing.assert_array_equal(got["bitvector"], RETHINK["B"])
    np.testing.assert_array_equal(np.diag(got["depth"]), RETHINK["D"])
