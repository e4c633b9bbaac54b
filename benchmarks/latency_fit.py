"""One row's p50 latency of every exact form on a range of model shapes, the least-squares fit of
each form's latency model (``FormSpec.call_us``, what ``--batch-hint`` weighs), and whether
``--form auto --batch-hint 1`` picks the fastest form: the measurements behind those constants.

traverse is timed twice, each walk forced: the flat walk, and the decided walk (built by force
where its model would not build it, as ``walk_speed.py --build-decided``). All graphs of a model
run alternately in one process (onnxruntime CPU, ``--threads`` threads, ``--runs`` runs each, in
rounds of 10), on rows of suite.py's data (benchmarks/_common.py). At each of ``--hints`` (batch sizes) the forms' graphs
(traverse's as built) are timed again, next to auto's pick at that ``--batch-hint``; at the
default hint's 10 000 rows (3 runs each) that is the time per row ``FormSpec.us_per_row``
estimates, fitted too.

    python -m benchmarks.latency_fit --hints "" --out benchmarks/latency_fit.json   # the one-row fit
    python -m benchmarks.latency_fit --out benchmarks/latency_fit_check.json         # a run with the constants: auto's picks
    python -m benchmarks.latency_fit --report benchmarks/latency_fit.json      # the tables and fit again
    python -m benchmarks.latency_fit --report benchmarks/latency_fit.json --write sign,bitvector   # its fit into the cost file

``--write`` writes the fitted constants into tree2mat/forms/costs.json, which the forms read.
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
from benchmarks._common import alternating_p50s, data, decided_walk_built, machine, relative_least_squares, session, workloads, write_costs
from tree2mat.errors import Tree2MatError
from tree2mat.forms import auto, costs, hierarchical, traverse
from tree2mat.verify import forced_walk, walk_limit_names

#: The timed graphs: the matrix forms, and traverse's two walks for the fewest rows.
GRAPHS = ("sign", "bitvector", "hierarchical", "traverse/flat", "traverse/decided")
#: The scoring rows generated per model (suite.py's data: the training rows depend on it).
SCORING_ROWS = 10_000
#: The graphs timed at ``--hints``: every exact form's graph as built.
HINT_FORMS = ("sign", "bitvector", "hierarchical", "traverse")


def models(seed: int) -> dict:
    """name -> (estimator factory, classes): small models (where a run's fixed operators are
    most of it), benchmarks/form_speed.py's nine, and suite.py's seven workloads."""
    import lightgbm as lgb
    import xgboost as xgb
    from sklearn.ensemble import GradientBoostingRegressor, RandomForestClassifier, RandomForestRegressor

    out = {
        "XGBClassifier(5, depth 4)": (lambda: xgb.XGBClassifier(n_estimators=5, max_depth=4, random_state=seed), 2),
        "XGBClassifier(20, depth 3)": (lambda: xgb.XGBClassifier(n_estimators=20, max_depth=3, random_state=seed), 2),
        "XGBRegressor(50, depth 2)": (lambda: xgb.XGBRegressor(n_estimators=50, max_depth=2, random_state=seed), 0),
        "LGBMClassifier(20, 7 leaves)": (lambda: lgb.LGBMClassifier(n_estimators=20, num_leaves=7, random_state=seed, verbose=-1), 2),
        "RandomForestClassifier(10, depth 6)": (lambda: RandomForestClassifier(10, max_depth=6, random_state=seed, n_jobs=2), 2),
        "GradientBoostingRegressor(30, depth 3)": (lambda: GradientBoostingRegressor(n_estimators=30, max_depth=3, random_state=seed), 0),
        "GradientBoostingRegressor(100, depth 6)": (lambda: GradientBoostingRegressor(n_estimators=100, max_depth=6, random_state=seed), 0),
        "RandomForestRegressor(50, depth 10)": (lambda: RandomForestRegressor(50, max_depth=10, random_state=seed, n_jobs=2), 0),
        "LGBMRegressor(500, 7 leaves)": (lambda: lgb.LGBMRegressor(n_estimators=500, num_leaves=7, random_state=seed, verbose=-1), 0),
        "LGBMRegressor(300, 31 leaves)": (lambda: lgb.LGBMRegressor(n_estimators=300, num_leaves=31, random_state=seed, verbose=-1), 0),
        "XGBRegressor(300, depth 4)": (lambda: xgb.XGBRegressor(n_estimators=300, max_depth=4, random_state=seed), 0),
    }
    out.update({title: (factory, classes) for title, factory, classes in workloads(seed).values()})
    return out


def graphs(model, ens) -> dict:
    """name -> graph (None where the form refuses the model, e.g. past its memory limit): the
    GRAPHS, and traverse's as built."""
    out: dict = {}
    for form in ("sign", "bitvector", "hierarchical"):
        try:
            out[form] = tree2mat.convert(model, form)
        except Tree2MatError:
            out[form] = None
    out["traverse"] = built = tree2mat.convert(model, "traverse")
    out["traverse/flat"] = forced_walk(built, 2**62)  # (on the graph as built: no decided walk's If where it has none)
    walk = built
    if not walk_limit_names(built, "tree2mat.walk_few"):
        with decided_walk_built(1):
            walk = tree2mat.convert(model, "traverse")
    few = walk_limit_names(walk, "tree2mat.walk_few")
    out["traverse/decided"] = forced_walk(walk, dict.fromkeys(few, 2**62)) if few else None  # (trees of depth 1: one step, no walk)
    return out


