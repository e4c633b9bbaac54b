"""XGBoost's objectives: the task, link and label rule each means, its base score in margin
space, and the objective a model's learner names (as XGBClassifier reads it)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from tree2mat.errors import ModelFileError, UnsupportedModelError
from tree2mat.frontends.xgboost._fields import F32, _field
from tree2mat.ir.core import LabelRule, Link, Task
from tree2mat.ir.evaluate import first_float


def binary_cutoff() -> float:
    """The smallest float32 margin whose XGBoost probability ``1 / (1 + exp(-m))`` (float32)
    exceeds 0.5: XGBClassifier labels 1 exactly there. Near 0 the float32 sigmoid rounds to 0.5
    for margins up to about 1.2e-7."""
    def positive(m: float) -> bool:
        with np.errstate(over="ignore"):
            return bool(np.float32(1) / (np.float32(1) + np.exp(-np.float32(m))) > np.float32(0.5))

    return first_float(positive, 0.0, 1.0, np.float32)


@dataclass(frozen=True)
class Objective:
    task: Task
    link: Link
    base: str  # how base_score maps to margin space: "identity", "logit", "log"
    label: tuple[LabelRule, float] | None = None  # binary: class 1 iff margin > (>=) the cutoff


_REG = Objective(Task.REGRESSION, Link.IDENTITY, "identity")
_EXP = Objective(Task.REGRESSION, Link.EXP, "log")

OBJECTIVES: dict[str, Objective] = {
    "reg:squarederror": _REG,
    "reg:squaredlogerror": _REG,
    "reg:pseudohubererror": _REG,
    "reg:absoluteerror": _REG,
    "reg:quantileerror": _REG,
    "reg:logistic": Objective(Task.REGRESSION, Link.SIGMOID, "logit"),
    "count:poisson": _EXP,
    "reg:gamma": _EXP,
    "reg:tweedie": _EXP,
    "survival:cox": _EXP,
    "survival:aft": _EXP,
    # XGBClassifier: class 1 where sigmoid(m) (float32) > 0.5, where m > 0.5, where m > 0.
    "binary:logistic": Objective(Task.CLASSIFICATION, Link.LOGISTIC, "logit", (LabelRule.NON_NEGATIVE, binary_cutoff())),
    "binary:logitraw": Objective(Task.CLASSIFICATION, Link.MARGIN, "identity", (LabelRule.POSITIVE, 0.5)),
    "binary:hinge": Objective(Task.CLASSIFICATION, Link.STEP, "identity", (LabelRule.POSITIVE, 0.0)),
    "multi:softprob": Objective(Task.CLASSIFICATION, Link.SOFTMAX, "identity"),
    "multi:softmax": Objective(Task.CLASSIFICATION, Link.SOFTMAX, "identity"),
    "rank:pairwise": _REG,
    "rank:ndcg": _REG,
    "rank:map": _REG,
}


def _objective(learner: Any, classes: Any, name: str) -> tuple[str, Objective]:
    """The objective the learner names and what it means; for a classifier (``classes`` given),
    what XGBClassifier makes of it."""
    objective = _field(_field(learner, "objective", name), "name", name)
    if not isinstance(objective, str):
        raise ModelFileError(f"{name}: ill-formed XGBoost model: objective name must be a string")
    if objective not in OBJECTIVES:
        raise UnsupportedModelError(
            f"{name}: XGBoost objective {objective!r} is not supported yet; supported: {', '.join(OBJECTIVES)}"
        )
    obj = OBJECTIVES[objective]
    if classes is not None and obj.task is Task.REGRESSION:
        # XGBClassifier reads any objective's predictions as binary:logistic's: predict_proba is
        # [1 - p, p] and predict is p > 0.5. Only reg:logistic's p is a probability.
        if objective != "reg:logistic":
            raise UnsupportedModelError(f"{name}: a classifier with the regression objective {objective!r} predicts no probabilities; not supported")
        obj = OBJECTIVES["binary:logistic"]
    return objective, obj


def _margin_base(base: np.ndarray, how: str) -> np.ndarray:
    """XGBoost's ProbToMargin in float32 (``-logf(1.0f / p - 1.0f)``, ``logf(p)``), with a
    correctly rounded logf (numpy's float32 log may be an ulp off)."""
    def logf(x: np.float32) -> np.float32:
        return np.float32(math.log(float(x))) if x > 0 else np.float32(np.nan)

    out = []
    for p in base.astype(F32):
        if how == "logit":
            out.append(-logf(np.float32(np.float32(1) / p - np.float32(1))) if 0 < p < 1 else np.float32(np.nan))
        elif how == "log":
            out.append(logf(p))
        else:
            out.append(p)
    result = np.asarray(out, F32)
    if not np.all(np.isfinite(result)):
        raise UnsupportedModelError(f"base_score {base.tolist()} has no finite margin")
    return result
