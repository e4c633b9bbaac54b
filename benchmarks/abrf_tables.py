"""The rest of Utkin & Konstantinov's regression tables (*Attention-based Random Forest and
Contamination Model*, section 6.1) with tree2mat.attention, on the data the paper names that
scikit-learn ships or generates: Diabetes, Friedman 1-3, Regression and Sparse (the paper's
Table 1: 442, 100, 100, 100, 100 and 100 rows; 10, 10, 4, 4, 100 and 10 features).

- Tables 2-3: random forest, ABRF-1 (L2); 4-5: extra trees, ABRF-1 (L2); Conditions 1 and 2;
- Tables 6-7: random forest / extra trees, Condition 2, ABRF-1 with the L1 loss (8: L1 vs L2);
- Tables 9-11: ABRF-2 (random forest C1, extra trees C2, random forest C2);
- Tables 12-14: ABRF-3 (the same three); 15: ABRF-1, -2, -3 under Condition 2 (random forest).

Every table: the forest (100 trees; Condition 1: depth at most 2, Condition 2: at least 10 rows
a leaf), the Softmax model (epsilon 0, tau cross-validated) and the ABRF, R^2 and MAE on n/5
test rows, averaged over repeated random splits (the paper: 100), as benchmarks/abrf_paper.py.
One forest per split serves every table of its kind and condition. ABRF-1's epsilon (k/9) and
tau are chosen by 5-fold cross-validation; ABRF-2 starts from the Softmax model's tau and ABRF-3
from ABRF-1's epsilon and tau (what ``fit(..., variant=2|3)`` with the grids would choose: the
same cross-validation). "Regression" is ``make_regression(100, 100)`` (10 informative features,
no noise: scikit-learn's defaults), "Sparse" ``make_sparse_uncorrelated(100, 10)``.

The paper states no noise for Friedman 1-3 (it points to Breiman's bagging paper): ``--noise``
picks zero (scikit-learn's default), ``breiman`` (sd 1, 125, 0.1: signal sd about 3 times the
noise's) or ``power`` (sd 2.82, 218, 0.182: signal power 3 times the noise's).

    python -m benchmarks.abrf_tables --out benchmarks/abrf_tables.json [--repeats 100] [--noise zero] [--budget-s S]
    python -m benchmarks.abrf_tables --baseline --out benchmarks/abrf_noise.json [--repeats 30]
    python -m benchmarks.abrf_tables --draws 20 --repeats 20 --out benchmarks/abrf_draws.json [--noise zero]

``--baseline`` measures only the forests' R^2 on Friedman 1-3 at the three noise levels (the
gap between our forests and the paper's); ``--draws D`` the random forest's R^2 averaged over
the splits of each of D fixed draws of the data (had the paper drawn its data once, its figure
would be one such mean). ``--from FILE`` prints an earlier run's tables. Splits run repetition by repetition; ``--budget-s``
starts no new repetition after that many seconds, so a short run has whole repetitions.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np
from sklearn.datasets import load_diabetes, make_friedman1, make_friedman2, make_friedman3, make_regression, make_sparse_uncorrelated
from sklearn.ensemble import ExtraTreesRegressor, RandomForestRegressor
from sklearn.metrics import mean_absolute_error, r2_score

from benchmarks.abrf_paper import CONDITIONS, EPSILONS
from benchmarks.abrf_paper import PAPER as ABRF_PAPER
from tree2mat import attention

DATASETS = ("Diabetes", "Friedman 1", "Friedman 2", "Friedman 3", "Regression", "Sparse")
FRIEDMAN = {"Friedman 1": make_friedman1, "Friedman 2": make_friedman2, "Friedman 3": make_friedman3}
#: Noise sd of Friedman 1, 2, 3 (signal sd, 200 000 rows: 4.88, 378, 0.316).
NOISES = {"zero": (0.0, 0.0, 0.0), "breiman": (1.0, 125.0, 0.1), "power": (2.82, 218.0, 0.182)}
KINDS = {"rf": RandomForestRegressor, "ert": ExtraTreesRegressor}
#: (forest kind, condition) -> the attention models fitted on its forests.
SETUPS = {("rf", 1): ("l2", "abrf2", "abrf3"), ("rf", 2): ("l2", "l1", "abrf2", "abrf3"), ("ert", 1): ("l2",), ("ert", 2): ("l2", "l1", "abrf2", "abrf3")}
#: Paper table -> (forest kind, condition, model).
TABLES = {
    2: ("rf", 1, "l2"), 3: ("rf", 2, "l2"), 4: ("ert", 1, "l2"), 5: ("ert", 2, "l2"), 6: ("rf", 2, "l1"), 7: ("ert", 2, "l1"),
    9: ("rf", 1, "abrf2"), 10: ("ert", 2, "abrf2"), 11: ("rf", 2, "abrf2"), 12: ("rf", 1, "abrf3"), 13: ("ert", 2, "abrf3"), 14: ("rf", 2, "abrf3"),
}
#: The paper's tables: dataset -> (epsilon_opt or None, R^2 (forest, Softmax, model), MAE (the same)).
PAPER: dict[int, dict[str, tuple]] = {
    # (Tables 2 and 3 on Diabetes and Friedman 1-3: abrf_paper.py's, the issue 19 run's)
    2: {**{name: v for (c, name), v in ABRF_PAPER.items() if c == 1},
        "Regression": (0.333, (0.356, 0.322, 0.431), (111.2, 114.6, 102.2)), "Sparse": (0, (0.472, 0.534, 0.534), (1.915, 1.766, 1.766))},
    3: {**{name: v for (c, name), v in ABRF_PAPER.items() if c == 2},
        "Regression": (0.667, (0.380, 0.366, 0.450), (109.1, 110.5, 100.8)), "Sparse": (0, (0.470, 0.529, 0.529), (1.908, 1.790, 1.790))},
    4: {"Diabetes": (0.333, (0.376, 0.400, 0.407), (48.439, 47.382, 46.721)), "Friedman 1": (0.778, (0.411, 0.416, 0.449), (2.638, 2.639, 2.533)),
        "Friedman 2": (0.556, (0.782, 0.810, 0.872), (142.2, 131.8, 105.3)), "Friedman 3": (1, (0.606, 0.606, 0.760), (0.178, 0.178, 0.137)),
        "Regression": (1, (0.352, 0.352, 0.451), (110.7, 110.7, 100.5)), "Sparse": (0, (0.394, 0.489, 0.489), (2.097, 1.888, 1.888))},
    5: {"Diabetes": (0.222, (0.438, 0.441, 0.441), (44.31, 44.00, 43.98)), "Friedman 1": (1, (0.471, 0.471, 0.513), (2.502, 2.502, 2.426)),
        "Friedman 2": (1, (0.813, 0.813, 0.930), (123.0, 123.0, 74.596)), "Friedman 3": (1, (0.570, 0.570, 0.739), (0.179, 0.179, 0.138)),
        "Regression": (0.889, (0.402, 0.405, 0.447), (106.3, 106.1, 102.1)), "Sparse": (0.111, (0.452, 0.527, 0.536), (1.994, 1.845, 1.826))},
    6: {"Diabetes": (0, (0.416, 0.424, 0.424), (44.92, 44.66, 44.66)), "Friedman 1": (0.667, (0.459, 0.433, 0.454), (2.540, 2.589, 2.594)),
        "Friedman 2": (0.556, (0.841, 0.847, 0.877), (111.7, 110.0, 101.7)), "Friedman 3": (0.667, (0.625, 0.628, 0.689), (0.154, 0.155, 0.132)),
        "Regression": (0.556, (0.380, 0.366, 0.439), (109.1, 110.5, 100.7)), "Sparse": (0, (0.470, 0.529, 0.529), (1.908, 1.790, 1.790))},
    7: {"Diabetes": (0, (0.438, 0.431, 0.433), (44.55, 44.00, 44.43)), "Friedman 1": (0.667, (0.471, 0.471, 0.498), (2.502, 2.502, 2.453)),
        "Friedman 2": (1, (0.813, 0.813, 0.924), (123.0, 123.0, 76.34)), "Friedman 3": (0.667, (0.570, 0.570, 0.699), (0.179, 0.179, 0.143)),
        "Regression": (0.889, (0.402, 0.405, 0.445), (106.3, 106.1, 102.7)), "Sparse": (0, (0.452, 0.527, 0.534), (1.994, 1.845, 1.830))},
    9: {"Diabetes": (None, (0.390, 0.399, 0.408), (46.06, 46.25, 45.93)), "Friedman 1": (None, (0.423, 0.404, 0.303), (2.624, 2.655, 2.775)),
        "Friedman 2": (None, (0.837, 0.841, 0.933), (113.9, 113.6, 64.66)), "Friedman 3": (None, (0.769, 0.752, 0.621), (0.133, 0.138, 0.158)),
        "Regression": (None, (0.356, 0.322, 0.336), (111.2, 114.6, 111.7)), "Sparse": (None, (0.472, 0.534, 0.490), (1.915, 1.766, 1.746))},
    10: {"Diabetes": (None, (0.438, 0.441, 0.345), (44.55, 44.00, 47.57)), "Friedman 1": (None, (0.471, 0.471, 0.281), (2.502, 2.502, 2.775)),
         "Friedman 2": (None, (0.813, 0.813, 0.945), (123.0, 123.0, 50.88)), "Friedman 3": (None, (0.570, 0.570, 0.662), (0.179, 0.179, 0.156)),
         "Regression": (None, (0.402, 0.405, 0.516), (106.3, 106.1, 91.58)), "Sparse": (None, (0.452, 0.527, 0.591), (1.994, 1.845, 1.582))},
    11: {"Diabetes": (None, (0.416, 0.424, 0.328), (44.92, 44.66, 47.59)), "Friedman 1": (None, (0.459, 0.438, 0.325), (2.540, 2.589, 2.792)),
         "Friedman 2": (None, (0.841, 0.847, 0.929), (111.7, 110.0, 69.1)), "Friedman 3": (None, (0.625, 0.628, 0.641), (0.154, 0.155, 0.145)),
         "Regression": (None, (0.380, 0.366, 0.570), (109.1, 110.5, 88.21)), "Sparse": (None, (0.470, 0.529, 0.532), (1.908, 1.790, 1.671))},
    12: {"Diabetes": (0, (0.390, 0.399, 0.408), (46.06, 46.25, 45.93)), "Friedman 1": (0.778, (0.423, 0.404, 0.428), (2.624, 2.655, 2.605)),
         "Friedman 2": (0, (0.837, 0.841, 0.933), (113.9, 113.6, 64.66)), "Friedman 3": (1, (0.769, 0.752, 0.811), (0.133, 0.138, 0.124)),
         "Regression": (1, (0.356, 0.322, 0.424), (111.2, 114.6, 102.9)), "Sparse": (0.111, (0.472, 0.534, 0.602), (1.915, 1.766, 1.596))},
    13: {"Diabetes": (1, (0.438, 0.438, 0.425), (44.55, 44.00, 44.90)), "Friedman 1": (1, (0.471, 0.471, 0.505), (2.502, 2.502, 2.443)),
         "Friedman 2": (0.111, (0.813, 0.836, 0.966), (123.0, 123.0, 44.651)), "Friedman 3": (0.889, (0.570, 0.570, 0.709), (0.179, 0.179, 0.140)),
         "Regression": (0.333, (0.402, 0.384, 0.518), (106.3, 106.1, 92.720)), "Sparse": (0.222, (0.452, 0.520, 0.629), (1.994, 1.845, 1.556))},
    14: {"Diabetes": (0.778, (0.416, 0.424, 0.406), (44.92, 44.66, 45.36)), "Friedman 1": (1, (0.459, 0.438, 0.459), (2.540, 2.589, 2.564)),
         "Friedman 2": (0.222, (0.841, 0.847, 0.933), (111.7, 110.0, 68.93)), "Friedman 3": (0.111, (0.625, 0.628, 0.688), (0.154, 0.155, 0.140)),
         "Regression": (0.111, (0.380, 0.366, 0.578), (109.1, 110.5, 87.87)), "Sparse": (0.111, (0.470, 0.529, 0.592), (1.908, 1.790, 1.599))},
}
TITLES = {"l2": "ABRF-1", "l1": "ABRF-1 (L1)", "abrf2": "ABRF-2", "abrf3": "ABRF-3"}


def dataset(name: str, seed: int, noise: str) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``name`` (the generated ones drawn anew per repetition, from ``seed``)."""
    if name == "Diabetes":
        return load_diabetes(return_X_y=True)
    if name == "Regression":
        return make_regression(n_samples=100, n_features=100, random_state=seed)
    if name == "Sparse":
        return make_sparse_uncorrelated(n_samples=100, n_features=10, random_state=seed)
    return FRIEDMAN[name](n_samples=100, noise=NOISES[noise][int(name[-1]) - 1], random_state=seed)


