"""The contenders ``tree2mat bench`` times next to tree2mat's graphs: the peer converter's
TreeEnsemble graph, Hummingbird's graphs (its strategies sized as the forms that declare them)
and the library's own predict."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from tree2mat import peers
from tree2mat.bench._measure import chunked, left_on_cpu, mismatched, peak_mib, time_runs, within
from tree2mat.bench._report import Contender
from tree2mat.forms import FORMS, FormSpec
from tree2mat.frontends._support import labelled_frame
from tree2mat.ir.core import Ensemble, Task


def peer_contender(library: Any, ens: Ensemble, X: np.ndarray, expected: Any, batches: tuple[int, ...], repeat: int, threads: int | None) -> Contender:
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


def _time_graph(c: Contender, onx: Any, sess: Any, ens: Ensemble, X: np.ndarray, expected: Any, batches: tuple[int, ...],
                repeat: int, threads: int | None, device: str) -> None:
    """A peer graph's mismatches, timings and peak memory, into ``c``."""
    classifier = ens.task is Task.CLASSIFICATION

    def runner(s: Any) -> Callable[[np.ndarray], dict[str, np.ndarray]]:
        return lambda rows: peers.outputs(s, rows, classifier)

    run = runner(sess)
    try:
        if expected is not None and ens.task in (Task.CLASSIFICATION, Task.REGRESSION):
            c.mismatched_rows, c.mismatched_labels = mismatched(chunked(run, X, max(batches)), expected, ens)
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


def hummingbird_contenders(library: Any, ens: Ensemble, X: np.ndarray, expected: Any, batches: tuple[int, ...], repeat: int,
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
        fits, c.note = within(batches, c.file_bytes, per_row, limit)
        try:
            left = left_on_cpu(onx, X, device, (max(fits),)) if fits else None
        except Exception as exc:  # a graph the CUDA provider cannot run: say so, time the rest
            left = f"not timed: onnxruntime cannot run it on CUDA: {peers.one_line(exc)}"
        if left:
            c.note = left
        elif fits:
            _time_graph(c, onx, sess, ens, X, expected, fits, repeat, threads, device)
    return out


def native_contender(library: Any, ens: Ensemble, X: np.ndarray, batches: tuple[int, ...], repeat: int) -> Contender:
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
