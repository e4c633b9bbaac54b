"""The comparison: one output of the graph with the model's, exactly (labels, leaf ids) or
within ``atol + rtol * |expected|`` (:func:`compare`, :func:`differing_rows`), reports of
consecutive chunks merged (:func:`merge`), the default tolerance (:func:`default_atol`), and
which label rows differ at a tie (:func:`tie_bound`, :func:`tie_gaps`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tree2mat.forms import _digits
from tree2mat.ir import evaluate
from tree2mat.ir.core import Ensemble, LabelRule, Task
from tree2mat.verify.report import TIE_ROWS, Mismatch, OutputReport, Tie

DEFAULT_RTOL = 1e-6


def compare(
    name: str, device: str, got: np.ndarray, expected: np.ndarray, X: np.ndarray, atol: float, rtol: float, exact: bool,
    max_report: int = 5, offset: int = 0, near: np.ndarray | None = None,
    ties: Callable[[np.ndarray], np.ndarray] | None = None,
) -> OutputReport:
    """Compare one output: exactly (labels, leaf ids) or within ``atol + rtol * |expected|``.
    ``offset``: the row number of ``X[0]`` in the whole data (for the reported rows); ``near``:
    bool [N], the rows near an oblique node's hyperplane (mismatches among them are counted
    apart, in ``near_boundary``); ``ties(rows)``: of the differing ``rows`` (indices), the gap
    of each that differs at a tie, NaN for the others (:func:`tie_gaps`): counted apart, in
    ``ties``, not as mismatches."""
    if got.shape[1:] != expected.shape[1:] or got.shape[0] != expected.shape[0]:
        shape = lambda a: "[N" + "".join(f", {d}" for d in a.shape[1:]) + "]"  # noqa: E731
        return OutputReport(name, device, 0, 0, 0.0, 0.0, problem=f"shape {shape(got)}, expected {shape(expected)}"
                            + ("" if got.shape[0] == expected.shape[0] else f" ({got.shape[0]} rows for {expected.shape[0]})"))
    bad_rows, err_abs, err_rel = differing_rows(got, expected, atol, rtol, exact)
    gaps = ties(bad_rows) if ties is not None and bad_rows.size else np.full(bad_rows.size, np.nan)
    tied = ~np.isnan(gaps)
    first_ties = [
        Tie(offset + int(r), X[r].tolist(), _listed(expected[r]), _listed(got[r]), float(g))
        for r, g in zip(bad_rows[tied][:max_report], gaps[tied][:max_report], strict=True)
    ]
    bad_rows_all, bad_rows = bad_rows, bad_rows[~tied]
    first = [
        Mismatch(offset + int(r), X[r].tolist(), _listed(expected[r]), _listed(got[r])) for r in bad_rows[:max_report]
    ]
    n_near = int(np.count_nonzero(near[bad_rows])) if near is not None else 0
    return OutputReport(name, device, int(expected.shape[0]), int(bad_rows.size), err_abs, err_rel, first, near_boundary=n_near,
                        ties=int(np.count_nonzero(tied)), first_ties=first_ties, tie_rows=[offset + int(r) for r in bad_rows_all[tied][:TIE_ROWS]])


def _listed(value: Any) -> Any:
    """One row of an output as plain Python (a text label of an object array is a ``str``, which
    has no ``tolist``)."""
    return np.asarray(value).tolist()


def merge(a: OutputReport | None, b: OutputReport, max_report: int = 5) -> OutputReport:
    """The report of two consecutive chunks of rows of one output on one device."""
    if a is None:
        return b
    if a.problem or b.problem:  # a structural problem stands; comparing stops there
        return a if a.problem else b
    return OutputReport(
        a.name, a.device, a.compared + b.compared, a.mismatches + b.mismatches,
        max(a.max_abs_error, b.max_abs_error), max(rels) if (rels := [r for r in (a.max_rel_error, b.max_rel_error) if r is not None]) else None,
        (a.first_mismatches + b.first_mismatches)[:max_report], walk=a.walk, near_boundary=a.near_boundary + b.near_boundary,
        ties=a.ties + b.ties, first_ties=(a.first_ties + b.first_ties)[:max_report], tie_rows=(a.tie_rows + b.tie_rows)[:TIE_ROWS],
    )


def differing_rows(got: np.ndarray, expected: np.ndarray, atol: float, rtol: float, exact: bool) -> tuple[np.ndarray, float, float | None]:
    """Rows (indices) where ``got`` differs from ``expected`` (same shape) as :func:`compare`
    judges, the largest absolute error, and the largest relative error over the values where
    ``rtol x |expected| >= atol`` (None where there is none, and for exact outputs: 0)."""
    err_rel: float | None
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
            # Near zero the tolerance is atol's and a relative error is noise over a tiny
            # denominator (1e-8 off 6e-10 reads 16.8); only where rtol's part is the larger
            # does it say how close the values are.
            away = (np.abs(e) * rtol >= atol) & (np.abs(e) > 0) & np.isfinite(e)
            rel = np.where(away, diff / np.where(away, np.abs(e), 1.0), 0.0)
        err_abs = float(diff.max()) if diff.size else 0.0
        err_rel = float(np.nan_to_num(rel, nan=0.0, posinf=np.inf).max()) if away.any() else None
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


def tie_bound(ens: Ensemble, arithmetic: str | None) -> float:
    """How far apart the library's scores of two classes may lie and a float32 graph still
    decide between them otherwise (docs/exactness.md#ties): twice the sum of the two sides'
    error bounds on one margin (the library's, e_L, and the graph's, e_G). With S = 1 + |base|
    + sum_t max |leaf_t| (no row's sum of |terms| passes it) and n = trees + 1 terms in one
    margin, a sum in a dtype with epsilon eps is within n eps S of the exact sum; e_L is that in
    the library's accumulation dtype. e_G: a graph that sums a float64 library's leaves as
    digits (``arithmetic`` float32) is within :data:`tree2mat.forms._digits.DROPPED` or 2**-43 S
    of the exact sum; one that sums as the library does is within n eps S of it in its own
    dtype (a runtime may add in another order); a graph tree2mat did not write (``arithmetic``
    None) is taken to sum in float32, n eps32 S. If the library's label c_L and the graph's c_G
    differ, L[c_L] >= L[c_G] and G[c_G] >= G[c_L], so L[c_L] - L[c_G] <= 2 (e_L + e_G)."""
    scale = 1.0 + float(np.abs(ens.base_score).max()) + sum(float(np.abs(t.value).max()) for t in ens.trees)
    terms = len(ens.trees) + 1
    acc = np.dtype(ens.accumulate_dtype)
    e_lib = terms * float(np.finfo(acc).eps) * scale
    if arithmetic == "float32" and acc == np.float64:
        e_graph = max(_digits.DROPPED, 2.0**-43 * scale)
    else:
        graph = np.dtype(arithmetic) if arithmetic in ("float32", "float64") else np.dtype(np.float32)
        e_graph = terms * max(float(np.finfo(graph).eps), float(np.finfo(acc).eps)) * scale
    return 2.0 * (e_lib + e_graph)


def tie_gaps(ens: Ensemble, margin: np.ndarray, expected: np.ndarray, got: np.ndarray, bound: float | np.ndarray) -> np.ndarray:
    """Per row, how far apart the library's scores (``margin`` [N, K], its raw scores) of its
    label (``expected``) and the graph's (``got``) lie, where every output group whose labels
    differ does so within ``bound`` (one number, or one per row); NaN for the other rows (a label no class of the model, an
    outlier's label, a NaN score: never a tie)."""
    n = margin.shape[0]
    gaps = np.full(n, np.nan)
    if ens.task is not Task.CLASSIFICATION or margin.ndim != 2 or margin.shape[1] != ens.n_outputs:
        return gaps
    exp = np.asarray(expected).reshape(n, -1)
    got = np.asarray(got).reshape(n, -1)
    key = evaluate.argmax_key(ens, margin.astype(np.float64))
    worst = np.zeros(n)
    start = 0
    for j, classes in enumerate(ens.classes):
        names = np.asarray(classes).astype(str)
        differ = exp[:, j].astype(str) != got[:, j].astype(str)
        if ens.label_rule is LabelRule.ARGMAX:
            cols = key[:, start : start + len(classes)]
            start += len(classes)
            i_exp, i_got = _class_index(names, exp[:, j]), _class_index(names, got[:, j])
            ok = (i_exp >= 0) & (i_got >= 0)
            rows = np.arange(n)
            with np.errstate(invalid="ignore"):
                gap = np.where(ok, np.abs(cols[rows, np.maximum(i_exp, 0)] - cols[rows, np.maximum(i_got, 0)]), np.nan)
        else:  # one margin column per group, against the cutoff
            ok = (_class_index(names, got[:, j]) >= 0)
            gap = np.where(ok, np.abs(margin[:, j] - ens.label_cutoff), np.nan)
        with np.errstate(invalid="ignore"):
            worst = np.where(differ, np.maximum(worst, np.where(np.isnan(gap), np.inf, gap)), worst)
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(worst) & (worst <= bound), worst, np.nan)


def _class_index(names: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Each label's position among the class ``names`` (as strings), -1 where it is none."""
    as_str = labels.astype(str)
    hit = as_str[:, None] == names[None, :]
    return np.where(hit.any(axis=1), hit.argmax(axis=1), -1)
