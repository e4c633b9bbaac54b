"""`convert --target cuda`'s graph on the CUDA provider against tree2mat's exact TreeEnsemble
graph (`--form treeensemble --target onnxruntime`) on the CPU provider, at one large batch: the
two graphs a user would ship to a GPU server and to a CPU one. Three of suite.py's workloads
(28 float features, 20 000 training rows); best of three runs after a warm-up; labels compared
with the library's predict on every scoring row.

    python benchmarks/cuda/target.py                     # 1 000 000 rows, 16 threads
    python benchmarks/cuda/target.py --rows 20000 --threads 2

suite.py at 1 000 000 rows did not finish one workload in 250 s on the GPU machine (it also
converts and times the peers and Hummingbird); this keeps to the two graphs. Without the CUDA
provider the "cuda" graph runs on the CPU, which checks the script, not the GPU.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    import lightgbm as lgb
    import onnxruntime as ort
    import xgboost as xgb
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier

    import tree2mat

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--threads", type=int, default=16, help="onnxruntime's intra-op threads (both graphs)")
    args = parser.parse_args()
    X, y = make_classification(20_000 + args.rows, 28, n_informative=14, random_state=0)
    X = X.astype(np.float32)
    scoring = X[20_000:]
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    cuda = [p for p in ("CUDAExecutionProvider", "CPUExecutionProvider") if p in ort.get_available_providers()]
    print(f"onnxruntime {ort.__version__}, providers for the cuda graph: {cuda}; {args.rows:,} rows, {args.threads} threads")

    def timed(model, providers):
        session = ort.InferenceSession(model.SerializeToString(), options, providers=providers)
        name = session.get_inputs()[0].name
        session.run(None, {name: scoring[:1000]})
        best, out = float("inf"), None
        for _ in range(3):
            start = time.perf_counter()
            out = session.run(None, {name: scoring})
            best = min(best, time.perf_counter() - start)
        return best, out[0]

    for name, estimator in [
        ("XGBClassifier(100, depth 6)", xgb.XGBClassifier(n_estimators=100, max_depth=6, random_state=0)),
        ("LGBMClassifier(100, 31 leaves)", lgb.LGBMClassifier(n_estimators=100, num_leaves=31, verbose=-1)),
        ("RandomForestClassifier(100, max_depth=8)", RandomForestClassifier(100, max_depth=8, n_jobs=args.threads, random_state=0)),
    ]:
        model = estimator.fit(X[:20_000], y[:20_000])
        on_gpu = tree2mat.convert(model, "auto", target="cuda")
        on_cpu = tree2mat.convert(model, "treeensemble", target="onnxruntime")
        form = {p.key: p.value for p in on_gpu.metadata_props}["tree2mat.form"]
        gpu_s, gpu_labels = timed(on_gpu, cuda)
        cpu_s, cpu_labels = timed(on_cpu, ["CPUExecutionProvider"])
        labels = model.predict(scoring)
        print(f"{name}: --target cuda ({form}) {args.rows / gpu_s:,.0f} rows/s; treeensemble on the CPU {args.rows / cpu_s:,.0f} rows/s; "
              f"ratio {cpu_s / gpu_s:.1f}; labels differing from the library {int((gpu_labels != labels).sum())} / {int((cpu_labels != labels).sum())}",
              flush=True)


if __name__ == "__main__":
    main()
