"""LightGBM frontend: the model text (``Booster.save_model`` / ``model_to_string``), parsed field
by field (lightgbm not needed), and the library's own predictions for ``verify`` (lightgbm needed).

Semantics followed (LightGBM 4.x, ``include/LightGBM/tree.h``): inputs are float64, and values
within 1e-35 of zero become 0 before prediction; a numeric node goes left when ``x <= threshold``
(float64). Its ``decision_type`` says where missing values go: missing type None sends NaN where
0 goes, Zero sends 0 (and NaN) by ``default_left``, NaN sends NaN by ``default_left``. A
categorical node goes left when ``int(x)`` is in its bitset; NaN, negative codes and codes outside
the bitset go right. Linear leaves output ``const + sum coef * x`` unless a used feature is NaN.
Trees add in order in float64 into class ``t % num_class``; ``average_output`` (boosting ``rf``)
divides by the number of iterations.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from math import inf
from pathlib import Path
from typing import Any

import numpy as np

from tree2mat.errors import ModelFileError, UnsupportedModelError
from tree2mat.frontends._spec import FileFormat, FrontendSpec
from tree2mat.frontends._support import SupportRow, normalize_classes
from tree2mat.frontends.loading import MALFORMED, read_head
from tree2mat.ir.build import tree_from_nodes
from tree2mat.ir.core import (
    Aggregation,
    CategoryCodes,
    Comparison,
    Ensemble,
    LabelRule,
    Link,
    Task,
    Tree,
)
from tree2mat.ir.evaluate import first_float, sigmoid
from tree2mat.ir.limits import Declared, declare, trees_read

#: LightGBM's kZeroThreshold (a float32 1e-35, compared in float64).
ZERO_THRESHOLD = float(np.float32(1e-35))
_CATEGORICAL, _DEFAULT_LEFT = 1, 2
_MISSING_NONE, _MISSING_ZERO, _MISSING_NAN = 0, 1, 2


@dataclass(frozen=True)
class Objective:
    task: Task
    link: Link


_REG = Objective(Task.REGRESSION, Link.IDENTITY)
_EXP = Objective(Task.REGRESSION, Link.EXP)
OBJECTIVES: dict[str, Objective] = {
    "regression": _REG,
    "regression_l1": _REG,
    "huber": _REG,
    "fair": _REG,
    "quantile": _REG,
    "mape": _REG,
    "poisson": _EXP,
    "gamma": _EXP,
    "tweedie": _EXP,
    "binary": Objective(Task.CLASSIFICATION, Link.LOGISTIC),
    "multiclass": Objective(Task.CLASSIFICATION, Link.SOFTMAX),
    "multiclassova": Objective(Task.CLASSIFICATION, Link.SIGMOID),
    "cross_entropy": Objective(Task.REGRESSION, Link.SIGMOID),
    "cross_entropy_lambda": Objective(Task.REGRESSION, Link.SOFTPLUS),
    "lambdarank": _REG,
    "rank_xendcg": _REG,
}


# ----------------------------------------------------------------------------- model text


@dataclass
class ModelText:
    header: dict[str, str]
    trees: list[dict[str, str]]
    name: str
    rest: str  # what follows the trees: feature importances, parameters, pandas_categorical


#: Line ends as LightGBM's reader takes them (``Common::GetLine`` / ``SkipNewLine``).
_NEWLINE = re.compile(rb"\r\n|\r|\n")
#: Lines of a tree block LightGBM reads at most (``Tree::Tree(const char*, size_t*)``).
_TREE_LINES = 22
#: Header keys whose value may hold '=' (LightGBM refuses such a line under any other key).
_FREE_TEXT_KEYS = ("feature_names", "monotone_constraints")


def _lines(data: bytes, start: int) -> Iterator[tuple[int, bytes]]:
    """``(offset, line)`` for each line of ``data`` from ``start``, an empty line for each
    blank one."""
    pos = start
    while pos < len(data):
        match = _NEWLINE.search(data, pos)
        end = match.start() if match else len(data)
        yield pos, data[pos:end]
        pos = match.end() if match else len(data)


def parse_text(text: str | bytes, name: str = "LightGBM model") -> ModelText:
    """Split a model text into its header and per-tree ``key=value`` blocks as LightGBM's loader
    does (``GBDT::LoadModelFromString``, LightGBM 4.x): the header runs to the first ``Tree=``
    line; with ``tree_sizes`` tree ``i`` is read at that line's offset plus the sizes (bytes) of
    the trees before it, and there are as many trees as sizes; without it (texts written before
    mid-2018) the trees follow one another and the first other line (``end of trees``, or
    ``feature importances:`` in older texts) ends them. A tree block ends at a blank line (or
    after 22 lines). The number after ``Tree=`` is not read. Where LightGBM refuses the text, or
    would read past its end, the text is refused."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    if b"\0" in data:
        raise ModelFileError(f"{name}: not a LightGBM model text (it holds a NUL byte)")
    if b"\r" in data and b"\n" not in data[:-1]:  # (LightGBM's Python package loops on a lone final LF too)
        raise ModelFileError(
            f"{name}: a LightGBM model text whose lines end in CR alone, which LightGBM's file loader does not "
            "finish reading (4.7 never returns); convert its line ends to LF"
        )
    first = next(_lines(data, 0), (0, b""))[1].strip()
    if first == b"gbdt":
        raise UnsupportedModelError(
            f"{name}: an early LightGBM model text (first line 'gbdt', as LightGBM wrote them in 2016), which LightGBM itself no "
            "longer loads (4.x: 'Unknown model format or submodel type'); re-train the model with a current LightGBM"
        )
    if first != b"tree":
        raise ModelFileError(f"{name}: not a LightGBM model text (first line is not 'tree')")
    header: dict[str, str] = {}
    trees_at = len(data)
    for number, (offset, raw) in enumerate(_lines(data, 0), start=1):
        if raw.startswith(b"Tree="):
            trees_at = offset
            break
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ModelFileError(f"{name}: line {number}: not UTF-8 text ({exc.reason})") from exc
        parts = [p for p in line.split("=") if p]  # Common::Split drops empty parts
        if len(parts) == 1:
            header[parts[0]] = ""  # flags such as average_output
        elif len(parts) == 2:
            header[parts[0]] = parts[1]
        elif parts and parts[0] in _FREE_TEXT_KEYS:
            header[parts[0]] = line[len(parts[0]) + 1 :]
        elif parts:
            raise ModelFileError(f"{name}: line {number}: LightGBM refuses this line ('Wrong line at model file'): {line[:40]!r}")
    for key in ("num_class", "label_index", "max_feature_idx", "feature_names", "feature_infos"):
        if key not in header:  # LightGBM: "Model file doesn't contain ..."
            raise ModelFileError(f"{name}: ill-formed LightGBM model: need {key} (LightGBM refuses a model text without it)")
    if "tree_sizes" in header:
        starts = _sized_tree_starts(data, trees_at, header["tree_sizes"], name)
        trees = [_tree_block(data, start, name, t)[0] for t, start in enumerate(starts)]
        rest_at = trees_at + sum(_sizes(header["tree_sizes"], name))
    else:
        trees, rest_at = _sequential_trees(data, trees_at, name)
    if not trees:
        raise ModelFileError(f"{name}: truncated LightGBM model text (no trees)")
    return ModelText(header, trees, name, data[min(rest_at, len(data)) :].decode("utf-8", "replace"))


