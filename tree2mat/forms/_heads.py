"""The shared head: from the margin [N, K] (float64) to the graph contract's outputs.

Differences between model kinds are IR data (link, label rule, classes), applied here once for
every form. Classifiers: ``label`` [N] (int64 or string) and ``probabilities`` [N, C]; with several
targets ``label`` [N, G] and ``probabilities`` [N, G, max C] (zero-padded). Regressors:
``variable`` [N, K]. Outlier detectors: ``label`` [N] (-1/1), ``scores`` [N, 1]
(``decision_function``) and ``score_samples`` [N, 1]. With ``raw``: ``variable`` is the margin
and classifiers keep ``label``.
"""

from __future__ import annotations

import numpy as np
import onnx

from tree2mat.forms._graph import ONNX_TYPE, GraphBuilder, GraphOptions, softplus, tensor_info
from tree2mat.ir.core import BINARY_LINKS, Ensemble, LabelRule, Link, Task
from tree2mat.ir.evaluate import isolation_cutoff, sigmoid_plateaus


def label_dtype(classes: tuple[np.ndarray, ...]) -> str:
    return "string" if classes[0].dtype.kind in "USO" else "int64"


def _labels(g: GraphBuilder, ens: Ensemble, m: str) -> str:
    binary = ens.label_rule in (LabelRule.POSITIVE, LabelRule.NON_NEGATIVE)  # one column per target
    if binary:
        cmp = "Greater" if ens.label_rule is LabelRule.POSITIVE else "GreaterOrEqual"
        hit = g.op(cmp, [m, g.const(np.float64(ens.label_cutoff), "label_cutoff")], "positive")
        index = g.op("Cast", [hit], "class_indices", to=onnx.TensorProto.INT64)
    if len(ens.classes) == 1:
        if binary:
            idx = g.op("Squeeze", [index, g.const(np.asarray([1], np.int64), "squeeze_axis")], "class_index")
        else:
            idx = g.op("ArgMax", [_argmax_key(g, ens, m)], "class_index", axis=1, keepdims=0)
        return g.op("Gather", [g.const(ens.classes[0], "classes"), idx], out="label", axis=0)
    cols, start = [], 0
    for j, classes in enumerate(ens.classes):
        if binary:
            idx = g.slice_cols(index, j, j + 1, f"class_index{j}")
        else:
            part = g.slice_cols(m, start, start + len(classes), f"margin_group{j}")
            idx = g.op("ArgMax", [part], f"class_index{j}", axis=1, keepdims=1)
        cols.append(g.op("Gather", [g.const(classes, f"classes{j}"), idx], f"label{j}", axis=0))
        start += len(classes)
    return g.op("Concat", cols, out="label", axis=1)


def _argmax_key(g: GraphBuilder, ens: Ensemble, m: str) -> str:
    """The graph's :func:`tree2mat.ir.evaluate.argmax_key` (softmax and sigmoid links have a
    single output group)."""
    if ens.link not in (Link.SIGMOID, Link.SOFTMAX):
        return m
    inf = g.const(np.float64(np.inf), "inf_f64")
    if ens.link is Link.SIGMOID:
        low, high = sigmoid_plateaus()
        clipped = g.op("Min", [g.op("Max", [m, g.const(np.float64(low), "sigmoid_low")], "key_low"),
                               g.const(np.float64(high), "sigmoid_high")], "key_clipped")
        return g.op("Where", [g.op("IsNaN", [m], "margin_isnan"), inf, clipped], "argmax_key")
    # softmax: a row with NaN or +inf anywhere
    bad = g.op("Or", [g.op("IsNaN", [m], "margin_isnan"), g.op("IsInf", [m], "margin_isposinf", detect_negative=0)], "margin_bad")
    count = g.reduce_sum(g.op("Cast", [bad], "margin_bad_f", to=onnx.TensorProto.FLOAT), [1], keepdims=True, hint="margin_bad_count")
    row_bad = g.op("Greater", [count, g.const(np.float32(0), "zero_f32_key")], "row_bad")
    return g.op("Where", [row_bad, inf, m], "argmax_key")


def _positive(g: GraphBuilder, link: Link, m: str) -> str:
    """p of a binary link (see ``BINARY_LINKS``), elementwise on the margin."""
    if link is Link.MARGIN:
        return m
    if link is Link.STEP:
        hit = g.op("Greater", [m, g.const(np.float64(0), "zero_f64")], "margin_positive")
        return g.op("Cast", [hit], "p_positive", to=onnx.TensorProto.DOUBLE)
    z = m if link is Link.LOGISTIC else g.op("Mul", [m, g.const(np.float64(2), "two")], "margin2")
    return g.op("Sigmoid", [z], "p_positive")


