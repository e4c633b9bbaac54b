"""The skeleton every exact form shares: the trees stacked, the input prepared, the exit the form
finds, then leaf values and the head (:func:`build`). A form supplies how the exit is found: an
:class:`_exit.Exit`, or ways chosen per batch that assemble themselves (:class:`_exit.Branches`).
Here too: the matrix forms' grouped products (:func:`exit_by_scores`) and their spec (:func:`dense_form`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx

from tree2mat.contract import exit_metadata
from tree2mat.errors import UnsupportedModelError
from tree2mat.forms import _exit, _heads, _nodes, _stack, _sums
from tree2mat.forms._graph import TREE_MASK, TREE_MASK_SHAPES, GraphBuilder, GraphOptions, tensor_info
from tree2mat.forms._spec import ALL_RUNTIMES, FormSpec, OpsetFloor
from tree2mat.ir.core import Ensemble, Tree

#: ``exit_leaf(g, ens, st, x, opts)``: from the compared input ``x`` to where the rows exit
#: (:class:`_exit.Exit`), or ways to find it chosen per batch, which assemble themselves with
#: the tail after each (:class:`_exit.Branches`: traverse's walks).
ExitLeaf = Callable[[GraphBuilder, Ensemble, _stack.Stacked, _nodes.Compared, GraphOptions], "_exit.Exit | _exit.Branches"]


def padded_matrices(ens: Ensemble, st: _stack.Stacked, matrix: Callable) -> np.ndarray:
    """A per-tree [L, I] matrix of the papers stacked, float32 [T, L, I]; padding leaves and
    padding nodes get 0."""
    out = np.zeros((st.n_trees, st.n_leaves, st.n_internal), np.float32)
    for t, tree in enumerate(ens.trees):
        out[t, : tree.n_leaves, : tree.n_internal] = matrix(tree)
    return out


def dense_constant_bytes(ens: Ensemble) -> int:
    """Bytes of a dense form's large constants (the float32 matrices of the size groups, see
    :func:`padded_work`, and the leaf values: up to four float32 digits, or float64), without
    building them."""
    T, I, L = _stack.padded_sizes(ens)
    return padded_work(ens)[1] * 4 + T * L * ens.n_outputs * 16


def dense_bytes_per_row(ens: Ensemble) -> int:
    """Runtime memory per input row of a dense form's largest intermediates: per node its value,
    test bits and MatMul operand, per leaf its score (12 bytes per node and leaf, a bound)."""
    return padded_work(ens)[0] * 12 + ens.n_trees * ens.n_outputs * 8 + _stack.input_bytes_per_row(ens)


def trees_first(g: GraphBuilder, st: _stack.Stacked, bits: str, hint: str) -> str:
    """A per-node tensor [N, T * I] as [T, N, I] (one matrix per tree for a batched MatMul)."""
    shape = g.const(np.asarray([0, st.n_trees, st.n_internal], np.int64), f"{hint}_shape")
    return g.op("Transpose", [g.op("Reshape", [bits, shape], f"{hint}_rows")], f"{hint}_trees", perm=[1, 0, 2])


#: Element types of the path-matching MatMul, and the largest integer each holds exactly. Only
#: integers pass through it (small integer entries; sums bounded by the depth or the node count).
MATMUL_DTYPES: dict[str, int] = {"float32": 2**24, "float16": 2**11, "int8": 2**31 - 1}


def size_groups(n_internal: np.ndarray, max_groups: int = 4, slack: float = 1.1) -> list[np.ndarray]:
    """The trees (indices, ascending) in at most ``max_groups`` groups of similar size, each to be
    padded to its largest tree: the fewest groups whose padded work, the sum over groups of
    trees x (nodes + 1) x (nodes + 2), is within ``slack`` of the least (a dynamic programme over
    the distinct sizes, largest group first)."""
    sizes = np.maximum(np.asarray(n_internal), 1)
    values = np.unique(sizes)[::-1]
    counts = np.asarray([np.count_nonzero(sizes == v) for v in values])
    K = values.size
    unit = (values + 1.0) * (values + 2.0)
    before = np.concatenate([[0], np.cumsum(counts)])
    best, choice = [np.r_[0.0, np.full(K, np.inf)]], []
    for _ in range(max_groups):  # best[k][j]: the first j sizes in k groups
        cost, arg = np.full(K + 1, np.inf), np.zeros(K + 1, np.int64)
        for j in range(1, K + 1):
            c = best[-1][:j] + (before[j] - before[:j]) * unit[:j]
            arg[j] = int(np.argmin(c))
            cost[j] = c[arg[j]]
        best.append(cost)
        choice.append(arg)
    final = np.asarray([b[K] for b in best[1:]])
    n_groups = int(np.flatnonzero(final <= slack * final.min())[0]) + 1
    groups, j = [], K
    for k in range(n_groups - 1, -1, -1):
        i = int(choice[k][j])
        groups.append(np.flatnonzero(np.isin(sizes, values[i:j])))
        j = i
    return groups[::-1]


def padded_groups(ens: Ensemble) -> list[tuple[np.ndarray, int, int]]:
    """The trees in :func:`size_groups`, each group with the node and leaf counts its trees are
    padded to (at least one node)."""
    out = []
    for trees in size_groups(np.asarray([t.n_internal for t in ens.trees])):
        n_nodes = max(1, max(ens.trees[t].n_internal for t in trees))
        out.append((trees, n_nodes, max(ens.trees[t].n_leaves for t in trees)))
    return out


def padded_work(ens: Ensemble) -> tuple[int, int]:
    """The matrix forms' work per row with the trees padded in :func:`padded_groups`: nodes and
    leaves (sum over groups of T_g (I_g + L_g)) and matrix entries (sum of T_g I_g L_g)."""
    groups = padded_groups(ens)
    return sum(t.size * (i + l) for t, i, l in groups), sum(t.size * i * l for t, i, l in groups)


@dataclass(frozen=True)
class DenseCost:
    """A matrix form's cost model (microseconds; benchmarks/form_speed.py and latency_fit.py fit
    them): ``per_node_us * nodes + per_product_us * products`` per row (:func:`padded_work`);
    ``call``: one row's run, ``a + b * nodes + c * products + d * trees``."""

    per_node_us: float
    per_product_us: float
    call: tuple[float, float, float, float]

    def us_per_row(self, ens: Ensemble) -> float:
        nodes, products = padded_work(ens)
        return self.per_node_us * nodes + self.per_product_us * products

    def call_us(self, ens: Ensemble) -> float:
        nodes, products = padded_work(ens)
        a, b, c, d = self.call
        return a + b * nodes + c * products + d * ens.n_trees


