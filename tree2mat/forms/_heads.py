"""The shared head: from the margin [N, K] to the graph contract's outputs.

Differences between model kinds are IR data (link, label rule, classes), applied here once for
every form. Classifiers: ``label`` [N] (int64 or string) and ``probabilities`` [N, C]; with several
targets ``label`` [N, G] and ``probabilities`` [N, G, max C] (zero-padded). Regressors:
``variable`` [N, K]. Outlier detectors: ``label`` [N] (-1/1), ``scores`` [N, 1]
(``decision_function``) and ``score_samples`` [N, 1]. With ``raw``: ``variable`` is the margin
and classifiers keep ``label``.

The margin is float32 in the default graph (no float64 tensor: the graph contract) and float64
with ``--dtype float64``. A float32 margin of a library that sums in float64 comes with its exact
digits (:mod:`tree2mat.forms._digits`), and labels are decided on those; links and outputs use the
float32 value. Constants are finite (no +-inf or NaN anywhere in a graph).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx

from tree2mat.forms import _digits
from tree2mat.forms._graph import ONNX_TYPE, GraphBuilder, GraphOptions, softplus, tensor_info
from tree2mat.ir.core import BINARY_LINKS, Aggregation, Comparison, Ensemble, LabelRule, Link, Task
from tree2mat.ir.evaluate import isolation_cutoff, sigmoid_plateaus
from tree2mat.ir.thresholds import graph_thresholds


@dataclass(frozen=True)
class Margin:
    """The aggregated margin [N, K] (after the base score, averaged for MEAN), before the link."""

    value: str
    dtype: np.dtype
    #: The digit sums (before averaging, see :mod:`tree2mat.forms._digits`), [N, K] float32
    #: each: labels are decided on them exactly. None where ``value`` itself is what the library compares (float64
    #: graphs; float32 libraries such as XGBoost) or the form is an approximation.
    digits: list[str] | None = None
    plan: _digits.Plan | None = None
    #: What ``value`` leaves out of the exact margin (for the exp link), or None.
    residual: str | None = None
    #: One output: the digit sums are [N] (``value`` is [N, 1]).
    flat: bool = False

    def columns(self, g: GraphBuilder, start: int, stop: int, hint: str) -> Margin:
        """Columns ``start:stop`` (one output group)."""
        digits = None if self.digits is None else [g.slice_cols(d, start, stop, f"{hint}_digit{k}") for k, d in enumerate(self.digits)]
        return Margin(g.slice_cols(self.value, start, stop, hint), self.dtype, digits, self.plan)


def label_dtype(classes: tuple[np.ndarray, ...]) -> str:
    return "string" if classes[0].dtype.kind in "USO" else "int64"


def _const(g: GraphBuilder, m: Margin, value: float, hint: str) -> str:
    return g.const(m.dtype.type(value), hint)


def _in_sum(ens: Ensemble, m: Margin, value: float) -> float:
    """A margin constant as the digits hold it: times the trees for an averaged ensemble (whose
    digits are of the sum), clamped to the span the digits hold (beyond it, a comparison with any
    margin is decided anyway; the span is on every grid, so clamping and rounding to a grid
    commute)."""
    assert m.plan is not None
    if ens.aggregation is Aggregation.MEAN:
        value = value * float(ens.trees_per_output()[0])
    span = 2.0 ** (m.plan.exponents[0] + _digits.TOP_BITS + 1)
    return min(max(value, -span), span)


def _constant_digits(ens: Ensemble, m: Margin, value: float, strict: bool) -> tuple[list[np.ndarray] | None, bool]:
    """A margin constant for an exact comparison on the digits (see :func:`_digits.on_grid`):
    its normalized digits (None for 0, see :func:`_in_sum`) and whether the comparison becomes
    strict."""
    assert m.plan is not None
    value, strict = _digits.on_grid(_in_sum(ens, m, value), m.plan, strict)
    return (None if value == 0 else _digits.normalized(np.asarray([value]), m.plan)), strict


def _above(g: GraphBuilder, ens: Ensemble, m: Margin, cutoff: float, strict: bool, hint: str) -> str:
    """Bool: margin > ``cutoff`` (``strict``) or >= it, exactly as in exact arithmetic on the
    margin the graph holds."""
    if m.digits is not None:
        assert m.plan is not None
        constant, strict = _constant_digits(ens, m, cutoff, strict)
        return _digits.at_least(g, m.digits, m.plan, constant, strict, hint)
    # m > c iff m > (the largest value <= c); m >= c iff m > (the largest value < c).
    rule = Comparison.LE if strict else Comparison.LT
    limit = np.finfo(m.dtype).max
    t = float(np.clip(graph_thresholds(np.asarray([cutoff]), rule, m.dtype)[0], -limit, limit))
    return g.op("Greater", [m.value, _const(g, m, t, f"{hint}_cutoff")], hint)


def _labels(g: GraphBuilder, ens: Ensemble, m: Margin) -> str:
    binary = ens.label_rule in (LabelRule.POSITIVE, LabelRule.NON_NEGATIVE)  # one column per target
    if binary:
        hit = _above(g, ens, m, ens.label_cutoff, ens.label_rule is LabelRule.POSITIVE, "positive")
        index = g.op("Cast", [hit], "class_indices", to=onnx.TensorProto.INT64)
    if len(ens.classes) == 1:
        if binary:
            idx = index if m.flat else g.op("Squeeze", [index, g.const(np.asarray([1], np.int64), "squeeze_axis")], "class_index")
        else:
            idx = _argmax(g, ens, m, len(ens.classes[0]), "class_index")
        return g.op("Gather", [g.const(ens.classes[0], "classes"), idx], out="label", axis=0)
    cols, start = [], 0
    for j, classes in enumerate(ens.classes):
        if binary:
            idx = g.slice_cols(index, j, j + 1, f"class_index{j}")
        else:
            part = m.columns(g, start, start + len(classes), f"margin_group{j}")
            idx = g.unsqueeze(_argmax(g, ens, part, len(classes), f"class_index{j}"), [1], f"class_index{j}_2d")
        cols.append(g.op("Gather", [g.const(classes, f"classes{j}"), idx], f"label{j}", axis=0))
        start += len(classes)
    return g.op("Concat", cols, out="label", axis=1)


def _argmax(g: GraphBuilder, ens: Ensemble, m: Margin, width: int, hint: str) -> str:
    """int64 [N]: the library's ``argmax(predict_proba)`` from the margin: see
    :func:`tree2mat.ir.evaluate.argmax_key` (softmax and sigmoid links have a single group)."""
    if m.digits is not None:  # exact on the digits; margins are finite there
        assert m.plan is not None
        digits = m.digits
        if ens.link is Link.SIGMOID:  # the sigmoid's plateaus tie, the first class wins
            digits = _digits.normalize(g, digits, m.plan, f"{hint}_norm")
            zero = _digits.normalized(np.zeros(1), m.plan)
            low, high = sigmoid_plateaus()
            constant, strict = _constant_digits(ens, m, low, True)
            under = g.op("Not", [_digits.compare(g, digits, constant or zero, strict, f"{hint}_above_low")], f"{hint}_at_low")
            constant, strict = _constant_digits(ens, m, high, False)
            over = _digits.compare(g, digits, constant or zero, strict, f"{hint}_at_high")
            # Every margin at or below low ties with low (rounded down to the grid), every one at
            # or above high with high rounded up: below and above every other margin.
            digits = _digits.select(g, under, _representative(ens, m, low, up=False), digits, f"{hint}_low_key")
            digits = _digits.select(g, over, _representative(ens, m, high, up=True), digits, f"{hint}_key")
        return _digits.argmax(g, digits, m.plan, width, hint)
    key = m.value
    if ens.link is Link.SIGMOID:
        low, high = sigmoid_plateaus()
        # Clip to the values of the margin's dtype that decide as low and high do.
        low_t = graph_thresholds(np.asarray([low]), Comparison.LE, m.dtype)[0]
        high_t = -graph_thresholds(np.asarray([-high]), Comparison.LE, m.dtype)[0]
        clipped = g.op("Min", [g.op("Max", [key, _const(g, m, low_t, f"{hint}_sigmoid_low")], f"{hint}_key_low"),
                               _const(g, m, high_t, f"{hint}_sigmoid_high")], f"{hint}_key_clipped")
        big = _const(g, m, float(np.finfo(m.dtype).max), f"{hint}_big")  # NaN ranks first (numpy)
        key = g.op("Where", [g.op("IsNaN", [key], f"{hint}_margin_isnan"), big, clipped], f"{hint}_key")
    elif ens.link is Link.SOFTMAX:  # a row with NaN or +inf: all NaN, the first class wins
        bad = g.op("Or", [g.op("IsNaN", [key], f"{hint}_margin_isnan"), g.op("IsInf", [key], f"{hint}_margin_isposinf", detect_negative=0)],
                   f"{hint}_margin_bad")
        count = g.reduce_sum(g.op("Cast", [bad], f"{hint}_margin_bad_f", to=onnx.TensorProto.FLOAT), [1], keepdims=True, hint=f"{hint}_margin_bad_count")
        row_bad = g.op("Greater", [count, g.const(np.float32(0), f"{hint}_zero_f32_key")], f"{hint}_row_bad")
        first = np.zeros(ens.n_classes[0], m.dtype)
        first[0] = 1
        key = g.op("Where", [row_bad, g.const(first, f"{hint}_first_class"), key], f"{hint}_key")
    return g.op("ArgMax", [key], hint, axis=1, keepdims=0)


def _representative(ens: Ensemble, m: Margin, value: float, up: bool) -> list[np.ndarray]:
    """The normalized digits of ``value`` (see :func:`_in_sum`) rounded to the last grid, down
    or ``up``."""
    assert m.plan is not None
    value, e = _in_sum(ens, m, value), m.plan.exponents[-1]
    grid = np.ldexp(np.ceil(np.ldexp(value, -e)) if up else np.floor(np.ldexp(value, -e)), e)
    return _digits.normalized(np.asarray([float(grid)]), m.plan)


def _positive(g: GraphBuilder, link: Link, m: Margin) -> str:
    """p of a binary link (see ``BINARY_LINKS``), elementwise on the margin."""
    if link is Link.MARGIN:
        return m.value
    if link is Link.STEP:
        hit = g.op("Greater", [m.value, _const(g, m, 0, "zero_margin")], "margin_positive")
        return g.op("Cast", [hit], "p_positive", to=ONNX_TYPE[m.dtype])
    z = m.value if link is Link.LOGISTIC else g.op("Mul", [m.value, _const(g, m, 2, "two")], "margin2")
    return g.op("Sigmoid", [z], "p_positive")


def _probabilities(g: GraphBuilder, ens: Ensemble, m: Margin, opts: GraphOptions) -> str:
    if ens.link in BINARY_LINKS:  # one margin column per target: [1 - p, p]
        p = _positive(g, ens.link, m)
        q = g.op("Sub", [_const(g, m, 1, "one"), p], "p_negative")
        if len(ens.classes) > 1:
            q, p = g.unsqueeze(q, [2], "p_negative3"), g.unsqueeze(p, [2], "p_positive3")
        probs = g.op("Concat", [q, p], "probs_all", axis=1 if len(ens.classes) == 1 else 2)
    elif ens.link is Link.SOFTMAX:
        probs = g.op("Softmax", [m.value], "probs_all", axis=1)
    elif ens.link is Link.SIGMOID:  # one-vs-all
        probs = g.op("Sigmoid", [m.value], "probs_all")
    else:
        probs = m.value
    if len(ens.classes) > 1 and ens.link not in BINARY_LINKS:
        width = max(ens.n_classes)
        parts, start = [], 0
        for j, c in enumerate(ens.n_classes):
            part = g.slice_cols(probs, start, start + c, f"probs_group{j}")
            pads = g.const(np.asarray([0, 0, 0, width - c], np.int64), f"pads{j}")
            padded = g.op("Pad", [part, pads], f"probs_padded{j}")
            parts.append(g.unsqueeze(padded, [1], f"probs3_{j}"))
            start += c
        probs = g.op("Concat", parts, "probs_groups", axis=1)
    return _as(g, probs, "probabilities", m.dtype, opts)


def _exp(g: GraphBuilder, m: Margin) -> str:
    """exp of the margin; with a residual r, exp(m) (1 + r): a float32 margin's rounding (up to
    6e-8 x |m|) would otherwise be the relative error of the result."""
    y = g.op("Exp", [m.value], "exp_margin")
    if m.residual is None:
        return y
    return g.op("Mul", [y, g.op("Add", [_const(g, m, 1, "one_exp"), m.residual], "exp_residual")], "exp_margin_exact")


def _as(g: GraphBuilder, x: str, name: str, dtype: np.dtype, opts: GraphOptions) -> str:
    """The output ``name``: ``x`` (of ``dtype``) in the graph's output dtype."""
    if np.dtype(dtype) == np.dtype(opts.dtype):
        return g.op("Identity", [x], out=name)
    return g.op("Cast", [x], out=name, to=ONNX_TYPE[np.dtype(opts.dtype)])


