"""Where a form's time goes: onnxruntime's profiler on suite.py's workloads, the kernel time per
operator type (and per operator of the walk), next to the TreeEnsemble graph's time on the same
rows in the same process.

    python -m benchmarks.op_profile --forms traverse --batch 100000 --out op_profile.json
    python -m benchmarks.op_profile --workloads xgb_clf --forms traverse,hierarchical --batch 1

Each graph runs ``--runs`` times under the profiler after a warm-up; the table gives per operator
type its share of the kernel time and its count per run (the ``If``s of traverse's walks are
left out: its time is its branch's operators'). At batch 1 the profiler's own overhead per
operator is of the order of the operators' (read the shares, not the absolute times).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import onnxruntime as ort

import tree2mat
from benchmarks._common import data, machine, session, workloads
from tree2mat import peers


def p50_ms(sess: ort.InferenceSession, X: np.ndarray, batch: int, runs: int) -> float:
    name = sess.get_inputs()[0].name
    n = X.shape[0] // batch
    sess.run(None, {name: X[:batch]})
    times = []
    for i in range(runs):
        rows = X[(i % n) * batch:(i % n + 1) * batch]
        start = time.perf_counter()
        sess.run(None, {name: rows})
        times.append(time.perf_counter() - start)
    return float(np.median(times) * 1e3)


def profile(model: bytes, X: np.ndarray, batch: int, runs: int, threads: int) -> dict:
    """Kernel microseconds per run by operator type, and by operator name with digits folded."""
    with tempfile.TemporaryDirectory() as tmp:
        sess = session(model, threads, tmp)
        name = sess.get_inputs()[0].name
        sess.run(None, {name: X[:batch]})
        for _ in range(runs):
            sess.run(None, {name: X[:batch]})
        events = json.loads(Path(sess.end_profiling()).read_text())
    by_type: Counter = Counter()
    by_node: Counter = Counter()
    count: Counter = Counter()
    for e in events:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time") or e["args"]["op_name"] == "If":
            continue
        op = e["args"]["op_name"]
        by_type[op] += e["dur"] / (runs + 1)
        count[op] += 1 / (runs + 1)
        by_node[f"{re.sub(r'[0-9]+', '#', e['name'][: -len('_kernel_time')])} ({op})"] += e["dur"] / (runs + 1)
    return {"by_type": {k: [v, count[k]] for k, v in by_type.most_common()}, "by_node": dict(by_node.most_common(15))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="rf_clf,rf_reg,hgb_clf,xgb_clf,xgb_5,lgbm_clf,lgbm_reg")
    parser.add_argument("--forms", default="traverse")
    parser.add_argument("--batch", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3, help="profiled runs (and 5 timed ones, 200 at batch 1)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results = []
    for key in args.workloads.split(","):
        title, factory, classes = workloads(args.seed)[key]
        X, y, rows = data(classes, max(args.batch, 1000), args.seed)
        model = factory().fit(X, y)
        ens = tree2mat.load(model)
        te, _ = peers.convert(model, ens.n_features)
        timed = 200 if args.batch == 1 else 5
        te_ms = p50_ms(session(te.SerializeToString(), args.threads), rows, args.batch, timed)
        for form in args.forms.split(","):
            graph = tree2mat.convert(ens, form, max_memory=64 * 2**30).SerializeToString()
            ms = p50_ms(session(graph, args.threads), rows, args.batch, timed)
            prof = profile(graph, rows, args.batch, args.runs, args.threads)
            total = sum(v for v, _ in prof["by_type"].values())
            print(f"\n{title}, {form}, batch {args.batch}: p50 {ms:.3f} ms, TreeEnsemble {te_ms:.3f} ms ({te_ms / ms:.2f} x TE); "
                  f"kernels {total / 1e3:.2f} ms a run", flush=True)
            for op, (us, n) in list(prof["by_type"].items())[:10]:
                print(f"  {op:16s} {100 * us / total:5.1f} %  {us / 1e3:8.3f} ms  x{n:.0f}")
            results.append({"workload": key, "model": title, "form": form, "batch": args.batch, "p50_ms": ms, "treeensemble_p50_ms": te_ms, **prof})
        if args.out:
            args.out.write_text(json.dumps({
                "machine": machine(),
                "onnxruntime": ort.__version__, "threads": args.threads, "results": results,
            }, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