def _split(value: str) -> list[str]:
    """``value`` split as LightGBM splits a list (``Common::Split(str, ' ')``): on spaces alone,
    empty parts dropped."""
    return [part for part in value.split(" ") if part]


def _sizes(value: str, name: str) -> list[int]:
    sizes = _split(value)
    if any(not s.isdigit() or not s.isascii() or len(s) > 18 for s in sizes):
        raise ModelFileError(f"{name}: ill-formed LightGBM model: tree_sizes must be byte counts")
    return [int(s) for s in sizes]


def _sized_tree_starts(data: bytes, trees_at: int, value: str, name: str) -> list[int]:
    """Where each tree's block starts when ``tree_sizes`` places the trees (after its
    ``Tree=`` line)."""
    starts = []
    offset = trees_at
    for t, size in enumerate(_sizes(value, name)):
        line = next(_lines(data, offset), (offset, b""))[1] if offset < len(data) else None
        if line is None:
            raise ModelFileError(f"{name}: truncated LightGBM model text (tree_sizes places tree {t} past the end)")
        if not line.startswith(b"Tree="):
            raise ModelFileError(
                f"{name}: ill-formed LightGBM model: tree_sizes does not match the tree blocks: it places tree {t} "
                f"at byte {offset}, where no 'Tree=' line starts (LightGBM cannot load it either: 'Model format "
                "error, expect a tree here'); remove the tree_sizes line or correct it"
            )
        starts.append(_after_line(data, offset + len(line)))
        offset += size
    return starts


def _after_line(data: bytes, end: int) -> int:
    """The offset after the line end at ``end`` (``Common::SkipNewLine``)."""
    match = _NEWLINE.match(data, end)
    return match.end() if match else end


def _sequential_trees(data: bytes, trees_at: int, name: str) -> tuple[list[dict[str, str]], int]:
    """Trees one after another (no ``tree_sizes``): a ``Tree=`` line, its block; blank lines
    between; the first other line ends the trees."""
    trees: list[dict[str, str]] = []
    pos = trees_at
    while pos < len(data):
        line = next(_lines(data, pos))[1]
        if not line:
            pos = _after_line(data, pos)
            continue
        if not line.startswith(b"Tree="):
            break
        block, pos = _tree_block(data, _after_line(data, pos + len(line)), name, len(trees))
        trees.append(block)
    return trees, pos


