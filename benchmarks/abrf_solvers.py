"""How long ABRF-1's tree weights take to fit (tree2mat.attention.fit, docs/attention.md): the L2
quadratic program by Clarabel, the L1 linear program by HiGHS through scipy, and, with
``--slsqp``, the L2 program by scipy's SLSQP for comparison; random forests of Friedman 1 data.

    python -m benchmarks.abrf_solvers --out benchmarks/abrf_solvers.json [--slsqp]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np
from scipy.optimize import minimize
from sklearn.datasets import make_friedman1
from sklearn.ensemble import RandomForestRegressor

from tree2mat import attention
from tree2mat.ir import evaluate

CASES = [(300, 2000, ("l2", "l1")), (1000, 5000, ("l2",))]


def slsqp(M: np.ndarray, r: np.ndarray) -> np.ndarray:
    """The same QP by scipy's SLSQP, with the exact gradient, from the uniform weights."""
    T = M.shape[1]
    MtM, Mtr = M.T @ M, M.T @ r
    res = minimize(
        lambda w: (float(w @ MtM @ w - 2 * w @ Mtr + r @ r), 2 * (MtM @ w - Mtr)), np.full(T, 1 / T), jac=True,
        method="SLSQP", bounds=[(0.0, 1.0)] * T, constraints=[{"type": "eq", "fun": lambda w: np.sum(w) - 1.0}],
        options={"maxiter": 1000, "ftol": 1e-12},
    )
    return res.x


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--slsqp", action="store_true", help="also time scipy's SLSQP on the first case (minutes)")
    args = parser.parse_args()
    results = []
    for trees, rows, losses in CASES:
        X, y = make_friedman1(n_samples=rows, n_features=10, random_state=0)
        forest = RandomForestRegressor(n_estimators=trees, max_depth=8, random_state=0).fit(X, y)
        for loss in losses:
            start = time.perf_counter()
            abrf = attention.fit(forest, X, y, epsilon=0.5, tau=1.0, loss=loss)
            seconds = time.perf_counter() - start
            results.append({"trees": trees, "rows": rows, "loss": loss, "solver": "clarabel" if loss == "l2" else "highs", "fit_s": round(seconds, 3),
                            "objective": attention.objective(abrf, X, y)})
            print(json.dumps(results[-1]), flush=True)
        if args.slsqp and trees == CASES[0][0]:
            abrf = attention.fit(forest, X, y, epsilon=0.0)
            leaves = evaluate.apply(abrf.ensemble, X)
            B = abrf.tree_values(X, leaves)[:, :, 0]
            r = y - 0.5 * np.sum(abrf.softmax_weights(X, leaves) * B, axis=1)
            start = time.perf_counter()
            w = slsqp(0.5 * B, r)
            seconds = time.perf_counter() - start
            w = np.clip(w, 0, None) / np.clip(w, 0, None).sum()
            results.append({"trees": trees, "rows": rows, "loss": "l2", "solver": "scipy SLSQP", "fit_s": round(seconds, 3),
                            "objective": attention.objective(attention.AttentionForest(
                                abrf.ensemble, abrf.leaf_means, abrf.leaf_counts, 0.5, 1.0, w), X, y)})
            print(json.dumps(results[-1]), flush=True)
    machine = {"cpu_count": os.cpu_count(), "machine": platform.machine(), "system": platform.system()}
    with open(args.out, "w") as f:
        json.dump({"date": time.strftime("%Y-%m-%d"), "machine": machine, "results": results}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
