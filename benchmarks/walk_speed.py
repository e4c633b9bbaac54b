"""traverse's two walks, each forced, against the graph before issue 16: p50 latency at the given
batches on suite.py's workloads (onnxruntime CPU, 2 threads, the three graphs alternating in one
process). Where the small batches' walk (the flat one) pays and where it stops paying.

    python benchmarks/walk_speed.py --before /path/to/checkout/of/a697d38 --out benchmarks/walk_speed.json

A graph is forced to one walk by the constant its ``If`` compares the batch's rows with
(``tree2mat.walk_rows_tensor``): -1 walks every batch wide, 2**62 every batch flat (as ``verify``
does).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab_speed import convert_before, session  # noqa: E402
from suite import data, workloads  # noqa: E402

import tree2mat  # noqa: E402
from tree2mat.verify import forced_walk  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="a checkout whose tree2mat converts the 'before' graphs")
    parser.add_argument("--workloads", default="rf_clf,rf_reg,hgb_clf,xgb_5,lgbm_clf,lgbm_reg")
    parser.add_argument("--batch", default="1,100,1000,4000")
    parser.add_argument("--runs", type=int, default=150, help="runs per graph and batch (alternating every 10)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    batches = [int(b) for b in args.batch.split(",")]
    results = []
    for key in args.workloads.split(","):
        title, factory, classes = workloads(args.seed)[key]
        X, y, Xs = data(classes, max(batches), args.seed)
        model = factory().fit(X, y)
        graph = tree2mat.convert(model)
        walk_rows = int({p.key: p.value for p in graph.metadata_props}["tree2mat.walk_rows"])
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp)
            onnx.save(forced_walk(graph, -1), path / "wide.onnx")
            onnx.save(forced_walk(graph, 2**62), path / "flat.onnx")
            convert_before(model, args.before, path / "before.onnx")
            sess = {k: session(path / f"{k}.onnx", args.threads) for k in ("before", "wide", "flat")}
        for b in batches:
            x = np.ascontiguousarray(Xs[:b])
            times: dict[str, list[float]] = {k: [] for k in sess}
            for s in sess.values():  # warm up
                s.run(None, {s.get_inputs()[0].name: x})
            for _ in range(max(1, args.runs // 10)):
                for k, s in sess.items():
                    name = s.get_inputs()[0].name
                    for _ in range(10):
                        start = time.perf_counter()
                        s.run(None, {name: x})
                        times[k].append(time.perf_counter() - start)
            p50 = {k: float(np.median(v)) * 1e3 for k, v in times.items()}
            row = {"workload": title, "walk_rows": walk_rows, "batch": b, "p50_ms": p50,
                   "wide_ratio": p50["wide"] / p50["before"], "flat_ratio": p50["flat"] / p50["before"]}
            print(json.dumps(row), flush=True)
            results.append(row)
    doc = {"machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()}", "onnxruntime": ort.__version__,
           "threads": args.threads, "date": time.strftime("%Y-%m-%d"), "results": results}
    if args.out:
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
