"""What a ``.skops`` file may hold, checked on its schema before skops builds a single object.

skops's own audit (``get_untrusted_types``) trusts every scikit-learn estimator and ufunc by
default and reports only the rest, so a file can name ``FunctionTransformer`` (trusted by skops)
around a ``functools.partial`` of any ``sklearn.*`` function, which scikit-learn then calls when
the model predicts. Here every node of the schema is checked, whatever skops trusts:

- its kind (skops's ``__loader__``), and the exact type or function it names against what that
  kind may build (:data:`LOADER_TYPES`): each kind calls the type it names with data from the
  file (a list's type with its items, an array's with the array), so a type is allowed only
  where it is what the kind makes;
- an object's attributes: no ``__dunder__`` name (``__array_interface__`` would hand numpy a raw
  address of the file's choosing) and none that shadows a method or property of its class;
- ``functools.partial`` only of the one function tree2mat allows (``check_array``, which
  HistGradientBoosting keeps), with keyword arguments of plain values;
- ``n_jobs`` within this machine's CPUs (joblib starts that many workers when the model predicts);
- the archive: its schema in the protocol this skops writes; the bytes its nodes read from its
  members (one member may be named by many) declared before any is read
  (:func:`tree2mat.ir.limits.declare`).

The types are those tree2mat reads: the estimators it converts, what they hold (trees, losses,
binning, the dummy init estimators of gradient boosting), the preprocessing steps of a pipeline
that hold only data, numpy's values. Any other callable that could be reached is then a method of
one of those classes: scikit-learn's code, on data.
"""

from __future__ import annotations

import importlib
import inspect
import io
import json
import os
import zipfile
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from tree2mat.errors import ModelFileError, UnsupportedModelError, require
from tree2mat.ir.limits import Declared, declare

#: The public names of the scikit-learn estimators and steps a ``.skops`` file may hold (each
#: resolved to where the installed version defines it): the models tree2mat converts, the init
#: estimators of gradient boosting, and preprocessing steps of a pipeline that hold only data.
#: Not here: steps that hold a function chosen by the user (``SelectKBest``'s score function,
#: ``make_column_selector``) and anything that is not a transformer or a tree model.
ESTIMATORS = (
    "sklearn.tree.DecisionTreeClassifier", "sklearn.tree.DecisionTreeRegressor",
    "sklearn.tree.ExtraTreeClassifier", "sklearn.tree.ExtraTreeRegressor",
    "sklearn.ensemble.RandomForestClassifier", "sklearn.ensemble.RandomForestRegressor",
    "sklearn.ensemble.ExtraTreesClassifier", "sklearn.ensemble.ExtraTreesRegressor",
    "sklearn.ensemble.GradientBoostingClassifier", "sklearn.ensemble.GradientBoostingRegressor",
    "sklearn.ensemble.HistGradientBoostingClassifier", "sklearn.ensemble.HistGradientBoostingRegressor",
    "sklearn.ensemble.IsolationForest",
    "sklearn.dummy.DummyClassifier", "sklearn.dummy.DummyRegressor",
    "sklearn.pipeline.Pipeline", "sklearn.pipeline.FeatureUnion", "sklearn.compose.ColumnTransformer",
    "sklearn.preprocessing.StandardScaler", "sklearn.preprocessing.MinMaxScaler", "sklearn.preprocessing.MaxAbsScaler",
    "sklearn.preprocessing.RobustScaler", "sklearn.preprocessing.Normalizer", "sklearn.preprocessing.Binarizer",
    "sklearn.preprocessing.OneHotEncoder", "sklearn.preprocessing.OrdinalEncoder", "sklearn.preprocessing.LabelEncoder",
    "sklearn.preprocessing.PolynomialFeatures", "sklearn.preprocessing.FunctionTransformer",
    "sklearn.impute.SimpleImputer", "sklearn.feature_selection.VarianceThreshold",
    "sklearn.decomposition.PCA", "sklearn.decomposition.TruncatedSVD",
)

