"""``--form auto``: the fastest exact form that fits a memory budget, chosen by a cost model.

The choice must be deterministic (same model, same bytes), so it is not timed at convert time:
each exact form's time per row is estimated from the padded sizes with constants fitted to
measurements (benchmarks/form_speed.py, recorded in benchmarks/RESULTS.md):

- dense matrix forms (sign, bitvector): ``a * nodes + b * products``, summed over the size
  groups the trees are padded in (``T_g (I_g + L_g)``: per-node and per-leaf passes;
  ``T_g I_g L_g``: the MatMul);
- traverse: ``c * levels + d * T``, levels being the sum of the trees' depths (a few gathers
  per tree and level: the walk takes each tree as deep as it goes, no deeper; then per tree
  its leaf and value).

On the CPU (2-core AVX-512, onnxruntime 1.31) the walk has been the fastest form on all nine
models measured since its gather layout was reworked (issue 5: 3 to 30 times the matrix forms),
so auto picks ``traverse`` wherever it fits the budget, which is nearly always (its memory is the
smallest). The matrix forms' constants were fitted on their issue-4 layout; their new layout is
faster (1.3-3x), so they overestimate them (not refitted yet); they matter where traverse does
not fit. The estimates are listed for all
three. No GPU was available to fit CUDA constants: the choice is the CPU one on every device.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tree2mat.errors import OptionError, UnsupportedModelError
from tree2mat.forms import _exact, _layout
from tree2mat.ir.core import Ensemble

#: Rows per run the memory budget is checked for (constants + this many rows' intermediates).
BUDGET_ROWS = 10_000
#: Default memory budget, bytes.
DEFAULT_MAX_MEMORY = 4 * 2**30
#: Cost-model constants, microseconds (benchmarks/form_speed.py fits them).
DENSE_PER_NODE_US = {"sign": 0.00455, "bitvector": 0.00374}
DENSE_PER_PRODUCT_US = {"sign": 1.19e-5, "bitvector": 1.54e-5}
TRAVERSE_PER_LEVEL_US = 0.00324
TRAVERSE_PER_TREE_US = 0.00192


@dataclass(frozen=True)
class Estimate:
    form: str
    us_per_row: float
    memory_bytes: int  # constants + BUDGET_ROWS rows of intermediates
    fits: bool


@dataclass(frozen=True)
class Choice:
    form: str
    reason: str
    estimates: tuple[Estimate, ...]


def estimated_us_per_row(form: str, ens: Ensemble) -> float:
    if form == "traverse":
        return TRAVERSE_PER_LEVEL_US * tree_levels(ens) + TRAVERSE_PER_TREE_US * ens.n_trees
    nodes, products = _exact.padded_work(ens)
    return DENSE_PER_NODE_US[form] * nodes + DENSE_PER_PRODUCT_US[form] * products


def tree_levels(ens: Ensemble) -> int:
    """The levels the traverse form walks: every tree's depth (at least 1), summed."""
    return int(np.maximum(ens.tree_depths(), 1).sum())


def estimate(form: str, ens: Ensemble, max_memory: int = DEFAULT_MAX_MEMORY) -> Estimate:
    """``form``'s estimated time per row and memory (constants + BUDGET_ROWS rows), and whether
    it fits ``max_memory``."""
    from tree2mat.forms import FORMS

    spec = FORMS[form]
    constants = spec.constant_bytes(ens)
    memory = constants + spec.bytes_per_row(ens) * BUDGET_ROWS
    fits = memory <= max_memory and constants <= _layout.constant_limit(form)
    us = estimated_us_per_row(form, ens) if form in DENSE_PER_NODE_US or form == "traverse" else float("nan")
    return Estimate(form, us, memory, fits)


def check_budget(form: str, ens: Ensemble, max_memory: int = DEFAULT_MAX_MEMORY) -> None:
    """Refuse an explicitly asked form whose graph would need more than ``max_memory`` for
    BUDGET_ROWS rows, before it is built; the message names an exact form that fits, if any."""
    from tree2mat.forms import FORMS

    mine = estimate(form, ens, max_memory)
    if mine.memory_bytes <= max_memory:
        return
    try:
        alternative = choose(ens, max_memory) if FORMS[form].exact else None
    except UnsupportedModelError:
        alternative = None
    fix = (
        f"--form {alternative.form} fits (about {_gib(next(e.memory_bytes for e in alternative.estimates if e.form == alternative.form))}; "
        "--form auto picks it), or raise --max-memory"
        if alternative is not None else "no exact form fits; raise --max-memory, or train with fewer trees or leaves"
    )
    raise UnsupportedModelError(
        f"--form {form} needs about {_gib(mine.memory_bytes)} (constants and intermediates for {BUDGET_ROWS} rows), "
        f"over --max-memory {_gib(max_memory)}: {fix}"
    )


def choose(ens: Ensemble, max_memory: int = DEFAULT_MAX_MEMORY) -> Choice:
    """The exact form auto picks for ``ens`` within ``max_memory`` bytes, and why."""

    estimates = [estimate(name, ens, max_memory) for name in ("bitvector", "sign", "traverse")]
    fitting = [e for e in estimates if e.fits]
    if not fitting:
        least = min(estimates, key=lambda e: e.memory_bytes)
        raise _budget_error(least, max_memory)
    best = min(fitting, key=lambda e: e.us_per_row)
    others = [e for e in estimates if e is not best]
    parts = [
        f"{e.form} {e.us_per_row:.3g} us" if e.fits else f"{e.form} over the memory budget ({_gib(e.memory_bytes)})"
        for e in others
    ]
    reason = (
        f"fastest exact form within {_gib(max_memory)} for {BUDGET_ROWS} rows: estimated {best.us_per_row:.3g} us "
        f"per row on the CPU, {_gib(best.memory_bytes)} (vs {'; '.join(parts)})"
    )
    return Choice(best.form, reason, tuple(estimates))


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def _budget_error(least: Estimate, max_memory: int) -> Exception:
    return UnsupportedModelError(
        f"no exact form fits --max-memory {_gib(max_memory)}: the smallest, {least.form}, needs about "
        f"{_gib(least.memory_bytes)} for {BUDGET_ROWS} rows; raise --max-memory"
    )


def parse_memory(text: str) -> int:
    """Bytes from ``4G``, ``512M``, ``1.5GiB``, ``2000000`` (K/M/G/T are powers of 1024)."""
    units = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    s = str(text).strip().upper().removesuffix("B").removesuffix("I")
    unit = s[-1:] if s[-1:] in units and s[-1:] != "" and not s[-1:].isdigit() else ""
    number = s[: len(s) - len(unit)].strip()
    try:
        value = float(number) * units[unit]
    except ValueError:
        raise OptionError(f"--max-memory {text!r}: expected a size such as 4G, 512M or 2000000") from None
    if not value > 0 or value != value or value == float("inf"):
        raise OptionError(f"--max-memory {text!r}: must be a positive size")
    return int(value)
