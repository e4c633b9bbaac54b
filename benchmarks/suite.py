"""The seven workloads of issue 5, each through ``tree2mat bench``: tree2mat's forms next to the
ONNX TreeEnsemble peer (skl2onnx / onnxmltools), Hummingbird's three ONNX tree strategies (when
Hummingbird is installed) and the library's own predict, at batch 1, 1 000 and 100 000.

Data: ``make_classification`` / ``make_regression`` with 28 float features (14 informative),
20 000 training rows, 100 000 held-out scoring rows, all from ``--seed``. The tables give rows/s at
the largest batch as ratios to the TreeEnsemble graph (the targets of issue 5), batch-1 latency,
and the rows each contender gets wrong against the library on the scoring rows.

    python -m benchmarks.suite --out suite.json            # all seven: about 30 minutes on 2 cores
    python -m benchmarks.suite --workloads xgb_clf --rows 20000 --batch 1,20000
    python -m benchmarks.suite --report suite.json         # the Markdown tables of an earlier run
    python -m benchmarks.suite --target onnxruntime --forms auto   # auto's pick for a runtime
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import asdict
from pathlib import Path

import tree2mat
from benchmarks._common import data, workloads
from tree2mat.bench import bench, parse_batches
from tree2mat.forms.auto import parse_memory

FORMS = ("auto", "sign", "bitvector", "hierarchical", "traverse")
#: The forms whose best is compared with Hummingbird's GEMM (the decision machines).
MATRIX_FORMS = ("sign", "bitvector", "hierarchical")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="*", help="names as in the tables (default: all)")
    parser.add_argument("--rows", type=int, default=100_000, help="scoring rows")
    parser.add_argument("--batch", default="1,1000,100000")
    parser.add_argument("--forms", default=",".join(FORMS))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-memory", default="8G", help="largest estimated memory of a tree2mat graph at one batch")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-hint", type=int, help="--form auto's batch hint (default: tree2mat's)")
    parser.add_argument("--target", help="--form auto's target runtime (convert --target; default: the portable forms)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                        help="where tree2mat's and Hummingbird's graphs run (cuda: the CUDA provider; TreeEnsemble stays on the CPU)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--report", type=Path, help="print the tables of an earlier --out and stop")
    args = parser.parse_args()
    if args.report:
        print(report(json.loads(args.report.read_text())))
        return 0
    batches = parse_batches(args.batch)
    chosen = workloads(args.seed)
    names = args.workloads or list(chosen)
    results = []
    for name in names:
        title, make, classes = chosen[name]
        X, y, rows = data(classes, args.rows, args.seed)
        start = time.perf_counter()
        model = make().fit(X, y)
        print(f"{name}: trained in {time.perf_counter() - start:.1f} s; benchmarking", file=sys.stderr, flush=True)
        rep = bench(model, rows, batches=batches, forms=tuple(args.forms.split(",")), repeat=args.repeat,
                    threads=args.threads, max_memory=parse_memory(args.max_memory), batch_hint=args.batch_hint,
                    device=args.device, target=args.target)
        print(rep.summary(), file=sys.stderr, flush=True)
        results.append({**asdict(rep), "workload": name, "model": title})
        doc = {
            "machine": f"{platform.machine()} {platform.processor() or ''}, {len(os.sched_getaffinity(0))} CPUs, {platform.system()}",
            "cpu": _cpu_name(), "python": platform.python_version(), "tree2mat": tree2mat.__version__,
            "versions": _versions(), "threads": args.threads, "device": args.device, "batches": list(batches), "batch_hint": args.batch_hint,
            "target": args.target, "results": results,
        }
        if args.out:  # after every workload: a long run that stops keeps what it measured
            args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(report(doc))
    return 0


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    from tree2mat.runtimes import RUNTIMES

    out = {"onnxruntime": RUNTIMES["onnxruntime"].version() or "missing"}  # (the module's: onnxruntime-gpu's too)
    for package in ("onnx", "scikit-learn", "xgboost-cpu", "xgboost", "lightgbm", "skl2onnx", "onnxmltools", "hummingbird-ml", "torch"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            pass
    return out


def _rate(c: dict, batch: int) -> float | None:
    return next((t["rows_per_s"] for t in c["timings"] if t["batch"] == batch), None)


def _p50(c: dict, batch: int) -> float | None:
    return next((t["p50_ms"] for t in c["timings"] if t["batch"] == batch), None)


def _matrix_vs_gemm(contenders: list[dict], batches: list[int]) -> str:
    """The best of the decision machines (MATRIX_FORMS) over Hummingbird's GEMM at the largest
    batch both were timed at (a dense graph at batch 100 000 can be over the memory limit),
    naming the batch and the form."""
    matrix = [c for c in contenders if c["name"] in {f"tree2mat {f}" for f in MATRIX_FORMS}]
    gemm = next((c for c in contenders if c["name"] == "hummingbird gemm"), None)
    for batch in sorted(batches, reverse=True):
        rates = {c["name"][len("tree2mat "):]: _rate(c, batch) or 0 for c in matrix}
        form = max(rates, key=rates.__getitem__, default=None)
        theirs = _rate(gemm, batch) if gemm else None
        if form and rates[form] and theirs:
            return f"{rates[form] / theirs:.2f} ({form}" + (")" if batch == max(batches) else f", batch {batch:,})")
    return "-"


def report(doc: dict) -> str:
    big = max(doc["batches"])
    lines = [
        f"Rows/s at batch {big:,} ({doc['cpu']}, {doc['machine']}, onnxruntime {doc['versions'].get('onnxruntime')}, "
        f"{doc['threads']} threads{'; tree2mat and Hummingbird on CUDA, TreeEnsemble on the CPU' if doc.get('device') == 'cuda' else ''}"
        f"{'; auto for --target ' + doc['target'] if doc.get('target') else ''}); "
        "x TE: over the TreeEnsemble graph in the same run.",
        "",
        "| workload | TreeEnsemble rows/s | auto (form) | auto x TE | sign x TE | bitvector x TE | hierarchical x TE | traverse x TE "
        "| Hummingbird best x TE | Hummingbird gemm x TE | best matrix form / HB gemm | native x TE |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["results"]:
        by = {c["name"]: c for c in r["contenders"]}
        te = next((c for c in r["contenders"] if c["kind"] == "peer" and c["timings"]), None)
        ref = _rate(te, big) if te else None

        def ratio(rate: float | None) -> str:
            return "-" if rate is None or not ref else f"{rate / ref:.2f}"  # noqa: B023 (called within this iteration)

        auto = next((c for c in r["contenders"] if c["name"].startswith("tree2mat auto")), None)
        hb = {c["name"].split(" ", 1)[1]: _rate(c, big) for c in r["contenders"] if c["kind"] == "hummingbird" and c["timings"]}
        timed = {k: v for k, v in hb.items() if v}
        hb_best = max(timed.items(), key=lambda kv: kv[1]) if timed else None
        gemm = hb.get("gemm")
        dm_vs_gemm = _matrix_vs_gemm(r["contenders"], doc["batches"])
        native = next((c for c in r["contenders"] if c["kind"] == "native"), None)
        lines.append(
            f"| {r['model']} | {ref:,.0f} | {f'{_rate(auto, big):,.0f}' if auto and _rate(auto, big) else 'not timed'} "
            f"({auto['name'][15:-1] if auto else '-'}) | {ratio(_rate(auto, big) if auto else None)} | "
            + " | ".join(ratio(_rate(by[f"tree2mat {f}"], big)) if f"tree2mat {f}" in by else "-" for f in ("sign", "bitvector", "hierarchical", "traverse"))
            + f" | {f'{ratio(hb_best[1])} ({hb_best[0]})' if hb_best else ('not timed' if hb else 'not installed')} | {ratio(gemm)} | "
            + dm_vs_gemm + f" | {ratio(_rate(native, big) if native else None)} |"
            if ref else f"| {r['model']} | not measured | | | | | | | | | | |"
        )
    lines += ["", "Batch 1: p50 latency, ms; and rows whose outputs (labels) differ from the library on the scoring rows.", "",
              "| workload | TreeEnsemble | auto | auto / TE | TE wrong rows (labels) | auto wrong rows (labels) "
              "| Hummingbird wrong rows (labels), per strategy |",
              "|---|---|---|---|---|---|---|"]
    for r in doc["results"]:
        te = next((c for c in r["contenders"] if c["kind"] == "peer" and c["timings"]), None)
        auto = next((c for c in r["contenders"] if c["name"].startswith("tree2mat auto")), None)
        a, t = (_p50(auto, 1) if auto else None), (_p50(te, 1) if te else None)

        def wrong(c: dict | None) -> str:
            if c is None or c.get("mismatched_rows") is None:
                return "-"
            return f"{c['mismatched_rows']}" + (f" ({c['mismatched_labels']})" if c.get("mismatched_labels") is not None else "")

        hbw = ", ".join(f"{c['name'].split(' ', 1)[1]} {wrong(c)}" for c in r["contenders"] if c["kind"] == "hummingbird" and c["timings"])
        cells = [f"{t:.3f}" if t else "-", f"{a:.3f}" if a else "-", f"{a / t:.2f}" if a and t else "-"]
        lines.append(f"| {r['model']} | {' | '.join(cells)} | {wrong(te)} | {wrong(auto)} | {hbw or '-'} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
