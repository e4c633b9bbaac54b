"""onnxruntime: its runtime, its sessions (:func:`ort_session`), and its CUDA provider: the
graphs it refuses (:func:`cuda_refusal`) and the nodes it leaves to the CPU (:func:`cuda_cpu_nodes`)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from tree2mat.errors import OptionError, Tree2MatError, VerificationError
from tree2mat.onnx_io import needs_external_data, write_external
from tree2mat.runtimes._common import Extra, Run, _failed, feeds

#: onnxruntime's providers per ``--device``.
PROVIDERS = {"cpu": ["CPUExecutionProvider"], "cuda": ["CUDAExecutionProvider", "CPUExecutionProvider"]}


def _onnxruntime_version() -> str | None:
    """The version of the onnxruntime module that runs the graphs. Not a distribution's:
    onnxruntime-gpu installs the same module under another name, and a machine with both read
    the CPU one's version while the GPU one's module ran (benchmarks/RESULTS.md, "Measurements
    cited by the code")."""
    try:
        import onnxruntime
    except ImportError:
        return None
    return str(onnxruntime.__version__)


#: Operators onnxruntime's CUDA provider runs for some shapes and refuses for others, so that a
#: graph verified at one batch size can fail at another: ``--device cuda`` refuses graphs with
#: them. MatMulInteger (``--matmul int8``) goes to cuBLAS's int8 GEMM, which answered
#: CUBLAS_STATUS_NOT_SUPPORTED for every one-row product and for many other shapes (an H200,
#: onnxruntime-gpu 1.31.1, CUDA 13; benchmarks/RESULTS.md, "CUDA: the second run").
CUDA_REFUSED = {"MatMulInteger": "int8 products (--matmul int8)"}


def cuda_refusal(model: onnx.ModelProto) -> str | None:
    """Why ``model`` is refused on onnxruntime's CUDA provider (its first operator in
    ``CUDA_REFUSED``), or None."""
    from tree2mat.forms._graph import all_nodes

    found = {n.op_type for n in all_nodes(model.graph)} & CUDA_REFUSED.keys()
    if not found:
        return None
    op = min(found)
    return (
        f"--device cuda: the graph's {CUDA_REFUSED[op]} fail on onnxruntime's CUDA provider at some batch sizes, "
        f"one row among them (cuBLAS refuses {op}'s shapes); convert with --matmul float32 or float16 for a GPU"
    )


def check_cuda_operators(model: onnx.ModelProto) -> None:
    """An OptionError saying why ``model`` is refused on CUDA (:func:`cuda_refusal`), if it is."""
    if (why := cuda_refusal(model)) is not None:
        raise OptionError(why)


def ort_session(model: onnx.ModelProto, opts: object, device: str = "cpu") -> Any:
    """An onnxruntime session of ``model`` on ``device``'s providers (``PROVIDERS``), by file
    when the graph needs external data (over 2 GiB); on ``cuda``, a graph with an operator of
    ``CUDA_REFUSED`` is an OptionError."""
    import onnxruntime as ort

    if device == "cuda":
        check_cuda_operators(model)
    if not needs_external_data(model):
        return ort.InferenceSession(model.SerializeToString(), opts, providers=PROVIDERS[device])
    with tempfile.TemporaryDirectory(prefix="tree2mat-") as tmp:
        path = Path(tmp) / "graph.onnx"
        write_external(model, path, "graph.onnx.data")
        return ort.InferenceSession(str(path), opts, providers=PROVIDERS[device])


#: Operators whose output is as large as a shape they are given: never shape arithmetic.
_SIZED_BY_INPUT = frozenset({"ConstantOfShape", "Expand", "Tile", "Range", "RandomNormal", "RandomUniform"})


def shape_nodes(graph: onnx.GraphProto, known: frozenset[str] = frozenset()) -> set[str]:
    """The names of the nodes of ``graph`` (and of its subgraphs) that compute shapes alone:
    ``Shape`` and ``Size``, and every other node (but those in ``_SIZED_BY_INPUT``) whose inputs
    are all constants or such nodes' outputs. onnxruntime's CUDA provider leaves these few int64s
    to the CPU on purpose, where the kernels that take a shape read it. ``known``: names of the
    enclosing graph's constants and shapes."""
    shapes = set(known) | {t.name for t in graph.initializer} | {""}
    names: set[str] = set()
    for node in graph.node:
        for attr in node.attribute:
            for sub in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs):
                names |= shape_nodes(sub, frozenset(shapes))
        only_shapes = node.op_type not in _SIZED_BY_INPUT and not any(a.type == onnx.AttributeProto.GRAPH for a in node.attribute)
        if node.op_type in ("Shape", "Size", "Constant") or (only_shapes and all(i in shapes for i in node.input)):
            names.add(node.name)
            shapes.update(node.output)
    return names


def cuda_cpu_nodes(model: onnx.ModelProto, X: np.ndarray, sizes: Sequence[int] | None = None) -> list[str]:
    """``"Op name"`` of each node of ``model`` that onnxruntime's CUDA provider left to the CPU
    and that is not shape arithmetic (:func:`shape_nodes`): row data on the host. Read from the
    profile of a session (CUDA first, the CPU for the rest) run on the first ``sizes`` rows of
    ``X`` (default: one row, and one more than each walk of traverse's ``If`` s takes, as the
    graph's metadata says: ``tree2mat.walk_few``, ``tree2mat.walk_rows``; so that every walk
    runs). Empty: every kernel that touches rows ran on CUDA."""
    import onnxruntime as ort

    meta = {p.key: p.value for p in model.metadata_props}
    default = (1, *(int(v) + 1 for key in ("tree2mat.walk_few", "tree2mat.walk_rows") for v in meta.get(key, "").split(",") if v))
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.enable_profiling = True
    with tempfile.TemporaryDirectory(prefix="tree2mat-") as tmp:
        opts.profile_file_prefix = str(Path(tmp) / "placement")
        sess = ort_session(model, opts, "cuda")
        name = sess.get_inputs()[0].name
        for n in sizes or default:
            sess.run(None, {name: X[:n]})
        events = json.loads(Path(sess.end_profiling()).read_text())
    allowed = shape_nodes(model.graph)
    on_cpu = {(e["args"]["op_name"], e["name"].removesuffix("_kernel_time")) for e in events
              if e.get("cat") == "Node" and e.get("args", {}).get("provider") == "CPUExecutionProvider"}
    return sorted(f"{op} {node}" for op, node in on_cpu if node not in allowed)


def _onnxruntime(model: onnx.ModelProto, outputs: Sequence[str], device: str = "cpu") -> Run:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    try:
        sess = ort_session(model, opts, device)
    except Tree2MatError:
        raise
    except Exception as exc:
        raise _failed("onnxruntime", f"cannot load the graph on {device}", exc) from exc
    feed = feeds(model)
    options = ort.RunOptions()
    options.log_severity_level = 4  # (a stopped run's errors reach the caller as exceptions, not as log lines)

    def run(X: np.ndarray, extra: Extra | None = None) -> dict[str, np.ndarray]:
        try:
            return dict(zip(outputs, sess.run(list(outputs), feed(X, extra), options)))
        except VerificationError:  # (an extra input missing or unknown: feeds says which)
            raise
        except Exception as exc:
            raise _failed("onnxruntime", f"failed to run the graph on {device}", exc) from exc

    def cancel() -> None:  # (from another thread: the run ends at its next operator)
        options.terminate = True

    run.cancel = cancel  # type: ignore[attr-defined]
    return run