#: What those estimators hold, by the module that defines it (private to scikit-learn, so read
#: from the installed version: a name it does not have is simply not allowed).
INTERNALS = (
    ("sklearn.ensemble._hist_gradient_boosting.predictor", ("TreePredictor",)),
    ("sklearn.ensemble._hist_gradient_boosting.binning", ("_BinMapper",)),
    ("sklearn._loss.loss", (
        "HalfSquaredError", "AbsoluteError", "PinballLoss", "HuberLoss", "HalfPoissonLoss", "HalfGammaLoss",
        "HalfTweedieLoss", "HalfTweedieLossIdentity", "HalfBinomialLoss", "ExponentialLoss", "HalfMultinomialLoss",
    )),
    ("sklearn._loss.link", ("IdentityLink", "LogLink", "LogitLink", "HalfLogitLink", "MultinomialLogit", "Interval")),
)

#: The Cython losses the loss objects hold (skops's ``LossNode`` calls them with the file's
#: arguments: numbers).
CY_LOSSES = ("sklearn._loss._loss", (
    "CyHalfSquaredError", "CyAbsoluteError", "CyPinballLoss", "CyHuberLoss", "CyHalfPoissonLoss", "CyHalfGammaLoss",
    "CyHalfTweedieLoss", "CyHalfTweedieLossIdentity", "CyHalfBinomialLoss", "CyExponentialLoss", "CyHalfMultinomialLoss",
))

