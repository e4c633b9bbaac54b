"""The trees' exit leaves of a graph: the graph rewritten to output its exit index
(:func:`_with_leaf_output`), read as leaf ids by the exit map the graph carries
(:mod:`tree2mat.contract`) or, for a graph written before the contract, by its form's layout."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from tree2mat.contract import (
    CONTRACT,
    CONTRACT_KEY,
    DIGEST_KEY,
    EXIT_LEAVES,
    EXIT_MAPPED,
    LAYOUT_KEY,
    LEAF_KEY,
    MAP_KEY,
    TWIN_KEY,
    ExitMap,
    leaf_twin,
    max_positions,
    read_exit_map,
    shapes_digest,
)
from tree2mat.errors import ModelFileError
from tree2mat.forms import FORMS
from tree2mat.ir.core import Ensemble
from tree2mat.verify.runners import _metadata

#: ``leaves(index) -> leaf ids [N, T]``: a graph's exit index [T, N] as leaf ids.
LeafIds = Callable[[np.ndarray], np.ndarray]


def _with_leaf_output(model: onnx.ModelProto, ens: Ensemble, dtype: np.dtype) -> tuple[onnx.ModelProto, LeafIds | None, str, str | None]:
    """A copy of ``model`` that also outputs the exit index, when tree2mat wrote it for a model
    of this many trees, how to read leaf ids off it (the contract the graph carries,
    :mod:`tree2mat.contract`), and the index's name; a graph that proves its routing by a twin
    (``tree2mat.leaf_twin``: its ``TreeEnsemble`` node that sums, copied to write leaf ids) gets
    the twin. And why routing is not read off the graph, where tree2mat wrote an index it cannot
    read (None where the graph has none: the report says so)."""
    meta = _metadata(model)
    leaf, twin = meta.get(LEAF_KEY, ""), bool(meta.get(TWIN_KEY)) and not meta.get(LEAF_KEY)
    if meta.get("tree2mat.n_trees") != str(ens.n_trees) or (not leaf and not twin):
        return model, None, "", None
    read = _exit_map(meta, ens, dtype)
    if isinstance(read, str):
        return model, None, "", read
    out = onnx.ModelProto()
    out.CopyFrom(model)
    if twin:
        leaf = leaf_twin(out)  # (the exit leaves from a copy of the node that sums: the same routing)
    if leaf not in {o for n in out.graph.node for o in n.output}:
        return model, None, "", None
    if read is None:
        leaves: LeafIds = lambda index: np.asarray(index).T  # noqa: E731
        elem = onnx.TensorProto.INT64
    else:
        leaves = lambda index: read.leaf_ids(index).T  # noqa: E731
        elem = onnx.helper.np_dtype_to_tensor_dtype(read.index_dtype)
        declared = _declared_types(out.graph, leaf)
        if declared - {elem}:
            made = ", ".join(onnx.TensorProto.DataType.Name(d).lower() for d in sorted(declared))
            raise ModelFileError(f"the graph's {MAP_KEY} gives its exit index {leaf!r} type {read.index_dtype}, the graph makes it {made}")
    if leaf not in {o.name for o in out.graph.output}:
        out.graph.output.append(onnx.helper.make_tensor_value_info(leaf, elem, [ens.n_trees, "N"]))
    return out, leaves, leaf, None


def _declared_types(graph: onnx.GraphProto, name: str) -> set[int]:
    """The element types ``graph`` declares for its tensor ``name``: its value infos', or, where
    an ``If`` makes it, its branches' outputs' (none where nothing declares one)."""
    found = {v.type.tensor_type.elem_type for v in [*graph.output, *graph.value_info] if v.name == name and v.type.tensor_type.elem_type}
    for node in graph.node:
        if node.op_type == "If" and name in node.output:
            k = list(node.output).index(name)
            for branch in (a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH):
                if k < len(branch.output):
                    found |= _declared_types(branch, branch.output[k].name)
    return found


def _exit_map(meta: dict[str, str], ens: Ensemble, dtype: np.dtype) -> ExitMap | None | str:
    """The graph's exit map (None: the exit index is the leaf ids, trees in order), or why the
    index cannot be read (routing is then checked through the outputs only). A contract graph's
    own map (a malformed one is a ModelFileError: tree2mat writes none); a graph from before the
    contract, this release's layout of its form."""
    version = meta.get(CONTRACT_KEY)
    if version is None:
        return _legacy_exit_map(meta, ens, dtype)
    if version != str(CONTRACT):
        return (f"the graph carries tree2mat's graph contract {version!r}, which this tree2mat (contract {CONTRACT}) does not read: "
                "routing checked through outputs only (verify with the tree2mat that wrote it, or a newer one)")
    if meta.get(DIGEST_KEY) != shapes_digest(ens):
        return (f"the graph's trees ({DIGEST_KEY}) are not of the shapes tree2mat reads from the model, which its leaf ids refer to: "
                "a graph of another model, or written by a tree2mat that read the model otherwise; routing checked through outputs only")
    layout = meta.get(LAYOUT_KEY, EXIT_LEAVES)
    if layout == EXIT_LEAVES:  # (a twin's leaves too: trees in order)
        return None
    if layout != EXIT_MAPPED:
        raise ModelFileError(f"the graph's {LAYOUT_KEY} is {layout!r}, neither {EXIT_LEAVES!r} nor {EXIT_MAPPED!r}")
    try:
        return read_exit_map(meta[MAP_KEY], ens.n_trees, max_positions(ens))
    except KeyError:
        raise ModelFileError(f"the graph's {LAYOUT_KEY} is {EXIT_MAPPED!r} but it carries no {MAP_KEY}") from None
    except ValueError as exc:
        raise ModelFileError(f"the graph's {exc}") from None


def _legacy_exit_map(meta: dict[str, str], ens: Ensemble, dtype: np.dtype) -> ExitMap | None | str:
    """A graph written before tree2mat's graph contract (tree2mat 0.1.0 before 2026-11-29): its
    exit map is this release's layout of its form, as verify read it then."""
    if meta.get(LAYOUT_KEY, EXIT_LEAVES) == EXIT_LEAVES:
        return None
    form = FORMS.get(meta.get("tree2mat.form", ""))
    if form is None or form.exit_layout is None:
        return "the graph names no exact form of this tree2mat to read its exit index by: routing checked through outputs only"
    return ExitMap(*form.exit_layout(ens, dtype))