def _tree_block(data: bytes, start: int, name: str, t: int) -> tuple[dict[str, str], int]:
    """Tree ``t``'s ``key=value`` lines from ``start`` up to a blank line (or 22 lines, as
    LightGBM reads them), and where the block ends."""
    block: dict[str, str] = {}
    pos = start
    for _ in range(_TREE_LINES):
        if pos >= len(data):
            raise ModelFileError(f"{name}: truncated LightGBM model text (tree {t} has no blank line after it)")
        line = next(_lines(data, pos))[1]
        if not line:
            break
        try:
            key, sep, value = line.decode("utf-8").partition("=")
        except UnicodeDecodeError as exc:
            raise ModelFileError(f"{name}: tree {t}: not UTF-8 text ({exc.reason})") from exc
        if not sep:
            raise ModelFileError(f"{name}: tree {t}: expected key=value, found {key[:40]!r}")
        block[key] = value
        pos = _after_line(data, pos + len(line))
    return block, pos


def _get(block: dict[str, str], key: str, where: str) -> str:
    if key not in block:
        raise ModelFileError(f"{where}: ill-formed LightGBM model: need {key}")
    return block[key]


#: Numbers as LightGBM writes and reads them (ASCII only: Python alone would also take "1_000"
#: or non-ASCII digits, which LightGBM reads differently).
_INT = re.compile(r"[+-]?[0-9]+")
_NOT_INT_CHAR = re.compile(r"[^0-9 +-]")
_FLOAT = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|nan)", re.IGNORECASE)


def _int(block: dict[str, str], key: str, where: str) -> int:
    value = _get(block, key, where)
    if not _INT.fullmatch(value) or len(value) > 18:
        raise ModelFileError(f"{where}: ill-formed LightGBM model: {key} is not an integer")
    return int(value)


def _numbers(block: dict[str, str], key: str, where: str, n: int, dtype: type) -> np.ndarray:
    text = _get(block, key, where).split()
    if len(text) != n:
        raise ModelFileError(f"{where}: ill-formed LightGBM model: {key} has {len(text)} values, expected {n}")
    if dtype is int and text and not _NOT_INT_CHAR.search(" ".join(text)) and max(map(len, text)) <= 18:
        try:  # the common case, at numpy's speed: a bitset can hold millions of words
            return np.asarray(text, dtype=np.int64)
        except ValueError:  # a sign inside a number: the message below names it
            pass
    pattern = _INT if dtype is int else _FLOAT
    bad = next((v for v in text if not pattern.fullmatch(v) or (dtype is int and len(v) > 18)), None)
    if bad is not None:
        raise ModelFileError(f"{where}: ill-formed LightGBM model: {key}: {bad[:30]!r} is not a number")
    return np.asarray([dtype(v) for v in text], np.int64 if dtype is int else np.float64)


def _bitset_values(words: np.ndarray) -> np.ndarray:
    """The positions of the set bits of uint32 ``words`` (LightGBM's category bitsets), read
    from the nonzero words only."""
    nonzero = np.flatnonzero(words)
    bits = (words[nonzero, None] >> np.arange(32, dtype=np.int64)) & 1
    word, bit = np.nonzero(bits)
    return (nonzero[word] * 32 + bit).astype(np.float64)


