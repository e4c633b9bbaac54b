"""The comparison: one output of the graph with the model's, exactly (labels, leaf ids) or
within ``atol + rtol * |expected|`` (:func:`compare`, :func:`differing_rows`), reports of
consecutive chunks merged (:func:`merge`), and the default tolerance (:func:`default_atol`)."""

from __future__ import annotations

import numpy as np

from tree2mat.ir.core import Ensemble
from tree2mat.verify.report import Mismatch, OutputReport

DEFAULT_RTOL = 1e-6


def compare(
    name: str, device: str, got: np.ndarray, expected: np.ndarray, X: np.ndarray, atol: float, rtol: float, exact: bool,
    max_report: int = 5, offset: int = 0, near: np.ndarray | None = None,
) -> OutputReport:
    """Compare one output: exactly (labels, leaf ids) or within ``atol + rtol * |expected|``.
    ``offset``: the row number of ``X[0]`` in the whole data (for the reported rows); ``near``:
    bool [N], the rows near an oblique node's hyperplane (mismatches among them are counted
    apart, in ``near_boundary``)."""
    if got.shape[1:] != expected.shape[1:] or got.shape[0] != expected.shape[0]:
        shape = lambda a: "[N" + "".join(f", {d}" for d in a.shape[1:]) + "]"  # noqa: E731
        return OutputReport(name, device, 0, 0, 0.0, 0.0, problem=f"shape {shape(got)}, expected {shape(expected)}"
                            + ("" if got.shape[0] == expected.shape[0] else f" ({got.shape[0]} rows for {expected.shape[0]})"))
    bad_rows, err_abs, err_rel = differing_rows(got, expected, atol, rtol, exact)
    first = [
        Mismatch(offset + int(r), X[r].tolist(), expected[r].tolist(), got[r].tolist()) for r in bad_rows[:max_report]
    ]
    n_near = int(np.count_nonzero(near[bad_rows])) if near is not None else 0
    return OutputReport(name, device, int(expected.shape[0]), int(bad_rows.size), err_abs, err_rel, first, near_boundary=n_near)


def merge(a: OutputReport | None, b: OutputReport, max_report: int = 5) -> OutputReport:
    """The report of two consecutive chunks of rows of one output on one device."""
    if a is None:
        return b
    if a.problem or b.problem:  # a structural problem stands; comparing stops there
        return a if a.problem else b
    return OutputReport(
        a.name, a.device, a.compared + b.compared, a.mismatches + b.mismatches,
        max(a.max_abs_error, b.max_abs_error), max(a.max_rel_error, b.max_rel_error),
        (a.first_mismatches + b.first_mismatches)[:max_report], walk=a.walk, near_boundary=a.near_boundary + b.near_boundary,
    )


def differing_rows(got: np.ndarray, expected: np.ndarray, atol: float, rtol: float, exact: bool) -> tuple[np.ndarray, float, float]:
    """Rows (indices) where ``got`` differs from ``expected`` (same shape) as :func:`compare`
    judges, and the largest absolute and relative errors."""
    if exact or expected.dtype.kind in "USOb" or got.dtype.kind in "USO":
        if expected.dtype.kind in "USO" or got.dtype.kind in "USO":
            bad = got.astype(str) != expected.astype(str)
        else:
            bad = got != expected
        err_abs = err_rel = 0.0
    else:
        g, e = got.astype(np.float64), expected.astype(np.float64)
        if got.dtype == np.float32:
            # A value beyond float32's range is +-inf in a float32 output: its correct rounding.
            with np.errstate(over="ignore"):
                e = np.where(np.isinf(e.astype(np.float32)), e.astype(np.float32).astype(np.float64), e)
        both_nan = np.isnan(g) & np.isnan(e)
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.where(both_nan | (g == e), 0.0, np.abs(g - e))
            diff = np.where(np.isnan(diff), np.inf, diff)
            bad = diff > atol + rtol * np.abs(np.nan_to_num(e, nan=0.0, posinf=0.0, neginf=0.0))
            nonzero = np.abs(e) > 0
            rel = np.where(nonzero, diff / np.where(nonzero, np.abs(e), 1.0), 0.0)
        err_abs = float(diff.max()) if diff.size else 0.0
        err_rel = float(np.nan_to_num(rel, nan=0.0, posinf=np.inf).max()) if rel.size else 0.0
    bad_rows = np.flatnonzero(bad.reshape(bad.shape[0], -1).any(axis=1)) if bad.size else np.zeros(0, int)
    return bad_rows, err_abs, err_rel


def default_atol(ens: Ensemble, arithmetic: str = "float64") -> float:
    """``1e-12 x scale`` for libraries that sum in float64; ``4 eps32 x scale`` for those that
    sum (and apply their link) in float32, e.g. XGBoost; scale = 1 + |base| + sum_t max |leaf_t|.
    A graph whose ``arithmetic`` is float32 (the default graph) gets at least ``4 eps32``: its
    links and heads round in float32 (probabilities, scores: quantities of order one)."""
    scale = 1.0 + float(np.abs(ens.base_score).max()) + sum(float(np.abs(t.value).max()) for t in ens.trees)
    eps32 = float(np.finfo(np.float32).eps)
    if np.dtype(ens.accumulate_dtype) == np.float32:
        return 4 * eps32 * scale
    return max(1e-12 * scale, 4 * eps32) if arithmetic == "float32" else 1e-12 * scale
