"""A CatBoost JSON document's fields read one at a time, each refused with one line naming the
model and what is wrong (``ModelFileError``: a damaged or hand-edited document)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tree2mat.errors import ModelFileError

_ILL = "ill-formed CatBoost model"


def _ill(where: str, what: str) -> ModelFileError:
    return ModelFileError(f"{where}: {_ILL}: {what}")


def _field(obj: Any, key: str, where: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise _ill(where, f"need {key}")
    return obj[key]


def _number(value: Any, key: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _ill(where, f"{key} must be a number")
    return float(value)


def _float32(value: Any, key: str, where: str) -> float:
    """A border as CatBoost holds it: the float32 nearest the document's number (not NaN, and
    within float32's range unless infinite in the document)."""
    x = _number(value, key, where)
    with np.errstate(over="ignore"):
        f = np.float32(x)
    if math.isnan(x) or (np.isinf(f) and not math.isinf(x)):
        raise _ill(where, f"{key} {x!r} is no float32 border")
    return float(f)


def _values(value: Any, key: str, where: str) -> np.ndarray:
    """Leaf values (finite numbers), float64, flat."""
    values = value if isinstance(value, list) else [value]
    out = np.asarray([_number(v, key, where) for v in values], np.float64)
    if not np.all(np.isfinite(out)):
        raise _ill(where, f"{key} must be finite")
    return out