def shape_of(ens) -> dict:
    """What the latency models read."""
    s = costs.sizes(ens)
    k = hierarchical.block_depth(ens)
    return {"T": s.trees, "P": s.table_nodes, "depth": s.depth, "levels": s.levels, "nodes": s.nodes, "products": s.products, "k": k,
            "stages": hierarchical.stages(ens, k), "cells": ens.n_trees * (2**k - 1)}


def features(graph: str, s: dict) -> list[float]:
    """Each graph's latency model, linear in its constants (the first: the run's fixed part)."""
    return {
        "sign": [1, s["nodes"], s["products"], s["T"]],
        "bitvector": [1, s["nodes"], s["products"], s["T"]],
        "hierarchical": [1, s["stages"], s["stages"] * s["cells"]],
        "traverse/flat": [1, s["depth"], s["levels"]],
        "traverse/decided": [1, s["depth"], s["T"] * s["P"]],
    }[graph]


def per_row_features(form: str, s: dict) -> list[float]:
    """Each form's model of the time per row in runs of many rows (``FormSpec.us_per_row``)."""
    return {
        "sign": [s["nodes"], s["products"]],
        "bitvector": [s["nodes"], s["products"]],
        "hierarchical": [s["stages"] * s["T"], s["stages"] * s["T"] * 2 ** s["k"] * (2 ** s["k"] - 1)],
        "traverse": [s["levels"], s["T"]],
    }[form]


#: The terms of :func:`per_row_features`, for the report.
PER_ROW_TERMS = {
    "sign": ("per node", "per product"), "bitvector": ("per node", "per product"),
    "hierarchical": ("per stage and tree", "per stage's template product"), "traverse": ("per tree level", "per tree"),
}


#: The terms of :func:`features`, for the report.
TERMS = {
    "sign": ("call", "per node", "per product", "per tree"), "bitvector": ("call", "per node", "per product", "per tree"),
    "hierarchical": ("call", "per stage", "per stage cell"), "traverse/flat": ("call", "per depth", "per tree level"),
    "traverse/decided": ("call", "per depth", "per node test"),
}


#: Where each fit's constants go in tree2mat/forms/costs.json (``--write``): the fit (a graph of the
#: one-row fit; ``hierarchical/per-row``: hierarchical's per-row fit at the default hint's rows)
#: -> the form and its constants' names, in the order of TERMS / PER_ROW_TERMS. (The other forms'
#: per-row constants are form_speed.py's fit.)
COST_NAMES = {
    "sign": ("sign", ("call_us", "call_per_node_us", "call_per_product_us", "call_per_tree_us")),
    "bitvector": ("bitvector", ("call_us", "call_per_node_us", "call_per_product_us", "call_per_tree_us")),
    "hierarchical": ("hierarchical", ("call_us", "stage_us", "per_cell_us")),
    "traverse/flat": ("traverse", ("call_us", "per_depth_call_us", "per_level_call_us")),
    "traverse/decided": ("traverse", ("decided_call_us", "decided_depth_us", "decided_test_us")),
    "hierarchical/per-row": ("hierarchical", ("per_stage_tree_us", "per_template_product_us")),
}


