"""The experiments of Utkin & Konstantinov, *Attention-based Random Forest and Contamination Model*,
Tables 2 and 3, with tree2mat.attention: R^2 and MAE of the random forest, the Softmax model
(epsilon 0: the softmax alone, tau cross-validated) and ABRF-1 (epsilon and tau cross-validated, w
by the quadratic program), on Diabetes and Friedman 1-3 (sizes of the paper's Table 1), under

- Condition 1: 100 trees of depth at most 2;
- Condition 2: 100 trees with at least 10 training rows in every leaf;

each averaged over repeated random splits (the paper: 100) of 4n/5 training rows, on which the
forest, the leaf means and w are fitted and epsilon and tau chosen by 5-fold cross-validation, and
n/5 test rows. The epsilon grid is k/9 (k = 0..9: the paper's tables report optimal epsilons of
those values), tau tree2mat's grid (0.01 to 100 times the rows' distance scale). Friedman's data
with Breiman's noise (bagging paper: sd 1, 125, 0.1), scikit-learn's make_friedman1/2/3;
Diabetes is scikit-learn's (the 442 rows of the R package's).

    python -m benchmarks.abrf_paper --out benchmarks/abrf_paper.json [--repeats 100] [--jobs 2]

``--classification`` runs the section-5 experiment in its place (the paper's Table 17 uses UCI
datasets scikit-learn does not ship): macro F1 (the paper's measure) and accuracy of the random
forest classifier, the Softmax model and ABRF-1 on scikit-learn's breast cancer and wine data,
Condition 2, the same splits and grids.

    python -m benchmarks.abrf_paper --classification --out benchmarks/abrf_paper_classification.json [--repeats 100]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from sklearn.datasets import load_diabetes, make_friedman1, make_friedman2, make_friedman3
from sklearn.ensemble import RandomForestRegressor
from sklearn.metrics import mean_absolute_error, r2_score

from tree2mat import attention

EPSILONS = tuple(k / 9 for k in range(10))
CONDITIONS = {1: {"max_depth": 2}, 2: {"min_samples_leaf": 10}}
#: The paper's Tables 2 and 3 (RF): epsilon_opt, R^2 (RF, Softmax, ABRF-1), MAE (RF, Softmax, ABRF-1).
PAPER = {
    (1, "Diabetes"): (1.0, (0.390, 0.399, 0.405), (46.06, 46.25, 46.15)),
    (1, "Friedman 1"): (0.444, (0.423, 0.404, 0.432), (2.624, 2.655, 2.566)),
    (1, "Friedman 2"): (0.889, (0.837, 0.841, 0.868), (113.9, 113.6, 106.5)),
    (1, "Friedman 3"): (0.889, (0.769, 0.752, 0.812), (0.133, 0.138, 0.124)),
    (2, "Diabetes"): (0.0, (0.416, 0.424, 0.424), (44.92, 44.66, 44.66)),
    (2, "Friedman 1"): (1.0, (0.459, 0.438, 0.470), (2.540, 2.589, 2.540)),
    (2, "Friedman 2"): (0.556, (0.841, 0.847, 0.877), (111.7, 110.0, 102.0)),
    (2, "Friedman 3"): (0.667, (0.625, 0.628, 0.686), (0.154, 0.155, 0.134)),
}


def dataset(name: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``name`` (Friedman's drawn anew per repetition, from ``seed``)."""
    if name == "Diabetes":
        return load_diabetes(return_X_y=True)
    make, noise = {"Friedman 1": (make_friedman1, 1.0), "Friedman 2": (make_friedman2, 125.0), "Friedman 3": (make_friedman3, 0.1)}[name]
    return make(n_samples=100, noise=noise, random_state=seed)


def one_split(job: tuple[int, str, int]) -> dict:
    """One repetition: the three models' test R^2 and MAE, and the epsilon and tau chosen."""
    condition, name, rep = job
    X, y = dataset(name, rep)
    order = np.random.default_rng(rep).permutation(len(y))
    cut = len(y) * 4 // 5
    train, test = order[:cut], order[cut:]
    forest = RandomForestRegressor(n_estimators=100, random_state=rep, **CONDITIONS[condition]).fit(X[train], y[train])
    start = time.perf_counter()
    softmax = attention.fit(forest, X[train], y[train], epsilon=0.0, tau="auto")
    abrf = attention.fit(forest, X[train], y[train], epsilon=list(EPSILONS), tau="auto")
    seconds = time.perf_counter() - start
    out = {"condition": condition, "dataset": name, "rep": rep, "epsilon": abrf.epsilon, "fit_s": seconds}
    for label, pred in (("rf", forest.predict(X[test])), ("softmax", softmax.predict(X[test])), ("abrf", abrf.predict(X[test]))):
        out[f"{label}_r2"], out[f"{label}_mae"] = r2_score(y[test], pred), mean_absolute_error(y[test], pred)
    return out


CLASSIFICATION = ("Breast cancer", "Wine")


