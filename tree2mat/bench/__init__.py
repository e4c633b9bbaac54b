"""``tree2mat bench``: how fast a model's graphs run, next to what a user would use otherwise.

Contenders, all on the same rows: tree2mat's forms (``auto`` by default, or those asked for), the
peer converter's ``ai.onnx.ml`` TreeEnsemble graph (skl2onnx / onnxmltools, when installed: the
``bench`` extra), Hummingbird's graphs with each of its tree strategies (when Hummingbird is
installed) and the library's own ``predict``. Per contender and batch size: rows per second and
per-batch latency percentiles (onnxruntime with ``threads`` intra-op threads; the libraries with
their own defaults), plus conversion time, graph size, peak memory and how many of the rows give
outputs that differ from the library's (labels exactly; values as ``verify`` compares).

``device="cuda"`` runs tree2mat's and Hummingbird's graphs on onnxruntime's CUDA provider; a graph
with a node that touches rows on the CPU is not timed (onnxruntime's shape arithmetic, a few
int64s it keeps on the CPU on purpose, aside). The TreeEnsemble graph has no CUDA kernel and
always runs on the CPU.

A tree2mat form is timed only at the batch sizes whose estimated memory (its constants plus its
intermediates per row, as ``--form auto`` estimates them) fits ``max_memory``; the others are
named in its note. Outputs are compared with the library's in chunks of the largest such batch.
Hummingbird's graphs are gated likewise, estimated as tree2mat's layouts of the same kind.

Timing: one warm-up run per batch size, then ``repeat`` timed runs (at least 50 at batch 1), each
on the next ``batch`` rows of the data, cycled. Speed is measured here and in benchmarks/, never
asserted in tests.
"""

from __future__ import annotations

import json
import os
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tree2mat import frontends, peers
from tree2mat.attention import AttentionForest
from tree2mat.convert import convert
from tree2mat.data import check_header_option, load_data
from tree2mat.errors import DataError, OptionError, Tree2MatError, UnsupportedModelError, is_missing, missing
from tree2mat.forms import AUTO, FORMS, FormSpec, check_form
from tree2mat.forms.auto import check_batch_hint, check_target
from tree2mat.frontends._support import labelled_frame
from tree2mat.ir import limits
from tree2mat.ir.core import Ensemble, Task
from tree2mat.runtimes import cuda_cpu_nodes
from tree2mat.verify import DEFAULT_RTOL, default_atol, devices_for, differing_rows, load_subject, synthesize

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
    mismatched_labels: int | None = None  # of those, rows whose label differs (classifiers)
    peak_mib: float | None = None  # resident memory above the start: loading, comparing, timing
    timings: list[Timing] = field(default_factory=list)
    note: str = ""
    device: str = "cpu"


@dataclass
class BenchReport:
    model: str
    rows: int
    threads: int | None
    contenders: list[Contender]
    device: str = "cpu"

    def to_json(self) -> str:
        return json.dumps({"schema": 2, **asdict(self)}, indent=1)

    def summary(self) -> str:
        where = "onnxruntime CPU" if self.device == "cpu" else "onnxruntime CUDA (TreeEnsemble and predict on the CPU)"
        lines = [f"bench {self.model}: {self.rows} rows, {where}, threads {self.threads or 'default'}"]
        # The ratio is of throughputs, so it sits beside rows/s: next to the latencies it read as
        # a ratio of p50s, which it is not (rows/s comes from the mean batch time).
        head = f"{'contender':<28}{'batch':>8}{'rows/s':>12}{'x ref':>8}{'p50 ms':>10}{'p90 ms':>10}{'p99 ms':>10}"
        lines.append(head)
        reference = {t.batch: t.rows_per_s for c in self.contenders if c.kind == "peer" for t in c.timings}
        for c in self.contenders:
            if not c.timings:
                lines.append(f"{c.name:<28}  {c.note}")
                continue
            for t in c.timings:
                ratio = f"{t.rows_per_s / reference[t.batch]:.2f}" if t.batch in reference else "-"
                lines.append(f"{c.name:<28}{t.batch:>8}{t.rows_per_s:>12.4g}{ratio:>8}{t.p50_ms:>10.4g}{t.p90_ms:>10.4g}{t.p99_ms:>10.4g}")
        lines.append("")
        lines.append(f"{'contender':<28}{'convert s':>10}{'file':>12}{'peak MiB':>10}{'rows differing from the library':>33}{'labels':>8}")
        for c in self.contenders:
            conv = "-" if c.convert_s is None else f"{c.convert_s:.2f}"
            size = "-" if c.file_bytes is None else f"{c.file_bytes / 2**10:.1f} KiB"
            peak = "-" if c.peak_mib is None else f"{c.peak_mib:.0f}"
            diff = "-" if c.mismatched_rows is None else str(c.mismatched_rows)
            labels = "-" if c.mismatched_labels is None else str(c.mismatched_labels)
            lines.append(f"{c.name:<28}{conv:>10}{size:>12}{peak:>10}{diff:>33}{labels:>8}" + (f"  ({c.note})" if c.note and c.timings else ""))
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