def _least_squares(A: np.ndarray, t: np.ndarray, models: int) -> dict:
    """Least squares on the relative error: the constants and the worst error."""
    coef = relative_least_squares(A, t)
    return {"constants": [float(c) for c in coef], "worst_error": float(np.abs(A @ coef / t - 1).max()), "models": models}


def fit(results: list[dict]) -> dict:
    """Per graph, the one-row model's constants (:func:`features`)."""
    out = {}
    for graph in GRAPHS:
        rows = [r for r in results if r["p50_us"].get(graph) is not None]
        if len(rows) >= len(TERMS[graph]):
            A = np.asarray([features(graph, r["shape"]) for r in rows], float)
            out[graph] = _least_squares(A, np.asarray([r["p50_us"][graph] for r in rows]), len(rows))
    return out


def fit_per_row(results: list[dict], rows: int) -> dict:
    """Per form, the per-row model's constants (:func:`per_row_features`) from the runs of
    ``rows`` rows."""
    out = {}
    for form in HINT_FORMS:
        timed = [(r["shape"], r["hints"][str(rows)]["p50_us"][form] / rows) for r in results
                 if r.get("hints", {}).get(str(rows), {}).get("p50_us", {}).get(form) is not None]
        if len(timed) >= len(PER_ROW_TERMS[form]):
            A = np.asarray([per_row_features(form, s) for s, _ in timed], float)
            out[form] = _least_squares(A, np.asarray([t for _, t in timed]), len(timed))
    return out


def _pick_row(p: dict, pick: str) -> tuple[str, str, str]:
    """The fastest of the timed graphs ``p``, auto's ``pick`` and its time over the fastest's."""
    timed = {g: v for g, v in p.items() if v is not None}
    best = min(timed, key=timed.get)
    return best, pick, f"{timed[pick] / timed[best]:.2f}" if pick in timed else "–"


def fitted_costs(doc: dict, names: list[str]) -> dict[str, dict[str, float]]:
    """A run's constants of the fits ``names`` (COST_NAMES; none: every one the run makes), as
    tree2mat/forms/costs.json names them."""
    per_row = fit_per_row(doc["results"], auto.DEFAULT_BATCH_HINT)
    fits = {**fit(doc["results"]), **{f"{form}/per-row": f for form, f in per_row.items()}}
    out: dict[str, dict[str, float]] = {}
    for name in names or [n for n in COST_NAMES if n in fits]:
        if name not in COST_NAMES or name not in fits:
            raise SystemExit(f"--write: no fit {name!r} in this run (the fits written: {', '.join(COST_NAMES)})")
        form, keys = COST_NAMES[name]
        out.setdefault(form, {}).update(zip(keys, fits[name]["constants"]))
    return out


