"""``verify``: run an ONNX graph in onnxruntime and compare it with the original model.

Checks, per execution provider:
- routing: on graphs tree2mat wrote, the internal leaf ids [T, N] equal the reference
  evaluator's, exactly (the evaluator itself is tested against the libraries);
- labels: identical to the model's ``predict``;
- values: ``|graph - model| <= atol + rtol * |model|`` per element, NaN only where the model has
  NaN. Default ``rtol = 1e-6``; default ``atol = 1e-12 * (1 + |base| + sum_t max |leaf_t|)``. The
  graph sums leaf values in float64 and rounds once to the output dtype, so what remains is the
  output rounding (float32: 6e-8 relative) and float64 summation order.

Without data, rows are synthesized (see :func:`synthesize`).
"""

from __future__ import annotations

import functools
import json
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from tree2mat import frontends, pipelines
from tree2mat.data import ArrayRows, Rows, open_rows, read_chunks
from tree2mat.errors import DataError, DeviceUnavailableError, ModelFileError, OptionError, VerificationError
from tree2mat.forms import FORMS
from tree2mat.forms._layout import EXIT_LEAVES, leaf_ids_of
from tree2mat.frontends._support import labelled_frame
from tree2mat.frontends.sklearn import is_pipeline
from tree2mat.ir import evaluate
from tree2mat.ir.core import CategoryCodes, Ensemble, Tree
from tree2mat.ir.thresholds import compare_dtype, float32_neighbours, graph_thresholds
from tree2mat.onnx_io import needs_external_data
from tree2mat.runtimes import RUNTIMES

REPORT_SCHEMA = 2
DEVICES = ("cpu", "cuda", "all")
DEFAULT_RTOL = 1e-6
#: Memory allowed for one chunk of rows in onnxruntime.
CHUNK_BYTES = 256 * 2**20
#: Memory allowed for one chunk of data rows (as float64), read from a file at a time.
DATA_CHUNK_BYTES = 32 * 2**20
MAX_ROWS = 10_000_000
MAX_SYNTHESIZED_BYTES = 2 * 2**30


# ---------------------------------------------------------------------------------- the report


@dataclass(frozen=True)
class Mismatch:
    row: int
    input: list[float]
    expected: Any
    got: Any


@dataclass(frozen=True)
class OutputReport:
    """One output (or ``routing``) on one device."""

    name: str
    device: str
    compared: int
    mismatches: int
    max_abs_error: float
    max_rel_error: float
    first_mismatches: list[Mismatch] = field(default_factory=list)
    problem: str = ""  # structural problem (missing output, wrong shape), if any
    #: Which of the graph's walks ran (traverse: ``>N rows`` or ``<=N rows``, see :func:`walks`),
    #: or empty: a graph with one.
    walk: str = ""

    @property
    def passed(self) -> bool:
        return self.mismatches == 0 and not self.problem

    @property
    def title(self) -> str:
        """The output's name, and the walk if there is a choice."""
        return f"{self.name} ({self.walk})" if self.walk else self.name

    @property
    def where(self) -> str:
        """The device, and the walk if there is a choice."""
        return f"{self.device}, {self.walk}" if self.walk else self.device


@dataclass(frozen=True)
class Report:
    model: str
    onnx: str
    rows: int
    row_kinds: dict[str, int]
    devices: list[str]
    atol: float
    rtol: float
    outputs: list[OutputReport]
    notes: list[str] = field(default_factory=list)
    #: The runtime the graph ran on, with its version (e.g. "openvino 2026.4.1").
    runtime: str = "onnxruntime"

    @property
    def passed(self) -> bool:
        return all(o.passed for o in self.outputs)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["schema"] = REPORT_SCHEMA
        d["passed"] = self.passed
        return d

    def to_json(self) -> str:
        return json.dumps(_jsonable(self.to_dict()), indent=1, allow_nan=False)

    def summary(self) -> str:
        kinds = ", ".join(f"{v} {k}" for k, v in self.row_kinds.items() if v)
        lines = [
            f"verify {self.model} against {self.onnx}",
            f"rows: {self.rows} ({kinds}); runtime: {self.runtime}; devices: {', '.join(self.devices)}; "
            f"atol={self.atol:.3g} rtol={self.rtol:.3g}",
        ]
        lines += [f"note: {n}" for n in self.notes]
        wide = max([6, *(len(o.where) for o in self.outputs)])
        lines.append(f"{'output':<14} {'device':<{wide}} {'compared':>9} {'mismatch':>9} {'max abs':>10} {'max rel':>10}")
        for o in self.outputs:
            lines.append(
                f"{o.name:<14} {o.where:<{wide}} {o.compared:>9} {o.mismatches:>9} "
                f"{o.max_abs_error:>10.3g} {o.max_rel_error:>10.3g}"
                + (f"  {o.problem}" if o.problem else "")
            )
            for m in o.first_mismatches:
                lines.append(f"  row {m.row}: expected {m.expected!r}, got {m.got!r}; input {m.input}")
        lines.append("PASS" if self.passed else "FAIL")
        return "\n".join(lines)


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return _jsonable(obj.item())
    if isinstance(obj, float) and not np.isfinite(obj):
        return str(obj)  # "nan", "inf", "-inf": JSON has no such numbers
    return obj


