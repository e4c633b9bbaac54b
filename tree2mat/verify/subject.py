"""The subject of a check: the model a graph is compared with, resolved once from a model
object or a file path (:func:`load_subject`), for ``verify`` and ``bench`` alike."""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tree2mat import attention, frontends, pipelines
from tree2mat.errors import DataError, Tree2MatError, is_missing, missing
from tree2mat.forms import auto
from tree2mat.frontends._support import labelled_frame
from tree2mat.ir import evaluate, limits
from tree2mat.ir.core import Ensemble

#: :meth:`Subject.leaves`' name for leaves it had from tree2mat's reference evaluator.
EVALUATOR = "tree2mat's reference evaluator"


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

    def leaves(self, X: np.ndarray, names: dict[int, np.ndarray] | None = None, library: bool = True) -> tuple[np.ndarray, str, str | None]:
        """The leaf (the IR's index) of each row of ``X`` (as the trees take them) in each tree,
        int64 [N, T]; whose they are; and why not the library's where its frontend gives them
        but they could not be used (else None). The library's own where it gives them
        (XGBoost's and LightGBM's ``pred_leaf``, scikit-learn's ``apply``; not asked for rows
        with category ``names``, nor with ``library`` False), else tree2mat's reference
        evaluator's walk of the IR. The library's are many times faster on big models, and they
        are the library's own routing."""
        own = self._library_leaves(X) if library and not names else None
        if isinstance(own, np.ndarray):
            return own, frontends.frontend_for(self.library).library, None
        return evaluate.apply(self.ens, X), EVALUATOR, own

    def _library_leaves(self, X: np.ndarray) -> np.ndarray | str | None:
        """:meth:`leaves` from the library; None where its frontend gives none for this model,
        and why not where it does but they cannot be used (the reference evaluator is asked
        instead)."""
        if self.library is None or isinstance(self.library, (Ensemble, attention.AttentionForest)):
            return None
        spec = frontends.frontend_for(self.library)
        if spec.reference_leaves is None:
            return None
        try:
            with np.errstate(over="ignore", invalid="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # (as in _expected)
                ids = spec.reference_leaves(self.library, X, self.ens)
        except Exception as exc:  # (a library version without the call: the evaluator is as good an oracle, only slower)
            return f"asking {spec.library} for them failed ({type(exc).__name__}: {str(exc)[:200]})"
        if ids is None:
            return None
        table = self._leaf_table
        if table is None:
            return "the model's trees as tree2mat read them do not carry the library's leaf numbers"
        if ids.shape != (X.shape[0], self.ens.n_trees):
            return f"{spec.library} gave leaves of shape {list(ids.shape)} for {X.shape[0]} rows of {self.ens.n_trees} trees"
        lookup, offsets, sizes = table
        leaves = np.empty(ids.shape, np.int64)
        step = max(1, 2**16 // max(ids.shape[1], 1))  # (rows at a time: the temporaries stay in cache)
        for r0 in range(0, ids.shape[0], step):
            part = ids[r0:r0 + step].astype(np.intp)
            if part.size and (part.min() < 0 or (part >= sizes).any()):
                leaves[:] = -1
                break
            part += offsets
            leaves[r0:r0 + step] = lookup[part]
        if leaves.size and leaves.min() < 0:
            return f"{spec.library} numbered a leaf that the model's trees as tree2mat read them do not have"
        return leaves

    @functools.cached_property
    def _leaf_table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The IR leaf of each of the library's leaf numbers, every tree's in one table
        (``lookup[offsets[t] + id]``, -1 where no leaf has the number; ``sizes[t]``: the numbers
        tree t's part holds); None where a tree has no ``leaf_source_id``."""
        ids = [t.leaf_source_id for t in self.ens.trees]
        if any(i is None or (i.size and i.min() < 0) or np.unique(i).size != i.size for i in ids):
            return None  # (a number that is no leaf, or two leaves', cannot say which leaf)
        sizes = np.asarray([int(i.max()) + 1 if i.size else 0 for i in ids], np.int64)  # type: ignore[union-attr]
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        lookup = np.full(int(sizes.sum()), -1, np.int64)
        for i, off in zip(ids, offsets):
            lookup[off + i] = np.arange(i.size)  # type: ignore[union-attr]
        return lookup, offsets, sizes


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
    pipeline = model if accept_pipeline and frontends.is_pipeline(model) else None
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


def _expected(
    model: Any, ens: Ensemble, X: np.ndarray, raw: bool, pipeline: Any = None, names: dict[int, np.ndarray] | None = None,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
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
