"""The contract a graph carries (tree2mat.contract, docs/graph.md#the-verify-contract): verify reads a
graph's routing from the graph alone, so graphs saved by earlier releases keep verifying
against the libraries' own predictions after the forms' layouts change.

The graphs in fixtures/graphs were written by the commits their names give
(fixtures/make_graph_fixtures.py, fixtures/SOURCES.md): ``0.1.0-c6ac96c`` before the contract
(verify reads their layout from this release's forms), ``contract1`` with it."""

from __future__ import annotations

import base64
import dataclasses
import json
import zlib
from pathlib import Path

import numpy as np
import onnx
import pytest

import tree2mat
from tree2mat import contract
from tree2mat.errors import ModelFileError
from tree2mat.forms import FORMS, _exact

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
GRAPHS = sorted((FIXTURES / "graphs").glob("*.onnx"))
LEGACY = [p for p in GRAPHS if ".0.1.0-c6ac96c." in p.name]
CONTRACT1 = [p for p in GRAPHS if ".contract1." in p.name]


def _model_of(graph: Path) -> str:
    stem = graph.name.split(".")[0]
    return str(next(p for p in FIXTURES.iterdir() if p.stem == stem and p.suffix in (".json", ".txt", ".ubj")))


def _routing(report) -> list:
    return [o for o in report.outputs if o.name == "routing"]


def _passes_with_routing(graph: Path | onnx.ModelProto, model: str) -> tree2mat.verify.Report:
    report = tree2mat.verify(model, graph, rows=3000)
    routing = _routing(report)
    assert report.passed, report.summary()
    assert routing and all(o.compared > 0 and o.mismatches == 0 for o in routing), report.notes
    return report


def test_the_fixture_graphs_are_there():
    """Both sets of fixtures, one graph per kind of exit, none missing (a glob that found nothing
    would pass every test below)."""
    assert len(LEGACY) == len(CONTRACT1) == 8


@pytest.mark.parametrize("graph", GRAPHS, ids=lambda p: p.name)
def test_a_saved_graph_verifies_against_the_library(graph):
    """Every saved graph, of either release, verifies against the library's own predictions
    and its routing against the library's own leaves, on synthesized threshold, NaN and extreme rows."""
    _passes_with_routing(graph, _model_of(graph))


def _wrong_layouts(monkeypatch):
    """Every form's exit layout of this release changed (its trees reversed), and the matrix
    forms' size groups too (each tree a group of its own, largest last): what a later release
    that lays out its graphs otherwise would read a graph by, were verify to ask the forms."""

    def reversed_layout(exit_layout):
        def layout(ens, dtype=None):
            order, slots, index_dtype = exit_layout(ens, dtype)
            return order[::-1].copy(), slots[::-1].copy(), index_dtype
        return layout

    for name, spec in FORMS.items():
        if spec.exit_layout is not None:
            monkeypatch.setitem(FORMS, name, dataclasses.replace(spec, exit_layout=reversed_layout(spec.exit_layout)))
    monkeypatch.setattr(_exact, "size_groups", lambda n_internal, *a, **k: [np.asarray([t]) for t in np.argsort(n_internal, kind="stable")])


@pytest.mark.parametrize("graph", CONTRACT1, ids=lambda p: p.name)
def test_a_contract_graph_verifies_after_the_layouts_change(graph, monkeypatch):
    """verify needs no form code to read a contract graph's routing: with every form's layout
    changed, each still verifies, routing included."""
    _wrong_layouts(monkeypatch)
    _passes_with_routing(graph, _model_of(graph))


def test_the_changed_layouts_would_misroute_a_graph_read_by_the_forms(monkeypatch):
    """The control of the test above: a graph from before the contract, whose mapped index verify
    reads by this release's forms, fails routing under the changed layouts."""
    _wrong_layouts(monkeypatch)
    graph = next(p for p in LEGACY if ".traverse." in p.name and "xgboost" in p.name)
    report = tree2mat.verify(_model_of(graph), graph, rows=1000)
    assert any(o.mismatches > 0 for o in _routing(report)) and not report.passed


