"""``verify``: run an ONNX graph in onnxruntime and compare it with the original model.

Checks, per execution provider:
- routing: on graphs tree2mat wrote, the internal leaf ids [T, N] equal the reference
  evaluator's, exactly (the evaluator itself is tested against the libraries);
- labels: identical to the model's ``predict``; a row whose label differs where the library's
  scores of the two labels lie within the rounding of the sums (:func:`tie_bound`) is a tie,
  counted apart (``OutputReport.ties``) and failing only a ``strict`` check;
- values: ``|graph - model| <= atol + rtol * |model|`` per element, NaN only where the model has
  NaN. Default ``rtol = 1e-6``; default ``atol = 1e-12 * (1 + |base| + sum_t max |leaf_t|)``. The
  graph sums leaf values in float64 and rounds once to the output dtype, so what remains is the
  output rounding (float32: 6e-8 relative) and float64 summation order.

Without data, rows are synthesized (see :func:`synthesize`).

The package: :mod:`~tree2mat.verify.subject` (the model compared with),
:mod:`~tree2mat.verify.rows` (synthesized rows), :mod:`~tree2mat.verify.runners` (running the
graph), :mod:`~tree2mat.verify.exits` (its exit leaves), :mod:`~tree2mat.verify.walking`
(traverse's walks), :mod:`~tree2mat.verify.checks` (one output against the model's),
:mod:`~tree2mat.verify.chunks` (every chunk of rows through every run),
:mod:`~tree2mat.verify.notes` (the report's notes on the graph) and
:mod:`~tree2mat.verify.report` (the :class:`Report`); :func:`verify` here puts them together.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from tree2mat import attention, pipelines
from tree2mat.attention import graph as attention_graph
from tree2mat.data import ArrayRows, ColumnRows, Rows, check_header_option, open_rows
from tree2mat.errors import EXTRAS, DataError, LibraryUnavailableError, OptionError, TargetWarning, VerificationError, install_command
from tree2mat.forms import FORMS
from tree2mat.frontends import FRONTENDS
from tree2mat.ir import evaluate
from tree2mat.onnx_io import needs_external_data
from tree2mat.runtimes import cuda_refusal
from tree2mat.verify import masks
from tree2mat.verify.checks import DEFAULT_RTOL, compare, default_atol, differing_rows, merge, tie_bound, tie_gaps
from tree2mat.verify.chunks import CROSS_CHECK_ROWS, TREE_WEIGHTS, _check_rows, _Checks
from tree2mat.verify.exits import LeafIds, _with_leaf_output
from tree2mat.verify.notes import _NO_ROUTING, _below_proven_opset, _category_notes, _notes, _target_elsewhere
from tree2mat.verify.proximity import proximity_check
from tree2mat.verify.report import REPORT_SCHEMA, Mismatch, OutputReport, Report, Tie
from tree2mat.verify.rows import MAX_ROWS, MAX_SYNTHESIZED_BYTES, synthesize
from tree2mat.verify.runners import DEVICES, GraphRunner, _check_graph_input, _load_onnx, _metadata, check_operators, devices_for, run_graph, runtime_version
from tree2mat.verify.subject import Subject, load_subject
from tree2mat.verify.subject import _expected as _expected  # (imported by tests/runtimes/test_runtimes.py)
from tree2mat.verify.walking import forced_walk, walk_limit_names, walks

__all__ = [
    "CHUNK_BYTES", "CROSS_CHECK_ROWS", "DATA_CHUNK_BYTES", "DEFAULT_TIMEOUT_S", "DEFAULT_RTOL", "DEVICES", "MAX_ROWS", "MAX_SYNTHESIZED_BYTES", "REPORT_SCHEMA",
    "GraphRunner", "LeafIds", "Mismatch", "OutputReport", "Report", "Subject", "Tie", "compare", "default_atol", "devices_for",
    "differing_rows", "forced_walk", "load_subject", "merge", "run_graph", "runtime_version", "synthesize", "tie_bound", "tie_gaps",
    "verify", "walk_limit_names", "walks",
]

#: The longest one run of a graph on a chunk of rows may take by default (seconds): a tree2mat
#: graph of the largest models runs a chunk in seconds; a graph that loops ends here.
DEFAULT_TIMEOUT_S = 600.0
#: Memory allowed for one chunk of rows in onnxruntime.
CHUNK_BYTES = 256 * 2**20
#: Memory allowed for one chunk of data rows (as float64), read from a file at a time.
DATA_CHUNK_BYTES = 32 * 2**20


def verify(
    model_or_path: Any, onnx_model_or_path: Any, data: Any = None, *, device: str = "cpu", rows: int = 1000, atol: float | None = None,
    rtol: float = DEFAULT_RTOL, seed: int = 0, max_report: int = 5, progress: Callable[[int, float], None] | None = None,
    runtime: str = "onnxruntime", timeout: float | None = DEFAULT_TIMEOUT_S, foreign_graph: bool = False, header: bool | None = None,
    require_library: bool = False, strict: bool = False, category_codes: bool = False,
) -> Report:
    """Compare the ONNX graph with the original model; ``Report.passed`` is the verdict.

    ``data``: an array or a file path (.npy, .npz, .csv, .parquet); None synthesizes rows. A file
    is read, checked and let go a chunk of rows at a time (constant memory however large it is).
    ``progress(rows_done, fraction)`` is called as the checks begin (0, 0.0) and after each chunk. ``runtime``: the ONNX runtime
    to run the graph on (:data:`tree2mat.runtimes.RUNTIMES`; ``device`` is onnxruntime's).
    ``timeout``: the longest one run of the graph on a chunk of rows may take, in seconds (None:
    no limit); past it the run is stopped and a ``GraphTimeoutError`` raised. A graph with
    operators tree2mat never writes (a ``Loop``, a custom domain: a graph from elsewhere) is
    refused unless ``foreign_graph``. A scikit-learn ``Pipeline``
    (see :func:`tree2mat.convert`) needs ``data``: rows as the pipeline takes them; where its
    graph has one input per column (string columns), a DataFrame or a ``.csv`` (with a header)
    or ``.parquet`` file, its columns read by name, text kept as text (onnxruntime and reference only). ``header``:
    whether a ``.csv`` file's first line is a header (the CLI's ``--header`` / ``--no-header``);
    None detects it: a header where a cell holds text, a line that could be either refused.
    ``require_library``: where the library's own predictions cannot be had (a native model file
    with its library not installed, tree2mat's IR), raise a ``LibraryUnavailableError`` instead of
    comparing with tree2mat's reference evaluator (a CI gate that must prove against the library).
    A label row where the graph's label differs from the library's at a tie (the library's
    scores of the two labels within :func:`tie_bound` of each other) is counted in
    ``OutputReport.ties``, not as a mismatch; ``strict`` fails the report on such rows too.
    ``category_codes``: a ``.csv`` or ``.parquet`` file's columns of named categories hold the
    categories' codes (numbers), not their names.

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
    version, devices = _check_options(runtime, device, atol, rtol, timeout, data, header)
    subject = _subject(model_or_path, data is None, require_library)
    onx, onnx_name, in_dtype, columns = _load_graph(onnx_model_or_path, subject, runtime, foreign_graph)
    devices, off_cuda = _cuda_devices(onx, device, devices)
    source, kinds = _rows_source(subject, data, in_dtype, rows, seed, header, category_codes, columns)
    meta = _metadata(onx)
    _check_kind(meta, subject)
    checks, data_rows, notes = _checks(onx, meta, subject, in_dtype, devices, off_cuda, runtime, timeout, atol, rtol, max_report)
    named = data is not None and subject.pipeline is None
    cast = in_dtype if data is not None and columns is None else None
    reports, done, unreached = _check_rows(checks, source, data_rows, cast, named, progress)
    notes += checks.notes()
    if named:
        notes += _category_notes(subject.ens, source, unreached)
    return Report(subject.name, onnx_name, done, kinds or {"data": done}, devices, checks.atol, rtol, reports, notes,
                  f"{runtime} {version}", strict, checks.tie_bound)


