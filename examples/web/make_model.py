"""The model the browser example scores: a HistGradientBoostingClassifier fitted on scikit-learn's
breast cancer table with holes (NaN cells), converted by tree2mat (the default graph), and the
rows to score with scikit-learn's own labels and probabilities beside them.

    python examples/web/make_model.py examples/web    # writes model.onnx and rows.json there
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.ensemble import HistGradientBoostingClassifier

import tree2mat


def main(out: Path) -> None:
    data = load_breast_cancer()
    rng = np.random.default_rng(0)
    X = data.data.copy()
    X[rng.random(X.shape) < 0.05] = np.nan
    model = HistGradientBoostingClassifier(max_iter=50, random_state=0).fit(X, data.target)
    out.mkdir(parents=True, exist_ok=True)
    tree2mat.save(tree2mat.convert(model), out / "model.onnx")
    rows = X[:: 8].astype(np.float32)  # 72 rows, some with NaN
    doc = {
        "features": [str(f) for f in data.feature_names],
        "classes": [str(c) for c in data.target_names],
        "rows": [[None if np.isnan(v) else float(v) for v in row] for row in rows],
        "expected": {
            "label": model.predict(rows).tolist(),
            "probabilities": model.predict_proba(rows).tolist(),
        },
    }
    (out / "rows.json").write_text(json.dumps(doc))
    print(f"wrote {out / 'model.onnx'} and {out / 'rows.json'} ({len(rows)} rows)")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent))
