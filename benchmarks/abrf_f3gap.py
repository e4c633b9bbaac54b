"""Issue 38: readings of Utkin & Konstantinov's set-up (*Attention-based Random Forest and
Contamination Model*, section 6.1) that might explain the gap between the paper's random forest
R^2 on Friedman 3 (0.769 under Condition 1, 0.625 under Condition 2) and ours (about 0.49, 0.43).
Only the forests are fitted (no attention model), on the splits of benchmarks/abrf_tables.py
(zero noise, 4n/5 training and n/5 test rows, the split and the data drawn from the repetition).

Each *setup* changes how the data, the split or the forest is made:

- ``ours``: abrf_tables.py's (n = 100; random forest and extra trees);
- ``n200``, ``n500``, ``n1000``: n rows instead of the 100 of the paper's Table 1, 4n/5 training;
- ``breiman``: Breiman's bagging-paper sizes, 200 training and 1 000 test rows;
- ``unit``: Friedman 2 and 3 on unscaled inputs, every x uniform on [0, 1] (scikit-learn's and
  Breiman's ranges are x1 in [0, 100], x2 in [40 pi, 560 pi], x3 in [0, 1], x4 in [1, 11]);
- ``x2plain``: Friedman 2 and 3 with x2 in [20, 280] (Breiman's 20 <= x2 / 2 pi <= 280 without the 2 pi);
- ``sqrt``, ``third``: features tried per split sqrt(m) and m/3 (R's randomForest) instead of all m
  (scikit-learn's regressors' default, then called 'auto');
- ``depth3``: Condition 1 as max_depth 3 (depth counted in levels of nodes);
- ``split10``: Condition 2 as min_samples_split 10 (instead of min_samples_leaf 10).

A setup that changes one condition's forest runs under that condition alone.

Each split is scored in every *reading* of "R^2 on the test data": the mean over splits of the
test R^2 (ours), their median, the pooled R^2 of all splits' test rows, the test MSE over the
variance of the whole draw's n rows, the training R^2, scikit-learn's r2_score with its
arguments swapped (r2_score(prediction, truth)) and the mean squared correlation of prediction and
truth (R^2's other textbook definition); MAE next to it (the paper's MAE is a mean over
splits, so it is the same in every reading).

    python -m benchmarks.abrf_f3gap --out benchmarks/abrf_f3gap.json [--repeats 30] [--setups ours,n200]
    python -m benchmarks.abrf_f3gap --from benchmarks/abrf_f3gap.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import numpy as np
import sklearn
from sklearn.metrics import mean_absolute_error, r2_score

from benchmarks._common import machine
from benchmarks.abrf_paper import CONDITIONS
from benchmarks.abrf_tables import FRIEDMAN, KINDS, PAPER, _split

#: setup -> (rows drawn, training rows or None for 4n/5, Friedman 2 and 3's inputs, forest keywords per condition, forest kinds).
SETUPS: dict[str, tuple[int, int | None, str, dict[int, dict[str, Any]], tuple[str, ...]]] = {
    "ours": (100, None, "sklearn", {}, ("rf", "ert")),
    "n200": (200, None, "sklearn", {}, ("rf",)),
    "n500": (500, None, "sklearn", {}, ("rf",)),
    "n1000": (1000, None, "sklearn", {}, ("rf",)),
    "breiman": (1200, 200, "sklearn", {}, ("rf",)),
    "unit": (100, None, "unit", {}, ("rf",)),
    "x2plain": (100, None, "x2plain", {}, ("rf",)),
    "sqrt": (100, None, "sklearn", {1: {"max_features": "sqrt"}, 2: {"max_features": "sqrt"}}, ("rf",)),
    "third": (100, None, "sklearn", {1: {"max_features": 1 / 3}, 2: {"max_features": 1 / 3}}, ("rf",)),
    "depth3": (100, None, "sklearn", {1: {"max_depth": 3}}, ("rf",)),
    "split10": (100, None, "sklearn", {2: {"min_samples_split": 10}}, ("rf",)),
}
#: Friedman 2 and 3's inputs: x -> (offset, scale) of x1..x4 drawn uniform on [0, 1].
INPUTS = {"unit": ((0, 1), (0, 1), (0, 1), (0, 1)), "x2plain": ((0, 100), (20, 260), (0, 1), (1, 10))}
READINGS = ("mean", "median", "pooled", "whole", "train", "swapped", "corr2")
#: (forest kind, condition) -> the paper's table with that forest's R^2 and MAE.
PAPER_TABLE = {("rf", 1): 2, ("rf", 2): 3, ("ert", 1): 4, ("ert", 2): 5}


def _other_friedman(name: str, inputs: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Friedman 2 or 3's formula on the ``inputs`` ranges, without noise."""
    offset, scale = np.array(INPUTS[inputs]).T
    X = offset + scale * np.random.RandomState(seed).uniform(size=(n, 4))
    inner = X[:, 1] * X[:, 2] - 1 / (X[:, 1] * X[:, 3])
    return X, (np.sqrt(X[:, 0] ** 2 + inner**2) if name == "Friedman 2" else np.arctan(inner / X[:, 0]))