def dense_form(
    name: str, build: Callable[[Ensemble, GraphOptions], onnx.ModelProto], summary: str, cost: DenseCost,
    proven_from: tuple[OpsetFloor, ...] = (), hummingbird: tuple[str, ...] = (),
) -> FormSpec:
    """The spec of a matrix form: dense [T, I, L] constants, a MatMul in any of MATMUL_DTYPES,
    the exit of :func:`exit_layout`, exact on every runtime of the matrix (from the opsets of
    ``proven_from``, see :attr:`FormSpec.proven_from`), and the ``cost`` model; ``hummingbird``:
    see :attr:`FormSpec.hummingbird`."""
    return FormSpec(
        name=name, build=build, exact=True, summary=summary,
        constant_bytes=dense_constant_bytes, bytes_per_row=dense_bytes_per_row, us_per_row=cost.us_per_row, call_us=cost.call_us,
        matmul=tuple(MATMUL_DTYPES), exit_layout=exit_layout, proven_on=ALL_RUNTIMES, proven_from=proven_from,
        hummingbird=hummingbird,
    )


#: ``tree_scores(tree)``: a tree's score matrix [L, I] and bias [L] (small integers).
TreeScores = Callable[[Tree], tuple[np.ndarray, np.ndarray]]


#: A group of trees padded together (:func:`padded_groups`): the trees, the nodes and the
#: matrix [T_g, L_g, I_g (+ 1: the bias column)] of their scores, and the bias [T_g, L_g].
ScoreGroup = tuple[np.ndarray, int, np.ndarray, np.ndarray]


