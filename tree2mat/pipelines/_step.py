"""A tree step in skl2onnx: tree2mat's converter for each supported tree estimator (its shape
calculator builds the step's graph, the converter copies it into skl2onnx's) and their
registration (:func:`_register`)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import onnx

from tree2mat import frontends
from tree2mat.build import ConvertOptions, build_graph
from tree2mat.contract import LEAF_KEY, TWIN_KEY
from tree2mat.errors import OptionError, UnsupportedModelError
from tree2mat.forms import DEFAULT_OPSET, MIN_OPSET, NEWEST_OPSET
from tree2mat.pipelines._imputer import _register_imputer

#: A tree step's outputs, by name (in the steps' metadata, not the graph's).
STEP_OUTPUTS = "tree2mat.step_outputs"


@dataclass
class _Steps:
    """What the converters of one registration build with, and (when ``built`` is a list) the
    metadata of each tree step's graph they built."""

    options: ConvertOptions
    built: list[dict[str, str]] | None = None


def tree_estimators() -> dict[str, tuple[str, ...]]:
    """The estimators :func:`~tree2mat.pipelines.register_skl2onnx` registers a converter for,
    module -> class names: every frontend's ``pipeline_steps``."""
    return {module: names for spec in frontends.FRONTENDS.values() for module, names in spec.pipeline_steps.items()}


def _classes() -> Iterator[type]:
    for module_name, names in tree_estimators().items():
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # an optional library: nothing of it can be in a pipeline
            continue
        for name in names:
            yield getattr(module, name)


def _register(skl2onnx: Any, steps: _Steps) -> list[str]:
    options = {"zipmap": [True, False, "columns"], "nocl": [False], "output_class_labels": [False]}

    def shape_calculator(operator: Any) -> None:
        _shape_calculator(steps, operator)

    registered = []
    for cls in _classes():
        is_classifier = cls.__name__.endswith("Classifier")
        skl2onnx.update_registered_converter(
            cls, f"Tree2mat{cls.__name__}", shape_calculator, _converter, overwrite=True,
            options=options if is_classifier else None,
        )
        registered.append(cls.__name__)
    _register_imputer(skl2onnx)
    return registered


def _target_opset(operator: Any) -> int:
    target = operator.target_opset
    if isinstance(target, dict):
        target = target.get("")
    if target is None:
        return DEFAULT_OPSET
    if int(target) < MIN_OPSET:
        raise OptionError(f"tree2mat's graphs need opset {MIN_OPSET} or newer; the conversion targets opset {target}")
    return min(int(target), NEWEST_OPSET)


def _element_type(operator: Any) -> str:
    from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType

    kind = operator.inputs[0].type
    if isinstance(kind, DoubleTensorType):
        return "float64"
    if isinstance(kind, FloatTensorType):
        return "float32"
    raise UnsupportedModelError(
        f"{type(operator.raw_operator).__name__} in a pipeline gets {type(kind).__name__} input; "
        "tree2mat's graphs take float or double"
    )


def _variable_type(value: onnx.ValueInfoProto) -> Any:
    from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType, Int64TensorType, StringTensorType

    tt = value.type.tensor_type
    shape = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
    kinds: dict[int, Any] = {
        onnx.TensorProto.FLOAT: FloatTensorType, onnx.TensorProto.DOUBLE: DoubleTensorType,
        onnx.TensorProto.INT64: Int64TensorType, onnx.TensorProto.STRING: StringTensorType,
    }
    return kinds[tt.elem_type](shape)


def tree_step_graph(model: Any, options: ConvertOptions) -> onnx.ModelProto:
    """The tree2mat graph of one tree step (``options`` with the step's dtype and opset)."""
    ens = frontends.load_model(model)[1]
    if len(ens.classes) > 1:
        raise UnsupportedModelError(
            f"{type(model).__name__} has {len(ens.classes)} outputs; in a skl2onnx pipeline tree2mat "
            "converts single-output classifiers (convert the estimator alone for multi-output)"
        )
    return build_graph(ens, options, ml_opset=3)  # (skl2onnx 1.20 writes no ai.onnx.ml past 3)


