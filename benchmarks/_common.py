"""What several benchmark scripts share: the seven workloads of issue 5 and their data, NaN holes
in data, onnxruntime sessions and alternating timing, the decided walk built by force, a graph of
another checkout, the machine's description, the least-squares fit on relative error, and the
writing of fitted constants into tree2mat's cost file."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import joblib
import numpy as np
import onnxruntime as ort

from tree2mat.forms import costs, traverse


def workloads(seed: int) -> dict:
    """name -> (title, estimator factory, classes): issue 5's seven workloads."""
    import lightgbm as lgb
    import xgboost as xgb
    from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier, RandomForestRegressor

    return {
        "rf_clf": ("RandomForestClassifier(100, max_depth=8)", lambda: RandomForestClassifier(100, max_depth=8, random_state=seed, n_jobs=2), 2),
        "rf_reg": ("RandomForestRegressor(100, min_samples_leaf=5)", lambda: RandomForestRegressor(100, min_samples_leaf=5, random_state=seed, n_jobs=2), 0),
        "hgb_clf": ("HistGradientBoostingClassifier(100)", lambda: HistGradientBoostingClassifier(max_iter=100, random_state=seed), 2),
        "xgb_clf": ("XGBClassifier(100, depth 6)", lambda: xgb.XGBClassifier(n_estimators=100, max_depth=6, random_state=seed), 2),
        "xgb_5": ("XGBClassifier 5 classes, depth 6", lambda: xgb.XGBClassifier(n_estimators=100, max_depth=6, random_state=seed), 5),
        "lgbm_clf": ("LGBMClassifier(100, 31 leaves)", lambda: lgb.LGBMClassifier(n_estimators=100, num_leaves=31, random_state=seed, verbose=-1), 2),
        "lgbm_reg": ("LGBMRegressor(500, 255 leaves)", lambda: lgb.LGBMRegressor(n_estimators=500, num_leaves=255, random_state=seed, verbose=-1), 0),
    }


def data(classes: int, rows: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The workloads' data: 20 000 training rows (X, y) of 28 float32 features (14 informative;
    ``classes`` classes, 0: a regression) and ``rows`` scoring rows, all from ``seed``."""
    from sklearn.datasets import make_classification, make_regression

    n = 20_000 + rows
    if classes:
        X, y = make_classification(n, 28, n_informative=14, n_classes=classes, random_state=seed)
    else:
        X, y = make_regression(n, 28, n_informative=14, noise=5.0, random_state=seed)
    X = X.astype(np.float32)
    return X[:20_000], y[:20_000], X[20_000:]


def fitted(names: str, rows: int, seed: int) -> Iterator[tuple[str, object, np.ndarray]]:
    """(title, fitted model, ``rows`` scoring rows) for each workload of the comma-separated
    ``names``, trained as suite.py trains them."""
    for key in names.split(","):
        title, factory, classes = workloads(seed)[key]
        X, y, scoring = data(classes, rows, seed)
        yield title, factory().fit(X, y), scoring


def with_holes(X: np.ndarray, rng: np.random.Generator, zeros: bool = False) -> np.ndarray:
    """A copy of ``X`` with 5 % of the cells NaN (and, with ``zeros``, 5 % more set to 0)."""
    X = X.copy()
    X[rng.random(X.shape) < 0.05] = np.nan
    if zeros:
        X[rng.random(X.shape) < 0.05] = 0.0
    return X


def session(model: str | Path | bytes, threads: int, profile_dir: str | None = None) -> ort.InferenceSession:
    """onnxruntime's CPU session of ``model`` (a file or serialized bytes) on ``threads`` intra-op
    threads, quiet; with ``profile_dir``, profiling into that folder."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    if profile_dir is not None:
        opts.enable_profiling = True
        opts.profile_file_prefix = os.path.join(profile_dir, "profile")
    return ort.InferenceSession(str(model) if isinstance(model, Path) else model, opts, providers=["CPUExecutionProvider"])


def timed(sess: ort.InferenceSession, X: np.ndarray) -> float:
    """Seconds of one run of ``sess`` on ``X``."""
    name = sess.get_inputs()[0].name
    start = time.perf_counter()
    sess.run(None, {name: X})
    return time.perf_counter() - start


def alternating_p50s(sessions: dict[str, ort.InferenceSession], X: np.ndarray, runs: int, turn: int = 10) -> dict[str, float]:
    """Each session's p50 (seconds) over ``runs`` runs on ``X`` (at least ``turn``), the sessions
    taking turns every ``turn`` runs after one warm-up run each."""
    times: dict[str, list[float]] = {k: [] for k in sessions}
    for s in sessions.values():
        timed(s, X)
    for _ in range(max(1, runs // turn)):
        for k, s in sessions.items():
            times[k].extend(timed(s, X) for _ in range(turn))
    return {k: float(np.median(v)) for k, v in times.items()}


@contextlib.contextmanager
def decided_walk_built(rows: int | None) -> Iterator[None]:
    """Within it, traverse builds its decided walk for up to ``rows`` rows where its latency model
    would not (to measure it there); None: as the model says."""
    modelled = traverse.decided_rows
    if rows:
        traverse.decided_rows = lambda *a: modelled(*a) or rows  # type: ignore[assignment]
    try:
        yield
    finally:
        traverse.decided_rows = modelled  # type: ignore[assignment]


def convert_before(model, checkout: Path, out: Path) -> None:
    """``model``'s default graph as the tree2mat of ``checkout`` converts it, written to ``out``
    (in a subprocess importing that checkout; through the API, not the CLI: an editable
    install's finder would import this checkout's cli)."""
    joblib.dump(model, out.with_name("model.joblib"))
    before = f"import joblib, tree2mat; tree2mat.save(tree2mat.convert(joblib.load('model.joblib')), {out.name!r})"
    subprocess.run([sys.executable, "-c", before], check=True, env={**os.environ, "PYTHONPATH": str(checkout)},
                   capture_output=True, cwd=out.parent)


def cpus() -> int | None:
    """The CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def machine() -> str:
    """The machine, as the benchmarks' JSON records it."""
    return f"{platform.machine()}, {cpus()} CPUs, {platform.system()}"


def relative_least_squares(A: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The constants c of the model ``A c`` ≈ ``t`` that minimise the squared relative error."""
    coef, *_ = np.linalg.lstsq(A / t[:, None], np.ones_like(t), rcond=None)
    return coef


def write_costs(fitted: dict[str, dict[str, float]], path: Path = costs.PATH) -> None:
    """Write fitted constants (form -> name -> microseconds) into tree2mat's cost file (``path``,
    the package's tree2mat/forms/costs.json unless told), each to 3 significant digits; the
    other constants stay. A form or name the file does not have is refused: the forms read
    only those."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    for form, values in fitted.items():
        unknown = sorted(set(values) - set(doc["constants"].get(form, {})))
        if unknown:
            raise SystemExit(f"{path}: {form} has no constant {', '.join(unknown)}")
        doc["constants"][form].update({name: float(f"{value:.3g}") for name, value in values.items()})
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {', '.join(f'{form} ({len(v)})' for form, v in fitted.items())} to {path}", file=sys.stderr)