def rows(setup: str, name: str, rep: int) -> tuple[np.ndarray, ...]:
    """Training and test rows of one split under ``setup``, and the whole draw's targets."""
    n, n_train, inputs, _, _ = SETUPS[setup]
    if (n, n_train, inputs) == (100, None, "sklearn"):
        Xtr, ytr, Xte, yte = _split(name, rep, "zero")
        return Xtr, ytr, Xte, yte, np.concatenate([ytr, yte])
    if inputs != "sklearn" and name != "Friedman 1":
        X, y = _other_friedman(name, inputs, n, rep)
    else:
        X, y = FRIEDMAN[name](n_samples=n, random_state=rep)
    order = np.random.default_rng(rep).permutation(n)
    cut = n * 4 // 5 if n_train is None else n_train
    return X[order[:cut]], y[order[:cut]], X[order[cut:]], y[order[cut:]], y


def one_split(job: tuple[str, str, int, str, int]) -> dict:
    """One forest on one split: what every reading needs (per-split R^2s, MAE, and the sums that pool)."""
    setup, kind, condition, name, rep = job
    Xtr, ytr, Xte, yte, y_all = rows(setup, name, rep)
    params = {**CONDITIONS[condition], **SETUPS[setup][3].get(condition, {})}
    if "min_samples_split" in params:
        params.pop("min_samples_leaf", None)
    forest = KINDS[kind](n_estimators=100, random_state=rep, **params).fit(Xtr, ytr)
    pred = forest.predict(Xte)
    sse = float(np.sum((yte - pred) ** 2))
    return {"setup": setup, "kind": kind, "condition": condition, "dataset": name, "rep": rep,
            "r2": r2_score(yte, pred), "mae": mean_absolute_error(yte, pred), "train_r2": r2_score(ytr, forest.predict(Xtr)),
            "swapped_r2": r2_score(pred, yte), "corr2_r2": float(np.corrcoef(yte, pred)[0, 1] ** 2),
            "whole_r2": 1 - sse / len(yte) / float(np.var(y_all)),
            "sse": sse, "sum_y": float(np.sum(yte)), "sum_y2": float(np.sum(yte**2)), "n_test": len(yte)}


def reading(runs: list[dict], how: str) -> float:
    """One reading of R^2 over one case's splits."""
    if how == "pooled":
        n, s, s2 = (sum(r[k] for r in runs) for k in ("n_test", "sum_y", "sum_y2"))
        return 1 - sum(r["sse"] for r in runs) / (s2 - s * s / n)
    key = {"mean": "r2", "median": "r2", "whole": "whole_r2", "train": "train_r2", "swapped": "swapped_r2", "corr2": "corr2_r2"}[how]
    values = [r[key] for r in runs]
    return float(np.median(values) if how == "median" else np.mean(values))


def _paper(kind: str, condition: int, name: str) -> tuple[float, float]:
    """The paper's forest R^2 and MAE for this forest, condition and dataset."""
    _, r2, mae = PAPER[PAPER_TABLE[(kind, condition)]][name]
    return r2[0], mae[0]


def readings_table(runs: list[dict]) -> str:
    """Markdown: every reading of the ``ours`` forests' R^2, and MAE, next to the paper's."""
    lines = ["| forest | condition | dataset | " + " | ".join(READINGS) + " | paper R² | MAE (paper) | splits |",
             "|---|---|---|" + "---|" * (len(READINGS) + 3)]
    for kind, condition in PAPER_TABLE:
        for name in FRIEDMAN:
            mine = [r for r in runs if (r["setup"], r["kind"], r["condition"], r["dataset"]) == ("ours", kind, condition, name)]
            if mine:
                r2, mae = _paper(kind, condition, name)
                cells = " | ".join(f"{reading(mine, how):.3f}" for how in READINGS)
                lines.append(f"| {kind.upper()} | {condition} | {name} | {cells} | {r2:.3f} | "
                             f"{np.mean([r['mae'] for r in mine]):.4g} ({mae:g}) | {len(mine)} |")
    return "\n".join(lines)