def _tree(block: dict[str, str], where: str) -> Tree:
    n_leaves = _int(block, "num_leaves", where)
    if n_leaves < 1:
        raise ModelFileError(f"{where}: ill-formed LightGBM model: num_leaves {n_leaves}")
    n_int = n_leaves - 1
    n_cat = _int(block, "num_cat", where)  # LightGBM needs it in every tree
    leaf_value = _numbers(block, "leaf_value", where, n_leaves, float)
    if n_int == 0:
        tree = Tree(
            feature=np.zeros(0, np.int64), threshold=np.zeros(0), default_left=np.zeros(0, bool),
            left=np.zeros(0, np.int64), right=np.zeros(0, np.int64), value=leaf_value[:, None],
        )
        return _with_leaf_extras(tree, block, where, np.zeros(1, np.int64))
    feature = _numbers(block, "split_feature", where, n_int, int)
    threshold = _numbers(block, "threshold", where, n_int, float)
    dtype, is_cat = _node_kinds(block, where, n_int)
    left = _numbers(block, "left_child", where, n_int, int)
    right = _numbers(block, "right_child", where, n_int, int)
    missing = (dtype >> 2) & 3
    if np.any(missing == 3):
        raise ModelFileError(f"{where}: ill-formed LightGBM model: unknown missing type 3")
    default_left = (dtype & _DEFAULT_LEFT) > 0
    with np.errstate(invalid="ignore"):
        # Missing type None: NaN is replaced by 0, which then meets the threshold.
        default_left = np.where(missing == _MISSING_NONE, 0.0 <= threshold, default_left)
    default_left[is_cat] = False  # categorical: NaN (and anything not in the set) goes right
    categories = _categories(block, where, n_cat, threshold, is_cat)
    # Node space for tree_from_nodes: internal nodes 0..I-1, leaf j at I + j.
    n = n_int + n_leaves
    ref = lambda c: np.where(c >= 0, c, n_int + (-1 - c))  # noqa: E731
    if np.any((left < -n_leaves) | (left >= n_int) | (right < -n_leaves) | (right >= n_int)):
        raise ModelFileError(f"{where}: ill-formed LightGBM model: a child index is out of range")
    pad = np.zeros(n_leaves, np.int64)
    zero = (missing == _MISSING_ZERO) & ~is_cat
    tree = tree_from_nodes(
        np.concatenate([ref(left), pad]), np.concatenate([ref(right), pad]),
        np.arange(n) >= n_int, np.concatenate([feature, pad]),
        np.concatenate([np.where(is_cat, 0.0, threshold), np.zeros(n_leaves)]),
        np.concatenate([default_left, np.zeros(n_leaves, bool)]),
        np.concatenate([np.zeros(n_int), leaf_value]),
        categories={node: (vals, np.ones(vals.size, bool)) for node, vals in categories.items()},
        zero_missing=np.concatenate([zero, np.zeros(n_leaves, bool)]) if zero.any() else None,
        where=where,
    )
    if tree.n_internal != n_int or tree.n_leaves != n_leaves:
        raise ModelFileError(f"{where}: ill-formed LightGBM model: some nodes are not reachable from the root")
    assert tree.leaf_source_id is not None  # (tree_from_nodes numbers the leaves)
    return _with_leaf_extras(tree, block, where, tree.leaf_source_id - n_int)


def _with_leaf_extras(tree: Tree, block: dict[str, str], where: str, order: np.ndarray) -> Tree:
    """``tree`` with LightGBM's leaf index of each IR leaf (``order``) and its linear leaves, if
    any (a one-leaf linear tree too: LightGBM predicts its constant and terms)."""
    extras: dict[str, Any] = {"leaf_source_id": order}
    linear = block.get("is_linear", "0")
    if linear not in ("0", "1"):
        raise ModelFileError(f"{where}: ill-formed LightGBM model: is_linear must be 0 or 1")
    if linear == "1":
        extras.update(_linear(block, where, tree.n_leaves, order))
    return dataclasses.replace(tree, **extras)


def _categories(
    block: dict[str, str], where: str, n_cat: int, threshold: np.ndarray, is_cat: np.ndarray
) -> dict[int, np.ndarray]:
    """Per categorical node, the category codes its bitset holds (only the set bits are kept:
    a bitset spanning millions of codes costs what its set bits cost)."""
    values: dict[int, np.ndarray] = {}  # (per bitset: many nodes may name one)
    out = {}
    for node, (idx, words) in _bitsets(block, where, n_cat, threshold, is_cat).items():
        out[node] = values[idx] if idx in values else values.setdefault(idx, _bitset_values(words))
    return out


def _bitsets(block: dict[str, str], where: str, n_cat: int, threshold: np.ndarray, is_cat: np.ndarray) -> dict[int, tuple[int, np.ndarray]]:
    """Per categorical node, the index of the bitset it names and its uint32 words (views of one
    array)."""
    if not is_cat.any():
        return {}
    bounds = _numbers(block, "cat_boundaries", where, n_cat + 1, int)
    if bounds[0] != 0 or np.any(np.diff(bounds) < 0):
        raise ModelFileError(f"{where}: ill-formed LightGBM model: cat_boundaries must rise from 0")
    words = _numbers(block, "cat_threshold", where, int(bounds[-1]), int)
    if np.any((words < 0) | (words >= 2**32)):
        raise ModelFileError(f"{where}: ill-formed LightGBM model: cat_threshold words must be uint32")
    nodes = np.flatnonzero(is_cat)
    named = threshold[nodes]
    # (checked at once: a file may hold hundreds of thousands of categorical nodes)
    bad = ~(np.isfinite(named) & (named >= 0) & (named < n_cat))
    bad[~bad] = named[~bad] != np.floor(named[~bad])
    if bad.any():
        first = int(np.argmax(bad))
        raise ModelFileError(f"{where}: ill-formed LightGBM model: node {nodes[first]} names bitset {named[first]}")
    starts, stops = bounds[:-1].tolist(), bounds[1:].tolist()
    return {node: (idx, words[starts[idx] : stops[idx]]) for node, idx in zip(nodes.tolist(), named.astype(np.int64).tolist())}