def _check_options(runtime: str, device: str, atol: float | None, rtol: float, timeout: float | None, data: Any, header: bool | None) -> tuple[str, list[str]]:
    """The runtime's version and the devices to run on; an OptionError where an option is out of
    range, or the runtime or device is unknown or missing (see :func:`runtime_version`)."""
    version = runtime_version(runtime, device)
    devices = devices_for(device)
    if (atol is not None and not atol >= 0) or not rtol >= 0:  # also refuses NaN
        raise OptionError("--atol and --rtol must be numbers >= 0")
    if timeout is not None and not 0 < timeout < 2**31:
        raise OptionError(f"--timeout {timeout}: give seconds > 0")
    check_header_option(data, header)
    return version, devices


def _subject(model_or_path: Any, synthesized: bool, require_library: bool) -> Subject:
    """The model compared with (:func:`load_subject`); where ``require_library`` and it has no
    library model, a LibraryUnavailableError saying why (:func:`_no_library`)."""
    subject = load_subject(model_or_path, synthesized=synthesized)
    if require_library and subject.library is None:
        raise LibraryUnavailableError(_no_library(subject))
    return subject


def _cuda_devices(onx: onnx.ModelProto, device: str, devices: list[str]) -> tuple[list[str], str | None]:
    """The devices to run ``onx`` on, and why not on cuda where onnxruntime's CUDA provider
    refuses it (:func:`cuda_refusal`): for ``--device cuda`` an OptionError, for ``--device all``
    the CPU's proof alone."""
    off_cuda = cuda_refusal(onx) if "cuda" in devices else None
    if off_cuda is not None and device == "cuda":
        raise OptionError(off_cuda)
    if off_cuda is not None:  # (--device all: the CPU's proof, and why not CUDA's)
        devices = [d for d in devices if d != "cuda"]
    return devices, off_cuda


