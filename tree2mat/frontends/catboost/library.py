"""What goes through catboost itself: its model objects (their JSON export, read by ``document``;
their own predictions for ``verify``; their own ONNX export for ``bench``) and its binary
``.cbm`` files, which CatBoost loads first in a process of its own."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from tree2mat.errors import ModelFileError, UnsupportedModelError, missing
from tree2mat.frontends.catboost.document import from_document
from tree2mat.frontends.loading import JSON, file_kind, read_document, read_head
from tree2mat.ir.core import Ensemble, Link, Task

WRAPPERS = ("CatBoostClassifier", "CatBoostRegressor", "CatBoostRanker", "CatBoost")


def handles(model: Any) -> bool:
    return type(model).__module__.split(".")[0] == "catboost"


def model_json(model: Any) -> dict:
    """The JSON document of a fitted CatBoost model object (written by CatBoost itself)."""
    with tempfile.TemporaryDirectory(prefix="tree2mat-catboost-") as tmp:
        path = Path(tmp) / "model.json"
        try:
            with _native_stderr_silenced():
                model.save_model(str(path), format="json")
        except Exception as exc:  # CatBoostError: not fitted, or a model JSON cannot hold
            raise UnsupportedModelError(f"catboost {type(model).__name__}: cannot export it as JSON: {exc}") from exc
        return json.loads(path.read_text(encoding="utf-8"))


def to_ensemble(model: Any) -> Ensemble:
    name = type(model).__name__
    if name not in WRAPPERS:
        raise UnsupportedModelError(f"catboost {name} is not supported; supported: {', '.join(WRAPPERS)}")
    if not model.is_fitted():
        raise UnsupportedModelError(f"catboost {name} is not fitted")
    return from_document(model_json(model), f"catboost {name}")


def reference_outputs(model: Any, X: np.ndarray, raw: bool, ens: Ensemble) -> dict[str, np.ndarray]:
    """CatBoost's own outputs under the graph's names (``ens``: the model's IR), asked for by
    prediction type, so a plain ``CatBoost`` object read from a file predicts as its wrapper."""
    n = X.shape[0]
    out: dict[str, np.ndarray] = {}

    # CatBoost's own predict (CatBoostRanker's takes no prediction type; its base class's does)
    base: Any = next(c for c in type(model).__mro__ if c.__name__ == "CatBoost")

    def predict(kind: str) -> np.ndarray:
        return np.asarray(base.predict(model, X, prediction_type=kind, thread_count=1))

    if raw:
        out["variable"] = predict("RawFormulaVal").reshape(n, -1)
    if ens.task is Task.CLASSIFICATION:
        label = predict("Class").reshape(n)
        out["label"] = label.astype(str) if ens.classes[0].dtype.kind == "U" else label.astype(np.int64)
        if not raw:
            out["probabilities"] = predict("Probability").reshape(n, -1)
    elif not raw:
        out["variable"] = predict("Exponent" if ens.link is Link.EXP else "RawFormulaVal").reshape(n, -1)
    return out


# ---------------------------------------------------------------------------------------- files


def is_cbm(head: bytes) -> bool:
    """Whether a file's first bytes are CatBoost's binary model (``CBM1``)."""
    return head.startswith(b"CBM1")


@contextlib.contextmanager
def _native_stderr_silenced() -> Iterator[None]:
    """CatBoost's C++ code writes warnings ("There are invalid params ...") straight to the
    process's stderr; while it loads or writes a model, they go nowhere (errors come back as
    exceptions, which tree2mat reports in one line)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _catboost() -> Any:
    try:
        import catboost
    except ImportError:
        return None
    return catboost


def load_cbm(path: Path) -> Any:
    """The CatBoost model object of a ``.cbm`` file (catboost needed)."""
    catboost = _catboost()
    if catboost is None:
        raise missing(
            f"{path}: reading CatBoost's binary .cbm", "catboost",
            "or export the model as JSON (save_model('model.json', format='json')), which tree2mat reads without it",
        )
    _check_in_a_process(path, "cbm")
    model = catboost.CatBoost()
    try:
        with _native_stderr_silenced():
            model.load_model(str(path), format="cbm")
    except Exception as exc:  # CatBoostError on a damaged file
        raise ModelFileError(f"{path}: not a readable CatBoost .cbm model: {exc}") from exc
    return model


#: Seconds CatBoost may take to load a file and write it as JSON in the checking process.
CHECK_TIMEOUT_S = 120


def _check_in_a_process(path: Path, fmt: str) -> None:
    """A ModelFileError unless CatBoost loads ``path`` and writes it as JSON in a process of its
    own: its loader can crash (a segmentation fault) or hang on a damaged file (measured on
    truncated and byte-flipped .cbm files), which must not take tree2mat with it."""
    import subprocess
    import sys

    code = (
        "import sys, tempfile, catboost\n"
        "m = catboost.CatBoost(); m.load_model(sys.argv[1], format=sys.argv[2])\n"
        "with tempfile.TemporaryDirectory() as d: m.save_model(d + '/m.json', format='json')\n"
    )
    try:
        done = subprocess.run([sys.executable, "-c", code, str(path), fmt], capture_output=True, text=True, timeout=CHECK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ModelFileError(f"{path}: not a readable CatBoost .{fmt} model: CatBoost did not finish reading it in {CHECK_TIMEOUT_S} s") from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        why = lines[-1][:300] if lines else f"CatBoost's loader crashed (signal {-done.returncode})" if done.returncode < 0 else "CatBoost failed"
        raise ModelFileError(f"{path}: not a readable CatBoost .{fmt} model: {why}")


def native_model(path: Path, ens: Ensemble) -> Any:
    """CatBoost's own model of a native file (None without catboost, or for a file CatBoost does
    not read: an IR document naming CatBoost as its source). A CatBoost JSON document CatBoost
    refuses is refused (ModelFileError, CatBoost's reason): verify would otherwise compare the
    graph with tree2mat's own reading of a file its library does not read at all."""
    if not ens.source.startswith("catboost"):
        return None
    catboost = _catboost()
    if catboost is None:
        return None
    fmt = "cbm" if is_cbm(read_head(path)) else "json" if file_kind(path) == JSON else None
    if fmt is None:
        return None
    if fmt == "json":  # (a .cbm was checked when it was read: load_cbm)
        try:
            _check_in_a_process(path, fmt)
        except ModelFileError:
            doc = read_document(path)
            if not (isinstance(doc, dict) and "features_info" in doc):  # an IR naming CatBoost as its source
                return None
            raise
    model = catboost.CatBoost()
    try:
        model.load_model(str(path), format=fmt)
    except Exception as exc:  # (CatBoostError; it loaded the file in the checking process)
        raise ModelFileError(f"{path}: CatBoost itself cannot load this model: {exc}") from exc
    return model


def onnx_export(model: Any, n_features: int) -> tuple[Any, dict[str, Any]]:
    """CatBoost's own ONNX export (``save_model(format="onnx")``: an ``ai.onnx.ml`` TreeEnsemble
    graph, input ``features``; symmetric trees only), for ``tree2mat bench``: the graph and the
    call that made it. Its regressors output the raw score (for Poisson and Tweedie, before exp)."""
    import onnx

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.onnx"
        model.save_model(str(path), format="onnx")
        onx = onnx.load(str(path))
    return onx, {"call": "model.save_model(path, format='onnx')", "opset_import": {o.domain or "ai.onnx": o.version for o in onx.opset_import}}