def _probabilities(g: GraphBuilder, ens: Ensemble, m: str, opts: GraphOptions) -> str:
    if ens.link in BINARY_LINKS:  # one margin column per target: [1 - p, p]
        p = _positive(g, ens.link, m)
        q = g.op("Sub", [g.const(np.float64(1), "one_f64"), p], "p_negative")
        if len(ens.classes) > 1:
            q, p = g.unsqueeze(q, [2], "p_negative3"), g.unsqueeze(p, [2], "p_positive3")
        probs = g.op("Concat", [q, p], "probs64", axis=1 if len(ens.classes) == 1 else 2)
    elif ens.link is Link.SOFTMAX:
        probs = g.op("Softmax", [m], "probs64", axis=1)
    elif ens.link is Link.SIGMOID:  # one-vs-all
        probs = g.op("Sigmoid", [m], "probs64")
    else:
        probs = m
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
    return g.op("Cast", [probs], out="probabilities", to=ONNX_TYPE[np.dtype(opts.dtype)])


def emit(g: GraphBuilder, ens: Ensemble, m: str, opts: GraphOptions) -> list[onnx.ValueInfoProto]:
    """Add the output nodes; return the graph's output value infos."""
    fdtype = np.dtype(opts.dtype)
    to = ONNX_TYPE[fdtype]
    outs: list[onnx.ValueInfoProto] = []
    if ens.task is Task.CLASSIFICATION:
        _labels(g, ens, m)
        shape: list[int | str] = ["N"] if len(ens.classes) == 1 else ["N", len(ens.classes)]
        outs.append(tensor_info("label", label_dtype(ens.classes), shape))
    if ens.task is Task.OUTLIER:
        outs.extend(_outlier(g, ens, m, opts))
    if opts.raw:
        g.op("Cast", [m], out="variable", to=to)
        outs.append(tensor_info("variable", fdtype, ["N", ens.n_outputs]))
    elif ens.task is Task.CLASSIFICATION:
        _probabilities(g, ens, m, opts)
        if len(ens.classes) == 1:
            shape = ["N", ens.n_classes[0]]
        else:
            shape = ["N", len(ens.classes), max(ens.n_classes)]
        outs.append(tensor_info("probabilities", fdtype, shape))
    elif ens.task is Task.REGRESSION:
        y = m
        if ens.link is Link.EXP:
            y = g.op("Exp", [m], "exp_margin")
        elif ens.link is Link.SIGMOID:
            y = g.op("Sigmoid", [m], "sigmoid_margin")
        elif ens.link is Link.SOFTPLUS:
            y = softplus(g, m, "softplus_margin")
        g.op("Cast", [y], out="variable", to=to)
        outs.append(tensor_info("variable", fdtype, ["N", ens.n_outputs]))
    return outs


def _outlier(g: GraphBuilder, ens: Ensemble, m: str, opts: GraphOptions) -> list[onnx.ValueInfoProto]:
    params = ens.outlier
    assert params is not None  # Ensemble.validate guarantees it
    fdtype = np.dtype(opts.dtype)
    to = ONNX_TYPE[fdtype]
    if params.denominator == 0:  # sklearn: a single training sample scores 2 ** -1
        ratio = g.op("Add", [g.op("Mul", [m, g.const(np.float64(0), "zero_f64")], "zeros"),
                             g.const(np.float64(1), "one_f64")], "ratio")
    else:
        ratio = g.op("Div", [m, g.const(np.float64(params.denominator), "denominator")], "ratio")
    power = g.op("Pow", [g.const(np.float64(2), "two"), g.op("Neg", [ratio], "neg_ratio")], "power")
    samples = g.op("Neg", [power], "score_samples64")
    scores = g.op("Sub", [samples, g.const(np.float64(params.offset), "offset")], "scores64")
    # The label compares the ratio with a cutoff found with numpy's pow (see isolation_cutoff),
    # not the score: Pow here may differ from numpy's in the last bit at the offset itself.
    ratio_col = g.op("Squeeze", [ratio, g.const(np.asarray([1], np.int64), "squeeze_axis")], "ratio_col")
    cutoff = g.const(np.float64(isolation_cutoff(params)), "ratio_cutoff")
    outlier = g.op("Less", [ratio_col, cutoff], "is_outlier")
    g.op("Where", [outlier, g.const(np.int64(-1), "minus_one"), g.const(np.int64(1), "plus_one")], out="label")
    outs = [tensor_info("label", np.int64, ["N"])]
    if not opts.raw:
        g.op("Cast", [scores], out="scores", to=to)
        g.op("Cast", [samples], out="score_samples", to=to)
        outs += [tensor_info("scores", fdtype, ["N", 1]), tensor_info("score_samples", fdtype, ["N", 1])]
    return outs
