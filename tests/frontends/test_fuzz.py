"""Fuzzing the model readers: real model files (XGBoost JSON and UBJSON, LightGBM text, tree2mat
IR JSON, a tree's matrices .npz) with random damage - fields replaced by hostile values (wrong types, NaN, inf, huge,
negative and out-of-range indices, a node pointing at itself or at a shared child), fields and
lines deleted, lists cut short or repeated, bytes flipped, files truncated.

Whatever the damage, reading gives either a typed tree2mat error that names the file, or a valid
IR (``validate()`` catches what a parser lets through) whose graph routes every row as the
reference evaluator does; in bounded time and memory. Never another exception, a hang or a
graph that disagrees.

``make test`` runs a few dozen examples per reader; ``make fuzz`` a longer campaign
(``TREE2MAT_FUZZ_EXAMPLES``, default 100 here).
"""

from __future__ import annotations

import copy
import io
import json
import os
import resource
import signal
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import tree2mat
from tree2mat.errors import Tree2MatError
from tree2mat.inspect import matrices_of
from tree2mat.ir import apply
from tree2mat.ir.from_matrices import tree_arrays
from tree2mat.ir.io import dumps

from conftest import run_onnx

pytestmark = pytest.mark.slow  # fuzzing the readers

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")

EXAMPLES = int(os.environ.get("TREE2MAT_FUZZ_EXAMPLES", "40"))
#: Seconds one example may take (reading, validating, converting, running).
TIME_LIMIT = 60
#: Address space one example may add (a reader that believes a count of 10**12 must not try).
MEMORY_LIMIT = 4 * 2**30
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 100,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])

RNG = np.random.default_rng(0)
X = RNG.normal(size=(300, 4))
X[RNG.random(X.shape) < 0.1] = np.nan
X[:, 3] = RNG.integers(0, 5, 300)
Y = (np.nan_to_num(X[:, 0]) + (X[:, 3] == 2) > 0.3).astype(int)
Y3 = (np.nan_to_num(X[:, 1]) > 0).astype(int) + (X[:, 3] > 2)


def _seeds(tmp: Path) -> dict[str, bytes]:
    """The undamaged files, one per reader."""
    out = {}
    b = xgb.XGBClassifier(n_estimators=3, max_depth=3, base_score=0.3).fit(X, Y)
    b.save_model(tmp / "b.json")
    out["xgb_json"] = (tmp / "b.json").read_bytes()
    m = xgb.XGBClassifier(n_estimators=2, max_depth=2).fit(X, Y3)
    m.save_model(tmp / "m.ubj")
    out["xgb_ubj"] = (tmp / "m.ubj").read_bytes()
    frame_cat = X.copy()
    lgbm = lgb.LGBMClassifier(n_estimators=3, num_leaves=5, min_child_samples=5, verbose=-1)
    lgbm.fit(frame_cat, Y3, categorical_feature=[3])
    out["lgbm_txt"] = lgbm.booster_.model_to_string().encode()
    from sklearn.ensemble import HistGradientBoostingRegressor

    hgb = HistGradientBoostingRegressor(max_iter=3, max_leaf_nodes=5).fit(X, Y3)
    out["ir_json"] = dumps(tree2mat.load(hgb)).encode()
    ens = tree2mat.load(lgbm)
    k = next((k for k, t in enumerate(ens.trees) if t.has_categorical), 0)
    out["npz"] = _npz({**matrices_of(ens, k), **tree_arrays(ens, k)})
    cb = pytest.importorskip("catboost")
    for key, grow in (("cb_json", "SymmetricTree"), ("cb_trees", "Lossguide")):
        cb.CatBoostClassifier(iterations=3, depth=3, grow_policy=grow, nan_mode="Max", verbose=0, thread_count=1,
                              allow_writing_files=False).fit(X, Y3).save_model(str(tmp / f"{key}.json"), format="json")
        out[key] = (tmp / f"{key}.json").read_bytes()
    return out


def _npz(arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


class Seeds(dict):
    def __repr__(self) -> str:  # (failure reports print the fixture)
        return f"Seeds({', '.join(self)})"


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    return Seeds(_seeds(tmp_path_factory.mktemp("seeds")))


# ------------------------------------------------------------------------------------ damage

HOSTILE = st.one_of(
    st.sampled_from([None, True, "", "x", "nan", "-1", "1e999", 0, -1, 1, 2**31, 2**63 - 1, -(2**63), 10**30,
                     0.5, -0.0, float("nan"), float("inf"), float("-inf"), [], {}, [0], [-1, 7], {"a": 1}]),
    st.integers(-10, 10), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=4),
)


