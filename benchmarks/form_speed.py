"""Time per row of every exact form (and MatMul element type) on a range of model shapes, next
to ``--form auto``'s estimate and pick: the measurements behind tree2mat.forms.auto's constants.

Each model is converted with every exact form and variant; each graph scores the same 10 000
rows (onnxruntime, CPU, ``--threads`` intra-op threads, best of ``--repeat`` runs after a warm-up).
The output table says, per model, the measured time of each variant, which variant was fastest,
and what auto picked; ``--fit`` prints least-squares constants for auto's cost model (``--write``
writes them into tree2mat/forms/costs.json, which the forms read). The
``treeensemble`` form (one onnxruntime node, so its one-row run is timed too, next to traverse's:
p50 of 200 runs) is fitted per tree level, per tree and per node, apart where the node sums and where it writes
leaf numbers (``treeensemble.sums_in_the_node``).

    python -m benchmarks.form_speed --out form_speed.json
    python -m benchmarks.form_speed --fit --write --forms traverse     # traverse's constants, timed and written
    python -m benchmarks.form_speed --report benchmarks/form_speed_treeensemble.json --fit   # an earlier run's table and fit
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

import tree2mat
from benchmarks._common import machine, relative_least_squares, session, write_costs
from tree2mat.forms import FORMS, GraphOptions, auto, costs, treeensemble


def models(seed: int):
    import lightgbm as lgb
    import xgboost as xgb
    from sklearn.ensemble import GradientBoostingRegressor, RandomForestClassifier, RandomForestRegressor

    return {
        "sklearn GBR depth 3 x 100": lambda: GradientBoostingRegressor(n_estimators=100, max_depth=3, random_state=seed),
        "sklearn GBR depth 6 x 100": lambda: GradientBoostingRegressor(n_estimators=100, max_depth=6, random_state=seed),
        "sklearn RF depth 8 x 50": lambda: RandomForestRegressor(50, max_depth=8, random_state=seed, n_jobs=2),
        "sklearn RF depth 10 x 50": lambda: RandomForestRegressor(50, max_depth=10, random_state=seed, n_jobs=2),
        "LightGBM 7 leaves x 500": lambda: lgb.LGBMRegressor(n_estimators=500, num_leaves=7, random_state=seed, verbose=-1),
        "LightGBM 31 leaves x 300": lambda: lgb.LGBMRegressor(n_estimators=300, num_leaves=31, random_state=seed, verbose=-1),
        "XGBoost depth 2 x 300": lambda: xgb.XGBRegressor(n_estimators=300, max_depth=2, random_state=seed),
        "XGBoost depth 4 x 300": lambda: xgb.XGBRegressor(n_estimators=300, max_depth=4, random_state=seed),
        "XGBoost depth 6 x 200": lambda: xgb.XGBRegressor(n_estimators=200, max_depth=6, random_state=seed),
        "XGBoost depth 8 x 50": lambda: xgb.XGBRegressor(n_estimators=50, max_depth=8, random_state=seed),
        "LightGBM 255 leaves x 100": lambda: lgb.LGBMRegressor(n_estimators=100, num_leaves=255, random_state=seed, verbose=-1),
        "sklearn RF depth 14 x 100": lambda: RandomForestRegressor(100, max_depth=14, random_state=seed, n_jobs=2),
        "LightGBM 15 leaves x 20": lambda: lgb.LGBMRegressor(n_estimators=20, num_leaves=15, random_state=seed, verbose=-1),
        # classifiers (the target binned into classes): per-class trees, class fractions per leaf
        "XGBoost 5 classes depth 6 x 100": lambda: xgb.XGBClassifier(n_estimators=100, max_depth=6, random_state=seed),
        "XGBoost binary depth 6 x 100": lambda: xgb.XGBClassifier(n_estimators=100, max_depth=6, random_state=seed),
        "sklearn RF classifier depth 8 x 100": lambda: RandomForestClassifier(100, max_depth=8, random_state=seed, n_jobs=2),
        "LightGBM 3 classes 31 leaves x 100": lambda: lgb.LGBMClassifier(n_estimators=100, num_leaves=31, random_state=seed, verbose=-1),
    }


def time_graph(onx, X: np.ndarray, threads: int, repeat: int) -> float:
    sess = session(onx.SerializeToString(), threads)
    sess.run(None, {"input": X[:100]})
    best = np.inf
    for _ in range(repeat):
        start = time.perf_counter()
        sess.run(None, {"input": X})
        best = min(best, time.perf_counter() - start)
    return best / X.shape[0] * 1e6


def one_row_p50(onx, X: np.ndarray, threads: int, runs: int = 200) -> float:
    sess = session(onx.SerializeToString(), threads)
    times = []
    for i in range(runs + 20):
        row = X[i % X.shape[0]: i % X.shape[0] + 1]
        start = time.perf_counter()
        sess.run(None, {"input": row})
        times.append(time.perf_counter() - start)
    return float(np.median(times[20:])) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--fit", action="store_true", help="print least-squares cost-model constants")
    parser.add_argument("--write", nargs="?", const="", metavar="FORMS",
                        help="with the fit, write the constants of these forms (comma-separated; default: every one fitted) into tree2mat's cost file")
    parser.add_argument("--costs", type=Path, default=costs.PATH, help="the cost file --write writes (default: the package's)")
    parser.add_argument("--forms", default=",".join(f for f, spec in FORMS.items() if spec.exact),
                        help="exact forms to time, comma-separated (default: all; --fit fits those timed)")
    parser.add_argument("--report", type=Path, help="the table (and with --fit the fit) of an earlier --out instead of a run")
    args = parser.parse_args()
    if args.report:
        results = json.loads(args.report.read_text())["results"]
    else:
        results = measure(args.forms.split(","), args.seed, args.threads, args.repeat)
    if args.out and not args.report:
        doc = {"machine": machine(),
               "python": platform.python_version(), "onnxruntime": ort.__version__, "threads": args.threads,
               "tree2mat": tree2mat.__version__, "results": results}
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(report(results))
    if args.fit or args.write is not None:
        constants, lines = fit(results)
        print("\n".join(lines))
        if args.write is not None:
            wanted = [f for f in args.write.split(",") if f] or list(constants)
            if not set(wanted) <= set(constants):
                raise SystemExit(f"--write: no fit of {', '.join(sorted(set(wanted) - set(constants)))} in this run")
            write_costs({form: constants[form] for form in wanted}, args.costs)
    return 0


def measure(forms: list[str], seed: int, threads: int, repeat: int) -> list[dict]:
    """Every model of :func:`models` fitted, converted with each variant of ``forms`` and timed:
    per model its sizes, the forms' estimates and auto's pick, each variant's time per row."""
    from sklearn.base import is_classifier
    from sklearn.datasets import make_regression

    X, y = make_regression(20_000, 28, random_state=seed)
    X = X.astype(np.float32)
    rows = X[:10_000]
    variants = [(f, m) for f in forms for m in FORMS[f].matmul]
    results = []
    for name, make in models(seed).items():
        model = make()
        if is_classifier(model):  # (the target in as many classes as the name says: quantile bins)
            classes = 5 if "5 classes" in name else 3 if "3 classes" in name else 2
            model.fit(X, np.digitize(y, np.quantile(y, np.linspace(0, 1, classes + 1)[1:-1])))
        else:
            model.fit(X, y)
        ens = tree2mat.load(model)
        size = costs.sizes(ens)
        entry = {"model": name, "T": size.trees, "I": size.internal, "L": size.leaves, "depth": ens.max_depth(), "levels": size.levels,
                 "nodes": size.nodes, "products": size.products, "us_per_row": {},
                 "estimate_us": {f: FORMS[f].us_per_row(ens) for f in FORMS if FORMS[f].exact and FORMS[f].us_per_row is not None},
                 "sums": treeensemble.sums_in_the_node(ens, GraphOptions()), "p50_one_row_us": {},
                 "estimate_call_us": {f: FORMS[f].call_us(ens) for f in FORMS if FORMS[f].exact and FORMS[f].call_us is not None},
                 "auto": auto.choose(ens).form}
        for form, matmul in variants:
            onx = tree2mat.convert(model, form=form, matmul=matmul)
            entry["us_per_row"][f"{form}/{matmul}"] = time_graph(onx, rows, threads, repeat)
            if form in ("treeensemble", "traverse"):
                entry["p50_one_row_us"][form] = one_row_p50(onx, rows, threads)
        entry["fastest"] = min(entry["us_per_row"], key=entry["us_per_row"].get)  # (of those timed)
        results.append(entry)
        print(json.dumps(entry), file=sys.stderr, flush=True)
    return results


