"""The runtimes an extra of tree2mat installs: OpenVINO, tract, IREE."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx

from tree2mat.errors import VerificationError
from tree2mat.runtimes._common import Extra, Run, _dist_version, _failed, check_extra, graph_inputs

# ---------------------------------------------------------------------------------- OpenVINO


def _openvino_version() -> str | None:
    """OpenVINO's version and its CPU plugin's default precision (bf16 on CPUs that have it)."""
    found = _dist_version("openvino")()
    if found is None:
        return None
    try:
        import openvino as ov

        hint = str(ov.Core().get_property("CPU", "INFERENCE_PRECISION_HINT"))
    except Exception:  # (a broken install, no CPU plugin: loading will say why)
        return found
    return f"{found} (CPU, {hint.split(chr(39))[1] if chr(39) in hint else hint})"


def _openvino(model: onnx.ModelProto, outputs: Sequence[str], device: str = "cpu", config: dict[str, str] | None = None) -> Run:
    try:
        import openvino as ov
    except ImportError as exc:
        raise _failed("OpenVINO", "cannot be imported", exc) from exc

    core = ov.Core()
    try:
        net = core.read_model(model.SerializeToString())
        # OpenVINO's defaults (``config``: others), as a deployment gets them: on CPUs with bf16
        # its CPU plugin runs MatMul and friends in bf16 (the version string says which).
        compiled = core.compile_model(net, "CPU", config or {})
    except Exception as exc:
        raise _failed("OpenVINO", "cannot load the graph", exc) from exc
    ports = {}
    for port in compiled.outputs:
        for n in port.get_names():
            ports[n] = port
    missing = [n for n in outputs if n not in ports]
    if missing:
        raise VerificationError(f"OpenVINO: the compiled graph has no output {missing[0]!r}")
    request = compiled.create_infer_request()
    check = check_extra(model)

    def run(X: np.ndarray, extra: Extra | None = None) -> dict[str, np.ndarray]:
        given = check(extra)
        try:
            inputs: dict[int | str, np.ndarray] = {0: X}  # (the rows by position, as ever; the extra inputs by name)
            inputs.update(given)
            got = request.infer(inputs)
            return {n: np.array(got[ports[n]]) for n in outputs}
        except Exception as exc:
            raise _failed("OpenVINO", "failed to run the graph", exc) from exc

    return run


# -------------------------------------------------------------------------------------- tract


def _tract(model: onnx.ModelProto, outputs: Sequence[str], device: str = "cpu") -> Run:
    try:
        import tract
    except ImportError as exc:
        raise _failed("tract", "cannot be imported", exc) from exc

    with tempfile.TemporaryDirectory(prefix="tree2mat-tract-") as tmp:
        path = Path(tmp) / "graph.onnx"
        path.write_bytes(model.SerializeToString())
        try:
            inference = tract.onnx().load(str(path))
            for k, fact in enumerate(_tract_facts(model)):
                if fact:
                    inference.set_input_fact(k, fact)
            graph_outputs = [o.name for o in model.graph.output]
            for k in range(len(graph_outputs)):  # (tract infers them; the declared ones may be partial)
                inference.set_output_fact(k, None)
            typed = inference.into_model()
            runnable = typed.into_runnable()
        except Exception as exc:
            raise _failed("tract", "cannot load the graph", exc) from exc
    where = {n: graph_outputs.index(n) for n in outputs}
    check = check_extra(model)

    def run(X: np.ndarray, extra: Extra | None = None) -> dict[str, np.ndarray]:
        given = check(extra)
        try:
            got = runnable.run([X, *given.values()])
            return {n: got[where[n]].to_numpy() for n in outputs}
        except Exception as exc:
            raise _failed("tract", "failed to run the graph", exc) from exc

    return run


#: tract's names of the element types an input's fact can give.
_TRACT_KINDS = {onnx.TensorProto.FLOAT: "f32", onnx.TensorProto.DOUBLE: "f64", onnx.TensorProto.INT64: "i64",
                onnx.TensorProto.INT32: "i32", onnx.TensorProto.BOOL: "bool"}


def _tract_facts(model: onnx.ModelProto) -> list[str | None]:
    """Each input's fact from its declared type (None: left to tract). The row input's unnamed or
    unknown dimensions are the symbol N (tract needs one; ONNX files often leave the batch
    dimension blank), its type float or double (others as the graph says); an extra input's
    (:func:`graph_inputs`) named dimensions are N where the row input's batch dimension has that
    name, else a symbol of their own, as are its unnamed ones (tract ties a mask's [N, T] to the
    rows by the symbol)."""
    extras = graph_inputs(model)[1]
    inputs = [model.graph.input[0], *extras]
    batch = {d.dim_param for d in inputs[0].type.tensor_type.shape.dim[:1] if d.dim_param} | {"N"}

    def symbol(k: int, j: int, d: onnx.TensorShapeProto.Dimension) -> str:
        if d.HasField("dim_value"):
            return str(d.dim_value)
        if k == 0 or d.dim_param in batch:
            return "N"
        return d.dim_param if d.dim_param.isidentifier() else f"S{k}_{j}"

    facts: list[str | None] = []
    for k, value in enumerate(inputs):
        tt = value.type.tensor_type
        kind = _TRACT_KINDS.get(tt.elem_type) if k else {onnx.TensorProto.FLOAT: "f32", onnx.TensorProto.DOUBLE: "f64"}.get(tt.elem_type)
        if kind is None or not (k == 0 or tt.HasField("shape")):  # (an extra input of no declared shape: tract reads it)
            facts.append(None)
        else:
            facts.append(",".join([*(symbol(k, j, d) for j, d in enumerate(tt.shape.dim)), kind]))
    return facts


# --------------------------------------------------------------------------------------- IREE


def _iree_version() -> str | None:
    """IREE's runtime version, when both its compiler and runtime are installed."""
    compiler = _dist_version("iree-base-compiler")()
    return _dist_version("iree-base-runtime")() if compiler else None


