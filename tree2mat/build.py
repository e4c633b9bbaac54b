"""The core of a conversion: :class:`ConvertOptions` (every option, checked once, the form resolved
to its :class:`~tree2mat.forms.FormSpec`) and :func:`build_graph` (an IR to a checked ONNX graph
with tree2mat's metadata). ``convert`` and the pipeline converter both build through here."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import onnx

from tree2mat.contract import graph_metadata, proximity_metadata
from tree2mat.errors import OptionError
from tree2mat.forms import AUTO, DEFAULT_OPSET, FORMS, MIN_OPSET, NEWEST_OPSET, FormSpec, GraphOptions, auto, check_form
from tree2mat.forms._exit import MAX_PROXIMITY_PAIRS
from tree2mat.forms._graph import TREE_MASK_SHAPES, GraphBuilder
from tree2mat.ir import evaluate
from tree2mat.ir.core import Ensemble
from tree2mat.onnx_io import needs_external_data

DTYPES: dict[str, np.dtype] = {"float32": np.dtype(np.float32), "float64": np.dtype(np.float64)}

Progress = Callable[[str], None]
#: An exact form's head in place of the model's (:attr:`GraphOptions.head`).
Head = Callable[[GraphBuilder, Any], list[onnx.ValueInfoProto]]


def quiet(_: str) -> None:
    pass


@dataclass(frozen=True)
class ConvertOptions:
    """What a conversion is asked for, checked (make one with :meth:`parse`).

    ``form``: the form's spec, or None for auto (the fastest exact form within ``max_memory``).
    ``dtype`` / ``opset``: None for the default of what is converted (a tree model: float32 and
    ``DEFAULT_OPSET``, the newest opset the oldest tested onnxruntime runs; a pipeline: float64 and
    that opset, or the newest skl2onnx converts if older). ``target``: the runtime the graph is for (``auto.TARGETS``; None: any, the
    portable forms). ``tree_weights``: an attention forest's graph also outputs each row's tree
    weights (:mod:`tree2mat.attention.graph`; any other model refuses it). ``tree_mask``: the
    graph takes a second input that drops trees (:attr:`GraphOptions.tree_mask`: ``request`` or
    ``rows``; None: none). ``proximity``: the reference rows [R, F] of a ``proximity`` output (an
    exact form's; see :func:`proximity_leaves`), as ``convert`` read them (a number array), or None."""

    form: FormSpec | None = None
    dtype: str | None = None
    opset: int | None = None
    raw: bool = False
    leaves: bool = False
    temperature: float | None = None
    matmul: str = "float32"
    max_memory: int = auto.DEFAULT_MAX_MEMORY
    batch_hint: int = auto.DEFAULT_BATCH_HINT
    target: str | None = None
    tree_weights: bool = False
    tree_mask: str | None = None
    proximity: np.ndarray | None = field(default=None, compare=False)

    @classmethod
    def parse(
        cls, form: str = AUTO, *, dtype: str | None = None, opset: int | None = None, raw: bool = False,
        leaves: bool = False, temperature: float | None = None, matmul: str = "float32", max_memory: int | None = None,
        batch_hint: int | None = None, target: str | None = None, tree_weights: bool = False, tree_mask: str | None = None,
        proximity: bool = False,
    ) -> ConvertOptions:
        """The options of ``tree2mat.convert`` (or the CLI), each checked: an OptionError names
        the first that is wrong. ``proximity``: whether reference rows are given (``convert``
        reads them once the model is read, and puts them in :attr:`proximity`)."""
        budget = auto.DEFAULT_MAX_MEMORY if max_memory is None else max_memory
        if not budget > 0:
            raise OptionError(f"--max-memory must be positive, got {budget}")
        spec = None if form == AUTO else check_form(form)
        auto.check_target(target)
        if spec is not None and target is not None and not spec.exact:
            raise OptionError(f"--target picks among the exact forms; {spec.name} is an approximation on every runtime: leave out --target")
        if spec is not None and target is not None and not auto.runs_on(spec, target):
            there = ", ".join(s.name for s in FORMS.values() if auto.runs_on(s, target))
            raise OptionError(
                f"--form {spec.name} is not proven exact on {target} (the runtime matrix); the forms that are: {there} "
                "(or leave out --form: --target picks the fastest of them)"
            )
        dtype = dtype or None  # (an empty --dtype is the default, as it always was)
        if spec is None and (temperature is not None or matmul != "float32"):
            raise OptionError("--temperature and --matmul need an explicit --form (auto picks an exact float32 form)")
        if spec is not None and batch_hint is not None:
            raise OptionError(f"--batch-hint tells --form auto which form to pick; with --form {spec.name} it would change nothing")
        hint = auto.check_batch_hint(batch_hint)
        if spec is not None and temperature is not None:
            if spec.exact:
                soft = ", ".join(n for n, f in FORMS.items() if not f.exact)
                raise OptionError(f"--temperature applies to the soft forms ({soft}), not to the exact form {spec.name}")
            if not (np.isfinite(temperature) and temperature > 0):
                raise OptionError(f"--temperature must be a finite number > 0, got {temperature}")
        if spec is not None and (leaves or proximity) and not spec.exact:
            raise OptionError(f"--{'leaves' if leaves else 'proximity'} needs an exact form: the {spec.name} form has no exit leaf")
        if spec is not None and matmul not in spec.matmul:
            which = ", ".join(n for n, f in FORMS.items() if len(f.matmul) > 1)
            raise OptionError(
                f"--matmul {matmul} is not available for the form {spec.name}; it takes {', '.join(spec.matmul)}"
                f" (reduced precision: the forms {which})"
            )
        if dtype is not None and dtype not in DTYPES:
            raise OptionError(f"dtype {dtype!r} is not supported; choose one of {', '.join(DTYPES)}")
        if opset is not None and not MIN_OPSET <= opset <= NEWEST_OPSET:
            raise OptionError(
                f"opset {opset} is not supported; choose {MIN_OPSET} to {NEWEST_OPSET} "
                "(the newest the pinned onnxruntime runs)"
            )
        if target == "cuda" and matmul == "int8":
            raise OptionError("--matmul int8 is refused on --target cuda: onnxruntime's CUDA provider fails its products at some batch sizes")
        tree_mask = tree_mask or None
        if tree_mask is not None and tree_mask not in TREE_MASK_SHAPES:
            raise OptionError(f"--tree-mask {tree_mask!r}: choose request (one mask of the trees for all rows) or rows (one per row)")
        return cls(spec, dtype, opset, raw, leaves, temperature, matmul, budget, hint, target, tree_weights, tree_mask)


def build_graph(
    ens: Ensemble, options: ConvertOptions, progress: Progress = quiet, head: Head | None = None, ml_opset: int = GraphOptions.ml_opset,
) -> onnx.ModelProto:
    """The checked ONNX graph of ``ens`` under ``options`` (auto resolved here, an explicit form
    refused when over the memory budget), with tree2mat's metadata (``tree2mat.*``). ``head``:
    an exact form's head in place of the model's (see :attr:`GraphOptions.head`); ``ml_opset``:
    the newest ai.onnx.ml version the graph may import."""
    reason = None
    opts = GraphOptions(
        dtype=DTYPES[options.dtype or "float32"], opset=DEFAULT_OPSET if options.opset is None else options.opset,
        raw=options.raw, leaves=options.leaves, temperature=options.temperature, matmul=options.matmul, head=head,
        ml_opset=ml_opset, tree_mask=options.tree_mask,
    )
    rows = None
    if options.proximity is not None:
        rows = np.ascontiguousarray(options.proximity, opts.dtype)  # (as the graph takes a row)
        opts = replace(opts, proximity=proximity_leaves(ens, rows))
    if options.form is None:
        choice = auto.choose(ens, options.max_memory, options.batch_hint, options.target, opts)
        if options.opset is None and options.target is not None:
            opts, choice = _target_opset(ens, options, opts, choice)
        spec, reason = FORMS[choice.form], choice.reason
    else:
        spec = options.form
        auto.check_budget(spec, ens, options.max_memory, options.target)
        if options.target is not None and (lowest := auto.lowest_opset(spec, options.target, ens)) > opts.opset:
            if options.opset is not None:
                raise OptionError(
                    f"--form {spec.name} is proven exact on {options.target} for this model only from opset {lowest} (the runtime "
                    f"matrix: docs/runtimes.md), not at --opset {options.opset}; leave out --opset (--target then builds at that opset)"
                )
            progress(f"opset {lowest}, not the default {opts.opset}: {spec.name} graphs of this model are proven on {options.target} only from opset {lowest}")
            opts = replace(opts, opset=lowest)
    progress(f"building the {spec.name} graph of {ens.n_trees} trees")
    model = spec.build(ens, opts)
    stamp(model, {
        "tree2mat.form": spec.name,
        "tree2mat.source": ens.source,
        "tree2mat.n_trees": str(ens.n_trees),
        "tree2mat.n_features": str(ens.n_features),
        "tree2mat.raw": str(int(opts.raw)),
        "tree2mat.exact": str(int(spec.exact)),
        **({"tree2mat.matmul": opts.matmul} if opts.matmul != "float32" else {}),
        **({"tree2mat.target": options.target} if options.target is not None else {}),
        **({"tree2mat.auto": reason, "tree2mat.batch_hint": str(options.batch_hint)} if reason is not None else {}),
        **({"tree2mat.categories": json.dumps(ens.category_table())} if ens.category_labels else {}),
        **graph_metadata(ens),
        **(proximity_metadata(rows) if rows is not None else {}),
    })
    return checked(model, progress)


def proximity_leaves(ens: Ensemble, rows: np.ndarray) -> np.ndarray:
    """The reference rows' leaf ids [R, T] (int64, the IR's numbering: the reference evaluator's),
    for a ``proximity`` output; an OptionError where the rows are not [R, F] of the model's F
    features, or R x T passes :data:`MAX_PROXIMITY_PAIRS`."""
    if rows.ndim != 2 or rows.shape[0] == 0 or rows.shape[1] != ens.n_features:
        raise OptionError(
            f"--proximity: the reference rows have shape {list(rows.shape)}; the model takes rows of {ens.n_features} features "
            f"([R, {ens.n_features}], R >= 1)"
        )
    pairs = rows.shape[0] * ens.n_trees
    if pairs > MAX_PROXIMITY_PAIRS:
        raise OptionError(
            f"--proximity: {rows.shape[0]:,} reference rows x {ens.n_trees:,} trees = {pairs:,} pairs, past {MAX_PROXIMITY_PAIRS:,}: "
            "the graph compares every row with every reference row in every tree (5 bytes a pair per row it scores, and an "
            "8-byte leaf id a pair in the file); give a sample of the reference rows, or split them over several graphs"
        )
    with np.errstate(over="ignore", invalid="ignore"):
        return np.ascontiguousarray(evaluate.apply(ens, rows), np.int64)


def _target_opset(ens: Ensemble, options: ConvertOptions, opts: GraphOptions, choice: auto.Choice) -> tuple[GraphOptions, auto.Choice]:
    """auto's pick for a ``--target`` with no ``--opset``: the default opset's (``opts``,
    ``choice``), or a newer opset's where the form estimated fastest there is faster, its reason
    saying so: an opset from which a form is cheaper (``FormSpec.faster_from``), or from which a
    form is proven on the target (``FormSpec.proven_from``). The default graph (no
    target) stays at the default opset, which onnxruntime 1.16 loads."""
    floors = {auto.lowest_opset(spec, options.target, ens) for spec in FORMS.values() if spec.exact}
    best_opts, best = opts, choice
    now = fastest = min(e.us_per_row for e in choice.estimates if e.fits)
    faster = {spec.faster_from[0]: spec.faster_from[1] for spec in FORMS.values() if spec.faster_from is not None}
    for opset in sorted(o for o in {*faster, *floors} if o > opts.opset):
        newer = replace(opts, opset=opset)
        raised = auto.choose(ens, options.max_memory, options.batch_hint, options.target, newer)
        if (then := min(e.us_per_row for e in raised.estimates if e.fits)) < fastest:
            best_opts, best, fastest = newer, raised, then
    if best is choice:
        return opts, choice
    lowest = auto.lowest_opset(FORMS[best.form], options.target, ens)
    needs = (
        f"{best.form} graphs of this model are proven on {options.target} only from opset {lowest}" if lowest == best_opts.opset
        else f"it needs {faster.get(best_opts.opset, f'a runtime of opset {best_opts.opset}')} (--opset {DEFAULT_OPSET} for older)"
    )
    return best_opts, replace(best, reason=(
        f"{best.reason}; opset {best_opts.opset}, not the default {DEFAULT_OPSET}: estimated {fastest:.3g} us per row against {now:.3g} "
        f"at opset {DEFAULT_OPSET}; {needs}"
    ))


def checked(model: onnx.ModelProto, progress: Progress = quiet) -> onnx.ModelProto:
    """``model`` after onnx's full check (a graph too large for an in-memory check is checked
    by :func:`tree2mat.onnx_io.save`, from the file)."""
    if not needs_external_data(model):
        progress("checking the graph")
        onnx.checker.check_model(model, full_check=True)
    return model


def stamp(model: onnx.ModelProto, meta: dict[str, str]) -> None:
    """Add ``meta`` to the model's metadata, in key order."""
    for key in sorted(meta):
        entry = model.metadata_props.add()
        entry.key, entry.value = key, meta[key]
