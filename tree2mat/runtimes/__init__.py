"""ONNX runtimes a graph can be verified on: one registry, ``RUNTIMES``.

Each entry loads a graph and runs it on rows (and on the graph's extra inputs, by name:
:func:`graph_inputs`), returning the outputs by name; ``verify --runtime``
and the runtime matrix in the tests use the same entries. A runtime whose package is missing is
an error naming the install command (never a silent fallback to another runtime).

The package: :mod:`~tree2mat.runtimes._common` (the entry, :class:`Runtime`, and what the runtimes
share), one module per kind of runtime (:mod:`~tree2mat.runtimes._onnxruntime` and its CUDA
provider, :mod:`~tree2mat.runtimes._reference`, :mod:`~tree2mat.runtimes._extras`: OpenVINO, tract,
IREE; :mod:`~tree2mat.runtimes._node`: Node.js and the browser); the registry here.
"""

from __future__ import annotations

from tree2mat.errors import install_command
from tree2mat.runtimes._common import ROW_INPUT, Extra, Run, Runtime, _dist_version, check_extra, feeds, graph_inputs
from tree2mat.runtimes._extras import _iree, _iree_version, _openvino, _openvino_version, _tract
from tree2mat.runtimes._node import (
    BROWSER_INSTALL,
    NODE_DTYPES,
    NODE_INSTALL,
    NODE_SCRIPT,
    NODE_TIMEOUT_S,
    WEBGPU_IMPORTS,
    _node_runtime,
    chromium,
    node_modules,
)
from tree2mat.runtimes._onnxruntime import (
    CUDA_REFUSED,
    PROVIDERS,
    _onnxruntime,
    _onnxruntime_version,
    check_cuda_operators,
    cuda_cpu_nodes,
    cuda_refusal,
    ort_session,
    shape_nodes,
)
from tree2mat.runtimes._reference import _reference

__all__ = [
    "BROWSER_INSTALL", "CUDA_REFUSED", "NODE_DTYPES", "NODE_INSTALL", "NODE_SCRIPT", "NODE_TIMEOUT_S", "PROVIDERS", "ROW_INPUT", "RUNTIMES",
    "WEBGPU_IMPORTS", "Extra", "Run", "Runtime", "check_cuda_operators", "check_extra", "chromium", "column_runtimes", "cuda_cpu_nodes",
    "cuda_refusal", "feeds", "graph_inputs", "node_modules", "ort_session", "shape_nodes",
]


def column_runtimes() -> list[str]:
    """The runtimes that run a graph of named column inputs with strings (see :attr:`Runtime.text`)."""
    return [name for name, r in RUNTIMES.items() if r.text]


RUNTIMES: dict[str, Runtime] = {
    r.name: r
    for r in (
        Runtime("onnxruntime", "pip install onnxruntime", "onnxruntime's CPU execution provider", _onnxruntime_version, _onnxruntime,
                text=True),
        Runtime("reference", "pip install onnx", "onnx's own reference evaluator (onnx.reference)", _dist_version("onnx"), _reference, text=True),
        Runtime("openvino", install_command("openvino"), "OpenVINO's CPU plugin, its default settings", _openvino_version, _openvino, "openvino"),
        Runtime("tract", install_command("tract"), "Sonos' tract (Rust)", _dist_version("tract"), _tract, "tract"),
        Runtime("iree", install_command("iree"), "IREE: the graph imported and compiled for llvm-cpu", _iree_version, _iree, "iree"),
        _node_runtime("onnxruntime-node", "onnxruntime-node", "run_graph.mjs", "onnxruntime's Node.js binding (CPU)",
                      NODE_INSTALL.format(package="onnxruntime-node")),
        _node_runtime("onnxruntime-web", "onnxruntime-web", "run_graph.mjs", "onnxruntime-web's WebAssembly backend, run in Node.js",
                      NODE_INSTALL.format(package="onnxruntime-web")),
        *(
            _node_runtime(
                name, "onnxruntime-web", "run_browser.mjs", f"onnxruntime-web's WebGPU backend of `import ... from '{module}'` ({how}), in "
                "headless Chromium (started with --enable-unsafe-webgpu)", BROWSER_INSTALL, module,
            )
            for name, module, how in WEBGPU_IMPORTS
        ),
    )
}