def _mismatched(got: dict[str, np.ndarray], expected: dict[str, np.ndarray], ens: Ensemble) -> tuple[int, int | None]:
    """Rows where some output differs from the library's, as ``verify`` judges a float32 graph
    (every contender here is one: tree2mat's default graphs and the peers'), every row when an
    output is missing or of another size; and of those the rows whose label differs (None
    without a label)."""

    n = next(iter(expected.values())).shape[0]
    bad = np.zeros(n, bool)
    labels = None
    for name, exp in expected.items():
        exp, out = np.asarray(exp), np.asarray(got.get(name, ()))
        if out.size != exp.size:
            return n, (n if name == "label" else labels)
        rows, _, _ = differing_rows(out.reshape(exp.shape), exp, default_atol(ens, "float32"), DEFAULT_RTOL, name == "label")
        bad[rows] = True
        if name == "label":
            labels = int(np.unique(rows).size)
    return int(bad.sum()), labels


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
    device: str = "cpu",
    max_memory: int | None = None,
    batch_hint: int | None = None,
    header: bool | None = None,
    target: str | None = None,
) -> BenchReport:
    """Time tree2mat's graphs of a model next to its peers and the library (see module doc).
    ``max_memory``: bytes a tree2mat graph may need at one batch (default: half this machine's
    memory). ``batch_hint``, ``target``: ``--form auto``'s (see :func:`tree2mat.convert`; the
    timings are onnxruntime's on ``device`` whatever the target). ``header``: whether
    a ``.csv`` file's first line is a header (None: detected; see :func:`tree2mat.verify`)."""

    if repeat < 1 or rows < 1 or (threads is not None and threads < 1):
        raise OptionError("--repeat, --rows and --threads must be >= 1")
    if device not in ("cpu", "cuda"):
        raise OptionError(f"--device {device!r}: choose cpu or cuda")
    devices_for(device)  # cuda without the CUDA provider: an error before any work
    for form in forms:
        if form != AUTO:
            check_form(form)
    check_header_option(data, header)
    if batch_hint is not None:
        check_batch_hint(batch_hint)
        if AUTO not in forms:
            raise OptionError(f"--batch-hint tells --form auto which form to pick; auto is not among the forms to time ({', '.join(forms)})")
    if check_target(target) is not None and AUTO not in forms:
        raise OptionError(f"--target tells --form auto which forms to pick from; auto is not among the forms to time ({', '.join(forms)})")
    limit = max_memory if max_memory is not None else limits.physical_memory() // 2
    subject = load_subject(model_or_path, accept_pipeline=False)
    if isinstance(subject.model, AttentionForest):
        raise UnsupportedModelError(
            f"{subject.name}: an attention-based forest: bench times tree models; bench the forest it was fitted on"
        )
    ens, library = subject.ens, subject.library
    if data is None:
        X = bench_rows(ens, rows, seed)
    else:
        is_file = isinstance(data, (str, bytes)) or hasattr(data, "__fspath__")
        X = load_data(data, header, dict(ens.category_labels)) if is_file else np.asarray(data)
        if X.ndim != 2 or X.shape[1] != subject.n_features or X.shape[0] == 0 or X.dtype.kind not in "biuf":
            raise DataError(f"data has shape {X.shape} ({X.dtype}); the model expects [N, {subject.n_features}] numbers")
    X = np.ascontiguousarray(X, np.float32)
    expected = None
    if library is not None:
        with np.errstate(over="ignore", invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                expected = frontends.frontend_for(library).reference_outputs(library, X, False, ens)
            except Tree2MatError:
                raise
            except Exception as exc:
                if (module := is_missing(exc)) is not None:  # the library's own import of an optional module
                    raise missing(f"{type(library).__name__}'s predictions", module) from exc
                raise DataError(f"the model itself rejects the data: {type(exc).__name__}: {exc}") from exc
    contenders: list[Contender] = []
    for form in forms:
        t = time.perf_counter()
        try:
            onx = convert(ens, form=form, batch_hint=batch_hint if form == AUTO else None, target=target if form == AUTO else None)
        except UnsupportedModelError as exc:  # (a dense form on deep trees): say so, time the rest
            contenders.append(Contender(f"tree2mat {form}", "tree2mat", note=f"not converted: {exc}", device=device))
            continue
        convert_s = time.perf_counter() - t
        picked = {p.key: p.value for p in onx.metadata_props}["tree2mat.form"]
        spec = FORMS[picked]
        c = Contender(f"tree2mat {form}" + (f" ({picked})" if form == AUTO else ""), "tree2mat", convert_s, onx.ByteSize(), device=device)
        fits, c.note = _within(batches, spec.constant_bytes(ens), spec.bytes_per_row(ens), limit)
        if left := _left_on_cpu(onx, X, device):
            c.note = left
            contenders.append(c)
            continue
        run = _ort_runner(peers.session(onx, threads, device))
        chunk = max(fits) if fits else max(1, (limit - spec.constant_bytes(ens)) // max(1, spec.bytes_per_row(ens)))
        if expected is not None:
            c.mismatched_rows, c.mismatched_labels = _mismatched(_chunked(run, X, chunk), expected, ens)
        c.timings = [time_runs(run, X, b, repeat) for b in fits]
        if fits:
            c.peak_mib = peak_mib(lambda: _ort_runner(peers.session(onx, threads, device, arena=False)), X, max(fits))  # noqa: B023 (called at once)
        contenders.append(c)
    if use_peers and library is not None:
        contenders.append(_peer(library, ens, X, expected, batches, repeat, threads))
        contenders.extend(_hummingbird(library, ens, X, expected, batches, repeat, threads, device, limit))
    if library is not None:
        contenders.append(_native(library, ens, X, batches, repeat))
    return BenchReport(subject.name, int(X.shape[0]), threads, contenders, device)


def _within(batches: tuple[int, ...], fixed: int, per_row: int, limit: int) -> tuple[tuple[int, ...], str]:
    """The batch sizes whose estimated memory (``fixed`` + ``per_row`` x batch bytes) fits
    ``limit``, and a note naming the others ("" when all fit)."""
    fits = tuple(b for b in batches if fixed + per_row * b <= limit)
    over = [str(b) for b in batches if b not in fits]
    return fits, f"not timed at batch {', '.join(over)}: estimated over {limit / 2**30:.1f} GiB (--max-memory)" if over else ""


def _rss() -> int | None:
    """This process's resident memory in bytes (Linux), else None."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class PeakMemory:
    """Peak resident memory of the process above its level on entry, sampled every 2 ms by a
    thread (``mib`` is None where resident memory cannot be read)."""

    def __enter__(self) -> PeakMemory:
        self.base = _rss()
        self.peak = self.base or 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        if self.base is not None:
            self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, _rss() or 0)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.peak = max(self.peak, _rss() or 0)

    @property
    def mib(self) -> float | None:
        return None if self.base is None else max(0, self.peak - self.base) / 2**20


def peak_mib(make_run: Callable[[], Callable[[np.ndarray], Any]], X: np.ndarray, batch: int) -> float | None:
    """Peak resident memory (MiB, above the level before) of making a runner (for a graph: a
    session without a memory arena, so memory is returned between measurements) and running it
    once on ``batch`` rows. Freed memory is handed back to the system first (glibc's malloc_trim)."""
    _trim()
    rows = X[:batch] if X.shape[0] >= batch else np.resize(X, (batch, X.shape[1]))
    with PeakMemory() as peak:
        run = make_run()
        run(rows)
        del run
    _trim()
    return peak.mib


def _trim() -> None:
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _chunked(run: Callable[[np.ndarray], dict[str, np.ndarray]], X: np.ndarray, chunk: int) -> dict[str, np.ndarray]:
    """``run`` over ``X`` in chunks of ``chunk`` rows, outputs concatenated along the rows."""
    parts = [run(X[i : i + chunk]) for i in range(0, X.shape[0], chunk)]
    return {k: np.concatenate([p[k] for p in parts], axis=0) for k in parts[0]}


def bench_rows(ens: Ensemble, rows: int, seed: int) -> np.ndarray:
    """``rows`` rows of :func:`tree2mat.verify.synthesize` (threshold, NaN, +-inf, extreme and
    random rows), shuffled, float32."""

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
    own = peers.own_export(library) is not None
    if peer is None or not peers.available(peer) or not (own or peers.available("onnxmltools")):
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
    _time_graph(c, onx, sess, ens, X, expected, batches, repeat, threads, "cpu")
    return c


def _left_on_cpu(onx: Any, X: np.ndarray, device: str, sizes: tuple[int, ...] | None = None) -> str | None:
    """On CUDA, a note naming the graph's nodes that onnxruntime ran on the CPU with row data
    (its own shape arithmetic aside; run on the first ``sizes`` rows, by default every one
    of traverse's walks), so that no CPU work is timed as the GPU's; else None."""
    if device != "cuda":
        return None
    left = cuda_cpu_nodes(onx, X, sizes)
    return f"not timed: on CUDA, {len(left)} nodes ran on the CPU with row data ({', '.join(left[:6])})" if left else None


def _time_graph(c: Contender, onx: Any, sess: Any, ens: Ensemble, X: np.ndarray, expected: Any, batches: tuple[int, ...],
                repeat: int, threads: int | None, device: str) -> None:
    """A peer graph's mismatches, timings and peak memory, into ``c``."""
    classifier = ens.task is Task.CLASSIFICATION

    def runner(s: Any) -> Callable[[np.ndarray], dict[str, np.ndarray]]:
        return lambda rows: peers.outputs(s, rows, classifier)

    run = runner(sess)
    try:
        if expected is not None and ens.task in (Task.CLASSIFICATION, Task.REGRESSION):
            c.mismatched_rows, c.mismatched_labels = _mismatched(_chunked(run, X, max(batches)), expected, ens)
    except Exception as exc:  # a peer graph that onnxruntime cannot run: say so, measure the rest
        c.note = f"onnxruntime cannot run it: {peers.one_line(exc)}"
        return
    failed = []
    for b in batches:
        try:
            c.timings.append(time_runs(run, X, b, repeat))
        except Exception as exc:  # (Hummingbird 0.4.11's graphs fail at batch 1 on some models)
            failed.append(f"batch {b}: {peers.one_line(exc, 160)}")
    if failed:
        c.note = "; ".join([c.note] * bool(c.note) + [f"fails at {f}" for f in failed])
    if c.timings:
        c.peak_mib = peak_mib(lambda: runner(peers.session(onx, threads, device, arena=False)), X, max(t.batch for t in c.timings))


#: Copies of its tables Hummingbird's conversion holds at once (torch tensors, the traced graph,
#: the ONNX export): GEMM on RandomForestRegressor(100, min_samples_leaf=5) peaked at 7.5 times
#: its dense matrices.
HUMMINGBIRD_COPIES = 8


#: Copies of its intermediates per row a Hummingbird strategy holds, counted in those of the
#: form it is estimated as (:func:`hummingbird_like`): the traversals hold the walk twice over.
HUMMINGBIRD_ROW_COPIES = {"gemm": 1, "tree_trav": 2, "perf_tree_trav": 2}


def hummingbird_like(strategy: str) -> FormSpec:
    """The form whose tables and intermediates ``strategy``'s are estimated as
    (:attr:`FormSpec.hummingbird`)."""
    return next(spec for spec in FORMS.values() if strategy in spec.hummingbird)


def hummingbird_conversion_bytes(strategy: str, ens: Ensemble) -> int:
    """Estimated peak memory of Hummingbird's conversion: GEMM builds dense [T, I, L] matrices
    (a forest of 100 trees x 2 000 leaves reached 12 GiB); perf_tree_trav pads every tree to a
    perfect tree of the largest depth (2^(D+1) nodes of a few 8-byte fields each; a depth-30
    forest ran a 24 GiB machine out of memory); tree_trav keeps the nodes as they are."""
    if strategy == "gemm":
        tables = hummingbird_like(strategy).constant_bytes(ens)
    elif strategy == "perf_tree_trav":
        tables = ens.n_trees * 2 ** (ens.max_depth() + 1) * 32
    else:
        tables = sum(2 * t.n_internal + 1 for t in ens.trees) * 32
    return HUMMINGBIRD_COPIES * tables


def _hummingbird(library: Any, ens: Ensemble, X: np.ndarray, expected: Any, batches: tuple[int, ...], repeat: int,
                 threads: int | None, device: str, limit: int) -> list[Contender]:
    """One contender per Hummingbird tree strategy, when Hummingbird is installed (none
    otherwise; the summary says so)."""
    if not (peers.available("hummingbird") and peers.available("torch")):
        return [Contender("hummingbird", "hummingbird", note="not measured: Hummingbird is not installed (pip install hummingbird-ml)")]
    out = []
    for strategy in peers.HUMMINGBIRD_STRATEGIES:
        c = Contender(f"hummingbird {strategy}", "hummingbird", device=device)
        out.append(c)
        converting = hummingbird_conversion_bytes(strategy, ens)
        if converting > limit:
            c.note = (f"not converted: its tables take about {converting / 2**30:.1f} GiB while converting, "
                      f"over the memory limit ({limit / 2**30:.1f} GiB)")
            continue
        try:
            t = time.perf_counter()
            onx = peers.hummingbird_convert(library, X[: min(1000, X.shape[0])], strategy)
            c.convert_s = time.perf_counter() - t
            c.file_bytes = onx.ByteSize()
            sess = peers.session(onx, threads, device)
        except Exception as exc:
            c.note = f"Hummingbird cannot convert it: {peers.one_line(exc)}"
            continue
        per_row = hummingbird_like(strategy).bytes_per_row(ens) * HUMMINGBIRD_ROW_COPIES[strategy]
        fits, c.note = _within(batches, c.file_bytes, per_row, limit)
        try:
            left = _left_on_cpu(onx, X, device, (max(fits),)) if fits else None
        except Exception as exc:  # a graph the CUDA provider cannot run: say so, time the rest
            left = f"not timed: onnxruntime cannot run it on CUDA: {peers.one_line(exc)}"
        if left:
            c.note = left
        elif fits:
            _time_graph(c, onx, sess, ens, X, expected, fits, repeat, threads, device)
    return out


def _native(library: Any, ens: Ensemble, X: np.ndarray, batches: tuple[int, ...], repeat: int) -> Contender:
    c = Contender(f"{peers.library_of(library)} predict", "native", note="the library itself: the reference")
    booster = type(library).__name__ == "Booster"
    if ens.category_labels and not booster:
        # A model fitted on named categories takes the DataFrame it was fitted on (scikit-learn's
        # refuses codes); built once, untimed, with at least the largest batch's rows.
        most = max(batches)
        X = labelled_frame(ens, X if X.shape[0] >= most else np.resize(X, (most, X.shape[1])))
    if booster and hasattr(library, "inplace_predict"):
        predict = library.inplace_predict  # (XGBoost's Booster: its fast path for arrays)
    elif ens.task is Task.CLASSIFICATION and hasattr(library, "predict_proba"):
        predict = library.predict_proba
    else:
        predict = library.predict

    def run(rows: np.ndarray) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return predict(rows)

    c.timings = [time_runs(run, X, b, repeat) for b in batches]
    c.peak_mib = peak_mib(lambda: run, X, max(batches))
    return c


def plot_report(report: BenchReport) -> bytes:
    """A PNG: rows/s of every timed contender (bars, log scale) per batch size, with the ratio to
    the TreeEnsemble graph written over each bar."""
    from tree2mat.pictures import require_matplotlib

    require_matplotlib("--plot").use("Agg")
    import io

    import matplotlib.pyplot as plt

    timed = [c for c in report.contenders if c.timings]
    batches = sorted({t.batch for c in timed for t in c.timings})
    reference = {t.batch: t.rows_per_s for c in timed if c.kind == "peer" for t in c.timings}
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(batches) * max(1, len(timed)) / 3), 4.5), dpi=120)
    width = 0.8 / max(1, len(timed))
    for i, c in enumerate(timed):
        by_batch = {t.batch: t.rows_per_s for t in c.timings}
        xs = [j + (i - (len(timed) - 1) / 2) * width for j, b in enumerate(batches) if b in by_batch]
        ys = [by_batch[b] for b in batches if b in by_batch]
        bars = ax.bar(xs, ys, width, label=c.name)
        for bar, b in zip(bars, [b for b in batches if b in by_batch]):
            if b in reference:
                ax.annotate(f"{by_batch[b] / reference[b]:.2f}x", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                            ha="center", va="bottom", fontsize=7, rotation=90)
    ax.set_yscale("log")
    ax.set_xticks(range(len(batches)), [f"batch {b:,}" for b in batches])
    ax.set_ylabel("rows / s")
    where = "CPU" if report.device == "cpu" else "CUDA (TreeEnsemble, predict: CPU)"
    ax.set_title(f"{Path(report.model).name}: {report.rows:,} rows, onnxruntime {where}, threads {report.threads or 'default'}", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()