def _iree(model: onnx.ModelProto, outputs: Sequence[str], device: str = "cpu") -> Run:
    try:
        import iree.compiler as ireec
        import iree.runtime as rt
        from iree.compiler.extras import onnx_importer
        from iree.compiler.ir import Context
    except ImportError as exc:
        raise _failed("IREE", "cannot be imported", exc) from exc
    try:
        context = Context()
        info = onnx_importer.ModelInfo(onnx.shape_inference.infer_shapes(model, data_prop=True))
        module = info.create_module(context=context).operation
        onnx_importer.NodeImporter.define_function(info.main_graph, module).import_all()
        module.verify()
        flatbuffer = ireec.compile_str(
            module.get_asm(assume_verified=True), target_backends=["llvm-cpu"], input_type="onnx",
            extra_args=["--iree-llvmcpu-target-cpu=host", "--iree-input-demote-f64-to-f32=false"],
        )
        config = rt.Config("local-task")
        ctx = rt.SystemContext(config=config)
        ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, flatbuffer))
        fn = ctx.modules.module[model.graph.name]
    except Exception as exc:
        raise _failed("IREE", "cannot compile the graph", exc) from exc
    graph_outputs = [o.name for o in model.graph.output]
    where = {n: graph_outputs.index(n) for n in outputs}
    check = check_extra(model)

    def run(X: np.ndarray, extra: Extra | None = None) -> dict[str, np.ndarray]:
        given = check(extra)  # (the function's arguments: the graph's inputs in order)
        try:
            got = fn(X, *given.values())
            got = got if isinstance(got, (list, tuple)) else [got]
            return {n: np.asarray(got[where[n]].to_host()) for n in outputs}
        except Exception as exc:
            raise _failed("IREE", "failed to run the graph", exc) from exc

    return run

