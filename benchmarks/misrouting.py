"""How many rows the ai.onnx.ml TreeEnsemble converters get wrong, next to tree2mat, on the same rows.

For each model (trained here from fixed seeds) the rows come from tree2mat's own synthesizer
(``tree2mat.verify.synthesize``): random rows, threshold rows (every split threshold and its
float32 neighbours, NaN at each node), NaN, +-inf and extreme rows, kept only where the library
accepts them, plus ``sentinel`` rows for models with a missing-value sentinel (XGBoost
``missing=-999``, LightGBM ``zero_as_missing``). The reference is the library's own prediction on
those float32 rows. Both graphs run in onnxruntime on the CPU provider.

A row counts as *wrong* when its label differs from the library's, or any probability / value
differs by more than ``1e-4 * (1 + |reference|)`` (far above float32 summation noise). The
TreeEnsemble graph exposes no leaf ids, so for the peer this is a lower bound on misrouted rows.
tree2mat is counted the same way, and its routing is also checked exactly, leaf by leaf, by
``tree2mat.verify.verify``.

    python -m benchmarks.misrouting --out misrouting.json            # all models, 4-6 min on 2 cores
    python -m benchmarks.misrouting --models lgbm_binary --rows 500  # one model, quicker

Needs ``pip install -e '.[bench]'`` (onnxmltools, skl2onnx, lightgbm, xgboost).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

import tree2mat
from tree2mat import peers
from tree2mat.errors import UnsupportedModelError
from tree2mat.forms import DEFAULT_FORM, FORMS
from tree2mat.ir.core import Ensemble
from tree2mat.peers import library_of, one_line
from tree2mat.verify import CHUNK_BYTES, run_graph, synthesize

#: A row is wrong when a value differs by more than ``VALUE_RTOL * (1 + |reference|)``.
VALUE_RTOL = 1e-4
N_FEATURES = 28
SENTINEL_XGB = -999.0
#: LightGBM's kZeroThreshold: it takes |x| <= 1e-35 (float32 1e-35, compared in float64) for zero.
LIGHTGBM_ZERO = float(np.float32(1e-35))


# --------------------------------------------------------------------------------- the models


@dataclass(frozen=True)
class Case:
    """One benchmark model: its data, how to fit it, and which peer converts it."""

    name: str
    description: str
    data: Callable[[int, int], tuple[np.ndarray, np.ndarray]]  # (rows, seed) -> X float64, y
    fit: Callable[[np.ndarray, np.ndarray, int], Any]  # (X, y, seed) -> fitted model
    peer: str  # "onnxmltools" or "skl2onnx"
    sentinel: float | None = None  # an input value the model treats as missing, besides NaN
    sentinel_within: float = 0.0  # ... or within this of it (LightGBM: |x| <= 1e-35 is zero)
    categorical: tuple[int, ...] = ()  # categorical features


def classification(n_classes: int = 2, nan: bool = False, category: bool = False) -> Callable[[int, int], tuple]:
    """``make_classification`` data (28 continuous features); optionally 10% NaN in features 0-9,
    or feature 0 made an integer category (24 values, from its quantiles)."""
    def data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        from sklearn.datasets import make_classification

        X, y = make_classification(
            n_samples=n, n_features=N_FEATURES, n_informative=16, n_redundant=6, n_classes=n_classes,
            n_clusters_per_class=2, flip_y=0.02, random_state=seed,
        )
        if nan:
            X = _cells(X, seed, np.nan, share=0.1)
        if category:
            edges = np.quantile(X[:, 0], np.linspace(0, 1, 25)[1:-1])
            X[:, 0] = np.digitize(X[:, 0], edges).astype(np.float64)
        return X, y

    return data


def regression(missing: float | None = None, share: float = 0.1) -> Callable[[int, int], tuple]:
    """``make_regression`` data (28 features, 20 informative, a mild non-linearity); optionally
    ``share`` of the cells of features 0-9 set to ``missing`` (NaN, a sentinel or 0)."""
    def data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        from sklearn.datasets import make_regression

        X, y = make_regression(n_samples=n, n_features=N_FEATURES, n_informative=20, noise=10.0, random_state=seed)
        y = y + 0.05 * y**2 / (1 + np.abs(y))
        return (X if missing is None else _cells(X, seed, missing, share)), y

    return data


def _cells(X: np.ndarray, seed: int, value: float, share: float, features: int = 10) -> np.ndarray:
    """``share`` of the cells of the first ``features`` features set to ``value``."""
    X = X.copy()
    cells = np.random.default_rng(seed).random((X.shape[0], features)) < share
    X[:, :features][cells] = value
    return X


def xgboost(estimator: str, **params: Any) -> Callable[[np.ndarray, np.ndarray, int], Any]:
    def fit(X: np.ndarray, y: np.ndarray, seed: int) -> Any:
        import xgboost as xgb

        model = getattr(xgb, estimator)(n_estimators=100, max_depth=6, random_state=seed, n_jobs=2, **params)
        return model.fit(X, y)

    return fit


def lightgbm(
    estimator: str, categorical_feature: list[int] | None = None, **params: Any,
) -> Callable[[np.ndarray, np.ndarray, int], Any]:
    def fit(X: np.ndarray, y: np.ndarray, seed: int) -> Any:
        import lightgbm as lgb

        model = getattr(lgb, estimator)(random_state=seed, n_jobs=2, verbose=-1, **params)
        return model.fit(X, y, **({"categorical_feature": categorical_feature} if categorical_feature else {}))

    return fit


def hist_gradient_boosting(X: np.ndarray, y: np.ndarray, seed: int) -> Any:
    from sklearn.ensemble import HistGradientBoostingClassifier

    return HistGradientBoostingClassifier(max_iter=100, random_state=seed).fit(X, y)


CASES: dict[str, Case] = {
    case.name: case
    for case in (
        Case("xgb_binary", "XGBClassifier, binary, 100 trees, depth 6",
             classification(), xgboost("XGBClassifier"), "onnxmltools"),
        Case("xgb_multiclass", "XGBClassifier, 4 classes, 100 rounds (400 trees), depth 6",
             classification(n_classes=4), xgboost("XGBClassifier"), "onnxmltools"),
        Case("xgb_reg_nan", "XGBRegressor, 100 trees, depth 6, 10% NaN in features 0-9",
             regression(missing=np.nan), xgboost("XGBRegressor"), "onnxmltools"),
        Case("xgb_reg_missing", f"XGBRegressor, 100 trees, depth 6, missing={SENTINEL_XGB:g} (10% of features 0-9)",
             regression(missing=SENTINEL_XGB), xgboost("XGBRegressor", missing=SENTINEL_XGB), "onnxmltools",
             sentinel=SENTINEL_XGB),
        Case("lgbm_binary", "LGBMClassifier, binary, 100 trees, 31 leaves",
             classification(), lightgbm("LGBMClassifier", n_estimators=100, num_leaves=31), "onnxmltools"),
        Case("lgbm_reg_large", "LGBMRegressor, 200 trees, 127 leaves",
             regression(), lightgbm("LGBMRegressor", n_estimators=200, num_leaves=127, min_child_samples=10),
             "onnxmltools"),
        Case("lgbm_nan", "LGBMClassifier, binary, 100 trees, 31 leaves, 10% NaN in features 0-9 (missing type NaN)",
             classification(nan=True), lightgbm("LGBMClassifier", n_estimators=100, num_leaves=31), "onnxmltools"),
        Case("lgbm_zero", "LGBMRegressor, 100 trees, 31 leaves, zero_as_missing=True, 20% zeros in features 0-9",
             regression(missing=0.0, share=0.2),
             lightgbm("LGBMRegressor", n_estimators=100, num_leaves=31, zero_as_missing=True), "onnxmltools",
             sentinel=0.0, sentinel_within=LIGHTGBM_ZERO),
        Case("lgbm_categorical", "LGBMClassifier, binary, 100 trees, 31 leaves, feature 0 categorical (24 values)",
             classification(category=True),
             lightgbm("LGBMClassifier", categorical_feature=[0], n_estimators=100, num_leaves=31), "onnxmltools",
             categorical=(0,)),
        Case("hgb_nan", "sklearn HistGradientBoostingClassifier, binary, 100 iterations, 10% NaN in features 0-9",
             classification(nan=True), hist_gradient_boosting, "skl2onnx"),
    )
}


# ---------------------------------------------------------------------------- the references


def reference(model: Any, X: np.ndarray) -> dict[str, np.ndarray]:
    """The library's own outputs: label and probabilities, or values [N, 1]."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "X does not have valid feature names"
        if hasattr(model, "predict_proba"):
            return {"label": np.asarray(model.predict(X)), "probabilities": np.asarray(model.predict_proba(X), np.float64)}
        return {"variable": np.asarray(model.predict(X), np.float64).reshape(X.shape[0], -1)}


