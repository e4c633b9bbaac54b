"""Train the pipeline demo from a seed: the diabetes table (442 patients, 10 columns; 5 % of the
body-mass and blood-pressure cells removed) through a ColumnTransformer (one-hot ``sex``; impute
and scale the rest) into a RandomForestClassifier of "progression above the median". Saves the
pipeline (joblib) and the rows to check it on (``rows.npy``: the table, holes included)."""

import sys
from pathlib import Path

import joblib
import numpy as np
from sklearn.compose import ColumnTransformer
from sklearn.datasets import load_diabetes
from sklearn.ensemble import RandomForestClassifier
from sklearn.impute import SimpleImputer
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler


def main(folder: str) -> None:
    data = load_diabetes(scaled=False)
    X, y = data.data.copy(), (data.target > np.median(data.target)).astype(int)
    rng = np.random.default_rng(0)
    names = list(data.feature_names)
    for column in ("bmi", "bp"):
        X[rng.random(len(X)) < 0.05, names.index(column)] = np.nan
    sex = [names.index("sex")]
    rest = [i for i in range(X.shape[1]) if i not in sex]
    pipeline = Pipeline([
        ("prepare", ColumnTransformer([
            ("sex", OneHotEncoder(handle_unknown="ignore"), sex),
            ("measures", make_pipeline(SimpleImputer(strategy="median"), StandardScaler()), rest),
        ])),
        ("forest", RandomForestClassifier(n_estimators=100, max_depth=8, random_state=0)),
    ]).fit(X, y)
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    joblib.dump(pipeline, out / "pipeline.joblib")
    np.save(out / "rows.npy", X)
    steps = ", ".join(f"{name}={type(step).__name__}" for name, step in pipeline.steps)
    print(f"trained Pipeline({steps}) on {X.shape[0]} rows x {X.shape[1]} columns -> {out / 'pipeline.joblib'}, {out / 'rows.npy'}")


if __name__ == "__main__":
    main(sys.argv[1])
