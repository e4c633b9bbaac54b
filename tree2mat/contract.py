"""The contract a tree2mat graph carries: what ``verify`` needs to check the graph's routing,
written into the graph's metadata when the graph is built, so that verify reads it from the
graph alone and not from the form code of the tree2mat that runs it (a graph written before a
form's layout changed still verifies after; docs/graph.md#the-verify-contract).

Contract 1 (``tree2mat.contract`` = ``1``), beside the keys every graph has:

- ``tree2mat.shapes_digest``: :func:`shapes_digest` of the trees the graph was built from, the
  numbering its leaf ids and exit map refer to; a model that tree2mat reads into trees of other
  shapes (not the graph's model, or read otherwise by another release) has its routing checked
  through the outputs only.
- ``tree2mat.leaf_tensor`` (exact forms): the exit index [T, N], a tensor of the graph;
  ``tree2mat.exit_layout``: :data:`EXIT_LEAVES` (it is the leaf ids, trees in order) or
  :data:`EXIT_MAPPED`, and then ``tree2mat.exit_map`` (:func:`exit_map_text`): which tree
  each row of the index is and which leaf each position.
- ``tree2mat.leaf_twin`` (a graph with no exit index): the output of the ``TreeEnsemble`` node
  that sums the leaf values; verify adds a copy of that node that writes leaf ids
  (:func:`leaf_twin`).
- ``tree2mat.walk_rows*`` and ``tree2mat.walk_few*``: the ``If`` limits verify sets to run
  every row through every walk (:func:`tree2mat.verify.walking.walks`).
- ``tree2mat.proximity_rows`` (a ``--proximity`` graph): the reference rows its ``proximity``
  output compares with (:func:`proximity_metadata`), from which verify computes that output
  itself, by the library's leaves.

A graph with no ``tree2mat.contract`` predates it (tree2mat 0.1.0 before 2026-11-29): verify
reads its exit layout from this release's form code, as it always did.
"""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from dataclasses import dataclass

import numpy as np
import onnx

from tree2mat.errors import ModelFileError
from tree2mat.ir.core import Ensemble

#: The version of the contract this release writes and reads.
CONTRACT = 1
CONTRACT_KEY = "tree2mat.contract"
DIGEST_KEY = "tree2mat.shapes_digest"
LEAF_KEY = "tree2mat.leaf_tensor"
LAYOUT_KEY = "tree2mat.exit_layout"
MAP_KEY = "tree2mat.exit_map"
TWIN_KEY = "tree2mat.leaf_twin"
PROXIMITY_KEY = "tree2mat.proximity_rows"

#: How an exit index maps to leaf ids (``tree2mat.exit_layout``): ``leaves``: it is the leaf
#: ids, trees in order; ``layout``: through the exit map (trees in another order, or positions
#: that are not leaf ids; see :class:`ExitMap`).
EXIT_LEAVES, EXIT_MAPPED = "leaves", "layout"

#: The keys a pipeline's graph copies from its tree step's (when it has one tree step: verify
#: checks that step's routing), besides the walks'.
ROUTING_KEYS = (CONTRACT_KEY, DIGEST_KEY, LEAF_KEY, LAYOUT_KEY, MAP_KEY, TWIN_KEY)


@dataclass(frozen=True)
class ExitMap:
    """How an exit index [T, N] maps to leaf ids: its row r is tree ``order[r]``, and in that
    row position p is leaf ``slots[r, p]`` (-1: no leaf); ``index_dtype``, the index's."""

    order: np.ndarray  # int64 [T]
    slots: np.ndarray  # int64 [T, S]
    index_dtype: np.dtype

    @property
    def layout(self) -> str:
        """:data:`EXIT_LEAVES` where the index is the leaf ids (int64), trees in order; else :data:`EXIT_MAPPED`."""
        T, S = self.slots.shape
        same = np.array_equal(self.order, np.arange(T)) and np.array_equal(self.slots, np.broadcast_to(np.arange(S), (T, S)))
        return EXIT_LEAVES if same and self.index_dtype == np.int64 else EXIT_MAPPED

    def leaf_ids(self, index: np.ndarray) -> np.ndarray:
        """The leaf ids [T, N] of ``index`` [T, N], trees in order (:func:`leaf_ids_of`)."""
        return leaf_ids_of(index, self.order, self.slots)


