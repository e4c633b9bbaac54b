"""What the frontends share: a row of the README's support table (see tree2mat.support), and
class labels as the IR takes them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tree2mat.errors import UnsupportedModelError


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
