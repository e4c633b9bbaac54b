"""Running the graph: the devices and runtimes (:func:`devices_for`, :func:`runtime_version`),
the graph loaded and checked (:func:`_load_onnx`, :func:`check_operators`,
:func:`_check_graph_input`), and run in chunks of rows (:class:`GraphRunner`). Rewritten to output
the trees' exit index in :mod:`~tree2mat.verify.exits`, to take each walk in
:mod:`~tree2mat.verify.walking`."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from tree2mat.contract import LEAF_KEY
from tree2mat.errors import DeviceUnavailableError, GraphTimeoutError, ModelFileError, OptionError, VerificationError
from tree2mat.forms._graph import TREE_MASK
from tree2mat.onnx_io import needs_external_data
from tree2mat.runtimes import RUNTIMES, graph_inputs

DEVICES = ("cpu", "cuda", "all")


def devices_for(device: str) -> list[str]:
    """The devices to run on; ``cuda`` without the CUDA provider is an error, never a CPU run."""
    import onnxruntime as ort

    if device not in DEVICES:
        raise OptionError(f"unknown device {device!r}; choose one of {', '.join(DEVICES)}")
    has_cuda = "CUDAExecutionProvider" in ort.get_available_providers()
    if device == "cuda" and not has_cuda:
        raise DeviceUnavailableError(
            "--device cuda: this onnxruntime has no CUDAExecutionProvider (on a machine with a CUDA GPU, swap it for "
            "onnxruntime-gpu: pip uninstall -y onnxruntime onnxruntime-gpu, then pip install --no-deps 'onnxruntime-gpu>=1.20,<2'); "
            "nothing was run"
        )
    if device == "all":
        return ["cpu", "cuda"] if has_cuda else ["cpu"]
    return [device]


def runtime_version(runtime: str, device: str) -> str:
    """The version of ``runtime``; an error naming the choices, the install command, or that
    ``--device`` is onnxruntime's."""
    if runtime not in RUNTIMES:
        raise OptionError(f"unknown runtime {runtime!r}; choose one of {', '.join(RUNTIMES)}")
    if runtime != "onnxruntime" and device != "cpu":
        raise OptionError(f"--device {device} chooses onnxruntime's provider; --runtime {runtime} runs on the CPU")
    return RUNTIMES[runtime].check()


