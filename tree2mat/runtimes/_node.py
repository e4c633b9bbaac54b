"""onnxruntime-node and onnxruntime-web in Node.js, and onnxruntime-web's WebGPU backends in
headless Chromium: each graph run by a script of ``tree2mat/js`` in a process of its own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import onnx

from tree2mat.errors import DeviceUnavailableError, VerificationError
from tree2mat.runtimes._common import Extra, Run, Runtime, check_extra

NODE_INSTALL = (
    "it needs Node.js (node on the PATH) and the npm package: npm install {package}@1.30 in your project "
    "(found in the nearest node_modules from the current directory up), or anywhere with "
    "TREE2MAT_NODE_MODULES=that/node_modules"
)

#: The script that runs a graph in Node.js (shipped with the package).
NODE_SCRIPT = Path(__file__).parents[1] / "js" / "run_graph.mjs"
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


def _node_runtime(name: str, package: str, script: str, summary: str, install: str, module: str | None = None) -> Runtime:
    """The runtime that runs graphs with ``script`` (run_graph.mjs: in Node.js; run_browser.mjs: in
    headless Chromium, the page importing ``module``), ``package`` from the npm packages found by
    :func:`node_modules`; installed when :func:`_node_version` finds them (and, for a browser,
    Chromium and playwright-core)."""
    version = _node_version(package, browser=script == "run_browser.mjs")

    def load(model: onnx.ModelProto, outputs: Sequence[str], device: str = "cpu") -> Run:
        folder = node_modules(package)
        node = shutil.which("node")
        if folder is None or node is None or version() is None:
            raise DeviceUnavailableError(f"--runtime {name}: not installed; {install}")
        model_bytes = model.SerializeToString()
        input_name = model.graph.input[0].name
        command = [node, str(NODE_SCRIPT.with_name(script))] + ([package] if script == "run_graph.mjs" else [])
        check = check_extra(model)

        def run(X: np.ndarray, extra: Extra | None = None) -> dict[str, np.ndarray]:
            given = check(extra)
            with tempfile.TemporaryDirectory(prefix="tree2mat-node-") as tmp:
                request = _request(Path(tmp), model_bytes, input_name, outputs, X, module, given)
                stdout = _call(name, [*command, str(request)], {**os.environ, "TREE2MAT_NODE_MODULES": str(folder)}, running)
                return _read_outputs(name, stdout)

        running: list[subprocess.Popen[str]] = []

        def cancel() -> None:  # (from another thread: a run past verify's --timeout; SIGTERM, so that
            for proc in list(running):  # playwright closes the browser it started)
                proc.terminate()

        run.cancel = cancel  # type: ignore[attr-defined]
        return run

    return Runtime(name, install, summary, version, load)


def _request(
    where: Path, model_bytes: bytes, input_name: str, outputs: Sequence[str], X: np.ndarray, module: str | None, extra: Extra | None = None,
) -> Path:
    """The request a script reads (``request.json`` in ``where``, which it names): the graph, the
    rows and the graph's extra inputs (``"extra"``, in the graph's order, each as the rows are
    described; a bool one byte each) as files beside it, the outputs wanted, and for a page the
    module it imports."""
    (where / "graph.onnx").write_bytes(model_bytes)
    np.ascontiguousarray(X).tofile(where / "input.bin")
    described = []
    for k, (name, value) in enumerate((extra or {}).items()):
        array = np.asarray(value)
        if array.dtype.name not in NODE_DTYPES:
            raise VerificationError(f"the extra input {name!r} is {array.dtype.name}; the Node.js runners take {', '.join(NODE_DTYPES)}")
        np.ascontiguousarray(array).tofile(where / f"extra{k}.bin")
        described.append({"name": name, "dtype": array.dtype.name, "shape": list(array.shape), "file": str(where / f"extra{k}.bin")})
    request = {
        "model": str(where / "graph.onnx"), "outputs": list(outputs), "dir": str(where),
        "input": {"name": input_name, "dtype": X.dtype.name, "shape": list(X.shape), "file": str(where / "input.bin")},
        **({"extra": described} if described else {}),
        **({"import": module} if module else {}),
    }
    (where / "request.json").write_text(json.dumps(request))
    return where / "request.json"


def _call(name: str, command: list[str], env: dict[str, str], running: list[subprocess.Popen[str]]) -> str:
    """The script's standard output, its process in ``running`` while it runs (so that a cancel
    can stop it); one that runs past :data:`NODE_TIMEOUT_S` or fails is a VerificationError,
    which quotes its error line."""
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as proc:
        running.append(proc)
        try:
            stdout, stderr = proc.communicate(timeout=NODE_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            proc.kill()
            raise VerificationError(f"{name} did not finish the graph within {NODE_TIMEOUT_S} s") from exc
        finally:
            running.remove(proc)
    if proc.returncode != 0:
        lines = [line for line in stderr.splitlines() if line.strip()]
        error = next((line for line in lines if "Error" in line), lines[-1] if lines else f"exit {proc.returncode}")
        raise VerificationError(f"{name} failed to run the graph: {' '.join(error.split())[:600]}")
    return stdout


def _read_outputs(name: str, stdout: str) -> dict[str, np.ndarray]:
    """The outputs the script wrote, as its last line of ``stdout`` describes them (a file each:
    raw numbers, or JSON for strings)."""
    try:
        described = json.loads(stdout.strip().splitlines()[-1])["outputs"]
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