def report(results: list[dict]) -> str:
    variants = list(results[0]["us_per_row"])
    lines = ["| model | T | I | L | depth | " + " | ".join(variants) + " | fastest | auto |",
             "|---" * (len(variants) + 7) + "|"]
    for r in results:
        cells = [f"{r['us_per_row'][v]:.1f}" for v in variants]
        lines.append(f"| {r['model']} | {r['T']} | {r['I']} | {r['L']} | {r['depth']} | " + " | ".join(cells)
                     + f" | {r['fastest']} | {r['auto']} |")
    return "\n".join(lines)


def fit(results: list[dict]) -> tuple[dict[str, dict[str, float]], list[str]]:
    """Least squares on the relative error, no intercept, of the forms timed: dense a*nodes +
    b*products (the trees padded in size groups: sums of T_g (I_g + L_g) and T_g I_g L_g),
    traverse c*levels + d*T, and treeensemble's (:func:`fit_treeensemble`, with traverse's).
    The constants by form, named as tree2mat/forms/costs.json names them, and lines saying them."""
    timed = results[0]["us_per_row"]
    out: dict[str, dict[str, float]] = {}
    for form in [f for f in ("sign", "bitvector") if f"{f}/float32" in timed]:
        A = np.asarray([[r["nodes"], r["products"]] for r in results], float)
        a, b = relative_least_squares(A, np.asarray([r["us_per_row"][f"{form}/float32"] for r in results]))
        out[form] = {"per_node_us": float(a), "per_product_us": float(b)}
    if "traverse/float32" in timed:
        A = np.asarray([[r["levels"], r["T"]] for r in results], float)
        c, d = relative_least_squares(A, np.asarray([r["us_per_row"]["traverse/float32"] for r in results]))
        out["traverse"] = {"per_level_us": float(c), "per_tree_us": float(d)}
    lines = [f"{form}: " + ", ".join(f"{name} {value:.3g}" for name, value in constants.items()) for form, constants in out.items()]
    if "treeensemble/float32" in timed and "traverse/float32" in timed:
        out["treeensemble"], notes = fit_treeensemble(results)
        lines += notes
    return out, lines


