"""Fig. 6 of Hehn, Kooij & Hamprecht, *End-to-End Learning of Decision Trees and Forests*
(section 3.6), in spirit: accuracy against the split functions a forest evaluates for one row at
test time, for forests of T = 1, 3, 5, 10 trees.

The paper's E2EDF: each tree grown by its greedy algorithm (section 2.5) from a single root to
depth at most 10, each new split trained E epochs, then the whole tree fine-tuned 3E epochs
(sections 3.5, 3.6), oblique splits on a feature subset drawn per split, steepness from 1, +0.1
per epoch; trees independent, each on all training rows. Here: ``tree2mat.learn.learn`` with
``grow=Growth(max_depth=10, epochs=E)`` on a forest of single-leaf trees (scikit-learn's
RandomForestClassifier with ``min_samples_split`` above the number of rows: only its classes and
its number of trees are used), ``epochs=3E``; the forest of T trees is the first T of the 10
(independent trees: a forest of T trees as it would be drawn).

"Split evaluations" is the paper's x-axis: the split functions evaluated for one row at test time,
summed over the trees. A deterministic tree evaluates the splits on the row's path (measured here,
per test row, by the hardened IR's reference evaluator; the paper counts at most depth x T); a
probabilistic one every split it has (sNDF: 2^10 - 1 per tree of depth 10). Measured for the
fine-tuned forest (deterministic, as written, and probabilistic at the last steepness), the greedy
forest before fine-tuning, and scikit-learn's RandomForestClassifier (axis-aligned, max_depth 10,
the paper's RF baseline in spirit).

Data: digits (8x8 handwritten digits, 1 797 rows, 10 classes) stands in for USPS (16x16, 9 298
rows) and MNIST (28x28, 70 000 rows); scikit-learn ships nothing like Letter (26 classes). Repeated
stratified splits, 75 % training rows, 25 % test rows.

    python -m benchmarks.e2e_fig6 --out benchmarks/e2e_fig6.json [--repeats 2] [--epochs 5] [--features-per-split 16]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np
from sklearn.datasets import load_digits
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import train_test_split

from benchmarks.e2e_paper import versions, write
from tree2mat import learn
from tree2mat.ir import evaluate

TREES = (1, 3, 5, 10)
DEPTH = 10
#: What the paper's text says of its Fig. 6 (the figure's points are not in the text).
PAPER = {
    "splits_per_tree": {"Letter": "758 +- 1", "USPS": "372 +- 2", "MNIST": "938 +- 2"},
    "sNDF_splits_per_tree": 1023,
    "claims": [
        "E2EDF has a higher average accuracy than RF and BT on all datasets, the highest of all on MNIST",
        "sNDF is more accurate on Letter and USPS at orders of magnitude more split evaluations (1023 per tree)",
        "E2EDF's forests evaluate up to 1000 splits a row (USPS); T = 10 trees are already competitive on MNIST and USPS",
    ],
}


def _forest_points(ens, soft, X, y, mean, scale, gamma) -> list[dict]:
    """Per T: the first T trees' test accuracy (deterministic, by the reference evaluator), the
    splits evaluated per row (mean over the rows of the path lengths summed over the trees), and the
    probabilistic forest's accuracy and split count (every split of the T trees)."""
    leaves = evaluate.apply(ens, X)  # [N, trees]
    probs = np.stack([t.value[leaves[:, k]] for k, t in enumerate(ens.trees)], axis=1)  # [N, trees, K]
    depths = np.stack([t.leaf_depths()[leaves[:, k]] for k, t in enumerate(ens.trees)], axis=1)
    classes = ens.classes[0]
    Z = (X - mean) / scale
    out = []
    for T in TREES:
        point = {"trees": T, "accuracy": float(np.mean(classes[np.argmax(probs[:, :T].mean(axis=1), axis=1)] == y)),
                 "splits_per_row": float(depths[:, :T].sum(axis=1).mean()), "splits_bound": int(sum(int(t.leaf_depths().max()) for t in ens.trees[:T]))}
        if soft is not None:
            p = learn.forest_proba(list(soft[:T]), Z, gamma)
            point["probabilistic_accuracy"] = float(np.mean(classes[np.argmax(p, axis=1)] == y))
            point["probabilistic_splits"] = int(sum(t.n_internal for t in soft[:T]))
        out.append(point)
    return out