def shapes_digest(ens: Ensemble) -> str:
    """SHA-256 (hex) of the trees' shapes: how many trees, and each tree's children (``left``,
    ``right``: an internal node's number or a leaf's), the numbering leaf ids and the exit map
    refer to. The tests (features, thresholds, missing values, categories, projections) are
    left out on purpose: a graph whose tests differ from the model's is what verify's routing
    check finds, leaf by leaf. This definition is contract 1's: the graphs saved with it
    (fixtures/graphs) hold its values, so a change to it is a new contract."""
    h = hashlib.sha256(b"tree2mat-shapes-1")
    h.update(np.int64(ens.n_trees).tobytes())
    for t in ens.trees:
        h.update(np.int64(t.n_internal).tobytes())
        h.update(np.ascontiguousarray(t.left, "<i8").tobytes())
        h.update(np.ascontiguousarray(t.right, "<i8").tobytes())
    return h.hexdigest()


def _packed(values: np.ndarray) -> str:
    return base64.b64encode(zlib.compress(np.ascontiguousarray(values, "<i4").tobytes(), 9)).decode("ascii")


def _unpacked(text: object, size: int, what: str) -> np.ndarray:
    if not isinstance(text, str):
        raise ValueError(f"{what} is not text")
    try:  # (at most one value past the size: a small text that inflates to gigabytes stops there)
        raw = zlib.decompressobj().decompress(base64.b64decode(text.encode("ascii"), validate=True), 4 * size + 4)
    except (ValueError, zlib.error) as exc:
        raise ValueError(f"{what} is not base64 of zlib: {exc}") from None
    if len(raw) != 4 * size:
        raise ValueError(f"{what} holds {len(raw) // 4} values, expected {size}")
    return np.frombuffer(raw, "<i4").astype(np.int64)


def exit_map_text(exit_map: ExitMap) -> str:
    """``tree2mat.exit_map``: JSON ``{"trees": T, "positions": S, "index": dtype, "order": ...,
    "slots": ...}``, ``order`` [T] and ``slots`` [T, S] (row-major) as base64 of zlib-compressed
    little-endian int32."""
    T, S = exit_map.slots.shape
    return json.dumps({
        "trees": int(T), "positions": int(S), "index": np.dtype(exit_map.index_dtype).name,
        "order": _packed(exit_map.order), "slots": _packed(exit_map.slots),
    }, separators=(",", ":"))