def _split(name: str, rep: int, noise: str, draw: int | None = None) -> tuple[np.ndarray, ...]:
    """Training and test rows of one repetition: 4n/5 and n/5, drawn from ``rep`` (the data too,
    unless ``draw`` fixes its seed)."""
    X, y = dataset(name, rep if draw is None else draw, noise)
    order = np.random.default_rng(rep).permutation(len(y))
    cut = len(y) * 4 // 5
    return X[order[:cut]], y[order[:cut]], X[order[cut:]], y[order[cut:]]


def _models(forest: object, X: np.ndarray, y: np.ndarray, names: tuple[str, ...]) -> dict[str, tuple[object, float]]:
    """The Softmax model and the attention models ``names`` on one forest, each with its fit's seconds."""
    out: dict[str, tuple[object, float]] = {}

    def timed(key: str, **kw: object) -> object:
        start = time.perf_counter()
        model = attention.fit(forest, X, y, **kw)  # type: ignore[arg-type]
        out[key] = (model, time.perf_counter() - start)
        return model

    softmax = timed("softmax", epsilon=0.0, tau="auto")
    abrf1 = timed("l2", epsilon=list(EPSILONS), tau="auto")
    if "l1" in names:
        timed("l1", epsilon=list(EPSILONS), tau="auto", loss="l1")
    if "abrf2" in names:
        timed("abrf2", epsilon=0.0, tau=softmax.tau, variant=2)  # type: ignore[attr-defined]
    if "abrf3" in names:
        timed("abrf3", epsilon=abrf1.epsilon, tau=abrf1.tau, variant=3)  # type: ignore[attr-defined]
    return out