# -------------------------------------------------------------------------- synthesized rows


def _feature_values(ens: Ensemble) -> tuple[list[list[np.ndarray]], list[list[np.ndarray]]]:
    """Per feature: the numeric thresholds and the category values used anywhere."""
    thresholds: list[list[np.ndarray]] = [[] for _ in range(ens.n_features)]
    categories: list[list[np.ndarray]] = [[] for _ in range(ens.n_features)]
    for tree in ens.trees:
        numeric = np.ones(tree.n_internal, bool)
        numeric[tree.cat_nodes] = False
        for f in np.unique(tree.feature[numeric]):
            thresholds[f].append(tree.threshold[numeric & (tree.feature == f)])
        for m, node in enumerate(tree.cat_nodes):
            vals = tree.cat_values[m]
            categories[tree.feature[node]].append(vals[~np.isnan(vals)])
    return thresholds, categories


def _critical_values(ens: Ensemble, dtype: np.dtype) -> list[np.ndarray]:
    """Per feature, values of ``dtype`` where routing can go wrong: each threshold's float32
    neighbours (and, for float64 data, its float64 neighbours and the float64 values just around
    the float32 rounding midpoints); each category value and one unseen value."""
    thresholds, categories = _feature_values(ens)
    out = []
    for f in range(ens.n_features):
        vals = []
        if thresholds[f]:
            t = np.unique(np.concatenate(thresholds[f]))
            t = t[np.isfinite(t)]
            vals.append(float32_neighbours(t).astype(np.float64).ravel())
            if dtype == np.float64:
                up = np.nextafter(t, np.inf)
                mid = (graph_thresholds(t, ens.comparison, np.dtype(np.float32)).astype(np.float64)
                       + np.nextafter(graph_thresholds(t, ens.comparison, np.dtype(np.float32)), np.float32(np.inf)).astype(np.float64)) / 2
                vals += [t, up, np.nextafter(t, -np.inf), mid, np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf)]
        if categories[f]:
            c = np.unique(np.concatenate(categories[f]))
            vals += [c, np.asarray([c.max() + 1.0, -1.0])]
            if ens.category_codes is not CategoryCodes.EXACT:  # codes truncate: between codes
                vals += [c + 0.5, np.nextafter(c + 1.0, -np.inf), np.asarray([-0.5, -0.0])]
        v = np.unique(np.concatenate(vals)) if vals else np.zeros(0)
        with np.errstate(over="ignore"):
            out.append(v[np.isfinite(v.astype(dtype))].astype(dtype))
    return out


def _ranges(ens: Ensemble) -> tuple[np.ndarray, np.ndarray]:
    thresholds, categories = _feature_values(ens)
    lo, hi = np.zeros(ens.n_features), np.ones(ens.n_features)
    for f in range(ens.n_features):
        vals = [np.concatenate(v) for v in (thresholds[f], categories[f]) if v]
        if vals:
            v = np.concatenate(vals)
            v = v[np.isfinite(v)]
            if v.size:
                span = max(v.max() - v.min(), abs(v).max() * 0.1, 1.0)
                lo[f], hi[f] = v.min() - 0.25 * span, v.max() + 0.25 * span
    return lo, hi


def _random_rows(ens: Ensemble, n: int, rng: np.random.Generator, dtype: np.dtype, critical: list[np.ndarray]) -> np.ndarray:
    lo, hi = _ranges(ens)
    X = rng.uniform(lo, hi, size=(n, ens.n_features))
    for f, values in enumerate(critical):  # a third of the cells sit on a critical value
        if values.size:
            pick = rng.random(n) < 1 / 3
            X[pick, f] = rng.choice(values, size=int(pick.sum()))
    return X.astype(dtype)


@dataclass(frozen=True)
class _TreeIndex:
    """Per tree, computed once: each internal node's parent and side, thresholds as compared."""

    parent: dict[int, tuple[int, bool]]
    thresholds: np.ndarray
    cat_row: dict[int, int]


def _tree_index(ens: Ensemble, tree: Tree, cmp: np.dtype) -> _TreeIndex:
    parent: dict[int, tuple[int, bool]] = {}
    for i in range(tree.n_internal):
        for child, is_left in ((int(tree.left[i]), True), (int(tree.right[i]), False)):
            if child >= 0:
                parent[child] = (i, is_left)
    return _TreeIndex(
        parent=parent,
        thresholds=graph_thresholds(tree.threshold, ens.comparison, cmp).astype(np.float64),
        cat_row={int(n): m for m, n in enumerate(tree.cat_nodes)},
    )


