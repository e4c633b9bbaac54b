"""What the frontends share: a row of the README's support table (see tree2mat.support), class
labels as the IR takes them, and rows with named categories as the libraries take them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tree2mat.errors import UnsupportedModelError, require
from tree2mat.ir.core import Ensemble, named_codes


@dataclass(frozen=True)
class SupportRow:
    task: str
    missing: str
    notes: str = ""


def normalize_classes(classes: Any, what: str) -> np.ndarray:
    """Class labels as int64 or str; other label types are refused."""
    arr = np.asarray(classes)
    if arr.dtype.kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max:
        raise UnsupportedModelError(f"{what}: class label {arr.max()} does not fit int64 labels")
    if arr.dtype.kind in "iub":
        return arr.astype(np.int64)
    if arr.dtype.kind == "f":
        if np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            return arr.astype(np.int64)
        raise UnsupportedModelError(f"{what}: non-integer float class labels {arr[:5].tolist()} are not supported")
    if arr.dtype.kind in "U":
        return arr
    if arr.dtype == object:
        if all(isinstance(v, str) for v in arr):
            return arr.astype(str)
        if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in arr):
            return arr.astype(np.int64)
    raise UnsupportedModelError(f"{what}: class labels of type {arr.dtype} are not supported (use int or str)")


def labelled_frame(ens: Ensemble, X: np.ndarray, names: dict[int, np.ndarray] | None = None) -> Any:
    """``X`` as the DataFrame the model was fitted on: columns named by the model's feature
    names, each column with named categories a pandas ``Categorical``: of the cells as the user's
    file holds them (``names``; its categories the model's, then the names it never saw, so that
    the library, not tree2mat, decides what they are), else of the codes in ``X`` (code ``c``
    names ``labels[c]``, codes taken as the model takes them; any other value, NaN)."""
    pd = require("pandas", "a model with named categories (its library reads them from a DataFrame)")

    columns = list(ens.feature_names) if ens.feature_names else [f"f{j}" for j in range(ens.n_features)]
    frame = pd.DataFrame(X, columns=columns)
    for j, labels in ens.category_labels:
        if names and j in names:  # the cells as they are: each library decides what an unseen name is
            cells = _as_labels(names[j], labels)
            known = set(labels)
            unseen = [v for v in dict.fromkeys(cells) if v is not None and v == v and v not in known]  # (v == v: not NaN)
            frame[columns[j]] = pd.Categorical(cells, categories=list(labels) + unseen)
            continue
        codes, named = named_codes(X[:, j], ens.category_codes, len(labels))
        codes = np.where(named, codes, -1).astype(np.int64)
        frame[columns[j]] = pd.Categorical.from_codes(codes, categories=list(labels))
    return frame


def _as_labels(cells: np.ndarray, labels: tuple[Any, ...]) -> list[Any]:
    """Cells of a file as values of the labels' type: numbers where the labels are numbers
    (a CSV holds "2", the category is 2), as they are otherwise."""
    if all(isinstance(v, str) for v in labels):
        return list(cells)

    integers = all(isinstance(v, int) for v in labels)

    def number(v: Any) -> Any:
        try:
            x = float(v)
        except (TypeError, ValueError):
            return v
        return int(x) if integers and x.is_integer() else x

    return [number(v) for v in cells]