#: numpy's scalar types (an array's element, a ``dtype=`` parameter).
NUMPY_SCALARS = frozenset(
    f"numpy.{name}" for name in ("bool_", "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                                 "float16", "float32", "float64", "str_", "object_")
)
_PLAIN = frozenset({"builtins.str", "builtins.int", "builtins.float", "builtins.bool", "builtins.NoneType"})

#: The functions a file may name (and so a ``partial`` may wrap): HistGradientBoosting's
#: preprocessor keeps ``partial(check_array, dtype=[float64], ensure_all_finite=False)`` as a
#: FunctionTransformer's function.
FUNCTIONS = frozenset({"sklearn.utils.validation.check_array"})
#: The loaders of plain values, which a ``partial``'s keywords may be made of.
_PLAIN_LOADERS = frozenset({"JsonNode", "TypeNode", "ListNode", "TupleNode", "DictNode", "CachedNode"})


@cache
def _resolved(names: tuple[str, ...]) -> frozenset[str]:
    """``module.Class`` of each public name, where the installed scikit-learn defines it."""
    out: set[str] = set()
    for public in names:
        module, _, cls = public.rpartition(".")
        found = getattr(importlib.import_module(module), cls, None)
        if isinstance(found, type):
            out.add(f"{found.__module__}.{found.__qualname__}")
    return frozenset(out)


@cache
def _defined(modules: tuple[tuple[str, tuple[str, ...]], ...]) -> frozenset[str]:
    """``module.Class`` of each class the installed scikit-learn has (others are left out)."""
    out: set[str] = set()
    for module, classes in modules:
        try:
            mod = importlib.import_module(module)
        except ImportError:  # (another scikit-learn layout: its names are not allowed)
            continue
        out.update(f"{module}.{c}" for c in classes if isinstance(getattr(mod, c, None), type))
    return frozenset(out)


@cache
def loader_types() -> dict[str, frozenset[str]]:
    """Per kind of node (skops's ``__loader__``), the types it may name. Left out: ``MethodNode``
    (a bound method, chosen by name), ``OperatorFuncNode`` (``operator.methodcaller`` and the
    like), ``ConstructorFromReduceNode`` (calls a type with arguments), ``DefaultDictNode`` (calls
    its factory), anything a newer skops adds until it is read and listed here."""
    objects = _resolved(ESTIMATORS) | _defined(INTERNALS)
    return {
        "DictNode": frozenset({"builtins.dict"}), "ListNode": frozenset({"builtins.list"}),
        "TupleNode": frozenset({"builtins.tuple"}), "SetNode": frozenset({"builtins.set"}),
        "JsonNode": _PLAIN, "BytesNode": frozenset({"builtins.bytes"}), "BytearrayNode": frozenset({"builtins.bytearray"}),
        "SliceNode": frozenset({"builtins.slice"}),
        "NdArrayNode": NUMPY_SCALARS | {"numpy.ndarray"}, "MaskedArrayNode": frozenset({"numpy.ma.core.MaskedArray"}),
        "DTypeNode": frozenset({"numpy.dtype"}), "TypeNode": NUMPY_SCALARS | _PLAIN,
        "RandomStateNode": frozenset({"numpy.random.mtrand.RandomState"}),
        "RandomGeneratorNode": frozenset({"numpy.random._generator.Generator"}),
        "ObjectNode": objects, "TreeNode": _defined((("sklearn.tree._tree", ("Tree",)),)), "LossNode": _defined((CY_LOSSES,)),
        "FunctionNode": FUNCTIONS, "PartialNode": frozenset({"functools.partial"}),
    }


def _nodes(doc: Any) -> Iterator[dict[str, Any]]:
    """Every node of a skops schema: each dict with a ``__loader__``, at any depth (skops builds
    an object from any such dict it meets, so none may be skipped)."""
    stack = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "__loader__" in item:
                yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def refused(schema: Any) -> list[str]:
    """What a skops schema holds that tree2mat does not read, each once, as the message names it
    (empty: every node passes, see the module's docstring)."""
    allowed = loader_types()
    out: dict[str, None] = {}
    for node in _nodes(schema):
        loader = node.get("__loader__")
        name = f"{node.get('__module__')}.{node.get('__class__')}"
        if loader == "CachedNode":  # (an object built earlier in the file: checked there)
            continue
        if loader not in allowed:
            out[f"{name} ({loader})"] = None
        elif name not in allowed[loader]:
            out[f"the function {name}" if loader == "FunctionNode" else f"{name} (as {loader})"] = None
        elif loader == "PartialNode":
            out.update(dict.fromkeys(_partial_problems(node)))
        elif loader == "ObjectNode":
            out.update(dict.fromkeys(_attribute_problems(node, name)))
    return list(out)


def stored_reads(schema: Any, sizes: dict[str, int]) -> int:
    """The bytes skops reads from the archive's members to build the schema's nodes: each node
    that names a stored member (an array, bytes) reads it whole, however many name the same one
    (``sizes``: the members' uncompressed sizes; a member not there counts as empty, skops
    refuses it)."""
    return sum(sizes.get(node["file"], 0) for node in _nodes(schema) if isinstance(node.get("file"), str))


def _partial_problems(node: dict[str, Any]) -> list[str]:
    """A ``partial`` of the allowed function, with no positional arguments and keywords of plain
    values only (HistGradientBoosting's: ``dtype``, ``ensure_all_finite``)."""
    content = node.get("content")
    if not isinstance(content, dict):
        return ["a partial without its parts"]
    args = content.get("args")
    if not (isinstance(args, dict) and args.get("__loader__") == "TupleNode" and args.get("content") == []):
        return ["a partial with positional arguments"]
    if any(n.get("__loader__") not in _PLAIN_LOADERS for n in _nodes(content.get("kwds"))):
        return ["a partial with keyword arguments that are not plain values"]
    return []


def _attribute_problems(node: dict[str, Any], name: str) -> list[str]:
    """An object's attributes: none named ``__...``, none naming a method or property of its
    class, ``n_jobs`` within this machine's CPUs."""
    attrs = node.get("content")
    if attrs is None or (isinstance(attrs, dict) and attrs.get("__loader__") == "JsonNode" and attrs.get("content") == "null"):
        return []  # (an object with no state of its own, as a link is)
    state = attrs.get("content") if isinstance(attrs, dict) and attrs.get("__loader__") == "DictNode" else None
    if not isinstance(state, dict):
        return [f"{name} with a state that is not a dict of attributes"]
    module, _, cls_name = name.rpartition(".")
    cls = getattr(importlib.import_module(module), cls_name)
    out = []
    for key, value in state.items():
        if key.startswith("__"):
            out.append(f"{name} with the attribute {key!r}")
        elif key in dir(cls) and (callable(inspect.getattr_static(cls, key)) or isinstance(
                inspect.getattr_static(cls, key), (property, classmethod, staticmethod))):
            out.append(f"{name} with an attribute {key!r} over its class's own")
        elif key == "n_jobs" and not _cpus(value):
            out.append(f"{name} with n_jobs {value.get('content') if isinstance(value, dict) else value!r} (this machine has {os.cpu_count()} CPUs)")
    return out


def _cpus(value: Any) -> bool:
    """Whether an ``n_jobs`` node is null or a number of workers this machine has (negative
    counts are relative to its CPUs)."""
    if not (isinstance(value, dict) and value.get("__loader__") == "JsonNode" and isinstance(value.get("content"), str)):
        return False
    try:
        jobs = json.loads(value["content"])
    except ValueError:
        return False
    return jobs is None or (type(jobs) is int and jobs <= (os.cpu_count() or 1))


def audit(data: bytes, name: str) -> None:
    """Refuse the ``.skops`` file ``name`` (its bytes ``data``) unless it is a zip archive whose
    schema is in this skops's protocol and passes :func:`refused`, its stored members' sizes
    declared (and within the memory budget) before any is read."""
    if data[:4] != b"PK\x03\x04":
        raise ModelFileError(f"{name}: not a readable .skops file: not a zip archive")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            sizes = {i.filename: i.file_size for i in archive.infolist()}
            declare(Declared(text_bytes=sizes.get("schema.json", 0)), name)
            with archive.open("schema.json") as fh:
                schema = json.load(io.TextIOWrapper(fh, encoding="utf-8"))
    except RecursionError as exc:
        raise ModelFileError(f"{name}: not a readable .skops file: its schema is nested too deeply") from exc
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise ModelFileError(f"{name}: not a readable .skops file: {exc}") from exc
    PROTOCOL = require("skops.io._protocol", f"{name}: reading .skops files").PROTOCOL  # (this skops's; its loaders read older ones otherwise)

    if not isinstance(schema, dict) or schema.get("protocol") != PROTOCOL:
        got = schema.get("protocol") if isinstance(schema, dict) else None
        raise ModelFileError(f"{name}: a .skops file of protocol {got!r}; this skops writes and tree2mat reads {PROTOCOL} (save it again with it)")
    _refuse(name, refused(schema))
    declare(Declared(stored_bytes=stored_reads(schema, sizes)), name)


def confirmed(name: str, skops_untrusted: list[str]) -> list[str]:
    """What skops itself reports as untrusted in the file (names it reads from elsewhere than a
    node's type, e.g. a Generator's bit generator), each checked against what is allowed: the
    list to hand skops as trusted."""
    allowed = frozenset().union(*loader_types().values()) | {
        f"numpy.random.{g}" for g in ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")}
    _refuse(name, [t for t in skops_untrusted if t not in allowed])
    return list(skops_untrusted)


def _refuse(name: str, bad: list[str]) -> None:
    if bad:
        raise UnsupportedModelError(
            f"{name}: the .skops file holds what tree2mat does not read: {', '.join(sorted(bad))} "
            "(tree2mat reads only the scikit-learn models it converts, their preprocessing steps and numpy's arrays; "
            "no functions: a model file's functions run when the model predicts)"
        )


def read(path: Path) -> bytes:
    """The bytes of a ``.skops`` file, read once (the audit and skops then read the same bytes),
    after its first bytes and its size are checked: anything but a zip archive is refused unread."""
    try:
        with open(path, "rb") as fh:
            if fh.read(4) != b"PK\x03\x04":
                raise ModelFileError(f"{path}: not a readable .skops file: not a zip archive")
        declare(Declared(stored_bytes=path.stat().st_size), str(path))
        return path.read_bytes()
    except OSError as exc:
        raise ModelFileError(f"{path}: cannot read: {exc}") from exc