def _set_bits(words: np.ndarray) -> int:
    """How many bits of the uint32 ``words`` are set (numpy 1.26 has no ``bitwise_count``)."""
    return int(np.unpackbits(np.ascontiguousarray(words, np.uint32).view(np.uint8)).sum())


def _node_kinds(block: dict[str, str], where: str, n_int: int) -> tuple[np.ndarray, np.ndarray]:
    """Each internal node's ``decision_type`` (left out: 0, numeric) and whether it is
    categorical."""
    # decision_type may be left out (LightGBM reads 0: numeric, missing type None, right)
    dtype = _numbers(block, "decision_type", where, n_int, int) if "decision_type" in block else np.zeros(n_int, np.int64)
    if np.any((dtype < 0) | (dtype > 127)):
        raise ModelFileError(f"{where}: ill-formed LightGBM model: decision_type outside [0, 127]")
    return dtype, (dtype & _CATEGORICAL) > 0


def _declared(model: ModelText, k: int, name: str) -> Declared:
    """The sizes the model text declares, read from its numbers of leaves and its bitsets (the
    set bits counted, never listed), before any tree is built."""
    leaves = [_int(block, "num_leaves", f"{name}: tree {t}") for t, block in enumerate(model.trees)]
    if min(leaves) < 1:
        raise ModelFileError(f"{name}: ill-formed LightGBM model: num_leaves {min(leaves)}")
    nodes = Declared(trees=len(leaves), internal=sum(leaves) - len(leaves), leaves=sum(leaves), outputs=k)
    declare(nodes, name)  # (before a list of that many numbers is looked for)
    counts: list[int] = []
    columns: dict[int, np.ndarray] = {}  # per column, its nodes' bitsets OR-ed
    merged: set[tuple[int, int, int]] = set()  # (column, tree, bitset) already OR-ed in
    for t, block in enumerate(model.trees):
        where = f"{name}: tree {t}"
        if leaves[t] < 2 or _int(block, "num_cat", where) == 0:
            continue
        _, is_cat = _node_kinds(block, where, leaves[t] - 1)
        if not is_cat.any():
            continue
        feature = _numbers(block, "split_feature", where, leaves[t] - 1, int)
        threshold = _numbers(block, "threshold", where, leaves[t] - 1, float)
        set_bits: dict[int, int] = {}  # (per bitset, and each once per column: many nodes may name one)
        for node, (idx, words) in _bitsets(block, where, _int(block, "num_cat", where), threshold, is_cat).items():
            if idx not in set_bits:
                set_bits[idx] = _set_bits(words)
            counts.append(set_bits[idx])
            column = int(feature[node])
            if (column, t, idx) in merged:
                continue
            merged.add((column, t, idx))
            bits = words.astype(np.uint32)
            seen = columns.get(column, np.zeros(0, np.uint32))
            if seen.size < bits.size:
                seen = np.concatenate([seen, np.zeros(bits.size - seen.size, np.uint32)])
            seen[: bits.size] |= bits
            columns[column] = seen
    return dataclasses.replace(
        nodes, categorical_nodes=len(counts), category_entries=sum(counts), widest_node=max(counts, default=0),
        categorical_columns=len(columns), widest_column=max((_set_bits(c) for c in columns.values()), default=0),
    )


def _linear(block: dict[str, str], where: str, n_leaves: int, order: np.ndarray) -> dict[str, np.ndarray]:
    const = _numbers(block, "leaf_const", where, n_leaves, float)
    counts = _numbers(block, "num_features", where, n_leaves, int)
    if np.any(counts < 0):
        raise ModelFileError(f"{where}: ill-formed LightGBM model: num_features must be >= 0")
    total = int(counts.sum())
    feats = _numbers(block, "leaf_features", where, total, int) if total else np.zeros(0, np.int64)
    coefs = _numbers(block, "leaf_coeff", where, total, float) if total else np.zeros(0)
    width = int(counts.max(initial=0))
    feature = np.full((n_leaves, width), -1, np.int64)
    coef = np.zeros((n_leaves, width))
    start = 0
    for j, c in enumerate(counts):
        feature[j, :c] = feats[start : start + c]
        coef[j, :c] = coefs[start : start + c]
        start += c
    if feats.size and feats.min() < 0:
        raise ModelFileError(f"{where}: ill-formed LightGBM model: negative leaf feature")
    return {"linear_const": const[order], "linear_feature": feature[order], "linear_coef": coef[order]}


# ----------------------------------------------------------------------------- ensemble


