"""Train the demo model from a seed: a HistGradientBoostingClassifier on breast_cancer with
missing values, a categorical feature and 100 trees; saved with joblib."""

import sys

import joblib
import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.ensemble import HistGradientBoostingClassifier


def main(path: str) -> None:
    X, y = load_breast_cancer(return_X_y=True)
    rng = np.random.default_rng(0)
    X = X.copy()
    X[rng.random(X.shape) < 0.05] = np.nan  # 5 % missing values
    X[:, 0] = np.digitize(X[:, 0], [10, 12, 14, 16, 20])  # a categorical column: codes 0..5
    model = HistGradientBoostingClassifier(max_iter=100, categorical_features=[0], random_state=0)
    model.fit(X, y)
    joblib.dump(model, path)
    print(f"trained {type(model).__name__} ({model.n_iter_} trees, {X.shape[1]} features) -> {path}")


if __name__ == "__main__":
    main(sys.argv[1])
