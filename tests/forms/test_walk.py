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
from tree2mat.forms import _stack, _walk, traverse


def _wide_walk(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """The nodes of the wide walk's branch (the else branch of the ``If`` on the flat walk's
    rows, itself in the else branch of the decided walk's ``If`` where there is one)."""
    node = next(n for n in graph.node if n.op_type == "If")
    other = next(a.g for a in node.attribute if a.name == "else_branch")
    return _wide_walk(other) if any(n.op_type == "If" for n in other.node) else list(other.node)


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
    set_aside = [n for n in _wide_walk(onx.graph) if n.op_type == "Slice" and n.output[0].startswith("wide_done")]
    assert len(set_aside) == len(cut)
    report = tree2mat.verify(model, onx, data=X)
    assert report.passed, report.summary()
    assert not any(n.startswith("the graph's walks could not be forced") for n in report.notes)
    # the fewest rows: the decided walk where its tests cost less than the flat walk's operators
    meta = {p.key: p.value for p in onx.metadata_props}
    P = _walk.table_nodes(ens)
    few = traverse.decided_rows(n_trees, P, int(depths.max()), traverse.tree_levels(ens), _walk.node_table(ens, _stack.stack(ens, np.dtype(np.float32))).width)
    assert meta.get("tree2mat.walk_few") == (str(few) if few else None)
    walks = {o.walk for o in report.outputs}
    assert walks == {f">{meta['tree2mat.walk_rows']} rows", f"<={meta['tree2mat.walk_rows']} rows"} | ({f"<={few} rows"} if few else set())


def test_the_decided_walk_routes_as_lightgbm_at_every_batch_it_takes():
    """The decided walk (every node's test at once, then one gather a level) on leaf-wise trees
    with NaN and categorical splits, batches of 1 to its most rows, straight through the graph
    (no forcing): probabilities as LightGBM's; a fault in its node columns shows in verify's copy
    forced through that walk alone."""
    X, y = make_classification(2000, 10, n_informative=6, random_state=3)
    X = X.astype(np.float32)
    X[:, 9] = np.floor(np.abs(X[:, 9]) * 3)
    X[::13, 2] = np.nan
    model = lgb.LGBMClassifier(n_estimators=30, num_leaves=20, min_child_samples=3, random_state=0, verbose=-1)
    model.fit(X, y, categorical_feature=[9])
    onx = tree2mat.convert(model, "traverse")
    meta = {p.key: p.value for p in onx.metadata_props}
    few, walk_rows = int(meta["tree2mat.walk_few"]), int(meta["tree2mat.walk_rows"])
    assert 1 < few < walk_rows
    from tree2mat.verify import GraphRunner, walks

    runner = GraphRunner(onx, "cpu")
    want = model.predict_proba(X)
    for n in range(1, few + 1):
        for start in range(0, 40, n):
            got = runner.run(X[start:start + n], n)["probabilities"]
            np.testing.assert_allclose(got, want[start:start + n], rtol=1e-5, atol=1e-6)
    broken = onnx.ModelProto()
    broken.CopyFrom(onx)
    # (every internal node of the decided walk reads the augmented input's first column: its rows
    # take other paths and reach other leaves, none out of range)
    tables = {t.name: onnx.numpy_helper.to_array(t) for t in broken.graph.initializer}
    reshape = next(n for n in broken.graph.node if n.output[0] == "decided_column")
    first = tables["node_first"]
    internal = first != np.arange(first.shape[1])
    broken.graph.initializer.append(onnx.numpy_helper.from_array(np.where(internal, 0, tables[reshape.input[0]]).astype(np.int32), "wrong_column"))
    reshape.input[0] = "wrong_column"
    # verify's three forced copies of the broken graph: only the decided walk's outputs differ
    forced = walks(broken, 500)[0]
    assert [w for w, _, _ in forced] == [f">{walk_rows} rows", f"<={walk_rows} rows", f"<={few} rows"]
    for walk, graph, per_run in forced:
        runner = GraphRunner(graph, "cpu")
        got = np.concatenate([runner.run(X[k:k + per_run], per_run)["probabilities"] for k in range(0, 600, per_run)])
        assert np.allclose(got, want[:len(got)], rtol=1e-5, atol=1e-6) == (walk != f"<={few} rows"), walk


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