def _paths(doc, prefix=()):
    """Every place in a JSON document (dict keys and list items), depth first."""
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in items:
        yield prefix + (k,)
        yield from _paths(v, prefix + (k,))


def _at(doc, path):
    for k in path:
        doc = doc[k]
    return doc


@st.composite
def damaged_document(draw, doc):
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(doc))
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent, key = _at(doc, path[:-1]), path[-1]
        value = parent[key]
        action = draw(st.sampled_from(["replace", "delete", "cut", "repeat", "index"]))
        if action == "replace":
            parent[key] = draw(HOSTILE)
        elif action == "delete":
            del parent[key]
        elif action == "cut" and isinstance(value, list):
            parent[key] = value[: draw(st.integers(0, max(len(value) - 1, 0)))]
        elif action == "repeat" and isinstance(value, list):
            parent[key] = value + value[: draw(st.integers(1, max(len(value), 1)))]
        elif action == "index" and isinstance(value, list) and value and all(isinstance(v, int) for v in value):
            i = draw(st.integers(0, len(value) - 1))  # a child or feature index out of range, to itself, shared
            value[i] = draw(st.sampled_from([-2, -1, 0, i, len(value), len(value) + 1, 2**31, value[0]]))
        else:
            parent[key] = draw(HOSTILE)
    return doc


@st.composite
def damaged_bytes(draw, data: bytes):
    data = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        pos = draw(st.integers(0, len(data) - 1))
        action = draw(st.sampled_from(["flip", "cut", "insert", "delete"]))
        if action == "flip":
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif action == "cut":
            del data[pos:]
        elif action == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        else:
            del data[pos:pos + draw(st.integers(1, 16))]
        if not data:
            break
    return bytes(data)


@st.composite
def damaged_arrays(draw, data: bytes):
    """A tree's matrices with arrays deleted, cells set to hostile numbers, cut short, transposed or replaced."""
    arrays = dict(np.load(io.BytesIO(data)))
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from(sorted(arrays)))
        a = arrays[key]
        action = draw(st.sampled_from(["delete", "cell", "cut", "transpose", "replace"]))
        if action == "delete":
            del arrays[key]
        elif action == "cell" and a.size and a.dtype.kind in "biuf":
            value = draw(st.sampled_from([-2, -1, 0, 1, 2, 0.5, np.nan, np.inf, -np.inf, 2**31]))
            fits = isinstance(value, int) and a.dtype.kind in "iu" and np.iinfo(a.dtype).min <= value <= np.iinfo(a.dtype).max
            a = a.copy() if fits else a.astype(np.float64)  # (integers stay integers where the value is one they hold)
            a[tuple(draw(st.integers(0, n - 1)) for n in a.shape)] = value
            arrays[key] = a
        elif action == "cut" and a.ndim:
            arrays[key] = a[: draw(st.integers(0, max(a.shape[0] - 1, 0)))]
        elif action == "transpose" and a.ndim == 2:
            arrays[key] = a.T
        else:
            arrays[key] = draw(st.sampled_from([np.asarray(1.5), np.asarray("x"), np.zeros((0, 3)), np.ones((2, 2, 2)), np.asarray([True])]))
    return _npz(arrays)


TOKENS = ["", "nan", "-nan", "inf", "-inf", "1e999", "-1", "0", "2147483648", "99999999999999999999", "a", "1 2 3", "0.5", "-0"]


@st.composite
def damaged_text(draw, text: str):
    lines = text.split("\n")
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["token", "cut_list", "delete", "repeat", "swap", "truncate"]))
        line = lines[i]
        if action == "token" and "=" in line:
            key, _, value = line.partition("=")
            parts = value.split(" ")
            parts[draw(st.integers(0, len(parts) - 1))] = draw(st.sampled_from(TOKENS))
            lines[i] = f"{key}={' '.join(parts)}"
        elif action == "cut_list" and "=" in line:
            key, _, value = line.partition("=")
            parts = value.split(" ")
            lines[i] = f"{key}={' '.join(parts[: draw(st.integers(0, len(parts)))])}"
        elif action == "delete":
            del lines[i]
        elif action == "repeat":
            lines.insert(i, line)
        elif action == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], line
        else:
            lines = lines[:i] + [line[: draw(st.integers(0, len(line)))]]
        if not lines:
            lines = [""]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ the check


