"""The runtime matrix's five models: the models the portability issue measured. A random forest,
and, fitted on data with NaN cells, scikit-learn's HistGradientBoostingClassifier, an
XGBClassifier and a 3-class LGBMClassifier; a GradientBoostingRegressor. runtime_matrix.py runs
them on every runtime for docs/runtimes.md's table, tests/runtimes checks every claim on them."""

from __future__ import annotations

import functools

import lightgbm as lgb
import numpy as np
import xgboost as xgb
from sklearn.datasets import make_classification, make_regression
from sklearn.ensemble import GradientBoostingRegressor, HistGradientBoostingClassifier, RandomForestClassifier

from benchmarks._common import with_holes


def matrix_data(classes: int, nan: bool) -> tuple[np.ndarray, np.ndarray]:
    if classes:
        X, y = make_classification(1500, 8, n_informative=5, n_classes=classes, random_state=0)
    else:
        X, y = make_regression(1500, 8, n_informative=5, noise=1.0, random_state=0)
    return (with_holes(X, np.random.default_rng(0)) if nan else X), y


MODELS = {
    "RandomForestClassifier": lambda: RandomForestClassifier(n_estimators=20, max_depth=7, random_state=0).fit(*matrix_data(2, False)),
    "HistGradientBoostingClassifier, NaN": lambda: HistGradientBoostingClassifier(max_iter=20, random_state=0).fit(*matrix_data(2, True)),
    "XGBClassifier, NaN": lambda: xgb.XGBClassifier(n_estimators=20, max_depth=5).fit(*matrix_data(2, True)),
    "LGBMClassifier 3 classes, NaN": lambda: lgb.LGBMClassifier(n_estimators=15, num_leaves=15, verbose=-1).fit(*matrix_data(3, True)),
    "GradientBoostingRegressor": lambda: GradientBoostingRegressor(n_estimators=20, max_depth=4, random_state=0).fit(*matrix_data(0, False)),
}


@functools.cache
def fitted(name: str):
    """The model ``name`` of MODELS, fitted (once a process)."""
    return MODELS[name]()