def rounded_library(model: Any) -> Any | None:
    """A copy of the model whose float64 thresholds are rounded to the nearest float32, as a
    float32 TreeEnsemble stores them; None where thresholds are float32 already (XGBoost).
    Comparing a peer with this copy isolates what threshold rounding explains."""
    import copy

    library = library_of(model)
    if library == "lightgbm":
        import lightgbm as lgb

        lines = []
        for line in model.booster_.model_to_string().splitlines():
            if line.startswith("tree_sizes="):  # byte sizes of the tree blocks, which change here
                continue
            if line.startswith("threshold="):  # categorical nodes hold small integers here: unchanged
                values = [repr(float(np.float32(float(v)))) for v in line[len("threshold="):].split()]
                line = "threshold=" + " ".join(values)
            lines.append(line)
        out = copy.deepcopy(model)
        out._Booster = lgb.Booster(model_str="\n".join(lines) + "\n")
        return out
    if library == "sklearn" and hasattr(model, "_predictors"):
        out = copy.deepcopy(model)
        for predictors in out._predictors:
            for predictor in predictors:
                t = predictor.nodes["num_threshold"]
                predictor.nodes["num_threshold"] = t.astype(np.float32).astype(np.float64)
        return out
    return None


# ------------------------------------------------------------------------------------ the rows