def _objective(spec: str, name: str) -> tuple[str, Objective, dict[str, str]]:
    tokens = spec.split()
    if not tokens:
        raise ModelFileError(f"{name}: ill-formed LightGBM model: empty objective")
    kind, params = tokens[0], dict(t.partition(":")[::2] for t in tokens[1:])
    if kind not in OBJECTIVES:
        raise UnsupportedModelError(
            f"{name}: LightGBM objective {kind!r} is not supported; supported: {', '.join(OBJECTIVES)}"
        )
    if "sqrt" in params:
        raise UnsupportedModelError(f"{name}: LightGBM objective {kind!r} with reg_sqrt is not supported")
    sigmoid = params.get("sigmoid", "1")
    if kind in ("binary", "multiclassova") and not (_FLOAT.fullmatch(sigmoid) and float(sigmoid) == 1.0):
        raise UnsupportedModelError(f"{name}: LightGBM {kind} with sigmoid {sigmoid} (not 1) is not supported")
    return kind, OBJECTIVES[kind], params


def _as_wrapper(kind: str, obj: Objective, wrapper: str | None, name: str) -> Objective:
    """What the sklearn wrapper makes of the objective: LGBMClassifier reads cross_entropy's
    probability as the positive class's, LGBMRegressor returns binary's probability as a value."""
    if wrapper == "LGBMClassifier" and obj.task is not Task.CLASSIFICATION:
        if kind == "cross_entropy":
            return OBJECTIVES["binary"]
        raise UnsupportedModelError(f"{name}: LGBMClassifier with the {kind!r} objective is not supported")
    if wrapper in ("LGBMRegressor", "LGBMRanker") and obj.task is Task.CLASSIFICATION:
        if kind == "binary":
            return OBJECTIVES["cross_entropy"]
        raise UnsupportedModelError(f"{name}: {wrapper} with the {kind!r} objective is not supported")
    return obj


def from_text(
    text: str | bytes, name: str = "LightGBM model", classes: np.ndarray | None = None, wrapper: str | None = None
) -> Ensemble:
    """The IR of a LightGBM model text; ``wrapper``: the sklearn class that holds it, if any."""
    model = parse_text(text, name)
    header = model.header
    n_features = _int(header, "max_feature_idx", name) + 1
    k = _int(header, "num_tree_per_iteration" if "num_tree_per_iteration" in header else "num_class", name)
    if "objective" in header:
        kind, obj, _ = _objective(header["objective"], name)
    else:  # LightGBM predicts the raw score of a model text without an objective
        kind, obj = "without objective", _REG
    obj = _as_wrapper(kind, obj, wrapper, name)
    if k < 1 or len(model.trees) % k or not model.trees:
        raise ModelFileError(
            f"{name}: ill-formed LightGBM model: {len(model.trees)} trees for {k} trees per iteration"
        )
    if (obj.link is Link.LOGISTIC and k != 1) or (obj.task is Task.CLASSIFICATION and obj.link is not Link.LOGISTIC and k < 2):
        raise ModelFileError(f"{name}: ill-formed LightGBM model: {kind} with {k} trees per iteration")
    declare(_declared(model, k, name), name)
    trees = tuple(_tree(block, f"{name}: tree {t}") for t, block in trees_read(list(enumerate(model.trees))))
    names = _split(header["feature_names"])  # on spaces alone, as LightGBM (a name may hold a tab)
    for key, values in (("feature_names", names), ("feature_infos", _split(header["feature_infos"]))):
        if len(values) != n_features:  # LightGBM: "Wrong size of ..."
            raise ModelFileError(f"{name}: ill-formed LightGBM model: {len(values)} {key} for {n_features} features")
    common: dict[str, Any] = dict(
        trees=trees, n_features=n_features, n_outputs=k, category_labels=pandas_categories(model),
        output_index=np.arange(len(trees), dtype=np.int64) % k,
        comparison=Comparison.LE, source_dtype=np.dtype(np.float64),
        aggregation=Aggregation.MEAN if "average_output" in header else Aggregation.SUM,
        base_score=np.zeros(k), link=obj.link, task=obj.task,
        feature_names=tuple(names), source=f"lightgbm {kind}", zero_band=ZERO_THRESHOLD, category_codes=CategoryCodes.TRUNCATE,
    )
    if obj.task is Task.CLASSIFICATION:
        n_classes = 2 if obj.link is Link.LOGISTIC else k
        labels = np.arange(n_classes) if classes is None else normalize_classes(classes, name)
        common.update(classes=(labels,))
        if obj.link is Link.LOGISTIC:
            common.update(label_rule=LabelRule.NON_NEGATIVE, label_cutoff=binary_cutoff())
    return Ensemble(**common).validate()


