"""``tree2mat bench``: how fast a model's graphs run, next to what a user would use otherwise.

Contenders, all on the same rows: tree2mat's forms (``auto`` by default, or those asked for), the
peer converter's ``ai.onnx.ml`` TreeEnsemble graph (skl2onnx / onnxmltools, when installed: the
``bench`` extra) and the library's own ``predict``. Per contender and batch size: rows per second
and per-batch latency percentiles (onnxruntime on the CPU, ``threads`` intra-op threads; the
libraries with their own defaults), plus conversion time, graph size and how many of the rows
give outputs that differ from the library's (labels exactly; values as ``verify`` compares).

Timing: one warm-up run per batch size, then ``repeat`` timed runs (at least 50 at batch 1), each
on the next ``batch`` rows of the data, cycled. Speed is measured here and in benchmarks/, never
asserted in tests.
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from tree2mat import frontends, peers
from tree2mat.errors import DataError, OptionError
from tree2mat.ir.core import Ensemble, Task

#: Timed runs at batch 1 at least (single rows are quick and noisy).
MIN_SINGLE_ROW_RUNS = 50


@dataclass
class Timing:
    batch: int
    runs: int
    rows_per_s: float
    p50_ms: float
    p90_ms: float
    p99_ms: float


@dataclass
class Contender:
    name: str
    kind: str  # "tree2mat", "peer", "native"
    convert_s: float | None = None
    file_bytes: int | None = None
    mismatched_rows: int | None = None  # rows whose outputs differ from the library's
    timings: list[Timing] = field(default_factory=list)
    note: str = ""


@dataclass
class BenchReport:
    model: str
    rows: int
    threads: int | None
    contenders: list[Contender]

    def to_json(self) -> str:
        return json.dumps({"schema": 1, **asdict(self)}, indent=1)

    def summary(self) -> str:
        lines = [f"bench {self.model}: {self.rows} rows, onnxruntime CPU, threads {self.threads or 'default'}"]
        head = f"{'contender':<28}{'batch':>8}{'rows/s':>12}{'p50 ms':>10}{'p90 ms':>10}{'p99 ms':>10}{'x ref':>8}"
        lines.append(head)
        reference = {t.batch: t.rows_per_s for c in self.contenders if c.kind == "peer" for t in c.timings}
        for c in self.contenders:
            if not c.timings:
                lines.append(f"{c.name:<28}  {c.note}")
                continue
            for t in c.timings:
                ratio = f"{t.rows_per_s / reference[t.batch]:.2f}" if t.batch in reference else "-"
                lines.append(f"{c.name:<28}{t.batch:>8}{t.rows_per_s:>12.4g}{t.p50_ms:>10.4g}{t.p90_ms:>10.4g}{t.p99_ms:>10.4g}{ratio:>8}")
        lines.append("")
        lines.append(f"{'contender':<28}{'convert s':>10}{'file':>12}{'rows differing from the library':>34}")
        for c in self.contenders:
            conv = "-" if c.convert_s is None else f"{c.convert_s:.2f}"
            size = "-" if c.file_bytes is None else f"{c.file_bytes / 2**10:.1f} KiB"
            diff = "-" if c.mismatched_rows is None else str(c.mismatched_rows)
            lines.append(f"{c.name:<28}{conv:>10}{size:>12}{diff:>34}" + (f"  ({c.note})" if c.note else ""))
        if reference:
            lines.append("x ref: rows/s over the peer TreeEnsemble graph's at the same batch size")
        return "\n".join(lines)


def parse_batches(text: str) -> tuple[int, ...]:
    try:
        batches = tuple(int(b) for b in str(text).split(",") if b.strip())
    except ValueError:
        raise OptionError(f"--batch {text!r}: expected sizes such as 1,1000,100000") from None
    if not batches or min(batches) < 1:
        raise OptionError(f"--batch {text!r}: sizes must be integers >= 1")
    return batches


def time_runs(run: Callable[[np.ndarray], Any], X: np.ndarray, batch: int, repeat: int) -> Timing:
    """Latencies of ``run`` on consecutive ``batch``-row slices of ``X`` (cycled)."""
    rows = X if X.shape[0] >= batch else np.resize(X, (batch, X.shape[1]))
    runs = max(repeat, MIN_SINGLE_ROW_RUNS if batch == 1 else repeat)
    starts = [(i * batch) % max(1, rows.shape[0] - batch + 1) for i in range(runs + 1)]
    run(rows[starts[0] : starts[0] + batch])  # warm-up
    times = []
    for s in starts[1:]:
        part = rows[s : s + batch]
        t = time.perf_counter()
        run(part)
        times.append(time.perf_counter() - t)
    ms = np.asarray(times) * 1e3
    return Timing(batch, runs, float(batch * runs / np.sum(times)), *(float(np.percentile(ms, q)) for q in (50, 90, 99)))


def _mismatched(got: dict[str, np.ndarray], expected: dict[str, np.ndarray], ens: Ensemble) -> int:
    """Rows where some output differs from the library's, as ``verify`` judges (every row when
    an output is missing or of another size)."""
    from tree2mat.verify import DEFAULT_RTOL, default_atol, differing_rows

    n = next(iter(expected.values())).shape[0]
    bad = np.zeros(n, bool)
    for name, exp in expected.items():
        exp, out = np.asarray(exp), np.asarray(got.get(name, ()))
        if out.size != exp.size:
            return n
        rows, _, _ = differing_rows(out.reshape(exp.shape), exp, default_atol(ens), DEFAULT_RTOL, name == "label")
        bad[rows] = True
    return int(bad.sum())


def bench(
    model_or_path: Any,
    data: Any = None,
    *,
    rows: int = 100_000,
    batches: tuple[int, ...] = (1, 1000, 100_000),
    forms: tuple[str, ...] = ("auto",),
    use_peers: bool = True,
    repeat: int = 5,
    threads: int | None = None,
    seed: int = 0,
) -> BenchReport:
    """Time tree2mat's graphs of a model next to its peer and the library (see module doc)."""
    import tree2mat
    from tree2mat.forms import AUTO, check_form
    from tree2mat.verify import load_data

    if repeat < 1 or rows < 1 or (threads is not None and threads < 1):
        raise OptionError("--repeat, --rows and --threads must be >= 1")
    for form in forms:
        if form != AUTO:
            check_form(form)
    model = frontends.resolve(model_or_path)
    ens = frontends.to_ensemble(model)
    library = frontends.library_model(model_or_path, ens) if isinstance(model, Ensemble) else model
    if data is None:
        X = bench_rows(ens, rows, seed)
    else:
        X = load_data(data) if isinstance(data, (str, bytes)) or hasattr(data, "__fspath__") else np.asarray(data)
        if X.ndim != 2 or X.shape[1] != ens.n_features or X.shape[0] == 0 or X.dtype.kind not in "biuf":
            raise DataError(f"data has shape {X.shape} ({X.dtype}); the model expects [N, {ens.n_features}] numbers")
    X = np.ascontiguousarray(X, np.float32)
    expected = None
    if library is not None:
        with np.errstate(over="ignore", invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                expected = frontends.frontend_for(library).reference_outputs(library, X, False, ens)
            except Exception as exc:
                raise DataError(f"the model itself rejects the data: {type(exc).__name__}: {exc}") from exc
    contenders: list[Contender] = []
    for form in forms:
        t = time.perf_counter()
        onx = tree2mat.convert(ens, form=form)
        convert_s = time.perf_counter() - t
        picked = {p.key: p.value for p in onx.metadata_props}["tree2mat.form"]
        sess = peers.session(onx, threads)
        c = Contender(f"tree2mat {form}" + (f" ({picked})" if form == AUTO else ""), "tree2mat", convert_s, onx.ByteSize())
        run = _ort_runner(sess)
        if expected is not None:
            c.mismatched_rows = _mismatched(run(X), expected, ens)
        c.timings = [time_runs(run, X, b, repeat) for b in batches]
        contenders.append(c)
    if use_peers and library is not None:
        contenders.append(_peer(library, ens, X, expected, batches, repeat, threads))
    if library is not None:
        contenders.append(_native(library, ens, X, batches, repeat))
    name = str(model_or_path) if isinstance(model_or_path, (str, bytes)) or hasattr(model_or_path, "__fspath__") else type(model_or_path).__name__
    return BenchReport(name, int(X.shape[0]), threads, contenders)


def bench_rows(ens: Ensemble, rows: int, seed: int) -> np.ndarray:
    """``rows`` rows of :func:`tree2mat.verify.synthesize` (threshold, NaN, +-inf, extreme and
    random rows), shuffled, float32."""
    from tree2mat.verify import synthesize

    X, _ = synthesize(ens, rows, seed=seed)
    return np.ascontiguousarray(X[np.random.default_rng(seed).permutation(X.shape[0])][:rows], np.float32)


def _ort_runner(sess: Any) -> Callable[[np.ndarray], dict[str, np.ndarray]]:
    names = [o.name for o in sess.get_outputs()]
    feed = sess.get_inputs()[0].name

    def run(X: np.ndarray) -> dict[str, np.ndarray]:
        return dict(zip(names, sess.run(None, {feed: X})))

    return run


def _peer(library: Any, ens: Ensemble, X: np.ndarray, expected: Any, batches: tuple[int, ...], repeat: int, threads: int | None) -> Contender:
    peer = peers.peer_for(library)
    c = Contender(f"{peer or 'peer'} TreeEnsemble", "peer")
    if peer is None or not peers.available(peer) or not peers.available("onnxmltools"):
        c.note = f"not measured: install the bench extra ({peer or 'no peer converter for this library'})"
        return c
    try:
        t = time.perf_counter()
        onx, _ = peers.convert(library, ens.n_features, peer)
        c.convert_s = time.perf_counter() - t
        c.file_bytes = onx.ByteSize()
        sess = peers.session(onx, threads)
    except Exception as exc:  # the peer refuses the model: say so, measure the rest
        c.note = f"the peer cannot convert it: {peers.one_line(exc)}"
        return c
    classifier = ens.task is Task.CLASSIFICATION

    def run(rows: np.ndarray) -> dict[str, np.ndarray]:
        return peers.outputs(sess, rows, classifier)

    if expected is not None and ens.task in (Task.CLASSIFICATION, Task.REGRESSION):
        c.mismatched_rows = _mismatched(run(X), expected, ens)
    c.timings = [time_runs(run, X, b, repeat) for b in batches]
    return c


def _native(library: Any, ens: Ensemble, X: np.ndarray, batches: tuple[int, ...], repeat: int) -> Contender:
    c = Contender(f"{peers.library_of(library)} predict", "native", note="the library itself: the reference")
    if type(library).__name__ == "Booster" and peers.library_of(library) == "xgboost":
        predict = library.inplace_predict  # (a Booster's fast path for arrays)
    elif ens.task is Task.CLASSIFICATION and hasattr(library, "predict_proba"):
        predict = library.predict_proba
    else:
        predict = library.predict

    def run(rows: np.ndarray) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return predict(rows)

    c.timings = [time_runs(run, X, b, repeat) for b in batches]
    return c