def one_split(job: tuple[str, int, str, str, int]) -> dict:
    """One repetition of one setup: the forest's, the Softmax model's and each ABRF's test R^2 and
    MAE, the epsilon each chose and its fit's seconds."""
    kind, condition, name, noise, rep = job
    Xtr, ytr, Xte, yte = _split(name, rep, noise)
    forest = KINDS[kind](n_estimators=100, random_state=rep, **CONDITIONS[condition]).fit(Xtr, ytr)
    out: dict = {"kind": kind, "condition": condition, "dataset": name, "noise": noise, "rep": rep}
    pred = forest.predict(Xte)
    out["forest_r2"], out["forest_mae"] = r2_score(yte, pred), mean_absolute_error(yte, pred)
    for key, (model, seconds) in _models(forest, Xtr, ytr, SETUPS[(kind, condition)]).items():
        pred = model.predict(Xte)  # type: ignore[attr-defined]
        out[f"{key}_r2"], out[f"{key}_mae"] = r2_score(yte, pred), mean_absolute_error(yte, pred)
        out[f"{key}_epsilon"], out[f"{key}_s"] = model.epsilon, round(seconds, 3)  # type: ignore[attr-defined]
    return out


def one_baseline(job: tuple[str, int, str, str, int]) -> dict:
    """One repetition of the noise measurement: the forest's test R^2 alone."""
    kind, condition, name, noise, rep = job
    Xtr, ytr, Xte, yte = _split(name, rep, noise)
    forest = KINDS[kind](n_estimators=100, random_state=rep, **CONDITIONS[condition]).fit(Xtr, ytr)
    return {"kind": kind, "condition": condition, "dataset": name, "noise": noise, "rep": rep, "forest_r2": r2_score(yte, forest.predict(Xte))}


