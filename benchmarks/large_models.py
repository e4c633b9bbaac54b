"""Issue 4's size targets, measured: a deep random forest and a large LightGBM model converted
with the default ``--form auto`` (which picks ``traverse`` for both: the matrix forms' constants
grow with nodes x leaves and do not fit).

For each model: conversion time, ONNX file size, peak resident memory of scoring 10 000 rows
in onnxruntime on the CPU (in a fresh process, so the figure is the scoring alone), and a
verify run (routing against the reference evaluator, outputs against the library). Run:
``python -m benchmarks.large_models --out large_models.json`` (about 10 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import tree2mat

SCORE = r"""
import resource, sys, time
import numpy as np, onnxruntime as ort
sess = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
X = np.load(sys.argv[2])
t = time.perf_counter()
sess.run(None, {"input": X})
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def models(seed: int):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(50_000, 28))
    y = X[:, 0] * 2 + np.sin(X[:, 1] * 3) + X[:, 2] * X[:, 3] + rng.normal(scale=0.1, size=50_000)

    def forest():
        from sklearn.ensemble import RandomForestRegressor
        return RandomForestRegressor(n_estimators=100, min_samples_leaf=1, n_jobs=-1, random_state=seed).fit(X, y)

    def lightgbm():
        import lightgbm as lgb
        return lgb.LGBMRegressor(n_estimators=1000, num_leaves=255, verbose=-1, random_state=seed).fit(X, y)

    return X, {"RandomForestRegressor(100, min_samples_leaf=1), 50000 x 28": forest,
               "LGBMRegressor(1000, num_leaves=255), 50000 x 28": lightgbm}


def measure(name: str, fit, X: np.ndarray, verify_rows: int) -> dict:
    t = time.perf_counter()
    model = fit()
    fit_s = time.perf_counter() - t
    ens = tree2mat.load(model)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    t = time.perf_counter()
    onx = tree2mat.convert(model)  # --form auto
    convert_s = time.perf_counter() - t
    meta = {p.key: p.value for p in onx.metadata_props}
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        tree2mat.save(onx, path)
        size = path.stat().st_size
        data = Path(tmp) / "X.npy"
        np.save(data, X[:10_000].astype(np.float32))
        out = subprocess.run([sys.executable, "-c", SCORE, str(path), str(data)], capture_output=True, text=True, check=True)
        score_s, score_rss = (float(v) for v in out.stdout.split())
    t = time.perf_counter()
    report = tree2mat.verify(model, onx, rows=verify_rows)
    verify_s = time.perf_counter() - t
    return {
        "model": name, "form": meta["tree2mat.form"], "auto": meta.get("tree2mat.auto"), "trees": ens.n_trees, "max_leaves": max(t.n_leaves for t in ens.trees),
        "max_depth": ens.max_depth(),
        "fit_s": round(fit_s, 1), "convert_s": round(convert_s, 1),
        # Process peaks: before converting (fitting included) and after; equal when converting
        # needed no more than fitting did.
        "peak_rss_before_convert_gib": round(rss0 / 2**30, 2), "peak_rss_after_convert_gib": round(rss1 / 2**30, 2),
        "file_mib": round(size / 2**20, 1), "score_10000_rows_s": round(score_s, 2),
        "score_10000_rows_peak_rss_gib": round(score_rss / 2**30, 2),
        "verify_rows": report.rows, "verify_s": round(verify_s, 1), "verify_passed": report.passed,
        "verify_summary": report.summary(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verify-rows", type=int, default=1000)
    parser.add_argument("--model", type=int, help="measure only model number K (in this process)")
    args = parser.parse_args(argv)
    X, todo = models(args.seed)
    if args.model is not None:  # one model per process: peak memory figures are its own
        name, fit = list(todo.items())[args.model]
        print(json.dumps(measure(name, fit, X, args.verify_rows)))
        return 0
    results = []
    for k, name in enumerate(todo):
        print(f"== {name}", file=sys.stderr, flush=True)
        cmd = [sys.executable, __file__, "--model", str(k), "--seed", str(args.seed), "--verify-rows", str(args.verify_rows)]
        results.append(json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout))
        print(json.dumps(results[-1], indent=1), flush=True)
    doc = {"machine": f"{platform.machine()}, {len(__import__('os').sched_getaffinity(0))} CPUs, {platform.system()}",
           "python": platform.python_version(), "tree2mat": tree2mat.__version__, "results": results}
    if args.out:
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
