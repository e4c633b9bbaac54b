"""``load`` / ``convert`` / ``save``: parse -> validate -> lower -> emit, as a pipeline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx

from tree2mat import frontends
from tree2mat._files import atomic_write, atomic_write_files
from tree2mat.errors import OptionError
from tree2mat.forms._layout import LEAF_TENSOR
from tree2mat.forms import AUTO, DEFAULT_FORM, DEFAULT_OPSET, FORMS, MIN_OPSET, GraphOptions, auto
from tree2mat.ir.core import Ensemble

DTYPES = {"float32": np.dtype(np.float32), "float64": np.dtype(np.float64)}

#: A graph whose constants pass this many bytes cannot be one protobuf message (2 GiB limit): it
#: is written with its constants in a side file (ONNX external data, ``<file>.data``).
EXTERNAL_DATA_BYTES = 2**31 - 2**26
EXTERNAL_DATA_SUFFIX = ".data"


def needs_external_data(model: onnx.ModelProto) -> bool:
    return sum(t.ByteSize() for t in model.graph.initializer) > EXTERNAL_DATA_BYTES


def load(model_or_path: Any) -> Ensemble:
    """The validated IR of a fitted model object or a model file."""
    return frontends.to_ensemble(frontends.resolve(model_or_path))


def graph_options(
    dtype: str = "float32", opset: int = DEFAULT_OPSET, raw: bool = False, leaves: bool = False,
    form: str = "sign", temperature: float | None = None, matmul: str = "float32",
) -> GraphOptions:
    if form not in FORMS:
        raise OptionError(f"unknown form {form!r}; choose one of {AUTO}, {', '.join(FORMS)}")
    spec = FORMS[form]
    if temperature is not None:
        if spec.exact:
            raise OptionError(f"--temperature applies to the soft forms ({', '.join(n for n, f in FORMS.items() if not f.exact)}), not to the exact form {form}")
        if not (np.isfinite(temperature) and temperature > 0):
            raise OptionError(f"--temperature must be a finite number > 0, got {temperature}")
    if matmul not in spec.matmul:
        which = ", ".join(n for n, f in FORMS.items() if len(f.matmul) > 1)
        raise OptionError(
            f"--matmul {matmul} is not available for the form {form}; it takes {', '.join(spec.matmul)}"
            f" (reduced precision: the forms {which})"
        )
    if dtype not in DTYPES:
        raise OptionError(f"dtype {dtype!r} is not supported; choose one of {', '.join(DTYPES)}")
    if not MIN_OPSET <= opset <= DEFAULT_OPSET:
        raise OptionError(
            f"opset {opset} is not supported; choose {MIN_OPSET} to {DEFAULT_OPSET} "
            "(the newest the pinned onnxruntime runs)"
        )
    return GraphOptions(dtype=DTYPES[dtype], opset=opset, raw=raw, leaves=leaves, temperature=temperature, matmul=matmul)


def convert(
    model_or_path: Any,
    form: str = DEFAULT_FORM,
    *,
    dtype: str = "float32",
    opset: int = DEFAULT_OPSET,
    raw: bool = False,
    leaves: bool = False,
    temperature: float | None = None,
    matmul: str = "float32",
    max_memory: int = auto.DEFAULT_MAX_MEMORY,
) -> onnx.ModelProto:
    """Convert a fitted tree model (object, file path or ``Ensemble``) to an ONNX model.

    ``form``: one of ``FORMS``, or ``auto`` (the default): the fastest exact form whose constants
    and intermediates for 10 000 rows fit ``max_memory`` bytes (the graph's metadata
    ``tree2mat.form`` and ``tree2mat.auto`` say which and why). ``temperature``: soft forms
    only (default 1, in input-feature units). ``matmul``: the path-matching MatMul's element type (float32, or float16 / int8 for
    the sign and bitvector forms; exact in every case).

    >>> from sklearn.datasets import load_iris
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> onx = convert(RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y))
    >>> [o.name for o in onx.graph.output]
    ['label', 'probabilities']
    """
    reason = None
    if form == AUTO:
        if temperature is not None or matmul != "float32":
            raise OptionError("--temperature and --matmul need an explicit --form (auto picks an exact float32 form)")
        if not max_memory > 0:
            raise OptionError(f"--max-memory must be positive, got {max_memory}")
        graph_options(dtype, opset, raw, leaves)  # options checked before the model is read
        ens = load(model_or_path)
        choice = auto.choose(ens, max_memory)
        form, reason = choice.form, choice.reason
        opts = graph_options(dtype, opset, raw, leaves, form)
    else:
        opts = graph_options(dtype, opset, raw, leaves, form, temperature, matmul)
        ens = load(model_or_path)
    model = FORMS[form].build(ens, opts)
    _stamp(model, ens, form, opts, reason)
    if not needs_external_data(model):  # (too large for an in-memory check: save checks the file)
        onnx.checker.check_model(model, full_check=True)
    return model


def _stamp(model: onnx.ModelProto, ens: Ensemble, form: str, opts: GraphOptions, auto_reason: str | None) -> None:
    meta = {
        "tree2mat.form": form,
        "tree2mat.source": ens.source,
        "tree2mat.n_trees": str(ens.n_trees),
        "tree2mat.n_features": str(ens.n_features),
        "tree2mat.raw": str(int(opts.raw)),
        "tree2mat.exact": str(int(FORMS[form].exact)),
    }
    if FORMS[form].exact:
        meta["tree2mat.leaf_tensor"] = LEAF_TENSOR
    if opts.matmul != "float32":
        meta["tree2mat.matmul"] = opts.matmul
    if auto_reason is not None:
        meta["tree2mat.auto"] = auto_reason
    for key in sorted(meta):
        entry = model.metadata_props.add()
        entry.key, entry.value = key, meta[key]


def save(model: onnx.ModelProto, path: str | Path) -> int:
    """Write ``model`` atomically (temporary file in the target folder, then rename); an existing
    file is replaced only on success. Returns the number of bytes written.

    A graph over the protobuf limit (:func:`needs_external_data`) is written as ONNX external
    data: ``path`` holds the graph, ``path + ".data"`` its constants (keep them side by side;
    onnxruntime and ``onnx.load`` find the data by that name); the written file is checked with
    ``onnx.checker`` (full check) before it replaces anything."""
    if not needs_external_data(model):
        return atomic_write(path, model.SerializeToString())
    return atomic_write_files(path, lambda tmp: write_external(model, tmp), (EXTERNAL_DATA_SUFFIX,))


def write_external(model: onnx.ModelProto, path: Path) -> None:
    """Write ``model`` to ``path`` with its constants in ``path.data``, check the file, and
    leave ``model`` as it was (onnx moves the constants out of the message while writing)."""
    onnx.save_model(
        model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
        location=path.name + EXTERNAL_DATA_SUFFIX, size_threshold=1024,
    )
    try:
        onnx.checker.check_model(str(path), full_check=True)
    finally:
        onnx.load_external_data_for_model(model, str(path.parent))
        for tensor in model.graph.initializer:  # back to the message it was, byte for byte
            tensor.ClearField("data_location")
