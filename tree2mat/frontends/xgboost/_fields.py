"""Typed values read from an XGBoost model document: a field that must be there, arrays of
float32 numbers or of integers, declared counts, the base score; each refused by name
(ModelFileError) where the document does not hold what XGBoost writes."""

from __future__ import annotations

from typing import Any

import numpy as np

from tree2mat.errors import ModelFileError

F32 = np.dtype(np.float32)


def _field(obj: Any, key: str, where: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise ModelFileError(f"{where}: ill-formed XGBoost model: need {key}")
    return obj[key]


def _float32s(value: Any, key: str, where: str) -> np.ndarray:
    """An array of float32 numbers from the document; one beyond float32's range (XGBoost
    writes float32 numbers: only a damaged file has one) is an error, not inf."""
    try:
        wide = np.asarray(value, np.float64)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ModelFileError(f"{where}: ill-formed XGBoost model: {key}: {exc}") from exc
    with np.errstate(over="ignore"):
        out = wide.astype(F32)
    if np.any(np.isinf(out) & ~np.isinf(wide)):
        raise ModelFileError(f"{where}: ill-formed XGBoost model: {key} holds a number beyond float32's range")
    return out


def _int64s(value: Any, key: str, where: str) -> np.ndarray:
    """An array of integers from the document; a fraction or a string is an error, not cut."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "iub" or arr.dtype == object:
        raise ModelFileError(f"{where}: ill-formed XGBoost model: {key} must hold integers")
    try:
        return arr.astype(np.int64)
    except OverflowError as exc:
        raise ModelFileError(f"{where}: ill-formed XGBoost model: {key}: {exc}") from exc


def _count(value: Any, key: str, where: str) -> int:
    """A count the document declares (XGBoost writes them as decimal text: ``"11"``)."""
    try:
        number = float(value) if isinstance(value, str) else value
        if isinstance(number, bool) or not isinstance(number, (int, float)) or number != int(number):
            raise ValueError(f"{value!r} is no integer")
        return int(number)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ModelFileError(f"{where}: ill-formed XGBoost model: {key}: {exc}") from exc


def _floats(text: Any, where: str) -> np.ndarray:
    """``"5E-1"`` or ``"[5E-1,2E0]"`` (how XGBoost writes base_score) as float32."""
    if not isinstance(text, str):
        raise ModelFileError(f"{where}: ill-formed XGBoost model: base_score must be a string")
    try:
        values = [float(v) for v in text.strip("[]").split(",") if v.strip()]
    except ValueError as exc:
        raise ModelFileError(f"{where}: ill-formed XGBoost model: base_score {text!r}") from exc
    return _float32s(values, "base_score", where)