def test_a_graph_written_with_other_size_groups_verifies_with_these(monkeypatch, tmp_path):
    """The other way round: a sign graph written under other size groups (a mapped index, trees
    out of order) verifies with this release's groups."""
    model = _model_of(LEGACY[0])
    with monkeypatch.context() as m:
        m.setattr(_exact, "size_groups", lambda n_internal, *a, **k: [np.arange(n_internal.size)[1::2], np.arange(n_internal.size)[0::2]])
        onx = tree2mat.convert(model, form="sign")
    meta = {p.key: p.value for p in onx.metadata_props}
    assert meta[contract.LAYOUT_KEY] == contract.EXIT_MAPPED
    _passes_with_routing(onx, model)


def _with_meta(graph: Path, **changes: str | None) -> onnx.ModelProto:
    onx = onnx.load(str(graph))
    meta = {p.key: p.value for p in onx.metadata_props}
    for key, value in changes.items():
        key = f"tree2mat.{key}"
        if value is None:
            meta.pop(key, None)
        else:
            meta[key] = value
    del onx.metadata_props[:]
    onnx.helper.set_model_props(onx, meta)
    return onx


BOMB = base64.b64encode(zlib.compress(bytes(2**26), 9)).decode()
MAPPED = next(p for p in CONTRACT1 if ".traverse." in p.name and "xgboost" in p.name)


@pytest.mark.parametrize("changes, message", [
    ({"exit_map": "not json"}, "tree2mat.exit_map is not JSON"),
    ({"exit_map": None}, "carries no tree2mat.exit_map"),
    ({"exit_layout": "diagonal"}, "neither 'leaves' nor 'layout'"),
])
def test_a_broken_contract_is_a_one_line_error(changes, message):
    """A contract graph whose map is malformed was not written by tree2mat as it is: refused,
    saying what is wrong."""
    with pytest.raises(ModelFileError, match=message):
        tree2mat.verify(_model_of(MAPPED), _with_meta(MAPPED, **changes), rows=200)


def test_a_map_that_gives_the_index_another_type_than_the_graph_is_refused():
    """traverse's index is int32 in the graph (its If declares it): a map saying int64 is no map
    of this graph; refused by name, not left to the runtime's load error."""
    onx = onnx.load(str(MAPPED))
    text = {p.key: p.value for p in onx.metadata_props}["tree2mat.exit_map"]
    assert '"index":"int32"' in text
    with pytest.raises(ModelFileError, match="exit index .* type int64, the graph makes it int32"):
        tree2mat.verify(_model_of(MAPPED), _with_meta(MAPPED, exit_map=text.replace('"index":"int32"', '"index":"int64"')), rows=200)


def test_other_trees_or_a_newer_contract_check_routing_through_the_outputs():
    """A graph whose trees are not the model's as tree2mat reads it, or of a contract this
    release does not know: no routing row (its leaf ids cannot be read), a note saying why, and
    the outputs still compared with the library's."""
    model = _model_of(MAPPED)
    for changes, why in (({"shapes_digest": "0" * 64}, "tree2mat.shapes_digest"), ({"contract": "2"}, "graph contract '2'")):
        report = tree2mat.verify(model, _with_meta(MAPPED, **changes), rows=500)
        assert not _routing(report) and report.passed
        assert any(why in n and "routing checked through outputs only" in n for n in report.notes), report.notes
        assert {o.name for o in report.outputs} >= {"label", "probabilities"}


def test_the_exit_map_reads_back_what_was_written():
    ens = tree2mat.load(_model_of(MAPPED))
    order, slots, index_dtype = FORMS["traverse"].exit_layout(ens, np.dtype(np.float32))
    read = contract.read_exit_map(contract.exit_map_text(contract.ExitMap(order, slots, index_dtype)), ens.n_trees, contract.max_positions(ens))
    np.testing.assert_array_equal(read.order, order)
    np.testing.assert_array_equal(read.slots, slots)
    assert read.index_dtype == index_dtype