def _path_rows(ens: Ensemble, tree: Tree, index: _TreeIndex, node: int, base: np.ndarray, critical: list[np.ndarray], rng: np.random.Generator, nan: bool) -> list[np.ndarray]:
    """Rows that reach ``node`` of ``tree`` and sit on its threshold (and neighbours), or on each
    of its categories; plus NaN there when the model accepts it."""
    row = base.copy()
    lo = np.full(ens.n_features, -np.inf)
    hi = np.full(ens.n_features, np.inf)
    cmp = compare_dtype(ens.source_dtype, base.dtype)
    parent = index.parent
    path = []
    cur = node
    while cur in parent:
        p, is_left = parent[cur]
        path.append((p, is_left))
        cur = p
    cat_row = index.cat_row
    for p, is_left in reversed(path):
        f = int(tree.feature[p])
        if p in cat_row:
            m = cat_row[p]
            vals, lefts = tree.cat_values[m], tree.cat_left[m]
            ok = vals[(lefts == is_left) & ~np.isnan(vals)]
            if ok.size:
                row[f] = rng.choice(ok)
            elif bool(tree.other_left[m]) == is_left:  # a value that is no category of the node
                row[f] = -1.0
            elif bool(tree.default_left[p]) == is_left:
                row[f] = np.nan
            continue
        t = float(index.thresholds[p])
        if is_left:
            hi[f] = min(hi[f], t)
        else:
            lo[f] = max(lo[f], float(np.nextafter(cmp.type(t), cmp.type(np.inf))))
        if not lo[f] <= row[f] <= hi[f]:
            inside = critical[f][(critical[f] >= lo[f]) & (critical[f] <= hi[f])]
            row[f] = rng.choice(inside) if inside.size else (hi[f] if np.isfinite(hi[f]) else lo[f])
    f = int(tree.feature[node])
    if node in cat_row:
        m = cat_row[node]
        vals = tree.cat_values[m]
        targets = list(vals[~np.isnan(vals)]) + [np.nanmax(vals) + 1.0]
    else:
        targets = list(float32_neighbours(tree.threshold[node:node + 1]).astype(np.float64).ravel())
        if base.dtype == np.float64:
            t = tree.threshold[node]
            targets += [t, np.nextafter(t, np.inf), np.nextafter(t, -np.inf)]
    if nan:
        targets.append(np.nan)
    rows = []
    for v in targets:
        r = row.copy()
        with np.errstate(over="ignore"):
            r[f] = base.dtype.type(v)
        if np.isinf(r[f]) and not np.isinf(v):
            continue
        rows.append(r)
    return rows


