"""``load`` / ``convert`` / ``save``: parse -> validate -> lower -> emit, as a pipeline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx

from tree2mat import frontends
from tree2mat._files import atomic_write
from tree2mat.errors import OptionError
from tree2mat.forms._layout import LEAF_TENSOR
from tree2mat.forms import DEFAULT_FORM, DEFAULT_OPSET, FORMS, MIN_OPSET, GraphOptions
from tree2mat.ir.core import Ensemble

DTYPES = {"float32": np.dtype(np.float32), "float64": np.dtype(np.float64)}


def load(model_or_path: Any) -> Ensemble:
    """The validated IR of a fitted model object or a model file."""
    return frontends.to_ensemble(frontends.resolve(model_or_path))


def graph_options(dtype: str = "float32", opset: int = DEFAULT_OPSET, raw: bool = False, leaves: bool = False) -> GraphOptions:
    if dtype not in DTYPES:
        raise OptionError(f"dtype {dtype!r} is not supported; choose one of {', '.join(DTYPES)}")
    if not MIN_OPSET <= opset <= DEFAULT_OPSET:
        raise OptionError(
            f"opset {opset} is not supported; choose {MIN_OPSET} to {DEFAULT_OPSET} "
            "(the newest the pinned onnxruntime runs)"
        )
    return GraphOptions(dtype=DTYPES[dtype], opset=opset, raw=raw, leaves=leaves)


def convert(
    model_or_path: Any,
    form: str = DEFAULT_FORM,
    *,
    dtype: str = "float32",
    opset: int = DEFAULT_OPSET,
    raw: bool = False,
    leaves: bool = False,
) -> onnx.ModelProto:
    """Convert a fitted tree model (object, file path or ``Ensemble``) to an ONNX model.

    >>> from sklearn.datasets import load_iris
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> onx = convert(RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y))
    >>> [o.name for o in onx.graph.output]
    ['label', 'probabilities']
    """
    if form not in FORMS:
        raise OptionError(f"unknown form {form!r}; choose one of {', '.join(FORMS)}")
    opts = graph_options(dtype, opset, raw, leaves)
    ens = load(model_or_path)
    model = FORMS[form].build(ens, opts)
    _stamp(model, ens, form, opts)
    onnx.checker.check_model(model, full_check=True)
    return model


def _stamp(model: onnx.ModelProto, ens: Ensemble, form: str, opts: GraphOptions) -> None:
    meta = {
        "tree2mat.form": form,
        "tree2mat.source": ens.source,
        "tree2mat.n_trees": str(ens.n_trees),
        "tree2mat.n_features": str(ens.n_features),
        "tree2mat.leaf_tensor": LEAF_TENSOR,
        "tree2mat.raw": str(int(opts.raw)),
    }
    for key in sorted(meta):
        entry = model.metadata_props.add()
        entry.key, entry.value = key, meta[key]


def save(model: onnx.ModelProto, path: str | Path) -> int:
    """Write ``model`` atomically (temporary file in the target folder, then rename); an existing
    file is replaced only on success. Returns the number of bytes written."""
    return atomic_write(path, model.SerializeToString())
