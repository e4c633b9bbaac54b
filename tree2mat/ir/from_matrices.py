"""A tree from its matrices: what ``tree2mat inspect --tree K --format npz`` writes, read back.

Decision Trees as Binary Network (Zhang, 2019), Thm. 1: the map from a tree to (S, t, B, v) is
one-to-one, internal nodes numbered breadth-first (top to bottom, left to right) and leaves left
to right. :func:`tree_from_matrices` is its inverse: it walks the bitvector matrix (the paper's
B; tree2mat's template ``B`` is -1 exactly where the bitvector is 0) from the root, and refuses a
matrix that is no tree's, naming the rule it breaks. Sec. 4's four rules, as checked here (made
exact where the paper's words are loose):

1. the root's 0s are its left subtree's leaves, a run from the first leaf (the paper: the root
   has the most 0s; true of its example, not of every tree: a root whose left child is a leaf has
   one 0, and a node under its right child may have more);
2. so are every node's: a run of 0s from the first leaf under it (one 0 where its left child is a
   leaf), and a 1 under it too, its right subtree;
3. a node keeps its ancestors' 1s (the paper says it of left children; a right child keeps those
   outside its parent's subtree too);
4. a right child turns its parent's 0s into 1s;

with the paper's remarks: the entries are 0 or 1, and a tree has one leaf more than internal
nodes. The template ``B``, when given, must be the tree's: a node's -1s and +1s are the leaves
under it, split into its left and right subtrees (a partition of them), its 0s the other leaves.
``S`` has one-hot rows, ``t`` no NaN (but at categorical nodes, which do not read it).

What the matrices leave out, the npz adds in arrays of these names (:func:`tree_arrays` writes
them), each optional, the paper's convention its default: ``default_left`` (bool [I], where a
missing value goes; default left: D(NaN - t) = 0 is a false node), ``comparison`` (``"<="``, the
paper's Sign(0) = -1, or ``"<"``), ``source_dtype`` (the type inputs are cast to before the tests:
``"float64"`` or ``"float32"``), ``missing_value`` (an input value taken as missing besides NaN;
default NaN), ``zero_band``, ``zero_missing`` (bool [I]: 0 counts as missing too), categorical
nodes (``cat_nodes``, ``cat_values``, ``cat_left``, ``cat_other_left``, ``category_codes``) and
linear leaves (``linear_const``, ``linear_feature``, ``linear_coef``), as :class:`Tree` and
:class:`Ensemble` name them. An oblique tree's ``W`` is refused: its projections' order of
summation is not in the matrix.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

import numpy as np

from tree2mat.errors import InvalidTreeError, ModelFileError, UnsupportedModelError
from tree2mat.ir.core import Aggregation, CategoryCodes, Comparison, Ensemble, Link, Task, Tree
from tree2mat.ir.matrices import level_arrays, template_matrix

RULES = {
    1: "the root's 0s are the leaves of its left subtree, from the first leaf on",
    2: "a node's 0s are the leaves of its left subtree, a run from the first leaf under it, and it has a right subtree",
    3: "a node keeps its ancestors' 1s",
    4: "a right child turns its parent's 0s into 1s",
}

#: The arrays the matrices' own definitions give, checked against the tree rebuilt.
DERIVED = ("depth", "level_feature", "level_threshold", "level_power")
#: Per array name: the dtype kinds it may have ('b' bool, 'i' integers, 'f' floats, 'U' text) and its number of dimensions.
ARRAYS: dict[str, tuple[str, tuple[int, ...]]] = {
    "S": ("bif", (2,)), "t": ("if", (1,)), "v": ("if", (1, 2)), "bitvector": ("bif", (2,)), "B": ("if", (2,)),
    "depth": ("i", (1,)), "level_feature": ("i", (1,)), "level_threshold": ("if", (1,)), "level_power": ("i", (1,)),
    "default_left": ("b", (1,)), "zero_missing": ("b", (1,)), "comparison": ("U", (0,)), "source_dtype": ("U", (0,)),
    "missing_value": ("if", (0,)), "zero_band": ("if", (0,)), "category_codes": ("U", (0,)),
    "cat_nodes": ("i", (1,)), "cat_values": ("if", (2,)), "cat_left": ("b", (2,)), "cat_other_left": ("b", (1,)),
    "linear_const": ("if", (1,)), "linear_feature": ("i", (2,)), "linear_coef": ("if", (2,)),
}
_KIND_NAMES = {"b": "true/false values", "i": "integers", "if": "numbers", "bif": "numbers"}


def tree_arrays(ens: Ensemble, k: int) -> dict[str, np.ndarray]:
    """What ``inspect --tree K --format npz`` writes beside tree ``k``'s matrices so that the file
    reads back to exactly that tree, tested as ``ens`` tests it (see the module's docstring)."""
    t = ens.trees[k]
    out = {
        "default_left": t.default_left.copy(), "comparison": np.asarray(ens.comparison.value),
        "source_dtype": np.asarray(np.dtype(ens.source_dtype).name), "missing_value": np.asarray(ens.missing_value, np.float64),
        "zero_band": np.asarray(ens.zero_band, np.float64),
    }
    if t.zero_missing.size:
        out["zero_missing"] = t.zero_missing.copy()
    if t.has_categorical:
        out.update(cat_nodes=t.cat_nodes.copy(), cat_values=t.cat_values.copy(), cat_left=t.cat_left.copy(),
                   category_codes=np.asarray(ens.category_codes.value))
        if t.cat_other_left is not None:
            out["cat_other_left"] = t.cat_other_left.copy()
    if t.is_linear:
        out.update(linear_const=t.linear_const, linear_feature=t.linear_feature, linear_coef=t.linear_coef)
    return out


def ensemble_from_matrices(arrays: Mapping[str, np.ndarray], name: str = "matrices") -> Ensemble:
    """The one-tree ensemble whose tree 0 has these matrices (the npz's arrays by name): a
    regression whose output is the leaf's value, the tree tested as ``comparison``,
    ``source_dtype``, ``missing_value`` and ``zero_band`` say. A :class:`ModelFileError` names an
    array that is not what it should be, an :class:`InvalidTreeError` the rule a matrix breaks."""
    if "W" in arrays:
        raise UnsupportedModelError(
            f"{name}: W holds an oblique tree's weights, which cannot be read back into a tree (the order its "
            "projections sum in is not in the matrix): inspect the model file itself"
        )
    unknown = sorted(set(arrays) - set(ARRAYS))
    if unknown:
        raise ModelFileError(
            f"{name}: not a tree's matrices (tree2mat inspect --tree K --format npz): unknown arrays {', '.join(unknown)}"
        )
    tree = tree_from_matrices(arrays, name)
    n_outputs = tree.n_outputs
    return Ensemble(
        trees=(tree,), n_features=int(np.asarray(arrays["S"]).shape[1]), n_outputs=n_outputs, output_index=np.array([-1]),
        comparison=Comparison(_text(arrays, "comparison", [c.value for c in Comparison], "<=", name)),
        source_dtype=np.dtype(_text(arrays, "source_dtype", ["float32", "float64"], "float64", name)),
        aggregation=Aggregation.SUM, base_score=np.zeros(n_outputs), link=Link.IDENTITY, task=Task.REGRESSION,
        source="tree matrices (npz)", missing_value=_number(arrays, "missing_value", np.nan, name),
        zero_band=_number(arrays, "zero_band", 0.0, name),
        category_codes=CategoryCodes(_text(arrays, "category_codes", [c.value for c in CategoryCodes], "exact", name)),
    ).validate()


def tree_from_matrices(arrays: Mapping[str, np.ndarray], name: str = "matrices") -> Tree:
    """The tree of ``S``, ``t``, ``v`` and the bitvector matrix (``bitvector``, or the template
    ``B``'s -1s; both: they must agree), with what the npz adds (see the module's docstring);
    ``depth`` and an oblivious tree's ``level_*`` arrays, when given, must be the tree's."""
    got = {key: _array(arrays, key, name) for key in ARRAYS if key in arrays}
    for key in ("S", "t", "v"):
        if key not in got:
            raise ModelFileError(f"{name}: the tree's matrices need S, t, v and B or the bitvector; {key} is missing")
    bits, src = _bits(got, name)
    s, v = got["S"], got["v"] if got["v"].ndim == 2 else got["v"][:, None]
    _check_shapes(s, got["t"], bits, v, src, name)
    left, right = _structure(bits, src, name)
    cats = {key: got[key] for key in ("cat_nodes", "cat_values", "cat_left", "cat_other_left") if key in got}
    if cats and not {"cat_nodes", "cat_values", "cat_left"} <= set(cats):
        raise ModelFileError(f"{name}: categorical nodes need cat_nodes, cat_values and cat_left")
    _check_thresholds(got["t"], cats.get("cat_nodes"), name)
    linear = {key: got[key] for key in ("linear_const", "linear_feature", "linear_coef") if key in got}
    if linear and len(linear) != 3:
        raise ModelFileError(f"{name}: linear leaves need linear_const, linear_feature and linear_coef")
    tree = Tree(
        feature=np.argmax(s, axis=1).astype(np.int64), threshold=got["t"], left=left, right=right,
        default_left=got.get("default_left", np.ones(s.shape[0], bool)), value=v,
        zero_missing=got.get("zero_missing", np.zeros(0, bool)), **cats, **linear,
    )
    tree.validate(s.shape[1], where=name)
    if "B" in got:
        _check_template(got["B"], tree, name)
    _check_derived(got, tree, name)
    return tree


def _array(arrays: Mapping[str, np.ndarray], key: str, name: str) -> np.ndarray:
    """``arrays[key]`` of the kind and dimensions :data:`ARRAYS` gives it: numbers as float64
    ('if') or int64 ('i'), matrices of 0s and 1s as they are ('bif')."""
    kinds, ndims = ARRAYS[key]
    a = np.asarray(arrays[key])
    kind = "i" if a.dtype.kind == "u" else a.dtype.kind
    if kind not in kinds or a.ndim not in ndims:
        what = ("a string" if kinds == "U" else "a number") if ndims == (0,) else f"{' or '.join(f'{d}-D' for d in ndims)} {_KIND_NAMES[kinds]}"
        raise ModelFileError(f"{name}: {key} must be {what}, got {a.dtype} of shape {a.shape}")
    if kinds == "if":
        return a.astype(np.float64)
    return a.astype(np.int64) if kinds == "i" else a


def _text(arrays: Mapping[str, np.ndarray], key: str, choices: list[str], default: str, name: str) -> str:
    value = str(_array(arrays, key, name)) if key in arrays else default
    if value not in choices:
        raise ModelFileError(f"{name}: {key} {value!r:.40}: choose one of {', '.join(choices)}")
    return value


def _number(arrays: Mapping[str, np.ndarray], key: str, default: float, name: str) -> float:
    return float(_array(arrays, key, name)) if key in arrays else default


def _binary(m: np.ndarray, key: str, allowed: tuple[int, ...], name: str) -> None:
    """Every entry of matrix ``m`` (rows: leaves or nodes as ``key`` says) one of ``allowed``."""
    bad = ~np.isin(m, allowed)
    if bad.any():
        r, c = (int(i[0]) for i in np.nonzero(bad))
        rows, cols = ("n", "x") if key == "S" else ("v", "n")
        raise InvalidTreeError(
            f"{name}: {key} has the entry {m[r, c]:g} at {rows}{r + 1}, {cols}{c + 1}: its entries are "
            f"{' or '.join(str(a) for a in allowed)}"
        )


def _bits(got: dict[str, np.ndarray], name: str) -> tuple[np.ndarray, str]:
    """The bitvector matrix (0 iff the leaf is in the node's left subtree) and what it came
    from: ``bitvector``, else ``B``'s -1s; both given, they agree."""
    if "B" in got:
        _binary(got["B"], "B", (-1, 0, 1), name)
    if "bitvector" not in got:
        if "B" not in got:
            raise ModelFileError(f"{name}: the tree's matrices need S, t, v and B or the bitvector; both are missing")
        return (got["B"] != -1).astype(np.int8), "B (its -1s as the bitvector's 0s)"
    bits = got["bitvector"]
    _binary(bits, "bitvector", (0, 1), name)
    if "B" in got:
        if got["B"].shape != bits.shape:
            raise InvalidTreeError(f"{name}: B is {got['B'].shape}, the bitvector {bits.shape}: both are leaves x internal nodes")
        differ = (got["B"] == -1) != (bits == 0)
        if differ.any():
            r, c = (int(i[0]) for i in np.nonzero(differ))
            raise InvalidTreeError(f"{name}: the bitvector and B disagree at v{r + 1}, n{c + 1}: the bitvector is 0 exactly where B is -1")
    return bits.astype(np.int8), "the bitvector"


def _check_shapes(s: np.ndarray, t: np.ndarray, bits: np.ndarray, v: np.ndarray, src: str, name: str) -> None:
    n_int = s.shape[0]
    _binary(s, "S", (0, 1), name)
    ones = np.count_nonzero(s, axis=1)
    if (ones != 1).any():
        i = int(np.flatnonzero(ones != 1)[0])
        found = f"1s at {', '.join(f'x{f + 1}' for f in np.flatnonzero(s[i]))}" if ones[i] else "no 1"
        raise InvalidTreeError(f"{name}: S row n{i + 1} has {found}: a node tests one feature (S's rows are one-hot)")
    if t.shape != (n_int,):
        raise InvalidTreeError(f"{name}: S has {n_int} rows, t {t.shape[0]} thresholds: both are one per internal node")
    if bits.shape[1] != n_int:
        raise InvalidTreeError(f"{name}: {src} has {bits.shape[1]} columns, S {n_int} rows: both are one per internal node")
    if bits.shape[0] != n_int + 1:
        raise InvalidTreeError(
            f"{name}: {src} has {bits.shape[0]} rows for {n_int} internal nodes: a binary tree has one leaf more than internal nodes"
        )
    if v.shape[0] != bits.shape[0]:
        raise InvalidTreeError(f"{name}: v has {v.shape[0]} rows, {src} {bits.shape[0]}: both are one per leaf")


def _check_thresholds(t: np.ndarray, cat_nodes: np.ndarray | None, name: str) -> None:
    numeric = np.ones(t.shape[0], bool)
    if cat_nodes is not None:
        numeric[cat_nodes[(cat_nodes >= 0) & (cat_nodes < t.shape[0])]] = False
    if np.isnan(t[numeric]).any():
        i = int(np.flatnonzero(numeric & np.isnan(t))[0])
        raise InvalidTreeError(f"{name}: t at n{i + 1} is NaN: a node's threshold is a number (+-inf included)")


def _structure(bits: np.ndarray, src: str, name: str) -> tuple[np.ndarray, np.ndarray]:
    """The IR's child references of the tree whose bitvector matrix is ``bits`` [L, I = L - 1],
    its nodes numbered breadth-first: the walk gives each node the next number as it meets it."""
    n_int = bits.shape[1]
    left, right = np.zeros(n_int, np.int64), np.zeros(n_int, np.int64)
    queue = deque([(0, 0, bits.shape[0], -1)] if n_int else [])  # (node, its first leaf, past its last, parent)
    following = 1
    while queue:
        node, lo, hi, parent = queue.popleft()
        mid = _left_end(bits, node, lo, hi, parent, f"{name}: {src} column n{node + 1}")
        for refs, a, b in ((left, lo, mid), (right, mid, hi)):
            if b - a == 1:
                refs[node] = -1 - a
            else:  # (L = I + 1 leaves split down to single ones make I - 1 nodes below the root: numbers in range)
                refs[node] = following
                queue.append((following, a, b, node))
                following += 1
    return left, right


def _left_end(bits: np.ndarray, node: int, lo: int, hi: int, parent: int, where: str) -> int:
    """Past the last leaf of ``node``'s left subtree, the leaves under it being ``lo``..``hi - 1``;
    its column checked against Sec. 4's rules."""
    zeros = np.flatnonzero(bits[:, node] == 0)
    outside = zeros[(zeros < lo) | (zeros >= hi)]
    if outside.size:  # (the root has every leaf under it: a node with a parent)
        j = int(outside[0])
        if bits[j, parent] == 0:  # (a left child's leaves are its parent's 0s: a right child)
            raise _broken(4, f"{where}, the right child of n{parent + 1}, has a 0 at v{j + 1}, where n{parent + 1} has a 0")
        raise _broken(3, f"{where} has a 0 at v{j + 1}, a leaf not under it, where its parent n{parent + 1} has a 1")
    rule, mid = (1 if parent < 0 else 2), lo + zeros.size
    if not zeros.size:
        raise _broken(rule, f"{where} has no 0: its left subtree would hold no leaf")
    if zeros[0] != lo or zeros[-1] != mid - 1:
        shown = ", ".join(f"v{j + 1}" for j in zeros[:4]) + (", ..." if zeros.size > 4 else "")
        raise _broken(rule, f"{where} has its 0s at {shown}, not a run from v{lo + 1}, the first leaf under it")
    if mid == hi:
        raise _broken(rule, f"{where} has no 1 under it (v{lo + 1}..v{hi}): its right subtree would hold no leaf")
    return mid


def _broken(rule: int, what: str) -> InvalidTreeError:
    return InvalidTreeError(f"{what}; no tree has this matrix (Binary Network Sec. 4, rule {rule}: {RULES[rule]})")


def _check_template(b: np.ndarray, tree: Tree, name: str) -> None:
    """``b`` is the tree's template matrix (its -1s already agree with the bitvector's 0s)."""
    expected = template_matrix(tree)
    if not np.array_equal(b, expected):
        cols = np.flatnonzero((b != expected).any(axis=0))
        i = int(cols[0])
        j = int(np.flatnonzero(b[:, i] != expected[:, i])[0])
        marked, really = ("+1", "not under it") if b[j, i] == 1 else ("0", "in its right subtree")
        raise InvalidTreeError(
            f"{name}: B column n{i + 1} marks v{j + 1} {marked}, but v{j + 1} is {really}: a node's -1s and +1s are the leaves "
            "under it, split into its left and right subtrees (a partition of them), its 0s the other leaves"
        )


def _check_derived(got: dict[str, np.ndarray], tree: Tree, name: str) -> None:
    """``depth`` and the ``level_*`` arrays, where given, are the tree's."""
    expected = {"depth": tree.leaf_depths(), **level_arrays(tree)}
    for key in DERIVED:
        if key not in got:
            continue
        if key not in expected:
            raise InvalidTreeError(f"{name}: {key} is given, but the tree is not oblivious (its levels do not each test one thing)")
        if not np.array_equal(got[key], expected[key]):
            raise InvalidTreeError(f"{name}: {key} {got[key].tolist()!s:.60} is not the tree's, {expected[key].tolist()!s:.60}")