def _random_forest(Xtr, ytr, Xte, yte, seed) -> list[dict]:
    model = RandomForestClassifier(max(TREES), max_depth=DEPTH, random_state=seed).fit(Xtr, ytr)
    out = []
    for T in TREES:
        probs = np.mean([t.predict_proba(Xte) for t in model.estimators_[:T]], axis=0)
        path = sum(t.decision_path(Xte).sum(axis=1).A1 - 1 for t in model.estimators_[:T])  # (nodes on the path minus the leaf)
        out.append({"trees": T, "accuracy": float(np.mean(model.classes_[np.argmax(probs, axis=1)] == yte)), "splits_per_row": float(np.mean(path))})
    return out


def run(repeats: int, epochs: int, features_per_split: int) -> list[dict]:
    X, y = load_digits(return_X_y=True)
    rows = []
    for seed in range(repeats):
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=seed, stratify=y)
        roots = RandomForestClassifier(max(TREES), min_samples_split=len(Xtr) + 1, random_state=seed).fit(Xtr, ytr)
        growth = learn.Growth(max_depth=DEPTH, epochs=epochs)
        mean, scale = learn.standardization(Xtr)
        start = time.perf_counter()
        greedy = learn.learn(roots, Xtr, ytr, epochs=0, grow=growth, features_per_split=features_per_split, seed=seed)
        grown_s = time.perf_counter() - start
        tuned = learn.learn(roots, Xtr, ytr, epochs=3 * epochs, grow=growth, features_per_split=features_per_split, seed=seed)
        tuned_s = time.perf_counter() - start - grown_s
        rows.append({
            "split": seed, "greedy": _forest_points(greedy.ensemble, None, Xte, yte, mean, scale, 0.0),
            "tuned": _forest_points(tuned.ensemble, tuned.soft, Xte, yte, mean, scale, tuned.final.steepness),
            "random_forest": _random_forest(Xtr, ytr, Xte, yte, seed),
            "splits_per_tree": [t.n_internal for t in tuned.ensemble.trees], "failed_stumps": sum(not s.split for s in tuned.growth),
            "seconds": {"greedy": round(grown_s, 1), "grow_and_tune": round(tuned_s, 1)},
        })
        last = rows[-1]
        print(f"split {seed}: T=10 greedy {last['greedy'][-1]['accuracy']:.4f}, tuned {last['tuned'][-1]['accuracy']:.4f} "
              f"({last['tuned'][-1]['splits_per_row']:.1f} splits a row), RF {last['random_forest'][-1]['accuracy']:.4f}; "
              f"{grown_s:.0f} s + {tuned_s:.0f} s", file=sys.stderr, flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="benchmarks/e2e_fig6.json")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=5, help="epochs per greedy stump; the grown tree is fine-tuned 3x as many")
    parser.add_argument("--features-per-split", type=int, default=16)
    args = parser.parse_args()
    start = time.perf_counter()
    rows = run(args.repeats, args.epochs, args.features_per_split)
    doc = {
        "what": "Hehn et al. Fig. 6 in spirit: test accuracy vs split functions evaluated per row, forests of 1, 3, 5, 10 trees on digits",
        "date": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()}, {os.cpu_count()} cores, no GPU",
        "versions": versions(),
        "settings": {"repeats": args.repeats, "test_size": 0.25, "max_depth": DEPTH, "grow_epochs": args.epochs, "tune_epochs": 3 * args.epochs,
                     "features_per_split": args.features_per_split, "grow_attempts": learn.GROW_ATTEMPTS, "learning_rate": learn.LEARNING_RATE,
                     "batch_size": learn.BATCH_SIZE, "steepness": learn.STEEPNESS, "steepness_increase": learn.STEEPNESS_INCREASE, "splits": "oblique"},
        "paper": PAPER, "splits": rows, "seconds": round(time.perf_counter() - start, 1),
    }
    write(doc, args.out)


if __name__ == "__main__":
    main()