def one_draw(job: tuple[str, int, str, str, int, int]) -> dict:
    """One split of one fixed draw of the data (``--draws``): the forest's test R^2 alone."""
    kind, condition, name, noise, draw, rep = job
    Xtr, ytr, Xte, yte = _split(name, rep, noise, draw)
    forest = KINDS[kind](n_estimators=100, random_state=rep, **CONDITIONS[condition]).fit(Xtr, ytr)
    return {"kind": kind, "condition": condition, "dataset": name, "noise": noise, "draw": draw, "rep": rep, "forest_r2": r2_score(yte, forest.predict(Xte))}


def draw_table(runs: list[dict]) -> str:
    """Markdown: per condition and dataset, the spread over fixed draws of the forest's R² averaged
    over each draw's splits (the paper's figure, if it drew its data once, is one such mean)."""
    lines = ["| condition | dataset | mean over draws | lowest draw | highest draw | draws at or above the paper | paper | draws × splits |",
             "|---|---|---|---|---|---|---|---|"]
    for condition in CONDITIONS:
        for name in FRIEDMAN:
            mine = [r for r in runs if (r["condition"], r["dataset"]) == (condition, name)]
            if not mine:
                continue
            draws = sorted({r["draw"] for r in mine})
            means = np.array([np.mean([r["forest_r2"] for r in mine if r["draw"] == d]) for d in draws])
            paper = PAPER[1 + condition][name][1][0]
            lines.append(f"| {condition} | {name} | {means.mean():.3f} | {means.min():.3f} | {means.max():.3f} | "
                         f"{int(np.sum(means >= paper))} of {len(draws)} | {paper:.3f} | {len(draws)} × {len(mine) // len(draws)} |")
    return "\n".join(lines)