def emit(g: GraphBuilder, ens: Ensemble, m: Margin, opts: GraphOptions) -> list[onnx.ValueInfoProto]:
    """Add the output nodes; return the graph's output value infos."""
    fdtype = np.dtype(opts.dtype)
    outs: list[onnx.ValueInfoProto] = []
    if ens.task is Task.CLASSIFICATION:
        _labels(g, ens, m)
        shape: list[int | str] = ["N"] if len(ens.classes) == 1 else ["N", len(ens.classes)]
        outs.append(tensor_info("label", label_dtype(ens.classes), shape))
    if ens.task is Task.OUTLIER:
        outs.extend(_outlier(g, ens, m, opts))
    if opts.raw:
        _as(g, m.value, "variable", m.dtype, opts)
        outs.append(tensor_info("variable", fdtype, ["N", ens.n_outputs]))
    elif ens.task is Task.CLASSIFICATION:
        _probabilities(g, ens, m, opts)
        if len(ens.classes) == 1:
            shape = ["N", ens.n_classes[0]]
        else:
            shape = ["N", len(ens.classes), max(ens.n_classes)]
        outs.append(tensor_info("probabilities", fdtype, shape))
    elif ens.task is Task.REGRESSION:
        y = m.value
        if ens.link is Link.EXP:
            y = _exp(g, m)
        elif ens.link is Link.SIGMOID:
            y = g.op("Sigmoid", [m.value], "sigmoid_margin")
        elif ens.link is Link.SOFTPLUS:
            y = softplus(g, m.value, "softplus_margin", m.dtype)
        _as(g, y, "variable", m.dtype, opts)
        outs.append(tensor_info("variable", fdtype, ["N", ens.n_outputs]))
    return outs