def _score_groups(ens: Ensemble, tests: _nodes.NodeTests, tree_scores: TreeScores, pad_bias: float) -> tuple[list[ScoreGroup], bool]:
    """Each group's score matrix and bias (see :func:`exit_by_scores`), and whether any tree has a
    bias (then the swap nodes' columns are negated, their sum added to the bias, and the bias is
    the matrix's last column)."""
    groups = []
    for trees, n_nodes, n_leaves in padded_groups(ens):
        m = np.zeros((trees.size, n_leaves, n_nodes), np.float32)
        b = np.full((trees.size, n_leaves), pad_bias, np.float32)
        for k, t in enumerate(trees):
            tree = ens.trees[t]
            m[k, : tree.n_leaves, : tree.n_internal], b[k, : tree.n_leaves] = tree_scores(tree)
        groups.append((trees, n_nodes, m, b))
    with_bias = any(np.any(b) for *_, b in groups)
    if with_bias:
        for k, (trees, n_nodes, m, b) in enumerate(groups):
            swap = tests.swap[trees, :n_nodes]
            b = b + np.einsum("tli,ti->tl", m, swap.astype(np.float32))
            groups[k] = (trees, n_nodes, np.concatenate([np.where(swap[:, None, :], -m, m), b[:, :, None]], axis=2), b)
    return groups, with_bias


def _check_matmul(groups: list[ScoreGroup], matmul: str) -> None:
    """Refuse a ``matmul`` type whose entries or partial sums cannot hold the groups' exactly."""
    entry = max(int(np.abs(m).max()) for _, _, m, _ in groups)
    if matmul == "int8" and entry > 127:
        raise UnsupportedModelError(
            f"--matmul int8 holds matrix entries up to 127; this model's reach {entry}; use --matmul float32"
        )
    bound = max(int(np.abs(m).sum(axis=2).max()) for _, _, m, _ in groups)
    if bound > MATMUL_DTYPES[matmul]:
        raise UnsupportedModelError(
            f"--matmul {matmul} holds integers up to {MATMUL_DTYPES[matmul]} exactly; this model's "
            f"path sums reach {bound}; use --matmul float32 or int8"
        )


