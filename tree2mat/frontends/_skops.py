"""What a ``.skops`` file may hold: an allow-list of exact types, checked on the file's schema
before skops builds a single object.

skops's own audit (``get_untrusted_types``) trusts every scikit-learn estimator and ufunc by
default and reports only the rest, so a file can name ``FunctionTransformer`` (trusted by skops)
around a ``functools.partial`` of any ``sklearn.*`` function, which scikit-learn then calls when
the model predicts. Here every node of the schema is checked, whatever skops trusts: the kind of
node (no bound methods, no ``operator`` callables, no constructor calls), and the exact type or
function it names, against the few that tree2mat reads: the estimators it converts, what they hold
(trees, losses, binning, dummy init estimators), the preprocessing steps of a pipeline, numpy's
arrays and dtypes, and one function, ``check_array``, which HistGradientBoosting keeps in a
``partial``. Any other callable that could end up being called is then one of those types' own
methods: scikit-learn's code, on data.
"""

from __future__ import annotations

import importlib
import io
import json
import zipfile
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from tree2mat.errors import ModelFileError, UnsupportedModelError

#: Node kinds (skops's ``__loader__``) whose construction calls nothing a file chooses beyond
#: the type they name: containers, JSON values, arrays, dtypes, slices, objects built by
#: ``__new__`` + ``__setstate__``, scikit-learn's trees and losses, numpy's random states, and
#: references to an object already built. Left out: ``MethodNode`` (a bound method, chosen by
#: name), ``OperatorFuncNode`` (``operator.methodcaller`` and the like: a method by name),
#: ``ConstructorFromReduceNode`` (calls the type with arguments), ``DefaultDictNode`` (calls its
#: factory), and anything a newer skops adds until it is read and listed here.
LOADERS = frozenset({
    "DictNode", "ListNode", "TupleNode", "SetNode", "JsonNode", "BytesNode", "BytearrayNode", "SliceNode",
    "NdArrayNode", "MaskedArrayNode", "DTypeNode", "ObjectNode", "TreeNode", "LossNode", "ReduceNode",
    "RandomStateNode", "RandomGeneratorNode", "FunctionNode", "PartialNode", "TypeNode", "CachedNode",
})

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
    ("sklearn.tree._tree", ("Tree",)),
    ("sklearn.ensemble._hist_gradient_boosting.predictor", ("TreePredictor",)),
    ("sklearn.ensemble._hist_gradient_boosting.binning", ("_BinMapper",)),
    ("sklearn._loss.loss", (
        "HalfSquaredError", "AbsoluteError", "PinballLoss", "HuberLoss", "HalfPoissonLoss", "HalfGammaLoss",
        "HalfTweedieLoss", "HalfTweedieLossIdentity", "HalfBinomialLoss", "ExponentialLoss", "HalfMultinomialLoss",
    )),
    ("sklearn._loss._loss", (
        "CyHalfSquaredError", "CyAbsoluteError", "CyPinballLoss", "CyHuberLoss", "CyHalfPoissonLoss", "CyHalfGammaLoss",
        "CyHalfTweedieLoss", "CyHalfTweedieLossIdentity", "CyHalfBinomialLoss", "CyExponentialLoss", "CyHalfMultinomialLoss",
    )),
    ("sklearn._loss.link", ("IdentityLink", "LogLink", "LogitLink", "HalfLogitLink", "MultinomialLogit", "Interval")),
)

#: Plain values: Python's containers and scalars, numpy's arrays, scalar types, dtypes and random
#: states (and the bit generators skops names for a ``Generator``).
VALUES = frozenset({
    "builtins.dict", "builtins.list", "builtins.tuple", "builtins.set", "builtins.str", "builtins.int",
    "builtins.float", "builtins.bool", "builtins.bytes", "builtins.bytearray", "builtins.slice", "builtins.NoneType",
    "numpy.ndarray", "numpy.dtype", "numpy.ma.core.MaskedArray",
    "numpy.bool_", "numpy.bool", "numpy.int8", "numpy.int16", "numpy.int32", "numpy.int64", "numpy.uint8", "numpy.uint16",
    "numpy.uint32", "numpy.uint64", "numpy.float16", "numpy.float32", "numpy.float64", "numpy.str_", "numpy.object_",
    "numpy.random.mtrand.RandomState", "numpy.random._generator.Generator",
    "numpy.random.PCG64", "numpy.random.PCG64DXSM", "numpy.random.MT19937", "numpy.random.Philox", "numpy.random.SFC64",
})

