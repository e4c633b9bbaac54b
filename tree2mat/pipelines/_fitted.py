"""What a fitted pipeline says of itself: its width, its final tree step, the columns it was
fitted on and which of them its encoders take as text, and the steps tree2mat refuses."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from tree2mat.errors import UnsupportedModelError, require
from tree2mat.frontends.sklearn import describe_pipeline as describe
from tree2mat.pipelines._step import tree_estimators


def n_features(pipeline: Any) -> int:
    n = getattr(pipeline, "n_features_in_", None)
    if n is None:
        raise UnsupportedModelError(f"scikit-learn {describe(pipeline)} is not fitted (no n_features_in_)")
    return int(n)


def as_fitted(pipeline: Any, X: np.ndarray) -> Any:
    """Rows as the pipeline was fitted on them: a DataFrame with its column names when it was
    fitted on one (a ColumnTransformer may select columns by name), else ``X``."""
    names = getattr(pipeline, "feature_names_in_", None)
    if names is None:
        return X
    pd = require("pandas", "a pipeline fitted on a DataFrame")
    frame = pd.DataFrame(X, columns=list(names))
    if X.dtype == object:  # (rows of named columns, see ColumnRows: the numbers as numbers)
        text = set(text_columns(pipeline))
        frame = frame.astype({c: np.float64 for c in frame.columns if c not in text})
    return frame


def final_step(pipeline: Any) -> Any:
    """The last step, which must be a tree model tree2mat converts (the pipeline's predictions
    are its predictions, which ``verify`` compares with)."""
    step = pipeline.steps[-1][1]
    estimators = tree_estimators()
    supported = [name for names in estimators.values() for name in names]
    libraries = {module.split(".")[0] for module in estimators}
    if type(step).__name__ not in supported or type(step).__module__.split(".")[0] not in libraries:
        raise UnsupportedModelError(
            f"{describe(pipeline)} ends in {type(step).__name__}; tree2mat converts pipelines that end in a tree "
            f"model ({', '.join(supported)})"
        )
    return step


def text_columns(pipeline: Any) -> list[str]:
    """The columns of the DataFrame ``pipeline`` was fitted on that an encoder took as text (its
    categories are strings): each becomes a string input of the graph. A pipeline whose string
    categories cannot be traced to named DataFrame columns is refused, saying what would work."""
    names = getattr(pipeline, "feature_names_in_", None)
    out: list[str] = []
    for est in _estimators(pipeline):
        for _, step, cols in getattr(est, "transformers_", []):
            if isinstance(step, str):
                continue
            picked = [str(names[c]) if names is not None and not isinstance(c, str) else str(c)
                      for c in np.atleast_1d(np.asarray(cols, dtype=object))]
            for inner in _estimators(step):
                for k, cats in enumerate(getattr(inner, "categories_", []) or []):
                    if _is_text(cats) and k < len(picked) and picked[k] not in out:
                        out.append(picked[k])
    inside = {id(step) for est in _estimators(pipeline) for _, t, _ in getattr(est, "transformers_", [])
              if not isinstance(t, str) for step in _estimators(t)}
    stray = [est for est in _estimators(pipeline) if id(est) not in inside
             and any(_is_text(c) for c in getattr(est, "categories_", []) or [])]
    if stray or (out and names is None):
        what = type(stray[0]).__name__ if stray else "an encoder"
        raise UnsupportedModelError(
            f"{what} in {describe(pipeline)} encodes string categories of columns without names; tree2mat converts string "
            "columns picked by name in a ColumnTransformer of a pipeline fitted on a pandas DataFrame: refit it so"
        )
    return out


def _is_text(categories: Any) -> bool:
    return np.asarray(categories).dtype.kind in "OUS" and any(isinstance(c, str) for c in np.asarray(categories, dtype=object))


def _estimators(model: Any) -> Iterator[Any]:
    yield model
    for _, step in getattr(model, "steps", []):
        yield from _estimators(step)
    for _, step, _ in getattr(model, "transformers_", []):
        if not isinstance(step, str):
            yield from _estimators(step)


def _refuse_sparse_to_xgboost(pipeline: Any) -> None:
    """XGBoost reads the entries a sparse matrix leaves out as missing, not as 0; the graph's
    matrix is dense. Refuse when the step before it gives sparse rows."""
    if type(pipeline.steps[-1][1]).__module__.split(".")[0] != "xgboost" or len(pipeline.steps) < 2:
        return
    step = pipeline.steps[-2][1]
    while hasattr(step, "steps"):
        step = step.steps[-1][1]
    sparse = getattr(step, "sparse_output_", None)  # a fitted ColumnTransformer's choice
    if sparse is None and type(step).__name__ == "OneHotEncoder":
        sparse = getattr(step, "sparse_output", False)
    if sparse:
        raise UnsupportedModelError(
            f"{describe(pipeline)}: {type(step).__name__} gives XGBoost sparse rows, whose absent entries XGBoost "
            "treats as missing (not 0); refit with OneHotEncoder(sparse_output=False) or ColumnTransformer(sparse_threshold=0)"
        )


def _selects_by_name(model: Any) -> bool:
    return any(
        any(isinstance(c, str) for c in np.atleast_1d(np.asarray(cols, dtype=object)))
        for est in _estimators(model) for _, _, cols in getattr(est, "transformers_", [])
    )
