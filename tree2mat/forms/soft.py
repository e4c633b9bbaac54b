"""The differentiable forms ``soft`` and ``softmax``: approximations of the model, exact only in
the limit of the temperature ``tau`` going to 0.

Both start from one logit per node, ``lambda = (t' - x + h) / tau``: positive where the hard test
``x <= t'`` sends the row left. ``t'`` is the exact forms' threshold (so the limit is the exact
model, ``<`` splits included) and ``h`` is half the gap from ``t'`` to the next value of the
compare dtype, so that no input of that dtype sits on the boundary itself: every row has a hard
side that the soft routing approaches (except next to a float64 threshold among the subnormals,
where half a gap is not representable). ``tau`` is in the units of the input features.

- ``soft`` (Decision Machines eq. 12-13; End-to-End Learning eq. 1-5, steepness 1/tau): a leaf's
  probability is the product of sigmoids along its path, computed as
  ``p = exp(B- log s(lambda) + B+ log s(-lambda))`` with ``B-``/``B+`` the left/right parts of the
  template matrix; output ``sum_l p_l v_l``.
- ``softmax`` (Decision Machines eq. 11; Rethink Traversal Alg. 5-6, attention over leaves): with
  the smooth sign ``h = tanh(-lambda)``, leaf weights ``softmax((B h - depth) / tau)``. The template
  score ``B h`` is bounded by the depth, which makes the exit leaf's score 0 and every other
  leaf's at most -2 in the limit; eq. 11's raw ``K (Sx - t)`` has feature units and need not pick
  the exit leaf at any temperature.

The path from the input to the float outputs has no ArgMax, Sign or comparison: comparisons only
choose, in ``Where``, the constant logits of missing values (NaN, LightGBM's Zero) and of
categorical nodes, whose test stays hard (a category has no neighbour to be close to). The label
of a classifier is the argmax of its probabilities, as for any classifier. Logits are clipped to
+-1e4 (beyond it, sigmoid and tanh are 0 or 1). Arithmetic is in the graph's internal dtype
(float32, or float64 with ``--dtype float64``); leaf values are summed as the exact forms sum
them (exact digits in float32), so that the limit is the model's values.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from tree2mat.errors import UnsupportedModelError
from tree2mat.forms import _exact, _nodes, _stack, _sums, _templates
from tree2mat.forms._graph import GraphBuilder, GraphOptions, softplus
from tree2mat.forms._spec import FormSpec
from tree2mat.ir.core import Ensemble

#: Default temperature (in input-feature units).
DEFAULT_TEMPERATURE = 1.0
#: Logits are clipped to +-LOGIT_CAP: sigmoid/tanh are already 0 or 1 there in float64, and a
#: finite log-probability keeps 0 x log(0) out of the MatMul.
LOGIT_CAP = 1e4
#: Log-weight of a padding leaf (softmax: times the temperature if above 1): its weight is 0.
PAD_SCORE = -1e6


def half_gaps(threshold: np.ndarray) -> np.ndarray:
    """Per threshold ``t'`` (its dtype: the compare dtype), half the distance to the next
    representable value above it, in that dtype; 0 for infinite thresholds."""
    t = np.asarray(threshold)
    with np.errstate(over="ignore", invalid="ignore"):
        up = np.nextafter(t, t.dtype.type(np.inf)).astype(np.float64)
        down = np.nextafter(t, t.dtype.type(-np.inf)).astype(np.float64)
        t64 = t.astype(np.float64)
        gap = np.where(np.isfinite(up), up - t64, t64 - down)  # at the largest finite value: below
        half = np.where(np.isfinite(t64), gap / 2, 0.0)
    # Below the smallest gap (the half of a subnormal step) the half rounds to 0; keep it positive.
    tiny = np.finfo(t.dtype).smallest_subnormal
    return np.where(np.isfinite(t64), np.maximum(half.astype(t.dtype), tiny), 0).astype(t.dtype)


def node_logits(g: GraphBuilder, ens: Ensemble, st: _stack.Stacked, x: _nodes.Compared, x_cmp: _nodes.Compared, tau: float) -> str:
    """[N, T * I] (the internal dtype, that of ``x``; computed node-major): per node ``(t' - x + h) / tau`` clipped to
    +-LOGIT_CAP; +-CAP where the value is missing (by where it goes), at categorical nodes (their
    codes are taken from ``x_cmp``, the input in the compare dtype) and at infinite thresholds
    (t' = +inf: every value goes left; -inf: only -inf does)."""
    flat = st.n_trees * st.n_internal
    dt = x.dtype.type
    gathered, missing = _nodes.node_values(g, st, x)
    t = st.threshold.reshape(flat)
    finite = np.isfinite(t)
    diff = g.op("Sub", [g.const(np.where(finite, t, 0).astype(x.dtype)[:, None], "threshold_soft"), gathered], "t_minus_x")
    diff = g.op("Add", [diff, g.const(half_gaps(t).astype(x.dtype)[:, None], "half_gap")], "t_minus_x_h")
    cap = dt(LOGIT_CAP)
    logit = g.op("Clip", [g.op("Div", [diff, g.const(dt(tau), "temperature")], "logit_raw"),
                          g.const(-cap, "logit_low"), g.const(cap, "logit_high")], "logit_clipped")
    if not finite.all():
        low_inf = g.op("IsInf", [gathered], "x_nodes_neginf", detect_positive=0)
        infinite = np.where(t > 0, cap, -cap).astype(x.dtype)[:, None]  # +inf: left; -inf: right but for -inf
        fixed = g.op("Where", [g.op("And", [low_inf, g.const(np.isneginf(t)[:, None], "threshold_neginf")], "x_at_neginf"),
                               g.const(cap, "logit_neginf"), g.const(infinite, "logit_infinite")], "logit_infinite_t")
        logit = g.op("Where", [g.const(~finite[:, None], "threshold_infinite"), fixed, logit], "logit_finite_t")
    fill = np.where(st.nan_left.reshape(flat), cap, -cap).astype(x.dtype)[:, None]
    logit = g.op("Where", [missing, g.const(fill, "missing_logit"), logit], "logit_numeric")
    if st.cat_position.size:
        cat = g.op("Where", [_nodes.categorical_left(g, ens, st, x_cmp), g.const(cap, "cat_logit_left"),
                             g.const(-cap, "cat_logit_right")], "cat_logit")
        logit = _nodes.merge_categorical(g, st, logit, cat, "logit")
    return g.op("Transpose", [logit], "logit_rows", perm=[1, 0])


def _padding(ens: Ensemble, st: _stack.Stacked) -> np.ndarray:
    """Bool [T, 1, L]: the leaves that only pad a tree to L."""
    return np.arange(st.n_leaves)[None, None, :] >= np.asarray([t.n_leaves for t in ens.trees])[:, None, None]


def soft_weights(g: GraphBuilder, ens: Ensemble, st: _stack.Stacked, logit: str, dtype: np.dtype) -> str:
    """Leaf probabilities [T, N, L]: products of sigmoids along each path."""
    bt = _templates.template_tensors(ens, st)[0].transpose(0, 2, 1)  # [T, I, L]
    left, right = np.where(bt < 0, 1.0, 0.0), np.where(bt > 0, 1.0, 0.0)
    log_left = g.op("Neg", [softplus(g, g.op("Neg", [logit], "neg_logit"), "sp_left", dtype)], "log_p_left")
    log_right = g.op("Neg", [softplus(g, logit, "sp_right", dtype)], "log_p_right")
    both = g.op("Concat", [_exact.trees_first(g, st, log_left, "log_left"), _exact.trees_first(g, st, log_right, "log_right")], "log_p_nodes", axis=2)
    paths = g.const(np.concatenate([left, right], axis=1).astype(dtype), "path_matrix")  # [T, 2I, L]
    log_p = g.op("MatMul", [both, paths], "log_p_leaves")
    pad = np.where(_padding(ens, st), PAD_SCORE, 0.0).astype(dtype)
    log_p = g.op("Add", [log_p, g.const(pad, "pad_leaves")], "log_p_padded")
    return g.op("Exp", [log_p], "leaf_weights")


def softmax_weights(g: GraphBuilder, ens: Ensemble, st: _stack.Stacked, logit: str, tau: float, dtype: np.dtype) -> str:
    """Leaf weights [T, N, L]: softmax over the leaves of (B tanh(-logit) - depth) / tau."""
    b, depth = _templates.template_tensors(ens, st)
    bt, depth = b.transpose(0, 2, 1), depth[:, None, :]  # [T, I, L], [T, 1, L]
    # A padding leaf (B row 0) scores PAD_SCORE, times tau above 1: weight 0 at any temperature.
    depth = np.where(_padding(ens, st), -PAD_SCORE * max(1.0, tau), depth.astype(np.float64))
    h = g.op("Tanh", [g.op("Neg", [logit], "neg_logit")], "h_soft")
    scores = g.op("MatMul", [_exact.trees_first(g, st, h, "h"), g.const(bt.astype(dtype), "template_T")], "template_scores")
    scores = g.op("Sub", [scores, g.const(depth.astype(dtype), "depth")], "score_minus_depth")
    scaled = g.op("Div", [scores, g.const(np.dtype(dtype).type(tau), "temperature_scores")], "scores_scaled")
    return g.op("Softmax", [scaled], "leaf_weights", axis=2)


def constant_bytes(ens: Ensemble) -> int:
    """Bytes of the float64 path matrix [T, 2I, L] and leaf values."""
    T, I, L = _stack.padded_sizes(ens)
    return T * 2 * I * L * 8 + T * L * ens.n_outputs * 8


def bytes_per_row(ens: Ensemble) -> int:
    T, I, L = _stack.padded_sizes(ens)
    return T * (I * 8 * 10 + L * 8 * 4 + ens.n_outputs * 8) + _stack.input_bytes_per_row(ens)


def _build(ens: Ensemble, opts: GraphOptions, name: str) -> onnx.ModelProto:
    if any(t.is_linear for t in ens.trees):
        raise UnsupportedModelError(f"the {name} form does not support linear leaves (LightGBM linear_tree); use an exact form")
    if opts.leaves or opts.proximity is not None:
        raise UnsupportedModelError(f"--{'leaves' if opts.leaves else 'proximity'} needs an exact form: the {name} form has no exit leaf")
    _stack.check_size(f"dense {name} layout", constant_bytes(ens))
    tau = DEFAULT_TEMPERATURE if opts.temperature is None else opts.temperature
    st = _stack.stack(ens, opts.dtype)
    g = GraphBuilder(opts.opset)
    # Exact forms compare in the library's dtype (sklearn: float32 even for float64 input); the
    # soft forms take the input as given, so that the graph is smooth in it (a float32 cast
    # would make it a staircase). Categorical codes still use the library's dtype.
    internal = _sums.internal_dtype(ens, opts)
    x = _nodes.compared_input(g, ens, opts, dtype=internal)
    x_cmp = x if st.threshold.dtype == internal or not st.cat_position.size else _nodes.compared_input(g, ens, opts)
    logit = node_logits(g, ens, st, x, x_cmp, tau)
    weights = soft_weights(g, ens, st, logit, internal) if name == "soft" else softmax_weights(g, ens, st, logit, tau, internal)
    doc = f"tree2mat {name} form of {ens.source} at temperature {tau:g} (an approximation: exact only as the temperature goes to 0)"
    margin = _sums.weighted_margin(g, ens, st, weights, internal, opts.tree_mask)
    return _exact.finish(g, ens, margin, opts, doc, {"tree2mat.temperature": repr(float(tau))})


def build_soft(ens: Ensemble, opts: GraphOptions) -> onnx.ModelProto:
    return _build(ens, opts, "soft")


def build_softmax(ens: Ensemble, opts: GraphOptions) -> onnx.ModelProto:
    return _build(ens, opts, "softmax")


def _spec(name: str, build: Callable[[Ensemble, GraphOptions], onnx.ModelProto], summary: str) -> FormSpec:
    return FormSpec(name=name, build=build, exact=False, summary=summary, constant_bytes=constant_bytes, bytes_per_row=bytes_per_row)


SOFT = _spec(
    "soft", build_soft,
    "differentiable approximation (Decision Machines eq. 12-13): leaf probabilities as products of sigmoids at temperature tau; exact only as tau -> 0",
)
SOFTMAX = _spec(
    "softmax", build_softmax,
    "differentiable approximation (Decision Machines eq. 11, Rethink Traversal Alg. 5): softmax over the leaves' template scores at temperature tau; "
    "exact only as tau -> 0",
)