def _shape_calculator(steps: _Steps, operator: Any) -> None:
    """Build the step's graph (once) and give skl2onnx's variables its outputs' types."""
    options = replace(steps.options, dtype=_element_type(operator), opset=_target_opset(operator))
    graph = tree_step_graph(operator.raw_operator, options)
    operator.tree2mat_graph = graph
    operator.tree2mat_meta = {p.key: p.value for p in graph.metadata_props}
    operator.tree2mat_meta[STEP_OUTPUTS] = ",".join(o.name for o in graph.graph.output)
    if steps.built is not None:
        steps.built.append(operator.tree2mat_meta)
    outputs = {o.name: o for o in graph.graph.output}
    # ZipMap (skl2onnx's default after a classifier) takes float probabilities only: as skl2onnx's
    # own converters do, a double graph's probabilities are cast to float for it.
    zipmap = hasattr(operator.raw_operator, "classes_") and operator.scope_inst.get_options(
        operator.raw_operator, dict(zipmap=True)).get("zipmap", True) is not False
    operator.tree2mat_to_float = set()
    for var in operator.outputs:
        if var.raw_name not in outputs:
            raise UnsupportedModelError(
                f"skl2onnx expects an output {var.raw_name!r} from {type(operator.raw_operator).__name__}; "
                f"tree2mat's graph has {', '.join(outputs)}"
            )
        var.type = _variable_type(outputs[var.raw_name])
        if zipmap and var.raw_name == "probabilities" and outputs[var.raw_name].type.tensor_type.elem_type == onnx.TensorProto.DOUBLE:
            from skl2onnx.common.data_types import FloatTensorType

            var.type = FloatTensorType(var.type.shape)
            operator.tree2mat_to_float.add(var.raw_name)


def _converter(scope: Any, operator: Any, container: Any) -> None:
    """Copy the step's graph into skl2onnx's, every name made unique in its scope."""
    graph = operator.tree2mat_graph
    names = {graph.graph.input[0].name: operator.inputs[0].full_name}
    names.update({var.raw_name: var.full_name for var in operator.outputs if var.raw_name not in operator.tree2mat_to_float})

    def rename(name: str) -> str:
        if name and name not in names:
            names[name] = scope.get_unique_variable_name(f"t2m_{name}")
        return names.get(name, name)

    for init in graph.graph.initializer:
        tensor = onnx.TensorProto()
        tensor.CopyFrom(init)
        tensor.name = rename(init.name)
        container.initializers.append(tensor)
    def renamed(node: onnx.NodeProto) -> onnx.NodeProto:
        new = onnx.NodeProto()
        new.CopyFrom(node)
        del new.input[:], new.output[:]
        new.input.extend(rename(i) for i in node.input)
        new.output.extend(rename(o) for o in node.output)
        new.name = scope.get_unique_operator_name(f"t2m_{node.op_type}")
        for attr in new.attribute:  # an If's branches read the step's tensors by name
            if attr.type == onnx.AttributeProto.GRAPH:
                nodes = [renamed(n) for n in attr.g.node]
                del attr.g.node[:]
                attr.g.node.extend(nodes)
                for tensor in (*attr.g.output, *attr.g.initializer):
                    tensor.name = rename(tensor.name)
        return new

    for node in graph.graph.node:
        container.nodes.append(renamed(node))
    for key in (LEAF_KEY, TWIN_KEY, "tree2mat.walk_rows_tensor", "tree2mat.walk_few_tensor"):
        # where the step's tensors are in the whole graph (verify checks routing there, and
        # runs every one of traverse's walks)
        if operator.tree2mat_meta.get(key) in names:
            operator.tree2mat_meta[key] = names[operator.tree2mat_meta[key]]
    for var in operator.outputs:
        if var.raw_name in operator.tree2mat_to_float:
            container.add_node("Cast", [rename(var.raw_name)], [var.full_name], to=onnx.TensorProto.FLOAT,
                               name=scope.get_unique_operator_name("t2m_CastForZipMap"))
    for entry in graph.opset_import:
        container.node_domain_version_pair_sets.add((entry.domain, entry.version))
