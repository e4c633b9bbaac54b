"""Thread scaling, 1 -> 2 intra-op threads, of tree2mat's default graph next to the TreeEnsemble
peer's (skl2onnx / onnxmltools), on the seven workloads of benchmarks/suite.py at one large batch
(onnxruntime CPU; the four sessions alternating in one process, median of ``--runs``).

    python -m benchmarks.thread_scaling --out benchmarks/thread_scaling.json     # about 10 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

import tree2mat
from benchmarks._common import fitted, machine, session, workloads
from tree2mat import peers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--runs", type=int, default=5, help="timed runs per session")
    parser.add_argument("--rows", type=int, default=100_000, help="the batch")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workloads", default=",".join(workloads(0)), help="suite.py's names, comma-separated")
    args = parser.parse_args()
    results = []
    for title, model, rows in fitted(args.workloads, args.rows, args.seed):
        ours = tree2mat.convert(model)
        theirs, _ = peers.convert(model, rows.shape[1])
        sess = {(who, t): session(onx.SerializeToString(), t) for who, onx in (("tree2mat", ours), ("TreeEnsemble", theirs)) for t in (1, 2)}
        x = np.ascontiguousarray(rows)
        times: dict[tuple[str, int], list[float]] = {k: [] for k in sess}
        for s in sess.values():  # warm up
            s.run(None, {s.get_inputs()[0].name: x})
        for _ in range(args.runs):
            for k, s in sess.items():
                start = time.perf_counter()
                s.run(None, {s.get_inputs()[0].name: x})
                times[k].append(time.perf_counter() - start)
        med = {k: float(np.median(v)) for k, v in times.items()}
        row = {
            "workload": title, "form": {p.key: p.value for p in ours.metadata_props}["tree2mat.form"], "rows": int(x.shape[0]),
            "seconds": {f"{who} {t} thread{'s' * (t > 1)}": v for (who, t), v in med.items()},
            "tree2mat_speedup": med[("tree2mat", 1)] / med[("tree2mat", 2)],
            "te_speedup": med[("TreeEnsemble", 1)] / med[("TreeEnsemble", 2)],
            "x_te_1_thread": med[("TreeEnsemble", 1)] / med[("tree2mat", 1)],
            "x_te_2_threads": med[("TreeEnsemble", 2)] / med[("tree2mat", 2)],
        }
        print(json.dumps(row), flush=True)
        results.append(row)
    doc = {"machine": machine(), "onnxruntime": ort.__version__,
           "date": time.strftime("%Y-%m-%d"), "results": results}
    if args.out:
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