def _mean_se(values: list[float]) -> str:
    return f"{np.mean(values):.3f} ± {np.std(values) / np.sqrt(len(values)):.3f}"


def table(number: int, runs: list[dict]) -> str:
    """Markdown: one paper table, our means (the paper's figure) per dataset, the model's R² gain
    over the forest (mean ± standard error) and the splits averaged."""
    kind, condition, key = TABLES[number]
    base, title = ("ERT" if kind == "ert" else "RF"), TITLES[key]
    lines = [
        f"| dataset | ε chosen (median) | R² {base} | R² Softmax | R² {title} | MAE {base} | MAE Softmax | MAE {title} | {title} − {base} (R²) | splits |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, (eps, r2, mae) in PAPER[number].items():
        mine = [r for r in runs if (r["kind"], r["condition"], r["dataset"]) == (kind, condition, name) and f"{key}_r2" in r]
        if not mine:
            continue
        mean = {k: float(np.mean([r[k] for r in mine])) for k in (f"{m}_{s}" for m in ("forest", "softmax", key) for s in ("r2", "mae"))}
        chosen = f"{np.median([r[f'{key}_epsilon'] for r in mine]):.3f}" + ("" if eps is None else f" ({eps:g})")
        cells = [f"{mean[f'{m}_r2']:.3f} ({p:.3f})" for m, p in zip(("forest", "softmax", key), r2)]
        cells += [f"{mean[f'{m}_mae']:.4g} ({p:g})" for m, p in zip(("forest", "softmax", key), mae)]
        gain = _mean_se([r[f"{key}_r2"] - r["forest_r2"] for r in mine])
        lines.append(f"| {name} | {chosen} | " + " | ".join(cells) + f" | {gain} | {len(mine)} |")
    return "\n".join(lines)


def derived(runs: list[dict]) -> str:
    """Markdown: Table 8 (ABRF-1's R², L1 against L2, random forest, Condition 2) and Table 15
    (ABRF-1, -2, -3, the same forests), ours (the paper's)."""
    lines = ["| dataset | Table 8: L1 | Table 8: L2 | Table 15: ABRF-1 | Table 15: ABRF-2 | Table 15: ABRF-3 | splits |", "|---|---|---|---|---|---|---|"]
    for name in DATASETS:
        mine = [r for r in runs if (r["kind"], r["condition"], r["dataset"]) == ("rf", 2, name)]
        if not mine:
            continue
        cells = [f"{np.mean([r[f'{key}_r2'] for r in mine]):.3f} ({PAPER[n][name][1][2]:.3f})" for key, n in (("l1", 6), ("l2", 3))]
        cells += [f"{np.mean([r[f'{key}_r2'] for r in mine]):.3f} ({PAPER[n][name][1][2]:.3f})" for key, n in (("l2", 3), ("abrf2", 11), ("abrf3", 14))]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {len(mine)} |")
    return "\n".join(lines)


def noise_table(runs: list[dict]) -> str:
    """Markdown: the forests' R² on Friedman 1-3 per noise level (mean ± standard error), and the paper's."""
    head = "| forest | condition | dataset | " + " | ".join(f"noise {n}" for n in NOISES) + " | paper | splits |"
    lines = [head, "|---|---|---|" + "---|" * (len(NOISES) + 2)]
    for kind, condition in SETUPS:
        for name in FRIEDMAN:
            mine = {n: [r["forest_r2"] for r in runs if (r["kind"], r["condition"], r["dataset"], r["noise"]) == (kind, condition, name, n)] for n in NOISES}
            if not all(mine.values()):
                continue
            paper = PAPER[{("rf", 1): 2, ("rf", 2): 3, ("ert", 1): 4, ("ert", 2): 5}[(kind, condition)]][name][1][0]
            cells = " | ".join(_mean_se(v) for v in mine.values())
            lines.append(f"| {kind.upper()} | {condition} | {name} | {cells} | {paper:.3f} | {len(mine['zero'])} |")
    return "\n".join(lines)


def _jobs(args: argparse.Namespace) -> list[tuple]:
    """Every split, repetition by repetition (so a run stopped by its budget has whole ones)."""
    if args.draws:
        return [("rf", c, name, args.noise, 1000 + d, rep) for rep in range(args.repeats) for d in range(args.draws) for c in CONDITIONS for name in FRIEDMAN]
    if args.baseline:
        return [(k, c, name, noise, rep) for rep in range(args.repeats) for (k, c) in SETUPS for name in FRIEDMAN for noise in NOISES]
    names = args.datasets.split(",") if args.datasets else DATASETS
    return [(k, c, name, args.noise, rep) for rep in range(args.repeats) for (k, c) in SETUPS for name in names]


def report(runs: list[dict], baseline: bool) -> str:
    if runs and "draw" in runs[0]:
        return draw_table(runs)
    if baseline:
        return noise_table(runs)
    return "\n\n".join([f"Table {n}\n\n{table(n, runs)}" for n in TABLES] + [f"Tables 8 and 15\n\n{derived(runs)}"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="the JSON file to write (required unless --from)")
    parser.add_argument("--repeats", type=int, default=100, help="random splits per dataset and setup (the paper: 100)")
    parser.add_argument("--noise", choices=tuple(NOISES), default="zero", help="Friedman 1-3's noise (see above)")
    parser.add_argument("--datasets", help="comma-separated names (default: all six)")
    parser.add_argument("--baseline", action="store_true", help="the forests' R² on Friedman 1-3 at every noise level, alone")
    parser.add_argument("--draws", type=int, default=0, help="the forests' R² over this many fixed draws of Friedman 1-3 (random forest, --noise)")
    parser.add_argument("--budget-s", type=float, default=float("inf"), help="start no repetition after this many seconds")
    parser.add_argument("--from", dest="source", help="print the tables of an earlier --out file instead of running")
    args = parser.parse_args()
    if args.source:
        saved = json.load(open(args.source))
        print(report(saved["runs"], saved["meta"].get("baseline", False)))
        return
    if not args.out:
        parser.error("--out: name the JSON file to write")
    work = one_draw if args.draws else one_baseline if args.baseline else one_split
    start, runs = time.perf_counter(), list[dict]()
    meta = {"date": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()}, {platform.system()}, {os.cpu_count()} cores",
            "baseline": args.baseline, "noise": args.noise, "epsilons": EPSILONS, "tau_factors": attention.TAU_FACTORS}
    for job in _jobs(args):
        if job[-1] > 0 and job[-1] != runs[-1]["rep"] and time.perf_counter() - start > args.budget_s:
            break
        runs.append(work(job))
        if len(runs) % 10 == 0:
            print(f"{len(runs)} splits (rep {job[-1]}), {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
            with open(args.out, "w") as fh:
                json.dump({"meta": {**meta, "partial": True}, "runs": runs}, fh, indent=1)
    meta.update(repeats=runs[-1]["rep"] + 1, seconds=round(time.perf_counter() - start, 1))
    with open(args.out, "w") as fh:
        json.dump({"meta": meta, "runs": runs}, fh, indent=1)
    print(report(runs, args.baseline))


if __name__ == "__main__":
    main()