def run_graph(
    model: onnx.ModelProto, X: np.ndarray, device: str = "cpu", rows_per_chunk: int = 65536, extra: Mapping[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """Run ``model`` on ``X`` in chunks of rows, ``extra`` its other inputs by name (see
    :meth:`GraphRunner.run`); outputs by name (leaf ids, if exposed, [N, T])."""
    return GraphRunner(model, device).run(X, rows_per_chunk, extra)


class GraphRunner:
    """``model`` loaded once on ``runtime`` (see :data:`tree2mat.runtimes.RUNTIMES`; ``device``
    for onnxruntime), run on as many arrays as needed."""

    def __init__(self, model: onnx.ModelProto, device: str, runtime: str = "onnxruntime", timeout: float | None = None) -> None:
        self.device, self.runtime, self.timeout = device, runtime, timeout
        self.names = [o.name for o in model.graph.output]
        self.leaf = _leaf_tensor(model)
        self.per_row = _per_row_inputs(model)
        # (loading can take as long as a run: onnxruntime folds the graph's constants then)
        self._run: Any = self._within(lambda: RUNTIMES[runtime].load(model, self.names, device), "load the graph")

    def run(self, X: np.ndarray, rows_per_chunk: int = 65536, extra: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """Outputs by name of the rows ``X``, run ``rows_per_chunk`` at a time, each run within
        ``timeout`` seconds (None: no limit). ``extra``: the graph's other inputs by name
        (:func:`tree2mat.runtimes.graph_inputs`); one whose first dimension is the rows' (``per_row``)
        is cut with the rows, the others go whole to every chunk."""
        given = dict(extra or {})
        for name in sorted(self.per_row & given.keys()):
            if np.ndim(given[name]) == 0 or len(given[name]) != X.shape[0]:
                raise VerificationError(f"the extra input {name!r} is one per row: shape {np.shape(given[name])} for {X.shape[0]} rows")
        chunks: dict[str, list[np.ndarray]] = {n: [] for n in self.names}
        for start in range(0, X.shape[0], rows_per_chunk):
            rows = np.ascontiguousarray(X[start:start + rows_per_chunk])
            cut = {n: np.ascontiguousarray(v[start:start + rows_per_chunk]) if n in self.per_row else v for n, v in given.items()}
            # (no extra input: the runtime's run of the rows alone, as before graphs had extra inputs)
            work = functools.partial(self._run, rows, cut) if cut else functools.partial(self._run, rows)
            outs = self._within(work, f"finish the graph on {rows.shape[0]} rows", getattr(self._run, "cancel", None))
            for n in self.names:
                chunks[n].append(np.asarray(outs[n]))
        out = {}
        for n in self.names:
            if any(c.ndim == 0 for c in chunks[n]) or (n == self.leaf and chunks[n][0].ndim != 2):
                raise VerificationError(f"the graph's output {n!r} has the wrong rank for a tree2mat graph")
            out[n] = np.concatenate(chunks[n], axis=1 if n == self.leaf else 0)
        return out

    def _within(self, work: Callable[[], Any], what: str, cancel: Callable[[], None] | None = None) -> Any:
        """``work()``, in a thread of its own when there is a time limit: past it, the work is
        told to stop where its runtime can be (``cancel``: onnxruntime between operators, the
        Node.js runners) and left behind where it cannot, and a GraphTimeoutError says so."""
        if self.timeout is None:
            return work()
        done: dict[str, Any] = {}

        def run() -> None:
            try:
                done["out"] = work()
            except BaseException as exc:  # (handed to the caller's thread)
                done["error"] = exc

        worker = threading.Thread(target=run, name="tree2mat-run", daemon=True)
        worker.start()
        worker.join(self.timeout)
        if worker.is_alive():
            if cancel is not None:
                cancel()
                worker.join(5.0)
            raise GraphTimeoutError(
                f"{self.runtime} did not {what} within {self.timeout:g} s (--timeout): the "
                f"{'run was stopped' if cancel is not None and not worker.is_alive() else 'command gives up on it'}; "
                "a graph of tree2mat's takes a fraction of that: raise --timeout for a very large model, or check where the graph came from"
            )
        if "error" in done:
            raise done["error"]
        return done["out"]


def _metadata(model: onnx.ModelProto) -> dict[str, str]:
    return {p.key: p.value for p in model.metadata_props}


def _per_row_inputs(model: onnx.ModelProto) -> set[str]:
    """The graph's extra inputs (:func:`tree2mat.runtimes.graph_inputs`) one per row: their first
    dimension the rows' symbol ("N", or the row input's own name for it)."""
    row, extras = graph_inputs(model)
    if row is None:
        return set()
    first = model.graph.input[0].type.tensor_type.shape.dim[:1]
    batch = first[0].dim_param if first and first[0].dim_param else "N"
    return {i.name for i in extras if i.type.tensor_type.shape.dim[:1] and i.type.tensor_type.shape.dim[0].dim_param == batch}


def _leaf_tensor(model: onnx.ModelProto) -> str | None:
    return _metadata(model).get(LEAF_KEY)


def _load_onnx(onnx_model_or_path: Any) -> tuple[onnx.ModelProto, str]:
    if isinstance(onnx_model_or_path, onnx.ModelProto):
        model, name = onnx_model_or_path, "<ModelProto>"
    else:
        path = Path(onnx_model_or_path)
        if not path.exists():
            raise ModelFileError(f"{path}: no such file")
        if not path.is_file():
            raise ModelFileError(f"{path}: not a regular file")
        try:
            model, name = onnx.load(str(path)), str(path)
        except Exception as exc:
            raise ModelFileError(f"{path}: not a readable ONNX file: {type(exc).__name__}: {exc}") from exc
    if not model.graph.node or not model.graph.input:
        raise ModelFileError(f"{name}: not an ONNX model (no graph)")
    large = needs_external_data(model)
    try:
        if large and name != "<ModelProto>":
            onnx.checker.check_model(name)  # by file: the message is over protobuf's limit
        elif not large:
            onnx.checker.check_model(model)
    except Exception as exc:
        raise ModelFileError(f"{name}: not a valid ONNX model: {exc}") from exc
    return model, name


def foreign_operators(model: onnx.ModelProto) -> list[str]:
    """The operators of ``model`` (its subgraphs too) that tree2mat never writes, as
    ``domain.Op``: none in a graph of tree2mat's (:data:`tree2mat.forms._graph.OPERATORS`, and
    skl2onnx's preprocessing in a pipeline's)."""
    from tree2mat.forms._graph import ML_DOMAIN, ML_OPERATORS, OPERATORS, all_nodes
    from tree2mat.pipelines import PREPROCESSING_OPERATORS

    allowed = {("", op) for op in OPERATORS} | {(ML_DOMAIN, op) for op in ML_OPERATORS}
    allowed |= {(d, op) for d, ops in PREPROCESSING_OPERATORS.items() for op in ops}
    found = {(n.domain if n.domain != "ai.onnx" else "", n.op_type) for n in all_nodes(model.graph)}
    return sorted(f"{d}.{op}" if d else op for d, op in found - allowed)


#: The largest tensor a graph may make for one row (its batch dimensions taken as 1) without
#: ``--foreign-graph``: a tree2mat graph's largest per row is the dense forms' nodes x leaves,
#: far below; a ``ConstantOfShape`` or ``Expand`` of a size the file chooses is not.
MAX_TENSOR_BYTES_PER_ROW = 2**32


def check_operators(model: onnx.ModelProto, name: str, foreign_graph: bool) -> None:
    """A ModelFileError where ``model`` holds operators tree2mat never writes, or a tensor over
    :data:`MAX_TENSOR_BYTES_PER_ROW` as onnx's shape inference sizes it, unless ``foreign_graph``:
    a graph from elsewhere can loop for as long as it says (``Loop``), run code of a custom
    domain, or ask for any memory."""
    if foreign_graph:
        return
    foreign = foreign_operators(model)
    if foreign:
        shown = ", ".join(foreign[:8]) + (f" and {len(foreign) - 8} more" if len(foreign) > 8 else "")
        raise ModelFileError(
            f"{name}: the graph holds operators tree2mat never writes ({shown}); verify runs such a graph only "
            "with --foreign-graph (foreign_graph=True), each run then bounded by --timeout"
        )
    big = oversized_tensors(model)
    if big:
        raise ModelFileError(
            f"{name}: the graph makes {big[0]}, over {MAX_TENSOR_BYTES_PER_ROW / 2**30:.0f} GiB for one row; verify runs "
            "such a graph only with --foreign-graph (foreign_graph=True)"
        )


def oversized_tensors(model: onnx.ModelProto) -> list[str]:
    """The tensors of ``model`` (its subgraphs too) that onnx's shape inference, constants
    propagated, sizes over :data:`MAX_TENSOR_BYTES_PER_ROW` with every unknown dimension as 1,
    as ``name [dims] type``; none where the graph cannot be inferred (over protobuf's 2 GiB: a
    graph tree2mat wrote, its tensors sized by the forms' own estimates)."""
    if needs_external_data(model):
        return []
    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception:  # (a graph onnx cannot infer: nothing here to say about its sizes)
        return []
    out = []
    for graph in _graphs(inferred.graph):
        for value in [*graph.value_info, *graph.output]:
            tt = value.type.tensor_type
            if not tt.HasField("shape") or tt.elem_type == onnx.TensorProto.STRING:
                continue
            dims = [d.dim_value if d.HasField("dim_value") else 1 for d in tt.shape.dim]
            size = int(np.prod(dims, dtype=object)) * onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type).itemsize
            if size > MAX_TENSOR_BYTES_PER_ROW:
                out.append(f"{value.name} {dims} {onnx.TensorProto.DataType.Name(tt.elem_type).lower()}")
    return out


def _graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """``graph`` and every subgraph of its nodes' attributes, at any depth."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            for sub in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs):
                yield from _graphs(sub)


def _check_graph_input(model: onnx.ModelProto, n_features: int) -> np.dtype:
    if len(model.graph.input) != 1 and [i.name for i in model.graph.input[1:]] != [TREE_MASK]:  # (the mask: masks.tree_mask)
        raise VerificationError(f"the ONNX graph has {len(model.graph.input)} inputs; a tree2mat graph has one (and a tree mask)")
    inp = model.graph.input[0]
    tt = inp.type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
    if len(dims) != 2:
        raise VerificationError(f"the ONNX input {inp.name!r} has rank {len(dims)}, expected [N, features]")
    if dims[1] is not None and dims[1] != n_features:
        raise VerificationError(
            f"the ONNX graph takes {dims[1]} features, the model {n_features}: not a graph of this model"
        )
    dtypes: dict[int, np.dtype] = {onnx.TensorProto.FLOAT: np.dtype(np.float32), onnx.TensorProto.DOUBLE: np.dtype(np.float64)}
    if tt.elem_type not in dtypes:
        raise VerificationError(
            f"the ONNX input has element type {onnx.TensorProto.DataType.Name(tt.elem_type).lower()}, "
            "expected float or double"
        )
    return dtypes[tt.elem_type]
