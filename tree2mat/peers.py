"""The peer converters, for ``tree2mat bench`` and the benchmarks: ONNX ``ai.onnx.ml``
TreeEnsemble graphs from skl2onnx and onnxmltools (the ``bench`` extra), and Hummingbird's
standard-op graphs (when installed: it needs PyTorch); how each is called, and its outputs named
as tree2mat's. :func:`available` says whether a peer is installed."""

from __future__ import annotations

import importlib.util
import warnings
from typing import Any

import numpy as np
import onnx

from tree2mat.frontends import FRONTENDS, FrontendSpec, frontend_for
from tree2mat.runtimes import ort_session

#: Opsets asked of the peers. onnxmltools 1.16 takes one number and refuses more than 15 ("target_opset
#: 17 is higher than the number of the installed onnx package or the converter support (15)") and
#: a dict ("'>' not supported between instances of 'dict' and 'int'"); skl2onnx takes a dict.
ONNXMLTOOLS_OPSET = 15
SKL2ONNX_OPSET = {"": 17, "ai.onnx.ml": 3}


def one_line(exc: BaseException, limit: int = 300) -> str:
    """An exception as one line: its type and the first line of its message, cut at ``limit``."""
    text = f"{type(exc).__name__}: {str(exc).strip()}".splitlines()[0]
    return text if len(text) <= limit else text[:limit] + " ..."


def library_of(model: Any) -> str:
    return type(model).__module__.split(".")[0]


def _frontend(model: Any) -> FrontendSpec | None:
    """``model``'s frontend, or None for a model no frontend handles."""
    return next((spec for spec in FRONTENDS.values() if spec.handles(model)), None)


def peer_for(model: Any) -> str | None:
    """The converter that makes a TreeEnsemble graph of ``model`` (its frontend's ``peer``:
    skl2onnx for scikit-learn, onnxmltools for XGBoost and LightGBM); None for anything else."""
    spec = _frontend(model)
    return None if spec is None else spec.peer


def own_export(model: Any) -> Any:
    """The ``peer_convert`` of ``model``'s frontend (its library's own ONNX export, e.g.
    CatBoost's), or None: its peer is a converter of its own (skl2onnx, onnxmltools)."""
    spec = _frontend(model)
    return None if spec is None else spec.peer_convert


def available(peer: str) -> bool:
    return importlib.util.find_spec(peer) is not None