def fit_treeensemble(results: list[dict]) -> tuple[dict[str, float], list[str]]:
    """treeensemble's constants: non-negative least squares, relative error; per row on
    traverse's scale (this run's traverse times against traverse's model, the median ratio), one
    model where the node sums and one where it writes leaf numbers; one row as measured,
    classifiers apart (their head). The constants, and lines saying them."""
    from scipy.optimize import nnls

    out: dict[str, float] = {}
    scale = float(np.median([r["estimate_us"]["traverse"] / r["us_per_row"]["traverse/float32"] for r in results]))
    lines = [f"treeensemble, on traverse's scale (x {scale:.3g}):"]
    for sums, kind in ((True, "sums"), (False, "leaf_numbers")):
        sub = [r for r in results if r["sums"] == sums]
        if sub:
            A = np.asarray([[r["levels"], r["T"], r["T"] * r["I"]] for r in sub], float)
            t = np.asarray([r["us_per_row"]["treeensemble/float32"] for r in sub]) * scale
            coef, _ = nnls(A / t[:, None], np.ones_like(t))
            out.update({f"{kind}_per_{term}_us": float(c) for term, c in zip(("level", "tree", "node"), coef)})
            lines.append(f"  {kind.replace('_', ' ')}: per tree level {coef[0]:.3g} us, per tree {coef[1]:.3g} us, per node {coef[2]:.3g} us")
    A1 = np.asarray([[1, ("class" in r["model"]) or ("binary" in r["model"]), r["levels"], r["T"] * (not r["sums"]), r["T"] * r["I"]]
                     for r in results], float)
    one = float(np.median([r["estimate_call_us"]["traverse"] / r["p50_one_row_us"]["traverse"] for r in results]))
    t1 = np.asarray([r["p50_one_row_us"]["treeensemble"] for r in results]) * one
    coef, _ = nnls(A1 / t1[:, None], np.ones_like(t1))
    names = ("per run", "per classifier run", "per tree level", "per tree of leaf numbers", "per node")
    out.update(zip(("call_us", "classifier_call_us", "call_per_level_us", "call_per_leaf_number_tree_us", "call_per_node_us"), map(float, coef)))
    lines.append(f"  one row, on traverse's one-row scale (x {one:.3g}): " + ", ".join(f"{n} {v:.3g} us" for n, v in zip(names, coef)))
    return out, lines


if __name__ == "__main__":
    raise SystemExit(main())