@contextmanager
def bounded():
    """An example that takes over TIME_LIMIT seconds, or MEMORY_LIMIT more address space, fails."""
    def on_alarm(*_):
        raise TimeoutError(f"reading took over {TIME_LIMIT} s")

    old_handler = signal.signal(signal.SIGALRM, on_alarm)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as fh:
        used = int(fh.read().split()[0]) * resource.getpagesize()
    limit = used + MEMORY_LIMIT if hard == resource.RLIM_INFINITY else min(hard, used + MEMORY_LIMIT)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    signal.alarm(TIME_LIMIT)
    try:
        yield
    finally:
        signal.alarm(0)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        signal.signal(signal.SIGALRM, old_handler)


def check(path: Path, record=event) -> None:
    """Read ``path``: a typed error naming it, or a valid IR whose graph agrees with the
    reference evaluator."""
    with bounded():
        try:
            ens = tree2mat.load(path)
        except Tree2MatError as exc:
            record(f"refused: {type(exc).__name__}")
            assert path.name in str(exc), f"the error does not name the file: {exc}"
            assert "\n" not in str(exc).strip() or len(str(exc)) < 2000
            return
        ens.validate()
        try:
            onx = tree2mat.convert(ens, "traverse", leaves=True)
        except Tree2MatError:
            record("read, not converted")
            return  # refused with a reason (e.g. a size limit): fine
        record("read and converted")
        rows = np.concatenate([X[:50, : ens.n_features], np.zeros((2, ens.n_features))]) if ens.n_features <= X.shape[1] else \
            np.random.default_rng(1).normal(size=(50, ens.n_features))
        rows = rows.astype(np.float32)
        got = run_onnx(onx, rows)["leaves"]
        np.testing.assert_array_equal(got, apply(ens, rows))


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_seeds_read_and_convert(seeds, tmp_path):
    """The undamaged files are read (so that the damage, not the seed, is what is tested)."""
    for kind, name in (("xgb_json", "b.json"), ("xgb_ubj", "m.ubj"), ("lgbm_txt", "l.txt"), ("ir_json", "ir.json"),
                       ("cb_json", "c.json"), ("cb_trees", "t.json")):
        path = _write(tmp_path, name, seeds[kind])
        check(path, record=lambda _: None)
        assert tree2mat.load(path).n_trees > 1
    path = _write(tmp_path, "tree.npz", seeds["npz"])
    check(path, record=lambda _: None)
    assert tree2mat.load(path).trees[0].has_categorical


def _document(raw: bytes) -> object:
    return json.loads(raw)


def _ubjson_document(raw: bytes) -> object:
    from tree2mat.frontends._ubjson import decode

    return decode(raw, "seed")


#: Per case: the seed file, how it is damaged, and the name the damaged file is read under.
CASES = {
    "xgboost_json": ("xgb_json", lambda raw: damaged_document(_document(raw)), "damaged.json"),
    "xgboost_json_bytes": ("xgb_json", damaged_bytes, "damaged.json"),
    "xgboost_ubjson_bytes": ("xgb_ubj", damaged_bytes, "damaged.ubj"),
    "xgboost_ubjson_document": ("xgb_ubj", lambda raw: damaged_document(_ubjson_document(raw)), "damaged.json"),
    "lightgbm_text": ("lgbm_txt", lambda raw: damaged_text(raw.decode()), "damaged.txt"),
    "lightgbm_bytes": ("lgbm_txt", damaged_bytes, "damaged.txt"),
    "ir_json": ("ir_json", lambda raw: damaged_document(_document(raw)), "damaged.json"),
    "catboost_json": ("cb_json", lambda raw: damaged_document(_document(raw)), "damaged.json"),
    "catboost_json_trees": ("cb_trees", lambda raw: damaged_document(_document(raw)), "damaged.json"),
    "matrices_npz_arrays": ("npz", damaged_arrays, "damaged.npz"),
    "matrices_npz_bytes": ("npz", damaged_bytes, "damaged.npz"),
}


@pytest.mark.parametrize("case", CASES)
@FUZZ
@given(data=st.data())
def test_damaged_files(seeds, tmp_path, data, case):
    seed, damage, name = CASES[case]
    damaged = data.draw(damage(seeds[seed]))
    if isinstance(damaged, str):
        damaged = damaged.encode()
    elif not isinstance(damaged, bytes):
        damaged = json.dumps(damaged).encode()
    check(_write(tmp_path, name, damaged))