def rows_ensemble(model: Any) -> tuple[Ensemble, str]:
    """The IR that drives row synthesis, and where it came from."""
    return tree2mat.load(model), "tree2mat.load"


def make_rows(
    model: Any, ens: Ensemble, case: Case, heldout: np.ndarray, rows: int, seed: int, max_nodes: int,
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """float32 rows by kind, filtered to what the library accepts; also refused kinds and why.
    ``heldout``: rows of the training distribution the model has not seen."""
    X, kinds = synthesize(ens, rows, dtype=np.dtype(np.float32), seed=seed, max_nodes=max_nodes)
    parts, start = {}, 0
    for kind, n in kinds.items():
        parts[kind] = X[start:start + n]
        start += n
    if case.sentinel is not None and "nan" in parts:  # the NaN rows again, NaN as the sentinel
        sentinel = parts["nan"].copy()
        sentinel[np.isnan(sentinel)] = np.float32(case.sentinel)
        parts["sentinel"] = sentinel
    parts["heldout"] = heldout.astype(np.float32)
    refused = {}
    for kind in list(parts):
        if parts[kind].shape[0] == 0:
            del parts[kind]
            continue
        try:
            reference(model, parts[kind][:64])
        except Exception as exc:  # the library rejects these rows (e.g. inf)
            refused[kind] = one_line(exc)
            del parts[kind]
    return parts, refused


# ------------------------------------------------------------------------------ the peers


def peer_convert(model: Any, case: Case) -> tuple[onnx.ModelProto, dict[str, Any]]:
    """The peer's ONNX graph and the exact call that made it."""
    return peers.convert(model, N_FEATURES, case.peer)


def peer_outputs(onx: onnx.ModelProto, X: np.ndarray, expected: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run the peer graph; its outputs named as the reference's (label first, then scores)."""
    return peers.outputs(peers.session(onx), X, "label" in expected)


# ---------------------------------------------------------------------------- the counting


def wrong_rows(got: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> dict[str, Any]:
    """Rows whose label differs, or whose values differ beyond ``VALUE_RTOL * (1 + |ref|)``."""
    n = next(iter(expected.values())).shape[0]
    label_bad = np.zeros(n, bool)
    value_bad = np.zeros(n, bool)
    max_abs = 0.0
    for name, exp in expected.items():
        g = got[name]
        if name == "label":
            label_bad |= g.astype(str) != exp.astype(str)
            continue
        e = exp.reshape(n, -1)
        g = g.reshape(n, -1)
        if g.shape != e.shape:
            raise ValueError(f"output {name}: shape {g.shape}, expected {e.shape}")
        with np.errstate(invalid="ignore"):
            diff = np.where(np.isnan(g) & np.isnan(e), 0.0, np.abs(g - e))
        diff = np.where(np.isnan(diff), np.inf, diff)
        value_bad |= (diff > VALUE_RTOL * (1 + np.abs(np.nan_to_num(e)))).any(axis=1)
        max_abs = max(max_abs, float(diff.max()) if diff.size else 0.0)
    bad = label_bad | value_bad
    return {
        "wrong": int(bad.sum()), "label_mismatch": int(label_bad.sum()), "value_mismatch": int(value_bad.sum()),
        "max_abs_diff": max_abs, "_rows": np.flatnonzero(bad),
    }


def gap_cells(X: np.ndarray, thresholds: list[np.ndarray]) -> np.ndarray:
    """Per row: whether some cell lies where ``x <= t`` (float64 t, as LightGBM / sklearn
    compare) and ``x <= float32(t)`` (round to nearest, as a float32 TreeEnsemble stores t)
    disagree for some threshold t of its feature."""
    hit = np.zeros(X.shape[0], bool)
    for f, t in enumerate(thresholds):
        if t.size == 0:
            continue
        near = t.astype(np.float32).astype(np.float64)
        lo, hi = np.minimum(t, near), np.maximum(t, near)
        gaps = t != near
        lo, hi = lo[gaps], hi[gaps]
        if lo.size == 0:
            continue
        x = X[:, f].astype(np.float64)
        order = np.argsort(lo)
        cover = np.maximum.accumulate(hi[order])  # gaps may overlap: the furthest reach so far
        k = np.searchsorted(lo[order], x, side="left") - 1  # the last gap with lo < x
        hit |= (k >= 0) & (cover[np.clip(k, 0, None)] >= x)  # x in (lo, hi] of some gap
    return hit


def _thresholds(ens: Ensemble) -> list[np.ndarray]:
    per = [[] for _ in range(ens.n_features)]
    for tree in ens.trees:
        numeric = np.ones(tree.n_internal, bool)
        numeric[tree.cat_nodes] = False
        for f, t in zip(tree.feature[numeric], tree.threshold[numeric]):
            per[int(f)].append(t)
    return [np.unique(np.asarray(v, np.float64)) for v in per]


def diagnose(X: np.ndarray, wrong: np.ndarray, thresholds: list[np.ndarray], case: Case) -> dict[str, int]:
    """What the rows hold, all of them and the wrong ones: a cell in a float32 rounding gap of some
    threshold of its feature (see :func:`gap_cells`), NaN, +-inf, a tiny value (0 < |x| <= 1e-35,
    which LightGBM reads as 0), the missing sentinel, a value of a categorical feature that is not a
    category code (not a whole number >= 0: LightGBM truncates it to one). ``wrong_plain``: wrong
    rows with none of these."""
    with np.errstate(invalid="ignore"):
        tiny = ((X != 0) & (np.abs(X.astype(np.float64)) <= LIGHTGBM_ZERO)).any(axis=1)
    marks = {
        "rounding_gap_cell": gap_cells(X, thresholds), "nan": np.isnan(X).any(axis=1), "inf": np.isinf(X).any(axis=1),
        "tiny": tiny,
    }
    if case.sentinel is not None:
        marks["sentinel"] = (np.abs(X.astype(np.float64) - case.sentinel) <= case.sentinel_within).any(axis=1)
    if case.categorical:
        C = X[:, list(case.categorical)]
        with np.errstate(invalid="ignore"):
            marks["non_code_category"] = (np.isfinite(C) & ((C != np.floor(C)) | (C < 0) | np.signbit(C))).any(axis=1)
    bad = np.zeros(X.shape[0], bool)
    bad[wrong] = True
    out = {}
    for name, mark in marks.items():
        out[f"rows_with_{name}"] = int(mark.sum())
        out[f"wrong_with_{name}"] = int((mark & bad).sum())
    nogap = bad & ~marks["rounding_gap_cell"]
    out["wrong_without_rounding_gap_cell"] = int(nogap.sum())
    for name, mark in marks.items():
        if name != "rounding_gap_cell":
            out[f"wrong_nogap_{name}"] = int((mark & nogap).sum())
    plain = ~np.logical_or.reduce(list(marks.values()))
    out["rows_plain"] = int(plain.sum())
    out["wrong_plain"] = int((plain & bad).sum())
    return out


def _examples(
    X: np.ndarray, rows: np.ndarray, got: dict[str, np.ndarray], expected: dict[str, np.ndarray], k: int = 3,
) -> list[dict]:
    name = "probabilities" if "probabilities" in expected else "variable"
    return [
        {"row": int(r), "expected": expected[name][r].tolist(), "got": got[name][r].tolist()} for r in rows[:k]
    ]


# ------------------------------------------------------------------------------ one model


def _strip(counts: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in counts.items() if not k.startswith("_")}


def run_peer(
    model: Any, case: Case, parts: dict[str, np.ndarray], refs: dict[str, dict], thresholds: list[np.ndarray],
) -> dict[str, Any]:
    try:
        onx, how = peer_convert(model, case)
    except Exception as exc:
        return {"converter": case.peer, "status": "refused", "error": one_line(exc)}
    result: dict[str, Any] = {"converter": case.peer, "status": "ok", **how, "per_kind": {}}
    rounded = rounded_library(model)
    for kind, X in parts.items():
        try:
            got = peer_outputs(onx, X, refs[kind])
        except Exception as exc:
            result["per_kind"][kind] = {"rows": int(X.shape[0]), "error": one_line(exc)}
            continue
        counts = wrong_rows(got, refs[kind])
        entry = {"rows": int(X.shape[0]), **_strip(counts)}
        entry["diagnosis"] = diagnose(X, counts["_rows"], thresholds, case)
        if rounded is not None:  # the peer against the library with float32-rounded thresholds
            residual = wrong_rows(got, reference(rounded, X))["_rows"]
            entry["wrong_vs_rounded_thresholds"] = int(residual.size)
            entry["wrong_vs_rounded_thresholds_holding"] = {
                k[len("wrong_with_"):]: v for k, v in diagnose(X, residual, thresholds, case).items()
                if k.startswith("wrong_with_")
            }
        if counts["wrong"]:
            entry["examples"] = _examples(X, counts["_rows"], got, refs[kind])
        result["per_kind"][kind] = entry
    return result


def run_tree2mat(model: Any, parts: dict[str, np.ndarray], refs: dict[str, dict]) -> dict[str, Any]:
    try:
        onx = tree2mat.convert(model)
    except UnsupportedModelError as exc:
        return {"status": "n/a (unsupported)", "error": str(exc)}
    try:
        return _tree2mat_counts(model, onx, parts, refs)
    except Exception as exc:  # record and go on: one broken model does not hide the others
        return {"status": "error", "error": one_line(exc)}


def _tree2mat_counts(model: Any, onx: onnx.ModelProto, parts: dict[str, np.ndarray], refs: dict[str, dict]) -> dict[str, Any]:
    form = {p.key: p.value for p in onx.metadata_props}["tree2mat.form"]
    call = f"tree2mat.convert(model)  # form {DEFAULT_FORM!r} (picked {form!r}), float32"
    result: dict[str, Any] = {"status": "ok", "call": call, "per_kind": {}}
    per_row = FORMS[form].bytes_per_row(tree2mat.load(model))
    chunk = max(1, min(65536, CHUNK_BYTES // max(per_row, 1)))  # as verify chunks
    for kind, X in parts.items():
        report = tree2mat.verify(model, onx, X)
        routing = [o for o in report.outputs if o.name == "routing"]
        graph = run_graph(onx, X, rows_per_chunk=chunk)
        got = {k: graph[k] for k in refs[kind]}
        if "label" in got:
            got["label"] = got["label"].ravel()
        counts = wrong_rows({k: (v if k == "label" else np.asarray(v, np.float64)) for k, v in got.items()}, refs[kind])
        result["per_kind"][kind] = {
            "rows": int(X.shape[0]), **_strip(counts),
            "routing_mismatch": max(o.mismatches for o in routing) if routing else None,
            "verify_passed": report.passed,
            "verify_mismatches": {o.name + (f" ({o.walk})" if o.walk else ""): o.mismatches for o in report.outputs},
        }
    return result


def run_case(case: Case, args: argparse.Namespace) -> dict[str, Any]:
    start = time.perf_counter()
    X, y = case.data(args.train_rows + args.heldout_rows, args.seed)
    model = case.fit(X[:args.train_rows], y[:args.train_rows], args.seed)
    trained = time.perf_counter()
    ens, rows_source = rows_ensemble(model)
    parts, refused = make_rows(model, ens, case, X[args.train_rows:], args.rows, args.seed, args.max_nodes)
    refs = {kind: reference(model, rows) for kind, rows in parts.items()}
    thresholds = _thresholds(ens)
    peer = run_peer(model, case, parts, refs, thresholds)
    peer_done = time.perf_counter()
    ours = run_tree2mat(model, parts, refs)
    done = time.perf_counter()
    return {
        "name": case.name,
        "description": case.description,
        "library": library_of(model),
        "estimator": type(model).__name__,
        "classifier": "label" in next(iter(refs.values())),
        "n_trees": ens.n_trees,
        "n_internal_nodes": sum(t.n_internal for t in ens.trees),
        "rows": {kind: int(rows.shape[0]) for kind, rows in parts.items()},
        "rows_source": rows_source,
        "rows_refused_by_library": refused,
        "peer": peer,
        "tree2mat": ours,
        "seconds": {"train": round(trained - start, 2), "rows_and_peer": round(peer_done - trained, 2),
                    "tree2mat": round(done - peer_done, 2), "total": round(done - start, 2)},
    }


# ---------------------------------------------------------------------------------- report


def _versions() -> dict[str, str]:
    """Versions as the modules report them (xgboost installs as ``xgboost`` or ``xgboost-cpu``)."""
    import importlib

    out = {"python": platform.python_version()}
    for name in ("tree2mat", "numpy", "sklearn", "xgboost", "lightgbm", "onnx", "onnxruntime", "onnxmltools", "skl2onnx"):
        try:
            out[name] = str(importlib.import_module(name).__version__)
        except ImportError:
            out[name] = "not installed"
    return out


OTHER_KINDS = ("inf", "extreme", "sentinel")


def _kinds(per_kind: dict[str, dict], key: str) -> str:
    """``threshold / random / NaN / held-out / other`` of one count."""
    def get(*kinds: str) -> str:
        vals = [per_kind[k].get(key) for k in kinds if k in per_kind]
        return "-" if not vals or any(v is None for v in vals) else str(sum(vals))

    return " / ".join([get("threshold"), get("random"), get("nan"), get("heldout"), get(*OTHER_KINDS)])


def _side_failed(side: dict) -> str | None:
    if side.get("status") != "ok":
        return side.get("status", "?") + (f": {side['error']}" if side.get("status") != "n/a (unsupported)" else "")
    errors = [f"{k}: {v['error']}" for k, v in side["per_kind"].items() if "error" in v]
    return "error: " + "; ".join(errors) if errors else None


def markdown(doc: dict) -> str:
    """The tables of MISROUTING.md, from the JSON document of a run."""
    lines = [
        "| model | peer | rows tested: all (threshold / random / NaN / held-out / other) "
        "| peer wrong rows: all (threshold / random / NaN / held-out / other) | peer labels flipped "
        "| peer max abs error | tree2mat wrong rows (same rule) | tree2mat routing mismatches (exact) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["results"]:
        rows = {k: {"n": n} for k, n in r["rows"].items()}
        tested = f"{sum(r['rows'].values())} ({_kinds(rows, 'n')})"
        peer, ours = r["peer"], r["tree2mat"]
        failed = _side_failed(peer)
        if failed:
            peer_cells = [failed, "-", "-"]
        else:
            pk = peer["per_kind"]
            peer_cells = [
                f"**{sum(v['wrong'] for v in pk.values())}** ({_kinds(pk, 'wrong')})",
                str(sum(v["label_mismatch"] for v in pk.values())) if r["classifier"] else "n/a",
                _fmt(max(float(v["max_abs_diff"]) for v in pk.values())),
            ]
        failed = _side_failed(ours)
        if failed:
            ours_cells = [failed, "-"]
        else:
            ok = ours["per_kind"]
            routing = [v["routing_mismatch"] for v in ok.values()]
            ours_cells = [
                f"**{sum(v['wrong'] for v in ok.values())}** ({_kinds(ok, 'wrong')})",
                "-" if any(x is None for x in routing) else str(sum(routing)),
            ]
        lines.append(f"| {r['name']} | {peer['converter']} | {tested} | " + " | ".join(peer_cells + ours_cells) + " |")
    return "\n".join(lines)


def causes(doc: dict) -> str:
    """What the peer's wrong rows hold, summed over all row kinds."""
    lines = [
        "| model | peer wrong rows | with a rounding-gap cell | without one, holding NaN / inf / tiny / sentinel "
        "/ non-code category | with none of these | rows with a gap cell, wrong or not "
        "| peer vs the library with thresholds rounded to nearest float32: wrong rows: holding NaN / inf / tiny "
        "/ sentinel / non-code category |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in doc["results"]:
        peer = r["peer"]
        if _side_failed(peer):
            continue
        pk = peer["per_kind"]
        wrong = sum(v["wrong"] for v in pk.values())
        diag = [v["diagnosis"] for v in pk.values()]

        def total(key: str) -> str:
            vals = [d[key] for d in diag if key in d]  # noqa: B023 (called within this iteration)
            return str(sum(vals)) if vals else "-"

        nogap = " / ".join(total(f"wrong_nogap_{k}") for k in ("nan", "inf", "tiny", "sentinel", "non_code_category"))
        n_rows = sum(v["rows"] for v in pk.values())
        lines.append(
            f"| {r['name']} | {wrong} | {total('wrong_with_rounding_gap_cell')} "
            f"| {total('wrong_without_rounding_gap_cell')}: {nogap} | {total('wrong_plain')} "
            f"| {total('rows_with_rounding_gap_cell')} of {n_rows} | {_residual(pk)} |"
        )
    return "\n".join(lines)


def run_line(doc: dict) -> str:
    """Versions, machine and options of a run, one line."""
    versions = ", ".join(f"{k} {v}" for k, v in doc["versions"].items())
    machine = doc["machine"]
    options = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in doc["args"].items() if k != "models")
    return f"Run: {versions}; {machine['system']} {machine['machine']}, {machine['cpus']} CPUs; options {options}."


def timings(doc: dict) -> str:
    lines = [
        "| model | trees | split nodes | train (s) | rows, references and peer (s) | tree2mat convert + verify (s) |",
        "|---|---|---|---|---|---|",
    ]
    for r in doc["results"]:
        t = r["seconds"]
        cells = [r["name"], r["n_trees"], r["n_internal_nodes"], t["train"], t["rows_and_peer"], t["tree2mat"]]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    lines.append(f"| all | | | | | {doc['seconds']} s in all |")
    return "\n".join(lines)


def _residual(per_kind: dict[str, dict]) -> str:
    """The peer's wrong rows against the rounded-threshold library, and what they hold."""
    entries = [v for v in per_kind.values() if "wrong_vs_rounded_thresholds" in v]
    if not entries:
        return "-"
    held = [
        str(sum(e["wrong_vs_rounded_thresholds_holding"][k] for e in entries))
        if k in entries[0]["wrong_vs_rounded_thresholds_holding"] else "-"
        for k in ("nan", "inf", "tiny", "sentinel", "non_code_category")
    ]
    return f"{sum(e['wrong_vs_rounded_thresholds'] for e in entries)}: " + " / ".join(held)


def _fmt(x: Any) -> str:
    return x if isinstance(x, str) else f"{x:.3g}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="write the results as JSON here")
    parser.add_argument("--report", metavar="JSON", help="print the Markdown tables of an earlier run's JSON and exit")
    parser.add_argument("--models", nargs="+", choices=list(CASES), default=list(CASES), help="models to run (default: all)")
    parser.add_argument("--rows", type=int, default=2000,
                        help="random rows per model (synthesize's `rows`; NaN / inf / extreme rows are a quarter each)")
    parser.add_argument("--train-rows", type=int, default=20_000, help="training rows per model")
    parser.add_argument("--heldout-rows", type=int, default=5_000,
                        help="rows of the training distribution not trained on, as float32")
    parser.add_argument("--max-nodes", type=int, default=5_000,
                        help="threshold rows for at most this many split nodes per model (a seeded sample)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the training data, the models and the rows")
    args = parser.parse_args(argv)
    if args.report:
        with open(args.report, encoding="utf-8") as fh:
            doc = json.load(fh)
        print(run_line(doc), markdown(doc), causes(doc), timings(doc), sep="\n\n")
        return 0
    started = time.perf_counter()
    results = []
    for name in args.models:
        print(f"[{time.perf_counter() - started:6.1f}s] {name} ...", file=sys.stderr, flush=True)
        try:
            results.append(run_case(CASES[name], args))
        except Exception:
            traceback.print_exc()
            return 1
    doc = {
        "schema": 1,
        "what": "rows whose label differs or whose value differs by more than value_rtol * (1 + |reference|)",
        "value_rtol": VALUE_RTOL,
        "args": {k: v for k, v in vars(args).items() if k not in ("out", "report")},
        "machine": {"system": platform.system(), "machine": platform.machine(), "cpus": _cpu_count()},
        "versions": _versions(),
        "seconds": round(time.perf_counter() - started, 1),
        "results": results,
    }
    print(markdown(doc), causes(doc), sep="\n\n")
    print(f"total {doc['seconds']} s", file=sys.stderr)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(_jsonable(doc), fh, indent=1, allow_nan=False)
            fh.write("\n")
    return 0


def _cpu_count() -> int | None:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, np.ndarray)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return _jsonable(obj.item())
    if isinstance(obj, float) and not np.isfinite(obj):
        return str(obj)  # "nan", "inf", "-inf": JSON has no such numbers
    return obj


if __name__ == "__main__":
    sys.exit(main())
