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
graph), :mod:`~tree2mat.verify.checks` (one output against the model's) and
:mod:`~tree2mat.verify.report` (the :class:`Report`); :func:`verify` here puts them together.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from tree2mat import attention, pipelines
from tree2mat.attention import graph as attention_graph
from tree2mat.data import ArrayRows, ColumnRows, Rows, check_header_option, open_rows, read_chunks
from tree2mat.errors import EXTRAS, DataError, LibraryUnavailableError, OptionError, TargetWarning, VerificationError, install_command
from tree2mat.forms import FORMS
from tree2mat.frontends import FRONTENDS
from tree2mat.ir import evaluate
from tree2mat.ir.core import Ensemble, named_codes
from tree2mat.onnx_io import needs_external_data
from tree2mat.runtimes import cuda_refusal
from tree2mat.verify.checks import DEFAULT_RTOL, compare, default_atol, differing_rows, merge, tie_bound, tie_gaps
from tree2mat.verify.report import REPORT_SCHEMA, Mismatch, OutputReport, Report, Tie
from tree2mat.verify.rows import MAX_ROWS, MAX_SYNTHESIZED_BYTES, synthesize
from tree2mat.verify.runners import (
    DEVICES,
    GraphRunner,
    LeafIds,
    _check_graph_input,
    _load_onnx,
    _metadata,
    _with_leaf_output,
    check_operators,
    devices_for,
    forced_walk,
    run_graph,
    runtime_version,
    walk_limit_names,
    walks,
)
from tree2mat.verify.subject import EVALUATOR, Subject, load_subject
from tree2mat.verify.subject import _expected as _expected  # (imported by tests/runtimes/test_runtimes.py)

__all__ = [
    "CHUNK_BYTES", "CROSS_CHECK_ROWS", "DATA_CHUNK_BYTES", "DEFAULT_TIMEOUT_S", "DEFAULT_RTOL", "DEVICES", "MAX_ROWS", "MAX_SYNTHESIZED_BYTES", "REPORT_SCHEMA",
    "GraphRunner", "LeafIds", "Mismatch", "OutputReport", "Report", "Subject", "Tie", "compare", "default_atol", "devices_for",
    "differing_rows", "forced_walk", "load_subject", "merge", "run_graph", "runtime_version", "synthesize", "tie_bound", "tie_gaps",
    "verify", "walk_limit_names", "walks",
]

#: The longest one run of a graph on a chunk of rows may take by default (seconds): a tree2mat
#: graph of the largest models runs a chunk in seconds; a graph that loops ends here.
DEFAULT_TIMEOUT_S = 600.0
#: Rows on which verify asks tree2mat's reference evaluator for the leaves too, where it checks the
#: routing against the library's own (a check of the IR's reading of the model, not of the graph).
CROSS_CHECK_ROWS = 256
#: Memory allowed for one chunk of rows in onnxruntime.
CHUNK_BYTES = 256 * 2**20
#: Memory allowed for one chunk of data rows (as float64), read from a file at a time.
DATA_CHUNK_BYTES = 32 * 2**20


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
    timeout: float | None = DEFAULT_TIMEOUT_S,
    foreign_graph: bool = False,
    header: bool | None = None,
    require_library: bool = False,
    strict: bool = False,
    category_codes: bool = False,
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
    version = runtime_version(runtime, device)
    devices = devices_for(device)
    if (atol is not None and not atol >= 0) or not rtol >= 0:  # also refuses NaN
        raise OptionError("--atol and --rtol must be numbers >= 0")
    if timeout is not None and not 0 < timeout < 2**31:
        raise OptionError(f"--timeout {timeout}: give seconds > 0")
    check_header_option(data, header)
    subject = load_subject(model_or_path, synthesized=data is None)
    if require_library and subject.library is None:
        raise LibraryUnavailableError(_no_library(subject))
    onx, onnx_name = _load_onnx(onnx_model_or_path)
    if onx is onnx_model_or_path:  # (the caller's graph: its inputs may be put in order below)
        onx = onnx.ModelProto()
        onx.CopyFrom(onnx_model_or_path)
    # (a pipeline's graph of one input per column, strings among them: rows read by column name)
    columns = pipelines.graph_columns(onx, subject.pipeline, runtime)
    onx, onnx_name, in_dtype = _load_graph(onx, onnx_name, subject.n_features, runtime, columns is not None)
    check_operators(onx, onnx_name, foreign_graph)
    off_cuda = cuda_refusal(onx) if "cuda" in devices else None
    if off_cuda is not None and device == "cuda":
        raise OptionError(off_cuda)
    if off_cuda is not None:  # (--device all: the CPU's proof, and why not CUDA's)
        devices = [d for d in devices if d != "cuda"]
    source, kinds = _rows_source(subject, data, in_dtype, rows, seed, header, category_codes, columns)
    meta = _metadata(onx)
    _check_kind(meta, subject)
    onx_run, leaf_ids, leaf_tensor, unread = _with_leaf_output(onx, subject.ens, in_dtype)
    chunk, data_rows = _chunk_rows(meta, subject)
    # (a graph that walks small batches another way: every row every way, one report line each)
    graphs, walk_note = walks(onx_run, chunk)
    notes = _notes(meta, subject, unread or (None if leaf_ids is not None else _NO_ROUTING), walk_note)
    if off_cuda is not None:
        notes.append(f"not run on cuda: {off_cuda.removeprefix('--device cuda: ')}")
    if (elsewhere := _target_elsewhere(meta, runtime, devices)) is not None:
        warnings.warn(TargetWarning(elsewhere), stacklevel=2)
        notes.append(elsewhere)
    if (unproven := _below_proven_opset(onx, meta, runtime, subject.ens)) is not None:
        notes.append(unproven)
    atol_v = _default_atol(subject, meta.get("tree2mat.arithmetic", "float64")) if atol is None else atol
    forest = attention.as_forest(subject.model)
    # (an attention forest's labels are no sums of leaves: none of its rows is at a tie)
    ties = tie_bound(subject.ens, meta.get("tree2mat.arithmetic") if "tree2mat.form" in meta else None) if forest is None else 0.0
    checks = _Checks(
        subject, [(_runner(m, dev, runtime, timeout, meta), dev, walk, per_run) for dev in devices for walk, m, per_run in graphs],
        _raw(onx, meta, subject), leaf_ids, leaf_tensor, atol_v, rtol, max_report,
        forest.nearest if forest is not None and atol is None else None,
        attention_graph.value_span(forest) if forest is not None else np.inf, tie_bound=ties,
    )
    reports: dict[tuple[str, str, str], OutputReport] = {}
    done = 0
    # (your data's named-category columns: whether any row holds one of the model's categories)
    unreached = set(dict(subject.ens.category_labels)) if data is not None and subject.pipeline is None else set()
    if progress is not None:  # (the model read, the rows ready: the checks begin)
        progress(0, 0.0)
    for X in read_chunks(source, data_rows):
        X = _data_rows(X, in_dtype) if data is not None and columns is None else X
        for walk, rep in checks.chunk(X, source.names, done):
            _add(reports, walk, max_report, rep)
        unreached -= _reached(subject.ens, X, unreached)
        done += X.shape[0]
        if progress is not None:
            progress(done, source.fraction_read)
    if checks.loose[0]:
        notes.append(
            f"{checks.loose[0] // len(graphs)} rows lie so far from every leaf mean they reach (for the softmax's scale) that "
            "float32 cannot weigh their trees: their tolerance passes the outputs' whole range, so their values are not "
            "checked (their routing is); a --dtype float64 graph checks them"
        )
    if subject.ens.is_oblique:
        notes.append(_oblique_note(subject, checks.near[0]))
    if checks.disagree[0]:
        notes.append(
            f"tree2mat's reference evaluator and {checks.routing_by[0]} put {checks.disagree[0]} of {checks.disagree[1]} "
            f"rows spread over the first {checks.disagree[2]} in different leaves: tree2mat read the model wrong (a bug: please "
            f"report it); the routing above is checked against {checks.routing_by[0]}'s own leaves"
        )
    if checks.why_not:
        notes.append(f"routing checked against tree2mat's reference evaluator, not the library's own leaves: {checks.why_not[0]} (please report it)")
    if data is not None and subject.pipeline is None:
        notes += _category_notes(subject.ens, source, unreached)
    return Report(subject.name, onnx_name, done, kinds or {"data": done}, devices, atol_v, rtol, list(reports.values()), notes,
                  f"{runtime} {version}", strict, ties)


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


def _load_graph(onx: onnx.ModelProto, name: str, n_features: int, runtime: str, columns: bool = False) -> tuple[onnx.ModelProto, str, np.dtype]:
    """The graph (checked, see :func:`_load_onnx`), its name, and the dtype of its input, which
    must take rows of ``n_features``; on ``runtime``. ``columns``: a graph of one input per
    column (:func:`tree2mat.pipelines.graph_columns`), whose numeric inputs' dtype it is."""
    if runtime != "onnxruntime" and needs_external_data(onx):
        raise OptionError(f"--runtime {runtime}: a graph with external data (over 2 GiB) is verified on onnxruntime only")
    if columns:
        numeric = [i.type.tensor_type.elem_type for i in onx.graph.input if i.type.tensor_type.elem_type != onnx.TensorProto.STRING]
        return onx, name, np.dtype(np.float32 if numeric and numeric[0] == onnx.TensorProto.FLOAT else np.float64)
    return onx, name, _check_graph_input(onx, n_features)


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


def _reached(ens: Ensemble, X: np.ndarray, columns: set[int]) -> set[int]:
    """Of ``columns`` (named categories), those where a row of ``X`` holds one of the model's
    categories (a code the model takes as one)."""
    labels = dict(ens.category_labels)
    return {j for j in columns if named_codes(X[:, j], ens.category_codes, len(labels[j]))[1].any()}


def _category_notes(ens: Ensemble, source: Rows, unreached: set[int]) -> list[str]:
    """The report's notes on your data's named-category columns: cells naming none of the
    model's categories, and columns whose categories no row reached (their splits unchecked)."""
    names = list(ens.feature_names) if ens.feature_names else None
    notes = source.unnamed_notes(dict(ens.category_labels), names)
    for j in sorted(unreached):
        what = f"column {j}" + (f" ({names[j]})" if names else "")
        notes.append(f"{what}: no row of the data holds one of the model's categories, so the splits on its categories were not checked")
    return notes


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


def _target_elsewhere(meta: dict[str, str], runtime: str, devices: list[str]) -> str | None:
    """What to say when the graph was built for another runtime (``tree2mat.target``) than the
    one it is proved on (``cuda``: onnxruntime's CUDA provider), else None."""
    target = meta.get("tree2mat.target")
    on = {f"{runtime} ({d})" if runtime == "onnxruntime" else runtime for d in devices}
    proved = {"cuda" if (runtime == "onnxruntime" and d == "cuda") else runtime for d in devices}
    if target is None or target in proved:
        return None
    how = "--device cuda" if target == "cuda" else "--device cpu" if target == runtime else f"--runtime {target}"
    return (
        f"the graph was built for --target {target} but is proved here on {', '.join(sorted(on))}: this proves it there, "
        f"not on {target}; verify with {how} where it will run"
    )


def _below_proven_opset(onx: onnx.ModelProto, meta: dict[str, str], runtime: str, ens: Ensemble) -> str | None:
    """What to say when the graph's form is proven on ``runtime`` for ``ens`` only from a newer
    opset than the graph's (``FormSpec.proven_from``: the runtime matrix saw that runtime misroute
    rows of such models below it), else None. The rows below prove or disprove this graph all the same."""
    spec = FORMS.get(meta.get("tree2mat.form", ""))
    opset = next((o.version for o in onx.opset_import if o.domain in ("", "ai.onnx")), None)
    if spec is None or opset is None or runtime not in spec.proven_on or spec.proven(runtime, opset, ens):
        return None
    floor = spec.floor(runtime, ens)
    assert floor is not None  # (in proven_on, not proven at this opset: a floor holds)
    return (
        f"a {spec.name} graph of opset {opset}: the runtime matrix saw {runtime} misroute rows of {spec.name} graphs of {floor.which} "
        f"below opset {floor.opset} (docs/runtimes.md); for {runtime}, convert with --target {runtime} (or --opset {floor.opset})"
    )


#: The note of a graph that exposes no exit index.
_NO_ROUTING = "the graph exposes no tree2mat leaf ids: routing checked through outputs only"


def _notes(meta: dict[str, str], subject: Subject, unrouted: str | None, walk_note: str | None) -> list[str]:
    """The report's notes: what the comparison is (an approximation, a pipeline, the reference
    evaluator), routing unchecked (``unrouted``: why), the walks unforced."""
    notes = []
    if meta.get("tree2mat.exact") == "0":
        notes.append(
            f"the graph is the {meta.get('tree2mat.form', '?')} form at temperature {meta.get('tree2mat.temperature', '?')}: "
            "an approximation of the model, so mismatches are expected; convert with an exact form to ship"
        )
    if subject.pipeline is not None:
        notes.append(f"a pipeline: {pipelines.describe(subject.pipeline)}'s own predictions compared with the graph's outputs")
    if subject.library is None:
        notes.append("no original library model: compared with tree2mat's reference evaluator")
    if attention.as_forest(subject.model) is not None:
        notes.append(
            "an attention forest: compared with tree2mat.attention's predict (float64); routing exactly, values "
            "within the rounding of the graph's softmax (by default atol x (1 + the row's smallest softmax argument): docs/attention.md)"
        )
    if unrouted:
        notes.append(unrouted)
    if walk_note:
        notes.append(walk_note)
    return notes


@dataclass(frozen=True)
class _Checks:
    """What every chunk of rows is checked on: the graph's runs against the subject's outputs."""

    subject: Subject
    #: (runner, device, walk, rows per run): every device, each with every walk (see :func:`walks`).
    runners: list[tuple[GraphRunner, str, str, int]]
    raw: bool
    #: Leaf ids off the graph's exit index (the output ``leaf_name``), or None: routing unchecked.
    leaf_ids: LeafIds | None
    leaf_name: str
    atol: float
    rtol: float
    max_report: int
    #: ``far(X)`` [N]: each row's atol is ``atol x (1 + far(row))`` (an attention forest's default,
    #: see :func:`tree2mat.attention.graph.default_atol`); None: ``atol`` for every row.
    far: Callable[[np.ndarray], np.ndarray] | None = None
    #: With ``far``: the span of the outputs' values; rows whose atol passes it are counted in
    #: ``loose`` (their values checked to no purpose: a note says how many).
    span: float = np.inf
    loose: list[int] = field(default_factory=lambda: [0])
    #: Rows near an oblique node's hyperplane (see :func:`tree2mat.ir.evaluate.near_hyperplanes`).
    near: list[int] = field(default_factory=lambda: [0])
    #: Label rows that differ where the library's scores lie within this of each other are at
    #: a tie (see :func:`tie_bound`); 0: none is.
    tie_bound: float = 0.0
    #: Whose leaves the routing was checked against (see :meth:`Subject.leaves`), in the order met.
    routing_by: list[str] = field(default_factory=list)
    #: The cross-check (see :meth:`_leaves`): [rows where the library's leaves and the reference
    #: evaluator's differ, rows compared, rows of the chunk they were taken from].
    disagree: list[int] = field(default_factory=lambda: [0, 0, 0])
    #: Why the library's leaves could not be used (:meth:`Subject.leaves`), where its frontend
    #: gives them: then the reference evaluator's, for this chunk and every later one.
    why_not: list[str] = field(default_factory=list)

    def chunk(self, X: np.ndarray, names: dict[int, np.ndarray] | None, offset: int) -> Iterator[tuple[str, OutputReport]]:
        """(walk, report) of each output on each run of the rows ``X``, row ``offset`` of the
        whole rows onwards; ``names``: the category names of the data's columns."""
        expected, X_tree = self.subject.expected(X, self.raw, names)
        ens = self.subject.ens
        leaves_ref = self._leaves(X_tree, names) if self.leaf_ids is not None else None
        near = evaluate.near_hyperplanes(ens, X_tree) if ens.is_oblique else None
        self.near[0] += 0 if near is None else int(np.count_nonzero(near))
        for runner, dev, walk, rows_per_run in self.runners:
            got = runner.run(X, rows_per_run)
            for rep in self._outputs(got, dev, expected, leaves_ref, X, offset, near, names):
                yield walk, rep

    def _leaves(self, X_tree: np.ndarray, names: dict[int, np.ndarray] | None) -> np.ndarray:
        """The leaves the graph's routing must give (:meth:`Subject.leaves`), whose they are
        recorded in ``routing_by``; where they are the library's, on :data:`CROSS_CHECK_ROWS`
        rows of the first chunk the reference evaluator's too, the rows where the two disagree
        counted in ``disagree`` (what the IR read of the model would misroute)."""
        leaves, whose, why_not = self.subject.leaves(X_tree, names, library=not self.why_not)
        if why_not is not None:  # (the library is not asked again: the rest of the rows go the same way)
            self.why_not.append(why_not)
        if not self.routing_by:
            self.routing_by.append(whose)
            if whose != EVALUATOR:  # (rows spread over the chunk: random, threshold, NaN, extreme alike)
                sample = np.unique(np.linspace(0, X_tree.shape[0] - 1, min(X_tree.shape[0], CROSS_CHECK_ROWS)).astype(np.intp))
                differ = (evaluate.apply(self.subject.ens, X_tree[sample]) != leaves[sample]).any(axis=1)
                self.disagree[:] = [int(np.count_nonzero(differ)), int(differ.size), int(X_tree.shape[0])]
        elif whose not in self.routing_by:
            self.routing_by.append(whose)
        return leaves

    def _ties(self, X: np.ndarray, names: dict[int, np.ndarray] | None, expected: np.ndarray, got: np.ndarray) -> Callable[[np.ndarray], np.ndarray] | None:
        """``ties(rows)`` for :func:`compare` of the labels: the library's raw scores of the
        differing rows alone (a second call to the library, on those rows only), their gaps."""
        if self.tie_bound <= 0:
            return None

        def gaps(rows: np.ndarray) -> np.ndarray:
            subset = None if names is None else {j: v[rows] for j, v in names.items()}
            scores = self.subject.expected(X[rows], True, subset)[0].get("variable")
            if scores is None:
                return np.full(rows.size, np.nan)
            return tie_gaps(self.subject.ens, np.asarray(scores).reshape(rows.size, -1), expected[rows], got[rows], self.tie_bound)

        return gaps

    def _outputs(self, got: dict[str, np.ndarray], dev: str, expected: dict[str, np.ndarray], leaves_ref: np.ndarray | None,
                 X: np.ndarray, offset: int, near: np.ndarray | None, names: dict[int, np.ndarray] | None = None) -> Iterator[OutputReport]:
        """The report of each output of one run: the model's outputs, routing (leaf ids) and a
        ``--leaves`` graph's own leaf output."""
        atol: Any = self.atol
        if self.far is not None:
            atol = self.atol * (1.0 + self.far(X))[:, None]
            self.loose[0] += int(np.count_nonzero(atol[:, 0] > self.span)) * (dev == self.runners[0][1])
        for name, exp in expected.items():
            if name not in got:
                yield OutputReport(name, dev, 0, 0, 0.0, 0.0, problem="output missing from the graph")
                continue
            ties = self._ties(X, names, np.asarray(exp), got[name]) if name == "label" else None
            yield compare(name, dev, got[name], np.asarray(exp), X, atol, self.rtol, name == "label", self.max_report, offset, near, ties)
        if leaves_ref is not None and self.leaf_ids is not None:
            try:
                got_leaves = self.leaf_ids(got[self.leaf_name])
            except ValueError as exc:  # an index of the wrong shape: a broken graph
                raise VerificationError(f"the graph's leaf ids: {exc}") from exc
            yield compare("routing", dev, got_leaves, leaves_ref, X, 0, 0, True, self.max_report, offset, near)
        if leaves_ref is not None and "leaves" in got:  # a --leaves graph's own output
            yield compare("leaves", dev, got["leaves"], leaves_ref, X, 0, 0, True, self.max_report, offset, near)


def _oblique_note(subject: Subject, near: int) -> str:
    """What verify did with an oblique model's rows near its hyperplanes."""
    ens = subject.ens
    dtype = np.dtype(ens.source_dtype).name
    return (
        f"oblique nodes: {near} rows lie within {dtype} rounding of a hyperplane on their path (near-boundary); the graph "
        f"sums w . x term by term in {dtype} as the model's definition does, so they are checked exactly like any row; a "
        "mismatch among them is still a mismatch, counted apart as near a hyperplane (a runtime that sums in another order "
        "or fuses multiply-adds)"
    )


def _add(reports: dict[tuple[str, str, str], OutputReport], walk: str, max_report: int, rep: OutputReport) -> None:
    """``rep``, of the graph's ``walk``, merged into ``reports``."""
    key = (rep.device, walk, rep.name)
    reports[key] = merge(reports.get(key), replace(rep, walk=walk), max_report)


def _data_rows(X: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Rows of the user's data (numeric: every :class:`Rows` checks) as the graph takes them
    (beyond float32 is inf, as any cast makes it)."""
    with np.errstate(over="ignore"):
        return np.ascontiguousarray(X, dtype)