def convert(model: Any, n_features: int, peer: str | None = None) -> tuple[onnx.ModelProto, dict[str, Any]]:
    """The peer's ONNX graph (one float32 input [None, n_features]: ``input``, or as a library's
    own export names it) and the exact call that made it: a library's own export where its
    frontend has one (:func:`own_export`), skl2onnx, or the onnxmltools function its frontend's
    ``peer_call`` names."""
    own = own_export(model)
    if own is not None:
        return own(model, n_features)
    peer = peer or peer_for(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if peer == "skl2onnx":
            return _skl2onnx_convert(model, n_features)
        return _onnxmltools_convert(model, n_features)


def _onnxmltools_convert(model: Any, n_features: int) -> tuple[onnx.ModelProto, dict[str, Any]]:
    import onnxmltools
    from onnxmltools.convert.common.data_types import FloatTensorType

    spec = frontend_for(model)
    types = [("input", FloatTensorType([None, n_features]))]
    typed = f"model, initial_types=[('input', FloatTensorType([None, {n_features}]))], target_opset={ONNXMLTOOLS_OPSET}"
    zipmap = {"zipmap": False} if spec.peer_zipmap and hasattr(model, "predict_proba") else {}
    onx = getattr(onnxmltools, spec.peer_call)(model, initial_types=types, target_opset=ONNXMLTOOLS_OPSET, **zipmap)
    call = f"onnxmltools.{spec.peer_call}({typed}{', zipmap=False' if zipmap else ''})"
    return onx, {"call": call, "opset_import": {o.domain or "ai.onnx": o.version for o in onx.opset_import}}


def _skl2onnx_convert(model: Any, n_features: int) -> tuple[onnx.ModelProto, dict[str, Any]]:
    """skl2onnx's graph. skl2onnx 1.20 with onnx >= 1.23 refuses HistGradientBoosting models: its
    tree attributes mix ints with the bool ``False`` of leaves, which onnx no longer casts
    ("Field onnx.AttributeProto.ints: Expected an int, got a boolean"). Then the conversion is
    retried with that flag cast to int (no other change), and the first error is recorded."""
    from skl2onnx import convert_sklearn
    from skl2onnx.common import tree_ensemble
    from skl2onnx.common.data_types import FloatTensorType

    options = {"zipmap": False} if hasattr(model, "predict_proba") else {}
    types = [("input", FloatTensorType([None, n_features]))]
    how: dict[str, Any] = {
        "call": f"skl2onnx.convert_sklearn(model, initial_types=[('input', FloatTensorType([None, {n_features}]))], "
                f"options={options}, target_opset={SKL2ONNX_OPSET})",
    }
    try:
        onx = convert_sklearn(model, initial_types=types, options=options, target_opset=SKL2ONNX_OPSET)
    except ValueError as exc:
        cause = exc.__cause__
        if not (isinstance(cause, TypeError) and "got a boolean" in str(cause)):
            raise
        how["refused_as_installed"] = one_line(cause)
        how["shim"] = "skl2onnx.common.tree_ensemble.add_node called with int(nodes_missing_value_tracks_true)"
        original = tree_ensemble.add_node

        def add_node(*args: Any, **kwargs: Any) -> Any:
            if "nodes_missing_value_tracks_true" in kwargs:
                kwargs["nodes_missing_value_tracks_true"] = int(kwargs["nodes_missing_value_tracks_true"])
            return original(*args, **kwargs)

        tree_ensemble.add_node = add_node
        try:
            onx = convert_sklearn(model, initial_types=types, options=options, target_opset=SKL2ONNX_OPSET)
        finally:
            tree_ensemble.add_node = original
    how["opset_import"] = {o.domain or "ai.onnx": o.version for o in onx.opset_import}
    return onx, how


#: Hummingbird's tree strategies (``extra_config={"tree_implementation": ...}``).
HUMMINGBIRD_STRATEGIES = ("gemm", "tree_trav", "perf_tree_trav")


def hummingbird_convert(model: Any, X: np.ndarray, strategy: str) -> onnx.ModelProto:
    """Hummingbird's ONNX graph of ``model`` with one tree strategy, traced on rows ``X``.

    Hummingbird 0.4 exports through ``torch.onnx.export``; since PyTorch 2.9 that defaults to the
    ``torch.export`` exporter, which fails on Hummingbird's models (TorchExportError), so the call
    is made with ``dynamo=False`` (PyTorch's TorchScript exporter, what Hummingbird was written
    for). Nothing else is changed."""
    import torch
    from hummingbird.ml import convert as hb_convert

    original = torch.onnx.export

    def export(*args: Any, **kwargs: Any) -> Any:
        return original(*args, **{**kwargs, "dynamo": False})

    torch.onnx.export = export
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return hb_convert(model, "onnx", X, extra_config={"tree_implementation": strategy}).model
    finally:
        torch.onnx.export = original


def session(onx: onnx.ModelProto, threads: int | None = None, device: str = "cpu", arena: bool = True) -> Any:
    """An onnxruntime session of a graph on ``device`` (``cuda``: the CUDA provider first, the CPU
    for what it leaves, which :func:`tree2mat.runtimes.cuda_cpu_nodes` names), ``threads``
    intra-op threads (None: onnxruntime's default), warnings silenced (onnxmltools declares the
    label [1], which gives one per run). ``arena=False``: no CPU memory arena, so memory goes
    back when a run ends (to measure it)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.enable_cpu_mem_arena = arena
    if threads:
        opts.intra_op_num_threads = threads
    return ort_session(onx, opts, device)


def outputs(sess: Any, X: np.ndarray, classifier: bool) -> dict[str, np.ndarray]:
    """Run a peer graph; its outputs named as tree2mat's: ``label`` and ``probabilities`` for a
    classifier (a ZipMap's dicts back to a matrix), else ``variable`` [N, K]."""
    outs = sess.run(None, {sess.get_inputs()[0].name: X})
    if classifier:
        label, probs = outs[0], outs[1]
        if isinstance(probs, list):
            probs = np.asarray([[d[k] for k in sorted(d)] for d in probs])
        return {"label": np.asarray(label).ravel(), "probabilities": np.asarray(probs, np.float64)}
    return {"variable": np.asarray(outs[0], np.float64).reshape(X.shape[0], -1)}
