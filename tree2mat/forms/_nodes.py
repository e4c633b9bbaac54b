"""The node tests, the exact forms' second pass: which nodes send a row right.

Tests follow the exactness rules (docs/exactness.md) and the graph contract: every node is one
``value > threshold`` with a finite threshold on a column of an augmented input in which no cell
is NaN (:func:`node_tests`: x with missing cells at -max or +max by where the node sends them,
0/1 flags of missing, +inf or -inf cells for the thresholds at the ends of the range, the same on
x with 0 counted as missing for missing-type Zero, one column per categorical node), thresholds
come from :mod:`tree2mat.ir.thresholds`, values are picked by ``Gather`` / ``GatherElements`` —
so no ``Sign(0)`` ever appears and no decision depends on how a runtime compares NaN. The input
is prepared once first (:func:`compared_input`: the library's missing value, the zero band,
projections)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx

from tree2mat.errors import UnsupportedModelError
from tree2mat.forms import _stack
from tree2mat.forms._graph import GraphBuilder, GraphOptions
from tree2mat.ir.core import CategoryCodes, Comparison, Ensemble, Projections
from tree2mat.ir.thresholds import FLOAT32, compare_dtype, graph_thresholds


@dataclass(frozen=True)
class Compared:
    """The input as the trees compare it: ``value`` [N, F] in the compare dtype and ``missing``
    [N, F] bool (NaN, or the library's own missing value). Where ``missing`` holds, ``value`` is
    anything (NaN): every use of it is masked by ``missing`` (the graph contract: no decision
    depends on how a runtime compares NaN)."""

    value: str
    missing: str
    dtype: np.dtype


def compared_input(g: GraphBuilder, ens: Ensemble, opts: GraphOptions, dtype: np.dtype | None = None) -> Compared:
    """The graph input cast to the dtype the comparisons run in (sklearn trees cast float64 input
    to float32 before comparing; so does the graph), or to ``dtype`` if given, with its missing
    mask. Runtimes disagree on comparisons with NaN (OpenVINO's CPU plugin has ``Greater(NaN, c)``
    true), so NaN is found by ``IsNaN`` once and masked wherever a value is used."""
    cmp = compare_dtype(ens.source_dtype, opts.dtype) if dtype is None else np.dtype(dtype)
    value = "input" if cmp == np.dtype(opts.dtype) else g.op("Cast", ["input"], "x_cmp", to=1 if cmp == FLOAT32 else 11)
    missing = g.op("IsNaN", [value], "x_isnan")
    src_missing = np.float64(np.dtype(ens.source_dtype).type(ens.missing_value))
    with np.errstate(over="ignore"):
        exact = np.float64(cmp.type(src_missing)) == src_missing
    if not np.isnan(ens.missing_value) and exact:
        # A value the library treats as missing (XGBoost's `missing`, finite). (One that the
        # compared dtype cannot hold, e.g. 1e-200 for a float64 model fed float32 rows, is
        # equal to no input the library sees: nothing to do.)
        is_missing = g.op("Equal", [value, g.const(cmp.type(src_missing), "missing_value")], "x_is_missing")
        missing = g.op("Or", [missing, is_missing], "x_missing")
    if ens.zero_band:
        # |x| <= band becomes 0 (LightGBM); the band is rounded down to cmp exactly as thresholds.
        band = graph_thresholds(np.asarray([ens.zero_band]), Comparison.LE, cmp)[0]
        tiny = g.op("LessOrEqual", [g.op("Abs", [value], "x_abs"), g.const(band, "zero_band")], "x_tiny")
        value = g.op("Where", [tiny, g.const(cmp.type(0), "zero_value"), value], "x_banded")
    if ens.projections is not None:
        if dtype is None and cmp != np.dtype(ens.source_dtype) and ens.is_oblique:
            raise UnsupportedModelError(
                f"this model's oblique nodes sum in {np.dtype(ens.source_dtype).name}: convert it with "
                f"--dtype {np.dtype(ens.source_dtype).name} (a {cmp.name} sum rounds differently)"
            )
        value, missing = _with_projections(g, ens.projections, ens.n_features, value, missing, cmp)
    return Compared(value, missing, cmp)


def _with_projections(g: GraphBuilder, pr: Projections, n_features: int, value: str, missing: str, cmp: np.dtype) -> tuple[str, str]:
    """The input's columns and missing mask [N, F] with the projections appended, [N, F + M]:
    each summed term by term in ``cmp`` as :class:`~tree2mat.ir.core.Projections` defines (per
    term a ``Gather`` of the input's columns and a ``Mul`` by the weights, then, with more than
    one term, the product again as ``|p| x sign(p)`` and an ``Add``: IEEE operations, each
    rounded; a padding term reads an appended row of zeros, so that an infinite input cannot turn
    it into NaN). A projection is missing where its sum is NaN (a NaN input, or ``inf - inf``)."""
    P = pr.feature.shape[1]
    columns = g.op("Transpose", [value], "x_by_column", perm=[1, 0])  # [F, N]
    if (pr.feature < 0).any():
        shape = g.op("Concat", [g.const(np.asarray([1], np.int64), "zero_row_count"), row_count(g)], "zero_row_shape", axis=0)
        zeros = g.op("ConstantOfShape", [shape], "zero_row", value=onnx.numpy_helper.from_array(np.zeros(1, cmp)))
        columns = g.op("Concat", [columns, zeros], "x_by_column_padded", axis=0)
    total = ""
    for p in range(P):
        index = np.where(pr.feature[:, p] >= 0, pr.feature[:, p], n_features)  # (row F: the zeros)
        term = g.op("Gather", [columns, g.const(index, f"projection_feature{p}")], f"projection_x{p}", axis=0)
        term = g.op("Mul", [term, g.const(pr.weight[:, p].astype(cmp)[:, None], f"projection_weight{p}")], f"projection_term{p}")
        if P > 1:  # the rounded product again, as |p| x sign(p): exact, so a fused multiply-add of it adds the same
            term = g.op("Mul", [g.op("Abs", [term], f"projection_abs{p}"), g.op("Sign", [term], f"projection_sign{p}")], f"projection_exact{p}")
        total = term if p == 0 else g.op("Add", [total, term], f"projection_sum{p}")
    sums = g.op("Transpose", [total], "projections", perm=[1, 0])  # [N, M]
    value = g.op("Concat", [value, sums], "x_with_projections", axis=1)
    missing = g.op("Concat", [missing, g.op("IsNaN", [sums], "projections_nan")], "x_missing_with_projections", axis=1)
    return value, missing


def gather_columns(g: GraphBuilder, x: str, columns: str, hint: str) -> str:
    """Columns ``columns`` of ``x`` [N, F], node-major: [len(columns), N]. (A ``Gather`` on axis
    0 of the transposed input: OpenVINO 2026.4's ``Gather`` on axis 1 returns wrong values once
    the output passes about 3e7 elements.)"""
    return g.op("Gather", [g.op("Transpose", [x], f"{hint}_by_column", perm=[1, 0]), columns], hint, axis=0)


def node_values(g: GraphBuilder, st: _stack.Stacked, x: Compared) -> tuple[str, str]:
    """Each node's feature value [T * I, N] (node-major; NaN-free, see :class:`Compared`), and
    where it counts as missing (bool): a missing input, or 0 at LightGBM's missing-type-Zero
    nodes."""
    feature = g.const(st.feature.reshape(st.n_trees * st.n_internal), "node_feature")
    gathered = gather_columns(g, x.value, feature, "x_nodes")
    missing = gather_columns(g, x.missing, feature, "x_nodes_missing")
    if st.zero_missing is not None:
        zero = g.op("Equal", [gathered, g.const(x.dtype.type(0), "zero_cmp")], "x_zero")
        zero = g.op("And", [zero, g.const(st.zero_missing[:, None], "zero_missing")], "x_zero_missing")
        missing = g.op("Or", [missing, zero], "x_missing_node")
    return gathered, missing


#: Columns of the augmented input (:func:`augmented_input`), in this order; each present only
#: when some node reads it. ``x``: the value with missing cells at -max; ``xhi``: with them at
#: +max; ``nanx``: 1 where missing, else 0 (never above 1: also the column of tests that never
#: hold); ``hix``: 1 where missing or +inf; ``lox``: 1 where missing or -inf; ``ninfx``: 1 at
#: -inf (not missing); the ``w`` blocks: the same for x with 0 counted as missing (LightGBM's
#: missing type Zero). F columns each; ``cat``: one per categorical node, 1 where that node sends
#: the row right.
BLOCKS = ("x", "xhi", "w", "whi", "x2", "xhi2", "w2", "whi2", "xs", "xhis", "ws", "whis", "nanx", "nanw", "hix", "hiw", "lox", "low", "ninfx", "ninfw", "cat")


#: The halved twins of the value blocks (``x2``: ``x / 2``, missing cells at ``-max / 2``; ...),
#: read by the nodes whose graph threshold is at or beyond bfloat16's largest number (about
#: 3.39e38, e.g. CatBoost's -+FLT_MAX borders), against half the threshold: exact (a halving of a
#: float32 that large is exact, and a small one's rounding cannot change its order against it).
#: With the other blocks' missing cells at -+bfloat16's largest number (beyond their thresholds),
#: no constant of an exact form's node tests passes bfloat16's range. OpenVINO's CPU plugin, in
#: its default bf16 precision, clamps such a constant to bfloat16's largest number and compares
#: in float32: ``x > FLT_MAX`` held for ``x = FLT_MAX`` (benchmarks/RESULTS.md, "Measurements
#: cited by the code").
HALVED = {"x2": "x", "xhi2": "xhi", "w2": "w", "whi2": "whi"}


#: The scaled-up twins (``xs``: ``x * 2**64``, ...), read by the nodes whose graph threshold is
#: subnormal (XGBoost's ``x < 0`` is ``x > -1.4e-45``), against the threshold times 2**64, a
#: normal number: exact (a power-of-two scaling keeps every order, an overflow to inf included)
#: where a runtime reads a subnormal constant as 0 (IREE, OpenVINO, WebGPU flush subnormals:
#: ``x > -0`` sent x = 0 left), for 0 and every normal input. (Such a runtime reads
#: a subnormal input as 0 as well, which no float operation can undo.)
UPSCALED = {"xs": "x", "xhis": "xhi", "ws": "w", "whis": "whi"}


#: 2**64: the subnormals of float32 and float64 times it are normal.
UPSCALE = 2.0**64


#: The twins' value block.
TWIN_OF = {**HALVED, **UPSCALED}


#: bfloat16's largest finite number.
BF16_MAX = float(np.float32(np.uint32(0x7F7F0000).view(np.float32)))


#: The column and threshold of a test that never holds (``nanx`` is 0 or 1).
NEVER = ("nanx", 1.0)


@dataclass(frozen=True)
class NodeTests:
    """Every node's test as one ``value > threshold`` on a column of the augmented input, [T, I]
    in :func:`stack`'s order. The test holds where the row goes right, except at ``swap`` nodes,
    where it holds where the row goes left. Thresholds are finite."""

    column: np.ndarray  # int64 [T, I]
    threshold: np.ndarray  # compare dtype [T, I]
    swap: np.ndarray  # bool [T, I]
    blocks: tuple[str, ...]  # the augmented input's blocks, in column order
    offset: dict[str, int]  # the first column of each block
    width: int  # the augmented input's columns


def _rescale(block: np.ndarray, threshold: np.ndarray, numeric: np.ndarray) -> None:
    """In place, on the ``numeric`` nodes: thresholds at or past bfloat16's range halved and
    subnormal ones scaled up, each test moved to the block of its column so scaled (HALVED,
    UPSCALED). Exact: both are scalings by powers of two."""
    dt = threshold.dtype.type
    huge = numeric & np.isin(block, list(HALVED.values())) & (np.abs(threshold.astype(np.float64)) >= BF16_MAX) & np.isfinite(threshold)
    block[huge] = np.char.add(block[huge].astype(str), "2")
    threshold[huge] = threshold[huge] / dt(2)  # (exact: a power-of-two scaling of a number this large)
    tiny = numeric & np.isin(block, list(UPSCALED.values())) & (threshold != 0) & (np.abs(threshold) < np.finfo(threshold.dtype).tiny)
    block[tiny] = np.char.add(block[tiny].astype(str), "s")
    threshold[tiny] = threshold[tiny] * dt(UPSCALE)  # (exact: a subnormal scaled by a power of two)


def node_tests(ens: Ensemble, st: _stack.Stacked, extra: tuple[str, ...] = ()) -> NodeTests:
    """Each test as one ``value > threshold`` on a NaN-free column, with a finite threshold, the
    missing values going where the library sends them (``extra``: blocks to include even when no
    node reads them).

    Per node, with t' the graph threshold (``x <= t'`` goes left) and m = max:
    - missing goes left: ``x > t'`` on ``x`` (missing is -m, never above t'); with t' = +inf every
      row goes left (``nanx > 1``, never); with t' = -inf only -inf and missing go left
      (``lox > 0.5``, a swap node: the test holds where the row goes left);
    - missing goes right: ``x > t'`` on ``xhi`` (missing is m, above every t' < m); with t' = m,
      ``hix > 0.5`` (missing or +inf); with t' = +inf only missing goes right (``nanx > 0.5``);
      with t' = -inf only -inf goes left (``ninfx > 0.5``, a swap node).
    LightGBM's missing-type-Zero nodes read the ``w`` blocks instead. Categorical nodes read
    their own column. Padding nodes read column 0 against 0 (matrix forms ignore them)."""
    T, I, F = st.n_trees, st.n_internal, ens.n_columns
    t = st.threshold
    dt = t.dtype.type
    top = np.finfo(t.dtype).max
    valid = np.arange(I)[None, :] < np.asarray([tree.n_internal for tree in ens.trees])[:, None]
    zero = np.zeros((T, I), bool) if st.zero_missing is None else st.zero_missing.reshape(T, I)
    cat: np.ndarray = np.zeros(T * I, bool)
    cat[st.cat_position] = True
    cat = cat.reshape(T, I)
    left = st.nan_left
    src = np.where(zero, "w", "x")
    cases = [  # (condition, block kind, suffix, threshold, swap), first match wins
        (left & (t == np.inf), "never", "", dt(NEVER[1]), False),
        (left & (t == -np.inf), "lo", "", dt(0.5), True),
        (left, "", "", t, False),
        (t == np.inf, "nan", "", dt(0.5), False),
        (t == top, "hi", "", dt(0.5), False),
        (t == -np.inf, "ninf", "", dt(0.5), True),
        (np.ones_like(left), "", "hi", t, False),
    ]
    block = np.full((T, I), "", object)
    threshold = np.zeros((T, I), t.dtype)
    swap = np.zeros((T, I), bool)
    todo = valid & ~cat
    for cond, kind, suffix, thr, sw in cases:
        hit = todo & cond
        block[hit] = kind if kind == "never" else np.char.add(np.char.add(kind, src[hit].astype(str)), suffix)
        threshold[hit] = np.broadcast_to(thr, (T, I))[hit]
        swap[hit] = sw
        todo &= ~hit
    _rescale(block, threshold, valid & ~cat)
    block[cat] = "cat"
    threshold[cat] = dt(0.5)
    index = st.feature.copy()
    index.reshape(-1)[st.cat_position] = np.arange(st.cat_position.size)
    index[block == "never"] = 0  # (column 0 of NEVER's block)
    used = {NEVER[0] if b == "never" else str(b) for b in np.unique(block[valid])} | set(extra)
    blocks = tuple(b for b in BLOCKS if b in used) or ("x",)  # (padding nodes read column 0)
    width = {b: st.cat_position.size if b == "cat" else F for b in blocks}
    offset = dict(zip(blocks, np.cumsum([0] + [width[b] for b in blocks])[:-1].tolist()))
    offset_of = {**offset, "never": offset.get(NEVER[0], 0)}
    start = np.vectorize(lambda b: offset_of.get(b, 0), otypes=[np.int64])(np.where(valid, block, blocks[0]))
    index[~valid] = 0
    return NodeTests(start + index, threshold, swap, blocks, offset, sum(width.values()))


def augmented_input(g: GraphBuilder, ens: Ensemble, st: _stack.Stacked, x: Compared, blocks: tuple[str, ...]) -> str:
    """[N, C]: the columns the node tests read (see :data:`BLOCKS`), NaN-free."""
    cmp = st.threshold.dtype
    to = onnx.helper.np_dtype_to_tensor_dtype(cmp)
    top = np.finfo(cmp).max
    missing = {"x": x.missing}
    if any(TWIN_OF.get(b, b).endswith(("w", "whi")) for b in blocks):
        is_zero = g.op("Equal", [x.value, g.const(cmp.type(0), "zero_cmp")], "x_is_zero")  # (NaN: set anyway)
        missing["w"] = g.op("Or", [x.missing, is_zero], "w_missing")
    made: dict[str, str] = {}
    for b in blocks:
        if b == "cat":
            right = g.op("Transpose", [g.op("Not", [categorical_left(g, ens, st, x)], "cat_right_nodes")], "cat_right", perm=[1, 0])
            made[b] = g.op("Cast", [right], "cat_right_cmp", to=to)
            continue
        base = TWIN_OF.get(b, b)
        src = "w" if base.endswith(("w", "whi")) else "x"
        if base in ("x", "w", "xhi", "whi"):
            high, half = base.endswith("hi"), b in HALVED
            if half:
                value = _halved(g, x.value, cmp)
            elif b in UPSCALED:
                value = g.op("Mul", [x.value, g.const(cmp.type(UPSCALE), "upscale")], "x_upscaled")
            else:
                value = x.value
            # The missing cells' place, beyond every threshold of the block: the others' are below
            # bfloat16's largest number, the halved blocks' at most half the dtype's largest.
            edge = cmp.type(top / 2) if half else cmp.type(BF16_MAX)
            sentinel = g.const(cmp.type(edge if high else -edge), f"missing_{'high' if high else 'low'}{'_half' if half else ''}")
            made[b] = g.op("Where", [missing[src], sentinel, value], b)
            continue
        if b.startswith("nan"):
            made[b] = g.op("Cast", [missing[src]], b, to=to)
            continue
        # +-inf found as x / 2 beyond -+max / 2 (for float32 a constant inside bfloat16's range;
        # the missing cells' NaN is above nothing), then set to 1 (or 0 for ninf) where missing,
        # as the value blocks' Where does: no IsInf, Or or And of the infinities, which
        # onnxruntime-web's JSEP runs on its CPU kernels, and whose bool result a Cast there read
        # without its +inf cells (a symmetric CatBoost model; docs/runtimes.md).
        x_half = _halved(g, x.value, cmp)
        pos = b.startswith("hi")
        bound = g.const(cmp.type(top / 2 if pos else -top / 2), f"{'pos' if pos else 'neg'}_inf_half")
        beyond = g.op("Greater" if pos else "Less", [x_half, bound], f"{b}_inf")
        on_missing = g.const(cmp.type(0 if b.startswith("ninf") else 1), "zero_flag" if b.startswith("ninf") else "one_flag")
        made[b] = g.op("Where", [missing[src], on_missing, g.op("Cast", [beyond], f"{b}_inf_flag", to=to)], b)
    parts = [made[b] for b in blocks]
    return parts[0] if len(parts) == 1 else g.op("Concat", parts, "x_augmented", axis=1)


def _halved(g: GraphBuilder, value: str, cmp: np.dtype) -> str:
    """``value / 2`` (one node however many blocks read it: the builder merges equal nodes)."""
    return g.op("Mul", [value, g.const(cmp.type(0.5), "half")], "x_half")


def row_count(g: GraphBuilder) -> str:
    """The number of rows, as a 1-D int64 tensor of one element (for shapes): the graph input's
    rather than a computed tensor's, as onnxruntime-web's JSEP misrouted rows of the sign graph
    of a LightGBM model that took the Shape of the zero band's Where (docs/runtimes.md)."""
    start, stop = g.const(np.asarray([0], np.int64), "n_start"), g.const(np.asarray([1], np.int64), "n_stop")
    return g.op("Slice", [g.op("Shape", ["input"], "x_shape"), start, stop], "n_rows")


