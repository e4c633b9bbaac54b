"""``--form auto``: the fastest exact form that fits a memory budget, chosen by a cost model.

The choice must be deterministic (same model, same bytes), so it is not timed at convert time:
each candidate (an exact :class:`FormSpec` with ``us_per_row``) estimates its time per row from
the model's sizes with constants fitted to measurements (benchmarks/form_speed.py, recorded in
benchmarks/RESULTS.md), and says what memory it needs (``constant_bytes``, ``bytes_per_row``):

- the dense matrix forms (sign, bitvector): ``a * nodes + b * products``, summed over the size
  groups the trees are padded in (``T_g (I_g + L_g)``: per-node and per-leaf passes;
  ``T_g I_g L_g``: the MatMul);
- traverse: ``c * levels + d * T``, levels being the sum of the trees' depths (a few gathers
  per tree and level, then per tree its leaf and value);
- hierarchical: per stage and tree, and per product of a stage's test bits with its template
  (benchmarks/latency_fit.py fits it, and every form's one-row model).

Auto picks the fastest candidate whose constants and intermediates for BUDGET_ROWS rows fit the
budget, for runs of ``--batch-hint`` rows (default BUDGET_ROWS): a run of b rows is estimated at
``call_us + (b - 1) * us_per_row``, ``call_us`` being one row's run (the operators' overhead,
fitted to batch-1 latencies; traverse's ``run_us`` follows the walk its graph takes at b rows).
At one row the matrix forms' few operators can beat the walk's many on small models (up to 30
trees). In runs of 10 000 rows the walk measured fastest on every model of 50 trees or more (3
to 30 times the matrix forms), and its memory is the smallest, so auto picks ``traverse`` nearly
always there; the matrix forms matter where it does not fit, and at a few rows (on models of up
to 30 trees ``sign`` or ``bitvector`` can be faster at any batch, which the model misses:
benchmarks/latency_fit_check.json). The constants are the CPU's (no GPU was available to fit CUDA ones): the choice is the
same on every device.

``--target RUNTIME`` narrows the candidates to the forms exact there (:func:`runs_on`: the
runtime matrix's claims, ``FormSpec.proven_on``; ``cuda``: the forms whose row work all runs
on onnxruntime's CUDA provider, ``FormSpec.devices``), at the graph's opset (a form a runtime
runs exactly only from an opset on, ``FormSpec.proven_from``, is a candidate there from that
opset). Without one, the candidates are the portable forms, proven on every runtime of the
matrix at the graph's opset: a graph that is exact wherever it goes.
The estimates are onnxruntime's CPU ones for every target (no other runtime's speed is modeled).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tree2mat.errors import OptionError, UnsupportedModelError
from tree2mat.forms import FORMS, FormSpec, _stack
from tree2mat.forms._graph import GraphOptions
from tree2mat.forms._spec import ALL_RUNTIMES
from tree2mat.ir import limits
from tree2mat.ir.core import Ensemble
from tree2mat.ir.limits import Declared

#: Rows per run the memory budget is checked for (constants + this many rows' intermediates).
BUDGET_ROWS = 10_000
#: Default memory budget, bytes.
DEFAULT_MAX_MEMORY = 4 * 2**30
#: Rows per run auto picks the fastest form for, unless told (``--batch-hint``).
DEFAULT_BATCH_HINT = BUDGET_ROWS

@dataclass(frozen=True)
class Estimate:
    form: str
    us_per_row: float  # at runs of the hinted batch size
    memory_bytes: int  # constants + BUDGET_ROWS rows of intermediates
    fits: bool


@dataclass(frozen=True)
class Choice:
    form: str
    reason: str
    estimates: tuple[Estimate, ...]


#: ``--target``'s choices: the runtimes of the runtime matrix, and ``cuda`` (onnxruntime's CUDA
#: provider).
TARGETS = (*ALL_RUNTIMES, "cuda")


def check_target(target: str | None) -> str | None:
    """``target`` if it is one of TARGETS (or None: no target); else an OptionError."""
    if target is not None and target not in TARGETS:
        raise OptionError(f"--target {target!r}: choose one of {', '.join(TARGETS)}")
    return target


def _runtimes(target: str | None) -> tuple[str, ...]:
    """The runtimes a graph for ``target`` must be proven on: every one of the matrix for None
    (a portable graph); onnxruntime for ``cuda``."""
    return ALL_RUNTIMES if target is None else ("onnxruntime",) if target == "cuda" else (target,)


def lowest_opset(spec: FormSpec, target: str | None, ens: Ensemble | None = None) -> int:
    """The lowest opset whose graphs of ``spec`` of ``ens`` (None: of any model) are proven on
    ``target`` (see :func:`runs_on`; 0: any), from ``FormSpec.proven_from``."""
    return max(spec.lowest_opset(runtime, ens) for runtime in _runtimes(target))


def runs_on(spec: FormSpec, target: str | None, opset: int | None = None, ens: Ensemble | None = None) -> bool:
    """Whether the exact form ``spec``'s graphs of ``opset`` of ``ens`` (None: of any model) are
    proven exact on ``target``: a runtime its spec names in ``proven_on`` (from the opset of
    ``proven_from`` there, if any); ``cuda``, onnxruntime with every row-touching node on the CUDA
    provider (``devices``); None, every runtime of the matrix (a portable graph). ``opset`` None:
    at some opset (the lowest, :func:`lowest_opset`)."""
    if not spec.exact or (target == "cuda" and "cuda" not in spec.devices):
        return False
    at = lowest_opset(spec, target, ens) if opset is None else opset
    return all(spec.proven(runtime, at, ens) for runtime in _runtimes(target))


def candidates(target: str | None = None, opset: int | None = None, ens: Ensemble | None = None) -> list[FormSpec]:
    """The forms auto picks from for ``target`` (None: the portable ones) at ``opset`` (None:
    any) for ``ens`` (None: any model): the exact ones with a cost model that :func:`runs_on`
    it, by name (ties go to the first)."""
    return sorted(
        (spec for spec in FORMS.values() if spec.us_per_row is not None and runs_on(spec, target, opset, ens)), key=lambda spec: spec.name,
    )


def estimate(
    spec: FormSpec, ens: Ensemble, max_memory: int = DEFAULT_MAX_MEMORY, batch_hint: int = DEFAULT_BATCH_HINT,
    opts: GraphOptions | None = None,
) -> Estimate:
    """The form's estimated time per row in runs of ``batch_hint`` rows (its graph under
    ``opts``, where its cost depends on them; None: the defaults), its memory (constants +
    BUDGET_ROWS rows), and whether it fits ``max_memory``."""
    constants = spec.constant_bytes(ens)
    memory = constants + spec.bytes_per_row(ens) * BUDGET_ROWS
    fits = memory <= max_memory and constants <= spec.constant_limit()
    batch_hint = check_batch_hint(batch_hint)
    us = float("nan")
    if spec.run_us is not None:
        us = spec.run_us(ens, batch_hint) / batch_hint
    elif spec.us_per_row is not None:
        kw = {"opts": opts} if spec.cost_takes_options else {}
        per_row = spec.us_per_row(ens, **kw)
        call = spec.call_us(ens, **kw) if spec.call_us is not None else per_row  # (no latency model: as at any batch)
        us = (call + (batch_hint - 1) * per_row) / batch_hint
    return Estimate(spec.name, us, memory, fits)


def check_batch_hint(batch_hint: int | None) -> int:
    """``batch_hint`` if it is a whole number of rows >= 1 (None: DEFAULT_BATCH_HINT); else an
    OptionError."""
    if batch_hint is None:
        return DEFAULT_BATCH_HINT
    if isinstance(batch_hint, bool) or not isinstance(batch_hint, (int, np.integer)) or batch_hint < 1:
        raise OptionError(f"--batch-hint must be a whole number of rows >= 1, got {batch_hint!r}")
    return int(batch_hint)


def check_budget(spec: FormSpec, ens: Ensemble, max_memory: int = DEFAULT_MAX_MEMORY, target: str | None = None) -> None:
    """Refuse an explicitly asked form whose graph would need more than ``max_memory`` for
    BUDGET_ROWS rows, before it is built; the message names an exact form that fits (on
    ``target``), if any."""
    mine = estimate(spec, ens, max_memory)
    if mine.memory_bytes <= max_memory:
        return
    try:
        alternative = choose(ens, max_memory, target=target) if spec.exact else None
    except UnsupportedModelError:
        alternative = None
    fix = (
        f"--form {alternative.form} fits (about {gib(next(e.memory_bytes for e in alternative.estimates if e.form == alternative.form))}; "
        "--form auto picks it), or raise --max-memory"
        if alternative is not None else "no exact form fits; raise --max-memory, or train with fewer trees or leaves"
    )
    raise UnsupportedModelError(
        f"--form {spec.name} needs about {gib(mine.memory_bytes)} (constants and intermediates for {BUDGET_ROWS} rows), "
        f"over --max-memory {gib(max_memory)}: {fix}"
    )


def choose(
    ens: Ensemble, max_memory: int = DEFAULT_MAX_MEMORY, batch_hint: int = DEFAULT_BATCH_HINT, target: str | None = None,
    opts: GraphOptions | None = None,
) -> Choice:
    """The exact form auto picks for ``ens`` within ``max_memory`` bytes, for runs of
    ``batch_hint`` rows, among those exact on ``target`` (None: the portable forms), its graph
    built with ``opts`` (None: the defaults), and why."""

    opset = (opts or GraphOptions()).opset
    estimates = [estimate(spec, ens, max_memory, batch_hint, opts) for spec in candidates(check_target(target), opset, ens)]
    fitting = [e for e in estimates if e.fits]
    if not fitting:
        least = min(estimates, key=lambda e: e.memory_bytes)
        raise _budget_error(least, max_memory)
    best = min(fitting, key=lambda e: e.us_per_row)
    others = [e for e in estimates if e is not best]
    parts = [
        f"{e.form} {e.us_per_row:.3g} us" if e.fits else f"{e.form} over the memory budget ({gib(e.memory_bytes)})"
        for e in others
    ]
    where = "every runtime of the matrix" if target is None else target
    if any(lowest_opset(spec, target, ens) > opset for spec in FORMS.values() if spec.us_per_row is not None and runs_on(spec, target)):
        where += f" at opset {opset}"
    reason = (
        f"fastest exact form on {where} in runs of {batch_hint} row{'s' * (batch_hint != 1)} within {gib(max_memory)} for {BUDGET_ROWS} rows: "
        f"estimated {best.us_per_row:.3g} us per row on the CPU, {gib(best.memory_bytes)} (vs {'; '.join(parts)})"
    )
    return Choice(best.form, reason, tuple(estimates))


def declared_check(max_memory: int, rows: int = BUDGET_ROWS, budget: str = "--max-memory") -> Callable[[Declared, str], None]:
    """The check a model's declared sizes pass before they are read into the IR
    (:func:`tree2mat.ir.limits.checking`): reading it within half this machine's memory, and the
    least any form's graph needs for ``rows`` rows (:func:`tree2mat.forms._stack.floor_bytes`)
    within ``max_memory`` (as messages name it: ``budget``)."""

    def check(sizes: Declared, name: str) -> None:
        limits.check_reading(sizes, name)
        least = _stack.floor_bytes(sizes, rows)
        if least > max_memory:
            raise UnsupportedModelError(
                f"{name}: declares {sizes.describe()}: any graph of it needs at least {gib(least)} for {rows} "
                f"row{'s' * (rows != 1)}, over {budget} {gib(max_memory)}; refused before anything of it was built"
            )

    return check


def reading_check() -> Callable[[Declared, str], None]:
    """The check of a model read for anything but building its graph (``load``, ``verify``,
    ``inspect``, ``bench``): reading it, and one row of its smallest graph, within half this
    machine's memory."""
    return declared_check(limits.physical_memory() // 2, rows=1, budget="half this machine's memory,")


def gib(n: int) -> str:
    """A size in bytes for messages: GiB, MiB or KiB."""
    if n >= 2**30:
        return f"{n / 2**30:.2f} GiB"
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB"


def _budget_error(least: Estimate, max_memory: int) -> Exception:
    return UnsupportedModelError(
        f"no exact form fits --max-memory {gib(max_memory)}: the smallest, {least.form}, needs about "
        f"{gib(least.memory_bytes)} for {BUDGET_ROWS} rows; raise --max-memory"
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
