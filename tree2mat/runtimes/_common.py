"""A registry entry (:class:`Runtime`) and what the runtimes share: the ``run`` a loaded graph
is, a distribution's version, a runtime's error in one line, and the graph's inputs of the rows
(:func:`feeds`)."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import onnx

from tree2mat.errors import DeviceUnavailableError, VerificationError, missing

#: ``run(X) -> outputs by name``, for one loaded graph.
Run = Callable[[np.ndarray], dict[str, np.ndarray]]


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


def _failed(runtime: str, what: str, exc: BaseException) -> VerificationError:
    text = " ".join(str(exc).split()).split(" Stack backtrace:")[0]  # (tract's: frames of the Python build)
    if len(text) > 600:
        text = text[:600] + " ..."
    return VerificationError(f"{runtime} {what}: {type(exc).__name__}: {text}")


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

