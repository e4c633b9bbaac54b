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

import time
import warnings
from typing import Any

import numpy as np

from tree2mat import frontends, peers
from tree2mat.attention import AttentionForest
from tree2mat.bench._measure import (
    MIN_SINGLE_ROW_RUNS,
    PeakMemory,
    bench_rows,
    chunked,
    left_on_cpu,
    mismatched,
    ort_runner,
    parse_batches,
    peak_mib,
    time_runs,
    within,
)
from tree2mat.bench._others import (
    HUMMINGBIRD_COPIES,
    HUMMINGBIRD_ROW_COPIES,
    hummingbird_contenders,
    hummingbird_conversion_bytes,
    hummingbird_like,
    native_contender,
    peer_contender,
)
from tree2mat.bench._report import BenchReport, Contender, Timing, plot_report
from tree2mat.convert import convert
from tree2mat.data import check_header_option, load_data
from tree2mat.errors import DataError, OptionError, Tree2MatError, UnsupportedModelError, is_missing, missing
from tree2mat.forms import AUTO, FORMS, check_form
from tree2mat.forms.auto import check_batch_hint, check_target
from tree2mat.ir import limits
from tree2mat.ir.core import Ensemble
from tree2mat.verify import devices_for, load_subject


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

    _check_options(data, rows, forms, repeat, threads, device, batch_hint, header, target)
    limit = max_memory if max_memory is not None else limits.physical_memory() // 2
    subject = load_subject(model_or_path, accept_pipeline=False)
    if isinstance(subject.model, AttentionForest):
        raise UnsupportedModelError(
            f"{subject.name}: an attention-based forest: bench times tree models; bench the forest it was fitted on"
        )
    ens, library = subject.ens, subject.library
    X = _rows(ens, data, rows, seed, header, subject.n_features)
    expected = None if library is None else _expected(library, X, ens)
    contenders = [
        _tree2mat(form, ens, X, expected, batches, repeat, threads, device, limit,
                  batch_hint if form == AUTO else None, target if form == AUTO else None)
        for form in forms
    ]
    if use_peers and library is not None:
        contenders.append(peer_contender(library, ens, X, expected, batches, repeat, threads))
        contenders.extend(hummingbird_contenders(library, ens, X, expected, batches, repeat, threads, device, limit))
    if library is not None:
        contenders.append(native_contender(library, ens, X, batches, repeat))
    return BenchReport(subject.name, int(X.shape[0]), threads, contenders, device)


def _check_options(data: Any, rows: int, forms: tuple[str, ...], repeat: int, threads: int | None, device: str,
                   batch_hint: int | None, header: bool | None, target: str | None) -> None:
    """Every option checked before any work."""
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


def _rows(ens: Ensemble, data: Any, rows: int, seed: int, header: bool | None, n_features: int) -> np.ndarray:
    """The rows every contender runs: ``data`` (a file or an array), else :func:`bench_rows`."""
    if data is None:
        X = bench_rows(ens, rows, seed)
    else:
        is_file = isinstance(data, (str, bytes)) or hasattr(data, "__fspath__")
        X = load_data(data, header, dict(ens.category_labels)) if is_file else np.asarray(data)
        if X.ndim != 2 or X.shape[1] != n_features or X.shape[0] == 0 or X.dtype.kind not in "biuf":
            raise DataError(f"data has shape {X.shape} ({X.dtype}); the model expects [N, {n_features}] numbers")
    return np.ascontiguousarray(X, np.float32)


def _expected(library: Any, X: np.ndarray, ens: Ensemble) -> dict[str, np.ndarray]:
    """The library's own outputs of ``X``, which every contender's are compared with."""
    with np.errstate(over="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return frontends.frontend_for(library).reference_outputs(library, X, False, ens)
        except Tree2MatError:
            raise
        except Exception as exc:
            if (module := is_missing(exc)) is not None:  # the library's own import of an optional module
                raise missing(f"{type(library).__name__}'s predictions", module) from exc
            raise DataError(f"the model itself rejects the data: {type(exc).__name__}: {exc}") from exc


def _tree2mat(form: str, ens: Ensemble, X: np.ndarray, expected: Any, batches: tuple[int, ...], repeat: int, threads: int | None,
              device: str, limit: int, batch_hint: int | None, target: str | None) -> Contender:
    """One of tree2mat's forms converted and timed at the batch sizes whose memory fits ``limit``."""
    t = time.perf_counter()
    try:
        onx = convert(ens, form=form, batch_hint=batch_hint, target=target)
    except UnsupportedModelError as exc:  # (a dense form on deep trees): say so, time the rest
        return Contender(f"tree2mat {form}", "tree2mat", note=f"not converted: {exc}", device=device)
    convert_s = time.perf_counter() - t
    picked = {p.key: p.value for p in onx.metadata_props}["tree2mat.form"]
    spec = FORMS[picked]
    c = Contender(f"tree2mat {form}" + (f" ({picked})" if form == AUTO else ""), "tree2mat", convert_s, onx.ByteSize(), device=device)
    fits, c.note = within(batches, spec.constant_bytes(ens), spec.bytes_per_row(ens), limit)
    if left := left_on_cpu(onx, X, device):
        c.note = left
        return c
    run = ort_runner(peers.session(onx, threads, device))
    chunk = max(fits) if fits else max(1, (limit - spec.constant_bytes(ens)) // max(1, spec.bytes_per_row(ens)))
    if expected is not None:
        c.mismatched_rows, c.mismatched_labels = mismatched(chunked(run, X, chunk), expected, ens)
    c.timings = [time_runs(run, X, b, repeat) for b in fits]
    if fits:
        c.peak_mib = peak_mib(lambda: ort_runner(peers.session(onx, threads, device, arena=False)), X, max(fits))
    return c


__all__ = [
    "HUMMINGBIRD_COPIES", "HUMMINGBIRD_ROW_COPIES", "MIN_SINGLE_ROW_RUNS", "BenchReport", "Contender", "PeakMemory", "Timing",
    "bench", "bench_rows", "hummingbird_conversion_bytes", "hummingbird_like", "parse_batches", "peak_mib", "plot_report", "time_runs",
]