def _checks(
    onx: onnx.ModelProto, meta: dict[str, str], subject: Subject, dtype: np.dtype, devices: list[str], off_cuda: str | None, runtime: str,
    timeout: float | None, atol: float | None, rtol: float, max_report: int,
) -> tuple[_Checks, int, list[str]]:
    """What each chunk of rows is checked on (the graph outputting its exit index, once per walk,
    loaded on every device; the tolerances), rows per chunk of data, and the report's notes on the
    graph; a TargetWarning where the graph was built for another runtime."""
    onx_run, leaf_ids, leaf_tensor, unread = _with_leaf_output(onx, subject.ens, dtype)
    chunk, data_rows = _chunk_rows(meta, subject)
    # (a graph that walks small batches another way: every row every way, one report line each)
    graphs, walk_note = walks(onx_run, chunk)
    notes = _notes(meta, subject, unread or (None if leaf_ids is not None else _NO_ROUTING), walk_note)
    if off_cuda is not None:
        notes.append(f"not run on cuda: {off_cuda.removeprefix('--device cuda: ')}")
    if (elsewhere := _target_elsewhere(meta, runtime, devices)) is not None:
        warnings.warn(TargetWarning(elsewhere), stacklevel=3)  # (verify's caller)
        notes.append(elsewhere)
    if (unproven := _below_proven_opset(onx, meta, runtime, subject.ens)) is not None:
        notes.append(unproven)
    atol_v = _default_atol(subject, meta.get("tree2mat.arithmetic", "float64")) if atol is None else atol
    forest = attention.as_forest(subject.model)
    # (an attention forest's labels are no sums of leaves: its ties are its probabilities', _Checks.forest_ties)
    ties = tie_bound(subject.ens, meta.get("tree2mat.arithmetic") if "tree2mat.form" in meta else None) if forest is None else 0.0
    # (an attention graph converted with --tree-weights: its weights checked against the model's too)
    weighed = forest if forest is not None and TREE_WEIGHTS in {o.name for o in onx.graph.output} else None
    checks = _Checks(
        subject, [(_runner(m, dev, runtime, timeout, meta), dev, walk, per_run) for dev in devices for walk, m, per_run in graphs],
        _raw(onx, meta, subject), leaf_ids, leaf_tensor, atol_v, rtol, max_report,
        _values_atol(forest, atol_v, meta.get("tree2mat.arithmetic", "float64")) if forest is not None and atol is None else None,
        attention_graph.value_span(forest) if forest is not None else np.inf, tie_bound=ties,
        forest_ties=forest is not None and forest.is_classifier,
        weights=None if weighed is None else _weights_check(weighed, meta.get("tree2mat.arithmetic", "float64"), atol),
        mask=masks.tree_mask(onx, subject.ens),
        proximity=proximity_check(meta, subject, dtype),
    )
    if checks.mask is not None:
        notes.append(f"tree_mask ({checks.mask.kind}): the outputs above with every tree kept; the '(tree mask)' lines with the trees "
                     "cut after a random count (per row with rows, per chunk with request) against tree2mat's reference evaluator "
                     "of the kept trees")
    if weighed is not None:
        within = "the bound on the graph's rounding of each row's weights" if atol is None else f"--atol {atol:g}"
        notes.append(f"tree_weights: each row's tree weights compared with tree2mat.attention's attention (float64), within {within} "
                     "+ rtol x |weight| (docs/attention.md)")
    return checks, data_rows, notes


