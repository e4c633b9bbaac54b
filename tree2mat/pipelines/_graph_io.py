"""The whole graph's inputs and outputs: a graph of one input per column checked against the
pipeline's columns and put in their order (:func:`graph_columns`, for ``verify``), the outputs
named as the last tree step names them, the per-column inputs replaced by one matrix."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from tree2mat.errors import OptionError, VerificationError
from tree2mat.forms._graph import all_nodes
from tree2mat.frontends.sklearn import describe_pipeline as describe


def graph_columns(onx: onnx.ModelProto, pipeline: Any, runtime: str) -> list[str] | None:
    """The columns of a pipeline's graph of one input per column (strings among them, or from
    skl2onnx.to_onnx with one input per column), its inputs put in ``pipeline``'s column order
    in ``onx`` (a copy of the caller's: rows are read in that order); None for a graph of one
    input, or with no pipeline. A VerificationError where
    the inputs are not the pipeline's columns; an OptionError where ``runtime`` cannot run it."""
    from tree2mat.runtimes import RUNTIMES, column_runtimes

    inputs = list(onx.graph.input)
    if pipeline is None or (len(inputs) == 1 and inputs[0].type.tensor_type.elem_type != onnx.TensorProto.STRING):
        return None  # (a tree model's graph: its one input checked as ever)
    if getattr(pipeline, "feature_names_in_", None) is None:
        raise VerificationError(f"the ONNX graph has {len(inputs)} inputs by column name; {describe(pipeline)} was not fitted on a "
                                "pandas DataFrame, so it has no column names: verify the graph tree2mat convert wrote of it")
    names = [str(c) for c in pipeline.feature_names_in_]
    have = [i.name for i in inputs]
    if sorted(have) != sorted(names):
        raise VerificationError(f"the ONNX graph's inputs ({', '.join(have[:6])}) are not the pipeline's columns ({', '.join(names[:6])}): "
                                "not a graph of this pipeline")
    if not RUNTIMES[runtime].text:
        raise OptionError(f"--runtime {runtime} cannot run a pipeline graph of named column inputs with string tensors "
                          f"(ai.onnx.ml encoders on text); verify it on {', '.join(column_runtimes())}")
    by_name = {i.name: onnx.ValueInfoProto() for i in inputs}
    for i in inputs:
        by_name[i.name].CopyFrom(i)
    del onx.graph.input[:]
    onx.graph.input.extend(by_name[c] for c in names)
    return names


def _names(graph: onnx.GraphProto) -> set[str]:
    """Every tensor name ``graph`` uses: its inputs, outputs, initializers and every node's
    inputs and outputs (subgraphs too)."""
    return ({v for node in all_nodes(graph) for v in (*node.input, *node.output)} | {t.name for t in graph.initializer}
            | {v.name for v in (*graph.input, *graph.output)})


def _free(base: str, taken: set[str]) -> str:
    """``base``, or ``base_1``, ``base_2``... : the first not in ``taken``."""
    return next(c for c in (base, *(f"{base}_{i}" for i in range(1, len(taken) + 2))) if c not in taken)


def _outputs_named(graph: onnx.GraphProto, wanted: list[str]) -> None:
    """The graph's outputs named as the last tree step names them (``variable``, ``label``,
    ``probabilities``). skl2onnx names a pipeline's tensors in the order it meets them, so a
    scaler's output can take ``variable`` first and leave the regressor's output ``variable1``
    (seen with traverse's graph, whose ``If`` comes in another order); a tensor that holds a
    wanted name is renamed out of the way first, everywhere (subgraphs too)."""
    have = [o.name for o in graph.output]
    if have == wanted or len(have) != len(wanted):
        return
    taken = _names(graph)
    mapping: dict[str, str] = {}
    for old, new in zip(have, wanted):
        if old != new:
            if new in taken:
                mapping[new] = _free(f"{new}_step", taken)
            mapping[old] = new
    for node in all_nodes(graph):
        node.input[:] = [mapping.get(i, i) for i in node.input]
        node.output[:] = [mapping.get(o, o) for o in node.output]
    for info in (*graph.output, *graph.value_info, *graph.initializer):
        info.name = mapping.get(info.name, info.name)


def _one_matrix_input(onx: onnx.ModelProto, double: bool, n: int) -> onnx.ModelProto:
    """Replace the per-column inputs (skl2onnx's way to select columns by name) by one matrix
    ``X`` [N, n] (``X_1``... if a column is called X) split into them, in the column order the pipeline was fitted with."""
    columns = [i.name for i in onx.graph.input]
    taken = _names(onx.graph)
    name = _free("X", taken)
    elem = onnx.TensorProto.DOUBLE if double else onnx.TensorProto.FLOAT
    sizes = onnx.numpy_helper.from_array(np.ones(n, dtype=np.int64), _free("tree2mat_split_sizes", taken))
    split = onnx.helper.make_node("Split", [name, sizes.name], columns, axis=1, name="tree2mat_split_columns")
    del onx.graph.input[:]
    onx.graph.input.append(onnx.helper.make_tensor_value_info(name, elem, [None, n]))
    onx.graph.initializer.append(sizes)
    onx.graph.node.insert(0, split)
    return onx
