"""Synthesized-row `verify` of big models, and where its time goes (issue 36): an
XGBClassifier(2 000 trees, depth 6) and an LGBMClassifier(2 000 trees, 63 leaves), trained on
``make_classification`` (5 000 rows, 20 features), converted with the defaults, verified with the
defaults (1 000 random rows and the threshold, NaN and extreme rows): the wall time of
``tree2mat verify MODEL GRAPH`` as a user runs it (a process of its own: Python, tree2mat and
the library imported), of ``tree2mat.verify`` in this process (the library already imported),
then of a run under cProfile and the cumulative time of the phases named below in it.

    python -m benchmarks.verify_speed
"""

from __future__ import annotations

import cProfile
import platform
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: (what, the function whose cumulative time it is): the phases of one verify.
PHASES = (
    ("reading the model, importing the library", "load_subject"),
    ("synthesizing the rows", "synthesize"),
    ("the library's predictions", "reference_outputs"),
    ("the graph, every walk", "run"),
    ("the leaves routing is checked against (the library's, or the reference evaluator's)", "leaves"),
    ("the graph's leaf ids (routing)", "leaf_ids_of"),
)


def main() -> None:
    import lightgbm as lgb
    import onnxruntime
    import xgboost as xgb
    from sklearn.datasets import make_classification

    import tree2mat

    X, y = make_classification(5000, 20, n_informative=10, random_state=0)
    folder = Path(tempfile.mkdtemp())
    xgb.XGBClassifier(n_estimators=2000, max_depth=6, n_jobs=1).fit(X, y).save_model(folder / "xgb.json")
    lgb.LGBMClassifier(n_estimators=2000, num_leaves=63, verbose=-1, n_jobs=1).fit(X, y).booster_.save_model(folder / "lgb.txt")
    print(f"{platform.processor() or platform.machine()}, {platform.system()}; tree2mat {tree2mat.__version__}, onnxruntime {onnxruntime.__version__}, "
          f"XGBoost {xgb.__version__}, LightGBM {lgb.__version__}")
    for name in ("xgb.json", "lgb.txt"):
        path = folder / name
        tree2mat.save(tree2mat.convert(path), folder / "g.onnx")
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "from tree2mat.cli import main; main()", "verify", str(path), str(folder / "g.onnx")],
                       check=True, stdout=subprocess.DEVNULL)
        command = time.perf_counter() - start
        start = time.perf_counter()
        tree2mat.verify(path, folder / "g.onnx")
        plain = time.perf_counter() - start
        profile = cProfile.Profile()
        start = time.perf_counter()
        profile.enable()
        report = tree2mat.verify(path, folder / "g.onnx")
        profile.disable()
        wall = time.perf_counter() - start
        stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
        cumulative: dict[str, float] = {}
        for (file, _, function), (_, _, _, cum, _) in stats.items():
            if "tree2mat" in file or function == "reference_outputs":
                cumulative[function] = max(cumulative.get(function, 0.0), cum)
        parts = "; ".join(f"{what} {cumulative.get(fn, 0.0):.1f} s" for what, fn in PHASES)
        print(f"{name}: {report.rows:,} rows, {'PASS' if report.passed else 'FAIL'}, the command {command:.1f} s, in this process {plain:.1f} s; "
              f"{wall:.1f} s under the profiler: {parts}")


if __name__ == "__main__":
    main()