def pandas_categories(model: ModelText) -> tuple[tuple[int, tuple[str | int | float, ...]], ...]:
    """The category labels of the pandas ``category`` columns a model was fitted on: the text's
    last line ``pandas_categorical:`` (JSON, written by LightGBM's Python package: per category
    column in DataFrame order, its categories; a value's code is its position) laid on the
    categorical features its ``[categorical_feature: ...]`` parameter lists. Where the two do not
    pair up one to one (categorical features besides the pandas ones) there are no labels: the
    graph still takes LightGBM's codes."""
    line = next((ln for ln in model.rest.splitlines() if ln.startswith("pandas_categorical:")), None)
    if line is None:
        return ()
    try:
        lists = json.loads(line[len("pandas_categorical:") :])
    except ValueError as exc:
        raise ModelFileError(f"{model.name}: ill-formed LightGBM model: pandas_categorical is not JSON ({exc})") from exc
    if lists is None:
        return ()
    params = re.search(r"(?m)^\[categorical_feature: ([0-9,]*)\]\s*$", model.rest)
    columns = [int(c) for c in params.group(1).split(",") if c] if params else []
    if not isinstance(lists, list) or len(columns) != len(lists) or not all(isinstance(v, list) and v for v in lists):
        return ()
    infos = _split(model.header.get("feature_infos", ""))
    for column, values in zip(columns, lists):  # booleans, NaN and the like: no names (the graph takes codes)
        if any(isinstance(v, bool) or not isinstance(v, (str, int, float)) or v != v or v in (inf, -inf) for v in values):
            return ()
        if len(set(values)) != len(values) or not _codes_below(infos, column, len(values)):
            return ()
    return tuple((c, tuple(v)) for c, v in zip(columns, lists))


def _codes_below(infos: list[str], column: int, n: int) -> bool:
    """Whether feature ``column``'s ``feature_infos`` is a category list (``a:b:c``, not a
    ``[min:max]`` range) of codes below ``n``: a check that the pandas column paired with it by
    position is the one LightGBM split on (an ordered pandas category column is coded but not
    categorical, and ``categorical_feature`` may name integer columns too)."""
    if not 0 <= column < len(infos) or infos[column].startswith("["):
        return False
    try:
        codes = [int(c) for c in infos[column].split(":") if c]
    except ValueError:
        return False
    return all(c < n for c in codes)


def binary_cutoff() -> float:
    """The smallest margin LGBMClassifier labels 1: its probability ``p = 1 / (1 + exp(-m))``
    (float64) must beat ``1 - p`` (argmax over ``[1 - p, p]``; a tie is class 0)."""
    def positive(m: float) -> bool:
        p = sigmoid(m)
        return p > 1.0 - p

    return first_float(positive, 0.0, 1.0)


# ------------------------------------------------------------------------- library objects


def handles(model: Any) -> bool:
    return type(model).__module__.split(".")[0] == "lightgbm"


_MISSING = "NaN, zero_as_missing and missing types None/Zero/NaN (default_left)"
_REG_OBJ = "regression, regression_l1, huber, fair, quantile, mape, poisson, gamma, tweedie, cross_entropy, cross_entropy_lambda"
_BOOSTING = "gbdt, dart, goss, rf; categorical splits; linear_tree; best_iteration"
SUPPORT: dict[str, SupportRow] = {
    "LGBMClassifier": SupportRow("classification", _MISSING, f"binary, multiclass, multiclassova; {_BOOSTING}"),
    "LGBMRegressor": SupportRow("regression", _MISSING, f"{_REG_OBJ}; {_BOOSTING}"),
    "LGBMRanker": SupportRow("ranking", _MISSING, f"lambdarank, rank_xendcg; {_BOOSTING}"),
    "Booster": SupportRow("any of the above", _MISSING, "also native model text (.txt), converted without lightgbm installed"),
}
WRAPPERS = tuple(SUPPORT)


def to_ensemble(model: Any) -> Ensemble:
    name = type(model).__name__
    if name not in WRAPPERS:
        raise UnsupportedModelError(f"lightgbm {name} is not supported; supported: {', '.join(WRAPPERS)}")
    booster = model if name == "Booster" else model.booster_
    if callable(getattr(model, "objective", None)):
        raise UnsupportedModelError(f"lightgbm {name} with a custom objective function is not supported")
    # model_to_string() keeps the trees up to best_iteration, as predict uses them.
    return from_text(
        booster.model_to_string(), f"lightgbm {name}", classes=getattr(model, "classes_", None),
        wrapper=None if name == "Booster" else name,
    )


def _raw_margin(model: Any, X: np.ndarray, ens: Ensemble) -> np.ndarray:
    """LightGBM's ``raw_score`` as the IR's margin: for boosting ``rf`` LightGBM's raw score is
    the sum before averaging, so it is divided by the iteration count, as its own predict does
    before the link."""
    raw = np.asarray(model.predict(X, raw_score=True)).reshape(X.shape[0], -1)
    return raw / ens.trees_per_output() if ens.aggregation is Aggregation.MEAN else raw


