"""CatBoost models timed with ``tree2mat bench``: tree2mat's ``oblivious`` form and ``--form
auto`` next to CatBoost's own ONNX export (an ``ai.onnx.ml`` TreeEnsemble graph) and CatBoost's
``predict``, in the same run, at batch 1, 1 000 and 100 000 rows, onnxruntime on ``--threads``
intra-op threads (CatBoost's predict with its default thread_count), with the rows each contender gets wrong
against CatBoost's predict. The issue's target: oblivious >= 1.0 x the TreeEnsemble graph at
batch 100 000.

    python -m benchmarks.catboost_speed --out benchmarks/catboost_speed.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

import tree2mat
from tree2mat.bench import bench


def models(seed: int) -> dict:
    import catboost as cb

    common = dict(random_seed=seed, verbose=0, allow_writing_files=False, thread_count=2)
    return {
        "binary, depth 6 x 300 (CatBoost's default depth)": lambda: cb.CatBoostClassifier(iterations=300, depth=6, **common),
        "binary, depth 8 x 300": lambda: cb.CatBoostClassifier(iterations=300, depth=8, **common),
        "3 classes, depth 6 x 200": lambda: cb.CatBoostClassifier(iterations=200, depth=6, loss_function="MultiClass", **common),
        "regressor, depth 6 x 1000": lambda: cb.CatBoostRegressor(iterations=1000, depth=6, **common),
        "regressor, depth 4 x 500": lambda: cb.CatBoostRegressor(iterations=500, depth=4, **common),
    }


def data(name: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import make_classification, make_regression

    if "regressor" in name:
        return make_regression(20_000, 20, n_informative=10, noise=1.0, random_state=seed)
    classes = 3 if "3 classes" in name else 2
    return make_classification(20_000, 20, n_informative=10, n_classes=classes, random_state=seed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="the first model only")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    import catboost

    out = {
        "date": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()}, {platform.system()}, {os.cpu_count()} cores",
        "tree2mat": tree2mat.__version__, "catboost": catboost.__version__, "threads": args.threads, "rows": args.rows, "models": {},
    }
    made = models(args.seed)
    for name in list(made)[: 1 if args.quick else None]:
        X, y = data(name, args.seed)
        model = made[name]().fit(X, y)
        start = time.perf_counter()
        report = bench(model, rows=args.rows, forms=("oblivious", "auto"), threads=args.threads, repeat=args.repeat, seed=args.seed)
        print(f"{name} ({time.perf_counter() - start:.0f} s)", file=sys.stderr)
        print(report.summary(), file=sys.stderr)
        out["models"][name] = json.loads(report.to_json())
    text = json.dumps(out, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