#: The functions a file may name (and so a ``partial`` may wrap): HistGradientBoosting's
#: preprocessor keeps ``partial(check_array, ...)`` as a FunctionTransformer's function.
FUNCTIONS = frozenset({"sklearn.utils.validation.check_array"})


@cache
def trusted_types() -> frozenset[str]:
    """Every type a ``.skops`` file may name, as ``module.Class`` (the installed scikit-learn's
    modules)."""
    names = set(VALUES)
    for public in ESTIMATORS:
        module, _, cls = public.rpartition(".")
        found = getattr(importlib.import_module(module), cls, None)
        if isinstance(found, type):
            names.add(f"{found.__module__}.{found.__qualname__}")
    for module, classes in INTERNALS:
        try:
            mod = importlib.import_module(module)
        except ImportError:  # (another scikit-learn layout: its names are not allowed)
            continue
        names.update(f"{module}.{c}" for c in classes if isinstance(getattr(mod, c, None), type))
    return frozenset(names)


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
    (empty: every node is an allowed kind naming an allowed type or function)."""
    types = trusted_types()
    out: dict[str, None] = {}
    for node in _nodes(schema):
        loader = node.get("__loader__")
        name = f"{node.get('__module__')}.{node.get('__class__')}"
        if loader not in LOADERS:
            out[f"{name} ({loader})"] = None
        elif loader == "FunctionNode":
            if name not in FUNCTIONS:
                out[f"the function {name}"] = None
        elif loader == "PartialNode":
            if name != "functools.partial":
                out[name] = None
        elif loader != "CachedNode" and name not in types:
            out[name] = None
    return list(out)


def schema_of(path: Path) -> Any:
    """The schema of a ``.skops`` file (its ``schema.json``), read without building anything."""
    try:
        with zipfile.ZipFile(path) as archive:
            with archive.open("schema.json") as fh:
                return json.load(io.TextIOWrapper(fh, encoding="utf-8"))
    except RecursionError as exc:
        raise ModelFileError(f"{path}: not a readable .skops file: its schema is nested too deeply") from exc
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise ModelFileError(f"{path}: not a readable .skops file: {exc}") from exc


def audit(path: Path) -> None:
    """Refuse ``path`` unless it is a zip archive (by its first bytes: anything else, however
    large, unread) whose schema's every node is an allowed kind naming an allowed type or
    function (before skops reads anything of the file but its schema)."""
    with open(path, "rb") as fh:
        if fh.read(4) != b"PK\x03\x04":
            raise ModelFileError(f"{path}: not a readable .skops file: not a zip archive")
    _refuse(path, refused(schema_of(path)))


def confirmed(path: Path, skops_untrusted: list[str]) -> list[str]:
    """What skops itself reports as untrusted in ``path`` (names it reads from elsewhere than a
    node's type, e.g. a Generator's bit generator), each checked against the allow-list: the list
    to hand skops as trusted."""
    allowed = trusted_types() | FUNCTIONS | {"functools.partial"}
    _refuse(path, [name for name in skops_untrusted if name not in allowed])
    return list(skops_untrusted)


def _refuse(path: Path, bad: list[str]) -> None:
    if bad:
        raise UnsupportedModelError(
            f"{path}: the .skops file holds what tree2mat does not read: {', '.join(sorted(bad))} "
            "(tree2mat reads only the scikit-learn models it converts, their preprocessing steps and numpy's arrays; "
            "no functions: a model file's functions run when the model predicts)"
        )
