"""What a frontend is to the rest of tree2mat: :class:`FrontendSpec` (and the :class:`FileFormat`
of each native file it reads). Each frontend's module ends in its spec; ``tree2mat.frontends.
FRONTENDS`` lists them, and loading, verify, pipelines, bench and the README's support table read
the specs, never a library's name."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tree2mat.frontends._support import SupportRow
from tree2mat.ir.core import Ensemble

#: Bytes of a file's start a format is recognised by (:attr:`FileFormat.sniff`).
HEAD_BYTES = 4 + 136 + 8 + 64 + 8 + 8


@dataclass(frozen=True)
class FileFormat:
    """A native model file a frontend reads, under its usual names or any other."""

    #: As messages name it ("LightGBM model text").
    name: str
    #: Its usual file name endings, lower case (a file so named is read as this format).
    suffixes: tuple[str, ...] = ()
    #: Whether a file's first HEAD_BYTES bytes are this format (a file under another name).
    sniff: Callable[[bytes], bool] | None = None
    #: The model object (or an ``Ensemble``) of a file of this format; it may refuse the file.
    load: Callable[[Path], Any] | None = None
    #: For formats that are JSON / UBJSON documents: the model of a decoded document, or None
    #: when the document is not this format's.
    document: Callable[[Any, str], Any] | None = None
    #: Document formats: what a document of this format is ("an XGBoost model") and the key it
    #: must have ("learner"), for the message about a document that is no format's.
    expects: str = ""
    key: str = ""


@dataclass(frozen=True)
class FrontendSpec:
    """A frontend, whole."""

    name: str
    #: The library, as messages and the support table name it.
    library: str
    #: Whether a model object is this library's.
    handles: Callable[[Any], bool]
    #: A model object of the library to the validated IR.
    to_ensemble: Callable[[Any], Ensemble]
    #: ``reference_outputs(model, X, raw, ens)``: the library's own predictions, named as the
    #: graph's outputs (what verify compares with).
    reference_outputs: Callable[[Any, np.ndarray, bool, Ensemble], dict[str, np.ndarray]]
    #: The support table's rows: estimator name -> what is supported.
    estimators: Mapping[str, SupportRow]
    #: ``reference_leaves(model, X, ens)``: the library's own leaf of each row of ``X`` in each
    #: tree, numbered as the IR's ``leaf_source_id`` numbers it, [N, trees] in the IR's tree
    #: order (what verify checks the graph's routing with); None where the library gives none
    #: for this model (then verify walks the IR with tree2mat's reference evaluator).
    reference_leaves: Callable[[Any, np.ndarray, Ensemble], np.ndarray | None] | None = None
    #: Native model files it reads (tree2mat parses them itself, without the library).
    formats: tuple[FileFormat, ...] = ()
    #: ``native_model(path, ens)``: the library's own object from a native file tree2mat read as
    #: ``ens``, for verify and bench to compare with (None when the library is not installed, or
    #: the file is not its own, e.g. a tree2mat IR file naming the library as its source).
    native_model: Callable[[Path, Ensemble], Any] | None = None
    #: Estimators a scikit-learn Pipeline may end in (skl2onnx gets tree2mat's converter for
    #: each): module -> class names.
    pipeline_steps: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: The converter users would pick instead (an ``ai.onnx.ml`` TreeEnsemble graph), which
    #: ``tree2mat bench`` times next to tree2mat: the name of its package (tree2mat.peers
    #: knows how to call it).
    peer: str | None = None
    #: ``peer_convert(model, n_features)``: the peer's graph (one float32 input [N, F], named as
    #: the peer names it) and how it was called, for a peer that is the library's own export
    #: (CatBoost's); None: tree2mat.peers calls the converter ``peer`` names.
    peer_convert: Callable[[Any, int], tuple[Any, dict[str, Any]]] | None = None
    #: The function of the ``peer`` package that converts a model (``convert_lightgbm``), called
    #: with the graph's input type and the peer's opset (tree2mat.peers).
    peer_call: str = ""
    #: Whether ``peer_call`` takes ``zipmap``: tree2mat passes ``zipmap=False`` for classifiers,
    #: so that probabilities come as a matrix.
    peer_zipmap: bool = False
    #: Whether a model object is a pipeline of this library, which convert and verify take whole
    #: (tree2mat.pipelines); ``to_ensemble`` refuses it.
    is_pipeline: Callable[[Any], bool] | None = None
