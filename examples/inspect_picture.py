"""Regenerate the pictures of `tree2mat inspect MODEL --tree 0 --png FILE` in docs/: a six-leaf
DecisionTreeClassifier on iris drawn in full (docs/inspect_tree.png, shown in the README) and a
255-leaf DecisionTreeRegressor, summarized (docs/inspect_tree_255.png). Models from a seed, drawn
through the command line; the same matplotlib gives the same bytes.

    python examples/inspect_picture.py [DOCS_DIR]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import joblib
from sklearn.datasets import load_iris, make_regression
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from tree2mat.cli import main as tree2mat_cli

DOCS = Path(__file__).resolve().parent.parent / "docs"


def models() -> dict[str, tuple[str, object]]:
    """Picture name -> (model file name shown in the title, fitted model)."""
    X, y = load_iris(return_X_y=True, as_frame=True)  # a frame: the pictures name the features
    six = DecisionTreeClassifier(max_leaf_nodes=6, random_state=0).fit(X, y)
    X, y = make_regression(n_samples=4000, n_features=10, random_state=0)
    big = DecisionTreeRegressor(max_leaf_nodes=255, random_state=0).fit(X, y)
    return {"inspect_tree.png": ("iris_tree.joblib", six), "inspect_tree_255.png": ("regression_tree.joblib", big)}


def main(docs: Path = DOCS) -> int:
    docs.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for picture, (name, model) in models().items():
            path = Path(tmp) / name
            joblib.dump(model, path)
            code = tree2mat_cli(["inspect", str(path), "--tree", "0", "--png", str(docs / picture)])
            if code:
                return code
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else DOCS))
