r"""traverse's walks, each forced, and optionally the graph of another checkout: p50 latency at the
given batches on suite.py's workloads (onnxruntime CPU, 2 threads, the graphs alternating in one
process). Where each walk for small batches (the flat one; the decided one for the fewest rows,
where the graph has it) pays and where it stops paying.

    python -m benchmarks.walk_speed --workloads hgb_clf,lgbm_clf,xgb_clf,rf_clf --batch 1,2,5,10,40 --runs 300 --out benchmarks/walk_speed_decided.json
    python -m benchmarks.walk_speed --before /path/to/checkout/of/a697d38 --out benchmarks/walk_speed.json
    python -m benchmarks.walk_speed --before /path/to/checkout/of/df5d739 --build-decided 5 \
        --workloads hgb_clf,lgbm_clf,xgb_clf,xgb_5,rf_clf --batch 1,2,5,10,40 --runs 300 --out benchmarks/walk_speed_decided_2d.json

A graph is forced to one walk by the constants its ``If``s compare the batch's rows with
(``tree2mat.walk_rows_tensor``, ``tree2mat.walk_few_tensor``): -1 never takes a walk for small
batches, 2**62 always (as ``verify`` does).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

import tree2mat
from benchmarks._common import alternating_p50s, convert_before, data, decided_walk_built, machine, session, workloads
from tree2mat.verify import forced_walk, walk_limit_names


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="a checkout whose tree2mat converts the 'before' graphs (default: none)")
    parser.add_argument("--workloads", default="rf_clf,rf_reg,hgb_clf,xgb_5,lgbm_clf,lgbm_reg")
    parser.add_argument("--batch", default="1,100,1000,4000")
    parser.add_argument("--runs", type=int, default=150, help="runs per graph and batch (alternating every 10)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--build-decided", type=int, metavar="ROWS",
                        help="build the decided walk for up to ROWS rows where its latency model would not, to measure it there")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    batches = [int(b) for b in args.batch.split(",")]
    results = []
    for key in args.workloads.split(","):
        title, factory, classes = workloads(args.seed)[key]
        X, y, Xs = data(classes, max(batches), args.seed)
        model = factory().fit(X, y)
        with decided_walk_built(args.build_decided):
            graph = tree2mat.convert(model, "traverse" if args.build_decided else "auto")
        meta = {p.key: p.value for p in graph.metadata_props}
        walk_rows = int(meta["tree2mat.walk_rows"])
        few = walk_limit_names(graph, "tree2mat.walk_few")
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp)
            onnx.save(forced_walk(graph, -1), path / "wide.onnx")
            onnx.save(forced_walk(graph, 2**62), path / "flat.onnx")
            if few:
                onnx.save(forced_walk(graph, dict.fromkeys(few, 2**62)), path / "decided.onnx")
            if args.before:
                convert_before(model, args.before, path / "before.onnx")
            sess = {k: session(path / f"{k}.onnx", args.threads) for k in ("before", "wide", "flat", "decided") if (path / f"{k}.onnx").exists()}
        for b in batches:
            x = np.ascontiguousarray(Xs[:b])
            active = {k: v for k, v in sess.items() if k != "decided" or b <= int(meta["tree2mat.walk_few_max"])}
            p50 = {k: v * 1e3 for k, v in alternating_p50s(active, x, args.runs).items()}
            row = {"workload": title, "walk_rows": walk_rows, "walk_few": int(meta.get("tree2mat.walk_few", 0)), "batch": b, "p50_ms": p50,
                   **{f"{k}_ratio": p50[k] / p50["before"] for k in p50 if "before" in p50 and k != "before"}}
            print(json.dumps(row), flush=True)
            results.append(row)
    doc = {"machine": machine(), "onnxruntime": ort.__version__,
           "threads": args.threads, "date": time.strftime("%Y-%m-%d"), "results": results}
    if args.out:
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
