"""How ``tree2mat bench`` measures: the rows, batch sizes and memory budget, timed runs, peak
memory, and the rows whose outputs differ from the library's."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from tree2mat.bench._report import Timing
from tree2mat.errors import OptionError
from tree2mat.ir.core import Ensemble
from tree2mat.runtimes import cuda_cpu_nodes
from tree2mat.verify import DEFAULT_RTOL, default_atol, differing_rows, synthesize

#: Timed runs at batch 1 at least (single rows are quick and noisy).
MIN_SINGLE_ROW_RUNS = 50


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


def mismatched(got: dict[str, np.ndarray], expected: dict[str, np.ndarray], ens: Ensemble) -> tuple[int, int | None]:
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


def within(batches: tuple[int, ...], fixed: int, per_row: int, limit: int) -> tuple[tuple[int, ...], str]:
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


def chunked(run: Callable[[np.ndarray], dict[str, np.ndarray]], X: np.ndarray, chunk: int) -> dict[str, np.ndarray]:
    """``run`` over ``X`` in chunks of ``chunk`` rows, outputs concatenated along the rows."""
    parts = [run(X[i : i + chunk]) for i in range(0, X.shape[0], chunk)]
    return {k: np.concatenate([p[k] for p in parts], axis=0) for k in parts[0]}


def bench_rows(ens: Ensemble, rows: int, seed: int) -> np.ndarray:
    """``rows`` rows of :func:`tree2mat.verify.synthesize` (threshold, NaN, +-inf, extreme and
    random rows), shuffled, float32."""

    X, _ = synthesize(ens, rows, seed=seed)
    return np.ascontiguousarray(X[np.random.default_rng(seed).permutation(X.shape[0])][:rows], np.float32)


def ort_runner(sess: Any) -> Callable[[np.ndarray], dict[str, np.ndarray]]:
    names = [o.name for o in sess.get_outputs()]
    feed = sess.get_inputs()[0].name

    def run(X: np.ndarray) -> dict[str, np.ndarray]:
        return dict(zip(names, sess.run(None, {feed: X})))

    return run


def left_on_cpu(onx: Any, X: np.ndarray, device: str, sizes: tuple[int, ...] | None = None) -> str | None:
    """On CUDA, a note naming the graph's nodes that onnxruntime ran on the CPU with row data
    (its own shape arithmetic aside; run on the first ``sizes`` rows, by default every one
    of traverse's walks), so that no CPU work is timed as the GPU's; else None."""
    if device != "cuda":
        return None
    left = cuda_cpu_nodes(onx, X, sizes)
    return f"not timed: on CUDA, {len(left)} nodes ran on the CPU with row data ({', '.join(left[:6])})" if left else None
