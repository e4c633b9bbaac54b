"""The experiments of Hehn, Kooij & Hamprecht, *End-to-End Learning of Decision Trees and Forests*,
in spirit, with tree2mat.learn on datasets scikit-learn ships (digits, breast cancer, wine):

- Fig. 2 (section 3.1): held-out accuracy of a greedy tree (scikit-learn's
  DecisionTreeClassifier, axis-aligned, max_depth d) and of the same tree fine-tuned end to end
  and hardened (oblique splits, the paper's schedule: gamma from 1, +0.1 per epoch), at depths
  2..10 (the paper: 2..18, oblique greedy trees of its own as the start);
- Table 1 (section 3.5): a small forest (scikit-learn's RandomForestClassifier) fine-tuned with
  steepness increase 0 (gamma stays 1), 0.01 and 0.1 per epoch, held-out accuracy of the hardened
  forest.

Each over repeated stratified splits, 75 % training rows (the model fitted and fine-tuned there),
25 % test rows (measured only). The fine-tuned models' accuracies are the hardened IR's, by the
reference evaluator.

    python benchmarks/e2e_paper.py --out benchmarks/e2e_paper.json [--repeats 3] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np
import scipy
import sklearn
from sklearn.datasets import load_breast_cancer, load_digits, load_wine
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import train_test_split
from sklearn.tree import DecisionTreeClassifier

from tree2mat import __version__, learn
from tree2mat.ir import evaluate

DATASETS = {"digits": load_digits, "breast_cancer": load_breast_cancer, "wine": load_wine}
DEPTHS = tuple(range(2, 11))
INCREASES = (0.0, 0.01, 0.1)
#: The paper's Table 1 (validation accuracy, 15 / 30 / 45 epochs) by steepness increase.
PAPER_TABLE_1 = {
    "Letter": {0.0: (76.7, 81.1, 84.7), 0.01: (81.8, 89.2, 92.5), 0.1: (92.6, 94.5, 95.5)},
    "USPS": {0.0: (88.5, 92.3, 94.1), 0.01: (91.5, 95.3, 96.3), 0.1: (96.1, 96.6, 96.7)},
    "MNIST": {0.0: (97.9, 98.1, 98.1), 0.01: (97.9, 98.1, 98.1), 0.1: (97.7, 97.8, 97.4)},
}


def _accuracy(ens, X, y) -> float:
    return float(np.mean(evaluate.predict(ens, X)["label"] == y))


def fig2(name: str, repeats: int, epochs: int, depths: tuple[int, ...]) -> list[dict]:
    X, y = DATASETS[name](return_X_y=True)
    out = []
    for depth in depths:
        greedy, tuned, train_g, train_t, seconds = [], [], [], [], []
        for seed in range(repeats):
            Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=seed, stratify=y)
            model = DecisionTreeClassifier(max_depth=depth, random_state=seed).fit(Xtr, ytr)
            start = time.perf_counter()
            result = learn.learn(model, Xtr, ytr, epochs=epochs, seed=seed)
            seconds.append(time.perf_counter() - start)
            greedy.append(float(np.mean(model.predict(Xte) == yte)))
            tuned.append(_accuracy(result.ensemble, Xte, yte))
            train_g.append(result.initial_train)
            train_t.append(result.final.train_deterministic)
        out.append({"dataset": name, "depth": depth, "greedy_test": greedy, "tuned_test": tuned, "greedy_train": train_g,
                    "tuned_train": train_t, "seconds": seconds})
        print(f"fig2 {name} depth {depth}: greedy {np.mean(greedy):.4f} -> tuned {np.mean(tuned):.4f} (train {np.mean(train_g):.4f} -> "
              f"{np.mean(train_t):.4f}), {np.mean(seconds):.1f} s per fit", file=sys.stderr, flush=True)
    return out


def table1(name: str, repeats: int, epochs: int, trees: int, depth: int) -> list[dict]:
    X, y = DATASETS[name](return_X_y=True)
    out = []
    for increase in INCREASES:
        forest, tuned, seconds = [], [], []
        for seed in range(repeats):
            Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=seed, stratify=y)
            model = RandomForestClassifier(n_estimators=trees, max_depth=depth, random_state=seed).fit(Xtr, ytr)
            start = time.perf_counter()
            result = learn.learn(model, Xtr, ytr, epochs=epochs, steepness_increase=increase, seed=seed)
            seconds.append(time.perf_counter() - start)
            forest.append(float(np.mean(model.predict(Xte) == yte)))
            tuned.append(_accuracy(result.ensemble, Xte, yte))
        out.append({"dataset": name, "steepness_increase": increase, "forest_test": forest, "tuned_test": tuned, "seconds": seconds})
        print(f"table1 {name} increase {increase}: forest {np.mean(forest):.4f} -> tuned {np.mean(tuned):.4f}, {np.mean(seconds):.1f} s per fit",
              file=sys.stderr, flush=True)
    return out


def versions() -> dict:
    return {"tree2mat": __version__, "python": platform.python_version(), "numpy": np.__version__, "scipy": scipy.__version__,
            "scikit-learn": sklearn.__version__}


def write(doc: dict, out: str) -> None:
    with open(out, "w") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")
    print(f"wrote {out} in {doc['seconds']} s", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="benchmarks/e2e_paper.json")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=50)
    parser.add_argument("--trees", type=int, default=10)
    parser.add_argument("--forest-depth", type=int, default=6)
    parser.add_argument("--quick", action="store_true", help="one split, depths 2, 4, 6, 10 epochs (a smoke run)")
    args = parser.parse_args()
    repeats, epochs, depths = (1, 10, (2, 4, 6)) if args.quick else (args.repeats, args.epochs, DEPTHS)
    start = time.perf_counter()
    rows = [r for name in DATASETS for r in fig2(name, repeats, epochs, depths)]
    forests = [r for name in DATASETS for r in table1(name, repeats, epochs, args.trees, args.forest_depth)]
    doc = {
        "what": "Hehn et al. Fig. 2 and Table 1 in spirit: greedy (scikit-learn) vs end-to-end fine-tuned deterministic trees and forests",
        "date": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()}, {os.cpu_count()} cores, no GPU",
        "versions": versions(),
        "settings": {"repeats": repeats, "epochs": epochs, "test_size": 0.25, "learning_rate": learn.LEARNING_RATE, "batch_size": learn.BATCH_SIZE,
                     "steepness": learn.STEEPNESS, "steepness_increase_trees": learn.STEEPNESS_INCREASE, "forest_trees": args.trees,
                     "forest_depth": args.forest_depth, "splits": "oblique"},
        "paper_table_1": {k: {str(i): v for i, v in d.items()} for k, d in PAPER_TABLE_1.items()},
        "trees": rows, "forests": forests, "seconds": round(time.perf_counter() - start, 1),
    }
    write(doc, args.out)


if __name__ == "__main__":
    main()