def read_exit_map(text: str, n_trees: int, max_positions: int) -> ExitMap:
    """The :class:`ExitMap` of ``tree2mat.exit_map`` for ``n_trees`` trees of at most
    ``max_positions`` positions each (:func:`max_positions`: a file naming more is refused
    before anything of that size is made); a ValueError naming what is wrong with it."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):  # (RecursionError: a file nesting its JSON past Python's stack)
        raise ValueError("tree2mat.exit_map is not JSON") from None
    if not isinstance(doc, dict):
        raise ValueError("tree2mat.exit_map is not a JSON object")
    T, S, index = doc.get("trees"), doc.get("positions"), doc.get("index")
    if not isinstance(T, int) or not isinstance(S, int) or T != n_trees or not 0 < S <= max_positions:
        raise ValueError(f"tree2mat.exit_map has {T!r} trees of {S!r} positions, expected {n_trees} trees of at most {max_positions}")
    if index not in ("int32", "int64"):
        raise ValueError(f"tree2mat.exit_map's index type {index!r} is neither int32 nor int64")
    order = _unpacked(doc.get("order"), T, "tree2mat.exit_map's order")
    slots = _unpacked(doc.get("slots"), T * S, "tree2mat.exit_map's slots").reshape(T, S)
    if not np.array_equal(np.sort(order), np.arange(T)):
        raise ValueError("tree2mat.exit_map's order is no ordering of the trees")
    if slots.size and slots.min() < -1:
        raise ValueError("tree2mat.exit_map's slots hold a leaf below -1")
    return ExitMap(order, slots, np.dtype(index))


def max_positions(ens: Ensemble) -> int:
    """The most positions an exit index of ``ens`` has per tree: every node of its largest tree
    (a walk's index is the node reached)."""
    return 2 * max((t.n_internal for t in ens.trees), default=0) + 1


def leaf_ids_of(index: np.ndarray, order: np.ndarray, slots: np.ndarray) -> np.ndarray:
    """The leaf ids [T, N] of an exit index [T, N] whose row r is tree ``order[r]`` and whose
    positions are leaves ``slots[r]`` (-1 where a position is out of range or no leaf: a broken
    graph)."""
    T, S = slots.shape
    index = np.asarray(index)
    if index.ndim != 2 or index.shape[0] != T:
        raise ValueError(f"the exit index has shape {index.shape}, expected [{T}, N]")
    # (one gather from the flat slots, tree order[r]'s row written straight to row order[r];
    # positions out of range are rare, a broken graph: they alone go the slow way. Slots
    # broadcast from one row (stride 0) are gathered from that row, never copied whole.)
    out = np.empty(index.shape, slots.dtype)
    shared = T > 0 and slots.strides[0] == 0
    flat = slots[0] if shared else np.ascontiguousarray(slots).reshape(-1)
    for r0 in range(0, T, _LEAF_ID_TREES):
        part = index[r0:r0 + _LEAF_ID_TREES].astype(np.intp)
        inside = (part >= 0) & (part < S) if part.size and (part.min() < 0 or part.max() >= S) else None
        if inside is not None:
            part = np.where(inside, part, 0)
        if not shared:
            part += (np.arange(r0, r0 + part.shape[0]) * S)[:, None]
        ids = flat[part]  # (a new array: the -1s below never reach the slots)
        if inside is not None:
            ids = np.where(inside, ids, -1)
        out[order[r0:r0 + part.shape[0]]] = ids
    return out


#: Trees :func:`leaf_ids_of` converts at a time (its temporaries stay in the processor's cache).
_LEAF_ID_TREES = 64


def exit_metadata(index: str, exit_map: ExitMap) -> dict[str, str]:
    """The contract's keys of an exact graph whose exit index is the tensor ``index``, mapped
    to leaf ids by ``exit_map`` (written only where it is not the identity)."""
    layout = exit_map.layout
    return {LEAF_KEY: index, LAYOUT_KEY: layout, **({MAP_KEY: exit_map_text(exit_map)} if layout == EXIT_MAPPED else {})}


def graph_metadata(ens: Ensemble) -> dict[str, str]:
    """The contract's keys every graph of ``ens`` carries."""
    return {CONTRACT_KEY: str(CONTRACT), DIGEST_KEY: shapes_digest(ens)}


def leaf_twin(model: onnx.ModelProto) -> str:
    """Adds to ``model`` the exit leaves [T, N] (int64) of a graph whose ``TreeEnsemble`` node
    sums the leaf values (``tree2mat.leaf_twin``: its output), read from a copy of that node
    whose leaves write their numbers, one target per tree: the same nodes on the same input, so
    the same routing on the same runtime (``verify``'s proof); returns the tensor's name. Leaf j
    of a tree is the j-th of the leaves its root reaches, by leaf index (as the ``treeensemble``
    form numbers them). A node that is not such a forest (an index out of range, a node reached
    twice: a file made to look like one) is a ModelFileError."""
    name = {p.key: p.value for p in model.metadata_props}.get(TWIN_KEY)
    node = next((n for n in model.graph.node if n.domain == onnx.defs.ONNX_ML_DOMAIN and n.op_type == "TreeEnsemble" and n.output[0] == name), None)
    if node is None:
        raise ModelFileError(f"the graph's {TWIN_KEY} names no TreeEnsemble node ({name!r})")
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    try:
        branches = [(list(attrs[f"nodes_{s}nodeids"]), list(attrs[f"nodes_{s}leafs"])) for s in ("true", "false")]
        roots, n_leaves = list(attrs["tree_roots"]), len(attrs["leaf_targetids"])
    except KeyError as exc:
        raise ModelFileError(f"the graph's TreeEnsemble node lacks {exc}") from None
    n_nodes = len(branches[0][0])
    if any(len(ids) != n_nodes or len(leafs) != n_nodes for ids, leafs in branches):
        raise ModelFileError("the graph's TreeEnsemble node has node lists of different lengths")
    tree_of, number = np.zeros(n_leaves, np.int64), np.zeros(n_leaves, np.float64)
    seen = np.zeros(n_nodes, bool)
    for t, root in enumerate(roots):
        todo, reached = [root], set[int]()
        while todo:
            k = todo.pop()
            if not 0 <= k < n_nodes or seen[k]:
                raise ModelFileError(f"the graph's TreeEnsemble node is not a forest (tree {t} reaches node {k} twice or out of range)")
            seen[k] = True
            for ids, leafs in branches:
                if leafs[k] and not 0 <= ids[k] < n_leaves:
                    raise ModelFileError(f"the graph's TreeEnsemble node {k} names leaf {ids[k]}, out of range")
                (reached.add if leafs[k] else todo.append)(ids[k])
        for j, leaf in enumerate(sorted(reached)):
            tree_of[leaf], number[leaf] = t, j
    twin = onnx.NodeProto()
    twin.CopyFrom(node)
    twin.name, twin.output[0] = f"{node.name}_twin", f"{name}_twin"
    replaced = {"n_targets": onnx.helper.make_attribute("n_targets", len(roots)),
                "leaf_targetids": onnx.helper.make_attribute("leaf_targetids", tree_of.tolist()),
                "leaf_weights": onnx.helper.make_attribute("leaf_weights", onnx.numpy_helper.from_array(number, "leaf_weights"))}
    kept = [a for a in twin.attribute if a.name not in replaced]
    del twin.attribute[:]
    twin.attribute.extend([*kept, *replaced.values()])
    ids = onnx.helper.make_node("Cast", [twin.output[0]], [f"{name}_twin_ids"], to=onnx.TensorProto.INT64)
    leaves = onnx.helper.make_node("Transpose", [ids.output[0]], [f"{name}_twin_leaves"], perm=[1, 0])
    model.graph.node.extend([twin, ids, leaves])
    return leaves.output[0]


def proximity_metadata(rows: np.ndarray) -> dict[str, str]:
    """``tree2mat.proximity_rows``: JSON ``{"rows": R, "features": F, "dtype": "float32" or
    "float64", "data": ...}``, the reference rows [R, F] row-major as base64 of zlib-compressed
    little-endian floats of the graph's input dtype."""
    dtype = np.dtype(rows.dtype)
    data = base64.b64encode(zlib.compress(np.ascontiguousarray(rows, dtype.newbyteorder("<")).tobytes(), 9)).decode("ascii")
    R, F = rows.shape
    return {PROXIMITY_KEY: json.dumps({"rows": int(R), "features": int(F), "dtype": dtype.name, "data": data}, separators=(",", ":"))}


def read_proximity_rows(text: str, n_features: int, max_rows: int) -> np.ndarray:
    """The reference rows [R, F] of ``tree2mat.proximity_rows`` (float32 or float64), of
    ``n_features`` columns and at most ``max_rows`` rows (a file naming more is refused before
    anything of that size is made); a ValueError naming what is wrong with it."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        raise ValueError(f"{PROXIMITY_KEY} is not JSON") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{PROXIMITY_KEY} is not a JSON object")
    R, F, name, data = doc.get("rows"), doc.get("features"), doc.get("dtype"), doc.get("data")
    if not isinstance(R, int) or not isinstance(F, int) or not 0 < R <= max_rows or F != n_features:
        raise ValueError(f"{PROXIMITY_KEY} holds {R!r} rows of {F!r} features, expected 1 to {max_rows} rows of {n_features}")
    if name not in ("float32", "float64") or not isinstance(data, str):
        raise ValueError(f"{PROXIMITY_KEY}'s dtype {name!r} is neither float32 nor float64, or it holds no data")
    dtype = np.dtype(name).newbyteorder("<")
    size = R * F * dtype.itemsize
    try:
        raw = zlib.decompressobj().decompress(base64.b64decode(data.encode("ascii"), validate=True), size + 1)
    except (ValueError, zlib.error) as exc:
        raise ValueError(f"{PROXIMITY_KEY}'s data is not base64 of zlib: {exc}") from None
    if len(raw) != size:
        raise ValueError(f"{PROXIMITY_KEY} holds {len(raw)} bytes, expected {size}")
    return np.frombuffer(raw, dtype).astype(np.dtype(name)).reshape(R, F)