def synthesize(
    ens: Ensemble,
    rows: int = 1000,
    *,
    dtype: np.dtype = np.dtype(np.float32),
    seed: int = 0,
    max_nodes: int = 20_000,
) -> tuple[np.ndarray, dict[str, int]]:
    """Rows for ``verify`` and the count of each kind:

    - ``random``: uniform in the span of each feature's thresholds, a third of the cells on a
      critical value (threshold neighbours, categories);
    - ``threshold``: for every internal node (a seeded sample of ``max_nodes`` when there are
      more), a row that reaches it with the node's feature on the threshold, on the float32 numbers
      just below and above it, and on the largest float32 <= t and its successor (plus the float64
      neighbours for float64 data); each category of a categorical node and an unseen one;
    - ``nan`` / ``inf``: where the model accepts them, cells NaN or +-inf, and NaN at each node;
    - ``extreme``: +-max float32, +-smallest subnormal, +-0.
    """
    if not 0 <= rows <= MAX_ROWS:
        raise OptionError(f"--rows must be between 0 and {MAX_ROWS}")
    if not 0 <= seed < 2**63:
        raise OptionError("--seed must be >= 0")
    dtype = np.dtype(dtype)
    n_nodes = min(sum(t.n_internal for t in ens.trees), max_nodes)
    estimate = (rows + 8 * n_nodes + 3 * max(rows // 4, 16)) * ens.n_features * dtype.itemsize
    if estimate > MAX_SYNTHESIZED_BYTES:
        raise OptionError(
            f"synthesized rows would take {estimate / 2**30:.1f} GiB for {ens.n_features} features; "
            "lower --rows or pass --data"
        )
    rng = np.random.default_rng(seed)
    critical = _critical_values(ens, dtype)
    parts = {"random": _random_rows(ens, rows, rng, dtype, critical)}
    nodes = [(t, i) for t, tree in enumerate(ens.trees) for i in range(tree.n_internal)]
    if len(nodes) > max_nodes:
        keep = np.sort(rng.choice(len(nodes), size=max_nodes, replace=False))
        nodes = [nodes[k] for k in keep]
    base = _random_rows(ens, max(len(nodes), 1), rng, dtype, critical)
    boundary: list[np.ndarray] = []
    cmp = compare_dtype(ens.source_dtype, dtype)
    indexes: dict[int, _TreeIndex] = {}
    for k, (t, i) in enumerate(nodes):
        if t not in indexes:
            indexes[t] = _tree_index(ens, ens.trees[t], cmp)
        boundary += _path_rows(ens, ens.trees[t], indexes[t], i, base[k], critical, rng, ens.accepts_nan)
    parts["threshold"] = np.asarray(boundary, dtype).reshape(-1, ens.n_features)
    n_special = max(rows // 4, 16)
    if ens.accepts_nan:
        X = _random_rows(ens, n_special, rng, dtype, critical)
        X[rng.random(X.shape) < 0.3] = np.nan
        X[0] = np.nan
        parts["nan"] = X
    if ens.accepts_inf:
        X = _random_rows(ens, n_special, rng, dtype, critical)
        cells: np.ndarray = rng.random(X.shape)
        X[cells < 0.15] = np.inf
        X[(cells >= 0.15) & (cells < 0.3)] = -np.inf
        X[0], X[1] = np.inf, -np.inf
        parts["inf"] = X
    X = _random_rows(ens, n_special, rng, dtype, critical)
    specials = np.asarray([np.finfo(np.float32).max, np.finfo(np.float32).smallest_subnormal, 0.0])
    specials = np.concatenate([specials, -specials]).astype(dtype)
    cells = rng.random(X.shape) < 0.3
    X[cells] = rng.choice(specials, size=int(cells.sum()))
    parts["extreme"] = X
    for kind, X in parts.items():  # only rows the source model accepts, after its own cast
        if ens.finite_features and kind == "inf":  # move inf off the features that refuse it
            cols = list(ens.finite_features)
            X[:, cols] = np.where(np.isinf(X[:, cols]), 0.0, X[:, cols])
        with np.errstate(over="ignore"):
            seen = X.astype(ens.source_dtype)  # float64 beyond float32 becomes inf there
        keep = np.ones(X.shape[0], bool)
        if not ens.accepts_nan:
            keep &= ~np.isnan(seen).any(axis=1)
        if not ens.accepts_inf:
            keep &= ~np.isinf(seen).any(axis=1)
        elif ens.finite_features:
            keep &= ~np.isinf(seen[:, list(ens.finite_features)]).any(axis=1)
        parts[kind] = X[keep]
    kinds = {k: int(v.shape[0]) for k, v in parts.items()}
    return np.concatenate(list(parts.values()), axis=0), kinds


# ---------------------------------------------------------------------------- running the graph


def devices_for(device: str) -> list[str]:
    """The devices to run on; ``cuda`` without the CUDA provider is an error, never a CPU run."""
    import onnxruntime as ort

    if device not in DEVICES:
        raise OptionError(f"unknown device {device!r}; choose one of {', '.join(DEVICES)}")
    has_cuda = "CUDAExecutionProvider" in ort.get_available_providers()
    if device == "cuda" and not has_cuda:
        raise DeviceUnavailableError(
            "--device cuda: this onnxruntime has no CUDAExecutionProvider (install onnxruntime-gpu "
            "on a machine with a CUDA GPU); nothing was run"
        )
    if device == "all":
        return ["cpu", "cuda"] if has_cuda else ["cpu"]
    return [device]


def runtime_version(runtime: str, device: str) -> str:
    """The version of ``runtime``; an error naming the choices, the install command, or that
    ``--device`` is onnxruntime's."""
    if runtime not in RUNTIMES:
        raise OptionError(f"unknown runtime {runtime!r}; choose one of {', '.join(RUNTIMES)}")
    if runtime != "onnxruntime" and device != "cpu":
        raise OptionError(f"--device {device} chooses onnxruntime's provider; --runtime {runtime} runs on the CPU")
    return RUNTIMES[runtime].check()


def run_graph(model: onnx.ModelProto, X: np.ndarray, device: str = "cpu", rows_per_chunk: int = 65536) -> dict[str, np.ndarray]:
    """Run ``model`` on ``X`` in chunks of rows; outputs by name (leaf ids, if exposed, [N, T])."""
    return GraphRunner(model, device).run(X, rows_per_chunk)


class GraphRunner:
    """``model`` loaded once on ``runtime`` (see :data:`tree2mat.runtimes.RUNTIMES`; ``device``
    for onnxruntime), run on as many arrays as needed."""

    def __init__(self, model: onnx.ModelProto, device: str, runtime: str = "onnxruntime") -> None:
        self.device = device
        self.names = [o.name for o in model.graph.output]
        self.leaf = _leaf_tensor(model)
        self._run = RUNTIMES[runtime].load(model, self.names, device)

    def run(self, X: np.ndarray, rows_per_chunk: int = 65536) -> dict[str, np.ndarray]:
        """Outputs by name of the rows ``X``, run ``rows_per_chunk`` at a time."""
        chunks: dict[str, list[np.ndarray]] = {n: [] for n in self.names}
        for start in range(0, X.shape[0], rows_per_chunk):
            outs = self._run(np.ascontiguousarray(X[start:start + rows_per_chunk]))
            for n in self.names:
                chunks[n].append(np.asarray(outs[n]))
        out = {}
        for n in self.names:
            if any(c.ndim == 0 for c in chunks[n]) or (n == self.leaf and chunks[n][0].ndim != 2):
                raise VerificationError(f"the graph's output {n!r} has the wrong rank for a tree2mat graph")
            out[n] = np.concatenate(chunks[n], axis=1 if n == self.leaf else 0)
        return out


def _metadata(model: onnx.ModelProto) -> dict[str, str]:
    return {p.key: p.value for p in model.metadata_props}


def _leaf_tensor(model: onnx.ModelProto) -> str | None:
    return _metadata(model).get("tree2mat.leaf_tensor")


#: ``leaves(index) -> leaf ids [N, T]``: a graph's exit index [T, N] as leaf ids.
LeafIds = Callable[[np.ndarray], np.ndarray]


def _with_leaf_output(model: onnx.ModelProto, ens: Ensemble, dtype: np.dtype) -> tuple[onnx.ModelProto, LeafIds | None]:
    """A copy of ``model`` that also outputs the exit index, when tree2mat wrote it for a model
    of this many trees, and how to read leaf ids off it (``tree2mat.exit_layout``: the index is
    the leaf ids, or positions of the form's exit layout; see :class:`tree2mat.forms._layout.Exit`)."""
    meta = _metadata(model)
    leaf = meta.get("tree2mat.leaf_tensor")
    if not leaf or meta.get("tree2mat.n_trees") != str(ens.n_trees):
        return model, None
    produced = {o for n in model.graph.node for o in n.output}
    if leaf not in produced:
        return model, None
    if meta.get("tree2mat.exit_layout", EXIT_LEAVES) == EXIT_LEAVES:
        leaves: LeafIds = lambda index: np.asarray(index).T  # noqa: E731
        elem = onnx.TensorProto.INT64
    else:
        form = FORMS.get(meta.get("tree2mat.form", ""))
        if form is None or form.exit_layout is None:
            return model, None
        order, slots, index_dtype = form.exit_layout(ens, dtype)
        leaves = lambda index: leaf_ids_of(index, order, slots).T  # noqa: E731
        elem = onnx.helper.np_dtype_to_tensor_dtype(index_dtype)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    if leaf not in {o.name for o in out.graph.output}:
        out.graph.output.append(onnx.helper.make_tensor_value_info(leaf, elem, [ens.n_trees, "N"]))
    return out, leaves


# ------------------------------------------------------------------------------- the comparison


def compare(name: str, device: str, got: np.ndarray, expected: np.ndarray, X: np.ndarray, atol: float, rtol: float, exact: bool, max_report: int = 5, offset: int = 0) -> OutputReport:
    """Compare one output: exactly (labels, leaf ids) or within ``atol + rtol * |expected|``.
    ``offset``: the row number of ``X[0]`` in the whole data (for the reported rows)."""
    if got.shape[1:] != expected.shape[1:] or got.shape[0] != expected.shape[0]:
        shape = lambda a: "[N" + "".join(f", {d}" for d in a.shape[1:]) + "]"  # noqa: E731
        return OutputReport(name, device, 0, 0, 0.0, 0.0, problem=f"shape {shape(got)}, expected {shape(expected)}"
                            + ("" if got.shape[0] == expected.shape[0] else f" ({got.shape[0]} rows for {expected.shape[0]})"))
    bad_rows, err_abs, err_rel = differing_rows(got, expected, atol, rtol, exact)
    first = [
        Mismatch(offset + int(r), X[r].tolist(), expected[r].tolist(), got[r].tolist()) for r in bad_rows[:max_report]
    ]
    return OutputReport(name, device, int(expected.shape[0]), int(bad_rows.size), err_abs, err_rel, first)


def merge(a: OutputReport | None, b: OutputReport, max_report: int = 5) -> OutputReport:
    """The report of two consecutive chunks of rows of one output on one device."""
    if a is None:
        return b
    if a.problem or b.problem:  # a structural problem stands; comparing stops there
        return a if a.problem else b
    return OutputReport(
        a.name, a.device, a.compared + b.compared, a.mismatches + b.mismatches,
        max(a.max_abs_error, b.max_abs_error), max(a.max_rel_error, b.max_rel_error),
        (a.first_mismatches + b.first_mismatches)[:max_report], walk=a.walk,
    )


def differing_rows(got: np.ndarray, expected: np.ndarray, atol: float, rtol: float, exact: bool) -> tuple[np.ndarray, float, float]:
    """Rows (indices) where ``got`` differs from ``expected`` (same shape) as :func:`compare`
    judges, and the largest absolute and relative errors."""
    if exact or expected.dtype.kind in "USOb" or got.dtype.kind in "USO":
        if expected.dtype.kind in "USO" or got.dtype.kind in "USO":
            bad = got.astype(str) != expected.astype(str)
        else:
            bad = got != expected
        err_abs = err_rel = 0.0
    else:
        g, e = got.astype(np.float64), expected.astype(np.float64)
        if got.dtype == np.float32:
            # A value beyond float32's range is +-inf in a float32 output: its correct rounding.
            with np.errstate(over="ignore"):
                e = np.where(np.isinf(e.astype(np.float32)), e.astype(np.float32).astype(np.float64), e)
        both_nan = np.isnan(g) & np.isnan(e)
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.where(both_nan | (g == e), 0.0, np.abs(g - e))
            diff = np.where(np.isnan(diff), np.inf, diff)
            bad = diff > atol + rtol * np.abs(np.nan_to_num(e, nan=0.0, posinf=0.0, neginf=0.0))
            nonzero = np.abs(e) > 0
            rel = np.where(nonzero, diff / np.where(nonzero, np.abs(e), 1.0), 0.0)
        err_abs = float(diff.max()) if diff.size else 0.0
        err_rel = float(np.nan_to_num(rel, nan=0.0, posinf=np.inf).max()) if rel.size else 0.0
    bad_rows = np.flatnonzero(bad.reshape(bad.shape[0], -1).any(axis=1)) if bad.size else np.zeros(0, int)
    return bad_rows, err_abs, err_rel


def default_atol(ens: Ensemble, arithmetic: str = "float64") -> float:
    """``1e-12 x scale`` for libraries that sum in float64; ``4 eps32 x scale`` for those that
    sum (and apply their link) in float32, e.g. XGBoost; scale = 1 + |base| + sum_t max |leaf_t|.
    A graph whose ``arithmetic`` is float32 (the default graph) gets at least ``4 eps32``: its
    links and heads round in float32 (probabilities, scores: quantities of order one)."""
    scale = 1.0 + float(np.abs(ens.base_score).max()) + sum(float(np.abs(t.value).max()) for t in ens.trees)
    eps32 = float(np.finfo(np.float32).eps)
    if np.dtype(ens.accumulate_dtype) == np.float32:
        return 4 * eps32 * scale
    return max(1e-12 * scale, 4 * eps32) if arithmetic == "float32" else 1e-12 * scale


def _load_onnx(onnx_model_or_path: Any) -> tuple[onnx.ModelProto, str]:
    if isinstance(onnx_model_or_path, onnx.ModelProto):
        model, name = onnx_model_or_path, "<ModelProto>"
    else:
        path = Path(onnx_model_or_path)
        if not path.exists():
            raise ModelFileError(f"{path}: no such file")
        if not path.is_file():
            raise ModelFileError(f"{path}: not a regular file")
        try:
            model, name = onnx.load(str(path)), str(path)
        except Exception as exc:
            raise ModelFileError(f"{path}: not a readable ONNX file: {type(exc).__name__}: {exc}") from exc
    if not model.graph.node or not model.graph.input:
        raise ModelFileError(f"{name}: not an ONNX model (no graph)")
    large = needs_external_data(model)
    try:
        if large and name != "<ModelProto>":
            onnx.checker.check_model(name)  # by file: the message is over protobuf's limit
        elif not large:
            onnx.checker.check_model(model)
    except Exception as exc:
        raise ModelFileError(f"{name}: not a valid ONNX model: {exc}") from exc
    return model, name


def _check_graph_input(model: onnx.ModelProto, n_features: int) -> np.dtype:
    if len(model.graph.input) != 1:
        raise VerificationError(f"the ONNX graph has {len(model.graph.input)} inputs; a tree2mat graph has one")
    inp = model.graph.input[0]
    tt = inp.type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
    if len(dims) != 2:
        raise VerificationError(f"the ONNX input {inp.name!r} has rank {len(dims)}, expected [N, features]")
    if dims[1] is not None and dims[1] != n_features:
        raise VerificationError(
            f"the ONNX graph takes {dims[1]} features, the model {n_features}: not a graph of this model"
        )
    dtypes: dict[int, np.dtype] = {onnx.TensorProto.FLOAT: np.dtype(np.float32), onnx.TensorProto.DOUBLE: np.dtype(np.float64)}
    if tt.elem_type not in dtypes:
        raise VerificationError(
            f"the ONNX input has element type {onnx.TensorProto.DataType.Name(tt.elem_type).lower()}, "
            "expected float or double"
        )
    return dtypes[tt.elem_type]


def verify(
    model_or_path: Any,
    onnx_model_or_path: Any,
    data: Any = None,
    *,
    device: str = "cpu",
    rows: int = 1000,
    atol: float | None = None,
    rtol: float = DEFAULT_RTOL,
    seed: int = 0,
    max_report: int = 5,
    progress: Callable[[int, float], None] | None = None,
    runtime: str = "onnxruntime",
) -> Report:
    """Compare the ONNX graph with the original model; ``Report.passed`` is the verdict.

    ``data``: an array or a file path (.npy, .npz, .csv, .parquet); None synthesizes rows. A file
    is read, checked and let go a chunk of rows at a time (constant memory however large it is).
    ``progress(rows_done, fraction)`` is called after each chunk. ``runtime``: the ONNX runtime
    to run the graph on (:data:`tree2mat.runtimes.RUNTIMES`; ``device`` is onnxruntime's). A
    scikit-learn ``Pipeline``
    (see :func:`tree2mat.convert`) needs ``data``: rows as the pipeline takes them.

    >>> from sklearn.datasets import load_iris
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> from tree2mat import convert
    >>> X, y = load_iris(return_X_y=True)
    >>> model = RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y)
    >>> report = verify(model, convert(model, "sign"), rows=200)
    >>> report.passed, [o.name for o in report.outputs]
    (True, ['label', 'probabilities', 'routing'])
    >>> verify(model, convert(model), X).rows   # your rows instead of synthesized ones
    150
    """
    version = runtime_version(runtime, device)
    devices = devices_for(device)
    if (atol is not None and not atol >= 0) or not rtol >= 0:  # also refuses NaN
        raise OptionError("--atol and --rtol must be numbers >= 0")
    model_name = str(model_or_path) if isinstance(model_or_path, (str, Path)) else type(model_or_path).__name__
    model = frontends.load_object(model_or_path)
    pipeline = model if is_pipeline(model) else None
    if pipeline is not None:
        model = pipelines.final_step(pipeline)
        if data is None:
            raise DataError(
                f"{model_name}: a pipeline is verified on rows you give (--data, as the pipeline takes them): "
                "tree2mat synthesizes threshold rows for a tree model, not through preprocessing"
            )
    ens = frontends.named(model_or_path, frontends.to_ensemble, model)
    n_in = pipelines.n_features(pipeline) if pipeline is not None else ens.n_features
    library = frontends.library_model(model_or_path, ens) if isinstance(model, Ensemble) else None
    if library is not None:  # a native file: the library itself is the reference
        model = library
    onx, onnx_name = _load_onnx(onnx_model_or_path)
    if runtime != "onnxruntime" and needs_external_data(onx):
        raise OptionError(f"--runtime {runtime}: a graph with external data (over 2 GiB) is verified on onnxruntime only")
    in_dtype = _check_graph_input(onx, n_in)
    notes = []
    if data is None:
        X, kinds = synthesize(ens, rows, dtype=in_dtype, seed=seed)
        source: Rows = ArrayRows(X, "synthesized rows")
    else:
        labels = dict(ens.category_labels) if pipeline is None else None
        source = open_rows(data, labels) if isinstance(data, (str, Path)) else ArrayRows(data)
        if source.n_features != n_in:
            raise DataError(f"data has shape ({source.n_rows if source.n_rows is not None else 'N'}, {source.n_features}); "
                            f"the model expects [N, {n_in}]")
        kinds = None
    meta = _metadata(onx)
    if meta.get("tree2mat.exact") == "0":
        notes.append(
            f"the graph is the {meta.get('tree2mat.form', '?')} form at temperature {meta.get('tree2mat.temperature', '?')}: "
            "an approximation of the model, so mismatches are expected; convert with an exact form to ship"
        )
    names = {o.name for o in onx.graph.output}
    raw = meta.get("tree2mat.raw") == "1" or ("variable" in names and ens.task.value != "regression")
    if pipeline is not None:
        notes.append(f"a pipeline: {pipelines.describe(pipeline)}'s own predictions compared with the graph's outputs")
    if isinstance(model, Ensemble):
        notes.append("no original library model: compared with tree2mat's reference evaluator")
    onx_run, leaf_ids = _with_leaf_output(onx, ens, in_dtype)
    routing = leaf_ids is not None
    leaf_name = meta.get("tree2mat.leaf_tensor", "")
    if not routing:
        notes.append("the graph exposes no tree2mat leaf ids: routing checked through outputs only")
    form = FORMS.get(meta.get("tree2mat.form", ""))
    per_row = form.bytes_per_row(ens) if form else 64 * 1024
    chunk = max(1, min(65536, CHUNK_BYTES // max(per_row, 1)))
    data_rows = max(1, min(chunk, DATA_CHUNK_BYTES // (8 * n_in)))
    atol_v = default_atol(ens, meta.get("tree2mat.arithmetic", "float64")) if atol is None else atol
    # (a graph that walks small batches another way: every row both ways, one report line each)
    graphs, walk_note = walks(onx_run, chunk)
    if walk_note:
        notes.append(walk_note)
    runners = [(GraphRunner(m, dev, runtime), dev, walk, rows) for dev in devices for walk, m, rows in graphs]
    reports: dict[tuple[str, str, str], OutputReport] = {}
    done = 0
    for X in read_chunks(source, data_rows):
        X = _data_rows(X, in_dtype) if data is not None else X
        expected, X_tree = _expected(model, ens, X, raw, pipeline, source.names)
        leaves_ref = evaluate.apply(ens, X_tree) if routing else None
        for runner, dev, walk, rows_per_run in runners:
            got = runner.run(X, rows_per_run)
            add = functools.partial(_add, reports, walk, max_report)
            for name, exp in expected.items():
                if name not in got:
                    add(OutputReport(name, dev, 0, 0, 0.0, 0.0, problem="output missing from the graph"))
                    continue
                add(compare(name, dev, got[name], np.asarray(exp), X, atol_v, rtol, name == "label", max_report, done))
            if leaves_ref is not None and leaf_ids is not None:
                try:
                    got_leaves = leaf_ids(got[leaf_name])
                except ValueError as exc:  # an index of the wrong shape: a broken graph
                    raise VerificationError(f"the graph's leaf ids: {exc}") from exc
                add(compare("routing", dev, got_leaves, leaves_ref, X, 0, 0, True, max_report, done))
            if leaves_ref is not None and "leaves" in got:  # a --leaves graph's own output
                add(compare("leaves", dev, got["leaves"], leaves_ref, X, 0, 0, True, max_report, done))
        done += X.shape[0]
        if progress is not None:
            progress(done, source.fraction_read)
    return Report(model_name, onnx_name, done, kinds or {"data": done}, devices, atol_v, rtol, list(reports.values()), notes,
                  f"{runtime} {version}")


def _add(reports: dict[tuple[str, str, str], OutputReport], walk: str, max_report: int, rep: OutputReport) -> None:
    """``rep``, of the graph's ``walk``, merged into ``reports``."""
    key = (rep.device, walk, rep.name)
    reports[key] = merge(reports.get(key), replace(rep, walk=walk), max_report)


def walks(model: onnx.ModelProto, chunk: int) -> tuple[list[tuple[str, onnx.ModelProto, int]], str | None]:
    """(walk, graph, rows per run): ``model`` run in chunks of ``chunk`` rows (walk "");
    where it walks small batches another way (traverse's ``If``, see
    :class:`tree2mat.forms._layout.Walks`; ``tree2mat.walk_rows*`` in the metadata, one entry
    per tree step of a pipeline), two copies instead, each walking every batch one way (the
    constants the ``If`` compares the rows with set past any batch, or below): every row
    checked both ways. And a note where the walks cannot be forced (a graph rewritten since
    tree2mat wrote it): then ``model`` as it is, each row through the walk its chunk takes."""
    meta = _metadata(model)
    names = [n for n in meta.get("tree2mat.walk_rows_tensor", "").split(",") if n]
    if not names:
        return [("", model, chunk)], None
    inits = {t.name: t for t in model.graph.initializer}
    try:
        rows = [int(v) for v in meta["tree2mat.walk_rows"].split(",")]
        most = [int(v) for v in meta["tree2mat.walk_rows_max"].split(",")]
        if len(rows) != len(names) or len(most) != len(names):
            raise ValueError("not one value per walk")
        for name, value in zip(names, rows):
            if name not in inits:
                raise ValueError(f"no initializer {name!r}")
            if onnx.numpy_helper.to_array(inits[name]).tolist() != [value]:
                raise ValueError(f"{name!r} is not [{value}]")
    except (KeyError, ValueError) as exc:
        note = (f"the graph's two walks could not be forced ({exc}): each row was checked through the walk its batch of "
                f"{chunk} rows takes")
        return [("", model, chunk)], note
    few = min(rows)
    return [(f">{few} rows", forced_walk(model, -1), chunk), (f"<={few} rows", forced_walk(model, 2**62), max(1, min(chunk, *most)))], None


def forced_walk(model: onnx.ModelProto, rows: int) -> onnx.ModelProto:
    """A copy of ``model`` whose walks' ``If`` takes the small batches' walk up to ``rows`` rows
    (-1: never; 2**62: always)."""
    names = set(_metadata(model).get("tree2mat.walk_rows_tensor", "").split(","))
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for tensor in out.graph.initializer:
        if tensor.name in names:
            tensor.CopyFrom(onnx.numpy_helper.from_array(np.asarray([rows], np.int64), tensor.name))
    return out


def _data_rows(X: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Rows of the user's data (numeric: every :class:`Rows` checks) as the graph takes them
    (beyond float32 is inf, as any cast makes it)."""
    with np.errstate(over="ignore"):
        return np.ascontiguousarray(X, dtype)


def _expected(model: Any, ens: Ensemble, X: np.ndarray, raw: bool, pipeline: Any = None, names: dict[int, np.ndarray] | None = None) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The outputs the graph must reproduce on ``X`` (the library's own, or the reference
    evaluator's when there is no library model), and the rows as the trees take them.
    ``pipeline``: the pipeline whose last step is ``model``; its other steps transform ``X``
    first (scikit-learn's own transform: the rows its trees see)."""
    if isinstance(model, Ensemble):
        return evaluate.predict(ens, X, raw=raw), X
    # Rows at +-max float32 overflow sklearn's finiteness pre-check (a sum); it then checks
    # element by element and accepts them, so its float warnings say nothing here.
    try:
        with np.errstate(over="ignore", invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # e.g. "X does not have valid feature names"
            if pipeline is not None and len(pipeline.steps) > 1:
                X = pipeline[:-1].transform(pipelines.as_fitted(pipeline, X))
            if pipeline is None and ens.category_labels and names:  # the library reads the names itself
                out = frontends.frontend_for(model).reference_outputs(model, labelled_frame(ens, X, names), raw, ens)
                return out, X
            out = frontends.frontend_for(model).reference_outputs(model, X, raw, ens)
            return out, np.asarray(X.toarray() if hasattr(X, "toarray") else X)  # (sparse from a one-hot encoder)
    except Exception as exc:  # the library refuses the rows (inf, NaN where unsupported, ...)
        reason = str(exc).split("Stack trace:")[0].strip()  # (XGBoost's errors carry a native stack trace)
        raise DataError(f"the model itself rejects the data: {type(exc).__name__}: {reason}") from exc