def setups_table(runs: list[dict]) -> str:
    """Markdown: per setup and condition, the random forest's mean and pooled test R^2 on Friedman 1-3
    (the paper's in parentheses) and its MAE on Friedman 3."""
    lines = ["| setup | condition | Friedman 1 mean / pooled | Friedman 2 mean / pooled | Friedman 3 mean / pooled | MAE Friedman 3 | splits |",
             "|---|---|---|---|---|---|---|"]
    for setup in SETUPS:
        for condition in CONDITIONS:
            cells, mae, count = [], "", 0
            for name in FRIEDMAN:
                mine = [r for r in runs if (r["setup"], r["kind"], r["condition"], r["dataset"]) == (setup, "rf", condition, name)]
                if not mine:
                    break
                paper_r2, paper_mae = _paper("rf", condition, name)
                cells.append(f"{reading(mine, 'mean'):.3f} / {reading(mine, 'pooled'):.3f} ({paper_r2:.3f})")
                mae, count = f"{np.mean([r['mae'] for r in mine]):.4g} ({paper_mae:g})", len(mine)
            if len(cells) == len(FRIEDMAN):
                lines.append(f"| {setup} | {condition} | " + " | ".join(cells) + f" | {mae} | {count} |")
    return "\n".join(lines)


def mae_table(runs: list[dict]) -> str:
    """Markdown: the ``ours`` forests' MAE against the paper's, and the R^2 the paper's MAE implies had
    its errors the spread of ours (1 - R^2 = k MAE^2, k = our mean 1 - R^2 over our mean MAE, squared)."""
    lines = ["| forest | condition | dataset | MAE ours | MAE paper | R² ours | R² implied by the paper's MAE | R² paper |",
             "|---|---|---|---|---|---|---|---|"]
    for kind, condition in PAPER_TABLE:
        for name in FRIEDMAN:
            mine = [r for r in runs if (r["setup"], r["kind"], r["condition"], r["dataset"]) == ("ours", kind, condition, name)]
            if mine:
                r2, mae = _paper(kind, condition, name)
                ours_r2, ours_mae = reading(mine, "mean"), float(np.mean([r["mae"] for r in mine]))
                implied = 1 - (1 - ours_r2) * (mae / ours_mae) ** 2
                lines.append(f"| {kind.upper()} | {condition} | {name} | {ours_mae:.4g} | {mae:g} | {ours_r2:.3f} | {implied:.3f} | {r2:.3f} |")
    return "\n".join(lines)


def report(runs: list[dict]) -> str:
    return (f"Readings (setup ours)\n\n{readings_table(runs)}\n\nMAE (setup ours)\n\n{mae_table(runs)}\n\n"
            f"Setups (random forest)\n\n{setups_table(runs)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="the JSON file to write (required unless --from)")
    parser.add_argument("--repeats", type=int, default=30, help="random splits per setup, forest, condition and dataset")
    parser.add_argument("--setups", default=",".join(SETUPS), help="comma-separated setups (default: all)")
    parser.add_argument("--keep", action="store_true", help="keep the runs of the other setups already in --out")
    parser.add_argument("--from", dest="source", help="print the tables of an earlier --out file instead of running")
    args = parser.parse_args()
    if args.source:
        print(report(json.load(open(args.source))["runs"]))
        return
    if not args.out:
        parser.error("--out: name the JSON file to write")
    jobs = [(s, k, c, name, rep) for s in args.setups.split(",") for k in SETUPS[s][4] for c in (SETUPS[s][3] or CONDITIONS)
            for name in FRIEDMAN for rep in range(args.repeats)]
    start, runs, seconds = time.perf_counter(), list[dict](), dict[str, float]()
    if args.keep:
        saved = json.load(open(args.out))
        runs, seconds = [r for r in saved["runs"] if r["setup"] not in args.setups.split(",")], saved["meta"]["seconds"]
    for count, job in enumerate(jobs, 1):
        runs.append(one_split(job))
        if count % 60 == 0:
            print(f"{count} of {len(jobs)} splits, {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    seconds[args.setups] = round(time.perf_counter() - start, 1)
    meta = {"date": time.strftime("%Y-%m-%d"), "machine": machine(), "repeats": args.repeats, "seconds": seconds,
            "versions": {"scikit-learn": sklearn.__version__, "numpy": np.__version__, "python": sys.version.split()[0]}}
    with open(args.out, "w") as fh:
        json.dump({"meta": meta, "runs": runs}, fh, indent=0)
    print(report(runs))


if __name__ == "__main__":
    main()
