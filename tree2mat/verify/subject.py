"""The subject of a check: the model a graph is compared with, resolved once from a model
object or a file path (:func:`load_subject`), for ``verify`` and ``bench`` alike."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tree2mat import attention, frontends, pipelines
from tree2mat.errors import DataError, Tree2MatError, is_missing, missing
from tree2mat.forms import auto
from tree2mat.frontends._support import labelled_frame
from tree2mat.frontends.sklearn import is_pipeline
from tree2mat.ir import evaluate, limits
from tree2mat.ir.core import Ensemble


@dataclass(frozen=True)
class Subject:
    """A model and what a check needs of it."""

    #: The file path, or the model object's type name.
    name: str
    #: The model object: the file's (an ``Ensemble`` for tree2mat's IR and native model files),
    #: or a pipeline's last step.
    model: Any
    #: Its validated IR.
    ens: Ensemble
    #: The scikit-learn ``Pipeline`` whose last step is ``model``, or None.
    pipeline: Any
    #: The library's own model, whose outputs are the reference: ``model`` itself, or for a
    #: native model file the library's object (:func:`tree2mat.frontends.library_model`); None
    #: where there is none (tree2mat's IR, the library not installed). An attention forest
    #: (:class:`tree2mat.attention.AttentionForest`) is its own reference.
    library: Any
    #: The features of a row as the subject takes it (the pipeline's, else the trees').
    n_features: int

    def expected(self, X: np.ndarray, raw: bool, names: dict[int, np.ndarray] | None = None) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """The outputs the graph must reproduce on ``X``, and the rows as the trees take them
        (see :func:`_expected`)."""
        return _expected(self.ens if self.library is None else self.library, self.ens, X, raw, self.pipeline, names)


def load_subject(model_or_path: Any, *, accept_pipeline: bool = True, synthesized: bool = False) -> Subject:
    """The :class:`Subject` of a model object or file path; an error about a file's content
    names the file. ``accept_pipeline``: a scikit-learn ``Pipeline`` is checked as a whole
    (else it is refused as any model tree2mat does not read). ``synthesized``: the rows will be
    synthesized, which a pipeline refuses (they sit on its trees' thresholds, not on its inputs)."""
    name = str(model_or_path) if isinstance(model_or_path, (str, Path)) else type(model_or_path).__name__
    with limits.checking(auto.reading_check()):
        model = frontends.load_object(model_or_path)
    forest = attention.as_forest(model)
    if forest is not None:  # the model in numpy is the reference
        return Subject(name, forest, forest.ensemble, None, forest, forest.ensemble.n_features)
    pipeline = model if accept_pipeline and is_pipeline(model) else None
    if pipeline is not None:
        model = pipelines.final_step(pipeline)
        if synthesized:
            raise DataError(
                f"{name}: a pipeline is verified on rows you give (--data, as the pipeline takes them): "
                "tree2mat synthesizes threshold rows for a tree model, not through preprocessing"
            )
    ens = frontends.named(model_or_path, frontends.to_ensemble, model)
    n_features = pipelines.n_features(pipeline) if pipeline is not None else ens.n_features
    library = frontends.library_model(model_or_path, ens) if isinstance(model, Ensemble) else model
    return Subject(name, model, ens, pipeline, library, n_features)


def _expected(model: Any, ens: Ensemble, X: np.ndarray, raw: bool, pipeline: Any = None, names: dict[int, np.ndarray] | None = None) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The outputs the graph must reproduce on ``X`` (the library's own, or the reference
    evaluator's when there is no library model), and the rows as the trees take them.
    ``pipeline``: the pipeline whose last step is ``model``; its other steps transform ``X``
    first (scikit-learn's own transform: the rows its trees see)."""
    if isinstance(model, Ensemble):
        return evaluate.predict(ens, X, raw=raw), X
    if isinstance(model, attention.AttentionForest):
        if model.is_classifier:
            return {"label": model.predict(X), "probabilities": model.predict_proba(X)}, X
        return {"variable": model.predict(X)[:, None]}, X
    # Rows at +-max float32 overflow sklearn's finiteness pre-check (a sum); it then checks
    # element by element and accepts them, so its float warnings say nothing here.
    try:
        with np.errstate(over="ignore", invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # e.g. "X does not have valid feature names"
            if pipeline is not None and len(pipeline.steps) > 1:
                X = pipeline[:-1].transform(pipelines.as_fitted(pipeline, X))
            if pipeline is None and ens.category_labels and names:  # the library reads the names itself
                out = frontends.frontend_for(model).reference_outputs(model, labelled_frame(ens, X, names), raw, ens)
                return out, X
            out = frontends.frontend_for(model).reference_outputs(model, X, raw, ens)
            return out, np.asarray(X.toarray() if hasattr(X, "toarray") else X)  # (sparse from a one-hot encoder)
    except Tree2MatError:  # (pandas missing for a frame of named categories: the extra, not the rows)
        raise
    except Exception as exc:  # the library refuses the rows (inf, NaN where unsupported, ...)
        if (module := is_missing(exc)) is not None:  # the library's own import of an optional module
            raise missing(f"{type(model).__name__}'s predictions", module) from exc
        reason = str(exc).split("Stack trace:")[0].strip()  # (XGBoost's errors carry a native stack trace)
        raise DataError(f"the model itself rejects the data: {type(exc).__name__}: {reason}") from exc