def report(doc: dict) -> str:
    lines = ["| model | " + " | ".join(GRAPHS) + " | fastest | auto at hint 1 | auto ÷ fastest |", "|---" * (len(GRAPHS) + 4) + "|"]
    for r in doc["results"]:
        p = r["p50_us"]
        pick = r["auto"] if r["auto"] != "traverse" else ("traverse/decided" if r["auto_decided"] else "traverse/flat")
        cells = [f"{p[g]:.1f}" if p.get(g) is not None else "–" for g in GRAPHS]
        lines.append(f"| {r['model']} | " + " | ".join(cells) + " | " + " | ".join(_pick_row(p, pick)) + " |")
    hinted = [(r["model"], int(b), h) for r in doc["results"] for b, h in r.get("hints", {}).items()]
    if hinted:
        lines += ["", "| model | rows | " + " | ".join(HINT_FORMS) + " | fastest | auto at that hint | auto ÷ fastest |",
                  "|---" * (len(HINT_FORMS) + 5) + "|"]
        for model, b, h in hinted:
            cells = [f"{h['p50_us'][f]:.1f}" if h["p50_us"].get(f) is not None else "–" for f in HINT_FORMS]
            lines.append(f"| {model} | {b} | " + " | ".join(cells) + " | " + " | ".join(_pick_row(h["p50_us"], h["auto"])) + " |")
    lines.append("")
    for graph, f in fit(doc["results"]).items():
        named = ", ".join(f"{n} {c:.4g}" for n, c in zip(TERMS[graph], f["constants"]))
        lines.append(f"one row, {graph}: {named} us; worst error {f['worst_error']:.0%} over {f['models']} models")
    many = auto.DEFAULT_BATCH_HINT
    for form, f in fit_per_row(doc["results"], many).items():
        named = ", ".join(f"{n} {c:.4g}" for n, c in zip(PER_ROW_TERMS[form], f["constants"]))
        lines.append(f"per row at {many} rows, {form}: {named} us; worst error {f['worst_error']:.0%} over {f['models']} models")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="runs per graph (alternating every 10)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", nargs="*", help="model names as in the table (default: all)")
    parser.add_argument("--hints", default=f"10,100,{auto.DEFAULT_BATCH_HINT}",
                        help="batch sizes at which auto's pick is checked too (empty: none); the default hint's: the per-row fit")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--report", type=Path, help="print the tables and fit of an earlier --out (no run)")
    parser.add_argument("--write", nargs="?", const="", metavar="FITS",
                        help="write the fitted constants into tree2mat's cost file: the comma-separated fits of "
                             f"{', '.join(COST_NAMES)} (default: every one the run makes)")
    parser.add_argument("--costs", type=Path, default=costs.PATH, help="the cost file --write writes (default: the package's)")
    args = parser.parse_args()
    hint_rows = [int(h) for h in args.hints.split(",") if h]
    if any(not 1 <= b <= SCORING_ROWS for b in hint_rows):
        parser.error(f"--hints: batch sizes from 1 to {SCORING_ROWS}")
    if args.report:
        doc = json.loads(args.report.read_text())
        print(report(doc))
        if args.write is not None:
            write_costs(fitted_costs(doc, [n for n in args.write.split(",") if n]), args.costs)
        return 0
    results = []
    for name, (factory, classes) in models(args.seed).items():
        if args.only and name not in args.only:
            continue
        X, y, rows = data(classes, SCORING_ROWS, args.seed)  # (the same models whatever --hints)
        model = factory().fit(X, y)
        ens = tree2mat.load(model)
        made = graphs(model, ens)
        sessions = {g: session(m.SerializeToString(), args.threads) for g, m in made.items() if m is not None}
        p = {g: t * 1e6 for g, t in alternating_p50s({g: s for g, s in sessions.items() if g in GRAPHS}, np.ascontiguousarray(rows[:1]), args.runs).items()}
        hints = {}
        for b in hint_rows:
            many = b >= 1000  # (3 runs, taking turns every run)
            at_b = alternating_p50s({g: s for g, s in sessions.items() if g in HINT_FORMS}, np.ascontiguousarray(rows[:b]),
                                    3 if many else args.runs, 1 if many else 10)
            hints[str(b)] = {"p50_us": {f: at_b[f] * 1e6 if f in at_b else None for f in HINT_FORMS}, "auto": auto.choose(ens, batch_hint=b).form}
        choice = auto.choose(ens, batch_hint=1)
        shape = shape_of(ens)
        decided = bool(traverse.decided_rows(shape["T"], shape["P"], shape["depth"], shape["levels"], ens.n_features))
        row = {"model": name, "shape": shape, "p50_us": {g: p.get(g) for g in GRAPHS}, "auto": choice.form, "auto_decided": decided,
               "estimates_us": {e.form: e.us_per_row for e in choice.estimates}, "hints": hints}
        print(json.dumps(row), file=sys.stderr, flush=True)
        results.append(row)
    doc = {"machine": machine(), "python": platform.python_version(),
           "onnxruntime": ort.__version__, "threads": args.threads, "tree2mat": tree2mat.__version__, "date": time.strftime("%Y-%m-%d"),
           "results": results}
    print(report(doc))
    if args.out:
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
    if args.write is not None:
        write_costs(fitted_costs(doc, [n for n in args.write.split(",") if n]), args.costs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
