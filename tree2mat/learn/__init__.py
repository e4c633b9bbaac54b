"""End-to-end fine-tuning of decision trees and forests (Hehn, Kooij, Hamprecht, "End-to-End
Learning of Decision Trees and Forests", section 2): a fitted scikit-learn classification or
regression tree or forest is made probabilistic, its splits and leaves are tuned together by EM with the splits'
steepness annealed, and the result is hardened back into a deterministic tree2mat IR.

The probabilistic tree (section 2.1-2.2). Node i of a tree computes ``f_i(z) = w_i . z - t_i``
on the standardized row ``z = (x - mean) / scale`` (the fitting rows' mean and standard
deviation; a constant feature's scale is 1) and sends the row right with probability
``sigma(gamma f_i)`` — the paper's eq. 3 and 5 with ``beta_i = (w_i, -t_i)``; right, so that
``gamma -> infinity`` goes left iff ``w_i . z <= t_i``, the IR's test. A leaf's path probability
``mu_l`` is the product over its path (eq. 1), the tree's class probabilities
``sum_l pi_l mu_l`` (eq. 2), a forest's their mean (section 2.7). A regression tree's leaves are
Gaussians ``N(y; m_l, sigma^2 I)`` (:mod:`~tree2mat.learn.em` derives their EM), its prediction
``sum_l m_l mu_l``.

Training (section 2.3), per epoch and tree: the E-step's responsibilities ``h[n, l]`` (eq. 10);
the split parameters by Adam steps on shuffled batches of eq. 14, ``sum_n sum_l h[n, l] log
mu_l(x_n)``, with ``h`` of the batch at the epoch's parameters; then the leaves in closed form
(eq. 13; Gaussian leaves: the responsibility-weighted means of the targets and the variance) from
``h`` of every fitting row; then ``gamma += steepness_increase``. The gradient of
eq. 14 is analytic (:func:`split_objective`): with ``R[n, i]`` and ``L[n, i]`` the responsibility
of the leaves right and left of node i, ``dJ/df[n, i] = gamma (R - (R + L) sigma(gamma f))``.

Start: the scikit-learn model's tree (its structure is kept: no node is added or removed), each
split ``x_f <= c`` as ``w_i = e_f``, ``t_i = (c - mean_f) / scale_f``, each leaf's class
distribution as ``pi_l``; or, with ``grow``, that tree grown further by the paper's greedy
algorithm (section 2.5, :mod:`~tree2mat.learn.growth`: new oblique stumps trained one by one on
the rows that reach them), the start's leaves its first candidates.
``oblique=True`` tunes every weight of ``w_i`` (the splits become oblique);
``oblique=False`` keeps ``w_i = e_f`` and tunes ``t_i`` alone (axis-aligned).

Hardening (``gamma -> infinity``, :func:`harden`): the scaling is folded back in — the weights
``a = w / scale`` rounded to float32, the threshold from those rounded weights ``c = t + sum_f
a_f mean_f``, stored as the largest float32 at most ``c`` (a float32 sum ``s`` has ``s <= c``
exactly when ``s <=`` that float32) — into an IR whose source dtype is float32: oblique nodes test
a projection of the non-zero float32 weights (summed term by term in float32, as the IR defines);
axis-aligned nodes their feature. The leaves hold the tuned ``pi_l``, averaged over the trees
(MEAN: a random forest's aggregation; a leaf with no responsibility keeps its distribution). The
deterministic model is measured as hardened, by the IR's reference evaluator, never assumed to
equal the probabilistic one.

Decided where the paper is silent or differs: the rows must be finite (no NaN or +-inf: the model
was not fitted for missing values; the IR says ``accepts_nan=False``); a NaN projection (``inf -
inf`` on an infinite row) goes to the side with more training responsibility (``default_left``).
Trees and forests of averaged leaves only (boosted models are refused). A forest's trees are
tuned each on all fitting rows, independently (section 2.7), on every feature, or, with
``features_per_split=K``, each oblique split on its own feature and K - 1 others drawn per split
(the paper samples a feature subset per split; the weights outside stay exactly 0).

The package: :mod:`~tree2mat.learn.soft` (the probabilistic tree), :mod:`~tree2mat.learn.em` (the
E- and M-steps of both leaf models), :mod:`~tree2mat.learn.training`
(:func:`learn`: EM and the annealing, the accuracies of each epoch), :mod:`~tree2mat.learn.steps` (one EM
epoch of one tree), :mod:`~tree2mat.learn.growth` (greedy growth), :mod:`~tree2mat.learn.hardening`
(:func:`harden`) and :mod:`~tree2mat.learn.checks` (the options, the model and the rows it takes).
"""

from tree2mat.learn.checks import check_options
from tree2mat.learn.em import (
    VARIANCE_FLOOR,
    e_step,
    gaussian_responsibilities,
    leaf_means,
    leaf_update,
    leaf_variance,
    log_likelihood,
    m_step,
    responsibilities,
    start_variance,
)
from tree2mat.learn.growth import GROW_ATTEMPTS, GROW_EPOCHS, Growth, GrowthStep
from tree2mat.learn.hardening import harden
from tree2mat.learn.soft import (
    SoftTree,
    feature_subsets,
    forest_proba,
    log_paths,
    log_sigmoid,
    sigmoid,
    split_objective,
    standardization,
    start_tree,
    tree_proba,
)
from tree2mat.learn.steps import ADAM_BETAS, ADAM_EPSILON
from tree2mat.learn.training import (
    BATCH_SIZE,
    EPOCHS,
    LEARNING_RATE,
    STEEPNESS,
    STEEPNESS_INCREASE,
    Epoch,
    Learned,
    learn,
)

__all__ = [
    "ADAM_BETAS", "ADAM_EPSILON", "BATCH_SIZE", "EPOCHS", "GROW_ATTEMPTS", "GROW_EPOCHS", "LEARNING_RATE", "STEEPNESS", "STEEPNESS_INCREASE",
    "VARIANCE_FLOOR", "Epoch", "Growth", "GrowthStep", "Learned", "SoftTree", "check_options", "e_step", "feature_subsets", "forest_proba",
    "gaussian_responsibilities", "harden", "learn", "leaf_means", "leaf_update", "leaf_variance", "log_likelihood", "log_paths", "log_sigmoid", "m_step",
    "responsibilities", "sigmoid", "split_objective", "standardization", "start_tree", "start_variance", "tree_proba",
]