def reference_outputs(model: Any, X: np.ndarray, raw: bool, ens: Ensemble) -> dict[str, np.ndarray]:
    """LightGBM's own outputs under the graph's names (``ens``: the model's IR)."""
    n = X.shape[0]
    out: dict[str, np.ndarray] = {}
    if ens.task is Task.CLASSIFICATION:
        if hasattr(model, "classes_"):
            out["label"] = np.asarray(model.predict(X))
            probs = np.asarray(model.predict_proba(X))
        else:
            pred = np.asarray(model.predict(X))
            probs = pred if pred.ndim == 2 else np.stack([1.0 - pred, pred], axis=1)
            out["label"] = np.argmax(probs, axis=1)
        if not raw:
            out["probabilities"] = probs
    if raw:
        out["variable"] = _raw_margin(model, X, ens)
    elif ens.task is not Task.CLASSIFICATION:
        out["variable"] = np.asarray(model.predict(X)).reshape(n, -1)
    return out


# ---------------------------------------------------------------------------------------- files


def is_model_text(head: bytes) -> bool:
    """Whether a file's first bytes open a LightGBM model text: its first line is the booster's
    name, ``tree`` (or ``gbdt`` in early texts such as LightGBM's 2016 examples); LightGBM ends
    a line at CR or LF."""
    return re.split(rb"[\r\n]", head, maxsplit=1)[0].strip() in (b"tree", b"gbdt")


def load_text(path: Path) -> Ensemble:
    """The IR of a LightGBM model text file, read without lightgbm (its first line and its size
    checked first: anything else, however large, is refused unread)."""
    if not is_model_text(read_head(path)):
        raise ModelFileError(f"{path}: not a LightGBM model text (its first line is not 'tree')")
    declare(Declared(text_bytes=path.stat().st_size), str(path))
    try:
        data = path.read_bytes()  # as LightGBM reads it: tree_sizes count bytes, line ends included
    except OSError as exc:
        raise ModelFileError(f"{path}: not a readable LightGBM model text: {exc}") from exc
    try:
        return from_text(data, str(path))
    except MALFORMED as exc:
        raise ModelFileError(f"{path}: ill-formed LightGBM model text: {type(exc).__name__}: {exc}") from exc


TEXT = FileFormat("LightGBM model text", (".txt",), sniff=is_model_text, load=load_text)


def native_model(path: Path, ens: Ensemble) -> Any:
    """LightGBM's own Booster of a model text (None without lightgbm, or for another file: an
    IR document naming LightGBM as its source)."""
    if not (ens.source.startswith("lightgbm") and is_model_text(read_head(path))):
        return None
    try:
        import lightgbm
    except ImportError:
        return None
    try:
        return lightgbm.Booster(model_file=str(path))
    except lightgbm.basic.LightGBMError as exc:  # tree2mat read it, LightGBM cannot: refuse
        raise ModelFileError(f"{path}: LightGBM itself cannot load this model text: {exc}") from exc
    except ValueError:  # its Python package cannot parse the parameters section (below)
        pass
    try:
        return lightgbm.Booster(model_str=_escaped_parameters(path.read_bytes()).decode("utf-8", "replace"))
    except (ValueError, lightgbm.basic.LightGBMError) as exc:
        raise ModelFileError(f"{path}: LightGBM's Python package cannot load this model text: {type(exc).__name__}: {exc}") from exc


def _escaped_parameters(text: bytes) -> bytes:
    """A model text with the backslashes of its ``parameters:`` section doubled. LightGBM (4.7)
    writes a Windows path there as it is (``[data: ..\\tests\\train.csv]``) and its Python
    package then fails to read the parameters as JSON ("Invalid \\escape"; LightGBM issue 6349),
    although its C++ loader reads the model; the parameters play no part in prediction, and
    nothing else in the text changes."""
    head, sep, rest = text.partition(b"\nparameters:\n")
    params, end, tail = rest.partition(b"\nend of parameters")
    return head + sep + params.replace(b"\\", b"\\\\") + end + tail if sep and end else text


def reference_leaves(model: Any, X: np.ndarray, ens: Ensemble) -> np.ndarray:
    """LightGBM's own leaf of each row and tree (``pred_leaf``: leaf indices, the IR's
    ``leaf_source_id``), [N, trees]."""
    return np.asarray(model.predict(X, pred_leaf=True)).reshape(X.shape[0], -1)


SPEC = FrontendSpec(
    name="lightgbm",
    library="LightGBM",
    handles=handles,
    to_ensemble=to_ensemble,
    reference_outputs=reference_outputs,
    estimators=SUPPORT,
    reference_leaves=reference_leaves,
    formats=(TEXT,),
    native_model=native_model,
    pipeline_steps={"lightgbm": ("LGBMClassifier", "LGBMRegressor", "LGBMRanker")},
    peer="onnxmltools",
    peer_call="convert_lightgbm",
    peer_zipmap=True,
)
