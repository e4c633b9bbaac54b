"""Digests of the graphs tree2mat writes for a fixed set of models, forms and options: a
refactoring that must not change behaviour leaves every digest as it was.

    python -m benchmarks.graph_digests record benchmarks/graph_digests.json   # before
    python -m benchmarks.graph_digests check benchmarks/graph_digests.json    # after

The models are the committed library-written fixtures (read without their libraries) and
scikit-learn models fitted from seeds (so the digests hold for the versions in constraints.txt);
a digest is the SHA-256 of the serialized ONNX model, metadata included. ``check`` lists every
case whose graph differs (or that now fails, or newly converts) and exits 1 if any does.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

import tree2mat

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

#: (label, options of tree2mat.convert)
OPTIONS: list[tuple[str, dict[str, Any]]] = [
    ("auto", {}),
    ("sign", {"form": "sign"}),
    ("bitvector", {"form": "bitvector"}),
    ("traverse", {"form": "traverse"}),
    ("soft", {"form": "soft"}),
    ("softmax-t0.5", {"form": "softmax", "temperature": 0.5}),
    ("sign-float64", {"form": "sign", "dtype": "float64"}),
    ("traverse-leaves", {"form": "traverse", "leaves": True}),
    ("bitvector-int8", {"form": "bitvector", "matmul": "int8"}),
    ("sign-float16-raw", {"form": "sign", "matmul": "float16", "raw": True}),
    ("traverse-opset18", {"form": "traverse", "opset": 18}),
]


def _sklearn_models() -> Iterator[tuple[str, Callable[[], Any]]]:
    from sklearn.datasets import make_classification, make_regression
    from sklearn.ensemble import (
        GradientBoostingRegressor,
        HistGradientBoostingClassifier,
        IsolationForest,
        RandomForestClassifier,
    )
    from sklearn.tree import DecisionTreeRegressor

    X, y = make_classification(n_samples=400, n_features=6, n_informative=4, n_classes=3, random_state=0)
    X[::17, 2] = np.nan
    Xr, yr = make_regression(n_samples=300, n_features=5, random_state=1)
    yield "RandomForestClassifier", lambda: RandomForestClassifier(n_estimators=8, max_depth=5, random_state=0).fit(X, y)
    yield "HistGradientBoostingClassifier", lambda: HistGradientBoostingClassifier(max_iter=10, random_state=0).fit(X, y)
    yield "IsolationForest", lambda: IsolationForest(n_estimators=10, random_state=0).fit(np.nan_to_num(X))
    yield "GradientBoostingRegressor", lambda: GradientBoostingRegressor(n_estimators=10, max_depth=3, random_state=0).fit(Xr, yr)
    yield "DecisionTreeRegressor", lambda: DecisionTreeRegressor(max_depth=6, random_state=0).fit(Xr, yr)


def _models() -> Iterator[tuple[str, Callable[[], Any]]]:
    for path in sorted(FIXTURES.glob("*")):
        if path.suffix in (".txt", ".json", ".ubj"):
            yield path.name, (lambda p=path: str(p))
    yield from _sklearn_models()


def _pipeline() -> Any:
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = make_classification(n_samples=300, n_features=5, random_state=2)
    return make_pipeline(StandardScaler(), RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0)).fit(X, y)


def digests() -> dict[str, str]:
    out: dict[str, str] = {}
    cases: list[tuple[str, Callable[[], Any], list[tuple[str, dict[str, Any]]]]] = [
        (name, make, OPTIONS) for name, make in _models()
    ]
    cases.append(("Pipeline(StandardScaler, RandomForestClassifier)", _pipeline, [("auto", {}), ("sign", {"form": "sign"})]))
    for name, make, options in cases:
        model = make()
        for label, kwargs in options:
            key = f"{name} | {label}"
            try:
                graph = tree2mat.convert(model, **kwargs)
            except tree2mat.Tree2MatError as exc:
                out[key] = f"refused: {type(exc).__name__}"
                continue
            out[key] = hashlib.sha256(graph.SerializeToString()).hexdigest()
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("record", "check"):
        print(__doc__, file=sys.stderr)
        return 2
    mode, path = argv[0], Path(argv[1])
    now = digests()
    if mode == "record":
        path.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
        print(f"{len(now)} graphs recorded in {path}")
        return 0
    before = json.loads(path.read_text())
    changed = sorted(k for k in before.keys() | now.keys() if before.get(k) != now.get(k))
    for key in changed:
        print(f"differs: {key}: {before.get(key, 'absent')} -> {now.get(key, 'absent')}")
    print(f"{len(now) - len(changed)} of {len(before.keys() | now.keys())} graphs as recorded")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