@pytest.mark.parametrize("doc, message", [
    ('{"trees": 3, "positions": 2, "index": "int64", "order": "", "slots": ""}', "expected 18 trees"),
    ('{"trees": 18, "positions": 100000000000, "index": "int64"}', "expected 18 trees"),
    ('{"trees": 18, "positions": 2, "index": "float32"}', "neither int32 nor int64"),
    ('{"trees": 18, "positions": 2, "index": "int64", "order": "@@", "slots": ""}', "not base64"),
    # (a few bytes that inflate to 64 MiB: the reading stops one value past what was declared)
    (json.dumps({"trees": 18, "positions": 2, "index": "int64", "order": BOMB, "slots": ""}), "holds 19 values, expected 18"),
    ('[1, 2]', "not a JSON object"),
    ("[" * 100_000, "not JSON"),  # (nested past Python's stack: RecursionError in json)
])
def test_a_malformed_exit_map_is_refused_before_it_is_unpacked(doc, message):
    """A map naming sizes it does not hold, or holding what is no map, is a ValueError (verify's
    one-line error above), never an allocation of the size a file names."""
    with pytest.raises(ValueError, match=message):
        contract.read_exit_map(doc, 18, 63)


def test_an_exit_map_whose_order_is_no_ordering_is_refused():
    ens = tree2mat.load(_model_of(MAPPED))
    order, slots, index_dtype = FORMS["traverse"].exit_layout(ens, np.dtype(np.float32))
    text = contract.exit_map_text(contract.ExitMap(np.zeros_like(order), slots, index_dtype))
    with pytest.raises(ValueError, match="no ordering of the trees"):
        contract.read_exit_map(text, ens.n_trees, contract.max_positions(ens))


def _replaced(ens, k, **fields):
    trees = list(ens.trees)
    trees[k] = dataclasses.replace(trees[k], **fields)
    return dataclasses.replace(ens, trees=tuple(trees))


def test_the_digest_is_the_trees_shapes():
    """The same model read twice has one digest; a tree whose children are numbered otherwise,
    or one tree fewer, another. A moved threshold or missing side, the same: the leaf ids still
    mean the same leaves, and the routing check finds the move (below)."""
    ens = tree2mat.load(_model_of(MAPPED))
    digest = contract.shapes_digest(ens)
    assert digest == contract.shapes_digest(tree2mat.load(_model_of(MAPPED)))
    tree = ens.trees[3]
    assert contract.shapes_digest(_replaced(ens, 3, left=tree.right, right=tree.left)) != digest
    assert contract.shapes_digest(dataclasses.replace(ens, trees=ens.trees[:-1], output_index=ens.output_index[:-1])) != digest
    threshold, default_left = tree.threshold.copy(), ~tree.default_left
    threshold[0] = np.nextafter(threshold[0], np.inf)
    assert contract.shapes_digest(_replaced(ens, 3, threshold=threshold, default_left=default_left)) == digest


def test_a_graph_whose_threshold_moved_one_step_fails_routing_leaf_by_leaf():
    """A graph of the model with one threshold moved by one float32 step (the same shapes, so
    its leaf ids are read): the rows at that threshold land in the other leaf, and routing
    counts them; verify fails."""
    ens = tree2mat.load(_model_of(MAPPED))
    k = next(k for k, t in enumerate(ens.trees) if t.n_internal)
    threshold = ens.trees[k].threshold.copy()
    threshold[0] = float(np.nextafter(np.float32(threshold[0]), np.float32(np.inf)))
    graph = tree2mat.convert(_replaced(ens, k, threshold=threshold).validate(), form="traverse")
    report = tree2mat.verify(_model_of(MAPPED), graph, rows=3000)
    assert not report.passed and any(o.mismatches > 0 for o in _routing(report)), report.summary()
