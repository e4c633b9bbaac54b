"""The traverse form's wide walk (rows x trees, copies of the flat node tables): trees padded to a
multiple of the copies, trees set aside where they finish, and both walks against the library's
own predictions (``verify`` runs every row through the flat and the wide walk)."""

from __future__ import annotations

import lightgbm as lgb
import numpy as np
import onnx
import pytest
from sklearn.datasets import make_classification

import tree2mat
from tree2mat.forms import traverse


def _branch_ops(onx: onnx.ModelProto, branch: str) -> list[onnx.NodeProto]:
    node = next(n for n in onx.graph.node if n.op_type == "If")
    return list(next(a.g for a in node.attribute if a.name == branch).node)


@pytest.mark.parametrize("n_trees", [67, 16, 5])
def test_padded_and_cut_walks_route_as_lightgbm(n_trees):
    """Leaf-wise trees of depths 2 to 12 (so the walk sets trees aside at several levels), a tree
    count that is no multiple of the table copies (67 trees walk as 72 with 8 copies, 16 as 16
    with 2, 5 as 5 with 1), NaN cells: every row through both walks, labels and probabilities
    as LightGBM's."""
    X, y = make_classification(3000, 12, n_informative=8, random_state=n_trees)
    X = X.astype(np.float32)
    X[::17, 3] = np.nan
    model = lgb.LGBMClassifier(n_estimators=n_trees, num_leaves=24, min_child_samples=3, random_state=0, verbose=-1).fit(X, y)
    ens = tree2mat.load(model)
    depths = ens.tree_depths()
    assert depths.max() >= 8 and depths.min() < depths.max()  # (the premise: trees finish at different levels)
    onx = tree2mat.convert(model, "traverse")
    copies = traverse.replicas(n_trees, 1)
    assert copies == {67: 8, 16: 2, 5: 1}[n_trees]
    padded = -(-n_trees // copies) * copies
    cut = traverse.cuts(np.concatenate([np.sort(depths)[::-1], np.zeros(padded - n_trees, depths.dtype)]), copies)
    assert cut  # (the premise: the walk sets trees aside)
    set_aside = [n for n in _branch_ops(onx, "else_branch") if n.op_type == "Slice" and n.output[0].startswith("wide_done")]
    assert len(set_aside) == len(cut)
    report = tree2mat.verify(model, onx, data=X)
    assert report.passed, report.summary()
    assert not any(n.startswith("the graph's two walks could not be forced") for n in report.notes)


def test_cuts_keep_a_multiple_of_the_copies_and_pay_for_themselves():
    """Every cut keeps a multiple of ``multiple`` trees walking (or all of them), at least every
    tree deeper than its level, and saves at least CUT_VALUE tree levels per tree it copies."""
    depth = np.asarray(sorted([30, 22, 22, 15, 9, 9, 9, 9, 5, 3, 3, 2, 2, 2, 1, 1, 1, 1], reverse=True))
    for multiple in (1, 2, 4, 8):
        levels = traverse.cuts(depth, multiple)
        assert levels == sorted(levels) and all(1 <= d < depth[0] for d in levels)
        before = depth.size
        for k, d in enumerate(levels):
            keep = traverse.kept(depth, d, multiple)
            assert keep % multiple == 0 or keep == depth.size
            assert keep >= np.count_nonzero(depth > d) and keep < before
            after = levels[k + 1] if k + 1 < len(levels) else int(depth[0])
            assert (before - keep) * (after - d) >= traverse.CUT_VALUE * before
            before = keep
    assert traverse.cuts(np.full(10, 6)) == []  # trees of one depth: nothing to set aside


def test_replicas_within_the_byte_budget():
    assert traverse.replicas(1000, traverse.REPLICA_BYTES // 8) == 8
    assert traverse.replicas(1000, traverse.REPLICA_BYTES // 2) == 2
    assert traverse.replicas(1000, traverse.REPLICA_BYTES) == 1
    assert [traverse.replicas(t, 1) for t in (1, 15, 16, 31, 32, 63, 64, 500)] == [1, 1, 2, 2, 4, 4, 8, 8]
