"""ONNX runtimes a graph can be verified on: one registry, ``RUNTIMES``.

Each entry loads a graph and runs it on rows, returning the outputs by name; ``verify --runtime``
and the runtime matrix in the tests use the same entries. A runtime whose package is missing is
an error naming the install command (never a silent fallback to another runtime).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from tree2mat.errors import DeviceUnavailableError, OptionError, Tree2MatError, VerificationError, install_command, missing
from tree2mat.onnx_io import needs_external_data, write_external

#: ``run(X) -> outputs by name``, for one loaded graph.
Run = Callable[[np.ndarray], dict[str, np.ndarray]]
#: onnxruntime's providers per ``--device``.
PROVIDERS = {"cpu": ["CPUExecutionProvider"], "cuda": ["CUDAExecutionProvider", "CPUExecutionProvider"]}


@dataclass(frozen=True)
class Runtime:
    """An ONNX runtime: how to tell it is installed, its version, and how to run a graph on it."""

    name: str
    #: What the user installs (shown when it is missing).
    install: str
    summary: str
    #: The version of the installed runtime, or None when it is not installed.
    version: Callable[[], str | None]
    #: ``load(model, output_names, device) -> run``: the graph ready to run on ``device`` (cpu,
    #: or for onnxruntime cuda), computing ``output_names``.
    load: Callable[[onnx.ModelProto, Sequence[str], str], Run]
    #: The Python module an extra of tree2mat installs (its error names the extra), or "".
    module: str = ""
    #: Whether it runs a graph of named column inputs, strings among them (a pipeline with string
    #: columns: skl2onnx's ai.onnx.ml encoders on text); see :func:`feeds`.
    text: bool = False

    def available(self) -> bool:
        return self.version() is not None

    def check(self) -> str:
        """The version; a DeviceUnavailableError naming the install command when missing."""
        found = self.version()
        if found is None and self.module:
            raise missing(f"--runtime {self.name}", self.module)
        if found is None:
            raise DeviceUnavailableError(f"--runtime {self.name}: not installed; {self.install}")
        return found


def _dist_version(dist: str) -> Callable[[], str | None]:
    def version() -> str | None:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return None

    return version


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


def _failed(runtime: str, what: str, exc: BaseException) -> VerificationError:
    text = " ".join(str(exc).split()).split(" Stack backtrace:")[0]  # (tract's: frames of the Python build)
    if len(text) > 600:
        text = text[:600] + " ..."
    return VerificationError(f"{runtime} {what}: {type(exc).__name__}: {text}")


# ------------------------------------------------------------------------------- onnxruntime


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


def feeds(model: onnx.ModelProto) -> Callable[[np.ndarray], dict[str, np.ndarray]]:
    """``feed(X)``: the graph's inputs of the rows ``X``. One input: ``X`` itself. One input per
    column (a pipeline with string columns): column j of ``X`` (an object array, columns in the
    graph's input order) as input j, [N, 1], text as str objects, numbers in the input's dtype."""
    inputs = list(model.graph.input)
    if len(inputs) == 1:
        name = inputs[0].name
        return lambda X: {name: X}
    kinds = [(i.name, None if i.type.tensor_type.elem_type == onnx.TensorProto.STRING
              else onnx.helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type)) for i in inputs]

    def feed(X: np.ndarray) -> dict[str, np.ndarray]:
        out = {}
        for j, (name, dtype) in enumerate(kinds):
            col = X[:, j:j + 1]
            # (an empty text cell: "", which the encoders take as an unseen category)
            out[name] = np.vectorize(lambda v: "" if v is None else str(v), otypes=[object])(col) if dtype is None else col.astype(dtype)
        return out

    return feed


def column_runtimes() -> list[str]:
    """The runtimes that run a graph of named column inputs with strings (see :attr:`Runtime.text`)."""
    return [name for name, r in RUNTIMES.items() if r.text]


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

    def run(X: np.ndarray) -> dict[str, np.ndarray]:
        try:
            return dict(zip(outputs, sess.run(list(outputs), feed(X), options)))
        except Exception as exc:
            raise _failed("onnxruntime", f"failed to run the graph on {device}", exc) from exc

    def cancel() -> None:  # (from another thread: the run ends at its next operator)
        options.terminate = True

    run.cancel = cancel  # type: ignore[attr-defined]
    return run


# ------------------------------------------------------------------ onnx's reference evaluator


def _gather_elements_op() -> type:
    """onnx's reference ``GatherElements`` as fixed upstream (onnx pull request 8444, merged
    2026-09, in no release yet): ``numpy.take_along_axis`` on the data cut to the indices'
    extent. The released one (1.23.2) picks values with ``numpy.choose``, which takes at most 64
    choices: past 64 entries on the gathered axis it raises, or returns the first index of each
    row for every element of it."""
    from onnx.reference.op_run import OpRun

    class GatherElements(OpRun):
        def _run(self, data, indices, axis=None):
            axis = 0 if axis is None else int(axis)
            axis = axis % data.ndim
            cut = tuple(slice(None) if k == axis else slice(0, n) for k, n in enumerate(indices.shape))
            return (np.take_along_axis(data[cut], indices.astype(np.int64), axis=axis),)

    return GatherElements


def _reference(model: onnx.ModelProto, outputs: Sequence[str], device: str = "cpu") -> Run:
    from onnx.reference import ReferenceEvaluator

    try:
        ref = ReferenceEvaluator(model, new_ops=[_gather_elements_op()])
    except Exception as exc:
        raise _failed("the onnx reference evaluator", "cannot load the graph", exc) from exc
    feed = feeds(model)

    def run(X: np.ndarray) -> dict[str, np.ndarray]:
        try:
            got = ref.run(list(outputs), feed(X))
        except Exception as exc:
            raise _failed("the onnx reference evaluator", "failed to run the graph", exc) from exc
        return {n: np.asarray(v) for n, v in zip(outputs, got)}

    return run


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

    def run(X: np.ndarray) -> dict[str, np.ndarray]:
        try:
            got = request.infer({0: X})
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
            # The input's fact from its declared type, an unnamed or unknown dimension as the
            # symbol N (tract needs one; ONNX files often leave the batch dimension blank).
            tt = model.graph.input[0].type.tensor_type
            dims = [str(d.dim_value) if d.HasField("dim_value") else "N" for d in tt.shape.dim]
            kind = {onnx.TensorProto.FLOAT: "f32", onnx.TensorProto.DOUBLE: "f64"}.get(tt.elem_type)
            if kind:
                inference.set_input_fact(0, ",".join([*dims, kind]))
            graph_outputs = [o.name for o in model.graph.output]
            for k in range(len(graph_outputs)):  # (tract infers them; the declared ones may be partial)
                inference.set_output_fact(k, None)
            typed = inference.into_model()
            runnable = typed.into_runnable()
        except Exception as exc:
            raise _failed("tract", "cannot load the graph", exc) from exc
    where = {n: graph_outputs.index(n) for n in outputs}

    def run(X: np.ndarray) -> dict[str, np.ndarray]:
        try:
            got = runnable.run([X])
            return {n: got[where[n]].to_numpy() for n in outputs}
        except Exception as exc:
            raise _failed("tract", "failed to run the graph", exc) from exc

    return run


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

    def run(X: np.ndarray) -> dict[str, np.ndarray]:
        try:
            got = fn(X)
            got = got if isinstance(got, (list, tuple)) else [got]
            return {n: np.asarray(got[where[n]].to_host()) for n in outputs}
        except Exception as exc:
            raise _failed("IREE", "failed to run the graph", exc) from exc

    return run


# ---------------------------------------------------------- onnxruntime-node / -web in Node.js

NODE_INSTALL = (
    "it needs Node.js (node on the PATH) and the npm package: npm install {package}@1.30 in your project "
    "(found in the nearest node_modules from the current directory up), or anywhere with "
    "TREE2MAT_NODE_MODULES=that/node_modules"
)

#: The script that runs a graph in Node.js (shipped with the package).
NODE_SCRIPT = Path(__file__).with_name("js") / "run_graph.mjs"
#: The longest a Node.js or browser run of one chunk of rows may take.
NODE_TIMEOUT_S = 1800
NODE_DTYPES = {"float32": np.float32, "float64": np.float64, "int64": np.int64, "int32": np.int32, "bool": np.bool_, "uint8": np.uint8, "int8": np.int8}


def node_modules(package: str) -> Path | None:
    """The ``node_modules`` folder that holds ``package``: ``TREE2MAT_NODE_MODULES`` if set, else
    the nearest one from the current directory up (as Node.js itself looks)."""
    env = os.environ.get("TREE2MAT_NODE_MODULES")
    candidates = [Path(env)] if env else [d / "node_modules" for d in (Path.cwd(), *Path.cwd().parents)]
    return next((c for c in candidates if (c / package / "package.json").is_file()), None)


#: The browser runners (``webgpu``, ``webgpu-jsep``): Chromium's path (TREE2MAT_CHROMIUM, else Debian's).
def chromium() -> str | None:
    path = os.environ.get("TREE2MAT_CHROMIUM", "/usr/bin/chromium")
    return path if Path(path).is_file() and os.access(path, os.X_OK) else None


def _node_version(package: str, browser: bool = False) -> Callable[[], str | None]:
    def version() -> str | None:
        folder = node_modules(package)
        if shutil.which("node") is None or folder is None:
            return None
        found = str(json.loads((folder / package / "package.json").read_text())["version"])
        if not browser:
            return found
        if chromium() is None or not (folder / "playwright-core" / "package.json").is_file():
            return None
        try:
            done = subprocess.run([str(chromium()), "--version"], capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return f"{found} ({' '.join(done.stdout.split()[:2]) or 'Chromium'})"

    return version


def _node(name: str, package: str, script: str, module: str | None = None) -> Callable[[onnx.ModelProto, Sequence[str], str], Run]:
    """Runs graphs with ``script`` (run_graph.mjs: in Node.js; run_browser.mjs: in headless
    Chromium, the page importing ``module``), ``package`` from the npm packages found by
    :func:`node_modules`."""

    def load(model: onnx.ModelProto, outputs: Sequence[str], device: str = "cpu") -> Run:
        folder = node_modules(package)
        node = shutil.which("node")
        if folder is None or node is None or RUNTIMES[name].version() is None:
            raise DeviceUnavailableError(f"--runtime {name}: not installed; {RUNTIMES[name].install}")
        model_bytes = model.SerializeToString()
        input_name = model.graph.input[0].name
        command = [node, str(NODE_SCRIPT.with_name(script))] + ([package] if script == "run_graph.mjs" else [])

        def run(X: np.ndarray) -> dict[str, np.ndarray]:
            with tempfile.TemporaryDirectory(prefix="tree2mat-node-") as tmp:
                where = Path(tmp)
                (where / "graph.onnx").write_bytes(model_bytes)
                np.ascontiguousarray(X).tofile(where / "input.bin")
                request = {
                    "model": str(where / "graph.onnx"), "outputs": list(outputs), "dir": tmp,
                    "input": {"name": input_name, "dtype": X.dtype.name, "shape": list(X.shape), "file": str(where / "input.bin")},
                    **({"import": module} if module else {}),
                }
                (where / "request.json").write_text(json.dumps(request))
                env = {**os.environ, "TREE2MAT_NODE_MODULES": str(folder)}
                with subprocess.Popen([*command, str(where / "request.json")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, env=env) as proc:
                    running.append(proc)
                    try:
                        stdout, stderr = proc.communicate(timeout=NODE_TIMEOUT_S)
                    except subprocess.TimeoutExpired as exc:
                        proc.kill()
                        raise VerificationError(f"{name} did not finish the graph within {NODE_TIMEOUT_S} s") from exc
                    finally:
                        running.remove(proc)
                done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
                if done.returncode != 0:
                    lines = [line for line in done.stderr.splitlines() if line.strip()]
                    error = next((line for line in lines if "Error" in line), lines[-1] if lines else f"exit {done.returncode}")
                    raise VerificationError(f"{name} failed to run the graph: {' '.join(error.split())[:600]}")
                try:
                    described = json.loads(done.stdout.strip().splitlines()[-1])["outputs"]
                    out = {}
                    for o in described:
                        path = Path(o["file"])
                        if o["dtype"] == "string":
                            out[o["name"]] = np.asarray(json.loads(path.read_text(encoding="utf-8")), dtype=object).reshape(o["shape"])
                        else:
                            out[o["name"]] = np.fromfile(path, NODE_DTYPES[o["dtype"]]).reshape(o["shape"])
                except (IndexError, KeyError, ValueError, OSError) as exc:  # (JSONDecodeError is a ValueError)
                    raise VerificationError(f"{name} gave no readable outputs: {type(exc).__name__}: {exc}") from exc
                return out

        running: list[subprocess.Popen[str]] = []

        def cancel() -> None:  # (from another thread: a run past verify's --timeout; SIGTERM, so that
            for proc in list(running):  # playwright closes the browser it started)
                proc.terminate()

        run.cancel = cancel  # type: ignore[attr-defined]
        return run

    return load


BROWSER_INSTALL = (
    NODE_INSTALL.format(package="onnxruntime-web") + ", the npm package playwright-core, and Chromium "
    "(Debian: apt install chromium; elsewhere TREE2MAT_CHROMIUM=its path)"
)
#: The WebGPU runtimes: onnxruntime-web ships two WebGPU backends, one per import, whose kernels
#: are different code (docs/runtimes.md): (runtime, the import, what it is).
WEBGPU_IMPORTS = (
    ("webgpu", "onnxruntime-web/webgpu", "its C++ WebGPU execution provider: the import to ship"),
    ("webgpu-jsep", "onnxruntime-web", "the default import's JSEP, which shares compiled shaders between a page's graphs: "
     "exact one graph per page"),
)

RUNTIMES: dict[str, Runtime] = {
    r.name: r
    for r in (
        Runtime("onnxruntime", "pip install onnxruntime", "onnxruntime's CPU execution provider", _onnxruntime_version, _onnxruntime,
                text=True),
        Runtime("reference", "pip install onnx", "onnx's own reference evaluator (onnx.reference)", _dist_version("onnx"), _reference, text=True),
        Runtime("openvino", install_command("openvino"), "OpenVINO's CPU plugin, its default settings", _openvino_version, _openvino, "openvino"),
        Runtime("tract", install_command("tract"), "Sonos' tract (Rust)", _dist_version("tract"), _tract, "tract"),
        Runtime("iree", install_command("iree"), "IREE: the graph imported and compiled for llvm-cpu", _iree_version, _iree, "iree"),
        Runtime(
            "onnxruntime-node", NODE_INSTALL.format(package="onnxruntime-node"),
            "onnxruntime's Node.js binding (CPU)", _node_version("onnxruntime-node"), _node("onnxruntime-node", "onnxruntime-node", "run_graph.mjs"),
        ),
        Runtime(
            "onnxruntime-web", NODE_INSTALL.format(package="onnxruntime-web"),
            "onnxruntime-web's WebAssembly backend, run in Node.js", _node_version("onnxruntime-web"), _node("onnxruntime-web", "onnxruntime-web", "run_graph.mjs"),
        ),
        *(
            Runtime(
                name, BROWSER_INSTALL, f"onnxruntime-web's WebGPU backend of `import ... from '{module}'` ({how}), in headless "
                "Chromium (started with --enable-unsafe-webgpu)",
                _node_version("onnxruntime-web", browser=True), _node(name, "onnxruntime-web", "run_browser.mjs", module),
            )
            for name, module, how in WEBGPU_IMPORTS
        ),
    )
}
