"""The IR's settings: how a source library compares, combines, links and labels, as enums
(strings only at the edges), and how categorical nodes map input values to category codes."""

from __future__ import annotations

import enum

import numpy as np


class Comparison(enum.Enum):
    """How the source library compares a feature value ``x`` with a threshold ``t`` to go left."""

    LE = "<="  # scikit-learn, LightGBM
    LT = "<"  # XGBoost


class Aggregation(enum.Enum):
    """How per-tree outputs are combined."""

    SUM = "sum"  # boosting, isolation forests
    MEAN = "mean"  # random forests


class Link(enum.Enum):
    """Applied to the aggregated margin (after the base score) to get the model output."""

    IDENTITY = "identity"
    SIGMOID = "sigmoid"  # y = sigmoid(m) (XGBoost reg:logistic); classifiers: one-vs-all p per column
    LOGISTIC = "logistic"  # binary: p = sigmoid(m); probabilities [1 - p, p]
    LOGISTIC_2X = "logistic_2x"  # binary, exponential loss: p = sigmoid(2 m)
    MARGIN = "margin"  # binary: p = m itself (XGBoost binary:logitraw's predict_proba)
    STEP = "step"  # binary: p = 1 if m > 0 else 0 (XGBoost binary:hinge)
    SOFTMAX = "softmax"
    EXP = "exp"
    SOFTPLUS = "softplus"  # regression: y = log(1 + exp(m)) (LightGBM cross_entropy_lambda)
    ISOLATION = "isolation"  # score_samples = -2 ** (-m / denominator)


#: Links of binary classifiers: one margin column per output of two classes; probabilities
#: [1 - p, p] with p from the margin as each link says.
BINARY_LINKS = (Link.LOGISTIC, Link.LOGISTIC_2X, Link.MARGIN, Link.STEP)


class Task(enum.Enum):
    REGRESSION = "regression"
    CLASSIFICATION = "classification"
    OUTLIER = "outlier"


class LabelRule(enum.Enum):
    """How a classifier's label follows from its margin (after the base score, before the link)."""

    ARGMAX = "argmax"  # first maximal column per output group
    POSITIVE = "positive"  # binary, one margin column per output: class 1 iff m > cutoff
    NON_NEGATIVE = "non_negative"  # binary, one margin column per output: class 1 iff m >= cutoff


class CategoryCodes(enum.Enum):
    """How a categorical node turns an input value into the category code it looks up."""

    EXACT = "exact"  # scikit-learn: the value itself; it matches a category equal to it
    TRUNCATE = "truncate"  # LightGBM: int(x) (toward zero); a negative result matches nothing
    NONNEGATIVE_TRUNCATE = "nonnegative_truncate"  # XGBoost: x < 0 matches nothing, else int(x)


def category_codes(x: np.ndarray, rule: CategoryCodes) -> np.ndarray:
    """The codes ``rule`` gives float values ``x`` (NaN stays NaN; -1 for a value that matches
    no category)."""
    if rule is CategoryCodes.EXACT:
        return x
    with np.errstate(invalid="ignore"):
        invalid = x <= -1 if rule is CategoryCodes.TRUNCATE else x < 0
        return np.where(invalid, -1.0, np.trunc(x) + 0.0)  # + 0.0: -0.0 becomes 0.0


def named_codes(x: np.ndarray, rule: CategoryCodes, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The codes ``rule`` gives float values ``x`` of a column of ``n`` named categories, and
    where each names one (a whole code from 0 to n - 1)."""
    codes = category_codes(np.asarray(x, np.float64), rule)
    with np.errstate(invalid="ignore"):
        return codes, (codes >= 0) & (codes < n) & (codes == np.trunc(codes))