def test_bits(
    g: GraphBuilder, ens: Ensemble, st: _stack.Stacked, x: Compared, tests: NodeTests,
    groups: list[tuple[np.ndarray, int]], right: bool, ones: bool,
) -> list[str]:
    """Per group of trees ``(trees, I_g)`` a bool [T_g, I_g, N] (``I_g + 1`` with ``ones``): True
    where the node's test (:func:`node_tests`) holds, or with ``right`` where the row goes right
    (the swap nodes' tests negated); with ``ones``, a last node per tree that is always True (a
    bias column for a MatMul). Nodes past I_g in a group are padding and left out.

    The augmented input is transposed to [C, N] so that the nodes' values are whole rows of it
    (a ``Gather`` on axis 0: contiguous copies, onnxruntime's fast case; a ``Gather`` on axis 1
    is over ten times slower) and each test is a row against one threshold."""
    xa = augmented_input(g, ens, st, x, tests.blocks)
    columns = g.op("Transpose", [xa], "x_columns", perm=[1, 0])
    if ones:
        n_rows = row_count(g)
        true = onnx.helper.make_tensor("true", onnx.TensorProto.BOOL, [1], [True])
    out = []
    for k, (trees, n) in enumerate(groups):  # (one Gather each: no Slice of a [nodes, N] tensor,
        pick = (trees[:, None], np.arange(n)[None, :])  # which onnxruntime fuses into a Split
        values = g.op("Gather", [columns, g.const(tests.column[pick].reshape(-1), f"node_column{k}")], f"node_values{k}", axis=0)
        threshold = g.const(tests.threshold[pick].reshape(-1, 1), f"node_threshold{k}")
        holds = g.op("Greater", [values, threshold], f"node_test{k}")  # that fails past 2**31 elements)
        swap = tests.swap[pick].reshape(-1, 1)
        if right and swap.any():
            holds = g.op("Xor", [holds, g.const(swap, f"node_swap{k}")], f"node_right{k}")
        bits = g.op("Reshape", [holds, g.const(np.asarray([trees.size, n, -1], np.int64), f"node_bits{k}_shape")], f"node_bits{k}")
        if ones:
            shape = g.op("Concat", [g.const(np.asarray([trees.size, 1], np.int64), f"ones{k}_trees"), n_rows], f"ones{k}_shape", axis=0)
            row = g.op("ConstantOfShape", [shape], f"node_ones{k}", value=true)
            bits = g.op("Concat", [bits, row], f"node_bits{k}_ones", axis=1)
        out.append(bits)
    return out