def _outlier(g: GraphBuilder, ens: Ensemble, m: Margin, opts: GraphOptions) -> list[onnx.ValueInfoProto]:
    params = ens.outlier
    assert params is not None  # Ensemble.validate guarantees it
    fdtype = np.dtype(opts.dtype)
    cutoff = isolation_cutoff(params)
    if params.denominator == 0:  # sklearn: a single training sample scores 2 ** -1
        ratio = g.op("Add", [g.op("Mul", [m.value, _const(g, m, 0, "zero_margin")], "zeros"), _const(g, m, 1, "one")], "ratio")
        outlier = g.op("Squeeze", [g.op("Less", [ratio, _const(g, m, min(max(cutoff, -2.0), 2.0), "ratio_cutoff")], "is_outlier_2d"),
                                   g.const(np.asarray([1], np.int64), "squeeze_axis")], "is_outlier")
    else:
        ratio = g.op("Div", [m.value, _const(g, m, params.denominator, "denominator")], "ratio")
        # The label compares the margin with the cutoff of the ratio found with numpy's pow (see
        # isolation_cutoff), not the score: Pow here may differ from numpy's in the last bit.
        if m.dtype == np.float64 and np.isfinite(cutoff):
            outlier = g.op("Less", [ratio, g.const(np.float64(cutoff), "ratio_cutoff")], "is_outlier_2d")
        else:  # the margin against cutoff x denominator (exactly on digits, else in float32)
            limit = float(np.finfo(np.float64).max)
            at_least = _above(g, ens, m, float(np.clip(cutoff * params.denominator, -limit, limit)), False, "not_outlier")
            outlier = g.op("Not", [at_least], "is_outlier_2d")
        if not m.flat:  # (flat: digit sums of one output, [N] already)
            outlier = g.op("Squeeze", [outlier, g.const(np.asarray([1], np.int64), "squeeze_axis")], "is_outlier")
    power = g.op("Pow", [_const(g, m, 2, "two"), g.op("Neg", [ratio], "neg_ratio")], "power")
    samples = g.op("Neg", [power], "score_samples_all")
    scores = g.op("Sub", [samples, _const(g, m, params.offset, "offset")], "scores_all")
    g.op("Where", [outlier, g.const(np.int64(-1), "minus_one"), g.const(np.int64(1), "plus_one")], out="label")
    outs = [tensor_info("label", np.int64, ["N"])]
    if not opts.raw:
        _as(g, scores, "scores", m.dtype, opts)
        _as(g, samples, "score_samples", m.dtype, opts)
        outs += [tensor_info("scores", fdtype, ["N", 1]), tensor_info("score_samples", fdtype, ["N", 1])]
    return outs
