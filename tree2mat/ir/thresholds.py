"""Float thresholds per dtype — the one place where exactness of comparisons is decided.

The graph always tests ``x <= t_graph`` (go left) on ``x`` in its *compare dtype*; these functions
choose ``t_graph`` so that the test decides exactly as the source library does for every value of
that dtype (docs/exactness.md, rule 1). Round-to-nearest casts would be wrong: for a float64
threshold ``t`` between two float32 numbers, ``float32(t)`` may be above ``t``.
"""

from __future__ import annotations

import numpy as np

from tree2mat.ir.core import Comparison

FLOAT32 = np.dtype(np.float32)
FLOAT64 = np.dtype(np.float64)


def compare_dtype(source_dtype: np.dtype, graph_dtype: np.dtype) -> np.dtype:
    """The dtype the graph compares in: the source's when it casts inputs down (sklearn trees
    cast float64 input to float32 first), else the graph input's."""
    if np.dtype(source_dtype) == FLOAT32 or np.dtype(graph_dtype) == FLOAT32:
        return FLOAT32
    return FLOAT64


def largest_float32_at_most(t: np.ndarray) -> np.ndarray:
    """Elementwise the largest float32 ``<= t`` (``t`` float64); -inf when none is."""
    t = np.asarray(t, np.float64)
    with np.errstate(over="ignore"):
        f = t.astype(np.float32)  # round to nearest; may land above t
    above = f.astype(np.float64) > t
    f[above] = np.nextafter(f[above], np.float32(-np.inf))
    return f


def graph_thresholds(
    threshold: np.ndarray, comparison: Comparison, dtype: np.dtype
) -> np.ndarray:
    """Thresholds ``t'`` in ``dtype`` with ``(x cmp t) == (x <= t')`` for every ``x`` of ``dtype``.

    ``threshold`` is float64 (as the source stores it, finite). For ``<``: ``x < t`` holds iff
    ``x`` is at most the largest representable value strictly below ``t``.
    """
    t = np.asarray(threshold, np.float64)
    with np.errstate(over="ignore"):  # stepping below -max gives -inf, which is right
        if np.dtype(dtype) == FLOAT32:
            out = largest_float32_at_most(t)
            if comparison is Comparison.LT:
                equal = out.astype(np.float64) == t
                out[equal] = np.nextafter(out[equal], np.float32(-np.inf))
            return out
        if comparison is Comparison.LT:
            return np.nextafter(t, -np.inf)
        return t.copy()


def graph_categories(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Category values as ``dtype``; a value not representable there becomes NaN (no input of
    that dtype can equal it, and NaN equals nothing)."""
    values = np.asarray(values, np.float64)
    if np.dtype(dtype) == FLOAT64:
        return values.copy()
    with np.errstate(over="ignore", invalid="ignore"):
        f = values.astype(np.float32)
    f[f.astype(np.float64) != values] = np.nan
    return f


def float32_neighbours(t: np.ndarray) -> np.ndarray:
    """Float32 values around each threshold, the rows where routing can go wrong: the
    round-to-nearest float32 of ``t``, the float32 numbers just below and above it, and the
    largest float32 ``<= t`` with its successor. Shape [n, 5] float32."""
    t = np.asarray(t, np.float64)
    with np.errstate(over="ignore"):
        near = t.astype(np.float32)
    down = largest_float32_at_most(t)
    inf32 = np.float32(np.inf)
    with np.errstate(over="ignore"):
        cols = [
            near,
            np.nextafter(near, -inf32),
            np.nextafter(near, inf32),
            down,
            np.nextafter(down, inf32),
        ]
    return np.stack(cols, axis=1)
