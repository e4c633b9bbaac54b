"""Where traverse's two walks cross: the default graph of each workload of benchmarks/suite.py
with its ``If`` forced each way (its ``tree2mat.flat_rows`` constant set to 0: always the wide
walk; past any batch: always the flat walk), both timed in one process on onnxruntime's CPU
provider, alternating, at batches of 1 to 1 024 rows: p50 per batch and the ratio flat / wide.
The graph walks flat up to ``tree2mat.flat_rows`` rows (traverse.FLAT_ELEMENTS // trees).

    python benchmarks/flat_walk.py --out benchmarks/flat_walk.json
    python benchmarks/flat_walk.py --workloads rf_reg lgbm_reg --batches 1,16,64
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
from suite import data, workloads  # noqa: E402

import tree2mat  # noqa: E402


def forced(model: onnx.ModelProto, rows: int) -> onnx.ModelProto:
    """A copy of a traverse graph that walks flat up to ``rows`` rows."""
    name = {p.key: p.value for p in model.metadata_props}["tree2mat.flat_rows_tensor"]
    out = onnx.ModelProto()
    out.CopyFrom(model)
    tensor = next(t for t in out.graph.initializer if t.name == name)
    tensor.CopyFrom(numpy_helper.from_array(np.asarray([rows], np.int64), name))
    return out


def session(model: onnx.ModelProto, threads: int) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="*")
    parser.add_argument("--batches", default="1,2,4,8,16,32,64,128,256,512,1024")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--rows-per-trial", type=int, default=1024, help="rows each walk runs per batch size and trial (at least 10 runs)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    results = []
    for name, (title, factory, classes) in workloads(args.seed).items():
        if args.workloads and name not in args.workloads:
            continue
        X, y, Xs = data(classes, max(batches) * 4, args.seed)
        onx = tree2mat.convert(factory().fit(X, y))
        meta = {p.key: p.value for p in onx.metadata_props}
        if "tree2mat.flat_rows" not in meta:
            print(f"{title}: the default graph has one walk ({meta.get('tree2mat.form')})", file=sys.stderr)
            continue
        sess = {"wide": session(forced(onx, 0), args.threads), "flat": session(forced(onx, 2**62), args.threads)}
        per_batch = []
        for b in batches:
            runs = max(10, args.rows_per_trial // b)
            times: dict[str, list[float]] = {k: [] for k in sess}
            for s in sess.values():  # warm up
                s.run(None, {"input": Xs[:b]})
            for _ in range(args.trials):
                for start in range(0, runs, 10):  # alternating every 10 runs: drift hits both
                    for k, s in sess.items():
                        for i in range(start, min(runs, start + 10)):
                            at = (i * b) % (Xs.shape[0] - b + 1)
                            t0 = time.perf_counter()
                            s.run(None, {"input": Xs[at:at + b]})
                            times[k].append(time.perf_counter() - t0)
            p50 = {k: float(np.median(v)) * 1e6 for k, v in times.items()}
            per_batch.append({"batch": b, "p50_us": p50, "flat_over_wide": p50["flat"] / p50["wide"]})
            print(f"{title}: batch {b}: wide {p50['wide']:.1f} us, flat {p50['flat']:.1f} us, flat / wide {p50['flat'] / p50['wide']:.2f}", flush=True)
        results.append({"workload": title, "flat_rows": int(meta["tree2mat.flat_rows"]), "batches": per_batch})
    doc = {"machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()}", "onnxruntime": ort.__version__,
           "threads": args.threads, "date": time.strftime("%Y-%m-%d"), "results": results}
    if args.out:
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