def _values_atol(forest: attention.AttentionForest, atol: float, arithmetic: str) -> Callable[[np.ndarray], np.ndarray]:
    """``row_atol(X)``: an attention graph's default tolerance on each row's values [N], the
    larger of ``atol (1 + z)`` (:func:`tree2mat.attention.graph.default_atol`) and the bound on the
    graph's rounding of them (:func:`tree2mat.attention.graph.values_bound`)."""

    def row_atol(X: np.ndarray) -> np.ndarray:
        leaves = evaluate.apply(forest.ensemble, np.asarray(X, np.float64))
        return np.maximum(atol * (1.0 + forest.nearest(X, leaves)), attention_graph.values_bound(forest, X, arithmetic, leaves))

    return row_atol


def _weights_check(forest: attention.AttentionForest, arithmetic: str, atol: float | None) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """``check(X)``: the tree weights an attention graph's ``tree_weights`` must give on the rows
    ``X`` [N, T] (the model's), and each row's atol [N] (``atol`` as given; by default
    :func:`tree2mat.attention.graph.weights_bound`, the graph's rounding in ``arithmetic``)."""

    def check(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        leaves = evaluate.apply(forest.ensemble, X)
        bound = attention_graph.weights_bound(forest, X, arithmetic, leaves) if atol is None else np.full(X.shape[0], atol)
        return forest.attention(X, leaves), bound

    return check


def _runner(onx: onnx.ModelProto, device: str, runtime: str, timeout: float | None, meta: dict[str, str]) -> GraphRunner:
    """The graph loaded on ``runtime``; where the runtime refuses a graph whose form does not
    claim that runtime (``FormSpec.proven_on``: the ``treeensemble`` form on OpenVINO), the
    runtime's error says so, and what runs there."""
    try:
        return GraphRunner(onx, device, runtime, timeout)
    except VerificationError as exc:
        spec = FORMS.get(meta.get("tree2mat.form", ""))
        if spec is None or not spec.exact or runtime in spec.proven_on:
            raise
        raise VerificationError(
            f"{exc} (a {spec.name} graph is exact on {', '.join(spec.proven_on)}; for {runtime}, convert with another "
            "--form: the default graph runs on every runtime)"
        ) from exc


def _load_graph(onnx_model_or_path: Any, subject: Subject, runtime: str, foreign_graph: bool) -> tuple[onnx.ModelProto, str, np.dtype, list[str] | None]:
    """The graph (checked, see :func:`_load_onnx` and :func:`check_operators`; the caller's
    copied, its inputs to be put in order), its name, and the dtype of its input, which must take
    rows of the model's features, on ``runtime``; and where it has one input per column (a
    pipeline's, strings among them: :func:`tree2mat.pipelines.graph_columns`), the columns, rows
    then read by column name and the dtype its numeric inputs'."""
    onx, name = _load_onnx(onnx_model_or_path)
    if onx is onnx_model_or_path:  # (the caller's graph: its inputs may be put in order below)
        onx = onnx.ModelProto()
        onx.CopyFrom(onnx_model_or_path)
    # (a pipeline's graph of one input per column, strings among them: rows read by column name)
    columns = pipelines.graph_columns(onx, subject.pipeline, runtime)
    if runtime != "onnxruntime" and needs_external_data(onx):
        raise OptionError(f"--runtime {runtime}: a graph with external data (over 2 GiB) is verified on onnxruntime only")
    if columns is not None:
        numeric = [i.type.tensor_type.elem_type for i in onx.graph.input if i.type.tensor_type.elem_type != onnx.TensorProto.STRING]
        dtype = np.dtype(np.float32 if numeric and numeric[0] == onnx.TensorProto.FLOAT else np.float64)
    else:
        dtype = _check_graph_input(onx, subject.n_features)
        masks.tree_mask(onx, subject.ens)  # (a second input that is no tree mask of the model: refused before any run)
    check_operators(onx, name, foreign_graph)
    return onx, name, dtype, columns


def _rows_source(
    subject: Subject, data: Any, dtype: np.dtype, rows: int, seed: int, header: bool | None = None, codes: bool = False,
    columns: list[str] | None = None,
) -> tuple[Rows, dict[str, int] | None]:
    """The rows to check on: ``data`` (an array or a file, read a chunk at a time; ``header``: a
    .csv's, see :func:`open_rows`; ``codes``: its named-category columns hold codes), or ``rows``
    synthesized rows of ``dtype`` with the count of each kind (None for data)."""
    if data is None:
        X, kinds = synthesize(subject.ens, rows, dtype=dtype, seed=seed)
        return ArrayRows(X, "synthesized rows"), kinds
    if columns is not None:  # (the graph's inputs by name, text kept as text)
        return ColumnRows(data, columns, pipelines.text_columns(subject.pipeline), header), None
    labels = dict(subject.ens.category_labels) if subject.pipeline is None and not codes else None
    source = open_rows(data, labels, header) if isinstance(data, (str, Path)) else ArrayRows(data)
    if source.n_features != subject.n_features:
        raise DataError(f"data has shape ({source.n_rows if source.n_rows is not None else 'N'}, {source.n_features}); "
                        f"the model expects [N, {subject.n_features}]")
    return source, None


def _no_library(subject: Subject) -> str:
    """Why ``subject`` has no library model to compare with (``require_library``)."""
    spec = FRONTENDS.get(subject.ens.source.split(" ")[0])
    if spec is None:
        return f"{subject.name}: --require-library: no library model to compare with (the model names no library)"
    try:
        importlib.import_module(spec.name)
        why = f"the file is not {spec.library}'s own model file: verify the model file {spec.library} wrote"  # (tree2mat's IR)
    except ImportError:
        why = f"{spec.library} is not installed here" + (f" ({install_command(EXTRAS[spec.name])})" if spec.name in EXTRAS else "")
    return f"{subject.name}: --require-library: {spec.library}'s own predictions cannot be had: {why}"


def _check_kind(meta: dict[str, str], subject: Subject) -> None:
    """A VerificationError where a tree2mat graph of an attention forest meets a plain model, or
    the other way round (its values would all differ: say why instead)."""
    graph = meta.get("tree2mat.attention")
    forest = attention.as_forest(subject.model)
    if graph is not None and forest is None:
        raise VerificationError(f"the graph is an attention forest's ({graph}); verify it against the attention forest's file (tree2mat attend wrote it)")
    if forest is not None and graph is None and "tree2mat.form" in meta:
        raise VerificationError(f"the graph is a plain forest's; {subject.name} is an attention forest: verify the graph tree2mat convert wrote of it")


def _default_atol(subject: Subject, arithmetic: str) -> float:
    """The default ``atol`` (see :func:`default_atol`; an attention forest's, see
    :func:`tree2mat.attention.graph.default_atol`)."""
    forest = attention.as_forest(subject.model)
    if forest is not None:
        return attention_graph.default_atol(forest, arithmetic)
    return default_atol(subject.ens, arithmetic)


def _raw(onx: onnx.ModelProto, meta: dict[str, str], subject: Subject) -> bool:
    """Whether the graph outputs raw scores (``raw=True``), not the model's predictions."""
    names = {o.name for o in onx.graph.output}
    return meta.get("tree2mat.raw") == "1" or ("variable" in names and subject.ens.task.value != "regression")


def _chunk_rows(meta: dict[str, str], subject: Subject) -> tuple[int, int]:
    """Rows per run of the graph (its form's memory per row within :data:`CHUNK_BYTES`), and
    rows per chunk of data (within that and :data:`DATA_CHUNK_BYTES`)."""
    form = FORMS.get(meta.get("tree2mat.form", ""))
    per_row = form.bytes_per_row(subject.ens) if form else 64 * 1024
    forest = attention.as_forest(subject.model)
    if forest is not None:
        per_row += attention_graph.bytes_per_row(forest, np.dtype(np.float64))
    chunk = max(1, min(65536, CHUNK_BYTES // max(per_row, 1)))
    return chunk, max(1, min(chunk, DATA_CHUNK_BYTES // (8 * subject.n_features)))