def exit_by_scores(
    g: GraphBuilder, ens: Ensemble, st: _stack.Stacked, x: _nodes.Compared, tree_scores: TreeScores, pad_bias: float,
    matmul: str, hint: str,
) -> _exit.Exit:
    """The exit leaf [T, N] (int64) of a matrix form: per tree the first maximum over the leaves
    of ``matrix r + bias`` (``tree_scores``), where r [I, N] is 1 where the row goes right at the
    node, else 0; padding leaves score ``pad_bias``, padding nodes are columns of 0. The MatMul
    runs in ``matmul``: float32, float16 (MatMul), or int8 (MatMulInteger, int32 accumulation);
    refused where the partial sums can pass the integers ``matmul`` holds exactly.

    Trees of similar size are padded together (:func:`padded_groups`): one batched MatMul per
    group, [T_g, L_g, I_g] x [T_g, I_g, N], not every tree padded to the largest. Without a bias,
    r is the tests (:func:`_nodes.test_bits`) with the swap nodes' negated (one ``Xor``). With
    one, r = 1 - test at swap nodes is folded into the constants (those columns negated, their
    sum added to the bias), and the bias becomes a last column of the matrix against an
    always-true row of r: no ``Add`` over the [T, L, N] scores. int8 runs int8 x int8 (the one
    MatMulInteger the CUDA provider has; onnxruntime's CPU is faster at u8 x s8, but a graph must
    run everywhere)."""
    tests = _nodes.node_tests(ens, st)
    groups, with_bias = _score_groups(ens, tests, tree_scores, pad_bias)
    _check_matmul(groups, matmul)
    bits = _nodes.test_bits(g, ens, st, x, tests, [(trees, n) for trees, n, *_ in groups], right=not with_bias, ones=with_bias)
    leaves = []
    for k, ((_, _, m, _), r) in enumerate(zip(groups, bits)):
        name = f"{hint}{k}"
        # Group k's matrix has k leading axes of length 1 (MatMul broadcasts them), so no two
        # groups' scores, nor their ArgMax, have one rank. onnxruntime-web's JSEP (the WebGPU
        # backend of its default import) caches an ArgMax shader by its attributes and input
        # rank, but the shader holds the reduced axis' length: a group's ArgMax ran with the
        # shader of an earlier group of other leaves and misrouted rows (docs/runtimes.md;
        # benchmarks/RESULTS.md, "Measurements cited by the code"). Each group but the first pays
        # a Squeeze, no copy.
        ranked = m.reshape((1,) * k + m.shape)
        if matmul == "float32":
            r = g.op("Cast", [r], f"{name}_r", to=onnx.TensorProto.FLOAT)
            scores = g.op("MatMul", [g.const(ranked.astype(np.float32), f"{name}_matrix"), r], f"{name}_scores")
        else:  # scores as float32 for ArgMax (exact: integers below 2**24)
            if matmul == "float16":
                r = g.op("Cast", [r], f"{name}_r", to=onnx.TensorProto.FLOAT16)
                product = g.op("MatMul", [g.const(ranked.astype(np.float16), f"{name}_matrix"), r], f"{name}_product")
            else:
                r = g.op("Cast", [r], f"{name}_r", to=onnx.TensorProto.INT8)
                product = g.op("MatMulInteger", [g.const(ranked.astype(np.int8), f"{name}_matrix"), r], f"{name}_product")
            scores = g.op("Cast", [product], f"{name}_scores", to=onnx.TensorProto.FLOAT)
        exit = g.op("ArgMax", [scores], f"{name}_exit" + "_ranked" * bool(k), axis=k + 1, keepdims=0)
        leaves.append(g.op("Squeeze", [exit, g.const(np.arange(k, dtype=np.int64), f"{name}_exit_axes")], f"{name}_exit") if k else exit)
    # The groups' trees in their order: leaf values are laid out so, no reordering.
    index = leaves[0] if len(leaves) == 1 else g.op("Concat", leaves, "exit_grouped", axis=0)
    return _exit.Exit(index, *exit_layout(ens))


def exit_layout(ens: Ensemble, dtype: np.dtype | None = None) -> tuple[np.ndarray, np.ndarray, np.dtype]:
    """The matrix forms' exit (see :class:`_exit.Exit`): leaf ids (int64, ArgMax's), the trees
    in their size groups' order (:func:`padded_groups`); the same for every input ``dtype``."""
    T, _, L = _stack.padded_sizes(ens)
    order = np.concatenate([trees for trees, *_ in padded_groups(ens)]).astype(np.int64)
    return order, np.broadcast_to(np.arange(L, dtype=np.int64), (T, L)), np.dtype(np.int64)


