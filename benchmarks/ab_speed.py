"""Before/after speed of the default graph on the seven workloads of benchmarks/suite.py: the same
models converted by two checkouts of tree2mat, both graphs timed in one process, alternating, on
the same rows (onnxruntime CPU, 2 threads). Rows/s at a large batch, p50 latency at batch 1 and at
suite.py's middle batch (1 000 rows).

    python -m benchmarks.ab_speed --before /path/to/old/checkout --out benchmarks/ab_speed.json

``--before``: a checkout (its ``tree2mat`` package converts the "before" graphs in a subprocess).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

import tree2mat
from benchmarks._common import convert_before, data, machine, session, timed, workloads


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--workloads", nargs="*")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--trials", type=int, default=5, help="alternating trials; the ratio reported is the median of the trials'")
    parser.add_argument("--latency-runs", type=int, default=1000, help="batch-1 runs per graph and trial")
    parser.add_argument("--throughput-runs", type=int, default=3, help="full-batch runs per graph and trial")
    parser.add_argument("--mid-batch", type=int, default=1000, help="the middle batch (suite.py's): p50 of --mid-runs runs")
    parser.add_argument("--mid-runs", type=int, default=40, help="middle-batch runs per graph and trial")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.latency_runs < 20 or args.trials < 1 or args.throughput_runs < 1:
        parser.error("--latency-runs takes at least 20 (runs alternate 20 at a time), --trials and --throughput-runs at least 1")
    results = []
    for name, (title, factory, classes) in workloads(args.seed).items():
        if args.workloads and name not in args.workloads:
            continue
        X, y, Xs = data(classes, args.rows, args.seed)
        model = factory().fit(X, y)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp)
            tree2mat.save(tree2mat.convert(model), path / "after.onnx")
            convert_before(model, args.before, path / "before.onnx")
            forms = {k: {p.key: p.value for p in onnx_meta(path / f"{k}.onnx")}.get("tree2mat.form") for k in ("before", "after")}
            sess = {k: session(path / f"{k}.onnx", args.threads) for k in ("before", "after")}
            for k in sess:  # warm up
                timed(sess[k], Xs[:1])
                timed(sess[k], Xs)
            trials = []
            for _ in range(args.trials):
                one = {k: [] for k in sess}
                mid = {k: [] for k in sess}
                big = {k: [] for k in sess}
                for _ in range(args.latency_runs // 20):  # alternating every 20 runs: drift hits both
                    for k in sess:
                        one[k] += [timed(sess[k], Xs[:1]) for _ in range(20)]
                for _ in range(max(1, args.mid_runs // 10)):
                    for k in sess:
                        mid[k] += [timed(sess[k], Xs[:args.mid_batch]) for _ in range(10)]
                for _ in range(args.throughput_runs):
                    for k in sess:
                        big[k].append(timed(sess[k], Xs))
                trials.append({
                    "p50_ms": {k: float(np.median(v)) * 1e3 for k, v in one.items()},
                    "mid_p50_ms": {k: float(np.median(v)) * 1e3 for k, v in mid.items()},
                    "rows_per_s": {k: args.rows / float(np.median(v)) for k, v in big.items()},
                })
        row = {
            "workload": title, "forms": forms, "trials": trials,
            "p50_ms": {k: float(np.median([t["p50_ms"][k] for t in trials])) for k in sess},
            "rows_per_s": {k: float(np.median([t["rows_per_s"][k] for t in trials])) for k in sess},
            "mid_p50_ms": {k: float(np.median([t["mid_p50_ms"][k] for t in trials])) for k in sess},
            "latency_ratio": float(np.median([t["p50_ms"]["after"] / t["p50_ms"]["before"] for t in trials])),
            "mid_ratio": float(np.median([t["mid_p50_ms"]["after"] / t["mid_p50_ms"]["before"] for t in trials])),
            "throughput_ratio": float(np.median([t["rows_per_s"]["after"] / t["rows_per_s"]["before"] for t in trials])),
        }
        print(json.dumps(row), flush=True)
        results.append(row)
    doc = {"machine": machine(), "onnxruntime": ort.__version__,
           "threads": args.threads, "rows": args.rows, "mid_batch": args.mid_batch, "date": time.strftime("%Y-%m-%d"), "results": results}
    if args.out:
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


def onnx_meta(path: Path):
    import onnx

    return onnx.load(str(path), load_external_data=False).metadata_props


if __name__ == "__main__":
    sys.exit(main())