def one_classification_split(job: tuple[int, str, int]) -> dict:
    """One repetition of the classification experiment: macro F1 and accuracy of the three."""
    from sklearn.datasets import load_breast_cancer, load_wine
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.metrics import accuracy_score, f1_score

    condition, name, rep = job
    X, y = (load_breast_cancer if name == "Breast cancer" else load_wine)(return_X_y=True)
    order = np.random.default_rng(rep).permutation(len(y))
    cut = len(y) * 4 // 5
    train, test = order[:cut], order[cut:]
    forest = RandomForestClassifier(n_estimators=100, random_state=rep, **CONDITIONS[condition]).fit(X[train], y[train])
    softmax = attention.fit(forest, X[train], y[train], epsilon=0.0, tau="auto")
    abrf = attention.fit(forest, X[train], y[train], epsilon=list(EPSILONS), tau="auto")
    out = {"condition": condition, "dataset": name, "rep": rep, "epsilon": abrf.epsilon}
    for label, pred in (("rf", forest.predict(X[test])), ("softmax", softmax.predict(X[test])), ("abrf", abrf.predict(X[test]))):
        out[f"{label}_f1"], out[f"{label}_accuracy"] = f1_score(y[test], pred, average="macro"), accuracy_score(y[test], pred)
    return out


def _summary(runs: list[dict], measure: str) -> tuple[dict[str, float], str, float]:
    """One case's splits: the mean of every figure, ABRF-1's gain over the forest on ``measure``
    (mean ± standard error), and the median epsilon chosen."""
    mean = {k: float(np.mean([r[k] for r in runs])) for k in runs[0] if k.startswith(("rf_", "softmax_", "abrf_"))}
    gain = [r[f"abrf_{measure}"] - r[f"rf_{measure}"] for r in runs]
    return mean, f"{np.mean(gain):+.3f} ± {np.std(gain) / np.sqrt(len(gain)):.3f}", float(np.median([r["epsilon"] for r in runs]))


def classification_table(runs: list[dict]) -> str:
    lines = [
        "| condition | dataset | F1 RF | F1 Softmax | F1 ABRF-1 | accuracy RF | accuracy Softmax | accuracy ABRF-1 | ABRF-1 − RF (F1) | ε chosen (median) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in CLASSIFICATION:
        mine = [r for r in runs if r["dataset"] == name]
        if not mine:
            continue
        mean, gain, eps = _summary(mine, "f1")
        lines.append(
            f"| {mine[0]['condition']} | {name} | {mean['rf_f1']:.3f} | {mean['softmax_f1']:.3f} | {mean['abrf_f1']:.3f} | "
            f"{mean['rf_accuracy']:.3f} | {mean['softmax_accuracy']:.3f} | {mean['abrf_accuracy']:.3f} | {gain} | {eps:.3f} |"
        )
    return "\n".join(lines)


def table(runs: list[dict]) -> str:
    """Markdown: our means next to the paper's, per condition and dataset."""
    lines = [
        "| condition | dataset | R² RF | R² Softmax | R² ABRF-1 | MAE RF | MAE Softmax | MAE ABRF-1 | ABRF-1 − RF (R²) | ε chosen (median) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (condition, name), (eps, r2, mae) in PAPER.items():
        mine = [r for r in runs if r["condition"] == condition and r["dataset"] == name]
        if not mine:
            continue
        mean, gain, chosen = _summary(mine, "r2")
        lines.append(
            f"| {condition} | {name} | {mean['rf_r2']:.3f} ({r2[0]:.3f}) | {mean['softmax_r2']:.3f} ({r2[1]:.3f}) | "
            f"{mean['abrf_r2']:.3f} ({r2[2]:.3f}) | {mean['rf_mae']:.4g} ({mae[0]:g}) | {mean['softmax_mae']:.4g} ({mae[1]:g}) | "
            f"{mean['abrf_mae']:.4g} ({mae[2]:g}) | {gain} | {chosen:.3f} ({eps:g}) |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--repeats", type=int, default=100, help="random splits per dataset and condition (the paper: 100)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--classification", action="store_true", help="the section-5 experiment instead (see above)")
    parser.add_argument("--from", dest="source", help="print the table of an earlier --out file instead of running")
    args = parser.parse_args()
    show = classification_table if args.classification else table
    if args.source:
        print(show(json.load(open(args.source))["runs"]))
        return
    if args.classification:
        jobs, work = [(2, name, rep) for name in CLASSIFICATION for rep in range(args.repeats)], one_classification_split
    else:
        jobs, work = [(c, name, rep) for (c, name) in PAPER for rep in range(args.repeats)], one_split
    start = time.perf_counter()
    runs = []
    with ProcessPoolExecutor(args.jobs) as pool:
        for run in pool.map(work, jobs, chunksize=2):
            runs.append(run)
            if len(runs) % 20 == 0:
                print(f"{len(runs)} of {len(jobs)} splits, {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    meta = {
        "date": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()}, {platform.system()}, {os.cpu_count()} cores",
        "repeats": args.repeats, "seconds": round(time.perf_counter() - start, 1), "epsilons": EPSILONS,
        "tau_factors": attention.TAU_FACTORS,
    }
    with open(args.out, "w") as fh:
        json.dump({"meta": meta, "runs": runs}, fh, indent=1)
    print(show(runs))


if __name__ == "__main__":
    main()
