"""A registry entry (:class:`Runtime`) and what the runtimes share: the ``run`` a loaded graph
is, a distribution's version, a runtime's error in one line, and the graph's inputs of the rows
and its extra inputs (:func:`feeds`, :func:`graph_inputs`)."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import onnx

from tree2mat.errors import DeviceUnavailableError, VerificationError, missing

#: The graph's inputs other than the rows, by name (a mask over the trees, say): numbers or bools.
Extra = Mapping[str, np.ndarray]
#: The name the row input of a graph with extra inputs has (its first; [N, features]).
ROW_INPUT = "input"


class Run(Protocol):
    """``run(X, extra=None) -> outputs by name``, for one loaded graph: ``X`` the rows, ``extra``
    the graph's other inputs by name (:func:`graph_inputs`)."""

    def __call__(self, X: np.ndarray, extra: Extra | None = None) -> dict[str, np.ndarray]: ...


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


def graph_inputs(model: onnx.ModelProto) -> tuple[str | None, list[onnx.ValueInfoProto]]:
    """The graph's row input and its extra inputs: one input, or a first named :data:`ROW_INPUT`
    of rank 2 ([N, features]), is the rows' and the others are extra; else (None, []): one input
    per column (a pipeline with string columns)."""
    inputs = list(model.graph.input)
    if not inputs:
        return None, []
    first = inputs[0]
    if len(inputs) == 1 or (first.name == ROW_INPUT and len(first.type.tensor_type.shape.dim) == 2):
        return first.name, inputs[1:]
    return None, []


def check_extra(model: onnx.ModelProto) -> Callable[[Extra | None], dict[str, np.ndarray]]:
    """``check(extra)``: ``extra`` as the graph's extra inputs (:func:`graph_inputs`) in its input
    order; an extra input the graph needs and ``extra`` lacks, or a name in ``extra`` the graph has
    no extra input of, is a VerificationError naming it."""
    row, inputs = graph_inputs(model)
    names = [i.name for i in inputs]
    # (an input an initializer also gives has a default: ONNX's optional inputs)
    defaults = {t.name for t in model.graph.initializer}

    def check(extra: Extra | None) -> dict[str, np.ndarray]:
        given = dict(extra or {})
        unknown = [n for n in given if n not in names]
        if unknown:
            what = "inputs are one per column" if row is None else f"extra inputs are {', '.join(map(repr, names)) or 'none'}"
            raise VerificationError(f"the graph has no extra input {unknown[0]!r} (its {what})")
        lacking = [n for n in names if n not in given and n not in defaults]
        if lacking:
            raise VerificationError(f"the graph's input {lacking[0]!r} was not given (pass it as an extra input, by name)")
        return {n: given[n] for n in names if n in given}

    return check


def feeds(model: onnx.ModelProto) -> Callable[[np.ndarray, Extra | None], dict[str, np.ndarray]]:
    """``feed(X, extra)``: the graph's inputs of the rows ``X`` and of ``extra``. One input, or a
    row input and extra inputs (:func:`graph_inputs`): ``X`` itself, and the extra inputs as
    :func:`check_extra` checks them. One input per column (a pipeline with string columns): column j
    of ``X`` (an object array, columns in the graph's input order) as input j, [N, 1], text as str
    objects, numbers in the input's dtype."""
    inputs = list(model.graph.input)
    row = graph_inputs(model)[0]
    check = check_extra(model)
    if row is not None:
        name = row

        def rows_and_extra(X: np.ndarray, extra: Extra | None = None) -> dict[str, np.ndarray]:
            return {name: X, **check(extra)}

        return rows_and_extra
    kinds = [(i.name, None if i.type.tensor_type.elem_type == onnx.TensorProto.STRING
              else onnx.helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type)) for i in inputs]

    def feed(X: np.ndarray, extra: Extra | None = None) -> dict[str, np.ndarray]:
        check(extra)
        out = {}
        for j, (name, dtype) in enumerate(kinds):
            col = X[:, j:j + 1]
            # (an empty text cell: "", which the encoders take as an unseen category)
            out[name] = np.vectorize(lambda v: "" if v is None else str(v), otypes=[object])(col) if dtype is None else col.astype(dtype)
        return out

    return feed
