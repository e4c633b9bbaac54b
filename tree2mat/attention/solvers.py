"""ABRF-1's tree weights w on the unit simplex: the quadratic program of the L2 loss (Clarabel) and
the linear program of the L1 loss (HiGHS)."""

from __future__ import annotations

import numpy as np

from tree2mat.errors import UnsupportedModelError, require


def _weights(epsilon: float, B: np.ndarray, D: np.ndarray, y: np.ndarray, loss: str) -> np.ndarray:
    """w for the rows' tree values ``B`` [N, T, K], softmax weights ``D`` [N, T] and targets
    ``y`` [N, K] (uniform where ``epsilon`` is 0: w plays no part). A classifier's K class
    probabilities are K rows of the program each (the paper's eq. 30: one-hot targets)."""
    if epsilon == 0.0:
        return np.full(B.shape[1], 1.0 / B.shape[1])
    residual = y - (1.0 - epsilon) * np.einsum("nt,ntk->nk", D, B)
    solve = _least_squares_on_simplex if loss == "l2" else _least_absolute_on_simplex
    return solve(epsilon * B.transpose(0, 2, 1).reshape(-1, B.shape[1]), residual.reshape(-1))


def _least_squares_on_simplex(M: np.ndarray, r: np.ndarray) -> np.ndarray:
    """argmin ||r - M w||^2 over the unit simplex: the QP of eq. (15), ``1/2 w' (2 M'M) w -
    (2 M'r)' w`` with ``w >= 0``, ``sum(w) = 1``, by Clarabel's interior-point solver (the
    attention extra). HiGHS's active-set QP solver (1.16) did not end on some of these programs
    (rank-deficient M'M: more trees than rows; one of Friedman 3's in benchmarks/abrf_paper.py,
    which Clarabel solves in 9 ms); benchmarks/abrf_solvers.py times Clarabel against scipy's
    SLSQP."""
    clarabel = require("clarabel", "solving the L2 weights (Clarabel's QP solver)")
    from scipy import sparse

    T = M.shape[1]
    P = sparse.triu(sparse.csc_matrix(2.0 * (M.T @ M))).tocsc()
    A = sparse.vstack([sparse.csc_matrix(np.ones((1, T))), -sparse.identity(T)]).tocsc()  # sum(w) = 1; -w <= 0
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = QP_TOLERANCE
    solution = clarabel.DefaultSolver(
        P, -2.0 * (M.T @ r), A, np.concatenate([[1.0], np.zeros(T)]), [clarabel.ZeroConeT(1), clarabel.NonnegativeConeT(T)], settings,
    ).solve()
    if str(solution.status) not in ("Solved", "AlmostSolved"):
        raise UnsupportedModelError(f"the L2 weights' quadratic program did not solve: {solution.status}")
    return _on_simplex(np.asarray(solution.x))



#: Clarabel's gap and feasibility tolerances for the L2 weights.
QP_TOLERANCE = 1e-10


def _least_absolute_on_simplex(M: np.ndarray, r: np.ndarray) -> np.ndarray:
    """argmin sum |r - M w| over the unit simplex: the LP of eq. (20)-(22) in (w, G), by HiGHS."""
    from scipy import sparse
    from scipy.optimize import linprog

    n, T = M.shape
    cost = np.concatenate([np.zeros(T), np.ones(n)])
    eye = sparse.identity(n, format="csr")
    # G >= r - M w  ->  -M w - G <= -r ;  G >= M w - r  ->  M w - G <= r
    A_ub = sparse.vstack([sparse.hstack([sparse.csr_matrix(-M), -eye]), sparse.hstack([sparse.csr_matrix(M), -eye])], format="csr")
    b_ub = np.concatenate([-r, r])
    A_eq = np.concatenate([np.ones(T), np.zeros(n)])[None, :]
    res = linprog(cost, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=[1.0], bounds=[(0, None)] * (T + n), method="highs")
    if res.status != 0:
        raise UnsupportedModelError(f"the L1 weights' linear program did not solve: {res.message}")
    return _on_simplex(res.x[:T])


def _on_simplex(w: np.ndarray) -> np.ndarray:
    """``w`` with a solver's round-off removed: no negative entry, a sum of 1."""
    w = np.clip(np.asarray(w, np.float64), 0.0, None)
    return w / w.sum()
