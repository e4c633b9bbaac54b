"""Attention-based random forests (ABRF-1, -2, -3: Utkin & Konstantinov, "Attention-based Random
Forest and Contamination Model", sections 3-5): a forest whose trees are weighted per row.

For tree k a row x falls into one leaf. ``A_k(x)`` is the mean of the training rows (the rows
given to :func:`fit`) that fall into that leaf (eq. 5), ``B_k(x)`` the leaf's value, the tree's
own prediction (eq. 6). The prediction is ``sum_k alpha_k(x) B_k(x)`` with (eq. 14, 16)

    alpha_k(x) = (1 - epsilon) softmax_k(-||x - A_k(x)||^2 / (2 tau)) + epsilon w_k,

(each row's alpha, [N, T]: :meth:`AttentionForest.attention`; a graph's ``tree_weights`` output)
``w`` on the unit simplex, fitted to the training rows by the quadratic program (15) (L2 loss)
or the linear program (20)-(22) (L1 loss). The paper prints the softmax's argument without the
minus sign; its text (nearer leaves weigh more) needs it, and so it is here. ABRF-2 (eq. 23)
replaces tau and w by tree scales v (simplex) and feature weights z: softmax_k(-||(x - A_k(x)) o
z||^2 v_k / 2); ABRF-3 (eq. 24) mixes it with epsilon w; both by gradients. A classifier's
``B_k(x)`` is the leaf's class-probability vector and its targets one-hot (section 5, eq. 30).

Decided where the paper is silent:
- A missing coordinate (NaN, in the row or in a leaf's mean) adds nothing to the distance: the
  sum runs over the coordinates both hold. The leaf means are means of the values present.
- A leaf no training row reached has no mean: its tree takes no part in the softmax for the rows
  that reach that leaf (the others share it). So does a tree whose squared distance to the row
  is beyond float32's largest number, :data:`FAR` (a coordinate at +-inf, or some 1e19 from the
  mean: where float32, which the graph computes in, overflows). Where no tree of a row takes
  part, the softmax weighs all trees alike. The contamination part ``epsilon w`` is unaffected.

This package is the reference: the model in numpy (:mod:`~tree2mat.attention.model`), fitted
(:mod:`~tree2mat.attention.fitting`) with Clarabel (the L2 programs), HiGHS (the L1 ones; both
:mod:`~tree2mat.attention.solvers`) and scipy's L-BFGS-B (ABRF-2/3:
:mod:`~tree2mat.attention.gradient`), and its file (:mod:`~tree2mat.attention.files`). Supported:
scikit-learn's random-forest and extra-trees regressors and classifiers (forests that average one
output or one target's class probabilities). Its ONNX graph: :mod:`tree2mat.attention.graph`.
"""

from tree2mat.attention.files import as_forest, from_dict, load
from tree2mat.attention.fitting import EPSILON_GRID, TAU_FACTORS, Choice, Selection, check_variant, fit, held_out, objective, scores, select
from tree2mat.attention.gradient import GRADIENT_ITERATIONS, GRADIENT_ROUNDS
from tree2mat.attention.model import FAR, FORMAT_VERSION, LOSSES, VARIANTS, AttentionForest, leaf_means
from tree2mat.attention.solvers import QP_TOLERANCE

__all__ = [
    "EPSILON_GRID", "FAR", "FORMAT_VERSION", "GRADIENT_ITERATIONS", "GRADIENT_ROUNDS", "LOSSES", "QP_TOLERANCE", "TAU_FACTORS", "VARIANTS",
    "AttentionForest", "Choice", "Selection", "as_forest", "check_variant", "fit", "from_dict", "held_out", "leaf_means", "load",
    "objective", "scores", "select",
]