def merge_categorical(g: GraphBuilder, st: _stack.Stacked, numeric: str, categorical: str, hint: str) -> str:
    """A node-major tensor [T * I, N] with the categorical nodes' entries taken from
    ``categorical`` [M, N] (``st.cat_position`` order) instead of ``numeric``."""
    flat = st.n_trees * st.n_internal
    both = g.op("Concat", [numeric, categorical], f"{hint}_all", axis=0)
    perm = np.arange(flat, dtype=np.int64)
    perm[st.cat_position] = flat + np.arange(st.cat_position.size)
    return g.op("Gather", [both, g.const(perm, "cat_perm")], f"{hint}_cat", axis=0)


def categorical_left(g: GraphBuilder, ens: Ensemble, st: _stack.Stacked, x: Compared) -> str:
    """Bool [M, N] (node-major): True where categorical node m (``st.cat_position`` order) sends
    the row left.

    Each categorical feature's value becomes a code (1 + index among the feature's categories,
    0 for anything else: missing, unseen values) by exact equality; each node then looks its
    direction up by code."""
    features = g.const(st.cat_features, "cat_features")
    x_cat = gather_columns(g, x.value, features, "x_cat")  # [F_c, N]
    missing = gather_columns(g, x.missing, features, "x_cat_missing")
    x_cat = _category_codes(g, ens.category_codes, x_cat, st.threshold.dtype)
    xc = g.unsqueeze(x_cat, [1], "x_cat3")  # [F_c, 1, N] against values [F_c, C, 1]
    eq = g.op("Cast", [g.op("Equal", [xc, g.const(st.cat_values[:, :, None], "cat_values")], "cat_eq")], "cat_eqf", to=1)
    ranked = g.op("Mul", [eq, g.const(st.cat_rank[:, :, None], "cat_rank")], "cat_ranked")
    code = g.reduce_sum(ranked, [1], keepdims=False, hint="cat_code_f")
    code = g.op("Where", [missing, g.const(np.float32(0), "cat_code_missing"), code], "cat_code_present")
    codes = g.op("Cast", [code], "cat_code", to=7)
    slot = g.const(st.cat_slot, "cat_slot")
    node_codes = g.op("Gather", [codes, slot], "cat_node_code", axis=0)  # [M, N]
    width = st.cat_values.shape[1]
    offsets = np.arange(st.cat_slot.size, dtype=np.int64)[:, None] * (width + 1)
    index = g.op("Add", [node_codes, g.const(offsets, "cat_offset")], "cat_index")
    direction = g.op("Gather", [g.const(st.cat_direction, "cat_direction"), index], "cat_dir", axis=0)
    cat_left = g.op("Less", [direction, g.const(np.float32(0), "zero_f32")], "cat_left")
    if st.cat_nan_left is not None:  # missing goes elsewhere than unknown categories (XGBoost)
        node_missing = g.op("Gather", [missing, slot], "cat_node_missing", axis=0)
        nan_part = g.op("And", [node_missing, g.const(st.cat_nan_left[:, None], "cat_nan_left")], "cat_nan_goes_left")
        rest = g.op("And", [g.op("Not", [node_missing], "cat_present"), cat_left], "cat_value_goes_left")
        cat_left = g.op("Or", [nan_part, rest], "cat_left_nan")
    return cat_left


def _category_codes(g: GraphBuilder, rule: CategoryCodes, x: str, dtype: np.dtype) -> str:
    """The category codes of values ``x`` (``dtype``) under ``rule`` (see
    :func:`tree2mat.ir.core.category_codes`): -1 for values that match nothing (``x`` holds no
    NaN: missing cells are masked by the caller)."""
    if rule is CategoryCodes.EXACT:
        return x
    minus1, zero = g.const(dtype.type(-1), "cat_invalid"), g.const(dtype.type(0), "cat_zero")
    floor = g.op("Floor", [x], "cat_floor")
    if rule is CategoryCodes.TRUNCATE:  # int(x) toward zero: (-1, 0) -> 0, <= -1 -> negative
        floor = g.op("Where", [g.op("Less", [x, zero], "cat_negative"), zero, floor], "cat_trunc")
        invalid = g.op("LessOrEqual", [x, minus1], "cat_invalid_x")
    else:
        invalid = g.op("Less", [x, zero], "cat_invalid_x")
    return g.op("Where", [invalid, minus1, floor], "cat_code_x")
