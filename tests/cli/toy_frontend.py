"""A frontend written as a new frontend is written: this one file and one entry in
``FRONTENDS`` (test_extending.py adds the entry). Its "library" is here too: ``Stumps``, a sum of
one-split trees with its own predict, and its own model file, a text headed ``stumps``:

    stumps
    features=3
    0 0.5 1.25 -2.0 left      (feature, threshold, value if x <= threshold, value otherwise,
    2 -1.0 0.5 3.0 right       and where a missing value goes)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tree2mat.errors import ModelFileError
from tree2mat.frontends._spec import FileFormat, FrontendSpec
from tree2mat.frontends._support import SupportRow
from tree2mat.ir.build import tree_from_nodes
from tree2mat.ir.core import Aggregation, Comparison, Ensemble, Link, Task


@dataclass
class Stumps:
    n_features: int
    stumps: list[tuple[int, float, float, float, bool]]  # feature, threshold, left, right, missing goes left

    def predict(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, np.float64)
        out = np.zeros(X.shape[0])
        for f, t, left, right, nan_left in self.stumps:
            x = X[:, f]
            goes_left = np.where(np.isnan(x), nan_left, x <= t)
            out += np.where(goes_left, left, right)
        return out

    def save(self, path: Path) -> None:
        lines = ["stumps", f"features={self.n_features}"]
        lines += [f"{f} {t!r} {a!r} {b!r} {'left' if n else 'right'}" for f, t, a, b, n in self.stumps]
        path.write_text("\n".join(lines) + "\n")


def read(path: Path) -> Stumps:
    lines = path.read_text().split("\n")
    try:
        n = int(lines[1].removeprefix("features="))
        stumps = [(int(f), float(t), float(a), float(b), side == "left") for f, t, a, b, side in (ln.split() for ln in lines[2:] if ln)]
    except (IndexError, ValueError) as exc:
        raise ModelFileError(f"{path}: ill-formed stumps file: {exc}") from exc
    return Stumps(n, stumps)


def to_ensemble(model: Stumps) -> Ensemble:
    trees = tuple(
        tree_from_nodes(
            np.array([1, -1, -1]), np.array([2, -1, -1]), np.array([False, True, True]), np.array([f, 0, 0]),
            np.array([t, 0.0, 0.0]), np.array([nan_left, False, False]), np.array([[0.0], [a], [b]]),
        )
        for f, t, a, b, nan_left in model.stumps
    )
    return Ensemble(
        trees=trees, n_features=model.n_features, n_outputs=1, output_index=np.zeros(len(trees), np.int64),
        comparison=Comparison.LE, source_dtype=np.dtype(np.float64), aggregation=Aggregation.SUM,
        base_score=np.zeros(1), link=Link.IDENTITY, task=Task.REGRESSION, source="stumps",
    ).validate()


def reference_outputs(model: Stumps, X: np.ndarray, raw: bool, ens: Ensemble) -> dict[str, np.ndarray]:
    return {"variable": model.predict(X).reshape(-1, 1)}


def native_model(path: Path, ens: Ensemble) -> Any:
    return read(path) if ens.source == "stumps" and path.read_bytes()[:7] == b"stumps\n" else None


SPEC = FrontendSpec(
    name="stumps",
    library="Stumps",
    handles=lambda model: isinstance(model, Stumps),
    to_ensemble=to_ensemble,
    reference_outputs=reference_outputs,
    estimators={"Stumps": SupportRow("regression", "NaN (left or right per stump)", "a toy frontend")},
    formats=(FileFormat("stumps text", (".stumps",), sniff=lambda head: head.startswith(b"stumps\n"), load=read),),
    native_model=native_model,
)
