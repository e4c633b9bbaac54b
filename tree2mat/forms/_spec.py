"""What a form is to the rest of tree2mat: :class:`FormSpec`. Each form's module ends in its spec;
``tree2mat.forms.FORMS`` lists them, and the CLI's choices, ``--form auto``, ``inspect``, ``bench``,
``verify`` and the README's support table all read the specs, never a form's name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx

from tree2mat.forms import _nodes, _stack
from tree2mat.forms._graph import GraphOptions
from tree2mat.ir.core import Ensemble

#: The runtimes of ``verify --runtime`` (tree2mat.runtimes.RUNTIMES): the runtime matrix
#: (tests/runtimes/test_runtimes.py, make test-webgpu) checks an exact form on each runtime its spec
#: names in ``proven_on``.
ALL_RUNTIMES = ("onnxruntime", "reference", "openvino", "tract", "iree", "onnxruntime-node", "onnxruntime-web", "webgpu", "webgpu-jsep")


def dense_constant_limit() -> int:
    """The largest constants of a form whose matrices are dense [T, I, L] (impractical long
    before protobuf's limit)."""
    return _stack.MAX_INITIALIZER_BYTES


@dataclass(frozen=True)
class OpsetFloor:
    """A runtime that runs a form's graphs of some models exactly only from an opset on: the
    runtime matrix saw it misroute rows of such graphs below it."""

    runtime: str
    opset: int
    #: Whether the floor holds for a model (those like the ones seen misrouted).
    applies: Callable[[Ensemble], bool]
    #: Those models, in words (the support table).
    which: str


@dataclass(frozen=True)
class FormSpec:
    """A form, whole."""

    name: str
    #: ``build(ens, options)``: the ONNX model (tree2mat.build adds the metadata and checks it).
    build: Callable[[Ensemble, GraphOptions], onnx.ModelProto]
    #: Routes every float32 input as the library does (else an approximation, e.g. the soft forms).
    exact: bool
    #: One line for the CLI's help and the README's support table.
    summary: str
    #: Bytes of the graph's constants for ``ens``, and of its intermediates per row: ``--max-memory``
    #: and ``--form auto`` budget with them.
    constant_bytes: Callable[[Ensemble], int]
    bytes_per_row: Callable[[Ensemble], int]
    #: The largest constants the form builds (read when asked: tests lower the limits).
    constant_limit: Callable[[], int] = dense_constant_limit
    #: Estimated CPU time per row, microseconds (constants fitted by benchmarks/form_speed.py):
    #: the exact forms that have one are ``--form auto``'s candidates.
    us_per_row: Callable[[Ensemble], float] | None = None
    #: Estimated CPU time of one run of one row, microseconds (the operators' overhead, which a
    #: large batch spreads over its rows): ``--batch-hint`` weighs it (a run of b rows: ``call_us
    #: + (b - 1) us_per_row``). None: ``us_per_row`` (no overhead known: as at any batch).
    call_us: Callable[[Ensemble], float] | None = None
    #: Estimated CPU time of one run of b rows, microseconds, where the form knows better than
    #: ``call_us + (b - 1) us_per_row`` (traverse: the walk its graph takes at b rows).
    run_us: Callable[[Ensemble, int], float] | None = None
    #: Whether ``us_per_row`` and ``call_us`` take the graph's options as a keyword (``opts=``, a
    #: :class:`GraphOptions`; None: the defaults), for a form whose graph, and so its cost,
    #: changes with them (``treeensemble``: its node sums or writes leaf numbers).
    cost_takes_options: bool = False
    #: Element types its path-matching MatMul can run in (``--matmul``); exact forms only.
    matmul: tuple[str, ...] = ("float32",)
    #: Exact forms: ``exit_layout(ens, dtype)``, the ``(order, slots, index_dtype)`` of the exit
    #: index of the graph of input ``dtype`` (see :class:`_exit.Exit`). A graph carries its own
    #: (``tree2mat.exit_map``, :mod:`tree2mat.contract`); ``verify`` reads this only for a graph
    #: written before that contract.
    exit_layout: Callable[[Ensemble, np.dtype], tuple[np.ndarray, np.ndarray, np.dtype]] | None = None
    #: Exact forms: the runtimes whose runs of its graphs the runtime matrix checks against the
    #: libraries (names of tree2mat.runtimes.RUNTIMES).
    proven_on: tuple[str, ...] = ()
    #: Runtimes of ``proven_on`` that run the form's graphs of some models exactly only from an
    #: opset on (none today; ``sign`` on webgpu-jsep until 2026-11-29, docs/runtimes.md). auto,
    #: ``--target`` and verify read it through :meth:`proven`.
    proven_from: tuple[OpsetFloor, ...] = ()
    #: Exact forms: ``node_tests(ens, st)``, the tests its graph reads on the augmented input
    #: (``inspect --plan`` shows them); None where the graph tests other columns (``treeensemble``:
    #: its node's own, NaN kept).
    node_tests: Callable[[Ensemble, _stack.Stacked], _nodes.NodeTests] | None = _nodes.node_tests
    #: onnxruntime's devices that run every operator of its graphs that touches rows (``cuda``:
    #: the CUDA provider has a kernel for each; ``bench --device cuda`` times only such graphs).
    devices: tuple[str, ...] = ("cpu", "cuda")
    #: Hummingbird's tree strategies (``tree2mat.peers.HUMMINGBIRD_STRATEGIES``) whose tables and
    #: intermediates ``bench`` estimates as this form's (Hummingbird documents neither): GEMM
    #: holds the dense matrices ``bitvector`` does, the traversals walk nodes as ``traverse``.
    hummingbird: tuple[str, ...] = ()
    #: ``(opset, what runs it)``: the opset from which the form's graph is cheaper (its estimates,
    #: which take the options, say by how much) and the runtimes that load such a graph;
    #: ``--target`` with no ``--opset`` tries it (``treeensemble``: its node sums only in
    #: ai.onnx.ml 5's ``TreeEnsemble``).
    faster_from: tuple[int, str] | None = None

    def floor(self, runtime: str, ens: Ensemble | None = None) -> OpsetFloor | None:
        """The highest of ``proven_from``'s floors on ``runtime`` that holds for ``ens`` (None:
        for any model), or None."""
        held = [f for f in self.proven_from if f.runtime == runtime and (ens is None or f.applies(ens))]
        return max(held, key=lambda f: f.opset) if held else None

    def lowest_opset(self, runtime: str, ens: Ensemble | None = None) -> int:
        """The lowest opset whose graphs of this form of ``ens`` (None: of any model) are proven
        on ``runtime`` (0: any)."""
        floor = self.floor(runtime, ens)
        return 0 if floor is None else floor.opset

    def proven(self, runtime: str, opset: int, ens: Ensemble | None = None) -> bool:
        """Whether the runtime matrix proved this form's graphs of ``opset`` of ``ens`` (None:
        of any model) exact on ``runtime``."""
        return self.exact and runtime in self.proven_on and opset >= self.lowest_opset(runtime, ens)