def build(
    ens: Ensemble, opts: GraphOptions, name: str, exit_leaf: ExitLeaf,
    constant_bytes: Callable[[Ensemble], int] = dense_constant_bytes, layout: str = "dense",
    constant_limit: int | None = None, size_hint: str = _stack.DENSE_SIZE_HINT,
) -> onnx.ModelProto:
    _stack.check_size(f"{layout} {name} layout", constant_bytes(ens), constant_limit, size_hint)
    st = _stack.stack(ens, opts.dtype)
    g = GraphBuilder(opts.opset)
    x = _nodes.compared_input(g, ens, opts)
    found = exit_leaf(g, ens, st, x, opts)
    internal = _sums.internal_dtype(ens, opts)

    def tail(b: GraphBuilder, exit: _exit.Exit) -> tuple[list[onnx.ValueInfoProto], np.dtype]:
        if opts.head is not None:  # another model's head on the leaves (no leaf values, no margin)
            outs = opts.head(b, exit)
            return outs + exit_outputs(b, ens, opts, exit), opts.dtype
        m = _sums.leaf_margin(b, ens, st, exit, x, internal, opts.tree_mask)
        return outputs(b, ens, m, opts, exit), np.dtype(m.dtype)

    if isinstance(found, _exit.Exit):
        outs, dtype = tail(g, found)
        metadata = exit_metadata(found.index, found.exit_map)
    else:  # (ways chosen per batch, each with the tail after it: the form assembles them)
        outs, dtype, metadata = found.assemble(g, ens, tail)
    return model(g, ens, outs, dtype, opts, f"tree2mat {name} form of {ens.source}", metadata)


def outputs(g: GraphBuilder, ens: Ensemble, m: _heads.Margin, opts: GraphOptions, exit: _exit.Exit | None = None) -> list[onnx.ValueInfoProto]:
    """Every form's tail: from the margin ``m`` to the graph contract's outputs (and, given the
    ``exit``, the outputs of :func:`exit_outputs`); their value infos."""
    return _heads.emit(g, ens, m, opts) + ([] if exit is None else exit_outputs(g, ens, opts, exit))


def exit_outputs(g: GraphBuilder, ens: Ensemble, opts: GraphOptions, exit: _exit.Exit) -> list[onnx.ValueInfoProto]:
    """The outputs read off the exit as ``opts`` asks: ``leaves`` [N, T] (``--leaves``) and
    ``proximity`` [N, R] (``--proximity``); their value infos."""
    outs = []
    if opts.leaves:
        _exit.leaves_output(g, exit)
        outs.append(tensor_info("leaves", np.int64, ["N", ens.n_trees]))
    if opts.proximity is not None:
        _exit.proximity_output(g, exit, opts.proximity, opts.dtype)
        outs.append(tensor_info("proximity", opts.dtype, ["N", int(opts.proximity.shape[0])]))
    return outs


def model(
    g: GraphBuilder, ens: Ensemble, outs: list[onnx.ValueInfoProto], arithmetic: np.dtype, opts: GraphOptions, doc: str,
    metadata: dict[str, str] | None = None,
) -> onnx.ModelProto:
    """The model of ``g``'s graph, its input (and tree mask, :attr:`GraphOptions.tree_mask`) and
    the ``outs`` (``arithmetic``: the margin's dtype)."""
    metadata = {**(metadata or {}), "tree2mat.arithmetic": np.dtype(arithmetic).name}
    inputs = [tensor_info("input", opts.dtype, ["N", ens.n_features])]
    if opts.tree_mask is not None:
        inputs.append(tensor_info(TREE_MASK, np.bool_, TREE_MASK_SHAPES[opts.tree_mask](ens.n_trees)))
        metadata["tree2mat.tree_mask"] = opts.tree_mask
    return g.model(inputs, outs, doc=doc, metadata=metadata)


def finish(
    g: GraphBuilder, ens: Ensemble, m: _heads.Margin, opts: GraphOptions, doc: str,
    metadata: dict[str, str] | None = None, exit: _exit.Exit | None = None,
) -> onnx.ModelProto:
    """From the margin ``m`` to the model (:func:`outputs`, :func:`model`)."""
    return model(g, ens, outputs(g, ens, m, opts, exit), np.dtype(m.dtype), opts, doc, metadata)
